"""``PopBufferMergeService`` (Java 5.3.3): check points waiting in memory, and the offsets
pop commits.

Every pop of a queue leaves a ``PopCheckPointWrapper`` in that queue's FIFO (``commit_offsets``,
keyed ``topic@group@queueId``); the group's consumer offset moves to a wrapper's
``next_begin_offset`` only once the wrapper is *finished*: its check point is in the revive
topic, or every message of it was acked while it was still in memory. Until then the next pop
continues from the newest wrapper (``get_latest_offset``), and a broker killed in between
hands the messages out again from the committed offset: popped messages are never lost.

With ``enablePopBufferMerge`` (Java's default: off) a check point first waits here: acks that
arrive within ``popCkStayBufferTime`` (10 s) are merged into its bits and never written; a check
point acked completely is never written at all. It is written, with the acks it collected, when
it has waited ``popCkStayBufferTime`` or is within ``popCkStayBufferTimeOut`` (3 s) of its revive
time, whichever comes first; an ack refused here (1.5 s before either) goes to the revive topic
itself. Without merging, ``add_ck_just_offset`` writes the check point during the pop.

Strategy: Java scans the whole buffer every 5 ms. Here everything runs on the event loop and
work is found by events: a heap of store deadlines for buffered check points, the set of queues
whose head may have become committable, and the wrappers whose write must be retried; the loop
wakes when there is work (at most every 5 ms while some remains). Decisions are Java's.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from finchmq.broker.config import BrokerConfig
from finchmq.broker.offset import ConsumerOffsetManager
from finchmq.common.metrics import Histogram
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.pop import AckMsg, BatchAckMsg, PopCheckPoint, build_polling_key

from .queue_lock import QueueLockManager
from .revive_log import STORED_STATUSES, ReviveLog

__all__ = ["SCAN_TIME_BUCKETS", "MergeKey", "PopBufferMergeService", "PopCheckPointWrapper", "merge_key"]

log = logging.getLogger(__name__)

MergeKey = tuple[str | None, str | None, int, int, int, str | None]
STORING: Final = 2**63 - 1  # Java: reviveQueueOffset Long.MAX_VALUE while the check point is written
_INTERVAL: Final = 0.005  # s, Java's scan interval, while work remains
_IDLE: Final = 1.0  # s between looks when nothing is due (arrivals wake the loop)
_GARBAGE_EVERY: Final = 30.0  # s
_UNUSED_QUEUE: Final = 5 * 60_000  # ms: an offset queue untouched this long is dropped
_RETRY_STORE_AFTER: Final = 100  # ms before a failed check-point write is tried again
SCAN_TIME_BUCKETS: Final = (1.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)  # ms, Java PopMetricsManager


def merge_key(
    topic: str | None, group: str | None, queue_id: int, start_offset: int, pop_time: int, broker: str | None
) -> MergeKey:
    """Java's ``mergeKey``: which check point an ack belongs to."""
    return (topic, group, queue_id, start_offset, pop_time, broker)


def _all_set(bits: int, num: int) -> bool:
    mask = (1 << num) - 1
    return bits & mask == mask


@dataclass(slots=True, eq=False)
class PopCheckPointWrapper:
    """A check point with its state here (Java ``PopCheckPointWrapper``)."""

    revive_queue_id: int
    revive_queue_offset: int  # -1 not written, >= 0 written, STORING while its write runs
    ck: PopCheckPoint
    next_begin_offset: int
    just_offset: bool = False
    bits: int = 0  # acked while here
    to_store_bits: int = 0  # those acks written to the revive topic
    ck_stored: bool = False
    lock_key: str = field(init=False)
    merge_key: MergeKey = field(init=False)

    def __post_init__(self) -> None:
        ck = self.ck
        self.lock_key = build_polling_key(ck.topic or "", ck.cid or "", ck.queue_id)
        self.merge_key = merge_key(
            ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name
        )

    def is_ck_done(self) -> bool:
        """Every message acked here."""
        return _all_set(self.bits, self.ck.num)

    def is_ck_done_for_finish(self) -> bool:
        """Every ack collected here has been written."""
        mask = (1 << self.ck.num) - 1
        return (self.bits ^ self.to_store_bits) & mask == 0

    @property
    def finished(self) -> bool:
        """Its offset may be committed (Java's three conditions)."""
        return (
            (self.just_offset and self.ck_stored)
            or self.is_ck_done()
            or (self.is_ck_done_for_finish() and self.ck_stored)
        )


@dataclass(slots=True)
class _OffsetQueue:
    wrappers: deque[PopCheckPointWrapper] = field(default_factory=deque)
    time: int = 0  # ms: the pop time of the newest wrapper


