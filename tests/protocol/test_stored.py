"""Tests for finchmq.protocol.stored: the stored record of spec §4.1, golden bytes, field offsets,
encode and decode errors, round trips, fuzzing."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.compression import compress_body
from finchmq.protocol.errors import (
    LocalProtocolError,
    MessageDecodeError,
    MessageEncodeError,
    RemoteProtocolError,
)
from finchmq.protocol.hosts import HostAddress, pack_host
from finchmq.protocol.message import MessageExt, properties_to_string
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.protocol.stored import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    decode_stored,
    decode_stored_all,
    encode_blank_into,
    encode_message_ext,
    encode_stored,
    encode_stored_into,
    fill_stored_offsets,
    iter_stored,
    peek_stored,
    stored_size,
)

from .strategies import message_exts

DATA = Path(__file__).parent / "data"


# Spec §4.1 example: body "hello", topic "TopicTest", props "TAGS\x01TagA" -> TOTALSIZE 114.
# Written field by field from the spec table, not from the encoder.
# Spec §4.1 example: body "hello", topic "TopicTest", props "TAGS\x01TagA" -> TOTALSIZE 114.
# Written field by field from the spec table, not from the encoder.
GOLDEN_STORED_HEX = (
    "00000072"  # 0   TOTALSIZE 114
    "DAA320A7"  # 4   MAGICCODE
    "3610A686"  # 8   BODYCRC = crc32(b"hello") & 0x7FFFFFFF
    "00000001"  # 12  QUEUEID 1
    "00000007"  # 16  FLAG 7
    "0000000000000002"  # 20  QUEUEOFFSET 2
    "00000000000000A8"  # 28  PHYSICALOFFSET 168
    "00000000"  # 36  SYSFLAG
    "0000018BCFE56800"  # 40  BORNTIMESTAMP 1700000000000
    "7F000001"  # 48  BORNHOST 127.0.0.1
    "0000C350"  #     port 50000
    "0000018BCFE5687B"  # 56  STORETIMESTAMP 1700000000123
    "7F000001"  # 64  STOREHOST 127.0.0.1
    "00002A9F"  #     port 10911
    "00000003"  # 72  RECONSUMETIMES 3
    "0000000000000000"  # 76  PREPAREDTRANSACTIONOFFSET
    "00000005"  # 84  BODYLENGTH
    "68656C6C6F"  # 88  "hello"
    "09"  # 93  TOPICLENGTH
    "546F70696354657374"  # 94  "TopicTest"
    "0009"  # 103 PROPERTIESLENGTH
    "544147530154616741"  # 105 "TAGS\x01TagA"
)

LOCALHOST_50000 = pack_host("127.0.0.1", 50000)
LOCALHOST_10911 = pack_host("127.0.0.1", 10911)


# The fields of GOLDEN_STORED_HEX.
GOLDEN_FIELDS: dict[str, Any] = {
    "topic": b"TopicTest",
    "body": b"hello",
    "properties": b"TAGS\x01TagA",
    "born_host": LOCALHOST_50000,
    "store_host": LOCALHOST_10911,
    "queue_id": 1,
    "flag": 7,
    "queue_offset": 2,
    "commit_log_offset": 168,
    "born_timestamp": 1_700_000_000_000,
    "store_timestamp": 1_700_000_000_123,
    "reconsume_times": 3,
}


def golden_record() -> bytes:
    return bytes(encode_stored(**GOLDEN_FIELDS))


def make_record(
    body: bytes = b"payload",
    topic: bytes = b"T",
    props: bytes = b"TAGS\x01a",
    *,
    born: bytes = LOCALHOST_50000,
    store: bytes = LOCALHOST_10911,
    **kw: int,
) -> bytes:
    return bytes(
        encode_stored(topic=topic, body=body, properties=props, born_host=born, store_host=store, **kw)
    )


# ---------------------------------------------------------------------------------------------
# Golden bytes and field offsets


def test_golden_record_matches_spec_bytes_and_data_file() -> None:
    expected = bytes.fromhex(GOLDEN_STORED_HEX)
    assert len(expected) == 114
    assert (DATA / "message_stored_example.bin").read_bytes() == expected
    assert golden_record() == expected


def test_golden_record_field_offsets() -> None:
    rec = golden_record()

    def i32(at: int) -> int:
        value: int = struct.unpack_from(">i", rec, at)[0]
        return value

    def i64(at: int) -> int:
        value: int = struct.unpack_from(">q", rec, at)[0]
        return value

    assert i32(0) == 114 == stored_size(5, 9, 9)
    assert i32(4) == MESSAGE_MAGIC_CODE == -626843481
    assert i32(8) == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert i32(12) == 1
    assert i32(16) == 7
    assert i64(20) == 2
    assert i64(28) == 168
    assert i32(36) == 0
    assert i64(40) == 1_700_000_000_000
    assert rec[48:52] == bytes([127, 0, 0, 1]) and i32(52) == 50000
    assert i64(56) == 1_700_000_000_123
    assert rec[64:68] == bytes([127, 0, 0, 1]) and i32(68) == 10911
    assert i32(72) == 3
    assert i64(76) == 0
    assert i32(84) == 5 and rec[88:93] == b"hello"
    assert rec[93] == 9 and rec[94:103] == b"TopicTest"
    assert struct.unpack_from(">h", rec, 103)[0] == 9 and rec[105:114] == b"TAGS\x01TagA"


def test_decode_golden_record() -> None:
    msg = decode_stored((DATA / "message_stored_example.bin").read_bytes(), verify_crc=True)
    assert msg == MessageExt(
        topic="TopicTest",
        body=b"hello",
        flag=7,
        properties={"TAGS": "TagA"},
        queue_id=1,
        store_size=114,
        queue_offset=2,
        sys_flag=0,
        born_timestamp=1_700_000_000_000,
        born_host=HostAddress("127.0.0.1", 50000),
        store_timestamp=1_700_000_000_123,
        store_host=HostAddress("127.0.0.1", 10911),
        commit_log_offset=168,
        body_crc=0x3610A686,
        reconsume_times=3,
        prepared_transaction_offset=0,
    )
    assert msg.tags == "TagA"
    assert msg.tags_code == 2598919
    assert msg.msg_id == "7F00000100002A9F00000000000000A8"
    assert msg.client_msg_id == msg.msg_id  # no UNIQ_KEY


def test_stored_size_formula() -> None:
    assert stored_size(0, 0, 0) == 91
    assert stored_size(128, 9, 60) == 91 + 128 + 9 + 60
    assert stored_size(1, 2, 3, born_v6=True) == 91 + 6 + 12
    assert stored_size(1, 2, 3, born_v6=True, store_v6=True) == 91 + 6 + 24


def test_encode_stored_into_writes_at_position_and_leaves_rest() -> None:
    buf = bytearray(b"\xee" * 400)
    size = encode_stored_into(memoryview(buf), 50, **GOLDEN_FIELDS)
    assert size == 114
    assert bytes(buf[50:164]) == bytes.fromhex(GOLDEN_STORED_HEX)
    assert buf[:50] == b"\xee" * 50 and buf[164:] == b"\xee" * (400 - 164)
    # a plain bytearray works too, and keeps its length
    plain = bytearray(200)
    assert (
        encode_stored_into(
            plain,
            0,
            topic=b"T",
            body=b"",
            properties=b"",
            born_host=LOCALHOST_50000,
            store_host=LOCALHOST_10911,
        )
        == 92
    )
    assert len(plain) == 200


def test_encode_stored_into_refuses_to_overflow_buffer() -> None:
    buf = bytearray(113)
    with pytest.raises(MessageEncodeError, match="does not fit at position 0 of a 113-byte buffer"):
        encode_stored_into(
            buf,
            0,
            topic=b"TopicTest",
            body=b"hello",
            properties=b"TAGS\x01TagA",
            born_host=LOCALHOST_50000,
            store_host=LOCALHOST_10911,
        )
    assert len(buf) == 113 and buf == bytearray(113)
    with pytest.raises(MessageEncodeError):
        encode_stored_into(
            bytearray(500),
            -1,
            topic=b"T",
            body=b"",
            properties=b"",
            born_host=LOCALHOST_50000,
            store_host=LOCALHOST_10911,
        )


def test_fill_stored_offsets_patches_three_fields() -> None:
    record = encode_stored(
        topic=b"TopicTest",
        body=b"hello",
        properties=b"TAGS\x01TagA",
        born_host=LOCALHOST_50000,
        store_host=LOCALHOST_10911,
        queue_id=1,
        flag=7,
        born_timestamp=1_700_000_000_000,
        reconsume_times=3,
    )
    fill_stored_offsets(record, 0, queue_offset=2, commit_log_offset=168, store_timestamp=1_700_000_000_123)
    assert bytes(record) == bytes.fromhex(GOLDEN_STORED_HEX)


def test_fill_stored_offsets_with_ipv6_born_host() -> None:
    born = pack_host("2001:db8::1", 4000)
    seg = bytearray(300)
    size = encode_stored_into(
        seg, 10, topic=b"T", body=b"x", properties=b"", born_host=born, store_host=LOCALHOST_10911
    )
    fill_stored_offsets(seg, 10, queue_offset=9, commit_log_offset=10, store_timestamp=777)
    msg = decode_stored(seg[: 10 + size], 10)
    assert (msg.queue_offset, msg.commit_log_offset, msg.store_timestamp) == (9, 10, 777)
    assert msg.born_host == HostAddress("2001:db8::1", 4000)
    assert msg.born_timestamp == 0


def test_fill_stored_offsets_range_errors() -> None:
    record = encode_stored(
        topic=b"T", body=b"", properties=b"", born_host=LOCALHOST_50000, store_host=LOCALHOST_10911
    )
    with pytest.raises(MessageEncodeError, match="queue_offset") as info:
        fill_stored_offsets(record, 0, queue_offset=2**63, commit_log_offset=0, store_timestamp=0)
    assert info.value.field == "queue_offset"
    for pos in (80, 40, -1):  # no sysflag there / no store timestamp there / before the buffer
        with pytest.raises(MessageEncodeError, match="no record header"):
            fill_stored_offsets(record, pos, queue_offset=0, commit_log_offset=0, store_timestamp=0)


# ---------------------------------------------------------------------------------------------
# Encode errors


def test_topic_longer_than_127_bytes_is_an_encode_error() -> None:
    make_record(topic=b"t" * 127)  # the limit itself is fine
    with pytest.raises(MessageEncodeError, match="128 bytes") as info:
        make_record(topic=b"t" * 128)
    assert info.value.field == "TOPIC"
    assert isinstance(info.value, LocalProtocolError)
    assert info.value.response_code == ResponseCode.MESSAGE_ILLEGAL
    # 64 two-byte characters: 64 chars but 128 bytes
    msg = MessageExt(
        topic="é" * 64, body=b"", born_host=HostAddress("1.2.3.4", 1), store_host=HostAddress("1.2.3.4", 2)
    )
    with pytest.raises(MessageEncodeError, match=r"topic is 128 bytes"):
        encode_message_ext(msg)


def test_properties_longer_than_32767_bytes_is_an_encode_error() -> None:
    make_record(props=b"k\x01" + b"v" * (MAX_PROPERTIES_LENGTH - 2))
    with pytest.raises(MessageEncodeError, match="32768 bytes") as info:
        make_record(props=b"k\x01" + b"v" * (MAX_PROPERTIES_LENGTH - 1))
    assert info.value.field == "PROPERTIES"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queue_id", 2**31),
        ("flag", -(2**31) - 1),
        ("queue_offset", 2**63),
        ("commit_log_offset", -(2**63) - 1),
        ("born_timestamp", 2**64),
        ("reconsume_times", 2**40),
        ("body_crc", 2**31),
    ],
)
def test_out_of_range_ints_name_the_field(field: str, value: int) -> None:
    with pytest.raises(MessageEncodeError, match=field) as info:
        make_record(**{field: value})  # type: ignore[arg-type]
    assert info.value.field == field


def test_bad_host_sizes_are_encode_errors() -> None:
    with pytest.raises(MessageEncodeError, match="born_host must be 8 or 20"):
        make_record(born=b"\x7f\x00\x00\x01")
    with pytest.raises(MessageEncodeError, match="store_host must be 8 or 20"):
        make_record(store=b"")


# ---------------------------------------------------------------------------------------------
# IPv6 hosts


def test_ipv6_hosts_set_sysflag_bits_and_sizes() -> None:
    born6 = pack_host("2001:db8::7", 1234)
    store6 = pack_host("fe80::1", 10911)
    assert len(born6) == len(store6) == 20
    rec = make_record(body=b"abc", topic=b"T6", props=b"", born=born6, store=store6, sys_flag=0x1)
    assert len(rec) == stored_size(3, 2, 0, born_v6=True, store_v6=True) == 91 + 5 + 24
    sys_flag = struct.unpack_from(">i", rec, 36)[0]
    assert sys_flag == 0x1 | MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    # STORETIMESTAMP moves to 40 + 8 + 20 = 68 when the born host is IPv6
    msg = decode_stored(rec)
    assert msg.born_host == HostAddress("2001:db8::7", 1234)
    assert msg.store_host == HostAddress("fe80::1", 10911)
    assert msg.body == b"abc" and msg.topic == "T6"
    assert len(msg.msg_id) == 56
    assert decode_offset_msg_id(msg.msg_id) == ("fe80::1", 10911, 0)


def test_ipv4_hosts_clear_caller_v6_bits() -> None:
    # spec §4.1 MUST: IPv4 hosts are stored with 0x10/0x20 clear (the C++ client ignores them)
    rec = make_record(sys_flag=0x30 | MessageSysFlag.MULTI_TAGS_FLAG)
    assert struct.unpack_from(">i", rec, 36)[0] == MessageSysFlag.MULTI_TAGS_FLAG
    assert len(rec) == stored_size(7, 1, 6)


# ---------------------------------------------------------------------------------------------
# Decode errors


def test_decode_reports_bad_magic_with_offset() -> None:
    rec = bytearray(golden_record())
    rec[4:8] = b"\x12\x34\x56\x78"
    data = golden_record() + bytes(rec)
    with pytest.raises(MessageDecodeError, match=r"offset 114.*0x12345678") as info:
        decode_stored_all(data)
    assert info.value.offset == 114 and info.value.field == "MAGICCODE"
    assert isinstance(info.value, RemoteProtocolError)
    assert info.value.response_code == ResponseCode.MESSAGE_ILLEGAL


def test_decode_rejects_blank_record() -> None:
    buf = bytearray(64)
    assert encode_blank_into(buf, 0, 64) == 64
    assert peek_stored(buf, 0) == (64, BLANK_MAGIC_CODE)
    assert bytes(buf[:8]) == bytes.fromhex("00000040CBD43194")
    with pytest.raises(MessageDecodeError, match="BLANK") as info:
        decode_stored(buf)
    assert info.value.field == "MAGICCODE"


def test_blank_record_encoder_limits() -> None:
    with pytest.raises(MessageEncodeError):
        encode_blank_into(bytearray(16), 0, 7)
    with pytest.raises(MessageEncodeError):
        encode_blank_into(bytearray(16), 9, 8)
    buf = bytearray(16)
    encode_blank_into(buf, 8, 8)
    assert peek_stored(buf, 8) == (8, BLANK_MAGIC_CODE)
    with pytest.raises(MessageDecodeError, match="need 8 bytes"):
        peek_stored(buf, 9)


@pytest.mark.parametrize("total", [90, 0, -5, 115, 2**31 - 1])
def test_decode_rejects_totalsize_out_of_range(total: int) -> None:
    rec = bytearray(golden_record())
    struct.pack_into(">i", rec, 0, total)
    with pytest.raises(MessageDecodeError, match="TOTALSIZE") as info:
        decode_stored(bytes(rec))
    assert info.value.offset == 0


def test_decode_rejects_inconsistent_lengths() -> None:
    rec = golden_record()
    cases = {
        "BODYLENGTH": (84, ">i", -1),
        "TOPICLENGTH": (93, ">B", 200),
        "PROPERTIESLENGTH": (103, ">h", 8),
    }
    for field, (at, fmt, value) in cases.items():
        bad = bytearray(rec)
        struct.pack_into(fmt, bad, at, value)
        with pytest.raises(MessageDecodeError) as info:
            decode_stored(bytes(bad))
        assert info.value.field == field, field
    bad = bytearray(rec)
    struct.pack_into(">i", bad, 84, 6)  # body now eats the topic length byte
    with pytest.raises(MessageDecodeError):
        decode_stored(bytes(bad))


def test_decode_rejects_truncation_and_trailing_bytes() -> None:
    rec = golden_record()
    for cut in (0, 3, 8, 90, 113):
        with pytest.raises(MessageDecodeError):
            decode_stored(rec[:cut])
    assert decode_stored_all(b"") == []
    assert len(decode_stored_all(rec * 3)) == 3
    with pytest.raises(MessageDecodeError, match="offset 228") as info:
        decode_stored_all(rec * 2 + b"\x00\x00\x00")
    assert info.value.offset == 228


def test_decode_rejects_non_utf8_topic_and_properties() -> None:
    bad = bytearray(golden_record())
    bad[94] = 0xFF
    with pytest.raises(MessageDecodeError, match="UTF-8") as info:
        decode_stored(bytes(bad))
    assert info.value.field == "TOPIC"
    bad = bytearray(golden_record())
    bad[110] = 0xC3
    with pytest.raises(MessageDecodeError, match="UTF-8") as info:
        decode_stored(bytes(bad))
    assert info.value.field == "PROPERTIES"


def test_decode_rejects_bad_port() -> None:
    bad = bytearray(golden_record())
    struct.pack_into(">i", bad, 52, 70000)
    with pytest.raises(MessageDecodeError, match="70000") as info:
        decode_stored(bytes(bad))
    assert info.value.field == "BORNHOST"
    bad = bytearray(golden_record())
    struct.pack_into(">i", bad, 68, -1)
    with pytest.raises(MessageDecodeError, match="port -1") as info:
        decode_stored(bytes(bad))
    assert info.value.field == "STOREHOST"


def test_crc_mismatch_is_detected_only_when_asked() -> None:
    bad = bytearray(golden_record())
    bad[90] ^= 0x01  # "hello" -> "hemlo"
    msg = decode_stored(bytes(bad))
    assert msg.body == b"hemlo"
    with pytest.raises(MessageDecodeError, match="offset 114: BODYCRC") as info:
        decode_stored_all(golden_record() + bytes(bad), verify_crc=True)
    assert info.value.field == "BODYCRC" and info.value.offset == 114
    decode_stored(golden_record(), verify_crc=True)


def test_decode_from_memoryview_bytearray_and_offset() -> None:
    data = bytearray(b"\x00" * 7 + golden_record())
    expected = decode_stored(golden_record())
    assert decode_stored(data, 7) == expected
    assert decode_stored(memoryview(data), 7) == expected
    assert type(decode_stored(memoryview(data), 7).body) is bytes


def test_iter_stored_is_lazy_and_stops_at_first_error() -> None:
    data = golden_record() + b"\xff" * 20
    it = iter_stored(data)
    assert next(it).topic == "TopicTest"
    with pytest.raises(MessageDecodeError):
        next(it)


# ---------------------------------------------------------------------------------------------
# Compressed bodies


def test_compressed_body_is_inflated_on_request() -> None:
    original = b"0123456789" * 1000
    packed = compress_body(original)
    assert packed[0] == 0x78  # zlib (RFC 1950) header
    assert zlib.decompress(packed) == original
    rec = make_record(body=packed, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    stored = decode_stored(rec, verify_crc=True)
    assert stored.body == packed and stored.sys_flag & MessageSysFlag.COMPRESSED_FLAG
    inflated = decode_stored(rec, verify_crc=True, decompress_max_size=4 * 1024 * 1024)
    assert inflated.body == original
    assert not inflated.sys_flag & MessageSysFlag.COMPRESSED_FLAG
    assert inflated.body_crc == stored.body_crc  # describes the stored bytes
    with pytest.raises(MessageDecodeError, match="max_size=9999") as info:
        decode_stored(rec, decompress_max_size=9999)
    assert info.value.field == "BODY" and info.value.offset == 0


def test_unsupported_compression_type_is_reported() -> None:
    rec = make_record(
        body=compress_body(b"abc"),
        sys_flag=MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_LZ4_TYPE,
    )
    with pytest.raises(MessageDecodeError, match="compression type 0x100"):
        decode_stored(rec, decompress_max_size=1000)
    zlib_typed = make_record(
        body=compress_body(b"abc"),
        sys_flag=MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB_TYPE,
    )
    assert decode_stored(zlib_typed, decompress_max_size=1000).body == b"abc"


# ---------------------------------------------------------------------------------------------
# Property-based round trips


@given(message_exts())
def test_stored_record_round_trip(ext: MessageExt) -> None:
    record = encode_message_ext(ext)
    assert len(record) == stored_size(
        len(ext.body),
        len(ext.topic.encode()),
        len(properties_to_string(ext.properties).encode()),
        ":" in ext.born_host.host,
        ":" in ext.store_host.host,
    )
    decoded = decode_stored(record)
    assert decoded == dataclasses.replace(ext, store_size=len(record))
    assert encode_message_ext(decoded) == record


@given(st.lists(message_exts(), max_size=5))
def test_pull_body_round_trip(exts: list[MessageExt]) -> None:
    records = [encode_message_ext(e, compute_crc=True) for e in exts]
    decoded = decode_stored_all(b"".join(records), verify_crc=True)
    assert [d.topic for d in decoded] == [e.topic for e in exts]
    assert [d.body for d in decoded] == [e.body for e in exts]
    assert [d.store_size for d in decoded] == [len(r) for r in records]


# ---------------------------------------------------------------------------------------------
# Fuzzing: any input gives a value or the typed error


def _decode_everything(data: bytes) -> None:
    for call in (
        lambda: decode_stored_all(data, verify_crc=True, decompress_max_size=1 << 16),
        lambda: decode_stored(data, 0),
    ):
        with contextlib.suppress(MessageDecodeError):
            call()


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    _decode_everything(data)


@settings(max_examples=300)
@given(message_exts(), st.data())
def test_fuzz_mutated_records(ext: MessageExt, data: st.DataObject) -> None:
    record = bytearray(encode_message_ext(ext, compute_crc=True))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(record) - 1))
        record[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(record) + 8))
    _decode_everything(bytes(record[:cut]) + bytes(max(cut - len(record), 0)))


def test_fuzz_mutations_seeded() -> None:
    rng = random.Random(1234)
    seeds = [
        golden_record() * 2,
        make_record(body=compress_body(b"z" * 5000), sys_flag=1, born=pack_host("::2", 5)),
    ]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(4000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randint(0, len(data))]
        try:
            decode_stored_all(bytes(data))
            outcomes["ok"] += 1
        except MessageDecodeError:
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0
