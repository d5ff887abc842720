"""One fixed-size segment file mapped in memory (RocketMQ ``MappedFile``) and the transient store pool.

Owns a segment's file descriptor, its ``mmap`` and its wrote/committed/flushed positions.
Imports: stdlib only.

Strategy:
    Files are created at full size with ``posix_fallocate`` (so a store on a full disk fails
    to create a segment instead of dying with SIGBUS on a write into a hole) and mapped shared.
    Writers copy into ``view`` (a memoryview of the mmap, or of a pooled buffer when the
    transient store pool lends one); readers get slices of ``view`` up to the read position.
    Positions are plain ints: the put lock serialises writers, and readers only ever see a
    position after the bytes below it were written (the GIL orders the stores).
    Flushing uses ``os.fdatasync`` (it releases the GIL; ``mmap.flush`` does not), committing
    uses ``os.pwrite`` from the pooled buffer. ``drop_pages`` (MADV_DONTNEED on a shared file
    mapping) only unmaps pages from this process, so resident memory stays flat while the data
    stays in the page cache. A segment whose views are still exported cannot be unmapped; it is
    unlinked at once and unmapped when the last view is released (see ``MappedFile.destroy``).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

__all__ = ["OS_PAGE_SIZE", "MappedFile", "TransientStorePool", "map_file", "offset_to_file_name"]

log = logging.getLogger(__name__)

OS_PAGE_SIZE: Final = 4096  # RocketMQ MappedFile.OS_PAGE_SIZE


def offset_to_file_name(offset: int) -> str:
    """RocketMQ ``UtilAll.offset2FileName``: the start offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def map_file(path: Path, size: int, *, create: bool, grow: bool) -> tuple[int, mmap.mmap]:
    """Open ``path`` read-write and map ``size`` bytes of it; returns the descriptor and the map.

    ``create`` makes a new file (it must not exist) with all its blocks allocated, so a full disk
    fails here (``OSError`` ENOSPC) and not at a later write through the map. An existing file
    shorter than ``size`` is extended when ``grow``, else refused. On any failure nothing is left
    open and a file being created is removed.
    """
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o644)
    try:
        if create:
            os.posix_fallocate(fd, 0, size)
        else:
            actual = os.fstat(fd).st_size
            if actual < size and grow:
                os.ftruncate(fd, size)
            elif actual != size and not grow:
                raise OSError(f"{path} is {actual} bytes, expected {size}")
        return fd, mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        os.close(fd)
        if create:
            with contextlib.suppress(OSError):
                path.unlink()
        raise


class TransientStorePool:
    """Off-file write buffers, one per active commit-log segment (RocketMQ ``TransientStorePool``).

    Buffers are anonymous mappings created lazily (at most ``pool_size``); a returned buffer
    has its pages dropped, so an idle pool holds no resident memory.
    """

    def __init__(self, pool_size: int, file_size: int) -> None:
        self.pool_size = pool_size
        self.file_size = file_size
        self._lock = threading.Lock()
        self._free: collections.deque[mmap.mmap] = collections.deque()
        self._created = 0
        self._all: list[mmap.mmap] = []

    def available_buffer_nums(self) -> int:
        with self._lock:
            return len(self._free) + self.pool_size - self._created

    def borrow_buffer(self) -> mmap.mmap | None:
        with self._lock:
            if self._free:
                return self._free.popleft()
            if self._created < self.pool_size:
                self._created += 1
                buf = mmap.mmap(-1, self.file_size)
                self._all.append(buf)
                return buf
            return None

    def return_buffer(self, buf: mmap.mmap) -> None:
        with contextlib.suppress(OSError, ValueError):
            buf.madvise(mmap.MADV_DONTNEED)
        with self._lock:
            self._free.append(buf)

    def destroy(self) -> None:
        with self._lock:
            for buf in self._all:
                with contextlib.suppress(BufferError):
                    buf.close()
            self._all.clear()
            self._free.clear()


