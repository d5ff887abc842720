"""``TimerLog``: the timer's append-only log of 52-byte units (Java ``store/timer/TimerLog``).

Owns ``<root>/timerlog/<20-digit offset>``, segments of ``mapped_file_size_timer_log`` bytes
(100 MiB). Imports: stdlib and the store's segment classes.

Unit layout (as Java's, big-endian): size (i32, always 52), position of the previous unit of
the same slot (i64, -1 for the first), magic (i32: bit 0 default, bit 1 roll, bit 2 delete),
the enqueue ("current write") time (i64 ms), the delayed time minus the enqueue time (i32 ms),
the message's commit-log offset (i64) and size (i32), the Java ``String.hashCode`` of its real
topic (i32) and 8 reserved bytes. A unit never straddles segments: when one would not fit
with 16 bytes to spare, the rest of the segment is a blank (its size, 8 zero bytes,
``BLANK_MAGIC_CODE``) and the unit starts the next segment.

Strategy:
    A unit's first 8 bytes (its size and half of the previous position) are written after the
    rest, as the commit log does its head, so a unit torn by a kill has size 0 and recovery
    stops there instead of reading a half-written unit as a chain link.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

from finchmq.store.mapped_file import MappedFile
from finchmq.store.mapped_file_queue import MappedFileQueue
from finchmq.store.status import StoreCorruptedError

__all__ = [
    "BLANK_MAGIC_CODE",
    "MIN_BLANK_LEN",
    "UNIT",
    "UNIT_PRE_SIZE_FOR_METRIC",
    "UNIT_PRE_SIZE_FOR_MSG",
    "UNIT_SIZE",
    "TimerLog",
    "TimerLogUnit",
    "decode_unit",
    "is_magic_ok",
]

UNIT: Final = struct.Struct(">iqiqiqiiq")
UNIT_SIZE: Final = 52  # Java TimerLog.UNIT_SIZE
UNIT_PRE_SIZE_FOR_MSG: Final = 28  # where the commit-log offset starts
UNIT_PRE_SIZE_FOR_METRIC: Final = 40  # where the topic hash starts
MIN_BLANK_LEN: Final = 4 + 8 + 4  # Java TimerLog.MIN_BLANK_LEN
BLANK_MAGIC_CODE: Final = -875286124  # Java 0xBBCCDDEE ^ 1880681586 + 8 == 0xCBD43194
_BLANK: Final = struct.Struct(">iqi")
_OFFSET_SIZE: Final = struct.Struct(">qi")


def is_magic_ok(magic: int) -> bool:
    """Java ``TimerMessageStore.isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


class TimerLogUnit(NamedTuple):
    """One unit; ``delayed_time`` is ``enqueue_time + delay`` as Java reads it back."""

    prev_pos: int
    magic: int
    enqueue_time: int  # ms, the write time the unit was enqueued at
    delay: int  # ms after enqueue_time (an int32 on disk)
    offset_py: int  # commit-log offset of the message
    size_py: int
    hash_topic: int  # Java String.hashCode of the real topic (metrics)
    size: int = UNIT_SIZE
    reserved: int = 0

    @property
    def delayed_time(self) -> int:
        return self.enqueue_time + self.delay

    def encode(self) -> bytes:
        return UNIT.pack(
            self.size, self.prev_pos, self.magic, self.enqueue_time, self.delay, self.offset_py, self.size_py,
            self.hash_topic, self.reserved,
        )  # fmt: skip


def decode_unit(data: bytes | bytearray | memoryview, pos: int = 0, *, path: str = "") -> TimerLogUnit:
    """The unit at ``pos``. Raises ``StoreCorruptedError`` (naming ``path`` and ``pos``) if fewer
    than 52 bytes are there, its size is not 52 or its magic has bits above the low four."""
    if pos < 0 or len(data) - pos < UNIT_SIZE:
        raise StoreCorruptedError(path, pos, f"a timer log unit is {UNIT_SIZE} bytes, {len(data) - pos} left")
    size, prev, magic, enqueue, delay, offset_py, size_py, hash_topic, reserved = UNIT.unpack_from(data, pos)
    if size != UNIT_SIZE:
        raise StoreCorruptedError(path, pos, f"timer log unit size {size}, expected {UNIT_SIZE}")
    if not is_magic_ok(magic):
        raise StoreCorruptedError(path, pos, f"timer log unit magic {magic:#x} is not a timer magic")
    return TimerLogUnit(prev, magic, enqueue, delay, offset_py, size_py, hash_topic, size, reserved)


