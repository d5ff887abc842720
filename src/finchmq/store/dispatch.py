"""Dispatch (RocketMQ ``ReputMessageService`` + ``CommitLogDispatcher``s): consume queues, index, arrivals.

Owns the hand-off from the commit log to the derived data. Imports: ``finchmq.protocol`` (stored
layout, messages) and the store's queue and index classes.

Strategy:
    The append path does not re-parse what it wrote: under the put lock the commit log
    queues one ``DispatchRequest`` per put (a message, or a whole batch as parallel lists:
    no per-message objects). ``dispatch_pending(readable)`` applies queued requests whose
    bytes are readable, in commit-log order, under the dispatch lock: units into the
    consume queue (one write per batch), keys into the index, then the arrival listener per
    message. Without the transient store pool the writer calls it right after releasing the
    put lock, so a put that returns has been dispatched; with the pool the commit thread calls
    it after each commit (records are readable only once committed).
    ``rebuild(from, to)`` is the recovery path: it decodes the commit log itself.
    The listener runs on whichever thread dispatches (a writer or the commit thread) and must
    be quick and non-blocking (the broker hops to its loop with ``call_soon_threadsafe``).
"""

from __future__ import annotations

import collections
import itertools
import logging
import mmap
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.message import string_to_properties, tags_hash_code
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.stored import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, StoredLayout, decode_stored

from .config import CQ_STORE_UNIT_SIZE, SCHEDULE_TOPIC
from .consume_queue import CQ_UNIT, ConsumeQueue

if TYPE_CHECKING:
    from .index import IndexService
    from .mapped_file import MappedFile
    from .mapped_file_queue import MappedFileQueue

__all__ = ["DispatchRequest", "MessageArrivingListener", "ReputMessageService", "compute_tags_code"]

log = logging.getLogger(__name__)

MessageArrivingListener = Callable[[str, int, int, int, int, Mapping[str, str]], None]
"""``(topic, queue_id, logic_offset, tags_code, store_timestamp, properties)``; ``logic_offset`` is
the queue's max offset after the message (its queue offset + 1), as Java passes it."""

_TRAN_MASK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_PREPARED: Final = MessageSysFlag.TRANSACTION_PREPARED_TYPE
_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_HEAD: Final = StoredLayout.SIZE_MAGIC
_I32: Final = struct.Struct(">i")
# the property names the index reads, as they appear in a stored property string
_KEY_NAMES: Final = (
    MessageConst.PROPERTY_KEYS.encode() + b"\x01",
    MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01",
)


def _next_key_name(data: mmap.mmap, pos: int, stop: int) -> int:
    """Where the first KEYS or UNIQ_KEY property name in ``data[pos:stop]`` is; ``stop`` if none."""
    for name in _KEY_NAMES:  # mmap.find is memmem-fast
        at = data.find(name, pos, stop)
        if at >= 0:
            stop = at  # the other name only matters before it
    return stop


class _LazyProperties(Mapping[str, str]):
    """Properties of a batch item, parsed only if someone reads them (the listener may not)."""

    __slots__ = ("_parsed", "_raw")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._parsed: dict[str, str] | None = None

    def _map(self) -> dict[str, str]:
        if self._parsed is None:
            self._parsed = string_to_properties(self._raw.decode("utf-8", "replace"))
        return self._parsed

    def __getitem__(self, key: str) -> str:
        return self._map()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map())

    def __len__(self) -> int:
        return len(self._map())


def compute_tags_code(
    topic: str, tags: str | None, delay: str | None, store_timestamp: int, delay_levels: tuple[int, ...]
) -> int:
    """The consume-queue tagsCode (spec §4.5): tag hash, or for SCHEDULE_TOPIC_XXXX with DELAY
    the deliver time = store time + level delay (Java ``checkMessageAndReturnSize``)."""
    if topic == SCHEDULE_TOPIC and delay:
        try:
            level = int(delay)
        except ValueError:
            level = 0
        level = min(level, len(delay_levels))
        if level > 0:
            return store_timestamp + delay_levels[level - 1]
    return tags_hash_code(tags)


