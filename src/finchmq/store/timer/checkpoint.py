"""``TimerCheckpoint``: how far the timer has got (Java ``store/timer/TimerCheckpoint``).

Owns ``<root>/config/timercheck``, one 4 KiB page. Imports: stdlib and the store's error type.

Layout (as Java's, big-endian i64s): the read time (every slot before it is delivered), the
timer log's flushed position, the timer topic's queue offset the enqueue has committed, the
same offset as the master knows it, then the data version: state version, timestamp, counter.
``encode``/``decode`` are those 56 bytes (GET_TIMER_CHECK_POINT's body).

finchmq adds, at byte 64 where Java never reads: ``FINCHTM1``, the commit-log offset and the
timer-log position from which work past this checkpoint may have been written (deliveries,
rolls, units; ``TimerMessageStore`` reads them back after a crash so that nothing is delivered
twice). The page is written with one ``pwrite`` (a kill cannot tear a system call) and
fdatasync'd.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from finchmq.store.status import StoreCorruptedError

__all__ = ["TimerCheckpoint", "TimerCheckpointData"]

_PAGE: Final = 4096  # Java maps OS_PAGE_SIZE
_JAVA: Final = struct.Struct(">qqqqqqq")  # 56 bytes
_OLD_JAVA: Final = struct.Struct(">qqqq")  # before the data version was added: 32 bytes
_EXT: Final = struct.Struct(">8sqq")
_EXT_AT: Final = 64
_EXT_MAGIC: Final = b"FINCHTM1"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class TimerCheckpointData:
    """The checkpoint's Java fields (what GET_TIMER_CHECK_POINT carries)."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    def encode(self) -> bytes:
        """Java ``TimerCheckpoint.encode``: 56 bytes."""
        return _JAVA.pack(
            self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
            self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter,
        )  # fmt: skip

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> TimerCheckpointData:
        """Java ``TimerCheckpoint.decode``: 56 bytes, or the 32 of a checkpoint without a data
        version. Raises ``StoreCorruptedError`` for any other length."""
        if len(data) == _JAVA.size:
            return cls(*_JAVA.unpack(data))
        if len(data) == _OLD_JAVA.size:
            return cls(*_OLD_JAVA.unpack(data))
        raise StoreCorruptedError(
            "", 0, f"a timer checkpoint is {_JAVA.size} or {_OLD_JAVA.size} bytes, got {len(data)}"
        )

    def next_version(self, state_version: int) -> None:
        """Java ``DataVersion.nextVersion(stateVersion)``."""
        self.timestamp = _now_ms()
        self.state_version = state_version
        self.counter += 1


class TimerCheckpoint:
    """The checkpoint file; ``data`` is what ``flush`` writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = TimerCheckpointData()
        # finchmq: where work not covered by this checkpoint may start (None: unknown, e.g. a
        # checkpoint written by Java; then the replay is checked from the logs' starts)
        self.replay_commit_log_offset: int | None = None
        self.replay_timer_log_offset: int | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size < _PAGE:
            os.ftruncate(self._fd, _PAGE)
        if existed:
            page = os.pread(self._fd, _PAGE, 0)
            self.data = TimerCheckpointData.decode(page[: _JAVA.size])
            magic, commit_log_offset, timer_log_offset = _EXT.unpack_from(page, _EXT_AT)
            if magic == _EXT_MAGIC and commit_log_offset >= 0 and timer_log_offset >= 0:
                self.replay_commit_log_offset = commit_log_offset
                self.replay_timer_log_offset = timer_log_offset

    def flush(self) -> None:
        """Write the page (one pwrite) and fdatasync it."""
        if self._fd < 0:
            return
        page = bytearray(_EXT_AT + _EXT.size)
        page[: _JAVA.size] = self.data.encode()
        if self.replay_commit_log_offset is not None and self.replay_timer_log_offset is not None:
            _EXT.pack_into(
                page, _EXT_AT, _EXT_MAGIC, self.replay_commit_log_offset, self.replay_timer_log_offset
            )
        os.pwrite(self._fd, page, 0)
        os.fdatasync(self._fd)

    def shutdown(self) -> None:
        if self._fd < 0:
            return
        self.flush()
        os.close(self._fd)
        self._fd = -1
