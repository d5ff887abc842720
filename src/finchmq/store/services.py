"""Background services of the store: flush, group commit, commit, consume-queue flush, cleanup.

Owns the store's daemon threads (RocketMQ ``FlushRealTimeService``, ``GroupCommitService``,
``CommitRealTimeService``, ``FlushConsumeQueueService``, ``CleanCommitLogService`` +
``CleanConsumeQueueService``). Imports: the store's own modules.

Strategy:
    Each service is a daemon thread with ``start()``/``shutdown()``; ``shutdown`` wakes it, lets
    it do its final work (a last full flush) and joins it. Disk waits use ``os.fdatasync``,
    which releases the GIL, so writers keep appending while a flush is in progress.
    Group commit hands each SYNC_FLUSH put a ``concurrent.futures.Future`` completed from the
    flush thread (PUT_OK, or FLUSH_DISK_TIMEOUT once ``sync_flush_timeout`` has passed), so a
    caller can block on it or attach a callback (``asyncio.wrap_future`` in the broker).
    Resident memory: after each flush, pages more than ``RSS_WINDOW`` bytes behind the flushed
    position are dropped from the process (MADV_DONTNEED; the page cache keeps them), and the
    cleanup pass drops the pages of every inactive segment.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Final, Protocol

from .status import AppendMessageResult, PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from .checkpoint import StoreCheckpoint
    from .commit_log import CommitLog
    from .config import MessageStoreConfig
    from .consume_queue import ConsumeQueue
    from .dispatch import ReputMessageService
    from .index import IndexService


class ServicedStore(Protocol):
    """What the store's services use of it (``DefaultMessageStore`` provides it); they never
    import the store itself, so the store package has no import circle."""

    @property
    def config(self) -> MessageStoreConfig: ...
    @property
    def commit_log(self) -> CommitLog: ...
    @property
    def checkpoint(self) -> StoreCheckpoint: ...
    @property
    def index_service(self) -> IndexService | None: ...
    @property
    def reput(self) -> ReputMessageService: ...
    def consume_queues_snapshot(self) -> list[ConsumeQueue]: ...
    def dispatch_pending(self) -> None: ...
    def clean_once(self, *, manual: bool = False) -> int: ...


__all__ = [
    "RSS_WINDOW",
    "CleanupService",
    "CommitRealTimeService",
    "FlushConsumeQueueService",
    "FlushManager",
    "FlushRealTimeService",
    "GroupCommitService",
    "ServiceThread",
    "ServicedStore",
]

log = logging.getLogger(__name__)

RSS_WINDOW: Final = 16 * 1024 * 1024  # bytes behind the flushed position kept mapped


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ServiceThread:
    """A named daemon thread that runs ``run_once`` every ``interval`` s until shut down."""

    name = "ServiceThread"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._wakeup = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wakeup.set()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _loop(self) -> None:
        while not self._stopped:
            self._wakeup.wait(self.interval)
            self._wakeup.clear()
            if self.stopped:
                break
            try:
                self.run_once()
            except Exception:
                log.exception("%s failed", self.name)
        try:
            self.on_shutdown()
        except Exception:
            log.exception("%s shutdown work failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError

    def on_shutdown(self) -> None:
        """Final work after the loop ends (still on the service thread)."""

    def shutdown(self) -> None:
        self._stopped = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _drop_behind(store: ServicedStore) -> None:
    mfq = store.commit_log.mapped_file_queue
    mf = mfq.find_mapped_file_by_offset(mfq.flushed_where)
    if mf is not None:
        mf.drop_pages(mf.flushed_position - RSS_WINDOW)


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: every ``flush_interval_commit_log`` ms flush if ``flush_commit_log_least_pages``
    are dirty, and everything every ``flush_commit_log_thorough_interval`` ms."""

    name = "FlushRealTimeService"

    def __init__(self, store: ServicedStore) -> None:
        super().__init__(store.config.flush_interval_commit_log / 1000)
        self.store = store
        self._last_thorough = _now_ms()

    def run_once(self) -> None:
        cfg = self.store.config
        least = cfg.flush_commit_log_least_pages
        now = _now_ms()
        if now >= self._last_thorough + cfg.flush_commit_log_thorough_interval:
            self._last_thorough = now
            least = 0
        mfq = self.store.commit_log.mapped_file_queue
        for _ in range(len(mfq.files) + 1):
            if mfq.flush(least):
                break
        if mfq.store_timestamp:
            self.store.checkpoint.physic_msg_timestamp = mfq.store_timestamp
        _drop_behind(self.store)

    def on_shutdown(self) -> None:
        mfq = self.store.commit_log.mapped_file_queue
        for _ in range(10):
            mfq.flush_all()
            if mfq.flushed_where >= mfq.get_max_offset():
                break
        if mfq.store_timestamp:
            self.store.checkpoint.physic_msg_timestamp = mfq.store_timestamp


