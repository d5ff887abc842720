# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``codec.py``'s JSON header decode and encode (issue 29).

Written for C: the header bytes are walked by a pointer, numbers are parsed into C integers, and
only the values a ``RemotingCommand`` holds become Python objects (no intermediate dict of the
whole header, no per-field lookups). Both functions handle the shapes Java (fastjson), the C++
client and finchmq itself write; anything else (a missing or non-integer code, whitespace-free
oddities such as escaped keys, numbers that are not plain int32s, nested values under unknown
keys, bad UTF-8, invalid JSON) is handed back to the pure function bound with ``bind``, which
decodes it or raises exactly as without this module. So the errors are the pure module's by
construction, and tests/protocol/test_compiled.py checks that the results are too.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcmp, memcpy

from .codes import LanguageCode, SerializeType
from .command import RemotingCommand

cdef object _decode_fallback = None
cdef object _encode_fallback = None

cdef dict _LANGUAGE_BY_NAME = {lc.name: lc for lc in LanguageCode}
cdef dict _LANGUAGE_BY_VALUE = {lc.value: lc for lc in LanguageCode}
cdef object _OTHER = LanguageCode.OTHER
cdef object _JAVA_LANGUAGE = LanguageCode.JAVA
cdef object _JSON = SerializeType.JSON
cdef object _Command = RemotingCommand

cdef long long _INT32_MIN = -2147483648
cdef long long _INT32_MAX = 2147483647


def bind(decode_fallback, encode_fallback):
    """The pure ``_command_from_json`` and ``_json_header`` this module hands the unusual to."""
    global _decode_fallback, _encode_fallback
    _decode_fallback = decode_fallback
    _encode_fallback = encode_fallback


# ---------------------------------------------------------------------------------------------
# Decoding


cdef struct Cursor:
    const unsigned char* p
    const unsigned char* end


cdef inline void _skip_ws(Cursor* c) noexcept nogil:
    while c.p < c.end and (c.p[0] == 32 or c.p[0] == 9 or c.p[0] == 10 or c.p[0] == 13):
        c.p += 1


cdef inline bint _expect(Cursor* c, unsigned char ch) noexcept nogil:
    """Skip whitespace, then consume ``ch``; false if it is not there."""
    _skip_ws(c)
    if c.p < c.end and c.p[0] == ch:
        c.p += 1
        return True
    return False


cdef inline bint _int(Cursor* c, long long* out) noexcept nogil:
    """A JSON integer of at most 18 digits (no fraction, no exponent); false otherwise."""
    cdef bint negative = False
    cdef long long n = 0
    cdef int digits = 0
    if c.p < c.end and c.p[0] == 45:  # '-'
        negative = True
        c.p += 1
    if c.p >= c.end or not (48 <= c.p[0] <= 57):
        return False
    if c.p[0] == 48 and c.p + 1 < c.end and 48 <= c.p[1] <= 57:
        return False  # a leading zero is not JSON
    while c.p < c.end and 48 <= c.p[0] <= 57:
        n = n * 10 + (c.p[0] - 48)
        c.p += 1
        digits += 1
        if digits > 18:
            return False
    if c.p < c.end and (c.p[0] == 46 or c.p[0] == 101 or c.p[0] == 69):  # . e E
        return False
    out[0] = -n if negative else n
    return True


cdef inline int _hex(unsigned char ch) noexcept nogil:
    if 48 <= ch <= 57:
        return ch - 48
    if 97 <= ch <= 102:
        return ch - 87
    if 65 <= ch <= 70:
        return ch - 55
    return -1


