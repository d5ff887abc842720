"""What the store knows of replication, master and slave sides (RocketMQ ``HAService``'s store part).

The network side (the HA port, the slave's client) lives in the broker; it reads and appends
commit-log bytes through this module and tells it how many slaves are connected and what they
acknowledged. As Java's ``HAService`` does:

* ``get_commit_log_data(offset)``: the master's bytes to send from ``offset`` (Java
  ``getCommitLogData``);
* ``append_to_commit_log(offset, data)``: the slave appends them and dispatches the records they
  complete (Java ``appendToCommitLog`` and the slave's reput);
* ``is_slave_ok(offset)``: a slave is connected and the acknowledged offset is less than
  ``ha_slave_fallbehind_max`` behind ``offset``;
* ``GroupTransferService``: a SYNC_MASTER put waits until a slave acknowledged its end offset, or
  ``slave_timeout`` passes (then FLUSH_SLAVE_TIMEOUT).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from .services import PutWaitRequest
from .status import AppendMessageResult, PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from .commit_log import CommitLog

__all__ = ["ReplicationState"]

log = logging.getLogger(__name__)


class ReplicationState:
    """The commit log's bytes to and from the other side, slave acknowledgements and the puts
    waiting for them (Java ``HAService`` + ``GroupTransferService``).

    Thread-safe: the broker's HA connections report from the event loop, puts wait from the put
    path, and one thread completes the waits at their deadlines. ``on_no_segment`` is called when
    a slave append finds no segment to write to (the store then checks the disk).
    """

    def __init__(
        self,
        commit_log: CommitLog,
        fallbehind_max: int,
        slave_timeout_ms: int,
        on_no_segment: Callable[[], object],
    ) -> None:
        self._commit_log = commit_log
        self._on_no_segment = on_no_segment
        self.slave_dispatched = -1  # slave: commit-log offset up to which replicated records are dispatched
        self._fallbehind_max = fallbehind_max
        self._timeout = slave_timeout_ms / 1000
        self._cond = threading.Condition()
        self._requests: list[PutWaitRequest] = []
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.connection_count = 0
        self.push_to_slave_max_offset = 0  # the highest offset any slave acknowledged
        self.on_data: Callable[[], None] | None = None  # the broker's HA sender: new data to send

    # ------------------------------------------------------------------ the commit log's bytes

    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None:
        """Master: up to ``max_size`` readable commit-log bytes from ``offset``, never past the end of
        its segment (Java ``getCommitLogData``); None when nothing is readable there yet."""
        mfq = self._commit_log.mapped_file_queue
        mf = mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        view = mf.select_from(offset - mf.file_from_offset)
        if view is None:
            return None
        with view:
            return bytes(view[:max_size])

    def append_to_commit_log(self, start_offset: int, data: bytes) -> bool:
        """Slave: append replicated commit-log bytes at ``start_offset`` and dispatch the whole
        records they complete to consume queues and the index (Java ``appendToCommitLog`` and the
        slave's reput). False, appending nothing, when ``start_offset`` is not the end of the log
        (or a segment boundary of an empty log), the bytes do not fit their segment, or no segment
        can be created; the replication stream must then restart from the slave's offset."""
        cl = self._commit_log
        mfq = cl.mapped_file_queue
        with cl.put_lock:
            if mfq.files:
                if start_offset != mfq.get_max_offset():
                    return False
            elif start_offset % cl.file_size:
                return False
            mf = mfq.get_last_mapped_file_create(start_offset)
            if mf is None:
                self._on_no_segment()
                return False
            if mf.file_from_offset + mf.wrote_position != start_offset or not mf.append(data, commit=True):
                return False
            end = start_offset + len(data)
        reput = cl.reput
        with reput.lock:
            begin = self.slave_dispatched if self.slave_dispatched >= 0 else start_offset
            _, self.slave_dispatched = reput.dispatch_range(mfq, begin, end)
        mf.store_timestamp = reput.last_store_timestamp or mf.store_timestamp
        return True

    # ------------------------------------------------------------------ acknowledgements, from the broker

    def slave_connected(self) -> None:
        with self._cond:
            self.connection_count += 1

    def slave_disconnected(self) -> None:
        with self._cond:
            self.connection_count = max(0, self.connection_count - 1)
            self._cond.notify()

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged the log up to ``offset`` (Java ``notifyTransferSome``)."""
        with self._cond:
            if offset <= self.push_to_slave_max_offset:
                return
            self.push_to_slave_max_offset = offset
            self._cond.notify()

    # ------------------------------------------------------------------ the put path

    def is_slave_ok(self, master_put_where: int) -> bool:
        return (
            self.connection_count > 0
            and master_put_where - self.push_to_slave_max_offset < self._fallbehind_max
        )

    def wait_for_slave(self, result: AppendMessageResult) -> PutMessageResult | Future[PutMessageResult]:
        """SYNC_MASTER: SLAVE_NOT_AVAILABLE at once when no slave is in sync, else a future that
        completes PUT_OK once a slave acknowledged the put, or FLUSH_SLAVE_TIMEOUT."""
        next_offset = result.wrote_offset + result.wrote_bytes
        if not self.is_slave_ok(next_offset):
            return PutMessageResult(PutMessageStatus.SLAVE_NOT_AVAILABLE, result)
        fut: Future[PutMessageResult] = Future()
        with self._cond:
            if self.push_to_slave_max_offset >= next_offset:
                fut.set_result(PutMessageResult(PutMessageStatus.PUT_OK, result))
                return fut
            if self._stopped:
                fut.set_result(PutMessageResult(PutMessageStatus.FLUSH_SLAVE_TIMEOUT, result))
                return fut
            self._requests.append(PutWaitRequest(next_offset, time.monotonic() + self._timeout, fut, result))
            self._cond.notify()
        return fut

    # ------------------------------------------------------------------ the waiting thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="GroupTransferService", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._stopped:
                    wait = min((r.deadline for r in self._requests), default=time.monotonic() + 1.0)
                    self._cond.wait(max(0.0, min(wait - time.monotonic(), 1.0)))
                acked = self.push_to_slave_max_offset
                now = time.monotonic()
                done: list[tuple[PutWaitRequest, PutMessageStatus]] = []
                keep: list[PutWaitRequest] = []
                for r in self._requests:
                    if acked >= r.next_offset:
                        done.append((r, PutMessageStatus.PUT_OK))
                    elif now >= r.deadline or self._stopped:
                        done.append((r, PutMessageStatus.FLUSH_SLAVE_TIMEOUT))
                    else:
                        keep.append(r)
                self._requests = keep
                stopped = self._stopped
            for r, status in done:
                if status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT:
                    log.warning("no slave acknowledged offset %d in time (acked %d)", r.next_offset, acked)
                r.future.set_result(PutMessageResult(status, r.result))
            if stopped:
                return

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
