"""The stored commit-log record (spec §4.1; Java ``MessageDecoder``, ``CommitLog.calMsgLength``,
``MessageExtEncoder``): where its fields sit, the one packer every writer uses, the encoders and
the decoder. The bytes of a pull body are these records back to back (§4.9).

Imports: the standard library and the protocol's errors, property keys and sysflag, hosts,
message values and compression; no I/O of any kind.

Strategy:
    Layout code works on plain ``bytes``/buffers with precompiled big-endian structs, as Java's
    ``ByteBuffer`` does, all derived from one field table (``StoredLayout``).
    The store's hot path never builds a ``MessageExt``. A record is packed by one pair of
    functions: ``prepare_stored`` (checks, TOTALSIZE, BODYCRC, SYSFLAG, the bytes after the body)
    and ``pack_stored_head`` (the fixed part, once offsets and store time are known).
    ``encode_stored_into`` joins them into a buffer; the commit log calls them around its put
    lock and writes the parts into the segment itself; its batch encoder calls
    ``prepare_stored`` once per batch and packs each item with ``StoredLayout.HEADS`` directly.
    tests/store/test_commit_log_layout.py pins the commit log's bytes to ``encode_stored``'s.
    Decoders check every length against the record and the buffer before reading, so any input
    yields a value or a ``MessageDecodeError`` naming the offset, the field and the value.
    Encoders refuse what the layout cannot hold (topic > 127 bytes, properties > 32767 bytes,
    ints that do not fit Java's types) with ``MessageEncodeError``; they never write a corrupt record.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import fields
from types import ModuleType
from typing import TYPE_CHECKING, Final, TypeAlias

from ._compiled import load as load_compiled
from .compression import decompress_body
from .errors import MessageDecodeError, MessageEncodeError
from .hosts import HOST_V4_SIZE, HOST_V6_SIZE, unpack_host
from .message import MessageExt, properties_to_string, string_to_properties
from .message_const import MessageSysFlag

if TYPE_CHECKING:
    import mmap

__all__ = [
    "BLANK_MAGIC_CODE",
    "BLANK_RECORD_MIN_SIZE",
    "MAX_PROPERTIES_LENGTH",
    "MAX_TOPIC_LENGTH",
    "MESSAGE_MAGIC_CODE",
    "MIN_STORED_SIZE",
    "StoredLayout",
    "decode_stored",
    "decode_stored_all",
    "encode_blank_into",
    "encode_message_ext",
    "encode_stored",
    "encode_stored_into",
    "fill_stored_offsets",
    "iter_stored",
    "pack_stored_head",
    "pack_stored_into",
    "peek_stored",
    "prepare_stored",
    "stored_body_crc",
    "stored_size",
]

_ReadBuffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"
_WriteBuffer: TypeAlias = "bytearray | memoryview | mmap.mmap"


# ---------------------------------------------------------------------------------------------
# Layout


MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7, RocketMQ MessageDecoder.MESSAGE_MAGIC_CODE
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194, RocketMQ CommitLog.BLANK_MAGIC_CODE
MAX_TOPIC_LENGTH: Final = 127  # bytes; TOPICLENGTH is one signed byte
MAX_PROPERTIES_LENGTH: Final = 32767  # bytes; PROPERTIESLENGTH is an int16 (Short.MAX_VALUE)
MIN_STORED_SIZE: Final = 91  # CommitLog.calMsgLength with IPv4 hosts and empty body/topic/props
BLANK_RECORD_MIN_SIZE: Final = 8  # CommitLog.END_FILE_MIN_BLANK_LENGTH: TOTALSIZE + MAGICCODE

_V6_EXTRA: Final = 12  # an IPv6 host takes 16 + 4 bytes instead of 4 + 4
# The fixed part of a stored record up to and including BODYLENGTH, one struct per host-size
# combination, indexed by the sysflag bits (born_v6 | store_v6 << 1) == (sys_flag >> 4) & 3.
_STORED_FIELDS: Final = (
    ("TOTALSIZE", "i"),
    ("MAGICCODE", "i"),
    ("BODYCRC", "i"),
    ("QUEUEID", "i"),
    ("FLAG", "i"),
    ("QUEUEOFFSET", "q"),
    ("PHYSICALOFFSET", "q"),
    ("SYSFLAG", "i"),
    ("BORNTIMESTAMP", "q"),
    ("BORNHOST", "born"),
    ("STORETIMESTAMP", "q"),
    ("STOREHOST", "store"),
    ("RECONSUMETIMES", "i"),
    ("PREPAREDTRANSACTIONOFFSET", "q"),
    ("BODYLENGTH", "i"),
)
_HOST_KINDS: Final = ((8, 8), (20, 8), (8, 20), (20, 20))  # (born, store) sizes by host index


def _field_sizes(host_index: int) -> list[tuple[str, str, int]]:
    """(name, struct code, size) of each field of ``_STORED_FIELDS`` with these host sizes."""
    born, store = _HOST_KINDS[host_index]
    sizes = {"i": 4, "q": 8, "born": born, "store": store}
    return [(name, code, sizes[code]) for name, code in _STORED_FIELDS]


def _head_structs(keep: frozenset[str] | None = None) -> tuple[struct.Struct, ...]:
    """The structs of ``_STORED_FIELDS``, by host index; fields not in ``keep`` (when given) are
    padding, so unpacking makes no object for them."""
    out = []
    for index in range(len(_HOST_KINDS)):
        fmt = ">"
        for name, code, size in _field_sizes(index):
            if keep is not None and name not in keep:
                fmt += f"{size}x"
            else:
                fmt += code if code in ("i", "q") else f"{size}s"
        out.append(struct.Struct(fmt))
    return tuple(out)


def _span_struct(first: str, last: str) -> struct.Struct:
    """The fields ``first`` through ``last`` of a record with IPv4 hosts, as one struct."""
    fields = _field_sizes(0)
    names = [name for name, _, _ in fields]
    span = fields[names.index(first) : names.index(last) + 1]
    return struct.Struct(">" + "".join(code if code in ("i", "q") else f"{size}s" for _, code, size in span))


def _position(field: str) -> int:
    """Where ``field`` starts in a record with IPv4 hosts."""
    pos = 0
    for name, _, size in _field_sizes(0):
        if name == field:
            return pos
        pos += size
    raise KeyError(field)


_SYSFLAG_POS: Final = _position("SYSFLAG")  # 36
_QUEUE_OFFSET_POS: Final = _position("QUEUEOFFSET")  # 20
_STORE_TIMESTAMP_POS: Final = _position("STORETIMESTAMP")  # 56; 68 with an IPv6 born host


_STORED_HEADERS: Final = _head_structs()
# The fields recovery's scan checks (TOPICLENGTH follows the body; PROPERTIESLENGTH the topic).
_SCAN_HEADERS: Final = _head_structs(
    keep=frozenset(
        ("TOTALSIZE", "MAGICCODE", "BODYCRC", "PHYSICALOFFSET", "SYSFLAG", "STORETIMESTAMP", "BODYLENGTH")
    )
)
_SIZE_MAGIC: Final = struct.Struct(">ii")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_I64: Final = struct.Struct(">q")
_TWO_I64: Final = struct.Struct(">qq")
_BYTE: Final = tuple(bytes((i,)) for i in range(256))


class StoredLayout:
    """Where the fields of a stored record sit (spec §4.1), all derived from one field table, for
    the encoder and decoder here and for the commit log (which patches batch records in place and
    scans the log on recovery). Positions after BORNHOST move by ``V6_EXTRA`` when the born host
    is IPv6 (``MessageSysFlag.BORNHOST_V6_FLAG``)."""

    SIZE_MAGIC: Final = _SIZE_MAGIC  # TOTALSIZE MAGICCODE
    HEADS: Final = _STORED_HEADERS  # the fixed part up to BODYLENGTH, by host index (born_v6 | store_v6 << 1)
    # The fixed part as recovery checks it, by host sizes (born_v6 | store_v6 << 1): TOTALSIZE
    # MAGICCODE BODYCRC PHYSICALOFFSET SYSFLAG STORETIMESTAMP BODYLENGTH; TOPICLENGTH follows the body.
    SCAN_HEADS: Final = _SCAN_HEADERS
    QUEUE_OFFSET: Final = _QUEUE_OFFSET_POS  # QUEUEOFFSET, then PHYSICALOFFSET
    SYS_FLAG: Final = _SYSFLAG_POS
    STORE_TIMESTAMP_V4: Final = _STORE_TIMESTAMP_POS
    V6_EXTRA: Final = _V6_EXTRA
    OFFSETS: Final = _TWO_I64  # QUEUEOFFSET PHYSICALOFFSET, written at QUEUE_OFFSET
    # QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP BORNHOST(v4) STORETIMESTAMP, at QUEUE_OFFSET
    PATCH_V4: Final = _span_struct("QUEUEOFFSET", "STORETIMESTAMP")
    TIMESTAMP: Final = _I64

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def scan_through_properties_length(body_len: int, topic_len: int) -> struct.Struct:
        """``SCAN_HEADS[0]`` (IPv4 hosts) followed by TOPICLENGTH and PROPERTIESLENGTH of a record
        with this BODYLENGTH and TOPICLENGTH: recovery reads a run of records of one shape with
        one unpack each."""
        return struct.Struct(f"{_SCAN_HEADERS[0].format}{body_len}xB{topic_len}xh")

    @staticmethod
    def store_timestamp_pos(sys_flag: int) -> int:
        """STORETIMESTAMP's position in a record with this SYSFLAG."""
        return _STORE_TIMESTAMP_POS + (_V6_EXTRA if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 0)

    @staticmethod
    def read_store_timestamp(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
        """The STORETIMESTAMP of the record at ``pos``; None if ``buf`` ends first."""
        if len(buf) < pos + _SYSFLAG_POS + 4:
            return None
        ts_pos = pos + StoredLayout.store_timestamp_pos(_I32.unpack_from(buf, pos + _SYSFLAG_POS)[0])
        if len(buf) < ts_pos + 8:
            return None
        return int(_I64.unpack_from(buf, ts_pos)[0])


# ---------------------------------------------------------------------------------------------
# Encoding


def stored_size(
    body_len: int, topic_len: int, props_len: int, born_v6: bool = False, store_v6: bool = False
) -> int:
    """TOTALSIZE of a record (Java ``CommitLog.calMsgLength``): 91 + lengths, + 12 per IPv6 host."""
    return MIN_STORED_SIZE + body_len + topic_len + props_len + (born_v6 + store_v6) * _V6_EXTRA


def prepare_stored(
    topic: bytes,
    properties: bytes,
    body: bytes | bytearray | memoryview,
    born_host: bytes,
    store_host: bytes,
    sys_flag: int,
) -> tuple[int, int, int, bytes, int]:
    """What a record holds apart from its place and time: ``(host_index, TOTALSIZE, BODYCRC,
    tail, SYSFLAG)``, for ``pack_stored_head`` (the fixed part) and the bytes after the body
    (TOPICLENGTH, topic, PROPERTIESLENGTH, properties). One half of the packer every writer uses
    (``encode_stored_into``, the commit log's in-place append and its batch encoder); the commit
    log calls it before the put lock and ``pack_stored_head`` under it.

    ``topic``/``properties`` are UTF-8, the hosts from ``pack_host``; ``host_index`` is
    ``born_v6 | store_v6 << 1``, and the SYSFLAG returned is ``sys_flag`` with its IPv6 host bits
    (0x10, 0x20) set from the host sizes, whatever the caller's said: else the record would not
    parse back. Raises ``MessageEncodeError`` (``field`` TOPIC, PROPERTIES, BORNHOST or
    STOREHOST) for a topic over 127 bytes, properties over 32767 bytes or a host field that is
    not 8 or 20 bytes.
    """
    topic_len = len(topic)
    props_len = len(properties)
    born = len(born_host)
    store = len(store_host)
    if (
        topic_len > MAX_TOPIC_LENGTH
        or props_len > MAX_PROPERTIES_LENGTH
        or born != HOST_V4_SIZE
        or store != HOST_V4_SIZE
    ):
        index = _check_stored_lengths(topic_len, props_len, born, store)
        extra = ((index & 1) + (index >> 1)) * _V6_EXTRA
    else:
        index = extra = 0
    return (
        index,
        MIN_STORED_SIZE + len(body) + topic_len + props_len + extra,
        zlib.crc32(body) & 0x7FFFFFFF,  # stored_body_crc
        _BYTE[topic_len] + topic + _I16.pack(props_len) + properties,
        (sys_flag & ~0x30) | (index << 4),
    )


def _check_stored_lengths(topic_len: int, props_len: int, born: int, store: int) -> int:
    """Slow path of ``prepare_stored``: raise for what the layout cannot hold, else the host index."""
    if topic_len > MAX_TOPIC_LENGTH:
        raise MessageEncodeError(
            f"topic is {topic_len} bytes in UTF-8; the stored layout allows at most {MAX_TOPIC_LENGTH}",
            field="TOPIC",
        )
    if props_len > MAX_PROPERTIES_LENGTH:
        raise MessageEncodeError(
            f"properties are {props_len} bytes in UTF-8; the stored layout allows at most "
            f"{MAX_PROPERTIES_LENGTH}",
            field="PROPERTIES",
        )
    if born not in (HOST_V4_SIZE, HOST_V6_SIZE):
        raise MessageEncodeError(f"born_host must be 8 or 20 packed bytes, got {born}", field="BORNHOST")
    if store not in (HOST_V4_SIZE, HOST_V6_SIZE):
        raise MessageEncodeError(f"store_host must be 8 or 20 packed bytes, got {store}", field="STOREHOST")
    return (born == HOST_V6_SIZE) | (store == HOST_V6_SIZE) << 1


def stored_body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC: CRC32 of the body as stored, as a non-negative int32 (Java ``UtilAll.crc32``)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def pack_stored_head(
    host_index: int,
    total_size: int,
    body_crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_len: int,
) -> bytes:
    """The fixed part of a record, TOTALSIZE through BODYLENGTH (spec §4.1); the body and
    ``prepare_stored``'s tail follow. Positional, in layout order: it runs under the put lock.

    ``host_index``, ``total_size``, ``body_crc`` and ``sys_flag`` come from ``prepare_stored``
    (the hosts are not checked again). Raises ``MessageEncodeError`` naming a value that does not
    fit its Java type.
    """
    try:
        return _STORED_HEADERS[host_index].pack(
            total_size, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, commit_log_offset,
            sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, body_len,
        )  # fmt: skip
    except struct.error as exc:
        raise MessageEncodeError.out_of_range(
            exc,
            total_size=total_size,
            body_crc=body_crc,
            queue_id=queue_id,
            flag=flag,
            queue_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            store_timestamp=store_timestamp,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
        ) from exc


def _pack_stored_into_py(
    buf: _WriteBuffer,
    pos: int,
    host_index: int,
    total_size: int,
    body_crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes | bytearray | memoryview,
    tail: bytes,
) -> int:
    """``pack_stored_head``'s fixed part, the body and ``prepare_stored``'s tail written at
    ``buf[pos:]``, the first 8 bytes (TOTALSIZE, MAGICCODE) last, so that a reader that sees them
    sees the whole record; returns where the record ends. The commit log's per-send write, under
    its put lock. Raises as ``pack_stored_head``, and ValueError when ``buf`` is too short."""
    head = pack_stored_head(
        host_index, total_size, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
        born_timestamp, born_host, store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
        len(body),
    )  # fmt: skip
    body_at = pos + len(head)
    tail_at = body_at + len(body)
    end = tail_at + len(tail)
    if pos < 0 or end > len(buf):
        raise ValueError(f"a record of {end - pos} bytes at {pos} does not fit a buffer of {len(buf)}")
    buf[pos + 8 : body_at] = head[8:]
    buf[body_at:tail_at] = body
    buf[tail_at:end] = tail
    buf[pos : pos + 8] = head[:8]
    return end


def encode_stored_into(
    buf: _WriteBuffer,
    pos: int,
    *,
    topic: bytes,
    body: bytes | bytearray | memoryview,
    properties: bytes,
    born_host: bytes,
    store_host: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    commit_log_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    store_timestamp: int = 0,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    body_crc: int | None = None,
) -> int:
    """Write one stored record (spec §4.1) at ``buf[pos:]``; returns its size (TOTALSIZE).

    ``buf`` is a segment's mmap, a memoryview or a bytearray (a memoryview is faster: CPython
    assigns bytearray slices on a slower path). ``topic`` and ``properties`` are UTF-8 bytes
    (``properties_to_string(...).encode()``); ``born_host``/``store_host`` come from ``pack_host``
    and set the sysflag's IPv6 bits (the caller's 0x10/0x20 bits are ignored). ``body_crc``
    defaults to ``stored_body_crc(body)``. Check free space first with ``stored_size``.
    Raises ``MessageEncodeError`` for a topic > 127 or properties > 32767 bytes, a bad host size,
    an int that does not fit its Java type, or a record that does not fit ``buf`` at ``pos``; the
    bytes at ``buf[pos:]`` are then unspecified, so do not advance the write position.
    """
    index, size, crc, tail, stored_flag = prepare_stored(
        topic, properties, body, born_host, store_host, sys_flag
    )
    end = pos + size
    if pos < 0 or end > len(buf):
        raise MessageEncodeError(
            f"a {size}-byte record does not fit at position {pos} of a {len(buf)}-byte buffer",
            field="TOTALSIZE",
        )
    head = pack_stored_head(
        index, size, crc if body_crc is None else body_crc, queue_id, flag, queue_offset,
        commit_log_offset, stored_flag, born_timestamp, born_host, store_timestamp, store_host,
        reconsume_times, prepared_transaction_offset, len(body),
    )  # fmt: skip
    body_start = pos + len(head)
    buf[pos:body_start] = head
    buf[body_start : end - len(tail)] = body
    buf[end - len(tail) : end] = tail
    return size


def encode_stored(
    *,
    topic: bytes,
    body: bytes | bytearray | memoryview,
    properties: bytes,
    born_host: bytes,
    store_host: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    commit_log_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    store_timestamp: int = 0,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    body_crc: int | None = None,
) -> bytearray:
    """One stored record as a new bytearray; arguments and errors as ``encode_stored_into``.

    Mutable on purpose: the pre-encode pattern (Java 4.9 ``MessageExtEncoder``) encodes outside
    the put lock, then fills the offsets with ``fill_stored_offsets`` and copies under it.
    """
    record = bytearray(
        stored_size(
            len(body),
            len(topic),
            len(properties),
            len(born_host) == HOST_V6_SIZE,
            len(store_host) == HOST_V6_SIZE,
        )
    )
    with memoryview(record) as view:
        encode_stored_into(
            view,
            0,
            topic=topic,
            body=body,
            properties=properties,
            born_host=born_host,
            store_host=store_host,
            queue_id=queue_id,
            flag=flag,
            queue_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            store_timestamp=store_timestamp,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            body_crc=body_crc,
        )
    return record


def fill_stored_offsets(
    buf: _WriteBuffer, pos: int, *, queue_offset: int, commit_log_offset: int, store_timestamp: int
) -> None:
    """Patch QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP of the record at ``buf[pos:]``.

    For the pre-encode pattern of Java 4.9's ``MessageExtEncoder``: encode outside the put lock,
    then copy and fill these three under it. Raises ``MessageEncodeError`` if a value does not
    fit an int64 or the record is not inside ``buf``.
    """
    size = len(buf)
    if pos < 0 or pos + _SYSFLAG_POS + 4 > size:
        raise MessageEncodeError(f"no record header at position {pos} of a {size}-byte buffer")
    sys_flag = _I32.unpack_from(buf, pos + _SYSFLAG_POS)[0]
    store_ts_pos = (
        pos + _STORE_TIMESTAMP_POS + (_V6_EXTRA if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 0)
    )
    if store_ts_pos + 8 > size:
        raise MessageEncodeError(f"no record header at position {pos} of a {size}-byte buffer")
    try:
        _TWO_I64.pack_into(buf, pos + _QUEUE_OFFSET_POS, queue_offset, commit_log_offset)
        _I64.pack_into(buf, store_ts_pos, store_timestamp)
    except struct.error as exc:
        raise MessageEncodeError.out_of_range(
            exc,
            queue_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            store_timestamp=store_timestamp,
        ) from exc


def encode_blank_into(buf: _WriteBuffer, pos: int, total_size: int) -> int:
    """Write the end-of-segment filler: TOTALSIZE + BLANK_MAGIC_CODE (Java ``CommitLog``).

    Only the 8-byte head is written; ``total_size`` (>= 8) is the whole remaining space, which
    readers skip. Returns ``total_size``. Raises ``MessageEncodeError`` if it does not fit.
    """
    if not BLANK_RECORD_MIN_SIZE <= total_size < 2**31:
        raise MessageEncodeError(
            f"a blank record needs 8 <= total_size < 2**31, got {total_size}", field="TOTALSIZE"
        )
    if pos < 0 or pos + BLANK_RECORD_MIN_SIZE > len(buf):
        raise MessageEncodeError(f"no room for a blank record at position {pos} of a {len(buf)}-byte buffer")
    _SIZE_MAGIC.pack_into(buf, pos, total_size, BLANK_MAGIC_CODE)
    return total_size


def encode_message_ext(msg: MessageExt, *, compute_crc: bool = False) -> bytes:
    """Encode a ``MessageExt`` as a stored record (Java ``MessageDecoder.encode``, no compression).

    Keeps ``msg.body_crc`` unless ``compute_crc``; ``store_size`` is recomputed. Slower than
    ``encode_stored`` (it formats properties and packs hosts); meant for re-stores and tests.
    """
    return bytes(
        encode_stored(
            topic=msg.topic.encode("utf-8"),
            body=msg.body,
            properties=properties_to_string(msg.properties).encode("utf-8"),
            born_host=msg.born_host.packed,
            store_host=msg.store_host.packed,
            queue_id=msg.queue_id,
            flag=msg.flag,
            queue_offset=msg.queue_offset,
            commit_log_offset=msg.commit_log_offset,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            store_timestamp=msg.store_timestamp,
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            body_crc=None if compute_crc else msg.body_crc,
        )
    )


# ---------------------------------------------------------------------------------------------
# Decoding


_SlotSetter: TypeAlias = Callable[[MessageExt, object], None]


def _slot_setters() -> dict[str, _SlotSetter]:
    setters: dict[str, _SlotSetter] = {}
    for f in fields(MessageExt):
        owner = next(klass for klass in MessageExt.__mro__ if f.name in vars(klass))
        setters[f.name] = vars(owner)[f.name].__set__
    return setters


# decode_stored builds MessageExt through the slot descriptors instead of the frozen dataclass
# __init__ (16 object.__setattr__ calls, 3-4x slower): h11's "_parsed" shortcut for values the
# parser made itself. The names are checked at import, so a new field cannot be forgotten.
_SETTERS: Final = _slot_setters()
_set_topic = _SETTERS.pop("topic")
_set_body = _SETTERS.pop("body")
_set_flag = _SETTERS.pop("flag")
_set_properties = _SETTERS.pop("properties")
_set_queue_id = _SETTERS.pop("queue_id")
_set_store_size = _SETTERS.pop("store_size")
_set_queue_offset = _SETTERS.pop("queue_offset")
_set_sys_flag = _SETTERS.pop("sys_flag")
_set_born_timestamp = _SETTERS.pop("born_timestamp")
_set_born_host = _SETTERS.pop("born_host")
_set_store_timestamp = _SETTERS.pop("store_timestamp")
_set_store_host = _SETTERS.pop("store_host")
_set_commit_log_offset = _SETTERS.pop("commit_log_offset")
_set_body_crc = _SETTERS.pop("body_crc")
_set_reconsume_times = _SETTERS.pop("reconsume_times")
_set_prepared_transaction_offset = _SETTERS.pop("prepared_transaction_offset")
if _SETTERS:  # pragma: no cover - a field was added to MessageExt but not to decode_stored
    raise RuntimeError(f"decode_stored does not set MessageExt fields {sorted(_SETTERS)}")
_new_object = object.__new__


def peek_stored(buf: _ReadBuffer, pos: int) -> tuple[int, int]:
    """``(TOTALSIZE, MAGICCODE)`` of the record at ``buf[pos:]``, for recovery scans.

    Compare the magic to ``MESSAGE_MAGIC_CODE``/``BLANK_MAGIC_CODE``; nothing else is checked.
    Raises ``MessageDecodeError`` if fewer than 8 bytes remain.
    """
    if pos < 0 or pos + 8 > len(buf):
        raise MessageDecodeError(
            f"truncated record at offset {pos}: need 8 bytes for TOTALSIZE and MAGICCODE, "
            f"{max(len(buf) - pos, 0)} remain",
            offset=pos,
            field="TOTALSIZE",
        )
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    return total, magic


def _bad(offset: int, field: str, what: str) -> MessageDecodeError:
    return MessageDecodeError(f"bad stored record at offset {offset}: {what}", offset=offset, field=field)


def _decode_stored_py(
    data: _ReadBuffer,
    offset: int = 0,
    *,
    verify_crc: bool = False,
    decompress_max_size: int | None = None,
) -> MessageExt:
    """Decode the stored record at ``data[offset:]`` (spec §4.1); its size is ``.store_size``.

    ``verify_crc`` checks BODYCRC against the body as stored. With ``decompress_max_size`` a
    COMPRESSED body is inflated (at most that many bytes) and the flag cleared in ``sys_flag``;
    otherwise the body is returned as stored, as the broker does.
    Raises ``MessageDecodeError`` (with ``.offset`` and ``.field``) for a truncated record, a bad
    or BLANK magic, a TOTALSIZE out of range or disagreeing with the fields, a bad UTF-8 topic
    or property string, a bad host port, a CRC mismatch or a failed decompression.
    """
    available = len(data) - offset
    if offset < 0 or available < 8:
        raise _bad(offset, "TOTALSIZE", f"truncated: {max(available, 0)} bytes left, need at least 8")
    total, magic = _SIZE_MAGIC.unpack_from(data, offset)
    if magic != MESSAGE_MAGIC_CODE:
        if magic == BLANK_MAGIC_CODE:
            raise _bad(offset, "MAGICCODE", "BLANK_MAGIC_CODE (end-of-segment filler), not a message")
        raise _bad(offset, "MAGICCODE", f"magic code 0x{magic & 0xFFFFFFFF:08X} is not 0xDAA320A7")
    if not MIN_STORED_SIZE <= total <= available:
        raise _bad(
            offset, "TOTALSIZE", f"TOTALSIZE {total} is outside {MIN_STORED_SIZE}..{available} (bytes left)"
        )
    sys_flag = _I32.unpack_from(data, offset + _SYSFLAG_POS)[0]
    index = (sys_flag >> 4) & 3
    if total < MIN_STORED_SIZE + ((index & 1) + (index >> 1)) * _V6_EXTRA:
        raise _bad(offset, "TOTALSIZE", f"TOTALSIZE {total} is too small for the IPv6 hosts in sysflag")
    header = _STORED_HEADERS[index]
    (
        _,
        _,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        _,
        born_timestamp,
        born_raw,
        store_timestamp,
        store_raw,
        reconsume_times,
        prepared_transaction_offset,
        body_len,
    ) = header.unpack_from(data, offset)
    end = offset + total
    pos = offset + header.size
    if not 0 <= body_len <= end - pos - 3:
        raise _bad(offset, "BODYLENGTH", f"BODYLENGTH {body_len} does not fit TOTALSIZE {total}")
    body = data[pos : pos + body_len]
    if type(body) is not bytes:
        body = bytes(body)
    pos += body_len
    topic_len = data[pos]
    pos += 1
    if topic_len > MAX_TOPIC_LENGTH or pos + topic_len + 2 > end:
        raise _bad(offset, "TOPICLENGTH", f"TOPICLENGTH {topic_len} does not fit TOTALSIZE {total}")
    try:
        topic = str(data[pos : pos + topic_len], "utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(offset, "TOPIC", f"topic is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    pos += topic_len
    props_len = _I16.unpack_from(data, pos)[0]
    pos += 2
    if pos + props_len != end:
        raise _bad(
            offset,
            "PROPERTIESLENGTH",
            f"PROPERTIESLENGTH {props_len} ends the record at {pos + props_len}, "
            f"TOTALSIZE {total} ends it at {end}",
        )
    properties: dict[str, str]
    if props_len:
        try:
            properties = string_to_properties(str(data[pos:end], "utf-8"))
        except UnicodeDecodeError as exc:
            raise _bad(
                offset, "PROPERTIES", f"properties are not UTF-8 ({exc.reason} at byte {exc.start})"
            ) from None
    else:
        properties = {}
    try:
        born_host = unpack_host(born_raw)
    except MessageDecodeError as exc:
        raise _bad(offset, "BORNHOST", str(exc)) from None
    try:
        store_host = unpack_host(store_raw)
    except MessageDecodeError as exc:
        raise _bad(offset, "STOREHOST", str(exc)) from None
    if verify_crc:
        crc = stored_body_crc(body)
        if crc != body_crc:
            raise _bad(offset, "BODYCRC", f"BODYCRC {body_crc} != CRC32 of the body {crc}")
    if decompress_max_size is not None and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        kind = sys_flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR
        if kind not in (0, MessageSysFlag.COMPRESSION_ZLIB_TYPE):
            raise _bad(offset, "SYSFLAG", f"compression type 0x{kind:X} is not supported (zlib only)")
        try:
            body = decompress_body(body, decompress_max_size)
        except MessageDecodeError as exc:
            raise _bad(offset, "BODY", str(exc)) from None
        sys_flag &= ~MessageSysFlag.COMPRESSED_FLAG
    msg: MessageExt = _new_object(MessageExt)
    _set_topic(msg, topic)
    _set_body(msg, body)
    _set_flag(msg, flag)
    _set_properties(msg, properties)
    _set_queue_id(msg, queue_id)
    _set_store_size(msg, total)
    _set_queue_offset(msg, queue_offset)
    _set_sys_flag(msg, sys_flag)
    _set_born_timestamp(msg, born_timestamp)
    _set_born_host(msg, born_host)
    _set_store_timestamp(msg, store_timestamp)
    _set_store_host(msg, store_host)
    _set_commit_log_offset(msg, commit_log_offset)
    _set_body_crc(msg, body_crc)
    _set_reconsume_times(msg, reconsume_times)
    _set_prepared_transaction_offset(msg, prepared_transaction_offset)
    return msg


def iter_stored(
    data: _ReadBuffer, *, verify_crc: bool = False, decompress_max_size: int | None = None
) -> Iterator[MessageExt]:
    """Yield every record of a pull body (spec §4.9), which must end exactly after the last one.

    Raises ``MessageDecodeError`` at the first bad record, including trailing bytes that are
    not a whole record (the C++ client would misread them) and BLANK records.
    """
    pos = 0
    size = len(data)
    while pos < size:
        msg = _decode_stored_py(data, pos, verify_crc=verify_crc, decompress_max_size=decompress_max_size)
        pos += msg.store_size
        yield msg


def _decode_stored_all_py(
    data: _ReadBuffer, *, verify_crc: bool = False, decompress_max_size: int | None = None
) -> list[MessageExt]:
    """``list(iter_stored(...))``: all records of a pull body, or ``MessageDecodeError``."""
    return list(iter_stored(data, verify_crc=verify_crc, decompress_max_size=decompress_max_size))


# ``decode_stored`` / ``decode_stored_all``: the pure functions above, or their compiled twins
# (_stored_c.pyx) where they are built; the pure ones stay the reference.
decode_stored: Callable[..., MessageExt] = _decode_stored_py
decode_stored_all: Callable[..., list[MessageExt]] = _decode_stored_all_py


def _bind_stored_c(module: ModuleType, fallback: Callable[..., MessageExt]) -> None:
    """Give the compiled decoder what it calls: ``fallback`` for the unusual, and the helpers."""
    module.bind(
        fallback, string_to_properties, unpack_host, functools.partial(_new_object, MessageExt),
        (_set_topic, _set_body, _set_flag, _set_properties, _set_queue_id, _set_store_size, _set_queue_offset,
         _set_sys_flag, _set_born_timestamp, _set_born_host, _set_store_timestamp, _set_store_host,
         _set_commit_log_offset, _set_body_crc, _set_reconsume_times, _set_prepared_transaction_offset),
    )  # fmt: skip


# ``pack_stored_into``: likewise, ``_pack_stored_into_py`` or its compiled twin.
pack_stored_into: Callable[..., int] = _pack_stored_into_py
_stored_c = load_compiled("finchmq.protocol._stored_c")
if _stored_c is not None:
    _bind_stored_c(_stored_c, _decode_stored_py)
    _stored_c.bind_pack(_pack_stored_into_py)
    pack_stored_into = _stored_c.pack_stored_into
    decode_stored = _stored_c.decode_stored
    decode_stored_all = _stored_c.decode_stored_all