cdef object _escaped_string(Cursor* c, const unsigned char* start):
    """The rest of a string holding escapes, ``start`` just after its opening quote."""
    cdef Py_ssize_t room = c.end - start
    cdef unsigned char* out = <unsigned char*>PyMem_Malloc(room if room > 0 else 1)
    cdef Py_ssize_t n = 0
    cdef const unsigned char* q = start
    cdef unsigned char ch
    cdef int h0, h1, h2, h3
    cdef unsigned int cp
    if out == NULL:
        raise MemoryError()
    try:
        while q < c.end:
            ch = q[0]
            if ch == 34:  # closing quote
                c.p = q + 1
                try:
                    return PyUnicode_DecodeUTF8(<const char*>out, n, NULL)
                except UnicodeDecodeError:
                    return None
            if ch < 32:
                return None
            if ch != 92:
                out[n] = ch
                n += 1
                q += 1
                continue
            if q + 1 >= c.end:
                return None
            ch = q[1]
            q += 2
            if ch == 34 or ch == 92 or ch == 47:
                out[n] = ch
            elif ch == 98:
                out[n] = 8
            elif ch == 102:
                out[n] = 12
            elif ch == 110:
                out[n] = 10
            elif ch == 114:
                out[n] = 13
            elif ch == 116:
                out[n] = 9
            elif ch == 117:  # \uXXXX: 6 bytes in, at most 3 out
                if q + 4 > c.end:
                    return None
                h0 = _hex(q[0])
                h1 = _hex(q[1])
                h2 = _hex(q[2])
                h3 = _hex(q[3])
                if h0 < 0 or h1 < 0 or h2 < 0 or h3 < 0:
                    return None
                cp = (h0 << 12) | (h1 << 8) | (h2 << 4) | h3
                q += 4
                if 0xD800 <= cp <= 0xDFFF:
                    return None  # surrogates: the pure path decides
                if cp < 0x80:
                    out[n] = <unsigned char>cp
                elif cp < 0x800:
                    out[n] = <unsigned char>(0xC0 | (cp >> 6))
                    n += 1
                    out[n] = <unsigned char>(0x80 | (cp & 0x3F))
                else:
                    out[n] = <unsigned char>(0xE0 | (cp >> 12))
                    n += 1
                    out[n] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
                    n += 1
                    out[n] = <unsigned char>(0x80 | (cp & 0x3F))
            else:
                return None
            n += 1
        return None
    finally:
        PyMem_Free(out)


cdef object _string(Cursor* c):
    """A JSON string as ``str`` (the cursor on its opening quote), or None to hand back."""
    cdef const unsigned char* start
    cdef const unsigned char* q
    cdef unsigned char ch
    _skip_ws(c)
    if c.p >= c.end or c.p[0] != 34:
        return None
    start = c.p + 1
    q = start
    while q < c.end:
        ch = q[0]
        if ch == 34:
            c.p = q + 1
            try:
                return PyUnicode_DecodeUTF8(<const char*>start, q - start, NULL)
            except UnicodeDecodeError:
                return None
        if ch == 92:
            return _escaped_string(c, start)
        if ch < 32:
            return None
        q += 1
    return None


cdef inline Py_ssize_t _plain_key(Cursor* c, const unsigned char** key) noexcept nogil:
    """A key without escapes: its length (``key`` set to its first byte), or -1 to hand back."""
    cdef const unsigned char* q
    _skip_ws(c)
    if c.p >= c.end or c.p[0] != 34:
        return -1
    q = c.p + 1
    key[0] = q
    while q < c.end:
        if q[0] == 34:
            c.p = q + 1
            return q - key[0]
        if q[0] == 92 or q[0] < 32:
            return -1
        q += 1
    return -1


cdef inline bint _is(const unsigned char* key, Py_ssize_t size, const char* name, Py_ssize_t name_size) noexcept nogil:
    return size == name_size and memcmp(key, name, name_size) == 0


cdef object _ext_fields(Cursor* c):
    """``{"k":"v",...}`` as a dict of str; None to hand back (a non-string value, bad JSON)."""
    cdef dict fields = {}
    cdef object key, value
    if not _expect(c, 123):
        return None
    if _expect(c, 125):
        return fields
    while True:
        key = _string(c)
        if key is None or not _expect(c, 58):
            return None
        value = _string(c)
        if value is None:
            return None
        fields[key] = value
        if _expect(c, 44):
            continue
        if _expect(c, 125):
            return fields
        return None


