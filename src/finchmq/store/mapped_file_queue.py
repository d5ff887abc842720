"""The segments of one log (RocketMQ ``MappedFileQueue``) and segment pre-allocation.

Owns a directory of fixed-size ``MappedFile`` segments named by their start offset, the queue's
flushed/committed offsets, truncation and expiry. Imports: stdlib and ``.mapped_file``.

Strategy:
    ``files`` is replaced, never mutated (copy-on-write under ``_lock``), so readers index a
    snapshot without locking; ``find_mapped_file_by_offset`` is O(1) arithmetic on it, like
    Java. ``AllocateMappedFileService`` creates the next segment and the one after it in a
    daemon thread, so a roll-over on the put path normally finds its file ready.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from finchmq.common.logs import RateLimitedLog
from finchmq.common.metrics import Histogram

from .mapped_file import MappedFile, TransientStorePool, offset_to_file_name
from .status import StoreCorruptedError

__all__ = ["AllocateMappedFileService", "MappedFileQueue"]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # per-request failures (a full disk): a few lines, with counts

_WAIT_TIMEOUT = 5.0  # s; Java AllocateMappedFileService.waitTimeOut


class _AllocateRequest:
    __slots__ = ("done", "error", "file_size", "path", "result")

    def __init__(self, path: Path, file_size: int) -> None:
        self.path = path
        self.file_size = file_size
        self.done = threading.Event()
        self.result: MappedFile | None = None
        self.error: BaseException | None = None


class AllocateMappedFileService:
    """Pre-creates segments off the put path (RocketMQ ``AllocateMappedFileService``).

    With the transient store pool and ``fast_fail_if_no_buffer_in_store_pool``, a request
    that would need a pool buffer when none is free is refused (the caller gets None and
    answers CREATE_MAPEDFILE_FAILED), as Java does.
    """

    def __init__(self, pool: TransientStorePool | None = None, fast_fail: bool = False) -> None:
        self._pool = pool
        self._fast_fail = fast_fail
        self._cond = threading.Condition()
        self._table: dict[Path, _AllocateRequest] = {}
        self._queue: collections.deque[_AllocateRequest] = collections.deque()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="AllocateMappedFileService", daemon=True)
        self._thread.start()

    def put_request_and_return_mapped_file(
        self, next_path: Path, next_next_path: Path, file_size: int
    ) -> MappedFile | None:
        can_submit = 2
        if self._pool is not None and self._fast_fail:
            can_submit = self._pool.available_buffer_nums() - len(self._queue)
        with self._cond:
            if self._stopped:
                return None
            req = self._table.get(next_path)
            if req is None:
                if can_submit <= 0:
                    log.warning(
                        "TransientStorePool is not enough, so create mapped file %s failed "
                        "(queued=%d, free buffers=%d)",
                        next_path,
                        len(self._queue),
                        self._pool.available_buffer_nums() if self._pool else -1,
                    )
                    return None
                req = _AllocateRequest(next_path, file_size)
                self._table[next_path] = req
                self._queue.append(req)
                can_submit -= 1
            if next_next_path not in self._table and can_submit > 0:
                nn = _AllocateRequest(next_next_path, file_size)
                self._table[next_next_path] = nn
                self._queue.append(nn)
            self._cond.notify()
        if not req.done.wait(_WAIT_TIMEOUT):
            limited.warning(
                "create-mapped-file-timeout",
                "create mapped file %s timed out after %.0fs",
                next_path,
                _WAIT_TIMEOUT,
            )
            return None
        with self._cond:
            self._table.pop(next_path, None)
        if req.error is not None:
            limited.error("create-mapped-file", "create mapped file %s failed: %s", next_path, req.error)
            return None
        return req.result

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                req = self._queue.popleft()
            try:
                if req.path.exists():
                    mf = MappedFile(req.path, req.file_size, create=False, pool=self._pool)
                else:
                    mf = MappedFile(req.path, req.file_size, create=True, pool=self._pool)
                req.result = mf
            except OSError as exc:
                req.error = exc
            finally:
                req.done.set()
            with self._cond:
                if self._is_stopped() and req.result is not None and req.path not in self._table:
                    req.result.destroy()

    def _is_stopped(self) -> bool:
        return self._stopped

    def shutdown(self) -> None:
        """Stop the thread and delete segments created ahead but never handed out."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()
        with self._cond:
            for req in self._table.values():
                if req.result is not None and req.done.is_set():
                    req.result.destroy()
                req.done.set()
            self._table.clear()
            self._queue.clear()


