"""Message ids (spec §4.7): the broker's offset msgId, STOREHOST + PHYSICALOFFSET in hex (Java
``MessageDecoder.createMessageId``/``decodeMessageId``), and the client's UNIQ_KEY (Java
``MessageClientIDSetter``).

Imports: the standard library and the protocol's codes, errors, hosts and property keys.
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple, Protocol, Self, TypeVar

from .codes import ResponseCode
from .errors import MessageDecodeError, MessageEncodeError
from .hosts import HOST_V4_SIZE, HOST_V6_SIZE, pack_host, unpack_host
from .message_const import MessageConst

__all__ = [
    "OffsetMsgId",
    "UniqueKeyGenerator",
    "create_offset_msg_id",
    "decode_offset_msg_id",
    "offset_msg_id_from_packed",
    "parse_unique_key_timestamp",
]

_I64: Final = struct.Struct(">q")


class _WithProperties(Protocol):
    """What ``UniqueKeyGenerator.set_uniq_id`` needs of a message (``message.Message`` has it)."""

    @property
    def properties(self) -> Mapping[str, str]: ...

    def with_property(self, name: str, value: str) -> Self: ...


_M = TypeVar("_M", bound=_WithProperties)


class OffsetMsgId(NamedTuple):
    """A decoded offset message id."""

    host: str
    port: int
    commit_log_offset: int


_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def offset_msg_id_from_packed(store_host: bytes, commit_log_offset: int) -> str:
    """Offset msgId from a packed store host (``pack_host``): 32 hex digits, 56 for IPv6."""
    if len(store_host) not in (HOST_V4_SIZE, HOST_V6_SIZE):
        raise MessageEncodeError(
            f"store_host must be 8 or 20 packed bytes, got {len(store_host)}", field="STOREHOST"
        )
    try:
        return (store_host + _I64.pack(commit_log_offset)).hex().upper()
    except struct.error as exc:
        raise MessageEncodeError.out_of_range(exc, commit_log_offset=commit_log_offset) from exc


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