cdef object _decode(const unsigned char* data, Py_ssize_t size, object body):
    cdef Cursor c
    cdef const unsigned char* key
    cdef Py_ssize_t key_size
    cdef long long number = 0
    cdef long long code = 0, version = 0, opaque = 0, flag = 0
    cdef bint have_code = False
    cdef object language = _JAVA_LANGUAGE
    cdef object remark = None
    cdef object ext = None
    cdef object text
    cdef bint field
    c.p = data
    c.end = data + size
    if not _expect(&c, 123):
        return None
    if _expect(&c, 125):
        return None  # no code: the pure path says so
    while True:
        key_size = _plain_key(&c, &key)
        if key_size < 0 or not _expect(&c, 58):
            return None
        _skip_ws(&c)
        if c.p >= c.end:
            return None
        if _is(key, key_size, b"extFields", 9):
            ext = _ext_fields(&c)
            if ext is None:
                return None
        elif c.p[0] == 34:  # a string value
            text = _string(&c)
            if text is None:
                return None
            if _is(key, key_size, b"language", 8):
                language = _LANGUAGE_BY_NAME.get(text, _OTHER)
            elif _is(key, key_size, b"remark", 6):
                remark = text
            elif (
                _is(key, key_size, b"code", 4) or _is(key, key_size, b"version", 7)
                or _is(key, key_size, b"opaque", 6) or _is(key, key_size, b"flag", 4)
            ):
                return None  # fastjson-style numeric strings: the pure path coerces them
        else:
            if not _int(&c, &number):
                return None
            if _is(key, key_size, b"language", 8):
                language = _LANGUAGE_BY_VALUE.get(number, _OTHER)
            elif _is(key, key_size, b"remark", 6):
                return None
            else:
                field = True
                if _is(key, key_size, b"code", 4):
                    code = number
                    have_code = True
                elif _is(key, key_size, b"version", 7):
                    version = number
                elif _is(key, key_size, b"opaque", 6):
                    opaque = number
                elif _is(key, key_size, b"flag", 4):
                    flag = number
                else:
                    field = False  # an unknown key's number: ignored, as the pure decoder does
                if field and not (_INT32_MIN <= number <= _INT32_MAX):
                    return None  # the pure path raises "does not fit a Java int"
        if _expect(&c, 44):
            continue
        if not _expect(&c, 125):
            return None
        break
    _skip_ws(&c)
    if c.p != c.end or not have_code:
        return None
    if ext is None:
        ext = {}
    return _Command(code, language, version, opaque, flag, remark, ext, body, _JSON)


def command_from_json(header, body):
    """``codec._command_from_json``: a ``RemotingCommand`` from a JSON header and its body."""
    cdef object command
    if type(header) is bytes:
        command = _decode(<const unsigned char*>PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header), body)
    elif type(header) is bytearray:
        command = _decode(
            <const unsigned char*>PyByteArray_AS_STRING(header), PyByteArray_GET_SIZE(header), body
        )
    else:
        command = None
    if command is None:
        return _decode_fallback(header, body)
    return command


# ---------------------------------------------------------------------------------------------
# Encoding


cdef struct Writer:
    unsigned char* data
    Py_ssize_t size
    Py_ssize_t room


cdef int _grow(Writer* w, Py_ssize_t more) except -1:
    cdef Py_ssize_t room = w.room * 2
    cdef unsigned char* data
    if room < w.size + more:
        room = w.size + more + 256
    data = <unsigned char*>PyMem_Realloc(w.data, room)
    if data == NULL:
        raise MemoryError()
    w.data = data
    w.room = room
    return 0


cdef inline int _put(Writer* w, const char* text, Py_ssize_t size) except -1:
    if w.size + size > w.room:
        _grow(w, size)
    memcpy(w.data + w.size, text, size)
    w.size += size
    return 0


cdef int _put_int(Writer* w, long long value) except -1:
    cdef char digits[24]
    cdef int n = 0
    cdef unsigned long long u
    cdef bint negative = value < 0
    u = <unsigned long long>(-(value + 1)) + 1 if negative else <unsigned long long>value
    while True:
        digits[23 - n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    if negative:
        digits[23 - n] = 45
        n += 1
    return _put(w, &digits[24 - n], n)


cdef const char* _HEX = b"0123456789abcdef"


cdef int _put_str(Writer* w, str text) except -1:
    """A JSON string as orjson writes it: UTF-8 as is; ``"``, ``\\`` and controls escaped."""
    cdef Py_ssize_t size, i
    cdef const unsigned char* data
    cdef unsigned char ch
    cdef char esc[6]
    data = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &size)  # raises for surrogates
    if w.size + size * 6 + 2 > w.room:
        _grow(w, size * 6 + 2)
    w.data[w.size] = 34
    w.size += 1
    for i in range(size):
        ch = data[i]
        if ch >= 32 and ch != 34 and ch != 92:
            w.data[w.size] = ch
            w.size += 1
            continue
        w.data[w.size] = 92
        if ch == 34 or ch == 92:
            w.data[w.size + 1] = ch
            w.size += 2
        elif ch == 8:
            w.data[w.size + 1] = 98
            w.size += 2
        elif ch == 9:
            w.data[w.size + 1] = 116
            w.size += 2
        elif ch == 10:
            w.data[w.size + 1] = 110
            w.size += 2
        elif ch == 12:
            w.data[w.size + 1] = 102
            w.size += 2
        elif ch == 13:
            w.data[w.size + 1] = 114
            w.size += 2
        else:
            w.data[w.size + 1] = 117
            w.data[w.size + 2] = 48
            w.data[w.size + 3] = 48
            w.data[w.size + 4] = _HEX[ch >> 4]
            w.data[w.size + 5] = _HEX[ch & 15]
            w.size += 6
    w.data[w.size] = 34
    w.size += 1
    return 0


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