class MappedFile:
    """One segment: ``file_size`` bytes at ``file_from_offset`` of its queue's offset space."""

    __slots__ = (
        "__weakref__",
        "_dropped_upto",
        "_fd",
        "_lock",
        "_mm",
        "_pool",
        "_pool_buf",
        "committed_position",
        "file_from_offset",
        "file_size",
        "first_create_in_queue",
        "flushed_position",
        "path",
        "store_timestamp",
        "view",
        "write_view",
        "wrote_position",
    )

    def __init__(self, path: Path, file_size: int, *, create: bool, pool: TransientStorePool | None = None):
        """Open (``create=False``) or create a segment named by its start offset.

        Raises ``OSError`` (e.g. ENOSPC) when the file cannot be created at full size; nothing
        is left behind in that case.
        """
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self._dropped_upto = 0
        self._lock = threading.Lock()
        fd, mm = map_file(path, file_size, create=create, grow=True)
        self._fd = fd
        self._mm: mmap.mmap | None = mm
        self.view = memoryview(mm)
        self._pool = pool
        self._pool_buf: mmap.mmap | None = pool.borrow_buffer() if pool is not None else None
        self.write_view = memoryview(self._pool_buf) if self._pool_buf is not None else self.view

    # ------------------------------------------------------------------ positions

    @property
    def mm(self) -> mmap.mmap:
        """The mapping ``view`` is over: indexing, slicing and ``find`` are cheaper on it (the
        recovery scans use it); the file must be open."""
        mm = self._mm
        if mm is None:
            raise ValueError(f"{self.path} is closed")
        return mm

    @property
    def uses_pool_buffer(self) -> bool:
        return self._pool_buf is not None

    def get_read_position(self) -> int:
        """What readers may see: committed with a pool buffer, else wrote (Java ``getReadPosition``)."""
        return self.committed_position if self._pool_buf is not None else self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def set_positions(self, pos: int) -> None:
        """Set wrote/committed/flushed to ``pos`` (recovery, truncation)."""
        self.wrote_position = self.committed_position = self.flushed_position = pos

    @property
    def fd(self) -> int:
        return self._fd

    # ------------------------------------------------------------------ reads

    def select(self, pos: int, size: int) -> memoryview | None:
        """A view of ``size`` bytes at ``pos`` if all of them are readable, else None."""
        if pos + size <= self.get_read_position() and pos >= 0:
            try:
                return self.view[pos : pos + size]
            except ValueError:  # released: the segment was deleted under us
                return None
        return None

    def select_from(self, pos: int) -> memoryview | None:
        """A view from ``pos`` to the read position, or None if nothing is readable there."""
        end = self.get_read_position()
        if 0 <= pos < end:
            try:
                return self.view[pos:end]
            except ValueError:
                return None
        return None

    # ------------------------------------------------------------------ writes

    def append_record(
        self, record: memoryview, store_timestamp: int, patch: Callable[[memoryview, int], None] | None = None
    ) -> int:
        """Append one commit-log record (or a batch of them) at the wrote position and return
        that position (Java ``appendMessage``; the caller, holding the put lock, checked it fits).
        Everything but the first 8 bytes (TOTALSIZE MAGICCODE) is written first, then
        ``patch(write_view, pos)`` may fill fields in place, then the head: a reader that sees the
        head sees the whole record."""
        pos = self.wrote_position
        end = pos + len(record)
        wv = self.write_view
        wv[pos + 8 : end] = record[8:]
        if patch is not None:
            patch(wv, pos)
        wv[pos : pos + 8] = record[:8]
        self.wrote_position = end
        self.store_timestamp = store_timestamp
        return pos

    def appended(self, end: int, store_timestamp: int) -> None:
        """The caller (the commit log, holding the put lock) wrote one record from the wrote
        position to ``end`` into ``write_view`` itself, its head last: move past it."""
        self.wrote_position = end
        self.store_timestamp = store_timestamp

    def fill_to_end(self, write_blank: Callable[[memoryview, int, int], object]) -> None:
        """Close the file for appends: ``write_blank(view, pos, free)`` marks the rest unused (the
        commit log's BLANK record) and the wrote position moves to the end."""
        write_blank(self.write_view, self.wrote_position, self.file_size - self.wrote_position)
        self.wrote_position = self.file_size

    def append(self, data: bytes | bytearray | memoryview, *, commit: bool = False) -> bool:
        """Append at the wrote position (no record semantics: consume-queue and index use);
        ``commit`` also moves the committed position (files without a transient pool buffer).
        False, writing nothing, when ``data`` does not fit."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        self.write_view[pos:end] = data
        self.wrote_position = end
        if commit:
            self.committed_position = end
        return True

    def commit(self, least_pages: int) -> int:
        """Copy pooled bytes to the file (Java ``commit``); returns the committed position.

        Without a pool buffer the committed position simply follows the wrote position. A
        fully committed segment returns its buffer to the pool.
        """
        buf = self._pool_buf
        if buf is None:
            self.committed_position = self.wrote_position
            return self.committed_position
        with self._lock:
            wrote = self.wrote_position
            committed = self.committed_position
            if wrote > committed and (
                wrote == self.file_size
                or least_pages <= 0
                or (wrote // OS_PAGE_SIZE - committed // OS_PAGE_SIZE) >= least_pages
            ):
                # Start at the page boundary, as Java does, so the write is page aligned.
                start = committed - committed % OS_PAGE_SIZE
                with memoryview(buf) as src:
                    os.pwrite(self._fd, src[start:wrote], start)
                self.committed_position = wrote
            if self.committed_position == self.file_size and self._pool is not None:
                self.write_view.release()
                self.write_view = self.view
                self._pool_buf = None
                self._pool.return_buffer(buf)
        return self.committed_position

    def flush(self, least_pages: int) -> int:
        """fdatasync if at least ``least_pages`` pages are dirty (0: any); returns the flushed position."""
        target = self.get_read_position()
        flushed = self.flushed_position
        if target > flushed and (
            target == self.file_size
            or least_pages <= 0
            or (target // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE) >= least_pages
        ):
            with self._lock:
                if self._fd >= 0:
                    os.fdatasync(self._fd)
            self.flushed_position = max(self.flushed_position, target)
        return self.flushed_position

    def drop_pages(self, upto: int) -> None:
        """Unmap this process's pages below ``upto`` (rounded down to a page): flat RSS."""
        end = upto - upto % mmap.PAGESIZE
        start = self._dropped_upto
        if end <= start:
            return
        with self._lock:
            if self._mm is None:
                return
            with contextlib.suppress(OSError, ValueError):
                self._mm.madvise(mmap.MADV_DONTNEED, start, end - start)
        self._dropped_upto = end

    def drop_all_pages(self) -> None:
        """Unmap every page of this segment from the process (data stays in the page cache)."""
        with self._lock:
            if self._mm is None:
                return
            with contextlib.suppress(OSError, ValueError):
                self._mm.madvise(mmap.MADV_DONTNEED)

    def zero_tail(self, pos: int) -> None:
        """Zero ``[pos, file_size)`` (recovery after a torn tail), keeping the file allocated."""
        page = pos - pos % OS_PAGE_SIZE
        if pos < page + OS_PAGE_SIZE and pos < self.file_size:
            end = min(page + OS_PAGE_SIZE, self.file_size)
            self.view[pos:end] = bytes(end - pos)
        start = min(page + OS_PAGE_SIZE, self.file_size)
        if start < self.file_size:
            # punch the rest out: shrink then regrow the file (no reader holds a view yet)
            os.ftruncate(self._fd, start)
            os.ftruncate(self._fd, self.file_size)
            with contextlib.suppress(OSError):
                os.posix_fallocate(self._fd, start, self.file_size - start)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> bool:
        """Unmap and close. Returns False if views are still exported (then the mapping is left
        to be freed when they are released; the descriptor is closed either way)."""
        with self._lock:
            if self._fd < 0:
                return True
            if self._pool_buf is not None and self._pool is not None:
                self.write_view.release()
                self._pool.return_buffer(self._pool_buf)
                self._pool_buf = None
            self.write_view = self.view
            self.view.release()
            closed = True
            if self._mm is not None:
                try:
                    self._mm.close()
                except BufferError:
                    closed = False  # a reader still holds a slice: the mapping dies with it
                self._mm = None
            os.close(self._fd)
            self._fd = -1
            return closed

    def destroy(self) -> bool:
        """Close and delete the file (Java ``destroy``); see ``close`` for the return value."""
        closed = self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        return closed

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __repr__(self) -> str:
        return (
            f"MappedFile({self.path.name}, wrote={self.wrote_position}, committed={self.committed_position}, "
            f"flushed={self.flushed_position})"
        )
