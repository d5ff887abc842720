"""Store result values: RocketMQ's status enums and the results of put, get and query.

Owns the hot-path results (style §3.5: status enums, never exceptions) and
``StoreCorruptedError``, the one exception the store raises for bad bytes on disk.
Imports: ``finchmq.protocol.msg_id`` for msg ids only.

Strategy:
    Enum members keep Java's names and ordinals. ``GetMessageResult`` and
    ``QueryMessageResult`` hold zero-copy ``memoryview`` slices of the segment mmaps; a slice
    keeps its segment mapped (Python refuses to close an mmap with live exports), so deleting
    a segment never invalidates a buffer a caller still holds. Call ``release()`` (or use
    ``with``) when done so expired segments can be unmapped promptly.
"""

from __future__ import annotations

import enum
from concurrent.futures import Future
from types import TracebackType
from typing import NamedTuple, Self

from finchmq.protocol.msg_id import offset_msg_id_from_packed

__all__ = [
    "AppendMessageResult",
    "AppendMessageStatus",
    "GetMessageResult",
    "GetMessageStatus",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "StoreCorruptedError",
]


class PutMessageStatus(enum.IntEnum):
    """RocketMQ ``PutMessageStatus`` (ordinals as Java 4.9; the timer's as Java 5.x)."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9
    WHEEL_TIMER_FLOW_CONTROL = 13
    WHEEL_TIMER_MSG_ILLEGAL = 14
    WHEEL_TIMER_NOT_ENABLE = 15


class AppendMessageStatus(enum.IntEnum):
    """RocketMQ ``AppendMessageStatus``."""

    PUT_OK = 0
    END_OF_FILE = 1
    MESSAGE_SIZE_EXCEEDED = 2
    PROPERTIES_SIZE_EXCEEDED = 3
    UNKNOWN_ERROR = 4


class GetMessageStatus(enum.IntEnum):
    """RocketMQ ``GetMessageStatus``."""

    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


class StoreCorruptedError(Exception):
    """Bytes on disk that are not what the store wrote: a bad magic, size, CRC or unit.

    ``path`` is the file, ``offset`` the byte position inside it, ``reason`` what was wrong.
    Recovery records these (``DefaultMessageStore.recovery_report``) and truncates; it raises
    only when it cannot continue safely (a segment in the middle of the log is short).
    """

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path} at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class AppendMessageResult(NamedTuple):
    """What the commit log did with one message or batch (Java ``AppendMessageResult``).

    ``wrote_offset`` is the physical offset of the first record, ``logics_offset`` its queue
    offset, ``offsets`` the physical offset of every record (one per batch item). A NamedTuple
    rather than a frozen dataclass: it is built on every put and is 3x cheaper to construct.
    """

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    logics_offset: int = 0
    store_timestamp: int = 0
    msg_num: int = 1
    page_cache_rt: int = 0  # ms spent holding the put lock
    store_host: bytes = b""
    offsets: tuple[int, ...] = ()

    @property
    def msg_id(self) -> str:
        """The offset msgId(s): comma-joined for a batch (Java's batch ``msgId``)."""
        store_host = self.store_host
        if not store_host:
            return ""
        offsets = self.offsets
        if len(offsets) == 1:  # a single message: every send asks
            return offset_msg_id_from_packed(store_host, offsets[0])
        return ",".join([offset_msg_id_from_packed(store_host, o) for o in offsets])

    def is_ok(self) -> bool:
        return self.status is AppendMessageStatus.PUT_OK


class PutMessageResult(NamedTuple):
    """Java ``PutMessageResult``: the status and, when something was appended, the append result.

    ``pending`` is set when the put waits for more than the append (SYNC_FLUSH with the WAIT
    property, a SYNC_MASTER's slave): ``status`` is then PUT_OK for the append, and ``pending``
    completes with the final result (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT...) on the thread
    that decided it. A put that is final at once carries None: no ``Future`` is made on the
    broker's hot path.
    """

    status: PutMessageStatus
    append_message_result: AppendMessageResult | None = None
    pending: Future[PutMessageResult] | None = None

    def is_ok(self) -> bool:
        """True when the message is stored and, for a SYNC_FLUSH put that waited, flushed."""
        return self.status is PutMessageStatus.PUT_OK


class _StoredRecords:
    """Records held as zero-copy views of segment mappings, released explicitly or by ``with``."""

    __slots__ = ("buffers",)

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []

    def body(self) -> bytes:
        """All records concatenated (one copy), e.g. a pull or query response body."""
        return b"".join(self.buffers)

    def release(self) -> None:
        """Release the views so their segments can be unmapped; the result is then empty."""
        for view in self.buffers:
            view.release()
        self.buffers = []

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class GetMessageResult(_StoredRecords):
    """Java ``GetMessageResult``: the stored records found for one pull, plus offsets.

    ``buffers`` holds one read-only ``memoryview`` per message (the stored bytes, zero copy);
    ``queue_offsets`` the matching queue offsets. ``next_begin_offset`` is where the next pull
    should start; ``min_offset``/``max_offset`` the queue's bounds.
    """

    __slots__ = (
        "buffer_total_size",
        "max_offset",
        "min_offset",
        "next_begin_offset",
        "queue_offsets",
        "status",
        "suggest_pulling_from_slave",
    )

    def __init__(self) -> None:
        super().__init__()
        self.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        self.queue_offsets: list[int] = []
        self.buffer_total_size = 0
        self.next_begin_offset = 0
        self.min_offset = 0
        self.max_offset = 0
        self.suggest_pulling_from_slave = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    def __repr__(self) -> str:
        return (
            f"GetMessageResult(status={self.status.name}, messages={len(self.buffers)}, "
            f"bytes={self.buffer_total_size}, next_begin_offset={self.next_begin_offset}, "
            f"min_offset={self.min_offset}, max_offset={self.max_offset})"
        )


class QueryMessageResult(_StoredRecords):
    """Java ``QueryMessageResult``: records found by key, newest first, plus index freshness."""

    __slots__ = ("index_last_update_phyoffset", "index_last_update_timestamp")

    def __init__(self) -> None:
        super().__init__()
        self.index_last_update_timestamp = 0
        self.index_last_update_phyoffset = 0

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)