cdef inline bint _small(object value):
    """An int (or an int enum such as ``ResponseCode``; not a bool, which orjson writes as
    ``true``) that orjson writes as its number and a C long long holds."""
    return (
        isinstance(value, int) and type(value) is not bool
        and -9223372036854775807 <= value <= 9223372036854775807
    )


cdef int _put_header(
    Writer* w, object code, dict ext, object flag, str language, object opaque, object remark, object version
) except -1:
    """The JSON header as orjson writes fastjson's key order (alphabetical, no nulls)."""
    cdef bint first = True
    _put(w, b'{"code":', 8)
    _put_int(w, code)
    _put(w, b',"extFields":{', 14)
    for key, value in ext.items():
        if not first:
            _put(w, b",", 1)
        first = False
        _put_str(w, key)
        _put(w, b":", 1)
        _put_str(w, value)
    _put(w, b'},"flag":', 9)
    _put_int(w, flag)
    _put(w, b',"language":', 12)
    _put_str(w, language)
    _put(w, b',"opaque":', 10)
    _put_int(w, opaque)
    if remark is not None:
        _put(w, b',"remark":', 10)
        _put_str(w, remark)
    _put(w, b',"serializeTypeCurrentRPC":"JSON","version":', 44)
    _put_int(w, version)
    _put(w, b"}", 1)
    return 0


def json_header(cmd, opaque):
    """``codec._json_header``: the JSON header of ``cmd`` with ``opaque``, as orjson writes it."""
    cdef Writer w
    cdef object ext = cmd.ext_fields
    cdef object code = cmd.code
    cdef object flag = cmd.flag
    cdef object version = cmd.version
    cdef object remark = cmd.remark
    cdef object language = cmd.language._name_
    if not (
        _small(code) and _small(flag) and _small(version) and _small(opaque)
        and type(ext) is dict and type(language) is str and (remark is None or type(remark) is str)
    ):
        return _encode_fallback(cmd, opaque)
    for key, value in (<dict>ext).items():
        if type(key) is not str or type(value) is not str:
            return _encode_fallback(cmd, opaque)
    w.data = <unsigned char*>PyMem_Malloc(512)
    if w.data == NULL:
        raise MemoryError()
    w.size = 0
    w.room = 512
    try:
        try:
            _put_header(&w, code, ext, flag, language, opaque, remark, version)
        except UnicodeEncodeError:
            return _encode_fallback(cmd, opaque)  # a lone surrogate: orjson's error, the pure way
        return PyBytes_FromStringAndSize(<const char*>w.data, w.size)
    finally:
        PyMem_Free(w.data)


# ---------------------------------------------------------------------------------------------
# Frames: the split of a received buffer, and the head (length prefix + header) of a frame


cdef object _encode_parts_fallback = None
cdef object _next_command_fallback = None
cdef object _Signal_NEED_DATA = None
cdef object _PURE_JSON = _JSON


def bind_frames(encode_parts_fallback, next_command_fallback, need_data):
    """The pure ``encode_parts`` and ``RemotingCodec.next_command`` this module hands the unusual
    to, and the codec's ``NEED_DATA`` signal."""
    global _encode_parts_fallback, _next_command_fallback, _Signal_NEED_DATA
    _encode_parts_fallback = encode_parts_fallback
    _next_command_fallback = next_command_fallback
    _Signal_NEED_DATA = need_data


cdef inline long _be32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) | (<unsigned int>p[2] << 8) | p[3])


