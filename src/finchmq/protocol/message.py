"""Messages: the values (``Message``, ``MessageExt``, ``MessageQueue``) and every byte layout they take.

Owns (spec §4): the stored commit-log record (§4.1), sysflag bits (§4.3), the property string
(§4.4), the tag hash (§4.5), the batch body (§4.6), offset message ids and UNIQ_KEY (§4.7), and
zlib bodies. Imports: the standard library only; no I/O of any kind.

Strategy:
    Values are frozen, slotted dataclasses (h11 events); ``with_*`` helpers return copies, so a
    message handed to a producer or the store cannot change under it. Layout code works on
    plain ``bytes``/buffers with precompiled big-endian structs, as Java's ``ByteBuffer`` does.
    The store's hot path never builds a ``MessageExt``. A record is packed by one pair of
    functions, whoever writes it: ``prepare_stored`` (checks, TOTALSIZE, BODYCRC, the bytes after
    the body) and ``pack_stored_head`` (the fixed part, once offsets and store time are known).
    ``encode_stored_into`` joins them into a buffer; the commit log calls them around its put
    lock and writes the parts into the segment itself (tests/store/test_commit_log_layout.py
    pins its bytes to ``encode_stored``'s).
    Decoders check every length against the record and the buffer before reading, so any input
    yields a value or a ``MessageDecodeError`` naming the offset, the field and the value.
    Encoders refuse what the layout cannot hold (topic > 127 bytes, properties > 32767 bytes,
    ints that do not fit Java's types) with ``MessageEncodeError``; they never write a corrupt record.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import os
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Final, NamedTuple, Self, TypeAlias, TypeVar

from .codes import ResponseCode
from .errors import LocalProtocolError, RemoteProtocolError

if TYPE_CHECKING:
    import mmap

__all__ = [
    "BLANK_MAGIC_CODE",
    "BLANK_RECORD_MIN_SIZE",
    "KEY_SEPARATOR",
    "MAX_PROPERTIES_LENGTH",
    "MAX_TOPIC_LENGTH",
    "MESSAGE_MAGIC_CODE",
    "MIN_STORED_SIZE",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "RESERVED_PROPERTY_NAMES",
    "BatchItem",
    "HostAddress",
    "Message",
    "MessageConst",
    "MessageDecodeError",
    "MessageEncodeError",
    "MessageExt",
    "MessageQueue",
    "MessageSysFlag",
    "OffsetMsgId",
    "StoredLayout",
    "UniqueKeyGenerator",
    "compress_body",
    "create_offset_msg_id",
    "decode_batch",
    "decode_offset_msg_id",
    "decode_stored",
    "decode_stored_all",
    "decompress_body",
    "encode_batch",
    "encode_blank_into",
    "encode_message_ext",
    "encode_stored",
    "encode_stored_into",
    "fill_stored_offsets",
    "iter_stored",
    "offset_msg_id_from_packed",
    "pack_host",
    "pack_stored_head",
    "parse_unique_key_timestamp",
    "peek_stored",
    "prepare_stored",
    "properties_to_string",
    "stored_body_crc",
    "stored_size",
    "stored_sys_flag",
    "string_to_properties",
    "tags_hash_code",
    "unpack_host",
]

_ReadBuffer: TypeAlias = "bytes | bytearray | memoryview | mmap.mmap"
_WriteBuffer: TypeAlias = "bytearray | memoryview | mmap.mmap"


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; orders as Java's ``MessageQueue.compareTo``."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


# ---------------------------------------------------------------------------------------------
# Errors


class MessageDecodeError(RemoteProtocolError):
    """Bytes that are not a valid stored record, batch body, zlib body or message id.

    ``offset`` is the byte position of the bad record or batch item in the buffer given to the
    decoder (None when no buffer is involved), ``field`` the layout field at fault (``"TOTALSIZE"``,
    ``"BODYCRC"``...) and ``index`` the batch item number. A broker answers ``MESSAGE_ILLEGAL``.
    """

    offset: int | None
    field: str | None
    index: int | None

    def __init__(
        self,
        msg: str,
        *,
        offset: int | None = None,
        field: str | None = None,
        index: int | None = None,
        response_code: ResponseCode = ResponseCode.MESSAGE_ILLEGAL,
    ) -> None:
        super().__init__(msg, response_code)
        self.offset = offset
        self.field = field
        self.index = index


class MessageEncodeError(LocalProtocolError):
    """A message that the layout cannot hold (too long, a value that does not fit, bad separators).

    ``field`` names the offending field or property, ``index`` the batch item number.
    """

    field: str | None
    index: int | None

    def __init__(
        self,
        msg: str,
        *,
        field: str | None = None,
        index: int | None = None,
        response_code: ResponseCode = ResponseCode.MESSAGE_ILLEGAL,
    ) -> None:
        super().__init__(msg, response_code)
        self.field = field
        self.index = index


# ---------------------------------------------------------------------------------------------
# Constants


class MessageConst:
    """Property keys (Java ``common/message/MessageConst.java``, 4.9.x; spec §4.4)."""

    PROPERTY_KEYS: Final = "KEYS"
    PROPERTY_TAGS: Final = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
    PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
    PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
    PROPERTY_BUYER_ID: Final = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG: Final = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
    PROPERTY_MSG_REGION: Final = "MSG_REGION"
    PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    PROPERTY_EXTEND_UNIQ_INFO: Final = "EXTEND_UNIQ_INFO"
    PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
    PROPERTY_INNER_NUM: Final = "INNER_NUM"
    PROPERTY_INNER_BASE: Final = "INNER_BASE"
    DUP_INFO: Final = "DUP_INFO"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_ID: Final = "__transactionId__"
    PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_INSTANCE_ID: Final = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL: Final = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER: Final = "CLUSTER"
    PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
    PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
    PROPERTY_INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
    PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"

    KEY_SEPARATOR: Final = " "


KEY_SEPARATOR: Final = " "  # MessageConst.KEY_SEPARATOR: KEYS holds space-separated keys
NAME_VALUE_SEPARATOR: Final = "\x01"  # MessageDecoder.NAME_VALUE_SEPARATOR
PROPERTY_SEPARATOR: Final = "\x02"  # MessageDecoder.PROPERTY_SEPARATOR

# Java MessageConst.STRING_HASH_SET: the names Message.putUserProperty refuses (4.x entries).
RESERVED_PROPERTY_NAMES: Final = frozenset(
    {
        MessageConst.PROPERTY_TRACE_SWITCH,
        MessageConst.PROPERTY_MSG_REGION,
        MessageConst.PROPERTY_KEYS,
        MessageConst.PROPERTY_TAGS,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL,
        MessageConst.PROPERTY_RETRY_TOPIC,
        MessageConst.PROPERTY_REAL_TOPIC,
        MessageConst.PROPERTY_REAL_QUEUE_ID,
        MessageConst.PROPERTY_TRANSACTION_PREPARED,
        MessageConst.PROPERTY_PRODUCER_GROUP,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_BUYER_ID,
        MessageConst.PROPERTY_ORIGIN_MESSAGE_ID,
        MessageConst.PROPERTY_TRANSFER_FLAG,
        MessageConst.PROPERTY_CORRECTION_FLAG,
        MessageConst.PROPERTY_MQ2_FLAG,
        MessageConst.PROPERTY_RECONSUME_TIME,
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PROPERTY_MAX_RECONSUME_TIMES,
        MessageConst.PROPERTY_CONSUME_START_TIMESTAMP,
        MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES,
        MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
        MessageConst.DUP_INFO,
        MessageConst.PROPERTY_EXTEND_UNIQ_INFO,
        MessageConst.PROPERTY_INSTANCE_ID,
        MessageConst.PROPERTY_CORRELATION_ID,
        MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        MessageConst.PROPERTY_MESSAGE_TTL,
        MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
        MessageConst.PROPERTY_PUSH_REPLY_TIME,
        MessageConst.PROPERTY_CLUSTER,
        MessageConst.PROPERTY_MESSAGE_TYPE,
        MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    }
)


class MessageSysFlag:
    """SYSFLAG bits of a stored record (Java ``common/sysflag/MessageSysFlag.java``; spec §4.3)."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED_TYPE: Final = 0x4
    TRANSACTION_COMMIT_TYPE: Final = 0x8
    TRANSACTION_ROLLBACK_TYPE: Final = 0xC  # also the mask of the transaction bits
    BORNHOST_V6_FLAG: Final = 0x10
    STOREHOSTADDRESS_V6_FLAG: Final = 0x20
    NEED_UNWRAP_FLAG: Final = 0x40
    INNER_BATCH_FLAG: Final = 0x80
    COMPRESSION_LZ4_TYPE: Final = 0x100
    COMPRESSION_ZSTD_TYPE: Final = 0x200
    COMPRESSION_ZLIB_TYPE: Final = 0x300
    COMPRESSION_TYPE_COMPARATOR: Final = 0x700  # mask of the compression type bits

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        return flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @staticmethod
    def reset_transaction_value(flag: int, transaction_type: int) -> int:
        return (flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | transaction_type

    @staticmethod
    def clear_compressed_flag(flag: int) -> int:
        return flag & ~MessageSysFlag.COMPRESSED_FLAG

    @staticmethod
    def get_compression_type(flag: int) -> int:
        """The compression type bits (0 means zlib for 4.x clients)."""
        return flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR

    @staticmethod
    def check(flag: int, expected: int) -> bool:
        return flag & expected != 0


MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7, RocketMQ MessageDecoder.MESSAGE_MAGIC_CODE
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194, RocketMQ CommitLog.BLANK_MAGIC_CODE
MAX_TOPIC_LENGTH: Final = 127  # bytes; TOPICLENGTH is one signed byte
MAX_PROPERTIES_LENGTH: Final = 32767  # bytes; PROPERTIESLENGTH is an int16 (Short.MAX_VALUE)
MIN_STORED_SIZE: Final = 91  # CommitLog.calMsgLength with IPv4 hosts and empty body/topic/props
BLANK_RECORD_MIN_SIZE: Final = 8  # CommitLog.END_FILE_MIN_BLANK_LENGTH: TOTALSIZE + MAGICCODE

_V6_EXTRA: Final = 12  # an IPv6 host takes 16 + 4 bytes instead of 4 + 4
_HOST_V4_SIZE: Final = 8
_HOST_V6_SIZE: Final = 20
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
_BATCH_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE MAGICCODE(0) BODYCRC(0) FLAG BODYLENGTH
_BATCH_MIN_SIZE: Final = _BATCH_HEAD.size + 2
_BYTE: Final = tuple(bytes((i,)) for i in range(256))


class StoredLayout:
    """Where the fields of a stored record sit (spec §4.1), all derived from one field table, for
    the encoder and decoder here and for the commit log (which patches batch records in place and
    scans the log on recovery). Positions after BORNHOST move by ``V6_EXTRA`` when the born host
    is IPv6 (``MessageSysFlag.BORNHOST_V6_FLAG``)."""

    SIZE_MAGIC: Final = _SIZE_MAGIC  # TOTALSIZE MAGICCODE
    HEAD_V4: Final = _STORED_HEADERS[0]  # the fixed part up to BODYLENGTH, IPv4 hosts
    # The fixed part as recovery checks it, by host sizes (born_v6 | store_v6 << 1): TOTALSIZE
    # MAGICCODE BODYCRC PHYSICALOFFSET SYSFLAG STORETIMESTAMP BODYLENGTH; TOPICLENGTH follows the body.
    SCAN_HEADS: Final = _SCAN_HEADERS
    BATCH_ITEM_HEAD: Final = (
        _BATCH_HEAD  # one message of a batch body: TOTALSIZE MAGICCODE BODYCRC FLAG BODYLENGTH
    )
    BATCH_ITEM_MIN_SIZE: Final = _BATCH_MIN_SIZE
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


_INT32_RANGE: Final = range(-(2**31), 2**31)
_INT64_RANGE: Final = range(-(2**63), 2**63)


# ---------------------------------------------------------------------------------------------
# Properties and tags


def properties_to_string(
    properties: Mapping[str, str], *, without: str | None = None, trusted: bool = False
) -> str:
    """``key \\x01 value \\x02 ...`` without a trailing separator (Java 4.9
    ``messageProperties2String``), leaving out the property named ``without`` if given.

    Raises ``MessageEncodeError`` for a pair that would not read back: an empty key or value, a
    key holding ``\\x01``/``\\x02``, a value holding ``\\x02``, or a non-string. ``trusted`` skips
    that check: for properties known to be writable (parsed by ``string_to_properties``, plus
    values checked by the caller), on the per-send path.
    """
    if not trusted:
        # Checked all at once on the joined texts (one pass in C), pair by pair only to say
        # which pair is bad.
        keys = list(properties)
        values = list(properties.values())
        try:
            key_text = "".join(keys)
            value_text = "".join(values)
        except TypeError:
            _check_properties(properties)
            raise  # pragma: no cover - _check_properties raised
        if (
            NAME_VALUE_SEPARATOR in key_text
            or PROPERTY_SEPARATOR in key_text
            or PROPERTY_SEPARATOR in value_text
            or "" in keys
            or "" in values
        ):
            _check_properties(properties)
    pairs = properties.items()
    if without is not None and without in properties:
        return PROPERTY_SEPARATOR.join([NAME_VALUE_SEPARATOR.join(kv) for kv in pairs if kv[0] != without])
    return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, pairs))