class MappedFileQueue:
    """The ordered segments of a commit log, consume queue or similar log."""

    def __init__(
        self,
        store_path: Path,
        file_size: int,
        allocate_service: AllocateMappedFileService | None = None,
        pool: TransientStorePool | None = None,
    ) -> None:
        self.store_path = store_path
        self.file_size = file_size
        self.allocate_service = allocate_service
        self.pool = pool
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        self._lock = threading.Lock()
        self.flush_latency: Histogram | None = None  # seconds per flush that wrote something (metrics)

    # ------------------------------------------------------------------ loading

    def load(self) -> list[StoreCorruptedError]:
        """Map every segment in the directory, positions at file end (recovery fixes them).

        A short last segment is re-extended (its missing tail reads as zeros) and reported;
        a short segment before the last raises ``StoreCorruptedError``: data in the middle of
        the log is gone and only an operator can decide what to do.
        """
        problems: list[StoreCorruptedError] = []
        if not self.store_path.is_dir():
            return problems
        names = sorted(p for p in self.store_path.iterdir() if p.is_file() and p.name.isdigit())
        files: list[MappedFile] = []
        try:
            for i, path in enumerate(names):
                size = path.stat().st_size
                if size != self.file_size:
                    if i < len(names) - 1 or size > self.file_size:
                        raise StoreCorruptedError(
                            str(path), size, f"segment is {size} bytes, expected {self.file_size}"
                        )
                    problems.append(
                        StoreCorruptedError(
                            str(path),
                            size,
                            f"last segment is {size} bytes, expected {self.file_size}; "
                            "the missing tail reads as zeros",
                        )
                    )
                mf = MappedFile(path, self.file_size, create=False)
                mf.set_positions(self.file_size)
                files.append(mf)
        except BaseException:
            for mf in files:
                mf.close()
            raise
        self.files = files
        return problems

    # ------------------------------------------------------------------ lookup

    def get_last_mapped_file(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def get_last_mapped_file_create(self, start_offset: int = 0) -> MappedFile | None:
        """The last segment if it has room, else a new one (None if it cannot be created)."""
        files = self.files
        last = files[-1] if files else None
        if last is not None and not last.is_full():
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_from_offset + self.file_size
        path = self.store_path / offset_to_file_name(create_offset)
        mf: MappedFile | None
        if self.allocate_service is not None:
            next_next = self.store_path / offset_to_file_name(create_offset + self.file_size)
            mf = self.allocate_service.put_request_and_return_mapped_file(path, next_next, self.file_size)
        else:
            try:
                self.store_path.mkdir(parents=True, exist_ok=True)
                mf = MappedFile(path, self.file_size, create=not path.exists(), pool=self.pool)
            except OSError as exc:
                limited.error("create-mapped-file", "create mapped file %s failed: %s", path, exc)
                mf = None
        if mf is None:
            return None
        with self._lock:
            if not self.files:
                mf.first_create_in_queue = True
            self.files = [*self.files, mf]
        return mf

    def find_mapped_file_by_offset(
        self, offset: int, return_first_on_not_found: bool = False
    ) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0]
        index = (offset - first.file_from_offset) // self.file_size
        if 0 <= index < len(files):
            mf = files[index]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        for mf in files:  # holes after manual deletion: fall back to a scan
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return first if return_first_on_not_found else None

    def get_min_offset(self) -> int:
        files = self.files
        return files[0].file_from_offset if files else -1

    def get_max_offset(self) -> int:
        """End of the readable data (committed position with a pool buffer)."""
        files = self.files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.get_read_position()

    def get_max_wrote_position(self) -> int:
        files = self.files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_offset() - self.flushed_where

    # ------------------------------------------------------------------ commit and flush

    def commit(self, least_pages: int) -> bool:
        """Commit the segment holding ``committed_where``; True if nothing moved (Java)."""
        mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True
        offset = mf.commit(least_pages)
        where = mf.file_from_offset + offset
        result = where == self.committed_where
        self.committed_where = where
        return result

    def flush(self, least_pages: int) -> bool:
        """Flush the segment holding ``flushed_where``; True if nothing moved (Java)."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        ts = mf.store_timestamp
        latency = self.flush_latency
        if latency is None:
            offset = mf.flush(least_pages)
        else:
            began = time.perf_counter()
            offset = mf.flush(least_pages)
            if mf.file_from_offset + offset != self.flushed_where:
                latency.observe(time.perf_counter() - began)
        where = mf.file_from_offset + offset
        result = where == self.flushed_where
        self.flushed_where = where
        if not result and ts:
            self.store_timestamp = ts
        return result

    def flush_all(self) -> None:
        """Flush until every readable byte is on disk (shutdown, group commit)."""
        for _ in range(len(self.files) + 1):
            self.flush(0)
            if self.flushed_where >= self.get_max_offset():
                break

    # ------------------------------------------------------------------ truncation and expiry

    def truncate_dirty_files(self, offset: int) -> None:
        """Forget everything at and after ``offset``: later segments are deleted (Java)."""
        with self._lock:
            keep: list[MappedFile] = []
            for mf in self.files:
                tail = mf.file_from_offset + self.file_size
                if tail > offset:
                    if offset >= mf.file_from_offset:
                        pos = offset % self.file_size
                        mf.set_positions(pos)
                        mf.zero_tail(pos)
                        keep.append(mf)
                    else:
                        log.info("truncate dirty file %s (after offset %d)", mf.path, offset)
                        mf.destroy()
                else:
                    keep.append(mf)
            self.files = keep
        self.flushed_where = min(self.flushed_where, offset)
        self.committed_where = min(self.committed_where, offset)

    def delete_last_mapped_file(self) -> None:
        with self._lock:
            if self.files:
                last = self.files[-1]
                self.files = self.files[:-1]
                last.destroy()

    def delete_expired_file_by_time(
        self, expired_ms: int, delete_interval_ms: int, clean_immediately: bool, max_files: int = 10
    ) -> int:
        """Delete the oldest segments not written for ``expired_ms`` (all but the last).

        With ``clean_immediately`` age does not matter (disk nearly full). At most
        ``max_files`` per call (Java DELETE_FILES_BATCH_MAX). Returns how many were deleted.
        """
        files = self.files
        now = time.time() * 1000
        deleted: list[MappedFile] = []
        for mf in files[:-1]:
            try:
                mtime = mf.path.stat().st_mtime * 1000
            except FileNotFoundError:
                mtime = 0
            if not (now >= mtime + expired_ms or clean_immediately):
                break
            deleted.append(mf)
            if len(deleted) >= max_files:
                break
        return self._delete_head(deleted, delete_interval_ms)

    def delete_expired_file_by_offset(self, offset: int, unit_size: int) -> int:
        """Consume queue expiry: delete segments whose last unit points below ``offset``."""
        files = self.files
        deleted: list[MappedFile] = []
        for mf in files[:-1]:
            last = mf.select(self.file_size - unit_size, unit_size)
            if last is None:
                break
            with last:
                max_phy = int.from_bytes(last[:8], "big", signed=True)
            if max_phy >= offset:
                break
            deleted.append(mf)
        return self._delete_head(deleted, 0)

    def delete_head(self, deleted: list[MappedFile], delete_interval_ms: int = 0) -> int:
        """Forget and delete ``deleted``, the first segments (a log whose own format says which
        have expired, e.g. the timer log); returns how many."""
        return self._delete_head(deleted, delete_interval_ms)

    def _delete_head(self, deleted: list[MappedFile], delete_interval_ms: int) -> int:
        if not deleted:
            return 0
        with self._lock:
            ids = {id(mf) for mf in deleted}
            self.files = [mf for mf in self.files if id(mf) not in ids]
        for i, mf in enumerate(deleted):
            log.info("delete expired file %s", mf.path)
            if not mf.destroy():
                log.info("file %s is still referenced by a reader; unmapped when it is released", mf.path)
            if delete_interval_ms and i < len(deleted) - 1:
                time.sleep(delete_interval_ms / 1000)
        return len(deleted)

    def drop_inactive_pages(self) -> None:
        """Unmap the pages of every segment but the last from this process (flat RSS)."""
        for mf in self.files[:-1]:
            mf.drop_all_pages()

    # ------------------------------------------------------------------ lifecycle

    def shutdown(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for mf in files:
            mf.close()

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for mf in files:
            mf.destroy()
        with contextlib.suppress(OSError):
            os.rmdir(self.store_path)
