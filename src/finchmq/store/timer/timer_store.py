"""``TimerMessageStore``: timer messages, delivered at their time (Java 5.x ``TimerMessageStore``).

Owns the timer's files (``TimerWheel``, ``TimerLog``, ``TimerCheckpoint``, ``TimerMetrics``) and
its threads. Imports: the protocol's messages and the store. The broker turns a message with
TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS into one of ``rmq_sys_wheel_timer`` queue 0
(its real topic and queue in REAL_TOPIC / REAL_QID, its time, floored to the precision, in
TIMER_OUT_MS); this store takes it from there, as Java's threads do:

- enqueue get: reads the timer topic's queue from ``curr_queue_offset`` and hands each message
  to the enqueue put thread;
- enqueue put: appends a 52-byte unit to the timer log and makes it the last of its slot's chain
  in the wheel (a message due before the write time goes straight to the dequeue put threads;
  one due later than the roll window is put in the window's last slot, marked to roll); it alone
  moves the write time, at each precision boundary;
- dequeue get: when the read time is behind the write time, walks the read time's slot chain
  and hands its messages, recalls first, to the get-message threads; once all are delivered the
  read time moves on (``commit_read_time_ms``);
- get message (``timer_get_message_thread_num``): reads each message; a recalled one
  (``TIMER_DEL_UNIQKEY`` in the same slot) is dropped;
- put message (``timer_put_message_thread_num``): stores it in its real topic and queue (or back in
  the timer topic, to roll), through ``put`` (the broker's, or the store's own);
- flush: every ``timer_flush_interval_ms`` the log, the wheel, the checkpoint and the metrics, the
  backlog figures, a progress line every ``timer_progress_log_interval_ms``, expired log segments.

Crash safety (docs/timer.md): the checkpoint says which slots and queue offsets are
done; recovery revises the wheel from the timer log's tail. Java may then deliver again what was
delivered after the checkpoint; here the checkpoint also records where that work started (the
commit log's and the timer log's end at that moment), and after a crash the messages already in
the timer log past it are not enqueued again, and those already delivered past it (found in the
commit log by real topic, UNIQ_KEY, TIMER_OUT_MS and roll count) are not delivered again.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import random
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Final

from finchmq.common.logs import RateLimitedLog
from finchmq.common.metrics import HistogramSet
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.message import MessageExt, properties_to_string, tags_hash_code
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.stored import BLANK_MAGIC_CODE as CL_BLANK_MAGIC_CODE
from finchmq.protocol.stored import MESSAGE_MAGIC_CODE, decode_stored
from finchmq.protocol.topics import TIMER_TOPIC
from finchmq.store.consume_queue import CQ_UNIT
from finchmq.store.inner import MessageExtBrokerInner
from finchmq.store.message_store import DefaultMessageStore
from finchmq.store.status import PutMessageResult, PutMessageStatus, StoreCorruptedError

from .checkpoint import TimerCheckpoint
from .log import UNIT, UNIT_SIZE, TimerLog, TimerLogUnit, is_magic_ok
from .metrics import TIMER_DIST, TimerMetrics
from .wheel import IGNORE, TimerWheel

__all__ = [
    "DELAY_LATENCY_BUCKETS",
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "TIMER_BLANK_SLOTS",
    "TIMER_WHEEL_TTL_DAY",
    "TimerMessageStore",
    "TimerRequest",
    "build_delete_key",
]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # errors that repeat every few ms while a message cannot be handled

TIMER_WHEEL_TTL_DAY: Final = 7  # the wheel's span in days at 1000 ms precision
DAY_SECS: Final = 24 * 3600
TIMER_BLANK_SLOTS: Final = 60
MAGIC_DEFAULT: Final = 1
MAGIC_ROLL: Final = 1 << 1
MAGIC_DELETE: Final = 1 << 2
DEFAULT_CAPACITY: Final = 1024  # each queue between the threads
MAX_LONG: Final = 2**63 - 1
# s: Java DefaultStoreMetricsManager's view of rocketmq_delay_message_latency (1 min ... 3 days)
DELAY_LATENCY_BUCKETS: Final = (60.0, 600.0, 3600.0, 43200.0, 86400.0, 259200.0)

_PUT_OK: Final = 0
_PUT_NEED_RETRY: Final = 1
_PUT_NO_RETRY: Final = 2
_NO_RETRY: Final = frozenset(
    {
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        PutMessageStatus.WHEEL_TIMER_NOT_ENABLE,
        PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
    }
)
_RETRY: Final = frozenset(
    {
        PutMessageStatus.SERVICE_NOT_AVAILABLE,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.OS_PAGECACHE_BUSY,
        PutMessageStatus.CREATE_MAPEDFILE_FAILED,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)
_DEQUEUE_MARK: Final = b"TIMER_DEQUEUE_MS\x01"
_CL_HEAD: Final = struct.Struct(">ii")  # a commit-log record's TOTALSIZE and MAGICCODE
_CLEAN_TIMER_LOG_EVERY: Final = 30.0  # s, Java's scheduler
_UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_REAL_TOPIC = MessageConst.PROPERTY_REAL_TOPIC
_REAL_QID = MessageConst.PROPERTY_REAL_QUEUE_ID
_OUT_MS = MessageConst.PROPERTY_TIMER_OUT_MS
_ROLL_TIMES = MessageConst.PROPERTY_TIMER_ROLL_TIMES
_DEL_UNIQKEY = MessageConst.PROPERTY_TIMER_DEL_UNIQKEY

PutHook = Callable[[MessageExtBrokerInner], PutMessageResult]
"""How a due message is stored (Java's escape bridge): returns the final put result."""

_DeliveryKey = tuple[str, str, str, int]  # real topic, UNIQ_KEY, TIMER_OUT_MS, the source's roll count


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_delete_key(real_topic: str | None, unique_key: str | None) -> str:
    """Java ``TimerMessageStore.buildDeleteKey``: what TIMER_DEL_UNIQKEY holds."""
    return f"{real_topic}+{unique_key}"


def need_roll(magic: int) -> bool:
    return magic & MAGIC_ROLL != 0


def need_delete(magic: int) -> bool:
    return magic & MAGIC_DELETE != 0


class _Latch:
    """Java's ``CountDownLatch``."""

    __slots__ = ("_cond", "_count")

    def __init__(self, count: int) -> None:
        self._count = count
        self._cond = threading.Condition(threading.Lock())

    def count_down(self) -> None:
        with self._cond:
            self._count -= 1
            if self._count <= 0:
                self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._count <= 0, timeout)


