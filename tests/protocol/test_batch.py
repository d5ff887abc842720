"""Tests for finchmq.protocol.batch: the batch body of spec §4.6, golden bytes, errors naming the
item, round trips, fuzzing."""

from __future__ import annotations

import contextlib
import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol.batch import BatchItem, decode_batch, encode_batch
from finchmq.protocol.errors import MessageDecodeError, MessageEncodeError
from finchmq.protocol.message import Message
from finchmq.protocol.stored import MAX_PROPERTIES_LENGTH

from .strategies import int32, properties_st

DATA = Path(__file__).parent / "data"

# Spec §4.6: two items; the second has flag 1, an empty body and no properties.
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


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    with contextlib.suppress(MessageDecodeError):
        decode_batch(data)


def test_fuzz_mutations_seeded() -> None:
    rng = random.Random(1234)
    seed = bytes.fromhex(GOLDEN_BATCH_HEX)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(4000):
        data = bytearray(seed)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randint(0, len(data))]
        try:
            decode_batch(bytes(data))
            outcomes["ok"] += 1
        except MessageDecodeError:
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0