def next_command(codec):
    """``RemotingCodec.next_command`` for the usual frame: a complete JSON frame whose prefix is
    valid, sliced out of the buffer and decoded in one call. Anything else (an error already
    recorded, a short buffer at end of input, a bad or non-JSON prefix, a header the decoder
    hands back) goes to the pure method, which answers or raises exactly as without this module."""
    cdef object buf = codec._buf
    cdef Py_ssize_t pos = codec._pos
    cdef Py_ssize_t size
    cdef const unsigned char* data
    cdef long length, word, header_len
    cdef Py_ssize_t start, body_start, end
    cdef object body, command
    cdef bint is_bytes = type(buf) is bytes
    if codec._error is not None:
        return _next_command_fallback(codec)
    if is_bytes:
        data = <const unsigned char*>PyBytes_AS_STRING(buf)
        size = PyBytes_GET_SIZE(buf)
    elif type(buf) is bytearray:
        data = <const unsigned char*>PyByteArray_AS_STRING(buf)
        size = PyByteArray_GET_SIZE(buf)
    else:
        return _next_command_fallback(codec)
    if size - pos < 8:
        if codec._eof:
            return _next_command_fallback(codec)
        return _Signal_NEED_DATA
    length = _be32(data + pos)
    word = _be32(data + pos + 4)
    header_len = word & 0xFFFFFF
    if not (0 <= word < 0x1000000 and 2 <= header_len <= length - 4 and length + 4 <= codec.max_frame_size):
        return _next_command_fallback(codec)  # the pure method says what is wrong (or decodes ROCKETMQ)
    if size - pos < length + 4:
        if codec._eof:
            return _next_command_fallback(codec)
        return _Signal_NEED_DATA
    start = pos + 8
    body_start = start + header_len
    end = pos + 4 + length
    if end > body_start:
        body = PyBytes_FromStringAndSize(<const char*>data + body_start, end - body_start)
    else:
        body = b""
    command = _decode(data + start, header_len, body)
    if command is None:
        return _next_command_fallback(codec)  # the pure decoder decodes it or raises; _pos untouched
    codec._pos = end
    return command


def encode_parts(cmd, Py_ssize_t max_frame_size, opaque=None):
    """``codec.encode_parts`` for a JSON command: the length prefix and the header written into
    one bytes object, and the body. Anything else goes to the pure function."""
    cdef Writer w
    cdef object ext = cmd.ext_fields
    cdef object code = cmd.code
    cdef object flag = cmd.flag
    cdef object version = cmd.version
    cdef object remark = cmd.remark
    cdef object body = cmd.body
    cdef object language
    cdef Py_ssize_t header_len, frame_size
    cdef object head
    cdef unsigned char* out
    if opaque is None:
        opaque = cmd.opaque
    if not (
        cmd.serialize_type is _PURE_JSON and _small(code) and _small(flag) and _small(version)
        and _small(opaque) and type(ext) is dict and (remark is None or type(remark) is str)
        and (type(body) is bytes or type(body) is bytearray)
    ):
        return _encode_parts_fallback(cmd, max_frame_size, opaque)
    language = cmd.language._name_
    if type(language) is not str:
        return _encode_parts_fallback(cmd, max_frame_size, opaque)
    for key, value in (<dict>ext).items():
        if type(key) is not str or type(value) is not str:
            return _encode_parts_fallback(cmd, max_frame_size, opaque)
    w.data = <unsigned char*>PyMem_Malloc(512)
    if w.data == NULL:
        raise MemoryError()
    w.size = 8  # the prefix, written last
    w.room = 512
    try:
        try:
            _put_header(&w, code, ext, flag, language, opaque, remark, version)
        except UnicodeEncodeError:
            return _encode_parts_fallback(cmd, max_frame_size, opaque)  # the pure way raises
        header_len = w.size - 8
        frame_size = w.size + len(body)
        if frame_size > max_frame_size or header_len > 0xFFFFFF:
            return _encode_parts_fallback(cmd, max_frame_size, opaque)  # the pure way raises
        out = w.data
        out[0] = <unsigned char>((frame_size - 4) >> 24)
        out[1] = <unsigned char>((frame_size - 4) >> 16)
        out[2] = <unsigned char>((frame_size - 4) >> 8)
        out[3] = <unsigned char>(frame_size - 4)
        out[4] = 0
        out[5] = <unsigned char>(header_len >> 16)
        out[6] = <unsigned char>(header_len >> 8)
        out[7] = <unsigned char>header_len
        head = PyBytes_FromStringAndSize(<const char*>w.data, w.size)
        return head, body
    finally:
        PyMem_Free(w.data)