class TimerRequest:
    """One timer on its way through the threads (Java ``TimerRequest``)."""

    __slots__ = (
        "delay_time", "delete_list", "enqueue_time", "latch", "magic", "msg", "offset_py", "queue_offset",
        "released", "size_py", "succ",
    )  # fmt: skip

    def __init__(
        self,
        offset_py: int,
        size_py: int,
        delay_time: int,
        enqueue_time: int,
        magic: int,
        msg: MessageExt | None = None,
    ) -> None:
        self.offset_py = offset_py
        self.size_py = size_py
        self.delay_time = delay_time
        self.enqueue_time = enqueue_time
        self.magic = magic
        self.msg = msg
        self.queue_offset = 0  # the timer topic's offset after the message's (Java sets it on msg)
        self.latch: _Latch | None = None
        self.released = False
        self.succ = False
        self.delete_list: set[str] | None = None

    def idempotent_release(self, succ: bool = True) -> None:
        self.succ = succ
        if not self.released and self.latch is not None:
            self.released = True
            self.latch.count_down()

    def __repr__(self) -> str:
        return (
            f"TimerRequest(offsetPy={self.offset_py}, sizePy={self.size_py}, delayTime={self.delay_time}, "
            f"enqueueTime={self.enqueue_time}, magic={self.magic})"
        )


class _PerfTicks:
    """Java ``PerfCounter``'s TPS: events over windows of 10 s, reported for 13 s after one."""

    __slots__ = ("_count", "_last", "_last_tps", "_lock")

    WINDOW_MS: Final = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._last = _now_ms()
        self._last_tps = 0.0

    def flow(self, num: int = 1) -> None:
        now = _now_ms()
        with self._lock:
            self._count += num
            if now - self._last >= self.WINDOW_MS:
                self._last_tps = (self._count + 0.1) * 1000 / (now - self._last)
                self._count = 0
                self._last = now

    def last_tps(self) -> float:
        if _now_ms() - self._last <= self.WINDOW_MS + 3000:
            return self._last_tps
        return 0.0


