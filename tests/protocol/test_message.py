"""Tests for finchmq.protocol.message: layouts from spec §4, golden bytes, round trips, fuzzing."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import random
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.errors import LocalProtocolError, RemoteProtocolError
from finchmq.protocol.message import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    RESERVED_PROPERTY_NAMES,
    BatchItem,
    HostAddress,
    Message,
    MessageConst,
    MessageDecodeError,
    MessageEncodeError,
    MessageExt,
    MessageQueue,
    MessageSysFlag,
    UniqueKeyGenerator,
    compress_body,
    create_offset_msg_id,
    decode_batch,
    decode_offset_msg_id,
    decode_stored,
    decode_stored_all,
    decompress_body,
    encode_batch,
    encode_blank_into,
    encode_message_ext,
    encode_stored,
    encode_stored_into,
    fill_stored_offsets,
    iter_stored,
    offset_msg_id_from_packed,
    pack_host,
    parse_unique_key_timestamp,
    peek_stored,
    properties_to_string,
    stored_size,
    string_to_properties,
    tags_hash_code,
    unpack_host,
)

DATA = Path(__file__).parent / "data"

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

# Spec §4.6: two items; the second has flag 1, an empty body and no properties.
GOLDEN_BATCH_HEX = (
    "00000024"
    "00000000"
    "00000000"
    "00000000"
    "00000005"
    "68656C6C6F"
    "0009"
    "544147530154616741"
    "00000016"
    "00000000"
    "00000000"
    "00000001"
    "00000000"
    "0000"
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
# Stored record: golden bytes and field offsets


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
# Stored record: encode errors


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
# Hosts and IPv6


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


# ---------------------------------------------------------------------------------------------
# Stored record: decode errors


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
# Compression


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


def test_decompress_limit_guards_against_zip_bombs() -> None:
    bomb = compress_body(bytes(50 * 1024 * 1024), level=9)
    assert len(bomb) < 100_000
    with pytest.raises(MessageDecodeError, match="exceeds max_size=1048576"):
        decompress_body(bomb, 1024 * 1024)
    small = compress_body(b"x" * 100)
    assert decompress_body(small, 100) == b"x" * 100  # exactly at the limit
    with pytest.raises(MessageDecodeError, match="max_size=99"):
        decompress_body(small, 99)
    with pytest.raises(MessageDecodeError, match="not valid zlib"):
        decompress_body(b"not zlib at all", 1000)
    with pytest.raises(MessageDecodeError, match="truncated"):
        decompress_body(small[:-3], 1000)
    with pytest.raises(ValueError, match="max_size"):
        decompress_body(small, -1)


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
# Properties


def test_properties_to_string_has_no_trailing_separator() -> None:
    assert properties_to_string({}) == ""
    assert properties_to_string({"TAGS": "TagA"}) == "TAGS\x01TagA"
    assert properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2"}) == "TAGS\x01TagA\x02KEYS\x01k1 k2"
    assert properties_to_string({"A": "x\x01y"}) == "A\x01x\x01y"


@pytest.mark.parametrize(
    "props",
    [{"": "v"}, {"k\x01": "v"}, {"k\x02": "v"}, {"k": ""}, {"k": "a\x02b"}, {"k": 1}, {1: "v"}],
)
def test_properties_to_string_rejects_pairs_that_would_not_read_back(props: dict[object, object]) -> None:
    with pytest.raises(MessageEncodeError):
        properties_to_string(props)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("TAGS\x01TagA", {"TAGS": "TagA"}),
        ("WAIT\x01true\x02TAGS\x01a\x02", {"WAIT": "true", "TAGS": "a"}),  # cpp trailing \x02
        ("\x02\x02A\x01b\x02\x02", {"A": "b"}),  # empty segments
        ("ab\x02A\x01b", {"A": "b"}),  # no \x01
        ("\x01b\x02A\x01\x02a\x01", {}),  # empty name / empty value / short
        ("k\x01v\x01w", {"k": "v\x01w"}),  # value keeps later \x01
        ("k\x01one\x02k\x01two", {"k": "two"}),  # last wins
        ("\x01", {}),
    ],
)
def test_string_to_properties_follows_java(text: str, expected: dict[str, str]) -> None:
    assert string_to_properties(text) == expected


# ---------------------------------------------------------------------------------------------
# Tag hash


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("*", 42),
        ("", 0),
        (None, 0),
        ("hello world", 1794106052),
        ("polygenelubricants", -(2**31)),  # Java's famous Integer.MIN_VALUE hash
        ("é", 233),
        ("😀", 31 * 0xD83D + 0xDE00),  # a surrogate pair: two UTF-16 units
        ("a😀", (31 * (31 * 97 + 0xD83D) + 0xDE00)),
    ],
)
def test_tags_hash_code(tags: str | None, code: int) -> None:
    assert tags_hash_code(tags) == code


@given(st.text(max_size=40))
def test_tags_hash_code_matches_reference(text: str) -> None:
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i : i + 2], "big")) % 2**32
    expected = h - 2**32 if h >= 2**31 else h
    assert tags_hash_code(text) == (expected if text else 0)


# ---------------------------------------------------------------------------------------------
# Batch


def test_batch_golden_bytes() -> None:
    expected = bytes.fromhex(GOLDEN_BATCH_HEX)
    assert (DATA / "message_batch_example.bin").read_bytes() == expected
    messages = [Message("T", b"hello", properties={"TAGS": "TagA"}), Message("T", b"", flag=1)]
    assert encode_batch(messages) == expected
    assert decode_batch(expected) == [
        BatchItem(0, b"hello", {"TAGS": "TagA"}),
        BatchItem(1, b"", {}),
    ]
    assert decode_batch(b"") == []


def test_batch_encode_errors_name_the_item() -> None:
    ok = Message("T", b"x")
    with pytest.raises(MessageEncodeError, match="batch item 2") as info:
        encode_batch([ok, ok, Message("T", b"x", properties={"k": "v" * MAX_PROPERTIES_LENGTH})])
    assert info.value.index == 2
    with pytest.raises(MessageEncodeError, match="batch item 1") as info:
        encode_batch([ok, Message("T", b"x", properties={"": "v"})])
    assert info.value.index == 1
    with pytest.raises(MessageEncodeError, match=r"batch item 0.*flag") as info:
        encode_batch([Message("T", b"x", flag=2**31)])
    assert info.value.index == 0


def test_batch_decode_errors_name_the_item_and_offset() -> None:
    good = bytes.fromhex(GOLDEN_BATCH_HEX)
    first = good[:36]
    cases = [
        (first + b"\x00" * 10, "TOTALSIZE", "truncated"),
        (first + struct.pack(">iiiii", 21, 0, 0, 0, 0) + b"\x00\x00", "TOTALSIZE", "TOTALSIZE 21"),
        (first + struct.pack(">iiiii", 40, 0, 0, 0, 0) + b"\x00\x00", "TOTALSIZE", "TOTALSIZE 40"),
        (first + struct.pack(">iiiii", 22, 0, 0, 0, 1) + b"\x00\x00", "BODYLENGTH", "BODYLENGTH 1"),
        (first + struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00", "BODYLENGTH", "BODYLENGTH -1"),
        (first + struct.pack(">iiiii", 23, 0, 0, 0, 0) + b"\x00\x00\x00", "PROPERTIESLENGTH", "ends"),
        (first + struct.pack(">iiiiih", 24, 0, 0, 0, 0, 2) + b"\xff\xfe", "PROPERTIES", "UTF-8"),
    ]
    for data, field, text in cases:
        with pytest.raises(MessageDecodeError, match=f"batch item 1 at offset 36: .*{text}") as info:
            decode_batch(data)
        assert (info.value.index, info.value.offset, info.value.field) == (1, 36, field)


# ---------------------------------------------------------------------------------------------
# Message ids


def test_offset_msg_id_spec_example() -> None:
    assert create_offset_msg_id("127.0.0.1", 10911, 168) == "7F00000100002A9F00000000000000A8"
    assert decode_offset_msg_id("7F00000100002A9F00000000000000A8") == ("127.0.0.1", 10911, 168)
    assert decode_offset_msg_id("7f00000100002a9f00000000000000a8").commit_log_offset == 168
    assert offset_msg_id_from_packed(LOCALHOST_10911, 2**40) == "7F00000100002A9F0000010000000000"


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


# ---------------------------------------------------------------------------------------------
# Message values


def test_message_is_immutable_and_helpers_copy() -> None:
    msg = Message.create("T", b"body", tags="TagA", keys=["k1", "k2"])
    assert msg.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.topic = "other"  # type: ignore[misc]
    delayed = msg.with_delay_time_level(3)
    assert delayed.delay_time_level == 3 and msg.delay_time_level == 0
    assert "DELAY" not in msg.properties
    assert delayed.without_property("DELAY") == msg
    assert msg.without_property("absent") is msg
    assert msg.with_properties({"A": "1", "TAGS": "TagB"}).properties == {
        "TAGS": "TagB",
        "KEYS": "k1 k2",
        "WAIT": "true",
        "A": "1",
    }
    assert msg.with_tags("X").tags == "X" and msg.tags == "TagA"
    assert msg.with_keys("a  b").key_list == ["a", "b"]
    assert Message("T").key_list == []


def test_message_accessors_follow_java() -> None:
    plain = Message("T", bytearray(b"abc"))  # type: ignore[arg-type]
    assert type(plain.body) is bytes and plain.body == b"abc"
    assert plain.wait_store_msg_ok is True  # absent means true
    assert plain.with_wait_store_msg_ok(False).wait_store_msg_ok is False
    assert plain.with_property("WAIT", "TRUE").wait_store_msg_ok is True
    assert plain.with_property("WAIT", "yes").wait_store_msg_ok is False
    assert Message.create("T", wait_store_msg_ok=False).properties == {"WAIT": "false"}
    assert Message.create("T", tags="", keys=iter([])).properties == {"WAIT": "true"}
    assert plain.tags is None and plain.keys is None and plain.unique_key is None
    assert plain.tags_code == 0 and plain.with_tags("TagA").tags_code == 2598919
    with pytest.raises(MessageDecodeError, match="DELAY"):
        _ = plain.with_property("DELAY", "soon").delay_time_level


def test_user_property_rejects_reserved_and_blank() -> None:
    assert {"KEYS", "TAGS", "UNIQ_KEY", "CLUSTER", "DELAY", "WAIT"} <= RESERVED_PROPERTY_NAMES
    msg = Message("T")
    assert msg.with_user_property("color", "red").properties == {"color": "red"}
    for name, value in [("TAGS", "x"), ("UNIQ_KEY", "x"), (" ", "x"), ("a", " ")]:
        with pytest.raises(MessageEncodeError):
            msg.with_user_property(name, value)


def test_message_ext_client_msg_id_rule() -> None:
    ext = MessageExt(topic="T", store_host=HostAddress("127.0.0.1", 10911), commit_log_offset=168)
    assert ext.msg_id == ext.client_msg_id == "7F00000100002A9F00000000000000A8"
    with_uniq = ext.with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "ABC")
    assert isinstance(with_uniq, MessageExt)
    assert with_uniq.client_msg_id == "ABC" and with_uniq.msg_id == ext.msg_id
    assert isinstance(ext, Message)


def test_message_queue_unchanged() -> None:
    a, b = MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-a", 2)
    assert a < b and str(a) == "MessageQueue [topic=T, brokerName=broker-a, queueId=1]"
    assert hash(a) == hash(MessageQueue("T", "broker-a", 1))


def test_sysflag_helpers() -> None:
    flag = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert MessageSysFlag.get_transaction_value(flag) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
    flag = MessageSysFlag.reset_transaction_value(flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert flag == MessageSysFlag.COMPRESSED_FLAG | 0x8
    assert MessageSysFlag.clear_compressed_flag(flag) == 0x8
    assert MessageSysFlag.check(flag, MessageSysFlag.COMPRESSED_FLAG)
    assert not MessageSysFlag.check(flag, MessageSysFlag.MULTI_TAGS_FLAG)
    assert MessageSysFlag.get_compression_type(0x301) == MessageSysFlag.COMPRESSION_ZLIB_TYPE


# ---------------------------------------------------------------------------------------------
# Property-based round trips

prop_names = st.text(min_size=1, max_size=12).filter(lambda s: "\x01" not in s and "\x02" not in s)
prop_values = st.text(min_size=1, max_size=20).filter(lambda s: "\x02" not in s)
properties_st = st.dictionaries(prop_names, prop_values, max_size=6)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def hosts(draw: st.DrawFn) -> HostAddress:
    port = draw(st.integers(0, 65535))
    address = draw(st.ip_addresses())
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return HostAddress(address.compressed, port)


@st.composite
def message_exts(draw: st.DrawFn) -> MessageExt:
    born, store = draw(hosts()), draw(hosts())
    v6_bits = (0x10 if ":" in born.host else 0) | (0x20 if ":" in store.host else 0)
    return MessageExt(
        topic=draw(st.text(max_size=40).filter(lambda t: len(t.encode()) <= 127)),
        body=draw(st.binary(max_size=200)),
        flag=draw(int32),
        properties=draw(properties_st),
        queue_id=draw(int32),
        queue_offset=draw(int64),
        sys_flag=(draw(int32) & ~0x30) | v6_bits,
        born_timestamp=draw(int64),
        born_host=born,
        store_timestamp=draw(int64),
        store_host=store,
        commit_log_offset=draw(int64),
        body_crc=draw(st.integers(0, 2**31 - 1)),
        reconsume_times=draw(int32),
        prepared_transaction_offset=draw(int64),
    )


@given(properties_st)
def test_properties_round_trip(props: dict[str, str]) -> None:
    text = properties_to_string(props)
    assert not text.endswith("\x02")
    assert string_to_properties(text) == props
    assert string_to_properties(text + "\x02") == props  # cpp's trailing separator


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


@given(
    st.lists(
        st.builds(Message, st.just("T"), st.binary(max_size=100), flag=int32, properties=properties_st),
        max_size=8,
    )
)
def test_batch_round_trip(messages: list[Message]) -> None:
    body = encode_batch(messages)
    assert decode_batch(body) == [(m.flag, m.body, dict(m.properties)) for m in messages]


# ---------------------------------------------------------------------------------------------
# Fuzzing: any input gives a value or the typed error


def _decode_everything(data: bytes) -> None:
    for call in (
        lambda: decode_stored_all(data, verify_crc=True, decompress_max_size=1 << 16),
        lambda: decode_stored(data, 0),
        lambda: decode_batch(data),
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
        bytes.fromhex(GOLDEN_BATCH_HEX),
    ]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(4000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randint(0, len(data))]
        for decode in (decode_stored_all, decode_batch):
            try:
                decode(bytes(data))
                outcomes["ok"] += 1
            except MessageDecodeError:
                outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0