def _check_properties(properties: Mapping[str, str]) -> None:
    """Raise ``MessageEncodeError`` for the first pair ``properties_to_string`` cannot write."""
    for key, value in properties.items():
        if type(key) is not str or not key or NAME_VALUE_SEPARATOR in key or PROPERTY_SEPARATOR in key:
            raise MessageEncodeError(
                f"property name {key!r} must be a non-empty string without \\x01 or \\x02", field=str(key)
            )
        if type(value) is not str or not value or PROPERTY_SEPARATOR in value:
            raise MessageEncodeError(
                f"property {key}={value!r}: the value must be a non-empty string without \\x02", field=key
            )
    raise MessageEncodeError(f"properties {properties!r} cannot be written")


def string_to_properties(text: str) -> dict[str, str]:
    """Parse a property string as Java 4.9 ``MessageDecoder.string2messageProperties`` does.

    Empty segments, segments without ``\\x01`` and segments with an empty name or value (so all
    shorter than 3 characters) are skipped; cpp's trailing ``\\x02`` is accepted. The value is
    everything after the first ``\\x01``; a repeated name keeps its last value.
    """
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        key, _, value = item.partition(NAME_VALUE_SEPARATOR)
        if key and value:
            result[key] = value
    return result


def tags_hash_code(tags: str | None) -> int:
    """Java ``String.hashCode`` of the tags as a signed int32, 0 for None or "" (spec §4.5).

    The consume queue stores it as the tagsCode; e.g. ``TagA`` -> 2598919, ``*`` -> 42.
    """
    if not tags:
        return 0
    return _java_string_hash(tags)