class TimerMessageStore:
    """The timer (see the module doc). Lifecycle: ``load()`` after the message store's,
    ``start()`` after it starts, ``shutdown()`` before it shuts down."""

    def __init__(self, store: DefaultMessageStore, *, put: PutHook | None = None) -> None:
        cfg = store.config
        self._store = store
        self._put = put if put is not None else store.put_message
        self.precision_ms = cfg.timer_precision_ms
        self.slots_total = TIMER_WHEEL_TTL_DAY * DAY_SECS  # fixed, whatever the precision
        self.timer_log_file_size = cfg.mapped_file_size_timer_log
        self.commit_log_file_size = cfg.mapped_file_size_commit_log
        window = cfg.timer_roll_window_slot
        if window > self.slots_total - TIMER_BLANK_SLOTS or window < 2:
            window = self.slots_total - TIMER_BLANK_SLOTS
        self.timer_roll_window_slots = window
        self.timer_wheel: TimerWheel | None = None
        self.timer_log = TimerLog(cfg.timer_log_dir, self.timer_log_file_size)
        self.timer_checkpoint: TimerCheckpoint | None = None
        self.timer_metrics = TimerMetrics(cfg.timer_metrics_path)

        self.curr_read_time_ms = 0
        self.curr_write_time_ms = 0
        self.commit_read_time_ms = 0
        self.curr_queue_offset = 0
        self.commit_queue_offset = 0
        self._last_commit_read_time_ms = 0
        self._last_commit_queue_offset = 0
        # what recovery needs besides the positions: the commit log's end when the read time
        # moved (deliveries of later slots come after it), and the commit log's and timer
        # log's ends when the queue offset was committed. Each a tuple, replaced whole.
        self._read_mark: tuple[int, int] = (0, 0)  # (commit read time, commit-log end)
        self._queue_mark: tuple[int, int, int] = (
            0,
            0,
            0,
        )  # (commit queue offset, commit-log end, timer-log end)
        self.last_enqueue_but_expired_time = 0
        self.last_enqueue_but_expired_store_time = 0
        self.should_running_dequeue = False
        self._dequeue_status_change = False

        self._enqueue_put_queue: queue.Queue[TimerRequest | None] = queue.Queue(DEFAULT_CAPACITY)
        self._dequeue_get_queue: queue.Queue[list[TimerRequest] | None] = queue.Queue(DEFAULT_CAPACITY)
        self._dequeue_put_queue: queue.Queue[TimerRequest | None] = queue.Queue(DEFAULT_CAPACITY)
        self._stopping = threading.Event()
        self._enqueue_wakeup = threading.Event()
        self._dequeue_wakeup = threading.Event()
        self._flush_wakeup = threading.Event()
        self._threads: list[threading.Thread] = []
        self._running = False
        self._loaded = False

        # after a crash: units already in the timer log past the checkpoint (commit-log offsets)
        # and deliveries already in the commit log past it; dropped once the replay is over
        self._replay_enqueued: set[int] | None = None
        self._replay_delivered: Counter[_DeliveryKey] | None = None
        self._replay_lock = threading.Lock()
        self._replay_queue_end = 0
        self._replay_read_end = 0
        # where the replay's scans started: the checkpoint keeps pointing there until the replay
        # is over, so that a crash during the replay replays from the same place
        self._replay_floor_commit_log: int | None = None
        self._replay_floor_timer_log: int | None = None
        self.replay_skipped = 0  # messages not enqueued or delivered again after a restart

        # figures (Java's perf counters and DefaultStoreMetricsManager's)
        self._metrics_lock = threading.Lock()
        self.enqueue_tps = _PerfTicks()
        self.dequeue_tps = _PerfTicks()
        self.enqueue_total: Counter[str] = Counter()
        self.dequeue_total: Counter[str] = Counter()
        self.delay_latency = HistogramSet(DELAY_LATENCY_BUCKETS)
        self.congest_num = 0  # timers in the wheel (refreshed by the flush thread)
        self.distribution: dict[int, int] = dict.fromkeys(TIMER_DIST, 0)  # bound (s) -> timers
        self._frequency = 0

    # ================================================================== lifecycle

    @property
    def store(self) -> DefaultMessageStore:
        return self._store

    def load(self) -> bool:
        """Open the files and recover (Java ``load``); call after the message store's load."""
        cfg = self._store.config
        self.timer_wheel = TimerWheel(cfg.timer_wheel_path, self.slots_total, self.precision_ms)
        self.timer_checkpoint = TimerCheckpoint(cfg.timer_check_path)
        for problem in self.timer_log.load():
            log.warning("timer log: %s", problem)
        self.timer_metrics.load()
        self._recover()
        self._refresh_figures()
        self._loaded = True
        return True

    def start(self, should_running_dequeue: bool = True) -> None:
        """Start the threads (Java ``start``); a slave's timer does not dequeue."""
        if not self._loaded:
            raise RuntimeError("start() before load()")
        self.should_running_dequeue = should_running_dequeue
        self._maybe_move_write_time()
        cfg = self._store.config
        targets: list[tuple[str, Callable[[], None]]] = [
            ("TimerEnqueueGetService", self._run_enqueue_get),
            ("TimerEnqueuePutService", self._run_enqueue_put),
            ("TimerDequeueGetService", self._run_dequeue_get),
        ]
        targets += [
            (f"TimerDequeueGetMessageService-{i}", self._run_dequeue_get_message)
            for i in range(max(cfg.timer_get_message_thread_num, 1))
        ]
        targets += [
            (f"TimerDequeuePutMessageService-{i}", self._run_dequeue_put_message)
            for i in range(max(cfg.timer_put_message_thread_num, 1))
        ]
        targets.append(("TimerFlushService", self._run_flush))
        self._running = True
        for name, target in targets:
            thread = threading.Thread(target=self._guarded(name, target), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        log.info(
            "Timer start ok currReadTimerMs:[%d] queueOffset:[%d]",
            self.curr_read_time_ms,
            self.curr_queue_offset,
        )

    def shutdown(self) -> None:
        """Stop the threads (each finishes the put it is in), then write the checkpoint, flush
        the log and the wheel and close them. Idempotent."""
        if self.timer_wheel is None:
            return
        self._running = False
        self._stopping.set()
        for event in (self._enqueue_wakeup, self._dequeue_wakeup, self._flush_wakeup):
            event.set()
        getters = sum(t.name.startswith("TimerDequeueGetMessageService") for t in self._threads)
        putters = sum(t.name.startswith("TimerDequeuePutMessageService") for t in self._threads)
        for q, sentinels in (
            (self._enqueue_put_queue, 1),
            (self._dequeue_get_queue, getters),
            (self._dequeue_put_queue, putters),
        ):
            with q.mutex:
                q.queue.clear()  # Java clears them too: what they held is done again after a restart
                q.not_full.notify_all()
            for _ in range(sentinels):
                with contextlib.suppress(queue.Full):
                    q.put_nowait(None)
        for thread in self._threads:
            thread.join()
        self._threads = []
        self._prepare_timer_checkpoint()
        self.timer_log.shutdown()
        assert self.timer_checkpoint is not None
        self.timer_checkpoint.shutdown()
        with contextlib.suppress(OSError):
            self.timer_metrics.persist()
        self.timer_wheel.shutdown(True)
        self.timer_wheel = None
        log.info(
            "timer shut down at read time %d, queue offset %d",
            self.commit_read_time_ms,
            self.commit_queue_offset,
        )

    def _guarded(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            log.debug("%s service start", name)
            try:
                target()
            except Exception:
                log.exception("%s died", name)
            log.debug("%s service end", name)

        return run

    # ================================================================== recovery

    def _recover(self) -> None:
        """Java ``recover``: the timer log from a segment before its flushed position (revising the
        wheel), the queue offset from its last unit, the read time from the checkpoint."""
        wheel, cp = self._wheel, self._checkpoint
        cfg = self._store.config
        last_flush_pos = cp.data.last_timer_log_flush_pos
        last_file = self.timer_log.mapped_file_queue.get_last_mapped_file()
        if last_file is not None:
            last_flush_pos -= last_file.file_size
        last_flush_pos = max(last_flush_pos, 0)
        process_offset = self._recover_and_revise(last_flush_pos, True)
        self.timer_log.mapped_file_queue.flushed_where = process_offset
        queue_offset = self._revise_queue_offset(process_offset)
        self.curr_queue_offset = cp.data.last_timer_queue_offset if queue_offset == -1 else queue_offset + 1
        self.curr_queue_offset = min(self.curr_queue_offset, cp.data.master_timer_queue_offset)
        cq = self._store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is not None and self.curr_queue_offset < cq.get_min_offset_in_queue():
            log.warning(
                "Timer currQueueOffset:%d is smaller than minOffsetInQueue:%d",
                self.curr_queue_offset,
                cq.get_min_offset_in_queue(),
            )
            self.curr_queue_offset = cq.get_min_offset_in_queue()
        elif cq is not None and self.curr_queue_offset > cq.get_max_offset_in_queue():
            log.warning(
                "Timer currQueueOffset:%d is larger than maxOffsetInQueue:%d",
                self.curr_queue_offset,
                cq.get_max_offset_in_queue(),
            )
            self.curr_queue_offset = cq.get_max_offset_in_queue()
        self.curr_read_time_ms = cp.data.last_read_time_ms
        next_read = (
            self._format(_now_ms())
            - self.slots_total * self.precision_ms
            + TIMER_BLANK_SLOTS * self.precision_ms
        )
        self.curr_read_time_ms = max(self.curr_read_time_ms, next_read)
        min_first = wheel.check_phy_pos(self.curr_read_time_ms, process_offset)
        if min_first < process_offset:
            log.warning("Timer recheck because of minFirst:%d processOffset:%d", min_first, process_offset)
            self._recover_and_revise(min_first, False)
        wheel.forget_before(self.curr_read_time_ms)
        log.info(
            "Timer recover ok currReadTimerMs:%d currQueueOffset:%d checkQueueOffset:%d processOffset:%d",
            self.curr_read_time_ms,
            self.curr_queue_offset,
            cp.data.last_timer_queue_offset,
            process_offset,
        )
        self.commit_read_time_ms = self.curr_read_time_ms
        self.commit_queue_offset = self.curr_queue_offset
        commit_log_end = self._store.get_max_phy_offset()
        self._prepare_replay(process_offset, cq.get_max_offset_in_queue() if cq is not None else 0)
        self._read_mark = (self.commit_read_time_ms, commit_log_end)
        self._queue_mark = (self.commit_queue_offset, commit_log_end, process_offset)
        if cfg.timer_stop_enqueue or cfg.timer_stop_dequeue:
            log.info("timer: stopEnqueue=%s stopDequeue=%s", cfg.timer_stop_enqueue, cfg.timer_stop_dequeue)
        self._prepare_timer_checkpoint()

    def _recover_and_revise(self, begin_offset: int, check_timer_log: bool) -> int:
        """Java ``recoverAndRevise``: walk the units from the segment holding ``begin_offset``,
        set each slot's last position to its last unit; with ``check_timer_log`` stop at the
        first bad unit and truncate the log there. Returns where the walk stopped."""
        wheel = self._wheel
        mfq = self.timer_log.mapped_file_queue
        files = mfq.files
        if not files:
            return 0
        index = len(files) - 1
        while index >= 0 and begin_offset < files[index].file_from_offset:
            index -= 1
        index = max(index, 0)
        check_offset = files[index].file_from_offset
        for mf in files[index:]:
            end = 0  # where the walk of this segment stopped: a blank, a bad unit or its end
            stop = False
            for position, fields in self.timer_log.iter_units(mf, whole_file=check_timer_log):
                size, _, magic, enqueue_time, delay = fields[:5]
                valid = size == UNIT_SIZE and is_magic_ok(magic)
                if check_timer_log and not valid:
                    if size != 0 or magic != 0:
                        log.warning(
                            "timer log %s: no unit at %d (size %d, magic %#x); truncated",
                            mf.path,
                            position,
                            size,
                            magic,
                        )
                    end = position
                    stop = True
                    break
                if valid:
                    wheel.revise_slot(enqueue_time + delay, IGNORE, mf.file_from_offset + position, True)
                end = position + UNIT_SIZE
            check_offset = mf.file_from_offset + end
            if stop:
                break
        if check_timer_log:
            mfq.truncate_dirty_files(check_offset)
        return check_offset

    def _revise_queue_offset(self, process_offset: int) -> int:
        """Java ``reviseQueueOffset``: the timer topic's queue offset of the last unit's
        message, -1 if it cannot be found."""
        if process_offset < UNIT_SIZE:
            return -1
        found = self.timer_log.read_offset_size(process_offset - UNIT_SIZE)
        if found is None:
            return -1
        offset_py, size_py = found
        msg = self._message_by_commit_offset(offset_py, size_py)
        if msg is None:
            return -1
        cq = self._store.get_consume_queue(TIMER_TOPIC, msg.queue_id)
        if cq is None:
            return msg.queue_offset
        tmp = msg.queue_offset
        for _ in range(20_000):
            if tmp < 0:
                log.warning(
                    "reviseQueueOffset check cq offset fail, msg in cq is not found.%d, %d",
                    offset_py,
                    size_py,
                )
                break
            unit = cq.get_unit(tmp)
            if unit is not None and unit[0] == offset_py and unit[1] == size_py:
                return tmp
            tmp -= 1
        return msg.queue_offset

    def _prepare_replay(self, process_offset: int, queue_end: int) -> None:
        """After a crash: what is already in the timer log and the commit log past the
        checkpoint, so that it is neither enqueued nor delivered again."""
        cp = self._checkpoint
        cl_start, tl_start = cp.replay_commit_log_offset, cp.replay_timer_log_offset
        if cl_start is None or tl_start is None:
            if cp.data.last_timer_queue_offset or cp.data.last_read_time_ms:
                log.info("timer checkpoint has no replay record: what ran after it may run again")
            return
        cq = self._store.get_consume_queue(TIMER_TOPIC, 0)
        if cq is not None and self.curr_queue_offset < cp.data.last_timer_queue_offset:
            unit = cq.get_unit(self.curr_queue_offset)
            if unit is not None:
                cl_start = min(cl_start, unit[0])
        tl_start = min(tl_start, process_offset)
        enqueued = set(self._units_from(tl_start, process_offset))
        delivered = self._deliveries_from(cl_start)
        self._replay_enqueued = enqueued
        self._replay_delivered = delivered
        self._replay_queue_end = queue_end
        self._replay_read_end = _now_ms()
        self._replay_floor_commit_log = cl_start
        self._replay_floor_timer_log = tl_start
        log.info(
            "timer replay: %d unit(s) past timer log %d, %d delivery(ies) past commit log %d",
            len(enqueued),
            tl_start,
            sum(delivered.values()),
            cl_start,
        )

    def _units_from(self, start: int, end: int) -> Iterator[int]:
        """The commit-log offsets of the units in [start, end) of the timer log."""
        for mf in self.timer_log.mapped_file_queue.files:
            if mf.file_from_offset + mf.file_size <= start or mf.file_from_offset >= end:
                continue
            for position, fields in self.timer_log.iter_units(mf, whole_file=False):
                at = mf.file_from_offset + position
                if start <= at < end and fields[0] == UNIT_SIZE and is_magic_ok(fields[2]):
                    yield fields[5]

    def _deliveries_from(self, start: int) -> Counter[_DeliveryKey]:
        """Delivered (or rolled) timer messages stored in the commit log from ``start``."""
        found: Counter[_DeliveryKey] = Counter()
        commit_log = self._store.commit_log
        mfq = commit_log.mapped_file_queue
        end = commit_log.get_max_offset()
        offset = max(start, commit_log.get_min_offset())
        while 0 <= offset < end:
            mf = mfq.find_mapped_file_by_offset(offset)
            if mf is None:
                break
            pos = offset - mf.file_from_offset
            head = mf.select(pos, 8)
            if head is None:
                offset = mf.file_from_offset + mf.file_size
                continue
            with head:
                size, magic = _CL_HEAD.unpack(head)
            if magic == CL_BLANK_MAGIC_CODE or size <= 0:
                offset = mf.file_from_offset + mf.file_size
                continue
            if magic != MESSAGE_MAGIC_CODE:
                log.warning("timer replay: no record at commit-log offset %d; the scan stops", offset)
                break
            if mf.mm.find(_DEQUEUE_MARK, pos, pos + size) >= 0:
                record = mf.select(pos, size)
                if record is not None:
                    with record:
                        try:
                            msg = decode_stored(record)
                        except MessageDecodeError:
                            msg = None
                    if msg is not None:
                        key = _delivery_key(msg)
                        if key is not None:
                            found[key] += 1
            offset += size
        return found

    # ================================================================== state

    @property
    def _wheel(self) -> TimerWheel:
        wheel = self.timer_wheel
        if wheel is None:
            raise RuntimeError("the timer store is not loaded (or shut down)")
        return wheel

    @property
    def _checkpoint(self) -> TimerCheckpoint:
        cp = self.timer_checkpoint
        if cp is None:
            raise RuntimeError("the timer store is not loaded (or shut down)")
        return cp

    def _format(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def _maybe_move_write_time(self) -> None:
        now = self._format(_now_ms())
        if self.curr_write_time_ms < now:
            self.curr_write_time_ms = now
            self._dequeue_wakeup.set()

    def _move_read_time(self, to: int | None = None) -> None:
        """The read time's slot is done: on to the next slot (or to ``to``, past empty ones)."""
        passed = self.curr_read_time_ms
        self.curr_read_time_ms = passed + self.precision_ms if to is None else to
        self.commit_read_time_ms = self.curr_read_time_ms
        self._read_mark = (self.commit_read_time_ms, self._store.get_max_phy_offset())
        self._wheel.nums.pop(passed, None)

    def _next_live_slot(self, write_time: int) -> int:
        """The time of the first slot after the read time's that holds a chain, at most
        ``write_time``: every slot between is empty (Java steps through them one by one; a
        Python step costs a microsecond, and a fresh start has 604,800 to go)."""
        read = self.curr_read_time_ms
        later = [t for t in list(self._wheel.nums) if read < t < write_time]
        return min(later, default=write_time)

    def _is_running_enqueue(self) -> bool:
        return self._running and not self._stopping.is_set()

    def _is_running_dequeue(self) -> bool:
        return self.should_running_dequeue and self._running and not self._stopping.is_set()

    def _prepare_timer_checkpoint(self) -> None:
        """Java ``prepareTimerCheckPoint``, plus finchmq's replay record."""
        cp = self._checkpoint
        read_time, read_mark = self._read_mark
        queue_offset, queue_mark, log_mark = self._queue_mark
        data = cp.data
        data.last_timer_log_flush_pos = self.timer_log.flushed_where
        data.last_read_time_ms = read_time
        if self.should_running_dequeue:
            data.master_timer_queue_offset = queue_offset
            if read_time != self._last_commit_read_time_ms or queue_offset != self._last_commit_queue_offset:
                data.next_version(0)
                self._last_commit_read_time_ms = read_time
                self._last_commit_queue_offset = queue_offset
        data.last_timer_queue_offset = min(queue_offset, data.master_timer_queue_offset)
        commit_log_offset, timer_log_offset = min(read_mark, queue_mark), log_mark
        if self._replay_floor_commit_log is not None:
            commit_log_offset = min(commit_log_offset, self._replay_floor_commit_log)
        if self._replay_floor_timer_log is not None:
            timer_log_offset = min(timer_log_offset, self._replay_floor_timer_log)
        cp.replay_commit_log_offset = commit_log_offset
        cp.replay_timer_log_offset = timer_log_offset

    # ================================================================== enqueue

    def _run_enqueue_get(self) -> None:
        wait = 100 * self.precision_ms / 1000 / 1000
        while not self._stopping.is_set():
            try:
                if not self.enqueue(0):
                    self._enqueue_wakeup.wait(wait)
                    self._enqueue_wakeup.clear()
            except Exception:
                log.exception("Error occurred in TimerEnqueueGetService")
                self._stopping.wait(0.05)

    def enqueue(self, queue_id: int) -> bool:
        """Java ``enqueue``: hand the timer topic's new messages to the enqueue put thread; True
        if there were some."""
        cfg = self._store.config
        if cfg.timer_stop_enqueue or not self._is_running_enqueue():
            return False
        cq = self._store.get_consume_queue(TIMER_TOPIC, queue_id)
        if cq is None:
            return False
        if self.curr_queue_offset < cq.get_min_offset_in_queue():
            log.warning(
                "Timer currQueueOffset:%d is smaller than minOffsetInQueue:%d",
                self.curr_queue_offset,
                cq.get_min_offset_in_queue(),
            )
            self.curr_queue_offset = cq.get_min_offset_in_queue()
        offset = self.curr_queue_offset
        units = cq.get_index_buffer(offset)
        if units is None:
            return False
        i = 0
        with units:
            whole = len(units) - len(units) % CQ_UNIT.size
            for offset_py, size_py, _ in CQ_UNIT.iter_unpack(units[:whole]):
                i += 1
                try:
                    self._enqueue_one(offset_py, size_py, offset + i)
                except Exception as exc:
                    if cfg.timer_skip_unknown_error:
                        log.warning("Unknown error in skipped in enqueuing", exc_info=True)
                    else:
                        # Java: the message is tried again until it can be enqueued
                        limited.error(
                            "enqueue",
                            "timer topic message at queue offset %d cannot be enqueued: %r",
                            offset + i - 1,
                            exc,
                        )
                        self._stopping.wait(0.05)
                        return False
                if not self._is_running_enqueue():
                    return False
                self.curr_queue_offset = offset + i
        self.curr_queue_offset = offset + i
        return i > 0

    def _enqueue_one(self, offset_py: int, size_py: int, next_queue_offset: int) -> None:
        enqueued = self._replay_enqueued
        if enqueued is not None and offset_py in enqueued:
            enqueued.discard(offset_py)
            self.replay_skipped += 1
            return  # in the timer log already (enqueued before a crash)
        msg = self._message_by_commit_offset(offset_py, size_py)
        if msg is None:
            return
        now = _now_ms()
        self.last_enqueue_but_expired_time = now
        self.last_enqueue_but_expired_store_time = msg.store_timestamp
        delayed_time = int(msg.properties[_OUT_MS])
        request = TimerRequest(offset_py, size_py, delayed_time, now, MAGIC_DEFAULT, msg)
        request.queue_offset = next_queue_offset
        while True:
            try:
                self._enqueue_put_queue.put(request, timeout=3)
                break
            except queue.Full:
                if not self._is_running_enqueue():
                    return
        topic = msg.properties.get(_REAL_TOPIC, "")
        self.delay_latency.observe(topic, (delayed_time - msg.born_timestamp) // 1000)

    def _run_enqueue_put(self) -> None:
        while not self._stopping.is_set():
            try:
                self._fetch_and_put_timer_request()
            except Exception:
                log.exception("Unknown error in TimerEnqueuePutService")
                self._stopping.wait(0.05)

    def _fetch_timer_requests(self) -> list[TimerRequest]:
        # wait at most until the next precision boundary: the write time moves there
        now = _now_ms()
        timeout = max((self._format(now) + self.precision_ms - now) / 1000, 0.001)
        try:
            first = self._enqueue_put_queue.get(timeout=timeout)
        except queue.Empty:
            return []
        if first is None:
            return []
        requests = [first]
        while len(requests) <= 10:
            try:
                more = self._enqueue_put_queue.get_nowait()
            except queue.Empty:
                break
            if more is None:
                break
            requests.append(more)
        return requests

    def _fetch_and_put_timer_request(self) -> None:
        """Java ``fetchAndPutTimerRequest``."""
        tmp_commit_queue_offset = self.curr_queue_offset
        requests = self._fetch_timer_requests()
        if not requests:
            if not self._stopping.is_set():
                self._commit_queue_offset(tmp_commit_queue_offset)
                self._maybe_move_write_time()
            return
        while not self._stopping.is_set():
            latch = _Latch(len(requests))
            for request in requests:
                request.latch = latch
                self._put_message_to_timer_wheel(request)
            if not self._await(latch):
                return  # shutting down: the batch is done again after a restart
            if all(r.succ for r in requests):
                break
            self._stopping.wait(0.05)
        else:
            return
        self._commit_queue_offset(requests[-1].queue_offset)
        self._maybe_move_write_time()

    def _commit_queue_offset(self, offset: int) -> None:
        self.commit_queue_offset = offset
        self._queue_mark = (offset, self._store.get_max_phy_offset(), self.timer_log.get_max_offset())

    def _put_message_to_timer_wheel(self, request: TimerRequest) -> None:
        try:
            self.enqueue_tps.flow()
            self._count(self.enqueue_total, _real_topic(request.msg))
            if self.should_running_dequeue and request.delay_time < self.curr_write_time_ms:
                request.enqueue_time = MAX_LONG  # due already: delivered without a unit
                self._dequeue_put_queue.put(request)
            else:
                ok = self.do_enqueue(request.offset_py, request.size_py, request.delay_time, request.msg)
                request.idempotent_release(ok or self._store.config.timer_skip_unknown_error)
        except Exception:
            log.exception("Unknown error")
            if self._store.config.timer_skip_unknown_error:
                request.idempotent_release(True)
            else:
                self._stopping.wait(0.05)

    def do_enqueue(self, offset_py: int, size_py: int, delayed_time: int, msg: MessageExt | None) -> bool:
        """Java ``doEnqueue``: append the unit and make it its slot's last."""
        wheel = self._wheel
        p = self.precision_ms
        write_time = self.curr_write_time_ms
        window = self.timer_roll_window_slots
        magic = MAGIC_DEFAULT
        if delayed_time - write_time >= window * p:
            magic |= MAGIC_ROLL
            if delayed_time - write_time - window * p < window // 3 * p:
                delayed_time = write_time + window // 2 * p  # give enough time to the next roll
            else:
                delayed_time = write_time + window * p
        properties = msg.properties if msg is not None else {}
        is_delete = _DEL_UNIQKEY in properties
        if is_delete:
            magic |= MAGIC_DELETE
        real_topic = properties.get(_REAL_TOPIC)
        slot = wheel.get_slot(delayed_time)
        unit = UNIT.pack(
            UNIT_SIZE, slot.last_pos, magic, write_time, delayed_time - write_time, offset_py, size_py,
            tags_hash_code(real_topic), 0,
        )  # fmt: skip
        position = self.timer_log.append(unit)
        if position == -1:
            return False
        wheel.put_slot(
            delayed_time,
            position if slot.first_pos == -1 else slot.first_pos,
            position,
            slot.num - 1 if is_delete else slot.num + 1,
            slot.magic,
        )
        self._add_metric(msg, -1 if is_delete else 1)
        return True

    # ================================================================== dequeue

    def _run_dequeue_get(self) -> None:
        wait = 100 * self.precision_ms / 1000 / 1000
        while not self._stopping.is_set():
            try:
                if self.dequeue() == -1:
                    self._dequeue_wakeup.wait(wait)
                    self._dequeue_wakeup.clear()
            except Exception:
                log.exception("Error occurred in TimerDequeueGetService")
                self._stopping.wait(0.05)

    def dequeue(self) -> int:
        """Java ``dequeue``: deliver the read time's slot; -1 when there is nothing to do now,
        0 for an empty slot, 1 for a delivered one."""
        cfg = self._store.config
        if cfg.timer_stop_dequeue or not self._is_running_dequeue():
            return -1
        write_time = self.curr_write_time_ms
        if self.curr_read_time_ms >= write_time:
            return -1
        wheel = self._wheel
        slot = wheel.get_slot(self.curr_read_time_ms)
        if slot.time_ms == -1:
            self._move_read_time(self._next_live_slot(write_time))
            return 0
        try:
            self._dequeue_status_change = False
            delete_keys: set[str] = set()
            normal: list[TimerRequest] = []
            deletes: list[TimerRequest] = []
            for unit in self._chain(slot.last_pos):
                request = TimerRequest(
                    unit.offset_py, unit.size_py, unit.delayed_time, unit.enqueue_time, unit.magic
                )
                request.delete_list = delete_keys
                if need_delete(unit.magic) and not need_roll(unit.magic):
                    deletes.append(request)
                else:
                    normal.append(request)
            normal.reverse()  # enqueue order (the chain runs backwards)
            if not deletes and not normal:
                log.warning("dequeue time:%d but read nothing from timerLog", self.curr_read_time_ms)
            if not self._is_running_dequeue():
                return -1
            for batch in (deletes, normal):
                latch = _Latch(len(batch))
                for part in self._split_into_lists(batch):
                    for request in part:
                        request.latch = latch
                    self._dequeue_get_queue.put(part)
                if not self._await(latch):
                    return -1
            if self._dequeue_status_change or not self._is_running_dequeue():
                return -1
            self._move_read_time()
        except Exception:
            log.exception("Unknown error in dequeue process")
            if cfg.timer_skip_unknown_error:
                self._move_read_time()
        return 1

    def _chain(self, last_pos: int) -> Iterator[TimerLogUnit]:
        """The units of a slot, last first, following each unit's previous position."""
        position = last_pos
        while position != -1:
            try:
                unit = self.timer_log.read_unit(position)
            except StoreCorruptedError as exc:
                log.error("Error in dequeue_read_timerlog: %s", exc)
                return
            if unit is None:
                return
            yield unit
            if unit.prev_pos >= position:
                log.error(
                    "timer log unit at %d points forward to %d; the chain stops", position, unit.prev_pos
                )
                return
            position = unit.prev_pos

    def _split_into_lists(self, requests: list[TimerRequest]) -> list[list[TimerRequest]]:
        """Java ``splitIntoLists``: one list under 100, else by commit-log file, 2000 at most."""
        if len(requests) < 100:
            return [requests] if requests else []
        lists: list[list[TimerRequest]] = []
        for _, group in itertools.groupby(requests, key=lambda r: r.offset_py // self.commit_log_file_size):
            members = list(group)
            lists.extend(members[i : i + 2000] for i in range(0, len(members), 2000))
        return lists

    def _await(self, latch: _Latch) -> bool:
        """Wait for ``latch``; False if the store stops first."""
        while not latch.wait(0.1):
            if self._stopping.is_set():
                return False
        return True

    def _run_dequeue_get_message(self) -> None:
        """Java ``TimerDequeueGetMessageService``."""
        pending_deletes: dict[str, MessageExt] = {}  # Java's avoidDeleteLose
        new_round = True
        while True:
            requests = self._dequeue_get_queue.get()
            if requests is None or self._stopping.is_set():
                return
            for request in requests:
                try:
                    msg = self._message_by_commit_offset(request.offset_py, request.size_py)
                    if msg is None:
                        request.idempotent_release()  # never processed afterwards
                        continue
                    if need_delete(request.magic) and not need_roll(request.magic):
                        if not new_round:  # a new round: the recalls that found nothing count again
                            new_round = True
                            for marker in pending_deletes.values():
                                self._add_metric(marker, 1)
                            pending_deletes.clear()
                        key = msg.properties.get(_DEL_UNIQKEY)
                        if key is not None and request.delete_list is not None:
                            pending_deletes[key] = msg
                            request.delete_list.add(key)
                        request.idempotent_release()
                        continue
                    new_round = False
                    uniq = msg.properties.get(_UNIQ)
                    if uniq is None:
                        log.warning("No uniqueKey for msg:%s", msg.msg_id)
                    deleted = request.delete_list
                    if uniq is not None and deleted and build_delete_key(_real_topic(msg), uniq) in deleted:
                        pending_deletes.pop(uniq, None)
                        request.idempotent_release()
                        continue
                    request.msg = msg
                    while not self._stopping.is_set():
                        try:
                            self._dequeue_put_queue.put(request, timeout=3)
                            break
                        except queue.Full:
                            continue
                except Exception:
                    log.exception("Unknown exception")
                    if self._store.config.timer_skip_unknown_error:
                        request.idempotent_release()
                    else:
                        request.idempotent_release(False)

    def _run_dequeue_put_message(self) -> None:
        """Java ``TimerDequeuePutMessageService``."""
        while True:
            request = self._dequeue_put_queue.get()
            if request is None:
                return
            change = False
            try:
                if not self._is_running_dequeue():
                    self._dequeue_status_change = change = True
                    continue
                self._deliver(request)
            except Exception:
                log.exception("Unknown error")
            finally:
                request.idempotent_release(not change)

    def _deliver(self, request: TimerRequest) -> None:
        msg = request.msg
        assert msg is not None
        self.dequeue_tps.flow()
        self._count(self.dequeue_total, _real_topic(msg))
        if request.enqueue_time == MAX_LONG:  # never enqueued: marked
            msg = _with_property(msg, MessageConst.PROPERTY_TIMER_ENQUEUE_MS, str(MAX_LONG))
        self._add_metric(msg, -1)
        roll = need_roll(request.magic)
        if self._already_delivered(msg):
            return
        try:
            inner = self.convert(msg, request.enqueue_time, roll)
        except (KeyError, ValueError) as exc:  # no REAL_TOPIC / REAL_QID: Java retries it forever
            limited.error("convert", "timer message %s cannot be delivered (%r); dropped", msg.msg_id, exc)
            return
        cfg = self._store.config
        retries = 0
        while not self._stopping.is_set():
            result = self._do_put(inner, roll)
            if result in (_PUT_OK, _PUT_NO_RETRY):
                if result == _PUT_NO_RETRY:
                    log.warning("Skipping message due to unrecoverable error. Msg: %s", msg.msg_id)
                return
            retries += 1
            if not cfg.timer_enable_retry_until_success and retries >= 3:
                log.error("Message processing failed after %d retries. Msg: %s", retries, msg.msg_id)
                return
            log.warning("Retrying to process message. Retry count: %d, Msg: %s", retries, msg.msg_id)
            self._stopping.wait(0.5 * self.precision_ms / 1000)

    def _already_delivered(self, msg: MessageExt) -> bool:
        """After a crash: whether this message (or its roll) was stored before it."""
        delivered = self._replay_delivered
        if delivered is None:
            return False
        key = _source_key(msg)
        with self._replay_lock:
            if key is None or delivered.get(key, 0) <= 0:
                return False
            delivered[key] -= 1
            self.replay_skipped += 1
        log.info("timer message %s was delivered before the restart; not again", key[1])
        return True

    def _end_replay_if_over(self) -> None:
        """The replay is over once the committed queue offset has passed the timer topic's end at
        the restart (no unit made before it is ahead) and the committed read time the restart's
        time (no slot delivered before it is ahead). Called by the flush thread."""
        if self._replay_floor_timer_log is not None and self.commit_queue_offset >= self._replay_queue_end:
            self._replay_enqueued = None
            self._replay_floor_timer_log = None
        if (
            self._replay_floor_commit_log is not None
            and self._replay_floor_timer_log is None
            and self.commit_read_time_ms > self._replay_read_end + self.precision_ms
        ):
            with self._replay_lock:
                self._replay_delivered = None
            self._replay_floor_commit_log = None
            log.info("timer replay over: %d message(s) not enqueued or delivered twice", self.replay_skipped)

    def convert(self, msg: MessageExt, enqueue_time: int, roll: bool) -> MessageExtBrokerInner:
        """Java ``convert`` + ``convertMessage``: the message to store, in its real topic and
        queue (or, to roll, in the timer topic), stamped TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS
        (and TIMER_ROLL_TIMES). As Java's, the stored properties keep REAL_TOPIC and REAL_QID
        (Java clears them from the map after writing the properties string)."""
        props = dict(msg.properties)
        if enqueue_time != -1:
            props[MessageConst.PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_time)
        if roll:
            props[_ROLL_TIMES] = str(int(props.get(_ROLL_TIMES) or 0) + 1)
        props[MessageConst.PROPERTY_TIMER_DEQUEUE_MS] = str(_now_ms())
        # decoded properties read back as they are, and the values added are numbers
        stored = properties_to_string(props, trusted=True)
        if roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic = props.pop(_REAL_TOPIC)
            queue_id = int(props.pop(_REAL_QID))
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        return MessageExtBrokerInner(
            topic, msg.body, queue_id, msg.flag, props, stored, None, msg.sys_flag, msg.born_timestamp,
            msg.born_host.packed, msg.store_host.packed, msg.reconsume_times,
        )  # fmt: skip

    def _do_put(self, inner: MessageExtBrokerInner, roll: bool) -> int:
        """Java ``doPut``: 0 stored, 1 failed and worth a retry, 2 failed for good."""
        if not roll and _DEL_UNIQKEY in inner.properties:
            log.warning("Trying do put delete timer msg:[%s] roll:[%s]", inner.topic, roll)
            return _PUT_NO_RETRY
        result = self._put(inner)
        status = result.status
        if status is PutMessageStatus.PUT_OK:
            return _PUT_OK
        if status in _NO_RETRY:
            return _PUT_NO_RETRY
        if status in _RETRY:
            return _PUT_NEED_RETRY
        if self._store.config.timer_skip_unknown_error:
            log.warning("Skipping message due to unknown error, msg: %s", inner.topic)
            return _PUT_NO_RETRY
        self._stopping.wait(0.05)
        return _PUT_NEED_RETRY

    # ================================================================== flush and figures

    def _run_flush(self) -> None:
        """Java ``TimerFlushService`` (plus the scheduler's timer log clean-up)."""
        progress_at = time.monotonic()
        cleaned_at = time.monotonic()
        while not self._stopping.is_set():
            try:
                self.flush()
                now = time.monotonic()
                cfg = self._store.config
                if (now - progress_at) * 1000 > cfg.timer_progress_log_interval_ms:
                    progress_at = now
                    self._log_progress()
                if now - cleaned_at > _CLEAN_TIMER_LOG_EVERY:
                    cleaned_at = now
                    self.timer_log.delete_expired_files(self._store.get_min_phy_offset())
            except Exception:
                log.exception("Error occurred in TimerFlushService")
            self._flush_wakeup.wait(self._store.config.timer_flush_interval_ms / 1000)

    def flush(self) -> None:
        """Write the checkpoint's positions and flush the log, the wheel, the checkpoint and
        the metrics (in that order: the checkpoint never points past flushed units)."""
        self._end_replay_if_over()
        self._prepare_timer_checkpoint()
        self.timer_log.flush()
        self._wheel.flush()
        self._checkpoint.flush()
        self.timer_metrics.persist()
        self._refresh_figures()

    def _refresh_figures(self) -> None:
        wheel = self.timer_wheel
        if wheel is None:
            return
        self.congest_num = wheel.get_all_num(self.curr_read_time_ms)
        now = self._format(_now_ms())
        buckets = dict.fromkeys(TIMER_DIST, 0)
        for t, num in list(wheel.nums.items()):
            ahead = (t - now) // 1000
            if t - now >= 0:
                for bound in TIMER_DIST:
                    if ahead < bound:
                        buckets[bound] += num
                        break
        self.distribution = buckets

    def _log_progress(self) -> None:
        cq = self._store.get_consume_queue(TIMER_TOPIC, 0)
        max_offset = cq.get_max_offset_in_queue() if cq is not None else 0
        behind = max_offset - self.curr_queue_offset
        level = logging.INFO if behind or self.congest_num else logging.DEBUG
        log.log(
            level,
            "[%s]Timer progress-check commitRead:[%d] currRead:[%d] currWrite:[%d] readBehind:%d "
            "currReadOffset:%d offsetBehind:%d behindMaster:%d enqPutQueue:%d deqGetQueue:%d deqPutQueue:%d "
            "allCongestNum:%d enqExpiredStoreTime:%d",
            self._store.config.broker_role.name,
            self.commit_read_time_ms,
            self.curr_read_time_ms,
            self.curr_write_time_ms,
            self.get_dequeue_behind(),
            self.curr_queue_offset,
            behind,
            self._checkpoint.data.master_timer_queue_offset - self.curr_queue_offset,
            self._enqueue_put_queue.qsize(),
            self._dequeue_get_queue.qsize(),
            self._dequeue_put_queue.qsize(),
            self.congest_num,
            self.last_enqueue_but_expired_store_time,
        )

    def _add_metric(self, msg: MessageExt | None, value: int) -> None:
        """Java ``addMetric``: the real topic's count of waiting timers."""
        try:
            if msg is None:
                return
            topic = msg.properties.get(_REAL_TOPIC)
            if topic is None or msg.properties.get(MessageConst.PROPERTY_TIMER_ENQUEUE_MS) == str(MAX_LONG):
                return
            self.timer_metrics.add_and_get(topic, value)
        except Exception:
            self._frequency += 1
            if self._frequency % 1000 == 0:
                log.exception("error in adding metric")

    def _count(self, counter: Counter[str], topic: str) -> None:
        with self._metrics_lock:
            counter[topic] += 1

    def _message_by_commit_offset(self, offset_py: int, size_py: int) -> MessageExt | None:
        """Java ``getMessageByCommitOffset``: the message, or None after 3 tries."""
        for _ in range(3):
            msg = self._store.look_message_by_offset(offset_py, size_py)
            if msg is not None:
                return msg
            log.warning("Fail to read msg from commitLog offsetPy:%d sizePy:%d", offset_py, size_py)
        return None

    # -- what the broker reports (Java's getters) -------------------------------------------

    def is_reject(self, deliver_time_ms: int) -> bool:
        """Java ``isReject``: refuse new timers for a slot holding more than
        ``timer_congest_num_each_slot`` (certainly at twice that, at random between)."""
        limit = self._store.config.timer_congest_num_each_slot
        congest = self._wheel.get_num(deliver_time_ms)
        if congest <= limit:
            return False
        if congest >= limit * 2:
            return True
        return random.randrange(1000) > 1000 * (congest - limit) / (limit + 0.1)

    def get_all_congest_num(self) -> int:
        """Timers waiting in the wheel (as of the last flush)."""
        return self.congest_num

    def get_congest_num(self, deliver_time_ms: int) -> int:
        return self._wheel.get_num(deliver_time_ms)

    def get_enqueue_behind_messages(self) -> int:
        cq = self._store.get_consume_queue(TIMER_TOPIC, 0)
        max_offset = cq.get_max_offset_in_queue() if cq is not None else 0
        return max_offset - self.curr_queue_offset

    def get_enqueue_behind_millis(self) -> int:
        now = _now_ms()
        if now - self.last_enqueue_but_expired_time < 2000:
            return now - self.last_enqueue_but_expired_store_time
        return 0

    def get_enqueue_behind(self) -> int:
        return self.get_enqueue_behind_millis() // 1000

    def get_dequeue_behind_messages(self) -> int:
        return self.congest_num

    def get_dequeue_behind_millis(self) -> int:
        return _now_ms() - self.curr_read_time_ms

    def get_dequeue_behind(self) -> int:
        return self.get_dequeue_behind_millis() // 1000

    def get_enqueue_tps(self) -> float:
        return self.enqueue_tps.last_tps()

    def get_dequeue_tps(self) -> float:
        return self.dequeue_tps.last_tps()

    def checkpoint_data(self) -> bytes:
        """GET_TIMER_CHECK_POINT's body: the checkpoint's 56 bytes."""
        return self._checkpoint.data.encode()

    def totals(self) -> tuple[dict[str, int], dict[str, int]]:
        """Snapshots of the enqueue and dequeue counts by real topic."""
        with self._metrics_lock:
            return dict(self.enqueue_total), dict(self.dequeue_total)


def _real_topic(msg: MessageExt | None) -> str:
    if msg is None:
        return ""
    return msg.properties.get(_REAL_TOPIC, "")


def _with_property(msg: MessageExt, name: str, value: str) -> MessageExt:
    return msg.with_property(name, value)


def _source_key(msg: MessageExt) -> _DeliveryKey | None:
    """How a timer message waiting in the timer topic is recognised in its deliveries."""
    props = msg.properties
    uniq, out, topic = props.get(_UNIQ), props.get(_OUT_MS), props.get(_REAL_TOPIC)
    if uniq is None or out is None or topic is None:
        return None
    try:
        rolls = int(props.get(_ROLL_TIMES) or 0)
    except ValueError:
        return None
    return topic, uniq, out, rolls


def _delivery_key(msg: MessageExt) -> _DeliveryKey | None:
    """The source key of a stored delivery (or roll): REAL_TOPIC stays in its properties."""
    key = _source_key(msg)
    if key is None:
        return None
    if msg.topic == TIMER_TOPIC:  # a roll: its source had one roll less
        return key[0], key[1], key[2], key[3] - 1
    return key
