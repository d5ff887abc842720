"""Tests for finchmq.protocol.hosts: packing BORNHOST/STOREHOST (spec §4.1)."""

from __future__ import annotations

import pytest

from finchmq.protocol.errors import MessageDecodeError, MessageEncodeError
from finchmq.protocol.hosts import HostAddress, pack_host, unpack_host


def test_pack_host() -> None:
    assert pack_host("127.0.0.1", 10911) == bytes.fromhex("7F00000100002A9F")
    assert pack_host("::ffff:10.0.0.1", 80) == bytes.fromhex("0A00000100000050")  # mapped -> IPv4
    assert pack_host("::1", 1) == bytes(15) + b"\x01" + b"\x00\x00\x00\x01"
    for host, port in [("localhost", 1), ("1.2.3", 1), ("1.2.3.4", 65536), ("1.2.3.4", -1)]:
        with pytest.raises(MessageEncodeError):
            pack_host(host, port)


def test_unpack_host_and_address_parse() -> None:
    assert unpack_host(bytes.fromhex("C0A8000100002A9F")) == HostAddress("192.168.0.1", 10911)
    with pytest.raises(MessageDecodeError, match="8 or 20"):
        unpack_host(b"\x00" * 9)
    with pytest.raises(MessageDecodeError, match="port 65536"):
        unpack_host(bytes.fromhex("C0A8000100010000"))
    assert HostAddress.parse("10.1.2.3:10911") == HostAddress("10.1.2.3", 10911)
    assert HostAddress.parse("[2001:db8::1]:80") == HostAddress("2001:db8::1", 80)
    assert str(HostAddress("2001:db8::1", 80)) == "[2001:db8::1]:80"
    assert str(HostAddress("10.1.2.3", 10911)) == "10.1.2.3:10911"
    assert HostAddress("10.1.2.3", 10911).packed == bytes.fromhex("0A01020300002A9F")
    with pytest.raises(MessageEncodeError):
        HostAddress.parse("10.1.2.3")
