"""zlib message bodies (Java ``UtilAll.compress``/``uncompress``): a body sent with
``MessageSysFlag.COMPRESSED_FLAG`` is deflated, and inflated with a size limit on the way back.

Imports: the standard library and the protocol's errors.
"""

from __future__ import annotations

import zlib
from typing import Final

from .errors import MessageDecodeError

__all__ = ["compress_body", "decompress_body"]


def compress_body(body: bytes | bytearray | memoryview, level: int = 5) -> bytes:
    """zlib (RFC 1950) at ``level``, as Java's ``UtilAll.compress`` and the C++ client (level 5)."""
    return zlib.compress(body, level)


MAX_DECOMPRESSED_BODY: Final = 64 * 1024 * 1024
"""The largest inflated body a client or the gRPC front end accepts from a broker (a zip-bomb guard)."""


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
