"""The HA replication frames (8-byte offset reports, 12-byte transfer headers), fuzzed."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol.ha import (
    HAProtocolError,
    OffsetReportReader,
    TransferReader,
    encode_offset_report,
    encode_transfer_header,
)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(
    transfers=st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300)), max_size=8),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_transfers_survive_any_split(transfers: list[tuple[int, bytes]], cuts: list[int]) -> None:
    stream = b"".join(encode_transfer_header(o, len(d)) + d for o, d in transfers)
    reader = TransferReader(max_body=300)
    got: list[tuple[int, bytes]] = []
    for piece in split(stream, cuts):
        got += reader.feed(piece)
    assert got == transfers
    assert reader.buffered == 0


@given(
    offsets=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=6), cuts=st.lists(st.integers(0, 100))
)
def test_the_master_reads_the_last_complete_report(offsets: list[int], cuts: list[int]) -> None:
    stream = b"".join(encode_offset_report(o) for o in offsets)
    reader = OffsetReportReader()
    last: int | None = None
    for piece in split(stream, cuts):
        seen = reader.feed(piece)
        if seen is not None:
            last = seen
    assert last == offsets[-1]


@given(garbage=st.binary(max_size=200))
def test_garbage_is_refused_cleanly_or_waits_for_more(garbage: bytes) -> None:
    reader = TransferReader(max_body=64)
    try:
        for offset, data in reader.feed(garbage):
            assert offset >= 0 and len(data) <= 64
    except HAProtocolError:
        pass
    with contextlib.suppress(HAProtocolError):
        OffsetReportReader().feed(garbage)


def test_an_oversized_or_negative_header_is_a_protocol_error() -> None:
    with pytest.raises(HAProtocolError):
        TransferReader(max_body=10).feed(struct.pack(">qi", 0, 11))
    with pytest.raises(HAProtocolError):
        TransferReader(max_body=10).feed(struct.pack(">qi", -1, 0))
    with pytest.raises(HAProtocolError):
        OffsetReportReader().feed(struct.pack(">q", -5))
    with pytest.raises(HAProtocolError):
        encode_transfer_header(0, -1)


def test_the_bytes_are_javas() -> None:
    # HAConnection: putLong(offset) putInt(size), big-endian; HAClient: putLong(maxOffset)
    assert encode_transfer_header(0x0102030405060708, 0x0A0B0C0D) == bytes.fromhex("01020304050607080a0b0c0d")
    assert encode_offset_report(1024) == bytes.fromhex("0000000000000400")