@functools.lru_cache(maxsize=4096)
def _java_string_hash(text: str) -> int:
    # h = 31*h + unit over UTF-16 code units; a non-BMP character is a surrogate pair.
    if text.isascii():
        units: Iterable[int] = text.encode("ascii")
    else:
        data = text.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(data) // 2}H", data)
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# ---------------------------------------------------------------------------------------------
# Hosts


class HostAddress(NamedTuple):
    """An IP literal and a port, as a stored record's BORNHOST/STOREHOST (Java ``InetSocketAddress``)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def packed(self) -> bytes:
        """IP (4 or 16 bytes) + port (int32): the record's host field (see ``pack_host``)."""
        return pack_host(self.host, self.port)

    @classmethod
    def parse(cls, address: str) -> HostAddress:
        """Parse ``"1.2.3.4:10911"`` or ``"[::1]:10911"``; raises ``MessageEncodeError``."""
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise MessageEncodeError(f"address {address!r} is not 'ip:port'", field="address")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        packed = pack_host(host, int(port))
        return unpack_host(packed)


@functools.lru_cache(maxsize=1024, typed=True)  # typed: 1.0 or True must not hit 1's entry
def pack_host(host: str, port: int) -> bytes:
    """The 8-byte (IPv4) or 20-byte (IPv6) host field: address bytes + port as int32.

    ``::ffff:a.b.c.d`` is stored as IPv4 (spec §4.1: the C++ client only reads IPv4 hosts).
    Raises ``MessageEncodeError`` for a host that is not an IP literal (no DNS here) or a port
    outside 0..65535.
    """
    if type(port) is not int or not 0 <= port <= 0xFFFF:
        raise MessageEncodeError(f"port {port!r} is outside 0..65535", field="port")
    try:
        address = ipaddress.ip_address(host)
    except ValueError as exc:
        raise MessageEncodeError(f"host {host!r} is not an IPv4 or IPv6 literal", field="host") from exc
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.packed + _I32.pack(port)


