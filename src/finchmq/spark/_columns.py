"""Pulled records straight into Arrow columns: the source's hot path.

Owns: ``ARROW_SCHEMA`` (the row layout Spark receives, equal to ``SCHEMA`` in Arrow terms) and
``Columns`` (one queue's rows, accumulated as Python lists and flushed into a record batch).
Imports: pyarrow, ``finchmq.protocol.stored`` (the record layout's constants and the generic
decoder) and ``finchmq.client`` (property names).

Strategy: a pull answer's body is a run of stored records (spec §4.1). The common record (IPv4
hosts, body not compressed) is read with one precompiled struct and a split of its property
string, appending to the column lists: no ``MessageExt``, no property dict per row, no host
objects. Anything else (IPv6 hosts, a compressed body, a record that does not add up) goes
through ``finchmq.protocol.stored.decode_stored``, which inflates bodies and raises
``MessageDecodeError`` naming the offset and field of a corrupt record.
"""

from __future__ import annotations

import struct
from typing import Final

import pyarrow as pa

from finchmq.client import MessageConst
from finchmq.client.records import (
    MAX_DECOMPRESSED_BODY,
    MESSAGE_MAGIC_CODE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageSysFlag,
    decode_stored,
    offset_msg_id_from_packed,
)

__all__ = ["ARROW_SCHEMA", "HIDDEN_PROPERTIES", "Columns"]

_TS: Final = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow (what it checks against)
_TS_MS: Final = pa.timestamp("ms", tz="UTC")
ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("topic", pa.string(), False),
        pa.field("brokerName", pa.string(), False),
        pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False),
        pa.field("msgId", pa.string(), False),
        pa.field("keys", pa.string(), True),
        pa.field("tags", pa.string(), True),
        pa.field("body", pa.binary(), False),
        pa.field("properties", pa.map_(pa.string(), pa.string()), False),
        pa.field("bornTimestamp", _TS, False),
        pa.field("storeTimestamp", _TS, False),
        pa.field("reconsumeTimes", pa.int32(), False),
    ]
)

# Not in the ``properties`` column: those with a column of their own, those the client adds at
# pull time (not stored), and the broker's bookkeeping (CLUSTER; WAIT, which batches carry).
_UNIQ: Final = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TAGS: Final = MessageConst.PROPERTY_TAGS
_KEYS: Final = MessageConst.PROPERTY_KEYS
HIDDEN_PROPERTIES: Final = frozenset(
    {
        _TAGS,
        _KEYS,
        _UNIQ,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_CLUSTER,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
    }
)

# Spec §4.1 with IPv4 hosts: TOTALSIZE MAGICCODE BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET
# SYSFLAG BORNTIMESTAMP BORNHOST STORETIMESTAMP STOREHOST RECONSUMETIMES PREPAREDTRANSACTIONOFFSET
# BODYLENGTH, then BODY, TOPICLENGTH (1 byte) + TOPIC, PROPERTIESLENGTH (2 bytes) + PROPERTIES.
# Only the fields every row needs are unpacked (pad bytes skip the rest): TOTALSIZE MAGICCODE
# QUEUEOFFSET SYSFLAG BORNTIMESTAMP STORETIMESTAMP RECONSUMETIMES BODYLENGTH.
_HEADER: Final = struct.Struct(">ii12xq8xiq8xq8xi8xi")
_HEADER_SIZE: Final = _HEADER.size  # 88
_PHYSICAL_OFFSET: Final = struct.Struct(">q")  # for the offset message id, when there is no UNIQ_KEY
_PHYSICAL_OFFSET_POS: Final = 28
_STORE_HOST_POS: Final = 64
_SLOW_FLAGS: Final = (
    MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
)