class PopBufferMergeService:
    """Buffered check points and the FIFO of offsets to commit, per queue."""

    def __init__(
        self,
        *,
        config: Callable[[], BrokerConfig],
        offsets: ConsumerOffsetManager,
        queue_lock: QueueLockManager,
        revive_log: ReviveLog,
        clock: Callable[[], int],
        is_master: Callable[[], bool],
        exists: Callable[[str, str], bool],
    ) -> None:
        self.config = config
        self.offsets = offsets
        self.queue_lock = queue_lock
        self.revive_log = revive_log
        self.clock = clock
        self.is_master = is_master
        self.exists = exists  # (topic, group) -> both still exist
        self.buffer: dict[MergeKey, PopCheckPointWrapper] = {}
        self.commit_offsets: dict[str, _OffsetQueue] = {}
        self.serving = True
        self._due: list[tuple[int, int, PopCheckPointWrapper]] = []  # (store deadline ms, seq, wrapper)
        self._seq = itertools.count()
        self._dirty: set[str] = set()  # lock keys whose head may be committable
        self._retry: list[PopCheckPointWrapper] = []  # written with no success yet
        self._wake = asyncio.Event()
        self._tasks = BackgroundTasks("pop-buffer")
        # Java rocketmq_pop_buffer_scan_time_consume (ms), with Java's buckets
        self.scan_time_ms = Histogram(SCAN_TIME_BUCKETS)
        self.acks_stored = 0
        self.cks_stored = 0

    # -- queries ----------------------------------------------------------------------------

    def get_latest_offset(self, lock_key: str) -> int:
        """Where the next pop of the queue starts if no offset is committed past it; -1 if none."""
        queue = self.commit_offsets.get(lock_key)
        if queue is None or not queue.wrappers:
            return -1
        return queue.wrappers[-1].next_begin_offset

    def offset_total_size(self) -> int:
        return sum(len(q.wrappers) for q in self.commit_offsets.values())

    @property
    def buffered_ck_size(self) -> int:
        return len(self.buffer)

    # -- check points and acks --------------------------------------------------------------

    def _queue_ok(self, wrapper: PopCheckPointWrapper) -> bool:
        queue = self.commit_offsets.get(wrapper.lock_key)
        return queue is None or len(queue.wrappers) < self.config().pop_ck_offset_max_queue_size

    def _put_offset_queue(self, wrapper: PopCheckPointWrapper) -> None:
        queue = self.commit_offsets.get(wrapper.lock_key)
        if queue is None:
            queue = self.commit_offsets[wrapper.lock_key] = _OffsetQueue()
        queue.time = wrapper.ck.pop_time
        queue.wrappers.append(wrapper)

    def _mark_dirty(self, lock_key: str) -> None:
        self._dirty.add(lock_key)
        self._wake.set()

    def add_ck(self, ck: PopCheckPoint, revive_qid: int, revive_queue_offset: int, next_begin: int) -> bool:
        """Keep ``ck`` in memory (merging on); False when it must be written now instead."""
        cfg = self.config()
        if not cfg.enable_pop_buffer_merge or not self.serving:
            return False
        now = self.clock()
        if ck.revive_time - now < cfg.pop_ck_stay_buffer_time_out + 1500:
            return False  # too close to its revive time to wait here
        if len(self.buffer) > cfg.pop_ck_max_buffer_size:
            log.warning("[PopBuffer] add ck, max size %d reached: %s", cfg.pop_ck_max_buffer_size, ck)
            return False
        wrapper = PopCheckPointWrapper(revive_qid, revive_queue_offset, ck, next_begin)
        if not self._queue_ok(wrapper) or wrapper.merge_key in self.buffer:
            return False
        self._put_offset_queue(wrapper)
        self.buffer[wrapper.merge_key] = wrapper
        deadline = min(
            ck.pop_time + cfg.pop_ck_stay_buffer_time, ck.revive_time - cfg.pop_ck_stay_buffer_time_out
        )
        heapq.heappush(self._due, (deadline, next(self._seq), wrapper))
        self._wake.set()
        return True

    async def add_ck_just_offset(
        self, ck: PopCheckPoint, revive_qid: int, revive_queue_offset: int, next_begin: int
    ) -> bool:
        """Write ``ck`` to the revive topic now and queue its offset; False on a key conflict."""
        wrapper = PopCheckPointWrapper(revive_qid, revive_queue_offset, ck, next_begin, just_offset=True)
        if wrapper.merge_key in self.buffer:
            log.warning("[PopBuffer] merge key conflict for a just-offset check point: %s", ck)
            return False
        # queued before the write: a pop, peek or notification during the write sees the offset
        self._put_offset_queue(wrapper)
        self.buffer[wrapper.merge_key] = wrapper
        await self._put_ck(wrapper)
        return True

    def add_ck_mock(
        self,
        group: str,
        topic: str,
        queue_id: int,
        start_offset: int,
        invisible_time: int,
        pop_time: int,
        revive_qid: int,
        next_begin: int,
        broker_name: str,
    ) -> None:
        """A pop that found nothing to hand out (all filtered) still moves the offset."""
        ck = PopCheckPoint(
            num=0,
            pop_time=pop_time,
            invisible_time=invisible_time,
            start_offset=start_offset,
            cid=group,
            topic=topic,
            queue_id=queue_id,
            broker_name=broker_name,
        )
        wrapper = PopCheckPointWrapper(revive_qid, STORING, ck, next_begin, just_offset=True, ck_stored=True)
        self._put_offset_queue(wrapper)
        self._mark_dirty(wrapper.lock_key)

    def add_ak(self, revive_qid: int, ack: AckMsg) -> bool:
        """Merge ``ack`` into its buffered check point; False when it must be written instead."""
        cfg = self.config()
        if not cfg.enable_pop_buffer_merge or not self.serving:
            return False
        wrapper = self.buffer.get(
            merge_key(
                ack.topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time, ack.broker_name
            )
        )
        if wrapper is None or wrapper.just_offset:
            return False
        ck = wrapper.ck
        now = self.clock()
        if ck.revive_time - now < cfg.pop_ck_stay_buffer_time_out + 1500:
            return False  # about to be written
        if now - ck.pop_time > cfg.pop_ck_stay_buffer_time - 1500:
            return False
        offsets = ack.ack_offset_list if isinstance(ack, BatchAckMsg) else (ack.ack_offset,)
        for offset in offsets:
            index = ck.index_of_ack(offset)
            if index > -1:
                wrapper.bits |= 1 << index
            else:
                log.error("[PopBuffer] invalid index of ack, reviveQid=%d, %s, %s", revive_qid, ack, ck)
        if wrapper.is_ck_done():  # never written: nothing to revive
            self.buffer.pop(wrapper.merge_key, None)
            self._mark_dirty(wrapper.lock_key)
        return True

    def clear_offset_queue(self, lock_key: str) -> None:
        self.commit_offsets.pop(lock_key, None)

    # -- writing ----------------------------------------------------------------------------

    async def _put_ck(self, wrapper: PopCheckPointWrapper) -> None:
        if wrapper.revive_queue_offset >= 0:
            return  # written, or being written
        wrapper.revive_queue_offset = STORING
        result = await self.revive_log.put_ck(wrapper.ck, wrapper.revive_queue_id)
        if result.status not in STORED_STATUSES:
            wrapper.revive_queue_offset = -1
            self._retry.append(wrapper)
            self._wake.set()
            return
        self.cks_stored += 1
        wrapper.ck_stored = True
        appended = result.append_message_result
        wrapper.revive_queue_offset = appended.logics_offset if appended is not None else 0
        if wrapper.just_offset:
            self.buffer.pop(wrapper.merge_key, None)
        self._mark_dirty(wrapper.lock_key)

    async def _put_acks(self, wrapper: PopCheckPointWrapper) -> None:
        """Write the acks collected here that are not written yet (Java ``putAckToStore`` /
        ``putBatchAckToStore``)."""
        ck = wrapper.ck
        indexes = [i for i in range(ck.num) if wrapper.bits >> i & 1 and not wrapper.to_store_bits >> i & 1]
        if not indexes:
            return
        base = AckMsg(
            start_offset=ck.start_offset,
            consumer_group=ck.cid,
            topic=ck.topic,
            queue_id=ck.queue_id,
            pop_time=ck.pop_time,
            broker_name=ck.broker_name,
        )
        groups: list[tuple[AckMsg, list[int]]]
        if self.config().enable_pop_batch_ack:
            batch = BatchAckMsg(  # Java leaves brokerName out of a buffered batch ack
                start_offset=ck.start_offset,
                consumer_group=ck.cid,
                topic=ck.topic,
                queue_id=ck.queue_id,
                pop_time=ck.pop_time,
                ack_offset_list=tuple(ck.ack_offset_by_index(i) for i in indexes),
            )
            groups = [(batch, indexes)]
        else:
            groups = [(replace(base, ack_offset=ck.ack_offset_by_index(i)), [i]) for i in indexes]
        for ack, acked in groups:
            result = await self.revive_log.put_ack(ack, wrapper.revive_queue_id, ck.revive_time)
            if result.status in STORED_STATUSES:
                self.acks_stored += len(acked)
                for i in acked:
                    wrapper.to_store_bits |= 1 << i

    async def _flush(self, wrapper: PopCheckPointWrapper) -> None:
        """Write a buffered check point and its acks (Java's ``removeCk`` branch of ``scan``)."""
        if wrapper.revive_queue_offset < 0:
            await self._put_ck(wrapper)
        if not wrapper.ck_stored:
            return  # retried from _retry
        await self._put_acks(wrapper)
        if wrapper.is_ck_done_for_finish():
            self.buffer.pop(wrapper.merge_key, None)
            self._mark_dirty(wrapper.lock_key)
        else:  # an ack write failed: try again soon
            heapq.heappush(self._due, (self.clock() + _RETRY_STORE_AFTER, next(self._seq), wrapper))

    # -- the scan ---------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks.spawn(self._run(), "scan")

    async def close(self) -> None:
        """Stop merging; write every buffered check point and ack and commit what can be
        (Java's shutdown drain), then stop."""
        self.serving = False
        await self._tasks.close()
        if not self.is_master():
            return
        deadline = time.monotonic() + 10
        while (self.buffer or self._dirty or self._retry) and time.monotonic() < deadline:
            for wrapper in list(self.buffer.values()):
                if wrapper.just_offset:
                    await self._put_ck(wrapper)
                else:
                    await self._flush(wrapper)
            await self._retry_stores()
            self._dirty.update(self.commit_offsets)
            self.scan_commit_offset()
            if self.buffer or self._retry:
                await asyncio.sleep(_INTERVAL)

    def _next_wait(self) -> float:
        if self._dirty or self._retry:
            return _INTERVAL
        if self._due:
            return min(max((self._due[0][0] - self.clock()) / 1000, _INTERVAL), _IDLE)
        return _IDLE

    async def _run(self) -> None:
        last_garbage = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._next_wait())
            self._wake.clear()
            if not self.is_master():  # a slave keeps nothing (Java clears on role change)
                self.buffer.clear()
                self.commit_offsets.clear()
                self._due.clear()
                self._dirty.clear()
                self._retry.clear()
                continue
            began = time.monotonic()
            await self.scan()
            spent = (time.monotonic() - began) * 1000
            self.scan_time_ms.observe(spent)
            if spent > self.config().pop_ck_stay_buffer_time_out - 1000:
                log.warning("[PopBuffer] scan took %.0f ms, stop merging for a while", spent)
                self.serving = False
            elif not self.serving and not self.buffer:
                self.serving = True
            if began - last_garbage > _GARBAGE_EVERY:
                last_garbage = began
                self.scan_garbage()

    async def scan(self) -> None:
        """Write what is due, retry failed writes, commit what is finished."""
        now = self.clock()
        while self._due and (self._due[0][0] <= now or not self.serving):
            _, _, wrapper = heapq.heappop(self._due)
            if self.buffer.get(wrapper.merge_key) is not wrapper:
                continue  # done while waiting
            await self._flush(wrapper)
        await self._retry_stores()
        self.scan_commit_offset()

    async def _retry_stores(self) -> None:
        retry, self._retry = self._retry, []
        for wrapper in retry:
            if wrapper.revive_queue_offset < 0:
                await self._put_ck(wrapper)

    def scan_commit_offset(self) -> int:
        """Commit the finished heads of the queues that changed; returns the offsets queued."""
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            queue = self.commit_offsets.get(key)
            if queue is None:
                continue
            wrappers = queue.wrappers
            while wrappers and wrappers[0].finished:
                if not self._commit_offset(wrappers[0]):
                    self._dirty.add(key)  # a pop holds the queue: next scan
                    break
                wrappers.popleft()
        return self.offset_total_size()

    def _commit_offset(self, wrapper: PopCheckPointWrapper) -> bool:
        if wrapper.next_begin_offset < 0:
            return True
        ck = wrapper.ck
        if not self.queue_lock.try_lock(wrapper.lock_key):
            return False
        try:
            committed = self.offsets.query_offset(ck.cid or "", ck.topic or "", ck.queue_id)
            if wrapper.next_begin_offset < committed:
                log.warning(
                    "[PopBuffer] commit offset %d below the consumer's %d: %s",
                    wrapper.next_begin_offset,
                    committed,
                    ck,
                )
            self.offsets.commit_offset(
                "PopBufferMergeService", ck.cid or "", ck.topic or "", ck.queue_id, wrapper.next_begin_offset
            )
        finally:
            self.queue_lock.unlock(wrapper.lock_key)
        return True

    def scan_garbage(self) -> None:
        """Drop the offset queues of topics or groups gone, or unused for five minutes."""
        now = self.clock()
        for key in list(self.commit_offsets):
            topic, _, rest = key.partition("@")
            group = rest.rpartition("@")[0]
            if not self.exists(topic, group) or now - self.commit_offsets[key].time > _UNUSED_QUEUE:
                log.info("[PopBuffer] remove unused offset queue %s", key)
                del self.commit_offsets[key]
