"""The store checkpoint file and the abort marker (RocketMQ ``StoreCheckpoint``, ``abort``).

Owns ``<root>/checkpoint`` and ``<root>/abort``. Imports: stdlib only.

Strategy:
    The checkpoint is one 4 KiB page. Bytes 0..23 are Java's layout: physicMsgTimestamp,
    logicsMsgTimestamp, indexMsgTimestamp (big-endian int64 ms): the store time of the last
    message known flushed to the commit log, the consume queues and the index. finchmq adds a
    clean-shutdown record at byte 24: magic ``FINCHCK1`` + the commit log's max offset +
    the consume queues' dispatched offset, written only by a clean shutdown and cleared at
    start, so a normal restart knows where the log ends without rescanning it.
    The abort file exists while the store runs; finding it at start means the last run did
    not shut down cleanly (abnormal recovery).
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
from pathlib import Path
from typing import Final

from .mapped_file import OS_PAGE_SIZE

__all__ = ["StoreCheckpoint", "create_abort_file", "delete_abort_file", "is_abort_file_present"]

_JAVA: Final = struct.Struct(">qqq")
_CLEAN: Final = struct.Struct(">8sqq")
_CLEAN_MAGIC: Final = b"FINCHCK1"


class StoreCheckpoint:
    """Timestamps of what is safely on disk, plus finchmq's clean-shutdown offsets."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.clean_commit_log_max_offset: int | None = None
        self.clean_dispatched_offset: int | None = None
        self.unreadable = False  # True when the file held impossible timestamps (torn/corrupt)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        data = os.pread(self._fd, OS_PAGE_SIZE, 0)
        if len(data) >= _JAVA.size:
            stamps = _JAVA.unpack_from(data)
            # A torn or corrupted file must not steer recovery past unflushed data: a timestamp
            # that cannot be real makes recovery start from the first file (slow, but complete).
            latest_real = (time.time() + 86_400) * 1000
            if all(0 <= stamp <= latest_real for stamp in stamps):
                self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = stamps
            else:
                self.unreadable = True
        if len(data) >= _JAVA.size + _CLEAN.size:
            magic, max_offset, dispatched = _CLEAN.unpack_from(data, _JAVA.size)
            if magic == _CLEAN_MAGIC and max_offset >= 0 and dispatched >= 0:
                self.clean_commit_log_max_offset = max_offset
                self.clean_dispatched_offset = dispatched
        if len(data) < OS_PAGE_SIZE:
            os.ftruncate(self._fd, OS_PAGE_SIZE)

    def get_min_timestamp(self) -> int:
        """Java ``getMinTimestamp``: min(physic, logics) less 3 s of slack, at least 0."""
        return max(min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000, 0)

    def get_min_timestamp_index(self) -> int:
        return min(self.get_min_timestamp(), self.index_msg_timestamp)

    def _payload(self, clean: bool) -> bytes:
        head = _JAVA.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        if (
            clean
            and self.clean_commit_log_max_offset is not None
            and self.clean_dispatched_offset is not None
        ):
            return head + _CLEAN.pack(
                _CLEAN_MAGIC, self.clean_commit_log_max_offset, self.clean_dispatched_offset
            )
        return head + bytes(_CLEAN.size)

    def flush(self) -> None:
        """Write the timestamps (and no clean-shutdown record) and fdatasync."""
        if self._fd < 0:
            return
        os.pwrite(self._fd, self._payload(clean=False), 0)
        os.fdatasync(self._fd)

    def mark_clean_shutdown(self, commit_log_max_offset: int, dispatched_offset: int) -> None:
        self.clean_commit_log_max_offset = commit_log_max_offset
        self.clean_dispatched_offset = dispatched_offset
        os.pwrite(self._fd, self._payload(clean=True), 0)
        os.fdatasync(self._fd)

    def clear_clean_shutdown(self) -> None:
        """Forget the clean-shutdown record (called at start: from now on we may crash)."""
        self.clean_commit_log_max_offset = None
        self.clean_dispatched_offset = None
        self.flush()

    def shutdown(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def is_abort_file_present(path: Path) -> bool:
    return path.exists()


def create_abort_file(path: Path) -> None:
    """Java ``createTempFile``: the file holds the pid, and is synced before the store opens."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, str(os.getpid()).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def delete_abort_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
