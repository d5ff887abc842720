"""The batch body of SEND_BATCH_MESSAGE (spec §4.6; Java ``MessageDecoder.encodeMessages`` and
``decodeMessages``): each message as TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH and body,
PROPERTIESLENGTH (int16) and properties.

Imports: the standard library and the protocol's errors, message values and stored layout limits.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, NamedTuple

from .errors import MessageDecodeError, MessageEncodeError
from .message import Message, properties_to_string, string_to_properties
from .stored import MAX_PROPERTIES_LENGTH

if TYPE_CHECKING:
    import mmap

__all__ = ["BATCH_ITEM_HEAD", "BATCH_ITEM_MIN_SIZE", "BatchItem", "decode_batch", "encode_batch"]

BATCH_ITEM_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE MAGICCODE(0) BODYCRC(0) FLAG BODYLENGTH
BATCH_ITEM_MIN_SIZE: Final = BATCH_ITEM_HEAD.size + 2  # and PROPERTIESLENGTH
_I16: Final = struct.Struct(">h")


class BatchItem(NamedTuple):
    """One message of a batch body: the only fields the layout carries."""

    flag: int
    body: bytes
    properties: dict[str, str]


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The batch body of SEND_BATCH_MESSAGE (spec §4.6; Java ``MessageDecoder.encodeMessages``).

    Each item: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH + body, int16 length +
    properties. Raises ``MessageEncodeError`` naming the item index (properties > 32767 bytes,
    bad property pairs, a flag that does not fit an int32).
    """
    parts: list[bytes] = []
    for index, msg in enumerate(messages):
        try:
            props = properties_to_string(msg.properties).encode("utf-8")
        except MessageEncodeError as exc:
            raise MessageEncodeError(f"batch item {index}: {exc}", field=exc.field, index=index) from exc
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise MessageEncodeError(
                f"batch item {index}: properties are {props_len} bytes in UTF-8; at most "
                f"{MAX_PROPERTIES_LENGTH} fit",
                field="PROPERTIES",
                index=index,
            )
        body = msg.body
        body_len = len(body)
        try:
            head = BATCH_ITEM_HEAD.pack(BATCH_ITEM_MIN_SIZE + body_len + props_len, 0, 0, msg.flag, body_len)
        except struct.error as exc:
            raise MessageEncodeError(
                f"batch item {index}: flag={msg.flag!r} or body length {body_len} does not fit an int32",
                field="FLAG",
                index=index,
            ) from exc
        parts += (head, body, _I16.pack(props_len), props)
    return b"".join(parts)


def decode_batch(body: bytes | bytearray | memoryview | mmap.mmap) -> list[BatchItem]:
    """Split a batch body into ``(flag, body, properties)`` items (spec §4.6).

    MAGICCODE and BODYCRC are ignored, as Java's broker does. Raises ``MessageDecodeError``
    naming the item index and offset for a truncated item, a TOTALSIZE out of range, a
    BODYLENGTH or PROPERTIESLENGTH that disagrees with TOTALSIZE, or properties that are not UTF-8.
    """
    items: list[BatchItem] = []
    pos = 0
    size = len(body)
    index = 0
    while pos < size:
        available = size - pos
        if available < BATCH_ITEM_MIN_SIZE:
            raise _bad_item(
                index, pos, "TOTALSIZE", f"truncated: {available} bytes left, need {BATCH_ITEM_MIN_SIZE}"
            )
        total, _, _, flag, body_len = BATCH_ITEM_HEAD.unpack_from(body, pos)
        if not BATCH_ITEM_MIN_SIZE <= total <= available:
            raise _bad_item(
                index, pos, "TOTALSIZE", f"TOTALSIZE {total} is outside {BATCH_ITEM_MIN_SIZE}..{available}"
            )
        end = pos + total
        start = pos + BATCH_ITEM_HEAD.size
        if not 0 <= body_len <= total - BATCH_ITEM_MIN_SIZE:
            raise _bad_item(index, pos, "BODYLENGTH", f"BODYLENGTH {body_len} does not fit TOTALSIZE {total}")
        item_body = body[start : start + body_len]
        if type(item_body) is not bytes:
            item_body = bytes(item_body)
        start += body_len
        props_len = _I16.unpack_from(body, start)[0]
        start += 2
        if start + props_len != end:
            raise _bad_item(
                index,
                pos,
                "PROPERTIESLENGTH",
                f"PROPERTIESLENGTH {props_len} ends the item at {start + props_len}, TOTALSIZE at {end}",
            )
        try:
            props = string_to_properties(str(body[start:end], "utf-8")) if props_len else {}
        except UnicodeDecodeError as exc:
            raise _bad_item(index, pos, "PROPERTIES", f"properties are not UTF-8 ({exc.reason})") from None
        items.append(BatchItem(flag, item_body, props))
        pos = end
        index += 1
    return items


def _bad_item(index: int, offset: int, field: str, what: str) -> MessageDecodeError:
    return MessageDecodeError(
        f"bad batch item {index} at offset {offset}: {what}", offset=offset, field=field, index=index
    )