class TimerLog:
    """The timer log's segments; appended by one thread (the enqueue thread), read by any."""

    def __init__(self, store_path: Path, file_size: int) -> None:
        self.file_size = file_size
        self.mapped_file_queue = MappedFileQueue(store_path, file_size)

    def load(self) -> list[StoreCorruptedError]:
        return self.mapped_file_queue.load()

    def append(self, unit: bytes) -> int:
        """Append a unit; returns its position, or -1 if no segment could be created (Java)."""
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                return -1
        if len(unit) + MIN_BLANK_LEN > mf.file_size - mf.wrote_position:
            mf.fill_to_end(_write_blank)
            mf = mfq.get_last_mapped_file_create(0)
            if mf is None:
                return -1
        position = mf.file_from_offset + mf.wrote_position
        with memoryview(unit) as record:
            mf.append_record(record, 0)
        return position

    def _file_at(self, offset: int) -> MappedFile | None:
        return self.mapped_file_queue.find_mapped_file_by_offset(offset)

    def read_unit(self, offset: int) -> TimerLogUnit | None:
        """The unit at ``offset``, None if nothing readable is there. Raises
        ``StoreCorruptedError`` if what is there is no unit."""
        mf = self._file_at(offset)
        if mf is None:
            return None
        view = mf.select(offset - mf.file_from_offset, UNIT_SIZE)
        if view is None:
            return None
        with view:
            return decode_unit(view, path=str(mf.path))

    def read_offset_size(self, offset: int) -> tuple[int, int] | None:
        """(commit-log offset, size) of the message of the unit at ``offset``, or None."""
        mf = self._file_at(offset)
        if mf is None:
            return None
        view = mf.select(offset - mf.file_from_offset + UNIT_PRE_SIZE_FOR_MSG, _OFFSET_SIZE.size)
        if view is None:
            return None
        with view:
            offset_py, size_py = _OFFSET_SIZE.unpack(view)
        return offset_py, size_py

    def iter_units(self, mf: MappedFile, *, whole_file: bool) -> Iterator[tuple[int, tuple[int, ...]]]:
        """(position in the file, raw fields) of each 52-byte step of ``mf`` (up to its read
        position, or its whole size for recovery) until a blank; fields are as ``UNIT`` unpacks."""
        end = mf.file_size if whole_file else mf.get_read_position()
        end -= end % UNIT_SIZE
        chunk = mf.view[:end]
        units = UNIT.iter_unpack(chunk)
        try:
            position = 0
            for fields in units:
                if fields[2] == BLANK_MAGIC_CODE:
                    return
                yield position, fields
                position += UNIT_SIZE
        finally:
            del units  # it holds the slice's buffer
            chunk.release()

    def get_offset_for_last_unit(self) -> int:
        """Java ``getOffsetForLastUnit``: where the last unit of a full segment starts."""
        size = self.file_size
        return size - (size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE

    def delete_expired_files(self, min_commit_log_offset: int) -> int:
        """Delete the segments (never the last) whose last unit points below the commit log's
        first offset (Java ``deleteExpiredFileByOffsetForTimerLog``); returns how many."""
        mfq = self.mapped_file_queue
        check = self.get_offset_for_last_unit()
        expired: list[MappedFile] = []
        for mf in mfq.files[:-1]:
            view = mf.select(check, UNIT_SIZE)
            if view is None:
                break
            with view:
                size, _, magic, _, _, offset_py, *_ = UNIT.unpack(view)
            if size != UNIT_SIZE or not is_magic_ok(magic) or offset_py >= min_commit_log_offset:
                break
            expired.append(mf)
        if not expired:
            return 0
        return mfq.delete_head(expired)

    def flush(self) -> None:
        self.mapped_file_queue.flush_all()

    @property
    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def shutdown(self) -> None:
        self.mapped_file_queue.flush_all()
        self.mapped_file_queue.shutdown()


def _write_blank(view: memoryview, pos: int, free: int) -> None:
    if free >= _BLANK.size:
        _BLANK.pack_into(view, pos, free, 0, BLANK_MAGIC_CODE)
