# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``stored.py``'s record decoder (issue 29): a pull body (or any buffer of
commit-log records) read field by field from C, the ``MessageExt`` filled through the same slot
setters the pure decoder uses.

Only what a well-formed record needs is decoded here. Anything unusual (a short buffer, a bad
magic or length, text that is not UTF-8, a bad host, ``verify_crc``, a compressed body to
inflate, a buffer that is not contiguous) is handed to the pure ``decode_stored`` bound with
``bind``, which decodes it or raises exactly as without this module; tests/protocol/test_compiled.py
demands the same messages and errors from both.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef object _decode_fallback = None
cdef object _string_to_properties = None
cdef object _unpack_host = None
cdef object _new_message = None
cdef tuple _setters = ()

cdef int _MESSAGE_MAGIC = -626843481
cdef int _MIN_STORED_SIZE = 91
cdef int _V6_EXTRA = 12
cdef int _COMPRESSED = 1


def bind(decode_fallback, string_to_properties, unpack_host, new_message, setters):
    """The pure ``decode_stored`` this module hands the unusual to, the property parse and host
    unpacking it calls, ``MessageExt``'s constructor without ``__init__`` and its 16 slot setters
    (topic, body, flag, properties, queue_id, store_size, queue_offset, sys_flag, born_timestamp,
    born_host, store_timestamp, store_host, commit_log_offset, body_crc, reconsume_times,
    prepared_transaction_offset)."""
    global _decode_fallback, _string_to_properties, _unpack_host, _new_message, _setters
    _decode_fallback = decode_fallback
    _string_to_properties = string_to_properties
    _unpack_host = unpack_host
    _new_message = new_message
    _setters = tuple(setters)
    if len(_setters) != 16:
        raise ValueError("decode_stored needs MessageExt's 16 slot setters")


cdef inline int _i32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3])


cdef inline long long _i64(const unsigned char* p) noexcept nogil:
    return <long long>((<unsigned long long><unsigned int>_i32(p) << 32) | <unsigned int>_i32(p + 4))


cdef inline int _i16(const unsigned char* p) noexcept nogil:
    return <short>((p[0] << 8) | p[1])


cdef object _decode(const unsigned char* data, Py_ssize_t size, Py_ssize_t offset, bint decompress):
    """The record at ``offset``, or None to hand back to the pure decoder."""
    cdef Py_ssize_t available = size - offset
    cdef const unsigned char* r
    cdef int total, sys_flag, index, born, store, body_len, topic_len, props_len
    cdef Py_ssize_t pos, end
    cdef object body, topic, properties, born_host, store_host, msg
    cdef tuple s
    if offset < 0 or available < 8:
        return None
    r = data + offset
    total = _i32(r)
    if _i32(r + 4) != _MESSAGE_MAGIC or not (_MIN_STORED_SIZE <= total <= available):
        return None
    sys_flag = _i32(r + 36)
    index = (sys_flag >> 4) & 3
    born = 20 if index & 1 else 8
    store = 20 if index & 2 else 8
    if total < _MIN_STORED_SIZE + ((index & 1) + (index >> 1)) * _V6_EXTRA:
        return None
    if decompress and sys_flag & _COMPRESSED:
        return None
    end = total
    pos = 72 + born + store
    body_len = _i32(r + 68 + born + store)
    if not (0 <= body_len <= end - pos - 3):
        return None
    body = PyBytes_FromStringAndSize(<const char*>r + pos, body_len)
    pos += body_len
    topic_len = r[pos]
    pos += 1
    if topic_len > 127 or pos + topic_len + 2 > end:
        return None
    try:
        topic = PyUnicode_DecodeUTF8(<const char*>r + pos, topic_len, NULL)
    except UnicodeDecodeError:
        return None
    pos += topic_len
    props_len = _i16(r + pos)
    pos += 2
    if pos + props_len != end:
        return None
    if props_len:
        try:
            properties = _string_to_properties(PyUnicode_DecodeUTF8(<const char*>r + pos, props_len, NULL))
        except UnicodeDecodeError:
            return None
    else:
        properties = {}
    try:
        born_host = _unpack_host(PyBytes_FromStringAndSize(<const char*>r + 48, born))
        store_host = _unpack_host(PyBytes_FromStringAndSize(<const char*>r + 56 + born, store))
    except Exception:
        return None  # the pure decoder names the field
    s = _setters
    msg = _new_message()
    s[0](msg, topic)
    s[1](msg, body)
    s[2](msg, _i32(r + 16))  # FLAG
    s[3](msg, properties)
    s[4](msg, _i32(r + 12))  # QUEUEID
    s[5](msg, total)
    s[6](msg, _i64(r + 20))  # QUEUEOFFSET
    s[7](msg, sys_flag)
    s[8](msg, _i64(r + 40))  # BORNTIMESTAMP
    s[9](msg, born_host)
    s[10](msg, _i64(r + 48 + born))  # STORETIMESTAMP
    s[11](msg, store_host)
    s[12](msg, _i64(r + 28))  # PHYSICALOFFSET
    s[13](msg, _i32(r + 8))  # BODYCRC
    s[14](msg, _i32(r + 56 + born + store))  # RECONSUMETIMES
    s[15](msg, _i64(r + 60 + born + store))  # PREPAREDTRANSACTIONOFFSET
    return msg


