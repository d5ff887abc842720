"""The host fields of a stored record, BORNHOST and STOREHOST (spec §4.1): an IP literal and a
port, packed as 4 or 16 address bytes and the port as an int32 (Java ``MessageExt``'s
``socketAddress2ByteBuffer``; ``InetSocketAddress`` values).

Imports: the standard library and the protocol's errors. No DNS: hosts are IP literals.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from typing import Final, NamedTuple

from .errors import MessageDecodeError, MessageEncodeError

__all__ = ["HOST_V4_SIZE", "HOST_V6_SIZE", "HostAddress", "pack_host", "unpack_host"]

HOST_V4_SIZE: Final = 8  # 4 address bytes + the port
HOST_V6_SIZE: Final = 20  # 16 address bytes + the port
_I32: Final = struct.Struct(">i")


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
    if size == HOST_V4_SIZE:
        host = f"{packed[0]}.{packed[1]}.{packed[2]}.{packed[3]}"
    elif size == HOST_V6_SIZE:
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