_HOST_CACHE: dict[bytes, HostAddress] = {}
_HOST_CACHE_MAX: Final = 4096


def unpack_host(packed: bytes) -> HostAddress:
    """Inverse of ``pack_host``; raises ``MessageDecodeError`` for a bad length or port."""
    cached = _HOST_CACHE.get(packed)
    if cached is not None:
        return cached
    size = len(packed)
    if size == _HOST_V4_SIZE:
        host = f"{packed[0]}.{packed[1]}.{packed[2]}.{packed[3]}"
    elif size == _HOST_V6_SIZE:
        host = ipaddress.IPv6Address(packed[:16]).compressed
    else:
        raise MessageDecodeError(f"a host field is 8 or 20 bytes, got {size}")
    port = _I32.unpack_from(packed, size - 4)[0]
    if not 0 <= port <= 0xFFFF:
        raise MessageDecodeError(f"host {host} has port {port}, outside 0..65535")
    result = HostAddress(host, port)
    if len(_HOST_CACHE) >= _HOST_CACHE_MAX:
        _HOST_CACHE.clear()
    _HOST_CACHE[bytes(packed)] = result
    return result


_ANY_HOST: Final = HostAddress("0.0.0.0", 0)


# ---------------------------------------------------------------------------------------------
# Message values