def decode_stored(data, Py_ssize_t offset=0, *, bint verify_crc=False, decompress_max_size=None):
    """``stored.decode_stored``: the record at ``data[offset:]``."""
    cdef Py_buffer view
    cdef object msg = None
    if not verify_crc:
        if PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) == 0:
            try:
                msg = _decode(<const unsigned char*>view.buf, view.len, offset, decompress_max_size is not None)
            finally:
                PyBuffer_Release(&view)
    if msg is None:
        return _decode_fallback(
            data, offset, verify_crc=verify_crc, decompress_max_size=decompress_max_size
        )
    return msg


def decode_stored_all(data, *, bint verify_crc=False, decompress_max_size=None):
    """``stored.decode_stored_all``: every record of a pull body, which must end exactly after the
    last one."""
    cdef Py_buffer view
    cdef list out = []
    cdef Py_ssize_t pos = 0
    cdef object msg
    cdef bint decompress = decompress_max_size is not None
    if verify_crc or PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) != 0:
        return _all_fallback(data, 0, verify_crc, decompress_max_size, out)
    try:
        while pos < view.len:
            msg = _decode(<const unsigned char*>view.buf, view.len, pos, decompress)
            if msg is None:
                break
            out.append(msg)
            pos += <int>msg.store_size
        else:
            return out
    finally:
        PyBuffer_Release(&view)
    return _all_fallback(data, pos, verify_crc, decompress_max_size, out)


cdef list _all_fallback(data, Py_ssize_t pos, bint verify_crc, decompress_max_size, list out):
    """The rest of ``decode_stored_all`` from ``pos`` through the pure decoder."""
    cdef Py_ssize_t size = len(data)
    cdef object msg
    while pos < size:
        msg = _decode_fallback(data, pos, verify_crc=verify_crc, decompress_max_size=decompress_max_size)
        out.append(msg)
        pos += <int>msg.store_size
    return out


# ---------------------------------------------------------------------------------------------
# Writing: a record packed straight into the mapped file


from cpython.buffer cimport PyBUF_WRITABLE
from libc.string cimport memcmp, memcpy

cdef object _pack_fallback = None


def bind_pack(pack_fallback):
    """The pure ``pack_stored_into`` this module hands the unusual to."""
    global _pack_fallback
    _pack_fallback = pack_fallback


