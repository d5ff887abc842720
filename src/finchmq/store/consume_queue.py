"""Consume queues (RocketMQ ``ConsumeQueue``): per (topic, queueId), 20-byte units into the commit log.

Owns ``<root>/consumequeue/<topic>/<queueId>/<20-digit offset>`` files. A unit is commit-log
offset (int64), record size (int32) and tagsCode (int64); the logical offset is the unit index
(spec §4.8). Imports: stdlib and the store's segment classes.

Strategy:
    Only the dispatcher writes a queue (under its lock), so units are appended in queue-offset
    order; readers take a memoryview of the readable units of one file, as Java's
    ``getIndexBuffer``. A batch of units is written with one slice assignment per file.
    Holes (a unit the dispatcher never got, or the space before the first unit of a queue that
    starts at a non-zero offset) are filled with Java's blank unit ``(0, 0x7FFFFFFF, 0)``,
    which readers skip. Recovery finds the end of a queue by binary search for the first
    all-zero unit (files are zero-filled and truncation re-zeroes the tail).
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Final

from finchmq.common.logs import RateLimitedLog

from .config import CQ_STORE_UNIT_SIZE
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue
from .status import StoreCorruptedError

__all__ = ["BLANK_CQ_UNIT", "CQ_UNIT", "ConsumeQueue"]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # per-request failures (a full disk): a few lines, with counts

CQ_UNIT: Final = struct.Struct(">qiq")  # ConsumeQueue.CQ_STORE_UNIT_SIZE == 20
BLANK_CQ_UNIT: Final = CQ_UNIT.pack(0, 0x7FFFFFFF, 0)  # ConsumeQueue.fillPreBlank
_ZERO_UNIT: Final = bytes(CQ_STORE_UNIT_SIZE)
_UNIT: Final = CQ_STORE_UNIT_SIZE


class ConsumeQueue:
    """The logical queue ``topic``/``queue_id``."""

    def __init__(self, topic: str, queue_id: int, root: Path, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.mapped_file_queue = MappedFileQueue(root / topic / str(queue_id), file_size)
        self.max_physic_offset = -1  # end (offset + size) of the last dispatched record
        self.min_logic_offset = 0  # bytes

    # ------------------------------------------------------------------ load and recovery

    def load(self) -> list[StoreCorruptedError]:
        return self.mapped_file_queue.load()

    def recover(self) -> None:
        """Find the end of the queue, set positions and ``max_physic_offset`` (Java ``recover``)."""
        mfq = self.mapped_file_queue
        files = mfq.files
        if not files:
            return
        end_offset = files[0].file_from_offset
        for mf in reversed(files):
            n = self._units_in(mf)
            if n > 0:
                end_offset = mf.file_from_offset + n * _UNIT
                break
        mfq.truncate_dirty_files(end_offset)
        mfq.flushed_where = mfq.committed_where = end_offset
        self.max_physic_offset = self._last_physic_end()
        self.min_logic_offset = max(self.min_logic_offset, files[0].file_from_offset)

    def _units_in(self, mf: MappedFile) -> int:
        """Number of written units in a (fully mapped) file: binary search for the first zero unit."""
        view = mf.view
        lo, hi = 0, self.file_size // _UNIT
        while lo < hi:
            mid = (lo + hi) // 2
            if view[mid * _UNIT : mid * _UNIT + _UNIT] == _ZERO_UNIT:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def get_last_offset(self) -> int:
        """End (offset + size) in the commit log of the last record this queue points at, -1
        when it points at none (Java ``getLastOffset``)."""
        return self._last_physic_end()

    def _last_physic_end(self) -> int:
        files = self.mapped_file_queue.files
        for mf in reversed(files):
            pos = mf.wrote_position - _UNIT
            while pos >= 0:
                offset, size, _ = CQ_UNIT.unpack_from(mf.view, pos)
                if size != 0x7FFFFFFF and size > 0 and offset >= 0:
                    return int(offset + size)
                pos -= _UNIT
        return -1

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop units that point at or past ``phy_offset`` (the commit log was truncated there)."""
        mfq = self.mapped_file_queue
        end = mfq.get_max_offset()
        new_end = end
        for mf in reversed(mfq.files):
            pos = mf.wrote_position - _UNIT
            stop = False
            while pos >= 0:
                offset, size, _ = CQ_UNIT.unpack_from(mf.view, pos)
                if size == 0x7FFFFFFF or offset < phy_offset:
                    stop = True
                    break
                new_end = mf.file_from_offset + pos
                pos -= _UNIT
            if stop:
                break
        if new_end < end:
            log.info(
                "consume queue %s/%d: dropping %d units past commit-log offset %d",
                self.topic,
                self.queue_id,
                (end - new_end) // _UNIT,
                phy_offset,
            )
            mfq.truncate_dirty_files(new_end)
            self.max_physic_offset = self._last_physic_end()

    def units_from(self, phy_offset: int) -> int | None:
        """How many units point at commit-log offset ``phy_offset`` or later (recovery's check that
        the queue holds every message of a range); None if a blank unit is among them (a hole:
        the count would not say which messages are there)."""
        mfq = self.mapped_file_queue
        files = mfq.files
        if not files:
            return 0
        lo, hi = files[0].file_from_offset // _UNIT, mfq.get_max_offset() // _UNIT
        n = hi
        while lo < hi:  # the first unit at or past phy_offset (units are in commit-log order)
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            if unit is not None and unit[0] >= phy_offset and unit[1] != 0x7FFFFFFF:
                hi = mid
            else:
                lo = mid + 1
        first = lo * _UNIT
        for mf in files:
            start = max(first - mf.file_from_offset, 0)
            stop = mf.wrote_position
            if start < stop and mf.mm.find(BLANK_CQ_UNIT, start, stop) >= 0:
                return None
        return n - lo

    # ------------------------------------------------------------------ writes

    def put_units(self, cq_offset: int, units: bytes | bytearray | memoryview, last_physic_end: int) -> bool:
        """Write consecutive ``units`` whose first has queue offset ``cq_offset``.

        Units already present (re-dispatch after recovery) are skipped; a gap is filled with
        blank units and logged. Returns False if a file could not be created.
        """
        mfq = self.mapped_file_queue
        expect = cq_offset * _UNIT
        files = mfq.files
        if files:
            last = files[-1]
            pos = last.wrote_position
            end = pos + len(units)
            if last.file_from_offset + pos == expect and end <= last.file_size:
                # fast path: the next units, room in the last file
                last.append(units, commit=True)
                self.max_physic_offset = max(self.max_physic_offset, last_physic_end)
                return True
        else:
            # The first file of a queue that may start past 0 (its earlier files expired or it is
            # rebuilt from a later point): blank units up to the first one (Java fillPreBlank).
            mf = mfq.get_last_mapped_file_create(expect)
            if mf is None:
                return False
            if expect > mf.file_from_offset:
                self._fill_blank(mf, expect - mf.file_from_offset)
            self.min_logic_offset = expect
            mfq.flushed_where = mfq.committed_where = mf.file_from_offset
        current = mfq.get_max_wrote_position()
        if expect < current:
            skip = (current - expect) // _UNIT * _UNIT
            if skip >= len(units):
                return True
            units = memoryview(units)[skip:]
            expect = current
        elif expect > current:
            log.error(
                "consume queue %s/%d: expected unit %d but the queue ends at %d; filling the gap with blanks",
                self.topic,
                self.queue_id,
                expect // _UNIT,
                current // _UNIT,
            )
            if not self._write(BLANK_CQ_UNIT * ((expect - current) // _UNIT)):
                return False
        ok = self._write(units)
        if ok and last_physic_end > self.max_physic_offset:
            self.max_physic_offset = last_physic_end
        return ok

    def _fill_blank(self, mf: MappedFile, upto: int) -> None:
        mf.append(BLANK_CQ_UNIT * (upto // _UNIT))
        mf.set_positions(mf.wrote_position)

    def _write(self, data: bytes | bytearray | memoryview) -> bool:
        mfq = self.mapped_file_queue
        view = memoryview(data)
        pos = 0
        total = len(view)
        while pos < total:
            mf = mfq.get_last_mapped_file_create(mfq.get_max_wrote_position())
            if mf is None:
                limited.error(
                    "cq-create", "consume queue %s/%d: cannot create a file", self.topic, self.queue_id
                )
                return False
            room = mf.file_size - mf.wrote_position
            n = min(room, total - pos)
            mf.append(view[pos : pos + n], commit=True)
            pos += n
        return True

    # ------------------------------------------------------------------ reads

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // _UNIT

    def get_max_offset_in_queue(self) -> int:
        return self.mapped_file_queue.get_max_offset() // _UNIT

    def get_index_buffer(self, start_index: int) -> memoryview | None:
        """The readable units of one file from ``start_index`` on (Java ``getIndexBuffer``)."""
        offset = start_index * _UNIT
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select_from(offset - mf.file_from_offset)

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        buf = self.get_index_buffer(index)
        if buf is None or len(buf) < _UNIT:
            return None
        with buf:
            return CQ_UNIT.unpack_from(buf)

    def get_units(self, start_index: int, count: int) -> list[tuple[int, int, int]] | None:
        """Up to ``count`` units ``(commit-log offset, size, tags code)`` from ``start_index``,
        within its file; None when the index is not in the queue (Java ``getIndexBuffer``)."""
        buf = self.get_index_buffer(start_index)
        if buf is None:
            return None
        with buf:
            end = min(len(buf), count * _UNIT) // _UNIT * _UNIT
            return [CQ_UNIT.unpack_from(buf, pos) for pos in range(0, end, _UNIT)]

    def roll_next_file(self, index: int) -> int:
        """First logical offset of the file after the one holding ``index``."""
        per_file = self.file_size // _UNIT
        return index + per_file - index % per_file

    # ------------------------------------------------------------------ expiry

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Move the min logical offset to the first unit whose record still exists."""
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return
        end = mf.get_read_position()
        start = max(self.min_logic_offset - mf.file_from_offset, 0)
        for pos in range(start, end, _UNIT):
            offset, size, _ = CQ_UNIT.unpack_from(mf.view, pos)
            if size != 0x7FFFFFFF and offset >= phy_min_offset:
                new_min = mf.file_from_offset + pos
                self.min_logic_offset = max(self.min_logic_offset, new_min)
                return
        if end == mf.file_size or end > start:
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + end)

    def delete_expired_file(self, phy_min_offset: int) -> int:
        count = self.mapped_file_queue.delete_expired_file_by_offset(phy_min_offset, _UNIT)
        self.correct_min_offset(phy_min_offset)
        return count

    def flush(self, least_pages: int) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    def drop_pages(self) -> None:
        mfq = self.mapped_file_queue
        mfq.drop_inactive_pages()
        last = mfq.get_last_mapped_file()
        if last is not None:
            last.drop_pages(last.flushed_position)

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown()

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
