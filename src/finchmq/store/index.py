"""Message index (RocketMQ ``IndexFile``/``IndexService``): keys and unique keys -> physical offsets.

Owns ``<root>/index/<yyyyMMddHHmmssSSS>`` files. Imports: stdlib and the store's status values.

Layout (Java's): a 40-byte header (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset:
int64; hashSlotCount, indexCount: int32), ``max_hash_slot_num`` 4-byte slots holding the
newest entry number of their hash, then ``max_index_num`` 20-byte entries (key hash int32,
physical offset int64, seconds since beginTimestamp int32, previous entry number int32).
Entry 0 is never used, so 0 means "none".

Strategy:
    The key is ``topic#key`` as in Java, but its hash is ``zlib.crc32(utf-8) & 0x7FFFFFFF``
    (a C call) instead of Java's ``String.hashCode``: finchmq alone reads these files.
    The header is rewritten after each dispatched batch, so a crash loses at most the entries
    of that batch, which recovery re-dispatches (``end_phy_offset`` makes rebuilding
    idempotent); the hash slots such a crash already pointed at those entries are set back when
    the file is opened (else they would cut their keys' chains). Hash collisions and entries
    left past a truncated commit log are harmless:
    ``DefaultMessageStore.query_message`` checks each hit's topic and key before returning it.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Final, NamedTuple

from finchmq.common.logs import RateLimitedLog

from .mapped_file import map_file

__all__ = ["INDEX_HEADER_SIZE", "IndexFile", "IndexService", "QueryOffsetResult", "index_key_hash"]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # per-request failures (a full disk): a few lines, with counts

INDEX_HEADER_SIZE: Final = 40  # IndexHeader.INDEX_HEADER_SIZE
_HASH_SLOT_SIZE: Final = 4
_INDEX_SIZE: Final = 20
_HEADER: Final = struct.Struct(">qqqqii")
_ENTRY: Final = struct.Struct(">iqii")
_I32: Final = struct.Struct(">i")
_INT_MAX: Final = 0x7FFFFFFF


def index_key_hash(key: str) -> int:
    """The index hash of ``topic#key``: CRC32 of its UTF-8 bytes, non-negative int32."""
    return zlib.crc32(key.encode("utf-8")) & _INT_MAX


class QueryOffsetResult(NamedTuple):
    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