cdef inline void _put32(unsigned char* p, long long v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void _put64(unsigned char* p, long long v) noexcept nogil:
    _put32(p, v >> 32)
    _put32(p + 4, v)


cdef inline bint _int32(long long v) noexcept nogil:
    return -2147483648 <= v <= 2147483647


cdef bint _get(object obj, Py_buffer* view, int flags):
    """``view`` of ``obj``; false (nothing held) if it has none of that kind."""
    try:
        PyObject_GetBuffer(obj, view, flags)
    except (BufferError, TypeError):
        return False
    return True


cdef void _write(
    unsigned char* o, int born, int store, long long total, long long crc, long long qid, long long flag,
    long long qo, long long phy, long long sys, long long born_ts, const unsigned char* born_host,
    long long store_ts, const unsigned char* store_host, long long rc, long long prep,
    const unsigned char* body, Py_ssize_t body_len, const unsigned char* tail, Py_ssize_t tail_len,
) noexcept nogil:
    cdef Py_ssize_t head = 72 + born + store
    _put32(o + 8, crc)
    _put32(o + 12, qid)
    _put32(o + 16, flag)
    _put64(o + 20, qo)
    _put64(o + 28, phy)
    _put32(o + 36, sys)
    _put64(o + 40, born_ts)
    memcpy(o + 48, born_host, born)
    _put64(o + 48 + born, store_ts)
    memcpy(o + 56 + born, store_host, store)
    _put32(o + 56 + born + store, rc)
    _put64(o + 60 + born + store, prep)
    _put32(o + 68 + born + store, body_len)
    memcpy(o + head, body, body_len)
    memcpy(o + head + body_len, tail, tail_len)
    _put32(o + 4, _MESSAGE_MAGIC)
    _put32(o, total)  # TOTALSIZE last: a reader that sees it sees the whole record


def pack_stored_into(
    buf, Py_ssize_t pos, host_index, total_size, body_crc, queue_id, flag, queue_offset,
    commit_log_offset, sys_flag, born_timestamp, born_host, store_timestamp, store_host,
    reconsume_times, prepared_transaction_offset, body, tail,
):
    """``stored.pack_stored_into``: the record written at ``buf[pos:]``, its first 8 bytes last."""
    cdef long long v_total, v_crc, v_qid, v_flag, v_qo, v_phy, v_sys, v_born_ts, v_store_ts, v_rc, v_prep
    cdef int born, store
    cdef Py_ssize_t head, end, body_len, tail_len
    cdef Py_buffer out, b, t, bh, sh
    cdef bint ok = False
    try:
        v_total = total_size
        v_crc = body_crc
        v_qid = queue_id
        v_flag = flag
        v_qo = queue_offset
        v_phy = commit_log_offset
        v_sys = sys_flag
        v_born_ts = born_timestamp
        v_store_ts = store_timestamp
        v_rc = reconsume_times
        v_prep = prepared_transaction_offset
    except (OverflowError, TypeError):
        return _pack_fallback(
            buf, pos, host_index, total_size, body_crc, queue_id, flag, queue_offset, commit_log_offset,
            sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, body, tail,
        )
    if not (
        type(host_index) is int and 0 <= host_index <= 3 and _int32(v_total) and _int32(v_crc)
        and _int32(v_qid) and _int32(v_flag) and _int32(v_sys) and _int32(v_rc)
        and type(born_host) is bytes and type(store_host) is bytes
    ):
        return _pack_fallback(
            buf, pos, host_index, total_size, body_crc, queue_id, flag, queue_offset, commit_log_offset,
            sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, body, tail,
        )
    born = 20 if (<int>host_index) & 1 else 8
    store = 20 if (<int>host_index) & 2 else 8
    head = 72 + born + store
    if len(born_host) == born and len(store_host) == store and pos >= 0 and _get(body, &b, PyBUF_SIMPLE):
        try:
            if _get(tail, &t, PyBUF_SIMPLE):
                try:
                    body_len = b.len
                    tail_len = t.len
                    end = pos + head + body_len + tail_len
                    if _int32(body_len) and _get(buf, &out, PyBUF_WRITABLE):
                        try:
                            if end <= out.len:
                                _write(<unsigned char*>out.buf + pos, born, store, v_total, v_crc, v_qid, v_flag,
                                       v_qo, v_phy, v_sys, v_born_ts, <const unsigned char*><const char*>born_host,
                                       v_store_ts, <const unsigned char*><const char*>store_host, v_rc, v_prep,
                                       <const unsigned char*>b.buf, body_len, <const unsigned char*>t.buf, tail_len)
                                ok = True
                        finally:
                            PyBuffer_Release(&out)
                finally:
                    PyBuffer_Release(&t)
        finally:
            PyBuffer_Release(&b)
    if ok:
        return end
    return _pack_fallback(
        buf, pos, host_index, total_size, body_crc, queue_id, flag, queue_offset, commit_log_offset,
        sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_transaction_offset, body, tail,
    )


# ---------------------------------------------------------------------------------------------
# A batch body turned into stored records

from cpython.bytes cimport PyBytes_AS_STRING

cdef object _batch_fallback = None
cdef object _BatchRecords = None
cdef unsigned int _CRC_TABLE[8][256]
cdef unsigned int _CRC_POLY = 0xEDB88320  # zlib's, reflected


cdef void _crc_init() noexcept nogil:
    cdef unsigned int c, n, k
    for n in range(256):
        c = n
        for k in range(8):
            c = (_CRC_POLY ^ (c >> 1)) if c & 1 else (c >> 1)
        _CRC_TABLE[0][n] = c
    for n in range(256):
        c = _CRC_TABLE[0][n]
        for k in range(1, 8):
            c = _CRC_TABLE[0][c & 0xFF] ^ (c >> 8)
            _CRC_TABLE[k][n] = c


_crc_init()


cdef unsigned int _crc32(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """zlib's CRC-32 (slicing by 8), so that the extension needs no zlib headers to build."""
    cdef unsigned int c = ~(<unsigned int>0)
    cdef unsigned int lo, hi
    while n >= 8:
        lo = c ^ (<unsigned int>p[0] | (<unsigned int>p[1] << 8) | (<unsigned int>p[2] << 16) | (<unsigned int>p[3] << 24))
        hi = <unsigned int>p[4] | (<unsigned int>p[5] << 8) | (<unsigned int>p[6] << 16) | (<unsigned int>p[7] << 24)
        c = (_CRC_TABLE[7][lo & 0xFF] ^ _CRC_TABLE[6][(lo >> 8) & 0xFF] ^ _CRC_TABLE[5][(lo >> 16) & 0xFF]
             ^ _CRC_TABLE[4][lo >> 24] ^ _CRC_TABLE[3][hi & 0xFF] ^ _CRC_TABLE[2][(hi >> 8) & 0xFF]
             ^ _CRC_TABLE[1][(hi >> 16) & 0xFF] ^ _CRC_TABLE[0][hi >> 24])
        p += 8
        n -= 8
    while n > 0:
        c = _CRC_TABLE[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return ~c


def crc32(data):
    """``zlib.crc32(data)`` (for the tests)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _crc32(<const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def bind_batch(batch_fallback, batch_records):
    """The pure ``encode_batch_records`` this module hands the unusual to, and ``BatchRecords``."""
    global _batch_fallback, _BatchRecords
    _batch_fallback = batch_fallback
    _BatchRecords = batch_records


cdef inline tuple _index_values(const unsigned char* p, Py_ssize_t n):
    """TAGS, KEYS and UNIQ_KEY in ``p[:n]`` in one pass (Java keeps the last of repeated names)."""
    cdef Py_ssize_t start = 0, i, sep, name_len
    cdef object tags = None, keys = None, uniq = None
    while start <= n:
        i = start
        sep = -1
        while i < n and p[i] != 2:
            if p[i] == 1 and sep < 0:
                sep = i
            i += 1
        name_len = sep - start
        if sep >= 0 and i > sep + 1:
            if name_len == 4 and memcmp(p + start, b"TAGS", 4) == 0:
                tags = PyBytes_FromStringAndSize(<const char*>p + sep + 1, i - sep - 1)
            elif name_len == 4 and memcmp(p + start, b"KEYS", 4) == 0:
                keys = PyBytes_FromStringAndSize(<const char*>p + sep + 1, i - sep - 1)
            elif name_len == 8 and memcmp(p + start, b"UNIQ_KEY", 8) == 0:
                uniq = PyBytes_FromStringAndSize(<const char*>p + sep + 1, i - sep - 1)
        start = i + 1
    return tags, keys, uniq


def encode_batch_records(
    items, host_index, Py_ssize_t fixed, bytes topic_part, bytes batch_props, queue_id, sys_flag,
    born_timestamp, born_host, store_host, Py_ssize_t max_size,
):
    """``batch.encode_batch_records`` for a well-formed batch; the unusual to the pure function."""
    cdef Py_buffer src
    cdef const unsigned char* s
    cdef Py_ssize_t size_all, pos, item_total, body_len, props_len, plen, size, rel, total
    cdef Py_ssize_t bp_len = len(batch_props), tp_len = len(topic_part), head
    cdef long long v_qid = 0, v_sys = 0, v_born_ts = 0
    cdef int born, store
    cdef bint sep_needed
    cdef list rel_offsets = [], sizes = [], props = [], tags = [], keys = [], uniq = []
    cdef object data, item_props
    cdef tuple found
    cdef unsigned char* o
    cdef unsigned char* pp
    cdef const unsigned char* ip
    cdef Py_ssize_t i, n
    try:
        v_qid = queue_id
        v_sys = sys_flag
        v_born_ts = born_timestamp
    except (OverflowError, TypeError):
        v_qid = v_sys = 1 << 40  # out of range: the pure function says so
    if not (
        type(host_index) is int and 0 <= host_index <= 3 and _int32(v_qid) and _int32(v_sys)
        and type(born_host) is bytes and type(store_host) is bytes
    ):
        return _batch_fallback(items, host_index, fixed, topic_part, batch_props, queue_id, sys_flag,
                               born_timestamp, born_host, store_host, max_size)
    born = 20 if (<int>host_index) & 1 else 8
    store = 20 if (<int>host_index) & 2 else 8
    head = 72 + born + store
    if len(born_host) != born or len(store_host) != store or not _get(items, &src, PyBUF_SIMPLE):
        return _batch_fallback(items, host_index, fixed, topic_part, batch_props, queue_id, sys_flag,
                               born_timestamp, born_host, store_host, max_size)
    try:
        s = <const unsigned char*>src.buf
        size_all = src.len
        # First pass: check every item as the pure function does and size the output.
        pos = 0
        total = 0
        while pos < size_all:
            if size_all - pos < 22:
                break
            item_total = _i32(s + pos)
            body_len = _i32(s + pos + 16)
            if body_len < 0 or item_total < 22 or pos + item_total > size_all or pos + 20 + body_len + 2 > pos + item_total:
                break
            props_len = _i16(s + pos + 20 + body_len)
            if pos + 20 + body_len + 2 + props_len != pos + item_total:
                break
            plen = props_len
            if bp_len:
                plen += bp_len + (1 if props_len and s[pos + item_total - 1] != 2 else 0)
            size = fixed + body_len + plen
            if plen > 32767 or size > max_size or not _int32(body_len):
                break
            total += size
            pos += item_total
        else:
            if total > 0:
                data = PyBytes_FromStringAndSize(NULL, total)
                o = <unsigned char*>PyBytes_AS_STRING(data)
                pos = 0
                rel = 0
                while pos < size_all:
                    item_total = _i32(s + pos)
                    body_len = _i32(s + pos + 16)
                    props_len = _i16(s + pos + 20 + body_len)
                    ip = s + pos + 20 + body_len + 2
                    sep_needed = bp_len and props_len and ip[props_len - 1] != 2
                    plen = props_len + (bp_len + (1 if sep_needed else 0) if bp_len else 0)
                    size = fixed + body_len + plen
                    item_props = PyBytes_FromStringAndSize(NULL, plen)
                    pp = <unsigned char*>PyBytes_AS_STRING(item_props)
                    memcpy(pp, ip, props_len)
                    if bp_len:
                        if sep_needed:
                            pp[props_len] = 2
                        memcpy(pp + plen - bp_len, <const char*>batch_props, bp_len)
                    _write(o + rel, born, store, size, _crc32(s + pos + 20, body_len) & 0x7FFFFFFF, v_qid,
                           _i32(s + pos + 12), 0, 0, v_sys, v_born_ts, <const unsigned char*><const char*>born_host,
                           0, <const unsigned char*><const char*>store_host, 0, 0, s + pos + 20, body_len,
                           <const unsigned char*><const char*>topic_part, tp_len)
                    # PROPERTIESLENGTH and the properties after the topic
                    o[rel + head + body_len + tp_len] = <unsigned char>(plen >> 8)
                    o[rel + head + body_len + tp_len + 1] = <unsigned char>plen
                    memcpy(o + rel + head + body_len + tp_len + 2, pp, plen)
                    rel_offsets.append(rel)
                    sizes.append(size)
                    props.append(item_props)
                    found = _index_values(pp, plen) if plen else (None, None, None)
                    tags.append(found[0])
                    keys.append(found[1])
                    uniq.append(found[2])
                    rel += size
                    pos += item_total
                return _BatchRecords(data, rel_offsets, sizes, props, tags, keys, uniq)
    finally:
        PyBuffer_Release(&src)
    return _batch_fallback(items, host_index, fixed, topic_part, batch_props, queue_id, sys_flag,
                           born_timestamp, born_host, store_host, max_size)