class Columns:
    """One queue's rows as column lists; ``add`` decodes a pull body, ``flush`` makes a batch."""

    __slots__ = (
        "bodies",
        "body_ends",
        "born",
        "broker",
        "keys",
        "map_offsets",
        "msg_ids",
        "offsets",
        "prop_keys",
        "prop_values",
        "queue_id",
        "reconsume",
        "stored",
        "tags",
        "topic",
    )

    def __init__(self, topic: str, broker: str, queue_id: int) -> None:
        self.topic, self.broker, self.queue_id = topic, broker, queue_id
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.msg_ids: list[str] = []
        self.keys: list[str | None] = []
        self.tags: list[str | None] = []
        # Bodies stay views into the pull answers until a flush joins them into one buffer: one
        # copy per byte, and no bytes object per row (half the flush time was the second copy).
        self.bodies: list[memoryview | bytes] = []
        self.body_ends: list[int] = [0]
        self.map_offsets: list[int] = [0]
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def body_bytes(self) -> int:
        """Bytes of bodies added since the last flush."""
        return self.body_ends[-1]

    def add(self, body: bytes | bytearray | memoryview, lo: int, hi: int, tags: frozenset[str] | None) -> int:
        """Add the records of a pull ``body`` with queue offsets in ``[lo, hi)`` and, when ``tags``
        is given, a TAGS in it. Returns the first queue offset in the body that is ``>= lo``
        (``hi`` if none): where the answer really started, for gap detection.

        Raises:
            MessageDecodeError: a record is corrupt (names its offset and field).
        """
        data = body if type(body) is bytes else bytes(body)
        view = memoryview(data)
        size = len(data)
        first = hi
        unpack = _HEADER.unpack_from
        hidden = HIDDEN_PROPERTIES
        # Bound methods once per pull, not once per row.
        add_offset, add_id, add_key, add_tag = (
            self.offsets.append,
            self.msg_ids.append,
            self.keys.append,
            self.tags.append,
        )
        add_body, add_body_end, add_born, add_stored, add_reconsume = (
            self.bodies.append,
            self.body_ends.append,
            self.born.append,
            self.stored.append,
            self.reconsume.append,
        )
        prop_keys, prop_values, add_map_offset = self.prop_keys, self.prop_values, self.map_offsets.append
        pos = 0
        while pos < size:
            if size - pos < _HEADER_SIZE:
                pos = self._add_slow(data, pos, lo, hi, tags)  # raises: truncated
                continue
            total, magic, offset, sys_flag, born, stored, reconsume, body_len = unpack(data, pos)
            start = pos + _HEADER_SIZE
            topic_at = start + body_len
            end = pos + total
            if (
                magic != MESSAGE_MAGIC_CODE
                or sys_flag & _SLOW_FLAGS
                or body_len < 0
                or end > size
                or topic_at + 3 > end
            ):
                pos = self._add_slow(data, pos, lo, hi, tags)
                continue
            props_at = topic_at + 1 + data[topic_at]
            props_len = (data[props_at] << 8) | data[props_at + 1]
            if props_at + 2 + props_len != end:
                pos = self._add_slow(data, pos, lo, hi, tags)
                continue
            record = pos
            pos = end
            if offset < lo or offset >= hi:
                continue
            if first == hi:
                first = offset
            uniq = tag = key = None
            user: dict[str, str] = {}
            if props_len:
                for item in str(data[props_at + 2 : end], "utf-8").split(PROPERTY_SEPARATOR):
                    name, _, value = item.partition(NAME_VALUE_SEPARATOR)
                    if not name or not value:
                        continue  # Java string2messageProperties skips these
                    if name in hidden:
                        if name == _UNIQ:
                            uniq = value
                        elif name == _TAGS:
                            tag = value
                        elif name == _KEYS:
                            key = value
                    else:
                        user[name] = value
            if tags is not None and tag not in tags:
                continue
            add_offset(offset)
            if uniq is None:
                phys = _PHYSICAL_OFFSET.unpack_from(data, record + _PHYSICAL_OFFSET_POS)[0]
                uniq = offset_msg_id_from_packed(
                    data[record + _STORE_HOST_POS : record + _STORE_HOST_POS + 8], phys
                )
            add_id(uniq)
            add_key(key)
            add_tag(tag)
            add_body(view[start:topic_at])
            add_body_end(self.body_ends[-1] + body_len)
            if user:
                prop_keys.extend(user)
                prop_values.extend(user.values())
            add_map_offset(len(prop_keys))
            add_born(born)
            add_stored(stored)
            add_reconsume(reconsume)
        return first

    def _add_slow(self, data: bytes, pos: int, lo: int, hi: int, tags: frozenset[str] | None) -> int:
        """The generic decoder for one record; returns where the next record starts."""
        msg = decode_stored(data, pos, decompress_max_size=MAX_DECOMPRESSED_BODY)
        props = msg.properties
        tag = props.get(_TAGS)
        if lo <= msg.queue_offset < hi and (tags is None or tag in tags):
            self.offsets.append(msg.queue_offset)
            self.msg_ids.append(props.get(_UNIQ) or msg.msg_id)
            self.keys.append(props.get(_KEYS))
            self.tags.append(tag)
            self.bodies.append(msg.body)
            self.body_ends.append(self.body_ends[-1] + len(msg.body))
            for name, value in props.items():
                if name not in HIDDEN_PROPERTIES:
                    self.prop_keys.append(name)
                    self.prop_values.append(value)
            self.map_offsets.append(len(self.prop_keys))
            self.born.append(msg.born_timestamp)
            self.stored.append(msg.store_timestamp)
            self.reconsume.append(msg.reconsume_times)
        return pos + msg.store_size

    def flush(self) -> pa.RecordBatch:
        """The rows added so far as one record batch of ``ARROW_SCHEMA``; starts over empty."""
        n = len(self.offsets)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.broker] * n, pa.string()),
                pa.array([self.queue_id] * n, pa.int32()),
                pa.array(self.offsets, pa.int64()),
                pa.array(self.msg_ids, pa.string()),
                pa.array(self.keys, pa.string()),
                pa.array(self.tags, pa.string()),
                pa.Array.from_buffers(
                    pa.binary(),
                    n,
                    [
                        None,
                        pa.array(self.body_ends, pa.int32()).buffers()[1],
                        pa.py_buffer(b"".join(self.bodies)),
                    ],
                ),
                pa.MapArray.from_arrays(
                    pa.array(self.map_offsets, pa.int32()),
                    pa.array(self.prop_keys, pa.string()),
                    pa.array(self.prop_values, pa.string()),
                ),
                pa.array(self.born, pa.int64()).cast(_TS_MS).cast(_TS),
                pa.array(self.stored, pa.int64()).cast(_TS_MS).cast(_TS),
                pa.array(self.reconsume, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch
