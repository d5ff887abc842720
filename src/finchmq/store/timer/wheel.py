"""``TimerWheel`` and ``Slot``: the timer's slots (Java ``store/timer/TimerWheel``, ``Slot``).

Owns ``<root>/timerwheel``. Imports: stdlib and the store's error type.

Layout (as Java's): ``slots_total * 2`` slots of 32 bytes, big-endian: delayed time divided by
the precision (i64), the timer-log positions of the first and the last unit of the slot's chain
(i64, i64), the number of timers in it (i32) and a magic (i32, unused). A time's slot is
``time // precision % (slots_total * 2)``; a slot holding another time (another turn of the
wheel) reads as empty, ``Slot(-1, -1, -1)``. Units chain backwards: each unit holds the position
of the slot's previous last unit.

Strategy:
    Slots are read and written in place in the file's mapping. Java keeps a copy in memory and
    copies the changed bytes to the mapping at each flush; written in place, the file after a
    kill is at least as fresh as Java's, and recovery revises it from the timer log all the same.
    ``flush`` fdatasyncs (which releases the GIL). The counts of the slots not yet dequeued are
    mirrored in a dict (time -> num), so the backlog (``get_all_num``) does not walk the 1.2 M
    slots; it is built at open from one pass over the file's times.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import struct
from pathlib import Path
from typing import Final, NamedTuple

from finchmq.store.status import StoreCorruptedError

__all__ = ["BLANK", "IGNORE", "SLOT", "Slot", "TimerWheel", "decode_slot", "encode_slot"]

BLANK: Final = -1  # Java TimerWheel.BLANK
IGNORE: Final = -2  # Java TimerWheel.IGNORE: reviseSlot leaves that position as it is
SLOT: Final = struct.Struct(">qqqii")  # Java Slot.SIZE == 32
_HEAD: Final = struct.Struct(">qqq")  # putSlot's 3-argument form writes these 24 bytes only
_POS: Final = struct.Struct(">q")


class Slot(NamedTuple):
    """One slot (Java ``Slot``): ``time_ms`` is -1 for an empty slot."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT: Final = Slot(-1, -1, -1)


def encode_slot(slot: Slot, precision_ms: int) -> bytes:
    """The 32 bytes of ``slot`` as Java writes them (the time divided by the precision)."""
    return SLOT.pack(slot.time_ms // precision_ms, slot.first_pos, slot.last_pos, slot.num, slot.magic)


def decode_slot(data: bytes | bytearray | memoryview, precision_ms: int) -> Slot:
    """A slot from its 32 bytes. Raises ``StoreCorruptedError`` for any other length."""
    if len(data) != SLOT.size:
        raise StoreCorruptedError("", 0, f"a timer wheel slot is {SLOT.size} bytes, got {len(data)}")
    time_units, first, last, num, magic = SLOT.unpack(data)
    return Slot(time_units * precision_ms, first, last, num, magic)


class TimerWheel:
    """The wheel file, mapped; every method is safe from any thread (a slot is written by one
    thread, the enqueue thread, or by recovery before the services start)."""

    def __init__(self, path: Path, slots_total: int, precision_ms: int) -> None:
        """Open or create the wheel. Raises ``StoreCorruptedError`` when an existing file has
        another length (Java refuses it too: "Timer wheel length:%d != expected:%s")."""
        self.path = path
        self.slots_total = slots_total
        self.precision_ms = precision_ms
        self.wheel_length = slots_total * 2 * SLOT.size
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            if length not in (0, self.wheel_length):
                raise StoreCorruptedError(
                    str(path), length, f"Timer wheel length:{length} != expected:{self.wheel_length}"
                )
            if length == 0:
                os.ftruncate(fd, self.wheel_length)  # sparse, as Java's setLength
            self._mm = mmap.mmap(fd, self.wheel_length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.nums: dict[int, int] = self._live_nums()

    def _live_nums(self) -> dict[int, int]:
        """time -> num of every slot with a time written, from one pass over the times."""
        with memoryview(self._mm) as view, view.cast("Q") as words:
            times = words[0::4].tolist()  # the first 8 bytes of each slot (byte order is moot: != 0)
        nums: dict[int, int] = {}
        p = self.precision_ms
        for index in itertools.compress(range(len(times)), times):
            time_units, _, _, num, _ = SLOT.unpack_from(self._mm, index * SLOT.size)
            nums[time_units * p] = num
        return nums

    # -- slots ----------------------------------------------------------------------------

    def get_slot_index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % (self.slots_total * 2)

    def get_raw_slot(self, time_ms: int) -> Slot:
        time_units, first, last, num, magic = SLOT.unpack_from(
            self._mm, self.get_slot_index(time_ms) * SLOT.size
        )
        return Slot(time_units * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """The slot of ``time_ms``, or ``Slot(-1, -1, -1)`` if it holds another time."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return EMPTY_SLOT
        return slot

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int = 0) -> None:
        """Java ``putSlot`` (5 arguments): the whole slot."""
        at = self.get_slot_index(time_ms) * SLOT.size
        SLOT.pack_into(self._mm, at, time_ms // self.precision_ms, first_pos, last_pos, num, magic)
        self.nums[time_ms // self.precision_ms * self.precision_ms] = num

    def _put_slot_head(self, time_ms: int, first_pos: int, last_pos: int) -> None:
        """Java ``putSlot`` (3 arguments): time and positions; num and magic keep their bytes."""
        at = self.get_slot_index(time_ms) * SLOT.size
        _HEAD.pack_into(self._mm, at, time_ms // self.precision_ms, first_pos, last_pos)
        self.nums[time_ms // self.precision_ms * self.precision_ms] = SLOT.unpack_from(self._mm, at)[3]

    def revise_slot(self, time_ms: int, first_pos: int, last_pos: int, force: bool) -> None:
        """Java ``reviseSlot`` (recovery): set the positions of the slot of ``time_ms``
        (``IGNORE`` keeps one); a slot of another time is replaced only when ``force``."""
        at = self.get_slot_index(time_ms) * SLOT.size
        stored = _POS.unpack_from(self._mm, at)[0]
        if time_ms // self.precision_ms != stored:
            if force:
                self._put_slot_head(time_ms, first_pos if first_pos != IGNORE else last_pos, last_pos)
            return
        if first_pos != IGNORE:
            _POS.pack_into(self._mm, at + 8, first_pos)
        if last_pos != IGNORE:
            _POS.pack_into(self._mm, at + 16, last_pos)

    def forget_before(self, time_ms: int) -> None:
        """Drop the mirrored counts of slots before ``time_ms`` (dequeued; the file keeps them)."""
        for t in [t for t in list(self.nums) if t < time_ms]:
            self.nums.pop(t, None)

    # -- scans ----------------------------------------------------------------------------

    def _slots_from(self, time_start_ms: int) -> list[tuple[int, Slot]]:
        """(ring step, slot) of every slot holding a time of the wheel's turn from ``time_start_ms``."""
        p = self.precision_ms
        start = time_start_ms // p
        span = self.slots_total * 2
        found = []
        for t in list(self.nums):
            step = t // p - start
            if 0 <= step < span:
                slot = self.get_raw_slot(t)
                if slot.time_ms == t:
                    found.append((step, slot))
        return found

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """Java ``checkPhyPos``: the smallest first position of the slots (from ``time_start_ms``)
        whose last position is past ``max_offset``, the end of the timer log; ``2**63 - 1`` if
        none (only a damaged log leaves the wheel pointing past its end)."""
        min_first = 2**63 - 1
        for _, slot in self._slots_from(time_start_ms):
            if slot.last_pos > max_offset:
                min_first = min(min_first, slot.first_pos)
        return min_first

    def get_num(self, time_ms: int) -> int:
        return self.get_slot(time_ms).num

    def get_all_num(self, time_start_ms: int) -> int:
        """Java ``getAllNum``: timers in the slots of the wheel's turn from ``time_start_ms``."""
        p = self.precision_ms
        start = time_start_ms // p * p
        end = start + self.slots_total * 2 * p
        return sum(num for t, num in list(self.nums.items()) if start <= t < end)

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the changed pages to disk (fdatasync: the GIL is released meanwhile)."""
        if self._fd >= 0:
            os.fdatasync(self._fd)

    def shutdown(self, flush: bool = True) -> None:
        if self._fd < 0:
            return
        if flush:
            self.flush()
        with contextlib.suppress(BufferError):
            self._mm.close()
        os.close(self._fd)
        self._fd = -1