class PutWaitRequest:
    """A put waiting until the log reaches ``next_offset`` (flushed, or acknowledged by a slave)."""

    __slots__ = ("deadline", "future", "next_offset", "result")

    def __init__(
        self, next_offset: int, deadline: float, future: Future[PutMessageResult], result: AppendMessageResult
    ) -> None:
        self.next_offset = next_offset
        self.deadline = deadline
        self.future = future
        self.result = result


class GroupCommitService:
    """SYNC_FLUSH group commit: one fdatasync completes every put waiting below the flushed offset."""

    name = "GroupCommitService"

    def __init__(self, store: ServicedStore) -> None:
        self.store = store
        self._cond = threading.Condition()
        self._requests: list[PutWaitRequest] = []
        self._stopped = False
        self._timeout = store.config.sync_flush_timeout / 1000
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def put_request(self, next_offset: int, result: AppendMessageResult) -> Future[PutMessageResult]:
        """A future completed once the log is flushed up to ``next_offset`` (or times out)."""
        fut: Future[PutMessageResult] = Future()
        req = PutWaitRequest(next_offset, time.monotonic() + self._timeout, fut, result)
        with self._cond:
            if self._stopped:
                fut.set_result(PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, result))
                return fut
            self._requests.append(req)
            self._cond.notify()
        return fut

    def wakeup(self) -> None:
        with self._cond:
            self._cond.notify()

    def _loop(self) -> None:
        mfq = self.store.commit_log.mapped_file_queue
        while True:
            with self._cond:
                if not self._requests and not self._stopped:
                    self._cond.wait(0.01)
                batch, self._requests = self._requests, []
                stopped = self._stopped
            try:
                if batch:
                    need = max(r.next_offset for r in batch)
                    for _ in range(len(mfq.files) + 2):
                        if mfq.flushed_where >= need:
                            break
                        mfq.flush(0)
                elif mfq.flushed_where < mfq.get_max_offset():
                    mfq.flush(0)  # puts that did not ask to wait are flushed too (Java)
                failed = False
            except OSError as exc:
                log.error("group commit flush failed: %s", exc)
                failed = True
            if mfq.store_timestamp:
                self.store.checkpoint.physic_msg_timestamp = mfq.store_timestamp
            flushed = mfq.flushed_where
            now = time.monotonic()
            keep: list[PutWaitRequest] = []
            for r in batch:
                if flushed >= r.next_offset and now <= r.deadline:
                    r.future.set_result(PutMessageResult(PutMessageStatus.PUT_OK, r.result))
                elif failed or now > r.deadline or stopped:
                    log.warning("sync flush of offset %d timed out (flushed %d)", r.next_offset, flushed)
                    r.future.set_result(PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r.result))
                else:
                    keep.append(r)
            if keep:
                with self._cond:
                    self._requests[:0] = keep
                time.sleep(0.001)
            _drop_behind(self.store)
            if stopped and not keep:
                with self._cond:
                    if not self._requests:
                        break
        mfq.flush_all()

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class CommitRealTimeService(ServiceThread):
    """Transient store pool: copy pooled bytes to the files every ``commit_interval_commit_log`` ms,
    then dispatch what became readable and wake the flush service."""

    name = "CommitRealTimeService"

    def __init__(self, store: ServicedStore, flush_wakeup: Callable[[], None]) -> None:
        super().__init__(store.config.commit_interval_commit_log / 1000)
        self.store = store
        self._flush_wakeup = flush_wakeup
        self._last_thorough = _now_ms()

    def run_once(self) -> None:
        cfg = self.store.config
        least = cfg.commit_commit_log_least_pages
        now = _now_ms()
        if now >= self._last_thorough + cfg.commit_commit_log_thorough_interval:
            self._last_thorough = now
            least = 0
        self._commit(least)

    def _commit(self, least: int) -> None:
        mfq = self.store.commit_log.mapped_file_queue
        moved = False
        for _ in range(len(mfq.files) + 1):
            if mfq.commit(least):
                break
            moved = True
        self.store.dispatch_pending()
        if moved:
            self._flush_wakeup()

    def on_shutdown(self) -> None:
        for _ in range(10):
            self._commit(0)
            mfq = self.store.commit_log.mapped_file_queue
            if mfq.committed_where >= mfq.get_max_wrote_position():
                break


