"""The commit log (RocketMQ ``CommitLog``): appends, the BLANK filler, queue offsets, reads.

Owns ``<root>/commitlog`` segments, the put lock and the topic-queue offset table. Its recovery
after a restart is in ``recovery.py``. Imports: ``finchmq.protocol.stored`` (the record packer
and layout), the store's segments and dispatch.

Strategy:
    A batch is encoded before the put lock (Java 4.9's pre-encode), item by item into one
    buffer; a single message is written in place under it, in parts (no buffer to copy from:
    it is the per-send path). Both pack with the protocol's ``prepare_stored``; the single
    message with ``pack_stored_into`` too (``pack_stored_head``'s fixed part, the body and the
    tail written straight into the segment: compiled where built), the batch its items with
    ``StoredLayout.HEADS`` directly (tests/store/test_commit_log_layout.py pins both). Under the
    lock the commit log picks the segment (writing the BLANK record and rolling when the record
    plus 8 bytes does not fit, as Java's END_OF_FILE), assigns queue and physical offsets and the store
    timestamp, copies the bytes in, and queues a ``DispatchRequest``. Every record's 8-byte
    head (TOTALSIZE + MAGICCODE) is written after the rest of it, and the first record of a
    batch last of all, so a process killed mid-copy leaves a zero head that recovery reads as
    the clean end of the log: no partial record is ever accepted.
    ``begin_time_in_lock`` is the ms timestamp the current append took the lock (0 when free);
    ``is_os_page_cache_busy`` reads it from any thread.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Mapping
from typing import Final

from finchmq.protocol.batch import encode_batch_records
from finchmq.protocol.errors import MessageEncodeError
from finchmq.protocol.message import properties_to_string, tags_hash_code
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.stored import (
    MESSAGE_MAGIC_CODE,
    MIN_STORED_SIZE,
    StoredLayout,
    encode_blank_into,
    pack_stored_into,
    prepare_stored,
)

from .config import SCHEDULE_TOPIC, MessageStoreConfig
from .dispatch import DispatchRequest, ReputMessageService, compute_tags_code
from .inner import MessageExtBatch, MessageExtBrokerInner
from .mapped_file import MappedFile, TransientStorePool
from .mapped_file_queue import AllocateMappedFileService, MappedFileQueue
from .status import AppendMessageResult, AppendMessageStatus, PutMessageStatus

__all__ = ["END_FILE_MIN_BLANK_LENGTH", "CommitLog", "EncodedBatch"]

log = logging.getLogger(__name__)

END_FILE_MIN_BLANK_LENGTH: Final = 8  # CommitLog.END_FILE_MIN_BLANK_LENGTH
_TRAN_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_PREPARED: Final = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_I16: Final = struct.Struct(">h")
# The record layout is StoredLayout's (protocol/stored.py), here under short names.
_HEAD: Final = StoredLayout.SIZE_MAGIC
_QUEUE_OFFSET: Final = StoredLayout.QUEUE_OFFSET
_STORE_TIMESTAMP_V6: Final = StoredLayout.STORE_TIMESTAMP_V4 + StoredLayout.V6_EXTRA
_FIRST: Final = (0,)  # rel_offsets of a single message
_TAGS: Final = MessageConst.PROPERTY_TAGS
_KEYS: Final = MessageConst.PROPERTY_KEYS
_UNIQ: Final = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_DELAY: Final = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_PUT_OK: Final = PutMessageStatus.PUT_OK
_APPEND_OK: Final = AppendMessageStatus.PUT_OK


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_TAGS_CODES: dict[bytes, int] = {}


def _tags_code_of(tags: bytes | None) -> int:
    """``tags_hash_code`` of UTF-8 tag bytes, memoised (few distinct tags, many messages)."""
    if not tags:
        return 0
    code = _TAGS_CODES.get(tags)
    if code is None:
        if len(_TAGS_CODES) > 4096:
            _TAGS_CODES.clear()
        code = _TAGS_CODES[tags] = tags_hash_code(tags.decode("utf-8", "replace"))
    return code


class EncodedBatch:
    """A batch turned into stored records (offsets still zero), ready to append."""

    __slots__ = (
        "born_host",
        "born_timestamp",
        "data",
        "has_keys",
        "keys",
        "props",
        "rel_offsets",
        "sizes",
        "sys_flag",
        "tags_codes",
        "total",
        "uniq",
        "v6_born",
    )

    def __init__(self) -> None:
        self.data = b""
        self.rel_offsets: list[int] = []
        self.sizes: list[int] = []
        self.tags_codes: list[int] = []
        self.keys: list[bytes | None] = []
        self.uniq: list[bytes | None] = []
        self.has_keys = False
        self.props: list[bytes] = []
        self.total = 0
        self.v6_born = False
        self.sys_flag = 0
        self.born_timestamp = 0
        self.born_host = b""


class CommitLog:
    """Append-only log of stored records across fixed-size segments."""

    def __init__(
        self,
        config: MessageStoreConfig,
        reput: ReputMessageService,
        allocate_service: AllocateMappedFileService | None,
        pool: TransientStorePool | None,
    ) -> None:
        self.config = config
        self.reput = reput
        self.file_size = config.mapped_file_size_commit_log
        self.mapped_file_queue = MappedFileQueue(
            config.commit_log_dir, self.file_size, allocate_service, pool
        )
        self.put_lock = threading.Lock()
        self.begin_time_in_lock = 0
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._delay_levels = config.delay_levels_ms
        self._max_message_size = config.max_message_size
        self._inject_delay = config.inject_put_delay_millis / 1000
        self._topic_cache: dict[str, bytes] = {}
        self.on_roll: list[object] = []

    # ------------------------------------------------------------------ offsets

    def get_min_offset(self) -> int:
        mf = self.mapped_file_queue.get_first_mapped_file()
        return mf.file_from_offset if mf is not None else -1

    def get_max_offset(self) -> int:
        """End of the readable log (the committed position with the transient store pool)."""
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def _topic_bytes(self, topic: str) -> bytes:
        b = self._topic_cache.get(topic)
        if b is None:
            b = topic.encode("utf-8")
            if len(self._topic_cache) > 10_000:
                self._topic_cache.clear()
            self._topic_cache[topic] = b
        return b

    # ------------------------------------------------------------------ append

    def _writable_file(self, size: int) -> MappedFile | AppendMessageStatus | PutMessageStatus:
        """The segment the next ``size``-byte record goes to, writing the BLANK filler and rolling
        when it does not fit (caller holds the put lock)."""
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                return PutMessageStatus.CREATE_MAPEDFILE_FAILED
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return AppendMessageStatus.MESSAGE_SIZE_EXCEEDED  # fits no segment: waste none
        free = mf.file_size - mf.wrote_position
        if size + END_FILE_MIN_BLANK_LENGTH > free:
            mf.fill_to_end(encode_blank_into)
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                return PutMessageStatus.CREATE_MAPEDFILE_FAILED
            for hook in self.on_roll:
                hook()  # type: ignore[operator]
        return mf

    def _file_for_append(self, size: int) -> MappedFile | tuple[PutMessageStatus, AppendMessageResult | None]:
        """Under the put lock: the segment to append ``size`` bytes to, or the failed outcome.
        The chaos knob ``inject_put_delay_millis`` holds the lock here."""
        if self._inject_delay:
            time.sleep(self._inject_delay)
        mf = self._writable_file(size)
        if isinstance(mf, MappedFile):
            return mf
        if isinstance(mf, AppendMessageStatus):  # MESSAGE_SIZE_EXCEEDED, MESSAGE_ILLEGAL as in Java
            log.warning(
                "putMessage a %d-byte record is larger than a commit log segment (%d)", size, self.file_size
            )
            return PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageResult(status=mf)
        return mf, None

    def put_message(
        self, msg: MessageExtBrokerInner, properties: Mapping[str, str]
    ) -> tuple[PutMessageStatus, AppendMessageResult | None]:
        """Append one message (``properties``: its properties, parsed). Returns the status and,
        when appended, the append result.

        The record is written straight into the segment under the put lock (head last), not
        encoded into a buffer first and copied: this is the broker's per-send path.
        """
        topic = msg.topic
        topic_b = self._topic_cache.get(topic)
        if topic_b is None:
            topic_b = self._topic_bytes(topic)
        props_text = msg.properties_string
        if props_text is None:
            try:
                props_text = properties_to_string(properties)
            except MessageEncodeError as exc:
                log.warning("putMessage bad properties: %s", exc)
                return PutMessageStatus.MESSAGE_ILLEGAL, None
        body = msg.body
        born_host, store_host = msg.born_host, msg.store_host
        try:
            hosts, size, crc, tail, stored_flag = prepare_stored(
                topic_b, props_text.encode("utf-8"), body, born_host, store_host, msg.sys_flag
            )
        except MessageEncodeError as exc:  # a topic, properties or host the layout cannot hold
            log.warning("putMessage cannot store the message: %s", exc)
            if exc.field == "PROPERTIES":
                return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, None
            return PutMessageStatus.MESSAGE_ILLEGAL, None
        if size > self._max_message_size:
            log.warning(
                "message size exceeded, msg total size: %d, maxMessageSize: %d", size, self._max_message_size
            )
            return PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageResult(
                status=AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
            )
        sys_flag = msg.sys_flag
        tags = properties.get(_TAGS)
        delay = properties.get(_DELAY) if topic == SCHEDULE_TOPIC else None
        keys = properties.get(_KEYS)
        uniq = properties.get(_UNIQ)
        tags_code = msg.tags_code
        queue_id = msg.queue_id
        prepared_offset = msg.prepared_transaction_offset
        tran = sys_flag & _TRAN_MASK
        counted = tran not in (_PREPARED, _ROLLBACK)  # half messages take no queue offset
        key = (topic, queue_id)
        table = self.topic_queue_table
        with self.put_lock:
            now = _now_ms()
            self.begin_time_in_lock = now
            try:
                mf = self._file_for_append(size)
                if not isinstance(mf, MappedFile):
                    return mf
                pos = mf.wrote_position
                phy = mf.file_from_offset + pos
                queue_offset = table.get(key, 0) if counted else 0
                try:
                    end = pack_stored_into(
                        mf.write_view, pos, hosts, size, crc, queue_id, msg.flag, queue_offset, phy,
                        stored_flag, msg.born_timestamp, born_host, now, store_host, msg.reconsume_times,
                        prepared_offset, body, tail,
                    )  # fmt: skip
                except MessageEncodeError as exc:
                    log.warning("putMessage cannot encode the message: %s", exc)
                    return PutMessageStatus.MESSAGE_ILLEGAL, None
                if counted:
                    table[key] = queue_offset + 1
                mf.appended(end, now)
                if tags_code is None or delay:
                    tags_code = compute_tags_code(topic, tags, delay, now, self._delay_levels)
                self.reput.pending.append(
                    DispatchRequest(
                        topic,
                        queue_id,
                        phy,
                        queue_offset,
                        _FIRST,
                        (size,),
                        (tags_code,),
                        now,
                        (keys,) if keys else None,
                        (uniq,) if uniq else None,
                        (properties,),
                        sys_flag,
                        prepared_offset,
                    )
                )
                elapsed = _now_ms() - now
            finally:
                self.begin_time_in_lock = 0
        if elapsed > 500:
            log.warning("[NOTIFYME]putMessage in lock cost time(ms)=%d, bodyLength=%d", elapsed, len(body))
        return _PUT_OK, AppendMessageResult(
            _APPEND_OK, phy, size, queue_offset, now, 1, elapsed, store_host, (phy,)
        )

    def encode_batch(self, batch: MessageExtBatch) -> EncodedBatch | PutMessageStatus:
        """Turn a batch body into stored records (Java ``MessageExtEncoder.encode(MessageExtBatch)``)."""
        topic, queue_id, properties, sys_flag = batch.topic, batch.queue_id, batch.properties, batch.sys_flag
        born_timestamp, born_host, store_host = batch.born_timestamp, batch.born_host, batch.store_host
        topic_b = self._topic_bytes(topic)
        try:
            batch_props = properties_to_string(properties).encode("utf-8") if properties else b""
        except MessageEncodeError:
            return PutMessageStatus.MESSAGE_ILLEGAL
        try:  # what every item shares: the host index and the size without body and properties
            hosts, fixed, _, _, stored_flag = prepare_stored(
                topic_b, b"", b"", born_host, store_host, sys_flag
            )
        except MessageEncodeError:
            return PutMessageStatus.MESSAGE_ILLEGAL
        try:  # tests/store/test_commit_log_layout.py pins these bytes to encode_stored's
            records = encode_batch_records(
                batch.body, hosts, fixed, bytes((len(topic_b),)) + topic_b, batch_props, queue_id,
                stored_flag, born_timestamp, born_host, store_host, self._max_message_size,
            )  # fmt: skip
        except MessageEncodeError as exc:
            if exc.field == "PROPERTIES":
                return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            if exc.field == "TOTALSIZE" and str(exc).startswith("message size exceeded"):
                log.warning("%s", exc)
            return PutMessageStatus.MESSAGE_ILLEGAL
        out = EncodedBatch()
        out.v6_born = len(born_host) == 20
        out.data = records.data
        out.rel_offsets = records.rel_offsets
        out.sizes = records.sizes
        out.props = records.props
        out.tags_codes = [_tags_code_of(tags) for tags in records.tags]
        keys_list = out.keys = records.keys
        uniq_list = out.uniq = records.uniq
        out.total = records.rel_offsets[-1] + records.sizes[-1]
        out.has_keys = any(keys_list) or any(uniq_list)
        out.sys_flag = stored_flag  # the PATCH_V4 write rewrites it
        out.born_timestamp = born_timestamp
        out.born_host = born_host
        return out

    def put_messages(
        self, batch: MessageExtBatch, encoded: EncodedBatch
    ) -> tuple[PutMessageStatus, AppendMessageResult | None]:
        """Append ``batch``, encoded by ``encode_batch``, as one contiguous write in one segment
        (Java ``putMessages``)."""
        topic, queue_id, sys_flag, store_host = batch.topic, batch.queue_id, batch.sys_flag, batch.store_host
        total = encoded.total
        key = (topic, queue_id)
        n = len(encoded.sizes)
        data = memoryview(encoded.data)
        rels = encoded.rel_offsets
        v6_born = encoded.v6_born
        keys = encoded.keys if encoded.has_keys else None
        uniq = encoded.uniq if encoded.has_keys else None
        stored_flag = encoded.sys_flag
        born_ts = encoded.born_timestamp
        born_host = encoded.born_host
        with self.put_lock:
            now = _now_ms()
            self.begin_time_in_lock = now
            try:
                mf = self._file_for_append(total)
                if not isinstance(mf, MappedFile):
                    return mf
                pos = mf.wrote_position
                phy = mf.file_from_offset + pos
                queue_offset = self.topic_queue_table.get(key, 0)
                self.topic_queue_table[key] = queue_offset + n

                def fill_offsets(wv: memoryview, pos: int) -> None:
                    """Each record's QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP, in place."""
                    qo = queue_offset
                    if not v6_born:  # QUEUEOFFSET .. STORETIMESTAMP in one call
                        patch = StoredLayout.PATCH_V4.pack_into
                        for r in rels:
                            patch(
                                wv, pos + r + _QUEUE_OFFSET, qo, phy + r, stored_flag, born_ts, born_host, now
                            )
                            qo += 1
                    else:
                        offsets, timestamp = StoredLayout.OFFSETS.pack_into, StoredLayout.TIMESTAMP.pack_into
                        for r in rels:
                            offsets(wv, pos + r + _QUEUE_OFFSET, qo, phy + r)
                            timestamp(wv, pos + r + _STORE_TIMESTAMP_V6, now)
                            qo += 1

                mf.append_record(data, now, fill_offsets)
                self.reput.pending.append(
                    DispatchRequest(
                        topic,
                        queue_id,
                        phy,
                        queue_offset,
                        rels,
                        encoded.sizes,
                        encoded.tags_codes,
                        now,
                        keys,
                        uniq,
                        encoded.props,
                        sys_flag,
                        0,
                    )
                )
                elapsed = _now_ms() - now
            finally:
                self.begin_time_in_lock = 0
        data.release()
        return PutMessageStatus.PUT_OK, AppendMessageResult(
            status=AppendMessageStatus.PUT_OK,
            wrote_offset=phy,
            wrote_bytes=total,
            logics_offset=queue_offset,
            store_timestamp=now,
            msg_num=n,
            page_cache_rt=elapsed,
            store_host=store_host,
            offsets=tuple(phy + r for r in rels),
        )

    # ------------------------------------------------------------------ reads

    def get_data(self, offset: int, size: int | None = None) -> memoryview | None:
        """The stored bytes at ``offset`` (``size`` bytes, or the whole record), if readable."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if size is None:
            head = mf.select(pos, 8)
            if head is None:
                return None
            with head:
                size, magic = _HEAD.unpack(head)
            if magic != MESSAGE_MAGIC_CODE or size < MIN_STORED_SIZE:
                return None
        return mf.select(pos, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        buf = self.get_data(offset, size)
        if buf is None:
            return -1
        with buf:
            ts = StoredLayout.read_store_timestamp(buf)
            return -1 if ts is None else ts

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown()