class IndexFile:
    """One index file of ``40 + slots*4 + num*20`` bytes."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, *, create: bool) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = INDEX_HEADER_SIZE + hash_slot_num * _HASH_SLOT_SIZE + index_num * _INDEX_SIZE
        fd, mm = map_file(path, self.file_size, create=create, grow=False)
        self._mm: mmap.mmap | None = mm
        self._fd = fd
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        ) = _HEADER.unpack_from(self._mm, 0)
        if self.index_count <= 0:
            self.index_count = 1
        self._dirty = create
        if not create:
            self._repair_unheadered_entries()

    def _repair_unheadered_entries(self) -> None:
        """Undo what a crash inside ``IndexService.put_hashes`` leaves: entries past the header's
        count, and hash slots already naming them (``put_key`` writes the entry, then the slot;
        the header follows the whole batch). Such a slot would hide its older entries: ``put_key``
        would chain the re-dispatched entry to itself, and a later entry written over the stale
        one would lead the chain into another key's. Each slot goes back to the entry it held
        before (the stale entry's previous-entry field); the stale entries are zeroed."""
        mm = self._mm
        assert mm is not None
        count = self.index_count
        base = INDEX_HEADER_SIZE + self.hash_slot_num * _HASH_SLOT_SIZE
        zero = bytes(_INDEX_SIZE)
        stale = count
        while (
            stale < self.index_num
            and mm[base + stale * _INDEX_SIZE : base + (stale + 1) * _INDEX_SIZE] != zero
        ):
            stale += 1
        if stale == count:
            return
        for n in range(count, stale):
            slot_pos = (
                INDEX_HEADER_SIZE
                + (_ENTRY.unpack_from(mm, base + n * _INDEX_SIZE)[0] % self.hash_slot_num) * _HASH_SLOT_SIZE
            )
            value = _I32.unpack_from(mm, slot_pos)[0]
            while count <= value < stale:  # entries are written in order: prev < value
                prev = _ENTRY.unpack_from(mm, base + value * _INDEX_SIZE)[3]
                value = prev if 0 < prev < value else 0
            if value >= count or value < 0:
                value = 0
            _I32.pack_into(mm, slot_pos, value)
        mm[base + count * _INDEX_SIZE : base + stale * _INDEX_SIZE] = bytes((stale - count) * _INDEX_SIZE)
        self._dirty = True
        log.warning(
            "index file %s: %d entries past its header (a crash while indexing) undone; they are re-indexed",
            self.path,
            stale - count,
        )

    def is_write_full(self) -> bool:
        return bool(self.index_count >= self.index_num)

    def write_header(self) -> None:
        if self._mm is not None:
            _HEADER.pack_into(
                self._mm,
                0,
                self.begin_timestamp,
                self.end_timestamp,
                self.begin_phy_offset,
                self.end_phy_offset,
                self.hash_slot_count,
                self.index_count,
            )
            self._dirty = True

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry; False when the file is full (Java ``putKey``)."""
        mm = self._mm
        if mm is None or self.index_count >= self.index_num:
            return False
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * _HASH_SLOT_SIZE
        slot_value = _I32.unpack_from(mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > self.index_count:
            slot_value = 0
        if self.begin_timestamp <= 0:
            diff = 0
        else:
            diff = (store_timestamp - self.begin_timestamp) // 1000
            diff = 0 if diff < 0 else min(diff, _INT_MAX)
        count = self.index_count
        _ENTRY.pack_into(
            mm,
            INDEX_HEADER_SIZE + self.hash_slot_num * _HASH_SLOT_SIZE + count * _INDEX_SIZE,
            key_hash,
            phy_offset,
            diff,
            slot_value,
        )
        _I32.pack_into(mm, slot_pos, count)
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        return True

    def last_phy_below(self, phy_offset: int) -> int | None:
        """The physical offset of the newest entry pointing below ``phy_offset`` (None if none)."""
        mm = self._mm
        if mm is None:
            return None
        base = INDEX_HEADER_SIZE + self.hash_slot_num * _HASH_SLOT_SIZE
        for n in range(self.index_count - 1, 0, -1):
            phy = int(_ENTRY.unpack_from(mm, base + n * _INDEX_SIZE)[1])
            if phy < phy_offset:
                return phy
        return None

    def is_time_matched(self, begin: int, end: int) -> bool:
        return bool(
            (begin < self.begin_timestamp and end > self.end_timestamp)
            or (self.begin_timestamp <= begin <= self.end_timestamp)
            or (self.begin_timestamp <= end <= self.end_timestamp)
        )

    def select_phy_offset(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        """Append offsets of entries with ``key_hash`` stored within [begin, end] (newest first)."""
        mm = self._mm
        if mm is None:
            return
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * _HASH_SLOT_SIZE
        index = _I32.unpack_from(mm, slot_pos)[0]
        if index <= 0 or index > self.index_count:
            return
        seen = 0
        base = INDEX_HEADER_SIZE + self.hash_slot_num * _HASH_SLOT_SIZE
        while len(out) < max_num and seen <= self.index_count:
            seen += 1
            h, phy, diff, prev = _ENTRY.unpack_from(mm, base + index * _INDEX_SIZE)
            if diff < 0:
                break
            time_read = self.begin_timestamp + diff * 1000
            if h == key_hash and begin <= time_read <= end:
                out.append(phy)
            if prev <= 0 or prev > self.index_count or prev == index or time_read < begin:
                break
            index = prev

    def flush(self) -> None:
        if self._mm is None or not self._dirty:
            return
        self.write_header()
        os.fdatasync(self._fd)
        self._dirty = False

    def drop_pages(self) -> None:
        if self._mm is not None:
            with contextlib.suppress(OSError, ValueError):
                self._mm.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        if self._mm is not None:
            self.write_header()
            self._mm.close()
            self._mm = None
            os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _file_name(ms: int) -> str:
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"  # UtilAll.timeMillisToHumanString


class IndexService:
    """The index files of a store; only the dispatcher writes, queries may come from any thread."""

    def __init__(self, store_path: Path, hash_slot_num: int, index_num: int, max_msgs_num_batch: int) -> None:
        self.store_path = store_path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        if not self.store_path.is_dir():
            return
        files: list[IndexFile] = []
        for path in sorted(p for p in self.store_path.iterdir() if p.is_file() and p.name.isdigit()):
            try:
                files.append(IndexFile(path, self.hash_slot_num, self.index_num, create=False))
            except OSError as exc:
                log.warning("index file %s is unusable (%s); deleting it, it is rebuilt", path, exc)
                with contextlib.suppress(OSError):
                    path.unlink()
        if len(files) > 1 and files[-1].index_count <= 1 and files[-1].end_phy_offset <= 0:
            # created by a roll-over, killed before its header was written: it follows the last one
            last, prev = files[-1], files[-2]
            last.begin_phy_offset = last.end_phy_offset = prev.end_phy_offset
            last.begin_timestamp = last.end_timestamp = prev.end_timestamp
            last.write_header()
        self.files = files

    @property
    def end_phy_offset(self) -> int:
        files = self.files
        return files[-1].end_phy_offset if files else 0

    def _writable_file(self) -> IndexFile | None:
        files = self.files
        if files and not files[-1].is_write_full():
            return files[-1]
        self.store_path.mkdir(parents=True, exist_ok=True)
        ms = int(time.time() * 1000)
        path = self.store_path / _file_name(ms)
        while path.exists():
            ms += 1
            path = self.store_path / _file_name(ms)
        try:
            new = IndexFile(path, self.hash_slot_num, self.index_num, create=True)
        except OSError as exc:
            limited.error("index-create", "create index file %s failed: %s", path, exc)
            return None
        if files:
            prev = files[-1]
            new.begin_phy_offset = new.end_phy_offset = prev.end_phy_offset
            new.begin_timestamp = new.end_timestamp = prev.end_timestamp
            # Both headers now, the full file's first: its count must include the entries this
            # batch just put (its header is otherwise written only after the batch, and only into
            # the new file) before the new file says it follows them (after a crash, the new
            # file's end is where re-indexing starts; one killed before it says so follows its
            # predecessor, see load).
            prev.write_header()
            new.write_header()
            prev.flush()
        with self._lock:
            self.files = [*self.files, new]
        return new

    def put_keys(self, keys: list[tuple[str, int, int]]) -> bool:
        """Index ``(topic#key, phy_offset, store_timestamp)`` triples (same rules as ``put_hashes``)."""
        ok = True
        for key, phy, ts in keys:
            ok = self.put_hashes([index_key_hash(key)], [phy], ts) and ok
        return ok

    def put_hashes(self, hashes: list[int], phys: list[int], ts: int) -> bool:
        """Index key hashes (``index_key_hash``) at their physical offsets, in order. Offsets at
        or below the last file's end are skipped (already indexed: rebuilding is idempotent).
        False if a file cannot be created."""
        f = self.files[-1] if self.files else self._writable_file()
        if f is None:
            return False
        # an empty file after a roll-over follows its predecessor's end; the first file nothing
        end = f.end_phy_offset if f.index_count > 1 or f.end_phy_offset > 0 else -1
        for h, phy in zip(hashes, phys, strict=True):
            if phy <= end:
                continue
            while not f.put_key(h, phy, ts):
                log.warning("index file %s is full, rolling to a new one", f.path)
                nf = self._writable_file()
                if nf is None:
                    return False
                f = nf
        f.write_header()
        return True

    def query_offset(self, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Physical offsets of ``key`` (already ``topic#key``) within [begin, end] ms, newest first."""
        max_num = min(max_num, self.max_msgs_num_batch)
        out: list[int] = []
        h = index_key_hash(key)
        files = self.files
        last_ts = last_phy = 0
        for f in reversed(files):
            if f is files[-1]:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offset(out, h, max_num, begin, end)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return QueryOffsetResult(out, last_ts, last_phy)

    def delete_expired_file(self, phy_min_offset: int) -> int:
        """Delete index files (all but the last) whose entries all point below ``phy_min_offset``."""
        files = self.files
        doomed = [f for f in files[:-1] if f.end_phy_offset < phy_min_offset]
        if not doomed:
            return 0
        with self._lock:
            self.files = [f for f in self.files if f not in doomed]
        for f in doomed:
            log.info("delete expired index file %s", f.path)
            f.destroy()
        return len(doomed)

    def flush(self) -> int:
        """Flush every file; returns the end timestamp now safe on disk (for the checkpoint)."""
        files = self.files
        for f in files:
            f.flush()
        return files[-1].end_timestamp if files else 0

    def drop_pages(self) -> None:
        for f in self.files:
            f.drop_pages()

    def truncate_past(self, phy_offset: int) -> None:
        """Recovery: files that start at or past ``phy_offset`` are deleted."""
        keep: list[IndexFile] = []
        for f in self.files:
            if f.begin_phy_offset >= phy_offset and f.index_count > 1:
                log.info("delete index file %s: it starts past the commit log end %d", f.path, phy_offset)
                f.destroy()
            else:
                keep.append(f)
        if keep and keep[-1].end_phy_offset >= phy_offset:
            # Entries at or below end_phy_offset count as indexed: it must name the last entry
            # still in the log (a record start), not the log's end, where the next record goes.
            last = keep[-1]
            below = last.last_phy_below(phy_offset)
            if below is None:  # no entry (an empty file)
                below = last.begin_phy_offset if last.begin_phy_offset < phy_offset else 0
            last.end_phy_offset = below
            last.write_header()
        self.files = keep

    def shutdown(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for f in files:
            f.close()

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for f in files:
            f.destroy()