class DispatchRequest:
    """One put to dispatch: a message, or a batch as parallel per-message lists.

    ``commit_log_offset + rel_offsets[i]`` is message i's physical offset, ``queue_offset + i``
    its queue offset. ``keys``/``uniq_keys`` hold KEYS and UNIQ_KEY per message (None if none),
    ``properties`` per message (a dict, or lazily parsed raw bytes for batch items).
    """

    __slots__ = (
        "commit_log_offset",
        "end_offset",
        "keys",
        "prepared_transaction_offset",
        "properties",
        "queue_id",
        "queue_offset",
        "rel_offsets",
        "sizes",
        "store_timestamp",
        "sys_flag",
        "tags_codes",
        "topic",
        "uniq_keys",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        commit_log_offset: int,
        queue_offset: int,
        rel_offsets: Sequence[int],
        sizes: Sequence[int],
        tags_codes: Sequence[int],
        store_timestamp: int,
        keys: Sequence[str | bytes | None] | None,
        uniq_keys: Sequence[str | bytes | None] | None,
        properties: Sequence[Mapping[str, str] | bytes],
        sys_flag: int,
        prepared_transaction_offset: int = 0,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_offset = commit_log_offset
        self.queue_offset = queue_offset
        self.rel_offsets = rel_offsets
        self.sizes = sizes
        self.tags_codes = tags_codes
        self.store_timestamp = store_timestamp
        self.keys = keys
        self.uniq_keys = uniq_keys
        self.properties = properties
        self.sys_flag = sys_flag
        self.prepared_transaction_offset = prepared_transaction_offset
        self.end_offset = commit_log_offset + rel_offsets[-1] + sizes[-1]

    @property
    def msg_count(self) -> int:
        return len(self.sizes)


_CQ_STRUCTS: dict[int, struct.Struct] = {}


def _cq_struct(n: int) -> struct.Struct:
    st = _CQ_STRUCTS.get(n)
    if st is None:
        st = _CQ_STRUCTS[n] = struct.Struct(">" + "qiq" * n)
    return st


class ReputMessageService:
    """Applies dispatch requests to consume queues and the index, and notifies arrivals."""

    def __init__(
        self,
        find_consume_queue: Callable[[str, int], ConsumeQueue],
        index_service: IndexService | None,
        delay_levels: tuple[int, ...],
    ) -> None:
        self._find_cq = find_consume_queue
        self._index = index_service
        self._delay_levels = delay_levels
        self.pending: collections.deque[DispatchRequest] = collections.deque()
        self.lock = threading.Lock()
        self.listener: MessageArrivingListener | None = None
        self.dispatched_offset = 0  # commit-log offset up to which everything is dispatched
        self.last_store_timestamp = 0  # store time of the last dispatched message
        self._seeds: dict[str, int] = {}
        self.failed = False  # a consume queue or index file could not be written

    def dispatch_pending(self, readable_offset: int) -> None:
        """Apply every queued request that ends at or below ``readable_offset``."""
        pending = self.pending
        if not pending:
            return
        with self.lock:
            while pending:
                req = pending[0]
                if req.end_offset > readable_offset:
                    break
                pending.popleft()
                self.apply(req)

    def apply(self, req: DispatchRequest) -> None:
        tran = req.sys_flag & _TRAN_MASK
        n = len(req.sizes)
        if tran != _PREPARED and tran != _ROLLBACK:  # noqa: PLR1714 - two int compares are cheaper
            base = req.commit_log_offset
            if n == 1:
                units = CQ_UNIT.pack(base, req.sizes[0], req.tags_codes[0])
            else:
                units = _cq_struct(n).pack(
                    *itertools.chain.from_iterable(
                        zip([base + r for r in req.rel_offsets], req.sizes, req.tags_codes, strict=True)
                    )
                )
            cq = self._find_cq(req.topic, req.queue_id)
            if not cq.put_units(req.queue_offset, units, req.end_offset):
                self.failed = True
        if (
            self._index is not None
            and tran != _ROLLBACK
            and (req.keys is not None or req.uniq_keys is not None)
        ):
            self._build_index(req)
        listener = self.listener
        if listener is not None and tran not in (_PREPARED, _ROLLBACK):
            topic, queue_id, qo, ts = req.topic, req.queue_id, req.queue_offset, req.store_timestamp
            props = req.properties
            for i in range(n):
                p = props[i]
                try:
                    listener(
                        topic,
                        queue_id,
                        qo + i + 1,
                        req.tags_codes[i],
                        ts,
                        _LazyProperties(p) if isinstance(p, bytes) else p,
                    )
                except Exception:
                    log.exception("message arriving listener failed for %s@%d", topic, queue_id)
        self.dispatched_offset = req.end_offset
        self.last_store_timestamp = req.store_timestamp

    def _build_index(self, req: DispatchRequest) -> None:
        assert self._index is not None
        topic = req.topic
        seed = self._seeds.get(topic)
        if seed is None:
            if len(self._seeds) > 10_000:
                self._seeds.clear()
            seed = self._seeds[topic] = zlib.crc32(f"{topic}#".encode())
        base = req.commit_log_offset
        hashes: list[int] = []
        phys: list[int] = []
        keys = req.keys
        uniq = req.uniq_keys
        crc32 = zlib.crc32
        for i, rel in enumerate(req.rel_offsets):
            phy = base + rel
            if uniq is not None:
                u = uniq[i]
                if u:
                    # crc32(key, crc32(prefix)) == crc32(prefix + key): index_key_hash(f"{topic}#{u}")
                    hashes.append(crc32(u if isinstance(u, bytes) else u.encode(), seed) & 0x7FFFFFFF)
                    phys.append(phy)
            if keys is not None:
                k = keys[i]
                if k:
                    for key in (k if isinstance(k, bytes) else k.encode()).split(b" "):
                        if key:
                            hashes.append(crc32(key, seed) & 0x7FFFFFFF)
                            phys.append(phy)
        if hashes and not self._index.put_hashes(hashes, phys, req.store_timestamp):
            self.failed = True

    # ------------------------------------------------------------------ recovery

    def rebuild(self, mfq: MappedFileQueue, start: int, end: int, keyed_only_before: int = 0) -> int:
        """Decode the commit log records in [start, end), dispatch them (idempotent); returns how
        many. Before ``keyed_only_before`` only messages with KEYS or UNIQ_KEY are (the consume
        queues hold the others; the index may not)."""
        listener, self.listener = self.listener, None  # no arrival notices for old data
        try:
            count, offset = self.dispatch_range(mfq, start, end, keyed_only_before)
        finally:
            self.listener = listener
        self.dispatched_offset = max(self.dispatched_offset, offset)
        return count

    def dispatch_range(
        self, mfq: MappedFileQueue, start: int, end: int, keyed_only_before: int = 0
    ) -> tuple[int, int]:
        """Dispatch the whole records in [start, end): (how many, the offset after the last one).

        A record reaching past ``end`` stops the walk (a slave has only part of it yet); a BLANK
        filler moves to the next segment. Recovery and the slave's replication both use it.
        Records before ``keyed_only_before`` are skipped unless their bytes hold a KEYS or
        UNIQ_KEY property name (a cheap search that may also match a body: then it is decoded).
        """
        offset = start
        count = 0
        mf: MappedFile | None = None
        key_at = -1  # in mf: where the next KEYS/UNIQ_KEY name is, from the last search on
        while offset < end:
            if mf is None or not mf.file_from_offset <= offset < mf.file_from_offset + mf.file_size:
                mf = mfq.find_mapped_file_by_offset(offset)
                if mf is None:
                    break
                key_at = -1
            pos = offset - mf.file_from_offset
            view = mf.view
            if pos + 8 > mf.file_size:
                offset = mf.file_from_offset + mf.file_size
                continue
            if offset + 8 > end:
                break  # not even the record's head is here yet
            total, magic = _HEAD.unpack_from(view, pos)
            if magic == BLANK_MAGIC_CODE or (total == 0 and magic == 0):
                offset = mf.file_from_offset + mf.file_size
                continue
            if magic != MESSAGE_MAGIC_CODE:
                log.error("dispatch stopped at commit-log offset %d: bad magic", offset)
                break
            if offset + total > end:
                break
            if offset < keyed_only_before:
                if key_at < pos:  # one search finds the next keyed record, however far
                    # (keyed_only_before is a record boundary: no property name straddles it)
                    key_at = _next_key_name(
                        mf.mm, pos, min(keyed_only_before - mf.file_from_offset, mf.file_size)
                    )
                if key_at >= pos + total:
                    base = mf.file_from_offset
                    if key_at >= keyed_only_before - base or key_at >= mf.file_size:
                        # no key name up to the bound or the segment end (both record boundaries)
                        offset = min(keyed_only_before, base + mf.file_size, end)
                        continue
                    # Hop over the records up to the next key name on their TOTALSIZE alone (the
                    # recovery scan checked them), stopping at the one holding it or at the bounds
                    # (key_at is before keyed_only_before here).
                    last = min(key_at, end - base)
                    pos += total
                    while pos < key_at:
                        total = _I32.unpack_from(view, pos)[0]
                        if total <= 0 or pos + total > last:
                            break
                        pos += total
                    offset = base + pos
                    continue
            try:
                msg = decode_stored(view, pos)
            except MessageDecodeError as exc:
                log.error("dispatch stopped at commit-log offset %d: %s", offset, exc)
                break
            props = dict(msg.properties)
            tags_code = compute_tags_code(
                msg.topic,
                props.get(MessageConst.PROPERTY_TAGS),
                props.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL),
                msg.store_timestamp,
                self._delay_levels,
            )
            req = DispatchRequest(
                msg.topic,
                msg.queue_id,
                offset,
                msg.queue_offset,
                [0],
                [msg.store_size],
                [tags_code],
                msg.store_timestamp,
                [props.get(MessageConst.PROPERTY_KEYS)],
                [props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)],
                [props],
                msg.sys_flag,
                msg.prepared_transaction_offset,
            )
            self.apply(req)
            count += 1
            offset += msg.store_size
        return count, offset


_ = CQ_STORE_UNIT_SIZE