@dataclass(frozen=True, slots=True)
class Message:
    """A message as a producer sends it (Java ``Message``).

    Immutable: ``with_property`` and friends return a copy, so a message can be shared between a
    caller, a retrying producer and the store without defensive copies. ``properties`` is taken
    as given (not copied); do not mutate a mapping after handing it over.
    ``Message.create`` mirrors Java's constructor (TAGS, KEYS, WAIT).
    """

    topic: str
    body: bytes = b""
    _: KW_ONLY
    flag: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.body) is not bytes:
            object.__setattr__(self, "body", bytes(self.body))

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> Self:
        """A message with Java's constructor defaults: TAGS and KEYS when non-empty, WAIT always."""
        props = dict(properties) if properties else {}
        if tags:
            props[MessageConst.PROPERTY_TAGS] = tags
        joined = _join_keys(keys) if keys is not None else ""
        if joined:
            props[MessageConst.PROPERTY_KEYS] = joined
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        return cls(topic, body, flag=flag, properties=props)

    # Accessors (Java Message getters)

    @property
    def tags(self) -> str | None:
        """The TAGS property, or None."""
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def tags_code(self) -> int:
        """``tags_hash_code(self.tags)``: the consume queue's tagsCode."""
        return tags_hash_code(self.properties.get(MessageConst.PROPERTY_TAGS))

    @property
    def keys(self) -> str | None:
        """The KEYS property (space-separated keys), or None."""
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @property
    def key_list(self) -> list[str]:
        """KEYS split on ``KEY_SEPARATOR``, empty entries dropped (what the index stores)."""
        keys = self.properties.get(MessageConst.PROPERTY_KEYS)
        return [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []

    @property
    def delay_time_level(self) -> int:
        """DELAY as an int, 0 when absent; raises ``MessageDecodeError`` if it is not an integer."""
        value = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if value is None:
            return 0
        try:
            return int(value)
        except ValueError:
            raise MessageDecodeError(
                f"property DELAY={value!r} is not an integer", field=MessageConst.PROPERTY_DELAY_TIME_LEVEL
            ) from None

    @property
    def wait_store_msg_ok(self) -> bool:
        """WAIT: true when absent, else Java ``Boolean.parseBoolean`` (case-insensitive "true")."""
        value = self.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        return value is None or value.lower() == "true"

    @property
    def unique_key(self) -> str | None:
        """UNIQ_KEY, the client-generated id (Java ``MessageClientIDSetter.getUniqID``)."""
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    # Copy-on-write helpers (Java setters)

    def with_property(self, name: str, value: str) -> Self:
        """A copy with one property set (Java ``putProperty``, no name check)."""
        props = dict(self.properties)
        props[name] = value
        return replace(self, properties=props)

    def with_properties(self, properties: Mapping[str, str]) -> Self:
        """A copy with several properties set (existing ones kept unless overwritten)."""
        return replace(self, properties={**self.properties, **properties})

    def without_property(self, name: str) -> Self:
        """A copy without ``name`` (Java ``clearProperty``); ``self`` if it is absent."""
        if name not in self.properties:
            return self
        return replace(self, properties={k: v for k, v in self.properties.items() if k != name})

    def with_user_property(self, name: str, value: str) -> Self:
        """``with_property`` that refuses reserved and blank names (Java ``putUserProperty``)."""
        if name in RESERVED_PROPERTY_NAMES:
            raise MessageEncodeError(f"property name {name!r} is reserved by RocketMQ", field=name)
        if not name.strip() or not value.strip():
            raise MessageEncodeError(
                f"user property {name!r}={value!r}: name and value must not be blank", field=name
            )
        return self.with_property(name, value)

    def with_tags(self, tags: str) -> Self:
        """A copy with TAGS set."""
        return self.with_property(MessageConst.PROPERTY_TAGS, tags)

    def with_keys(self, keys: str | Iterable[str]) -> Self:
        """KEYS from a string or an iterable joined with ``KEY_SEPARATOR`` (Java ``setKeys``)."""
        return self.with_property(MessageConst.PROPERTY_KEYS, _join_keys(keys))

    def with_delay_time_level(self, level: int) -> Self:
        """A copy with DELAY set (1..18: 1s 5s 10s 30s 1m ... 2h)."""
        return self.with_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL, str(level))

    def with_wait_store_msg_ok(self, wait: bool) -> Self:
        """A copy with WAIT set (answer only once stored, or at once)."""
        return self.with_property(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, "true" if wait else "false")


_M = TypeVar("_M", bound=Message)


def _join_keys(keys: str | Iterable[str]) -> str:
    return keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageExt(Message):
    """A message as stored: everything a commit-log record holds (Java ``MessageExt``).

    ``born_host``/``store_host`` are ``HostAddress`` values; ``store_size`` and ``body_crc``
    describe the record as stored even when the decoder inflated a compressed body.
    ``msg_id`` is the offset message id (what Java's server side calls msgId); ``client_msg_id``
    is what clients show: UNIQ_KEY when present, else the offset id (spec §4.2, §4.7).
    """

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = _ANY_HOST
    store_timestamp: int = 0
    store_host: HostAddress = _ANY_HOST
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def msg_id(self) -> str:
        """The offset message id: STOREHOST + PHYSICALOFFSET in upper-case hex."""
        return offset_msg_id_from_packed(self.store_host.packed, self.commit_log_offset)

    @property
    def client_msg_id(self) -> str:
        """UNIQ_KEY if present, else ``msg_id`` (Java ``MessageClientExt.getMsgId``)."""
        uniq = self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return uniq if uniq else self.msg_id


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


# ---------------------------------------------------------------------------------------------
# Stored record: encoding


def stored_size(
    body_len: int, topic_len: int, props_len: int, born_v6: bool = False, store_v6: bool = False
) -> int:
    """TOTALSIZE of a record (Java ``CommitLog.calMsgLength``): 91 + lengths, + 12 per IPv6 host."""
    return MIN_STORED_SIZE + body_len + topic_len + props_len + (born_v6 + store_v6) * _V6_EXTRA


