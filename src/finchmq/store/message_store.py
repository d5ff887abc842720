"""``DefaultMessageStore``: the store façade the broker calls (RocketMQ ``DefaultMessageStore``).

Owns the store's lifecycle (load and which recovery runs, start, shutdown), the put and get
paths, lookups, the flow-control probes and the disk-full flag; the recovery itself is
``recovery.py``'s, replication's commit-log bytes ``replication.py``'s. Imports:
``finchmq.protocol`` (messages, stored layout) and the store's modules; never the network
(import-linter) nor asyncio (tests/test_architecture.py).

Threading:
    Every public method is synchronous and thread-safe. Puts serialise on the commit log's put
    lock; call them from a writer thread, not an event loop. ``put`` (the one put path) returns
    the final result, or a ``concurrent.futures.Future`` when the put waits for a SYNC_FLUSH
    group commit, which the flush thread completes. Reads take no lock. The
    arrival listener is called on the thread that dispatches: the writer right after its
    append, or the commit thread when the transient store pool is on.
    See docs/store.md for the layout on disk, recovery and the design choices.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import logging
import os
import shutil
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from types import TracebackType
from typing import Final

from finchmq.common.logs import RateLimitedLog
from finchmq.common.metrics import Histogram
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.message import MessageExt, string_to_properties
from finchmq.protocol.message_const import KEY_SEPARATOR, MessageConst
from finchmq.protocol.stored import decode_stored
from finchmq.protocol.topics import LMQ_PREFIX, RMQ_SYS_TRANS_OP_HALF_TOPIC, SCHEDULE_TOPIC

from .checkpoint import StoreCheckpoint, create_abort_file, delete_abort_file
from .commit_log import CommitLog, EncodedBatch
from .config import CQ_STORE_UNIT_SIZE, BrokerRole, FlushDiskType, MessageStoreConfig
from .consume_queue import CQ_UNIT, ConsumeQueue
from .dispatch import MessageArrivingListener, ReputMessageService
from .index import IndexService
from .inner import MessageExtBatch, MessageExtBrokerInner
from .mapped_file import TransientStorePool
from .mapped_file_queue import AllocateMappedFileService
from .message_filter import MessageFilter
from .recovery import CommitLogRecovery
from .replication import ReplicationState
from .services import (
    CleanupService,
    FlushConsumeQueueService,
    FlushManager,
    default_disk_usage,
)
from .status import (
    AppendMessageResult,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    StoreCorruptedError,
)

__all__ = ["LATENCY_BUCKETS", "DefaultMessageStore", "DiskUsage", "StoreLatency", "StoreState"]


def _combine(
    flushed: Future[PutMessageResult], replicated: PutMessageResult | Future[PutMessageResult]
) -> Future[PutMessageResult]:
    """Java's ``flushResultFuture.thenCombine(replicaResultFuture)``: a failed flush sets the status,
    a failed replication then overrides it."""
    combined: Future[PutMessageResult] = Future()

    def both_done(_: object = None) -> None:
        if not flushed.done() or (isinstance(replicated, Future) and not replicated.done()):
            return
        flush_result = flushed.result()
        replica_result = replicated.result() if isinstance(replicated, Future) else replicated
        final = flush_result
        if replica_result.status is not PutMessageStatus.PUT_OK:
            final = PutMessageResult(replica_result.status, flush_result.append_message_result)
        with contextlib.suppress(InvalidStateError):  # both callbacks saw both done
            combined.set_result(final)

    flushed.add_done_callback(both_done)
    if isinstance(replicated, Future):
        replicated.add_done_callback(both_done)
    else:
        both_done()
    return combined


_PUT_OK: Final = PutMessageStatus.PUT_OK
_SLAVE: Final = BrokerRole.SLAVE
_SYNC_MASTER: Final = BrokerRole.SYNC_MASTER

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # per-request failures (a full disk): a few lines, with counts

DiskUsage = Callable[[Path], float]
"""Returns the used fraction (0..1) of the filesystem holding a path; injectable for tests."""

_BLANK_UNIT_SIZE: Final = 0x7FFFFFFF
_MAX_FILTER_BYTES: Final = 16_000  # Java getMessage: max(16000, maxMsgNums * 20) bytes of units


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 24 * 1024**3


class StoreState(enum.Enum):
    NEW = "NEW"
    LOADED = "LOADED"
    RUNNING = "RUNNING"
    SHUTDOWN = "SHUTDOWN"


_RUNNING: Final = StoreState.RUNNING

# seconds; Java StoreStatsService's putMessageDistributeTime edges (0, 10, 50 ms ... 10 s) are
# among them, finer below 1 ms where a Python append lives. The explicit type: mypyc (2.4) never
# sets a bare ``Final`` tuple of floats (NameError at first use).
LATENCY_BUCKETS: Final[tuple[float, ...]] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0,
    5.0, 10.0,
)  # fmt: skip


class StoreLatency:
    """Put latency (the whole ``put``: checks, append, dispatch), commit-log flush latency, and
    the time puts spent past ``osPageCacheBusyTimeOutMills`` (the page cache counted busy)."""

    __slots__ = ("flush", "page_cache_busy_seconds", "put")

    def __init__(self) -> None:
        self.put = Histogram(LATENCY_BUCKETS)
        self.flush = Histogram(LATENCY_BUCKETS)
        self.page_cache_busy_seconds = 0.0


class DefaultMessageStore:
    """The message store: commit log + consume queues + index, with flush and recovery.

    Lifecycle: ``load()`` (recovers), ``start()`` (background services), ``shutdown()``;
    or ``with DefaultMessageStore(cfg) as store:`` for all three.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        disk_usage: DiskUsage | None = None,
        listener: MessageArrivingListener | None = None,
    ) -> None:
        self.config = config
        self._disk_usage: DiskUsage = disk_usage or default_disk_usage
        self.state = StoreState.NEW
        self.transient_store_pool = (
            TransientStorePool(config.transient_store_pool_size, config.mapped_file_size_commit_log)
            if config.transient_store_pool_active
            else None
        )
        self.allocate_service: AllocateMappedFileService | None = None
        self.index_service = (
            IndexService(
                config.index_dir, config.max_hash_slot_num, config.max_index_num, config.max_msgs_num_batch
            )
            if config.message_index_enable
            else None
        )
        self._cq_table: dict[tuple[str, int], ConsumeQueue] = {}
        self._cq_lock = threading.Lock()
        self.reput = ReputMessageService(self.find_consume_queue, self.index_service, config.delay_levels_ms)
        self.reput.listener = listener
        self.commit_log = CommitLog(config, self.reput, None, self.transient_store_pool)
        self.commit_log.on_roll.append(self._on_roll)
        self.checkpoint: StoreCheckpoint
        self.recovery_report: list[StoreCorruptedError] = []
        # the last recovery: messages scanned, the log end, where re-dispatch began and how many
        self.recovery_counts: dict[str, int] = {}
        self._disk_full = False
        self._write_error = False
        self._lock_fd = -1
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._flush: FlushManager | None = None
        self._cq_flush_service: FlushConsumeQueueService | None = None
        self._cleanup_service: CleanupService | None = None
        self._memory = _total_physical_memory() * config.access_message_in_memory_max_ratio // 100
        self.replication = ReplicationState(
            self.commit_log, config.ha_slave_fallbehind_max, config.slave_timeout, self._check_disk
        )
        self.latency: StoreLatency | None = None

    def enable_latency_metrics(self) -> StoreLatency:
        """Measure every put and commit-log flush from now on (the broker's metrics turn this
        on; off, the put path measures nothing)."""
        if self.latency is None:
            self.latency = StoreLatency()
            self.commit_log.mapped_file_queue.flush_latency = self.latency.flush
        return self.latency

    # ================================================================== lifecycle

    def load(self) -> bool:
        """Map the files and recover (normal or abnormal). Returns True; raises
        ``StoreCorruptedError`` when the log cannot be trusted without an operator, and
        ``RuntimeError`` if another process holds the store lock."""
        if self.state is not StoreState.NEW:
            raise RuntimeError(f"load() called when state={self.state.name}")
        cfg = self.config
        cfg.store_path_root_dir.mkdir(parents=True, exist_ok=True)
        cfg.commit_log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_store()
        try:
            last_exit_ok = not cfg.abort_path.exists()
            self.allocate_service = AllocateMappedFileService(
                self.transient_store_pool, cfg.fast_fail_if_no_buffer_in_store_pool
            )
            self.commit_log.mapped_file_queue.allocate_service = self.allocate_service
            report = self.commit_log.mapped_file_queue.load()
            report += self._load_consume_queues()
            self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
            if self.checkpoint.unreadable:
                log.warning("checkpoint %s is unreadable (torn?): full recovery", cfg.checkpoint_path)
                last_exit_ok = False
            if self.index_service is not None:
                self.index_service.load()
            report += self._recover(last_exit_ok)
            self.recovery_report = report
            for problem in report:
                log.warning("recovery: %s", problem)
        except BaseException:
            self._close_files()
            raise
        self.state = StoreState.LOADED
        return True

    def start(self) -> None:
        """Start the flush, commit, consume-queue flush and cleanup services."""
        if self.state is not StoreState.LOADED:
            raise RuntimeError(f"start() called when state={self.state.name}")
        cfg = self.config
        self.checkpoint.clear_clean_shutdown()
        create_abort_file(cfg.abort_path)
        self._flush = FlushManager(
            self, sync_flush=self._sync_flush, transient_pool=self.transient_store_pool is not None
        )
        self._flush.start()
        self._cq_flush_service = FlushConsumeQueueService(self)
        self._cq_flush_service.start()
        self._cleanup_service = CleanupService(self)
        self._cleanup_service.start()
        self.replication.start()
        self.state = StoreState.RUNNING
        log.info("message store started at %s", cfg.store_path_root_dir)

    def shutdown(self) -> None:
        """Stop services, flush everything, write the clean-shutdown checkpoint, close files. Idempotent."""
        if self.state is StoreState.SHUTDOWN:
            return
        was_running = self.state is StoreState.RUNNING
        self.state = StoreState.SHUTDOWN
        with self.commit_log.put_lock:  # wait for an append in progress
            pass
        if self._cleanup_service is not None:
            self._cleanup_service.shutdown()
        if self._flush is not None:
            self._flush.shutdown()
        self.replication.shutdown()
        self.dispatch_pending()
        if self._cq_flush_service is not None:
            self._cq_flush_service.shutdown()
        if was_running:
            try:
                self.commit_log.mapped_file_queue.flush_all()
                if not self._write_error and not self.reput.failed and self.dispatch_behind_bytes() == 0:
                    end = self.commit_log.get_max_offset()
                    self.checkpoint.mark_clean_shutdown(end, end)
                    delete_abort_file(self.config.abort_path)
            except OSError as exc:
                log.error("shutdown flush failed, the next start recovers abnormally: %s", exc)
        self._close_files()
        log.info("message store shut down")

    def _close_files(self) -> None:
        if self.allocate_service is not None:
            self.allocate_service.shutdown()
        self.commit_log.shutdown()
        for cq in self.consume_queues_snapshot():
            cq.shutdown()
        if self.index_service is not None:
            self.index_service.shutdown()
        if hasattr(self, "checkpoint"):
            self.checkpoint.shutdown()
        if self.transient_store_pool is not None:
            self.transient_store_pool.destroy()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def destroy(self) -> None:
        """Shut down and delete every file of the store (tests, admin)."""
        self.shutdown()
        shutil.rmtree(self.config.store_path_root_dir, ignore_errors=True)
        if self.config.store_path_commit_log is not None:
            shutil.rmtree(self.config.store_path_commit_log, ignore_errors=True)

    def __enter__(self) -> DefaultMessageStore:
        self.load()
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def _lock_store(self) -> None:
        fd = os.open(self.config.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise RuntimeError(
                f"store {self.config.store_path_root_dir} is locked by another process ({exc})"
            ) from exc
        self._lock_fd = fd

    # ================================================================== recovery

    def _load_consume_queues(self) -> list[StoreCorruptedError]:
        problems: list[StoreCorruptedError] = []
        root = self.config.consume_queue_dir
        if not root.is_dir():
            return problems
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not (qdir.is_dir() and qdir.name.isdigit()):
                    continue
                cq = ConsumeQueue(topic_dir.name, int(qdir.name), root, self.config.consume_queue_file_size)
                problems += cq.load()
                self._cq_table[(cq.topic, cq.queue_id)] = cq
        return problems

    def _recover(self, last_exit_ok: bool) -> list[StoreCorruptedError]:
        """Java ``DefaultMessageStore.recover``: the consume queues, then the commit log (normal
        after a clean shutdown, abnormal after a crash; ``recovery.py``), then the topic-queue
        table from the queues. Returns what was found corrupted."""
        queues = self.consume_queues_snapshot()
        for cq in queues:
            cq.recover()
        max_cq_phy = max((cq.max_physic_offset for cq in queues), default=-1)
        recovery = CommitLogRecovery(self.commit_log, self.checkpoint, queues, self.index_service)
        if last_exit_ok:
            result = recovery.recover_normally(max_cq_phy)
        else:
            result = recovery.recover_abnormally(max_cq_phy)
        self._recover_topic_queue_table()
        self.recovery_counts = result.counts
        return result.report

    def _recover_topic_queue_table(self) -> None:
        min_phy = max(self.commit_log.get_min_offset(), 0)
        table: dict[tuple[str, int], int] = {}
        for cq in self.consume_queues_snapshot():
            table[(cq.topic, cq.queue_id)] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self.commit_log.topic_queue_table = table

    # ================================================================== consume queues

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of ``topic``/``queue_id``, created (empty) if needed."""
        key = (topic, queue_id)
        cq = self._cq_table.get(key)
        if cq is None:
            with self._cq_lock:
                cq = self._cq_table.get(key)
                if cq is None:
                    cq = ConsumeQueue(
                        topic, queue_id, self.config.consume_queue_dir, self.config.consume_queue_file_size
                    )
                    self._cq_table[key] = cq
        return cq

    def delete_topics(self, topics: Iterable[str]) -> int:
        """Delete the consume queues of ``topics`` (Java ``deleteTopics``); returns how many.

        Their records stay in the commit log until the segment expires; a later send to the
        same topic starts again at queue offset 0.
        """
        wanted = set(topics)
        deleted = 0
        with self.commit_log.put_lock, self.reput.lock:
            for key in [k for k in self._cq_table if k[0] in wanted]:
                cq = self._cq_table.pop(key)
                self.commit_log.topic_queue_table.pop(key, None)
                cq.destroy()
                deleted += 1
            for topic in wanted:
                topic_dir = self.config.consume_queue_dir / topic
                if topic_dir.is_dir():
                    shutil.rmtree(topic_dir, ignore_errors=True)
        if deleted:
            log.info("deleted %d consume queue(s) of %s", deleted, sorted(wanted))
        return deleted

    def clean_unused_topic(self, topics: Iterable[str]) -> int:
        """Destroy the consume queues of every topic not in ``topics`` (the broker's topic
        table), the schedule and transaction-op topics and LMQ queues excepted (Java
        ``cleanUnusedTopic``, mqadmin ``cleanUnusedTopic``); returns how many queues went."""
        keep = set(topics) | {SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC}
        unused = {t for t, _ in list(self._cq_table) if t not in keep and not t.startswith(LMQ_PREFIX)}
        for topic in sorted(unused):
            log.info("cleanUnusedTopic: %s, topic destroyed", topic)
        return self.delete_topics(unused) if unused else 0

    def clean_expired_consumer_queue(self) -> int:
        """Destroy the consume queues whose every record is gone from the commit log (the last
        one ends before its min offset), the schedule topic's excepted (Java
        ``cleanExpiredConsumerQueue``, mqadmin ``cleanExpiredCQ``); returns how many went."""
        min_phy = self.commit_log.get_min_offset()
        destroyed = 0
        with self.commit_log.put_lock, self.reput.lock:
            for key, cq in list(self._cq_table.items()):
                if cq.topic == SCHEDULE_TOPIC:
                    continue
                last = cq.get_last_offset()
                if last == -1:
                    log.warning(
                        "maybe ConsumeQueue was created just now. topic=%s queueId=%d maxPhysicOffset=%d "
                        "minLogicOffset=%d.",
                        cq.topic, cq.queue_id, cq.max_physic_offset, cq.min_logic_offset,
                    )  # fmt: skip
                elif last < min_phy:
                    log.info(
                        "cleanExpiredConsumerQueue: %s %d consumer queue destroyed, minCommitLogOffset: %d "
                        "maxCLOffsetInConsumeQueue: %d",
                        cq.topic, cq.queue_id, min_phy, last,
                    )  # fmt: skip
                    del self._cq_table[key]
                    self.commit_log.topic_queue_table.pop(key, None)
                    cq.destroy()
                    destroyed += 1
        return destroyed

    def update_runtime_config(self, config: MessageStoreConfig) -> None:
        """Apply settings that may change while running (UPDATE_BROKER_CONFIG): flow-control
        thresholds, the chaos knob, flush and cleanup intervals. Paths and sizes stay as loaded."""
        self.config = config
        self.commit_log.config = config
        self.commit_log._inject_delay = config.inject_put_delay_millis / 1000

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._cq_table.get((topic, queue_id))

    def consume_queues_snapshot(self) -> list[ConsumeQueue]:
        return list(self._cq_table.values())

    def topics(self) -> dict[str, list[int]]:
        """Topic -> queue ids with a consume queue."""
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self._cq_table):
            out.setdefault(topic, []).append(qid)
        return out

    # ================================================================== put

    def register_message_arriving_listener(self, listener: MessageArrivingListener | None) -> None:
        """Set the arrival listener (``MessageArrivingListener``), or None.

        Called with ``(topic, queue_id, logic_offset, tags_code, store_timestamp, properties)`` once per
        dispatched message, on the dispatching thread; exceptions are logged."""
        self.reput.listener = listener

    def _check_store_status(self) -> PutMessageStatus | None:
        if (
            self.state is _RUNNING
            and not self._disk_full
            and not self._write_error
            and not self.commit_log.begin_time_in_lock
            and self.config.broker_role is not _SLAVE
        ):
            return None  # the usual case, decided without a clock read
        if self.state is not StoreState.RUNNING:
            limited.warning(
                "not-running",
                "message store is not running (%s), so putMessage is forbidden",
                self.state.name,
            )
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.broker_role is BrokerRole.SLAVE:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self._disk_full or self._write_error:
            limited.warning(
                "not-writeable",
                "message store is not writeable (disk_full=%s, write_error=%s), putMessage is forbidden",
                self._disk_full,
                self._write_error,
            )
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.is_os_page_cache_busy():
            return PutMessageStatus.OS_PAGECACHE_BUSY
        return None

    def put(self, item: MessageExtBrokerInner | MessageExtBatch) -> PutMessageResult:
        """Append one message or a batch (one contiguous write in one segment): the one put path.

        The result is final, or, for a put that waits for a flush (SYNC_FLUSH, WAIT true) or a
        slave (SYNC_MASTER), PUT_OK for the append with ``pending``, the future of the final
        result; its callbacks run on the group-commit or replication thread.
        """
        latency = self.latency
        if latency is None:
            return self._put_batch(item) if isinstance(item, MessageExtBatch) else self._put_one(item)
        began = time.perf_counter()
        result = self._put_batch(item) if isinstance(item, MessageExtBatch) else self._put_one(item)
        elapsed = time.perf_counter() - began
        put = latency.put
        put.counts[bisect_left(LATENCY_BUCKETS, elapsed)] += 1  # Histogram.observe, inlined: hot path
        put.sum += elapsed
        if elapsed > 0.001 and elapsed * 1000 > self.config.os_page_cache_busy_time_out_mills:
            latency.page_cache_busy_seconds += elapsed - self.config.os_page_cache_busy_time_out_mills / 1000
        return result

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """``put`` that blocks until the put is final (tools and tests; not for an event loop)."""
        return self._final(self._put_one(msg))

    def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """``put`` of a batch that blocks until the put is final."""
        return self._final(self._put_batch(batch))

    def _put_one(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        bad = self._check_store_status()
        if bad is not None:
            return PutMessageResult(bad)
        props = msg.properties
        if msg.properties_string is not None and not props:
            props = string_to_properties(msg.properties_string)
        status, ar = self.commit_log.put_message(msg, props)
        return self._after_put(status, ar, props.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK))

    def _put_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        bad = self._check_store_status()
        if bad is not None:
            return PutMessageResult(bad)
        if batch.sys_flag & 0xC or MessageConst.PROPERTY_DELAY_TIME_LEVEL in batch.properties:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)  # Java refuses both for batches
        encoded = self.commit_log.encode_batch(batch)
        if not isinstance(encoded, EncodedBatch):
            return PutMessageResult(encoded)
        status, ar = self.commit_log.put_messages(batch, encoded)
        return self._after_put(status, ar, batch.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK))

    def _after_put(
        self, status: PutMessageStatus, append: AppendMessageResult | None, wait: str | None
    ) -> PutMessageResult:
        if self.reput.pending:
            self.reput.dispatch_pending(self.commit_log.get_max_offset())
        if status is not PutMessageStatus.PUT_OK or append is None:
            if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
                self._check_disk()
            return PutMessageResult(status, append)
        if self.reput.failed and not self._write_error:
            self._write_error = True
            log.error("a consume queue or index file could not be written; the store refuses puts")
        ok = PutMessageResult(_PUT_OK, append)
        on_data = self.replication.on_data
        if on_data is not None:
            on_data()
        flush = self._flush
        if flush is None or (flush.group_commit is None and self.config.broker_role is not _SYNC_MASTER):
            return ok  # ASYNC_FLUSH on a master that waits for no slave: final now
        wait_store_ok = wait is None or wait.lower() == "true"
        flushed = flush.handle_disk_flush(ok, wait_store_ok)
        if not wait_store_ok or self.config.broker_role is not BrokerRole.SYNC_MASTER:
            return ok if flushed is None else PutMessageResult(_PUT_OK, append, flushed)
        replicated = self.replication.wait_for_slave(append)
        if isinstance(replicated, PutMessageResult):  # no slave in sync: final now, whatever the flush
            return (
                replicated
                if flushed is None
                else PutMessageResult(_PUT_OK, append, _combine(flushed, replicated))
            )
        return PutMessageResult(
            _PUT_OK, append, replicated if flushed is None else _combine(flushed, replicated)
        )

    def _final(self, result: PutMessageResult) -> PutMessageResult:
        pending = result.pending
        if pending is None:
            return result
        cfg = self.config
        try:
            return pending.result(max(cfg.sync_flush_timeout, cfg.slave_timeout) / 1000 + 0.05)
        except TimeoutError:  # Java: flushOkFuture.get(syncFlushTimeout) timed out
            return PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, result.append_message_result)

    def dispatch_pending(self) -> None:
        """Dispatch appended records that are readable (called after each put, and by the commit thread)."""
        reput = self.reput
        if reput.pending:
            reput.dispatch_pending(self.commit_log.get_max_offset())

    # ================================================================== replication (HA)

    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None:
        """Master: up to ``max_size`` readable commit-log bytes from ``offset`` (Java
        ``getCommitLogData``; see ``ReplicationState.get_commit_log_data``)."""
        return self.replication.get_commit_log_data(offset, max_size)

    def append_to_commit_log(self, start_offset: int, data: bytes) -> bool:
        """Slave: append replicated commit-log bytes at ``start_offset`` and dispatch what they
        complete (Java ``appendToCommitLog``; see ``ReplicationState.append_to_commit_log``).
        False, appending nothing, also when the store is not running or ``data`` is empty."""
        if self.state is not StoreState.RUNNING or not data:
            return False
        return self.replication.append_to_commit_log(start_offset, data)

    # ================================================================== flow-control probes

    def is_os_page_cache_busy(self) -> bool:
        """True while an append has held the put lock longer than ``os_page_cache_busy_time_out_mills``."""
        begin = self.commit_log.begin_time_in_lock
        if not begin:
            return False  # nobody holds the lock: no clock read (every request asks)
        diff = time.time_ns() // 1_000_000 - begin
        return diff < 10_000_000 and diff > self.config.os_page_cache_busy_time_out_mills

    def lock_time_mills(self) -> int:
        """How long the current append has held the put lock (ms), 0 if none."""
        begin = self.commit_log.begin_time_in_lock
        if begin <= 0:
            return 0
        return max(time.time_ns() // 1_000_000 - begin, 0)

    def remain_transient_store_buffer_numbs(self) -> int:
        pool = self.transient_store_pool
        return pool.available_buffer_nums() if pool is not None else 2**31 - 1

    def is_transient_store_pool_deficient(self) -> bool:
        """True when the transient store pool is on and has no free buffer (Java)."""
        pool = self.transient_store_pool
        return pool is not None and pool.available_buffer_nums() == 0

    def is_disk_full(self) -> bool:
        return self._disk_full

    def is_writeable(self) -> bool:
        return not (self._disk_full or self._write_error)

    # ================================================================== get

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to ``max_msg_nums`` stored records of a queue from ``offset`` (Java ``getMessage``).

        Returns a ``GetMessageResult`` with RocketMQ's status, the records as zero-copy views,
        ``next_begin_offset``, the queue's min/max offsets and ``suggest_pulling_from_slave``.
        Batches stop at ``max_transfer_count/bytes_on_message_in_memory`` (or ``_in_disk`` for
        records older than ``access_message_in_memory_max_ratio`` of RAM behind the head).
        """
        result = GetMessageResult()
        if self.state is StoreState.SHUTDOWN:
            result.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
            result.next_begin_offset = offset
            return result
        max_offset_py = self.commit_log.get_max_offset()
        cq = self._cq_table.get((topic, queue_id))
        next_begin = offset
        min_offset = max_offset = 0
        if cq is None:
            status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
            next_begin = self._next_offset_correction(offset, 0)
        else:
            min_offset = cq.get_min_offset_in_queue()
            max_offset = cq.get_max_offset_in_queue()
            if max_offset == 0:
                status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
                next_begin = self._next_offset_correction(offset, 0)
            elif offset < min_offset:
                status = GetMessageStatus.OFFSET_TOO_SMALL
                next_begin = self._next_offset_correction(offset, min_offset)
            elif offset == max_offset:
                status = GetMessageStatus.OFFSET_OVERFLOW_ONE
                next_begin = self._next_offset_correction(offset, offset)
            elif offset > max_offset:
                status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
                next_begin = self._next_offset_correction(
                    offset, min_offset if min_offset == 0 else max_offset
                )
            else:
                units = cq.get_index_buffer(offset)
                if units is None:
                    status = GetMessageStatus.OFFSET_FOUND_NULL
                    next_begin = self._next_offset_correction(offset, cq.roll_next_file(offset))
                    log.warning(
                        "consumer request topic=%s queue=%d offset=%d min=%d max=%d, but no index buffer",
                        topic,
                        queue_id,
                        offset,
                        min_offset,
                        max_offset,
                    )
                else:
                    status, next_begin = self._collect(
                        result, cq, units, offset, max_msg_nums, message_filter, max_offset_py
                    )
        result.status = status
        result.next_begin_offset = next_begin
        result.min_offset = min_offset
        result.max_offset = max_offset
        return result

    def _collect(
        self,
        result: GetMessageResult,
        cq: ConsumeQueue,
        units: memoryview,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
        max_offset_py: int,
    ) -> tuple[GetMessageStatus, int]:
        cfg = self.config
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        limit = min(len(units), max(_MAX_FILTER_BYTES, max_msg_nums * CQ_STORE_UNIT_SIZE))
        limit -= limit % CQ_STORE_UNIT_SIZE
        memory = self._memory
        mem_bytes = cfg.max_transfer_bytes_on_message_in_memory
        mem_count = cfg.max_transfer_count_on_message_in_memory
        disk_bytes = cfg.max_transfer_bytes_on_message_in_disk
        disk_count = cfg.max_transfer_count_on_message_in_disk
        mfq = self.commit_log.mapped_file_queue
        files = mfq.files
        file_size = mfq.file_size
        first_from = files[0].file_from_offset if files else 0
        nfiles = len(files)
        buffers = result.buffers
        qoffsets = result.queue_offsets
        total = 0
        count = 0
        max_phy_pulling = 0
        next_file_start = -1
        i = 0
        index = offset
        with units:
            for offset_py, size_py, tags_code in CQ_UNIT.iter_unpack(units[:limit]):
                i += CQ_STORE_UNIT_SIZE
                index_here = index
                index += 1
                if size_py == _BLANK_UNIT_SIZE or size_py <= 0:
                    continue
                max_phy_pulling = offset_py
                if offset_py < next_file_start:
                    continue
                if count:
                    in_disk = max_offset_py - offset_py > memory
                    if max_msg_nums <= count:
                        i -= CQ_STORE_UNIT_SIZE
                        break
                    if in_disk:
                        if total + size_py > disk_bytes or count > disk_count - 1:
                            i -= CQ_STORE_UNIT_SIZE
                            break
                    elif total + size_py > mem_bytes or count > mem_count - 1:
                        i -= CQ_STORE_UNIT_SIZE
                        break
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                    continue
                fi = (offset_py - first_from) // file_size
                mf = files[fi] if 0 <= fi < nfiles else None
                buf = None
                if mf is not None and mf.file_from_offset <= offset_py < mf.file_from_offset + file_size:
                    buf = mf.select(offset_py - mf.file_from_offset, size_py)
                if buf is None:
                    if not total:
                        status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    next_file_start = self.commit_log.roll_next_file(offset_py)
                    continue
                if int.from_bytes(buf[:4], "big") != size_py:
                    log.error(
                        "consume queue %s/%d unit %d points at commit-log offset %d whose TOTALSIZE "
                        "is not %d; not served",
                        cq.topic,
                        cq.queue_id,
                        index_here,
                        offset_py,
                        size_py,
                    )
                    buf.release()
                    continue
                if message_filter is not None and not message_filter.is_matched_by_commit_log(buf, None):
                    buf.release()
                    continue
                buffers.append(buf)
                qoffsets.append(index_here)
                total += size_py
                count += 1
                status = GetMessageStatus.FOUND
                next_file_start = -1
        result.buffer_total_size = total
        next_begin = offset + i // CQ_STORE_UNIT_SIZE
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory
        return status, next_begin

    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.broker_role is not BrokerRole.SLAVE or self.config.offset_check_in_slave:
            return new
        return old

    # ================================================================== offsets and lookups

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cq_table.get((topic, queue_id))
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cq_table.get((topic, queue_id))
        return cq.get_min_offset_in_queue() if cq is not None else -1

    def get_message_total_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._cq_table.get((topic, queue_id))
        if cq is None:
            return -1
        return cq.get_max_offset_in_queue() - cq.get_min_offset_in_queue()

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        """Physical offset of the message at ``consume_queue_offset``, 0 if none (Java)."""
        cq = self._cq_table.get((topic, queue_id))
        if cq is None:
            return 0
        unit = cq.get_unit(consume_queue_offset)
        return unit[0] if unit is not None else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self._cq_table.get((topic, queue_id))
        if cq is None:
            return -1
        unit = cq.get_unit(consume_queue_offset)
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the oldest message of a queue, or of the whole log; -1 if none."""
        if topic is None or queue_id is None:
            min_phy = self.commit_log.get_min_offset()
            if min_phy < 0:
                return -1
            buf = self.commit_log.get_data(min_phy)
            if buf is None:
                return -1
            with buf:
                size = len(buf)
            return self.commit_log.pickup_store_timestamp(min_phy, size)
        cq = self._cq_table.get((topic, queue_id))
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset of the message stored closest to ``timestamp`` (binary search, Java semantics):
        the first at exactly that time, else the nearer of its neighbours; min offset if all
        are later, the last message if all are earlier; 0 for an unknown or empty queue."""
        cq = self._cq_table.get((topic, queue_id))
        if cq is None:
            return 0
        lo = cq.get_min_offset_in_queue()
        hi = cq.get_max_offset_in_queue() - 1
        if hi < lo:
            return 0

        def ts_at(idx: int) -> int:
            unit = cq.get_unit(idx)
            if unit is None:
                return -1
            return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

        left = right = -1
        left_ts = right_ts = -1
        a, b = lo, hi
        while a <= b:
            mid = (a + b) // 2
            t = ts_at(mid)
            if t < 0:
                a = mid + 1
                continue
            if t >= timestamp:
                right, right_ts = mid, t
                b = mid - 1
            else:
                left, left_ts = mid, t
                a = mid + 1
        if right >= 0 and right_ts == timestamp:
            return right
        if left < 0:
            return right if right >= 0 else lo
        if right < 0:
            return left
        return right if timestamp - left_ts > right_ts - timestamp else left

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def select_one_message_by_offset(
        self, commit_log_offset: int, size: int | None = None
    ) -> memoryview | None:
        """The stored bytes of the record at ``commit_log_offset`` (offset msgId lookup), or None."""
        return self.commit_log.get_data(commit_log_offset, size)

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageExt | None:
        """The decoded message at ``commit_log_offset``, or None if there is none."""
        buf = self.commit_log.get_data(commit_log_offset, size)
        if buf is None:
            return None
        with buf:
            try:
                return decode_stored(buf)
            except MessageDecodeError as exc:
                log.warning("no message at commit-log offset %d: %s", commit_log_offset, exc)
                return None

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Messages of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key``, stored in
        [begin, end] ms, newest first, at most ``min(max_num, max_msgs_num_batch)``."""
        result = QueryMessageResult()
        index = self.index_service
        if index is None:
            return result
        q = index.query_offset(f"{topic}#{key}", max_num, begin, end)
        result.index_last_update_timestamp = q.index_last_update_timestamp
        result.index_last_update_phyoffset = q.index_last_update_phyoffset
        for phy in q.phy_offsets:
            buf = self.commit_log.get_data(phy)
            if buf is None:
                continue
            try:
                msg = decode_stored(buf)
            except MessageDecodeError:
                buf.release()
                continue
            keys = msg.properties.get(MessageConst.PROPERTY_KEYS, "")
            uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if msg.topic != topic or (uniq != key and key not in keys.split(KEY_SEPARATOR)):
                buf.release()
                continue
            result.buffers.append(buf)
        return result

    def dispatch_behind_bytes(self) -> int:
        """Bytes appended but not yet in the consume queues (a slave: also a record it has only part of)."""
        pending = self.reput.pending
        if not pending:
            slave_dispatched = self.replication.slave_dispatched
            if slave_dispatched >= 0:
                return max(self.commit_log.get_max_offset() - slave_dispatched, 0)
            return 0
        return max(
            self.commit_log.mapped_file_queue.get_max_wrote_position() - pending[0].commit_log_offset, 0
        )

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        cq = self._cq_table.get((topic, queue_id))
        if cq is None:
            return False
        unit = cq.get_unit(consume_offset)
        if unit is None:
            return False
        return self.commit_log.get_max_offset() - unit[0] > self._memory

    def flush(self) -> int:
        """Flush the commit log now; returns the flushed offset."""
        mfq = self.commit_log.mapped_file_queue
        mfq.flush_all()
        return mfq.flushed_where

    # ================================================================== disk space

    def _on_roll(self) -> None:
        self._check_disk()

    def disk_used_ratio(self, path: Path | None = None) -> float:
        """Used fraction of the partition holding ``path`` (the commit log by default); -1 if
        unreadable (Java ``UtilAll.getDiskPartitionSpaceUsedPercent``)."""
        try:
            return self._disk_usage(path or self.config.commit_log_dir)
        except OSError:
            return -1.0

    def remain_how_many_data_to_flush(self) -> int:
        """Bytes of the commit log written but not yet flushed."""
        return self.commit_log.mapped_file_queue.remain_how_many_data_to_flush()

    def _check_disk(self) -> float:
        """Update the disk-full flag from the used ratio; returns the ratio (Java isSpaceFull)."""
        cfg = self.config
        try:
            ratio = self._disk_usage(cfg.commit_log_dir)
        except OSError as exc:
            log.warning("cannot read disk usage of %s: %s", cfg.commit_log_dir, exc)
            return -1.0
        if ratio > cfg.disk_space_warning_level_ratio:
            if not self._disk_full:
                log.error("physic disk maybe full soon, so reclaim space, %.3f; puts are refused", ratio)
            self._disk_full = True
        elif ratio <= cfg.disk_space_clean_forcibly_ratio and self._disk_full:
            self._disk_full = False
            log.info("physic disk space OK %.3f, so mark disk ok", ratio)
        if ratio > cfg.disk_space_clean_forcibly_ratio and self._cleanup_service is not None:
            self._cleanup_service.wakeup()
        return ratio

    def clean_once(self, *, manual: bool = False) -> int:
        """One cleanup pass (the cleanup thread runs this every ``clean_resource_interval`` ms).

        Returns how many commit-log segments were deleted."""
        cfg = self.config
        ratio = self._check_disk()
        clean_immediately = ratio > cfg.disk_space_clean_forcibly_ratio
        space_to_delete = ratio > cfg.disk_max_used_space_fraction
        hour = time.localtime().tm_hour
        timeup = any(int(h) == hour for h in cfg.delete_when.split(";"))
        deleted = 0
        if timeup or space_to_delete or manual:
            deleted = self.commit_log.mapped_file_queue.delete_expired_file_by_time(
                cfg.file_reserved_time * 3_600_000,
                cfg.delete_commit_log_files_interval,
                clean_immediately and cfg.clean_file_forcibly_enable,
            )
            if deleted:
                log.info("deleted %d commit-log segments (disk used %.3f)", deleted, ratio)
                min_phy = self.commit_log.get_min_offset()
                for cq in self.consume_queues_snapshot():
                    cq.delete_expired_file(min_phy)
                if self.index_service is not None:
                    self.index_service.delete_expired_file(min_phy)
                self._check_disk()
        self.commit_log.mapped_file_queue.drop_inactive_pages()
        if self.index_service is not None:
            self.index_service.drop_pages()
        return deleted

    def get_max_wrote_position(self) -> int:
        return self.commit_log.mapped_file_queue.get_max_wrote_position()
