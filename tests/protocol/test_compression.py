"""Tests for finchmq.protocol.compression: zlib bodies and the inflate limit."""

from __future__ import annotations

import pytest

from finchmq.protocol.compression import compress_body, decompress_body
from finchmq.protocol.errors import MessageDecodeError


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