def prepare_stored(
    topic: bytes, properties: bytes, body: bytes | bytearray | memoryview, born_host: bytes, store_host: bytes
) -> tuple[int, int, int, bytes]:
    """What a record holds apart from its place and time: ``(host_index, TOTALSIZE, BODYCRC,
    tail)``, for ``pack_stored_head`` (the fixed part) and the bytes after the body (TOPICLENGTH,
    topic, PROPERTIESLENGTH, properties). One half of the one packer every writer uses
    (``encode_stored_into``, the commit log's in-place append and its batch encoder); the commit
    log calls it before the put lock and ``pack_stored_head`` under it.

    ``topic``/``properties`` are UTF-8, the hosts from ``pack_host``; ``host_index`` is
    ``born_v6 | store_v6 << 1`` (the SYSFLAG IPv6 bits shifted down by 4). Raises
    ``MessageEncodeError`` (``field`` TOPIC, PROPERTIES, BORNHOST or STOREHOST) for a topic over
    127 bytes, properties over 32767 bytes or a host field that is not 8 or 20 bytes.
    """
    topic_len = len(topic)
    props_len = len(properties)
    born = len(born_host)
    store = len(store_host)
    if (
        topic_len > MAX_TOPIC_LENGTH
        or props_len > MAX_PROPERTIES_LENGTH
        or born != _HOST_V4_SIZE
        or store != _HOST_V4_SIZE
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
    if born not in (_HOST_V4_SIZE, _HOST_V6_SIZE):
        raise MessageEncodeError(f"born_host must be 8 or 20 packed bytes, got {born}", field="BORNHOST")
    if store not in (_HOST_V4_SIZE, _HOST_V6_SIZE):
        raise MessageEncodeError(f"store_host must be 8 or 20 packed bytes, got {store}", field="STOREHOST")
    return (born == _HOST_V6_SIZE) | (store == _HOST_V6_SIZE) << 1


def stored_sys_flag(sys_flag: int, host_index: int) -> int:
    """SYSFLAG as stored: the IPv6 host bits set from the host sizes (``prepare_stored``'s
    ``host_index``), whatever the caller's 0x10/0x20 bits said, or the record would not parse back."""
    return (sys_flag & ~0x30) | (host_index << 4)


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

    ``host_index``, ``total_size`` and ``body_crc`` come from ``prepare_stored`` (the hosts are
    not checked again); ``host_index`` sets the IPv6 bits of ``sys_flag`` (``stored_sys_flag``).
    Raises ``MessageEncodeError`` naming a value that does not fit its Java type.
    """
    try:
        return _STORED_HEADERS[host_index].pack(
            total_size, MESSAGE_MAGIC_CODE, body_crc, queue_id, flag, queue_offset, commit_log_offset,
            stored_sys_flag(sys_flag, host_index), born_timestamp, born_host, store_timestamp,
            store_host, reconsume_times, prepared_transaction_offset, body_len,
        )  # fmt: skip
    except struct.error as exc:
        raise _range_error(
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


def _range_error(exc: Exception, **fields: object) -> MessageEncodeError:
    """Name the field a ``struct.error`` was about (slow path only)."""
    for name, value in fields.items():
        wide = name.endswith(("offset", "timestamp"))
        valid = _INT64_RANGE if wide else _INT32_RANGE
        if not isinstance(value, int):
            return MessageEncodeError(f"{name}={value!r} is not an int", field=name)
        if value not in valid:
            kind = "long (int64)" if wide else "int (int32)"
            return MessageEncodeError(f"{name}={value} does not fit a Java {kind}", field=name)
    return MessageEncodeError(f"cannot encode stored record: {exc}")


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
    index, size, crc, tail = prepare_stored(topic, properties, body, born_host, store_host)
    end = pos + size
    if pos < 0 or end > len(buf):
        raise MessageEncodeError(
            f"a {size}-byte record does not fit at position {pos} of a {len(buf)}-byte buffer",
            field="TOTALSIZE",
        )
    head = pack_stored_head(
        index, size, crc if body_crc is None else body_crc, queue_id, flag, queue_offset,
        commit_log_offset, sys_flag, born_timestamp, born_host, store_timestamp, store_host,
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
            len(born_host) == _HOST_V6_SIZE,
            len(store_host) == _HOST_V6_SIZE,
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
        raise _range_error(
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
# Stored record: decoding


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


def decode_stored(
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
        msg = decode_stored(data, pos, verify_crc=verify_crc, decompress_max_size=decompress_max_size)
        pos += msg.store_size
        yield msg


def decode_stored_all(
    data: _ReadBuffer, *, verify_crc: bool = False, decompress_max_size: int | None = None
) -> list[MessageExt]:
    """``list(iter_stored(...))``: all records of a pull body, or ``MessageDecodeError``."""
    return list(iter_stored(data, verify_crc=verify_crc, decompress_max_size=decompress_max_size))


# ---------------------------------------------------------------------------------------------
# Batch body


class BatchItem(NamedTuple):
    """One message of a batch body: the only fields the layout carries."""

    flag: int
    body: bytes
    properties: dict[str, str]


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The batch body of SEND_BATCH_MESSAGE (spec §4.6; Java ``MessageDecoder.encodeMessages``).

    Each item: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH + body, int16 length +
    properties. Raises ``MessageEncodeError`` naming the item index (properties > 32767 bytes,
    bad property pairs, a flag that does not fit an int32).
    """
    parts: list[bytes] = []
    for index, msg in enumerate(messages):
        try:
            props = properties_to_string(msg.properties).encode("utf-8")
        except MessageEncodeError as exc:
            raise MessageEncodeError(f"batch item {index}: {exc}", field=exc.field, index=index) from exc
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise MessageEncodeError(
                f"batch item {index}: properties are {props_len} bytes in UTF-8; at most "
                f"{MAX_PROPERTIES_LENGTH} fit",
                field="PROPERTIES",
                index=index,
            )
        body = msg.body
        body_len = len(body)
        try:
            head = _BATCH_HEAD.pack(_BATCH_MIN_SIZE + body_len + props_len, 0, 0, msg.flag, body_len)
        except struct.error as exc:
            raise MessageEncodeError(
                f"batch item {index}: flag={msg.flag!r} or body length {body_len} does not fit an int32",
                field="FLAG",
                index=index,
            ) from exc
        parts += (head, body, _I16.pack(props_len), props)
    return b"".join(parts)


def decode_batch(body: _ReadBuffer) -> list[BatchItem]:
    """Split a batch body into ``(flag, body, properties)`` items (spec §4.6).

    MAGICCODE and BODYCRC are ignored, as Java's broker does. Raises ``MessageDecodeError``
    naming the item index and offset for a truncated item, a TOTALSIZE out of range, a
    BODYLENGTH or PROPERTIESLENGTH that disagrees with TOTALSIZE, or properties that are not UTF-8.
    """
    items: list[BatchItem] = []
    pos = 0
    size = len(body)
    index = 0
    while pos < size:
        available = size - pos
        if available < _BATCH_MIN_SIZE:
            raise _bad_item(
                index, pos, "TOTALSIZE", f"truncated: {available} bytes left, need {_BATCH_MIN_SIZE}"
            )
        total, _, _, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        if not _BATCH_MIN_SIZE <= total <= available:
            raise _bad_item(
                index, pos, "TOTALSIZE", f"TOTALSIZE {total} is outside {_BATCH_MIN_SIZE}..{available}"
            )
        end = pos + total
        start = pos + _BATCH_HEAD.size
        if not 0 <= body_len <= total - _BATCH_MIN_SIZE:
            raise _bad_item(index, pos, "BODYLENGTH", f"BODYLENGTH {body_len} does not fit TOTALSIZE {total}")
        item_body = body[start : start + body_len]
        if type(item_body) is not bytes:
            item_body = bytes(item_body)
        start += body_len
        props_len = _I16.unpack_from(body, start)[0]
        start += 2
        if start + props_len != end:
            raise _bad_item(
                index,
                pos,
                "PROPERTIESLENGTH",
                f"PROPERTIESLENGTH {props_len} ends the item at {start + props_len}, TOTALSIZE at {end}",
            )
        try:
            props = string_to_properties(str(body[start:end], "utf-8")) if props_len else {}
        except UnicodeDecodeError as exc:
            raise _bad_item(index, pos, "PROPERTIES", f"properties are not UTF-8 ({exc.reason})") from None
        items.append(BatchItem(flag, item_body, props))
        pos = end
        index += 1
    return items


def _bad_item(index: int, offset: int, field: str, what: str) -> MessageDecodeError:
    return MessageDecodeError(
        f"bad batch item {index} at offset {offset}: {what}", offset=offset, field=field, index=index
    )


# ---------------------------------------------------------------------------------------------
# Message ids


class OffsetMsgId(NamedTuple):
    """A decoded offset message id."""

    host: str
    port: int
    commit_log_offset: int


_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def offset_msg_id_from_packed(store_host: bytes, commit_log_offset: int) -> str:
    """Offset msgId from a packed store host (``pack_host``): 32 hex digits, 56 for IPv6."""
    if len(store_host) not in (_HOST_V4_SIZE, _HOST_V6_SIZE):
        raise MessageEncodeError(
            f"store_host must be 8 or 20 packed bytes, got {len(store_host)}", field="STOREHOST"
        )
    try:
        return (store_host + _I64.pack(commit_log_offset)).hex().upper()
    except struct.error as exc:
        raise _range_error(exc, commit_log_offset=commit_log_offset) from exc


def create_offset_msg_id(host: str, port: int, commit_log_offset: int) -> str:
    """The broker's msgId (Java ``MessageDecoder.createMessageId``; spec §4.7).

    ``create_offset_msg_id("127.0.0.1", 10911, 168) == "7F00000100002A9F00000000000000A8"``.
    Raises ``MessageEncodeError`` for a host that is not an IP literal or an out-of-range value.
    """
    return offset_msg_id_from_packed(pack_host(host, port), commit_log_offset)


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """``(host, port, commit_log_offset)`` of an offset msgId (Java ``decodeMessageId``).

    Accepts 32 (IPv4) or 56 (IPv6) hex digits in either case. Raises ``MessageDecodeError``
    for any other length, non-hex characters, a port outside 0..65535 or a negative offset.
    """
    if len(msg_id) not in (32, 56) or not _HEX_DIGITS.issuperset(msg_id):
        raise MessageDecodeError(
            f"offset msgId {msg_id!r} must be 32 or 56 hex digits",
            field="msgId",
            response_code=ResponseCode.SYSTEM_ERROR,
        )
    raw = bytes.fromhex(msg_id)
    try:
        host = unpack_host(raw[:-8])
    except MessageDecodeError as exc:
        raise MessageDecodeError(
            f"offset msgId {msg_id!r}: {exc}", field="msgId", response_code=ResponseCode.SYSTEM_ERROR
        ) from None
    offset = _I64.unpack_from(raw, len(raw) - 8)[0]
    if offset < 0:
        raise MessageDecodeError(
            f"offset msgId {msg_id!r} holds a negative commit-log offset {offset}",
            field="msgId",
            response_code=ResponseCode.SYSTEM_ERROR,
        )
    return OffsetMsgId(host.host, host.port, offset)


def _month_bounds(ms: int) -> tuple[int, int]:
    """Start of the local-time month holding ``ms`` and of the next one, in epoch ms (Java ``Calendar``)."""
    t = time.localtime(ms // 1000)
    year, month = t.tm_year, t.tm_mon
    start = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
    year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    nxt = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
    return int(start) * 1000, int(nxt) * 1000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class UniqueKeyGenerator:
    """Client-side UNIQ_KEY ids in Java ``MessageClientIDSetter``'s shape (spec §4.7).

    ip (4 or 16 bytes) + pid (low 16 bits) + a per-generator int32 (Java's class-loader hash;
    random here) + ms since the start of the current local month (uint32) + a 16-bit counter,
    as upper-case hex: 32 characters, 56 with an IPv6 ip. Thread-safe. Without ``ip`` it uses
    Java's fake ip (the low 4 bytes of the current ms), since this layer does no network lookup.
    Servers must treat the result as an opaque string.
    """

    def __init__(
        self,
        ip: str | bytes | None = None,
        *,
        pid: int | None = None,
        loader_hash: int | None = None,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        if ip is None:
            ip_bytes = (clock() & 0xFFFFFFFF).to_bytes(4, "big")  # MessageClientIDSetter.createFakeIP
        elif isinstance(ip, bytes):
            if len(ip) not in (4, 16):
                raise ValueError(f"ip must be 4 or 16 bytes, got {len(ip)}")
            ip_bytes = ip
        else:
            ip_bytes = pack_host(ip, 0)[:-4]
        pid = os.getpid() if pid is None else pid
        loader_hash = int.from_bytes(os.urandom(4), "big") if loader_hash is None else loader_hash
        fixed = ip_bytes + (pid & 0xFFFF).to_bytes(2, "big") + (loader_hash & 0xFFFFFFFF).to_bytes(4, "big")
        self._prefix = fixed.hex().upper()
        self._clock = clock
        # itertools.count's next() and one tuple for the month are atomic under the GIL: no lock
        self._counter = itertools.count()
        self._month = _month_bounds(clock())

    @property
    def prefix(self) -> str:
        """The fixed hex part: ip + pid + loader hash."""
        return self._prefix

    def create_uniq_id(self) -> str:
        """A new id (Java ``createUniqID``)."""
        now = self._clock()
        start, next_start = self._month
        if not start <= now < next_start:
            self._month = _month_bounds(now)
            start = self._month[0]
        span = (now - start) & 0xFFFFFFFF
        return f"{self._prefix}{span:08X}{next(self._counter) & 0xFFFF:04X}"

    def set_uniq_id(self, msg: _M) -> _M:
        """``msg`` with a UNIQ_KEY, unless it already has one (Java ``setUniqID``)."""
        if msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            return msg
        return msg.with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self.create_uniq_id())


def parse_unique_key_timestamp(uniq_key: str, now_ms: int | None = None) -> int:
    """The approximate creation time (epoch ms) of a Java-shaped UNIQ_KEY (``getNearlyTimeFromID``).

    The id holds ms since the start of a month; like Java, this assumes the current month (local
    time) unless that would be after ``now_ms`` (Java: at or after), then the previous one. Raises
    ``MessageDecodeError`` unless the key is 32 or 56 hex digits. cpp's little-endian keys give
    meaningless times.
    """
    if len(uniq_key) not in (32, 56) or not _HEX_DIGITS.issuperset(uniq_key):
        raise MessageDecodeError(f"UNIQ_KEY {uniq_key!r} must be 32 or 56 hex digits", field="UNIQ_KEY")
    ip_len = 16 if len(uniq_key) == 56 else 4
    start_hex = (ip_len + 6) * 2
    span = int(uniq_key[start_hex : start_hex + 8], 16)
    now = _now_ms() if now_ms is None else now_ms
    month_start, _ = _month_bounds(now)
    if month_start + span > now:
        month_start, _ = _month_bounds(month_start - 1)
    return month_start + span


# ---------------------------------------------------------------------------------------------
# Compression


def compress_body(body: bytes | bytearray | memoryview, level: int = 5) -> bytes:
    """zlib (RFC 1950) at ``level``, as Java's ``UtilAll.compress`` and the C++ client (level 5)."""
    return zlib.compress(body, level)


def decompress_body(body: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """Inflate a zlib body, refusing more than ``max_size`` output bytes (zip-bomb guard).

    Raises ``MessageDecodeError`` (field ``"BODY"``) for invalid or truncated zlib data or
    output beyond ``max_size``; ``ValueError`` for a negative ``max_size``.
    """
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, got {max_size}")
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, max_size + 1)
    except zlib.error as exc:
        raise MessageDecodeError(f"body is not valid zlib data: {exc}", field="BODY") from exc
    if len(out) > max_size:
        raise MessageDecodeError(
            f"decompressed body exceeds max_size={max_size} bytes ({len(body)} compressed bytes)",
            field="BODY",
        )
    if not inflater.eof:
        raise MessageDecodeError("body is a truncated zlib stream", field="BODY")
    return out