class FlushManager:
    """The commit log's flush policy, chosen once at start-up (Java 5's ``FlushManager``):
    SYNC_FLUSH group commit or ASYNC_FLUSH real-time flush, plus the commit service that copies
    the transient store pool to the files when the pool is on. The store only starts it, hands
    it every successful append (``handle_disk_flush``) and shuts it down."""

    def __init__(self, store: ServicedStore, *, sync_flush: bool, transient_pool: bool) -> None:
        self.group_commit = GroupCommitService(store) if sync_flush else None
        self.flush_service = None if sync_flush else FlushRealTimeService(store)
        wake = self.flush_service.wakeup if self.flush_service is not None else (lambda: None)
        self.commit_service = CommitRealTimeService(store, wake) if transient_pool else None

    def start(self) -> None:
        for service in (self.group_commit, self.flush_service, self.commit_service):
            if service is not None:
                service.start()

    def handle_disk_flush(
        self, result: PutMessageResult, wait_store_msg_ok: bool
    ) -> Future[PutMessageResult] | None:
        """After an append: None when ``result`` is final; under SYNC_FLUSH with WAIT, the future
        the group commit completes once the log is flushed past it (Java ``handleDiskFlush``)."""
        gc = self.group_commit
        append = result.append_message_result
        if gc is None or append is None:
            return None
        if wait_store_msg_ok:
            return gc.put_request(append.wrote_offset + append.wrote_bytes, append)
        gc.wakeup()
        return None

    def shutdown(self) -> None:
        """Stop committing, then flushing (pending group-commit requests time out)."""
        for service in (self.commit_service, self.flush_service, self.group_commit):
            if service is not None:
                service.shutdown()


class FlushConsumeQueueService(ServiceThread):
    """Flush consume queues and the index every ``flush_interval_consume_queue`` ms; update the checkpoint."""

    name = "FlushConsumeQueueService"

    def __init__(self, store: ServicedStore) -> None:
        super().__init__(store.config.flush_interval_consume_queue / 1000)
        self.store = store
        self._last_thorough = _now_ms()

    def run_once(self) -> None:
        cfg = self.store.config
        least = cfg.flush_consume_queue_least_pages
        now = _now_ms()
        if now >= self._last_thorough + cfg.flush_consume_queue_thorough_interval:
            self._last_thorough = now
            least = 0
        self.flush(least)

    def flush(self, least: int) -> None:
        store = self.store
        logics_ts = store.reput.last_store_timestamp
        for cq in store.consume_queues_snapshot():
            cq.flush(least)
            cq.drop_pages()
        cp = store.checkpoint
        if store.index_service is not None:
            ts = store.index_service.flush()
            if ts:
                cp.index_msg_timestamp = ts
        if logics_ts:
            cp.logics_msg_timestamp = logics_ts
        with contextlib.suppress(OSError):
            cp.flush()

    def on_shutdown(self) -> None:
        self.flush(0)


def default_disk_usage(path: os.PathLike[str] | str) -> float:
    """Used fraction of the filesystem holding ``path`` (Java ``getDiskPartitionSpaceUsedPercent``)."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    free = st.f_bfree * st.f_frsize
    return (total - free) / total


class CleanupService(ServiceThread):
    """Disk watch and expiry, every ``clean_resource_interval`` ms (Java Clean*Service).

    Above ``disk_space_warning_level_ratio`` the store is marked disk-full (puts are refused
    with SERVICE_NOT_AVAILABLE) and files are deleted at once; above
    ``disk_space_clean_forcibly_ratio`` files are deleted at once; below it the flag clears.
    Segments older than ``file_reserved_time`` go at ``delete_when`` o'clock, or whenever use
    exceeds ``disk_max_used_space_ratio``. Consume queues and index follow the commit log.
    """

    name = "CleanupService"

    def __init__(self, store: ServicedStore) -> None:
        super().__init__(store.config.clean_resource_interval / 1000)
        self.store = store
        self.manual_delete = 0

    def run_once(self) -> None:
        self.store.clean_once()
