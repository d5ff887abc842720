"""Tests for finchmq.protocol.msg_id: offset message ids and UNIQ_KEY (spec §4.7)."""

from __future__ import annotations

import threading
import time

import pytest

from finchmq.protocol.errors import MessageDecodeError, MessageEncodeError
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import Message
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.msg_id import (
    UniqueKeyGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    offset_msg_id_from_packed,
    parse_unique_key_timestamp,
)

# ---------------------------------------------------------------------------------------------
# Offset message ids


def test_offset_msg_id_spec_example() -> None:
    assert create_offset_msg_id("127.0.0.1", 10911, 168) == "7F00000100002A9F00000000000000A8"
    assert decode_offset_msg_id("7F00000100002A9F00000000000000A8") == ("127.0.0.1", 10911, 168)
    assert decode_offset_msg_id("7f00000100002a9f00000000000000a8").commit_log_offset == 168
    assert (
        offset_msg_id_from_packed(pack_host("127.0.0.1", 10911), 2**40) == "7F00000100002A9F0000010000000000"
    )


def test_offset_msg_id_ipv6() -> None:
    msg_id = create_offset_msg_id("2001:db8::1", 10911, 5)
    assert len(msg_id) == 56 and msg_id == msg_id.upper()
    assert msg_id.startswith("20010DB8")
    assert decode_offset_msg_id(msg_id) == ("2001:db8::1", 10911, 5)


@pytest.mark.parametrize(
    "msg_id",
    [
        "",
        "7F00000100002A9F00000000000000A",  # 31
        "7F00000100002A9F00000000000000A80",  # 33
        "7F00000100002A9F00000000000000G8",  # not hex
        "7F000001 0002A9F00000000000000A8",  # whitespace that bytes.fromhex would skip
        "7F00000100012A9F00000000000000A8",  # port 76447
        "7F00000100002A9F80000000000000A8",  # negative offset
    ],
)
def test_decode_offset_msg_id_rejects_malformed(msg_id: str) -> None:
    with pytest.raises(MessageDecodeError, match="msgId"):
        decode_offset_msg_id(msg_id)


def test_offset_msg_id_errors() -> None:
    with pytest.raises(MessageEncodeError):
        create_offset_msg_id("broker-a", 10911, 0)
    with pytest.raises(MessageEncodeError, match="commit_log_offset"):
        create_offset_msg_id("127.0.0.1", 10911, 2**63)
    with pytest.raises(MessageEncodeError):
        offset_msg_id_from_packed(b"\x00" * 4, 0)


# ---------------------------------------------------------------------------------------------
# UNIQ_KEY


def _local_ms(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    return int(time.mktime((year, month, day, hour, minute, second, 0, 0, -1))) * 1000


def test_unique_key_layout() -> None:
    now = _local_ms(2024, 3, 10, 12, 0, 0)
    gen = UniqueKeyGenerator("127.0.0.1", pid=0x12345, loader_hash=0xDEADBEEF, clock=lambda: now)
    assert gen.prefix == "7F0000012345DEADBEEF"
    first, second = gen.create_uniq_id(), gen.create_uniq_id()
    span = now - _local_ms(2024, 3, 1, 0, 0, 0)
    assert first == f"7F0000012345DEADBEEF{span:08X}0000"
    assert second == f"7F0000012345DEADBEEF{span:08X}0001"
    assert parse_unique_key_timestamp(first, now_ms=now) == now
    assert parse_unique_key_timestamp(first, now_ms=now + 60_000) == now


def test_unique_key_counter_wraps_and_ipv6() -> None:
    gen = UniqueKeyGenerator("2001:db8::2", pid=1, loader_hash=2)
    ids = [gen.create_uniq_id() for _ in range(0x10001)]
    assert len(ids[0]) == 56 and ids[0].startswith("20010DB8")
    assert ids[0][-4:] == "0000" and ids[0xFFFF][-4:] == "FFFF" and ids[0x10000][-4:] == "0000"
    assert gen.set_uniq_id(Message("T")).unique_key is not None
    already = Message("T", properties={MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "X"})
    assert gen.set_uniq_id(already) is already
    fake = UniqueKeyGenerator(clock=lambda: 0x1234_89ABCDEF)  # Java createFakeIP: low 4 bytes of ms
    assert fake.prefix.startswith("89ABCDEF")
    with pytest.raises(ValueError, match="4 or 16"):
        UniqueKeyGenerator(b"\x01\x02")


def test_unique_key_month_rollover_and_uint32_span() -> None:
    late = _local_ms(2024, 1, 31, 23, 59, 59) + 999  # 31 days - 1 ms: more than 2**31 ms
    early = _local_ms(2024, 2, 1, 0, 0, 0) + 5
    clock = iter([late, late, early])
    gen = UniqueKeyGenerator("10.0.0.1", pid=1, loader_hash=1, clock=lambda: next(clock))
    id_late, id_early = gen.create_uniq_id(), gen.create_uniq_id()
    span_late = int(id_late[20:28], 16)
    assert span_late == late - _local_ms(2024, 1, 1, 0, 0, 0) > 2**31
    assert int(id_early[20:28], 16) == 5
    assert parse_unique_key_timestamp(id_late, now_ms=early + 1000) == late  # previous month
    assert parse_unique_key_timestamp(id_early, now_ms=early + 1000) == early
    with pytest.raises(MessageDecodeError, match="UNIQ_KEY"):
        parse_unique_key_timestamp("XYZ")


def test_unique_key_generator_is_thread_safe() -> None:
    gen = UniqueKeyGenerator("10.0.0.1")
    results: list[list[str]] = [[] for _ in range(4)]

    def work(out: list[str]) -> None:
        out.extend(gen.create_uniq_id() for _ in range(5000))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counters = {int(key[-4:], 16) for out in results for key in out}
    assert len(counters) == 20000  # every id took its own counter value
