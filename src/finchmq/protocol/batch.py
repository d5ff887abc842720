"""The batch body of SEND_BATCH_MESSAGE (spec §4.6; Java ``MessageDecoder.encodeMessages`` and
``decodeMessages``): each message as TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH and body,
PROPERTIESLENGTH (int16) and properties.

Imports: the standard library and the protocol's errors, message values and stored layout limits.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, NamedTuple

from ._compiled import load as load_compiled
from .errors import MessageDecodeError, MessageEncodeError
from .message import Message, properties_to_string, string_to_properties
from .stored import MAX_PROPERTIES_LENGTH, MESSAGE_MAGIC_CODE, StoredLayout

if TYPE_CHECKING:
    import mmap

__all__ = [
    "BATCH_ITEM_HEAD",
    "BATCH_ITEM_MIN_SIZE",
    "BatchItem",
    "BatchRecords",
    "decode_batch",
    "encode_batch",
    "encode_batch_records",
]

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


class BatchRecords(NamedTuple):
    """A batch body turned into stored records by ``encode_batch_records`` (offsets and store time
    still zero): the records back to back, and per item its offset in ``data``, size, properties
    and the TAGS, KEYS and UNIQ_KEY values found in them (None when absent)."""

    data: bytes
    rel_offsets: list[int]
    sizes: list[int]
    props: list[bytes]
    tags: list[bytes | None]
    keys: list[bytes | None]
    uniq: list[bytes | None]


def _encode_batch_records_py(
    items: bytes | bytearray | memoryview,
    host_index: int,
    fixed: int,
    topic_part: bytes,
    batch_props: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_host: bytes,
    max_size: int,
) -> BatchRecords:
    """The items of a batch body (``MessageDecoder.encodeMessages``' layout) as stored records
    (Java ``MessageExtEncoder.encode(MessageExtBatch)``): ``fixed`` is ``prepare_stored``'s
    TOTALSIZE of an item without body and properties, ``topic_part`` TOPICLENGTH and the topic,
    ``batch_props`` the batch's own properties (appended to each item's), ``sys_flag`` the stored
    SYSFLAG. The commit log's batch path; offsets and the store time are filled under its lock.

    Raises:
        MessageEncodeError: ``field`` PROPERTIES for an item's properties over 32767 bytes,
            TOTALSIZE for an item over ``max_size`` (the message says so) or a malformed item,
            BODY for an empty batch, else the value that does not fit its Java type.
    """
    head_pack = StoredLayout.HEADS[host_index].pack
    src = memoryview(items)
    size_all = len(src)
    parts: list[bytes | bytearray | memoryview] = []
    out = BatchRecords(b"", [], [], [], [], [], [])
    rel = pos = index = 0
    while pos < size_all:
        if size_all - pos < BATCH_ITEM_MIN_SIZE:
            raise MessageEncodeError(f"batch item {index} is truncated", field="TOTALSIZE", index=index)
        item_total, _, _, flag, body_len = BATCH_ITEM_HEAD.unpack_from(src, pos)
        body_start = pos + BATCH_ITEM_HEAD.size
        body_end = body_start + body_len
        item_end = pos + item_total
        if body_len < 0 or item_total < BATCH_ITEM_MIN_SIZE or item_end > size_all or body_end + 2 > item_end:
            raise MessageEncodeError(f"batch item {index} has bad lengths", field="TOTALSIZE", index=index)
        props_len = _I16.unpack_from(src, body_end)[0]
        if body_end + 2 + props_len != item_end:
            raise MessageEncodeError(f"batch item {index} has bad lengths", field="TOTALSIZE", index=index)
        item_props = bytes(src[body_end + 2 : item_end])
        if batch_props:
            if props_len and item_props[-1] != 2:
                item_props = item_props + b"\x02" + batch_props
            else:
                item_props = item_props + batch_props
        plen = len(item_props)
        if plen > MAX_PROPERTIES_LENGTH:
            raise MessageEncodeError(
                f"batch item {index}'s properties are {plen} bytes", field="PROPERTIES", index=index
            )
        size = fixed + body_len + plen
        if size > max_size:
            raise MessageEncodeError(
                f"message size exceeded, msg total size: {size}, maxMessageSize: {max_size}",
                field="TOTALSIZE",
                index=index,
            )
        item_body = src[body_start:body_end]
        try:
            head = head_pack(
                size, MESSAGE_MAGIC_CODE, zlib.crc32(item_body) & 0x7FFFFFFF, queue_id, flag, 0, 0,
                sys_flag, born_timestamp, born_host, 0, store_host, 0, 0, body_len,
            )  # fmt: skip
        except struct.error as exc:
            raise MessageEncodeError.out_of_range(
                exc, queue_id=queue_id, sys_flag=sys_flag, born_timestamp=born_timestamp
            ) from exc
        parts.append(head)
        parts.append(item_body)
        parts.append(topic_part + _I16.pack(plen) + item_props)
        out.rel_offsets.append(rel)
        out.sizes.append(size)
        out.props.append(item_props)
        tags = keys = uniq = None
        if item_props:
            # one pass over the property string; Java keeps the last of repeated names
            for seg in item_props.split(b"\x02"):
                name, _, value = seg.partition(b"\x01")
                if value:
                    if name == b"TAGS":
                        tags = value
                    elif name == b"UNIQ_KEY":
                        uniq = value
                    elif name == b"KEYS":
                        keys = value
        out.tags.append(tags)
        out.keys.append(keys)
        out.uniq.append(uniq)
        rel += size
        pos = item_end
        index += 1
    if not out.sizes:
        raise MessageEncodeError("a batch holds at least one message", field="BODY")
    return out._replace(data=b"".join(parts))


# ``encode_batch_records``: the pure function above, or its compiled twin (_stored_c.pyx) where it
# is built; the pure one stays the reference.
encode_batch_records: Callable[..., BatchRecords] = _encode_batch_records_py
_stored_c = load_compiled("finchmq.protocol._stored_c")
if _stored_c is not None:
    _stored_c.bind_batch(_encode_batch_records_py, BatchRecords)
    encode_batch_records = _stored_c.encode_batch_records
