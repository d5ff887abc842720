"""The commit log's recovery (RocketMQ ``CommitLog.recoverNormally``/``recoverAbnormally``).

Owns finding the end of valid data in ``<root>/commitlog`` after a restart, truncating what
follows it, and re-dispatching what the consume queues and the index may lack. Split from
``commit_log.py``, which keeps the append path; ``DefaultMessageStore`` chooses which recovery
runs (the abort file, the checkpoint), recovers the consume queues before it and the
topic-queue table after, as Java's ``DefaultMessageStore.recover`` does. Imports: the layout
(``finchmq.protocol.stored``) and the store's files, queues, index and dispatch.

Strategy:
    With finchmq's clean-shutdown record in the checkpoint, the end of the log is taken from it
    (after checking the bytes there); otherwise the last segments are scanned (Java
    ``recoverNormally``) or, after a crash, everything from the last segment whose first message
    is older than the checkpoint (``recoverAbnormally``), verifying magic, sizes, physical
    offset, store time and body CRC (``check_record``, Java ``checkMessageAndReturnSize``). A bad
    record ends the log there: it and everything after it is truncated (the tail is re-zeroed)
    and reported as ``StoreCorruptedError(path, offset)``.
    The scan walks runs of ordinary records with ``_walk``, ``check_record``'s checks inlined
    for speed, and leaves anything unusual to ``check_record`` (tests/store/test_recovery_scan.py
    pins the two to each other and to ``decode_stored``).
"""

from __future__ import annotations

import logging
import mmap
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.stored import (
    BLANK_MAGIC_CODE,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    MIN_STORED_SIZE,
    StoredLayout,
    stored_body_crc,
)

from .commit_log import END_FILE_MIN_BLANK_LENGTH
from .config import BrokerRole
from .status import StoreCorruptedError

if TYPE_CHECKING:
    from .checkpoint import StoreCheckpoint
    from .commit_log import CommitLog
    from .consume_queue import ConsumeQueue
    from .index import IndexService
    from .mapped_file import MappedFile
    from .mapped_file_queue import MappedFileQueue

__all__ = [
    "CommitLogRecovery",
    "RecoveryResult",
    "ScanResult",
    "check_record",
    "find_abnormal_start",
    "is_clean_end",
    "partial_copy_start",
    "scan",
    "set_end",
]

log = logging.getLogger(__name__)

_HEAD: Final = StoredLayout.SIZE_MAGIC
_SCAN_HEADS: Final = StoredLayout.SCAN_HEADS
_SCAN_V4: Final = _SCAN_HEADS[0]
_SYS_FLAG: Final = StoredLayout.SYS_FLAG
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_HALF: Final = MessageSysFlag.TRANSACTION_PREPARED_TYPE  # the bit set in PREPARED and ROLLBACK


# ---------------------------------------------------------------------------------------------
# Checking records


def check_record(mf: MappedFile, pos: int, check_crc: bool) -> tuple[int, str | None]:
    """Validate the record at ``pos`` of ``mf`` (Java ``checkMessageAndReturnSize``'s checks, and
    PHYSICALOFFSET and STORETIMESTAMP).

    Returns ``(size, None)`` for a good message, ``(0, None)`` for the BLANK filler or the
    segment's end, ``(-1, None)`` for the clean end of data (a zero head), and ``(-1, reason)``
    for a bad record. ``_walk`` is the same checks inlined for the common record; this is the
    reference, and says what is wrong.
    """
    view = mf.view
    room = mf.file_size - pos
    if room < END_FILE_MIN_BLANK_LENGTH:
        return (0, None) if room == 0 else (-1, f"{room} stray bytes at segment end")
    total, magic = _HEAD.unpack_from(view, pos)
    if magic == BLANK_MAGIC_CODE:
        if total != room:
            return -1, f"BLANK record of TOTALSIZE {total} does not end the segment"
        return 0, None
    if magic != MESSAGE_MAGIC_CODE:
        if total == 0 and magic == 0:
            return -1, None
        return -1, f"bad magic code 0x{magic & 0xFFFFFFFF:08X} (TOTALSIZE {total})"
    if not MIN_STORED_SIZE <= total <= room:
        return -1, f"TOTALSIZE {total} is outside {MIN_STORED_SIZE}..{room}"
    hosts = (_I32.unpack_from(view, pos + _SYS_FLAG)[0] >> 4) & 3
    head = _SCAN_HEADS[hosts]
    if total < head.size + 3:
        return -1, f"bad TOTALSIZE: {total} is too small for the IPv6 hosts in SYSFLAG"
    _, _, body_crc, phy, _, store_timestamp, body_len = head.unpack_from(view, pos)
    end = pos + total
    topic_at = pos + head.size + body_len
    if body_len < 0 or topic_at + 3 > end:
        return -1, f"bad BODYLENGTH: {body_len} does not fit TOTALSIZE {total}"
    topic_len = view[topic_at]
    props_at = topic_at + 1 + topic_len
    if topic_len > MAX_TOPIC_LENGTH or props_at + 2 > end:
        return -1, f"bad TOPICLENGTH: {topic_len} does not fit TOTALSIZE {total}"
    props_len = _I16.unpack_from(view, props_at)[0]
    if props_at + 2 + props_len != end:  # Java: TOTALSIZE != calMsgLength(...)
        return -1, (
            f"bad PROPERTIESLENGTH: {props_len} ends the record at {props_at + 2 + props_len - pos}, "
            f"TOTALSIZE {total} (BODYLENGTH {body_len}, TOPICLENGTH {topic_len})"
        )
    if check_crc:
        crc = stored_body_crc(view[pos + head.size : topic_at])
        if crc != body_crc:
            return -1, f"bad BODYCRC: {body_crc} != CRC32 of the body {crc}"
    if phy != mf.file_from_offset + pos:
        return -1, f"PHYSICALOFFSET {phy} != {mf.file_from_offset + pos}"
    if store_timestamp <= 0:
        return -1, f"STORETIMESTAMP {store_timestamp} is not set"
    return total, None


def _walk(view: mmap.mmap, base: int, pos: int, limit: int, check_crc: bool) -> tuple[int, int, int]:
    """Walk the good IPv4-host messages starting before ``limit`` from ``pos`` of a segment at
    ``base``: ``check_record``'s checks inlined, no per-record object. Stops at the first record
    it does not accept (a BLANK, the end of data, IPv6 hosts, any failed check), which
    ``check_record`` then examines. Returns (where it stopped, messages, half messages).
    ``view`` is the segment's mmap (``MappedFile.mm``): indexing and slicing it is cheaper.

    Records mostly come in runs of one shape (body and topic lengths): each is read with one
    unpack through PROPERTIESLENGTH, guessing the previous record's shape, and re-read with the
    head alone when the guess is wrong.
    """
    unpack = _SCAN_V4.unpack_from
    shape = StoredLayout.scan_through_properties_length
    i16 = _I16.unpack_from
    crc32 = zlib.crc32
    head = _SCAN_V4.size
    fixed = head + 3  # TOPICLENGTH and PROPERTIESLENGTH
    size = len(view)
    guess = shape(0, 0).unpack_from
    guess_body = guess_topic = 0
    count = halves = 0
    while pos < limit:
        try:
            total, magic, body_crc, phy, sys_flag, store_timestamp, body_len, topic_len, props_len = guess(
                view, pos
            )
        except struct.error:  # the guessed shape reaches past the segment: re-read
            body_len = -1
        if body_len != guess_body or topic_len != guess_topic:
            try:
                total, magic, body_crc, phy, sys_flag, store_timestamp, body_len = unpack(view, pos)
                topic_at = pos + head + body_len
                if body_len < 0 or topic_at + 3 > pos + total:
                    break
                topic_len = view[topic_at]
                props_len = i16(view, topic_at + 1 + topic_len)[0]
            except (struct.error, IndexError):  # less than a head left: check_record says what it is
                break
            guess = shape(body_len, topic_len).unpack_from
            guess_body, guess_topic = body_len, topic_len
        end = pos + total
        if (
            magic != MESSAGE_MAGIC_CODE
            or sys_flag & 0x30
            or phy - pos != base
            or store_timestamp <= 0
            or fixed + body_len + topic_len + props_len != total  # Java: TOTALSIZE == calMsgLength
            or props_len < 0
            or topic_len > MAX_TOPIC_LENGTH
            or end > size
        ):
            break
        # stored_body_crc, inlined: one call per record is a tenth of the walk
        if check_crc and crc32(view[pos + head : pos + head + body_len]) & 0x7FFFFFFF != body_crc:
            break
        if sys_flag & _HALF:
            halves += 1
        count += 1
        pos = end
    return pos, count, halves


# ---------------------------------------------------------------------------------------------
# Finding the end of the log


class ScanResult:
    """What ``scan`` found: the end of valid data, the corruption that ended it, and the messages
    scanned (and those starting before the mark, and the half messages among them)."""

    __slots__ = ("corrupt", "end", "halves_before_mark", "records", "records_before_mark")

    def __init__(self) -> None:
        self.end = 0
        self.corrupt: StoreCorruptedError | None = None
        self.records = 0
        self.records_before_mark = 0
        self.halves_before_mark = 0


def scan(mfq: MappedFileQueue, start_index: int, check_crc: bool, mark: int = -1) -> ScanResult:
    """Scan the commit log forward from segment ``start_index`` to the end of valid data and the
    corruption that ended it (None for a clean end), counting the messages and half (prepared or
    rolled-back transaction) messages that start before ``mark``."""
    files = mfq.files
    result = ScanResult()
    if not files:
        return result
    index = start_index
    mf = files[index]
    pos = 0
    while True:
        base = mf.file_from_offset
        data = mf.mm
        if mark > base:
            pos, records, halves = _walk(data, base, pos, min(mark - base, mf.file_size), check_crc)
            result.records_before_mark += records
            result.halves_before_mark += halves
            result.records += records
        pos, records, _ = _walk(data, base, pos, mf.file_size, check_crc)
        result.records += records
        size, reason = check_record(mf, pos, check_crc)
        if size > 0:
            if mf.file_from_offset + pos < mark:
                result.records_before_mark += 1
                if _I32.unpack_from(mf.view, pos + _SYS_FLAG)[0] & _HALF:
                    result.halves_before_mark += 1
            result.records += 1
            pos += size
        elif size == 0:
            index += 1
            if index >= len(files):
                # The log ends with a full segment: keep the BLANK; the next put rolls over.
                result.end = mf.file_from_offset + mf.file_size
                return result
            mf = files[index]
            pos = 0
        else:
            result.end = mf.file_from_offset + pos
            if reason is not None:
                result.corrupt = StoreCorruptedError(str(mf.path), pos, reason)
            return result


def partial_copy_start(mfq: MappedFileQueue, end: int) -> tuple[MappedFile, int] | None:
    """Where the record ending at ``end`` starts (its segment and position there), if its last
    byte is zero (else None).

    A slave appends the master's bytes as they come, so a crash can leave the last record
    partly copied, its missing tail still zeros. When the cut falls inside the properties,
    every check passes (BODYCRC covers the body only, as in Java) and the scan takes the
    zeros as the record's end: the slave would then ask the master for what follows and
    keep the broken copy. A stored record ends with the last property value or the topic,
    never a zero byte, unless a value ends in NUL (a slave then re-fetches it needlessly).
    Records before ``end`` were checked by the scan: hopping by TOTALSIZE is safe."""
    mf = mfq.find_mapped_file_by_offset(end - 1) if end > 0 else None
    if mf is None:
        return None
    stop = end - mf.file_from_offset
    if mf.view[stop - 1] != 0:
        return None
    pos = 0
    while pos < stop:
        total, magic = _HEAD.unpack_from(mf.view, pos)
        if magic != MESSAGE_MAGIC_CODE or total <= 0:
            return None  # a BLANK: the log ends with a full segment
        if pos + total == stop:
            return mf, pos
        pos += total
    return None


def find_abnormal_start(mfq: MappedFileQueue, min_timestamp: int) -> int:
    """Index of the last segment whose first message is stored at or before ``min_timestamp``
    (Java ``isMappedFileMatchedRecover``), 0 if none."""
    files = mfq.files
    for i in range(len(files) - 1, -1, -1):
        view = files[i].view
        _, magic = _HEAD.unpack_from(view, 0)
        if magic != MESSAGE_MAGIC_CODE:
            continue
        ts = StoredLayout.read_store_timestamp(view)
        if ts and ts <= min_timestamp:
            return i
    return 0


def is_clean_end(mfq: MappedFileQueue, offset: int) -> bool:
    """True if ``offset`` is a plausible end of the log: a zero head, a segment start or end."""
    files = mfq.files
    if not files:
        return offset == 0
    if offset < files[0].file_from_offset or offset > files[-1].file_from_offset + mfq.file_size:
        return False
    mf = mfq.find_mapped_file_by_offset(offset)
    if mf is None:
        return offset == files[-1].file_from_offset + mfq.file_size
    pos = offset - mf.file_from_offset
    if pos + 8 > mf.file_size:
        return False
    total, magic = _HEAD.unpack_from(mf.view, pos)
    return bool((total == 0 and magic == 0) or magic == BLANK_MAGIC_CODE)


def set_end(mfq: MappedFileQueue, offset: int) -> None:
    """Make ``offset`` the end of the log: later data is deleted, the tail re-zeroed (Java
    ``truncateDirtyFiles`` and the flushed and committed positions)."""
    mfq.truncate_dirty_files(offset)
    for mf in mfq.files:
        if mf.file_from_offset + mf.file_size <= offset:
            mf.set_positions(mf.file_size)
    mfq.flushed_where = mfq.committed_where = offset
    if mfq.files:
        last = mfq.files[-1]
        last.set_positions(offset - last.file_from_offset)


# ---------------------------------------------------------------------------------------------
# Recovering


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What a recovery found wrong (``report``) and did (``counts``: messages ``scanned``, the log
    ``end``, where re-dispatch began, ``rebuild_from``, and how many records it ``rebuilt``)."""

    report: list[StoreCorruptedError]
    counts: dict[str, int]


class CommitLogRecovery:
    """Recovery of ``commit_log`` and of what derives from it (the consume queues, already
    recovered on their own, and the index), with the checkpoint the last run left."""

    def __init__(
        self,
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        consume_queues: list[ConsumeQueue],
        index_service: IndexService | None,
    ) -> None:
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.consume_queues = consume_queues
        self.index_service = index_service

    def recover_normally(self, max_phy_offset_of_consume_queue: int) -> RecoveryResult:
        """After a clean shutdown (Java ``recoverNormally``): the log ends at the checkpoint's
        clean-shutdown offset if the bytes there agree, else where a scan of the last three
        segments stops; what the queues may lack past their end is dispatched again."""
        cp = self.checkpoint
        mfq = self.commit_log.mapped_file_queue
        clean = cp.clean_commit_log_max_offset
        if clean is not None and is_clean_end(mfq, clean):
            dispatched = cp.clean_dispatched_offset
            rebuild_from = dispatched if dispatched is not None else max_phy_offset_of_consume_queue
            return self._finish("normal (checkpoint)", clean, rebuild_from, None)
        found = scan(mfq, max(0, len(mfq.files) - 3), self.commit_log.config.check_crc_on_recover)
        return self._finish("normal (scan)", found.end, max_phy_offset_of_consume_queue, found)

    def recover_abnormally(self, max_phy_offset_of_consume_queue: int) -> RecoveryResult:
        """After a crash (Java ``recoverAbnormally``): scan from the last segment whose first
        message is older than the checkpoint (the index's time too when ``message_index_safe``),
        then re-dispatch from there what the queues and the index do not verifiably hold."""
        cfg = self.commit_log.config
        mfq = self.commit_log.mapped_file_queue
        max_cq_phy = max_phy_offset_of_consume_queue
        min_ts = self.checkpoint.get_min_timestamp()
        if cfg.message_index_enable and cfg.message_index_safe:
            min_ts = self.checkpoint.get_min_timestamp_index()
        start_index = find_abnormal_start(mfq, min_ts)
        seg_start = mfq.files[start_index].file_from_offset if mfq.files else 0
        found = scan(mfq, start_index, cfg.check_crc_on_recover, mark=max_cq_phy)
        # Java re-dispatches every message from the segment start (the queues and the index
        # skip what they hold); rebuild_from narrows that to what they may not hold.
        rebuild_from = min(seg_start, max_cq_phy) if max_cq_phy >= 0 else seg_start
        queues_reach = seg_start if 0 <= seg_start <= max_cq_phy else -1
        return self._finish("abnormal", found.end, rebuild_from, found, queues_reach)

    def _finish(
        self, mode: str, end: int, rebuild_from: int, found: ScanResult | None, queues_reach: int = -1
    ) -> RecoveryResult:
        """Truncate the log, the queues and the index at ``end`` (earlier for a slave's partial
        copy) and re-dispatch from ``rebuild_from``, or, when the consume queues reach back to
        the start of the abnormal scan (``queues_reach``, else -1), from what they lack."""
        cl = self.commit_log
        mfq = cl.mapped_file_queue
        files = mfq.files
        report: list[StoreCorruptedError] = []
        corrupt = found.corrupt if found is not None else None
        if corrupt is None and found is not None and cl.config.broker_role is BrokerRole.SLAVE:
            partial = partial_copy_start(mfq, end)
            if partial is not None:
                mf, pos = partial
                corrupt = StoreCorruptedError(
                    str(mf.path),
                    pos,
                    "slave: the last record ends in zero bytes, a partial copy; the master sends it again",
                )
                end = mf.file_from_offset + pos
        if corrupt is not None:
            report.append(corrupt)
            log.warning("commit log corrupted: %s; truncating the log at that record", corrupt)
        old_end = mfq.get_max_wrote_position() if files else 0
        if files and old_end > end and corrupt is not None:
            report.append(
                StoreCorruptedError(
                    str(files[-1].path),
                    old_end - files[-1].file_from_offset,
                    f"up to {old_end - end} bytes after commit-log offset {end} discarded",
                )
            )
        set_end(mfq, end)
        for cq in self.consume_queues:
            cq.truncate_dirty_logic_files(end)
        if self.index_service is not None:
            self.index_service.truncate_past(end)
        keyed_only_before = 0
        if found is not None and queues_reach >= 0:
            rebuild_from, keyed_only_before = self._dispatched_up_to(found, queues_reach, end, rebuild_from)
        min_off = max(cl.get_min_offset(), 0)
        rebuild_from = min(max(rebuild_from, min_off), end)
        count = cl.reput.rebuild(mfq, rebuild_from, end, keyed_only_before)
        cl.reput.dispatched_offset = end
        scanned = found.records if found is not None else 0
        log.info(
            "recovered %s: commit log [%d, %d), %d messages scanned, rebuilt %d records from %d",
            mode,
            min_off,
            end,
            scanned,
            count,
            rebuild_from,
        )
        counts = {"scanned": scanned, "end": end, "rebuild_from": rebuild_from, "rebuilt": count}
        return RecoveryResult(report, counts)

    def _dispatched_up_to(
        self, found: ScanResult, seg_start: int, end: int, fallback: int
    ) -> tuple[int, int]:
        """Where the abnormal recovery's re-dispatch can start, after the scan from ``seg_start``,
        and up to where only messages with keys need it (for the index).

        The consume queues hold every message of [seg_start, their max offset) if their units
        from ``seg_start`` on are as many as the messages the scan found there, less the half
        messages (which get no unit): then only what follows needs dispatching, and, with the
        index on, the keyed messages after the last indexed one. Else ``fallback`` (the segment
        start, as Java) for everything."""
        queues = self.consume_queues
        units = 0
        for cq in queues:
            n = cq.units_from(seg_start)
            if n is None:
                return fallback, 0
            units += n
        if units != found.records_before_mark - found.halves_before_mark:
            log.warning(
                "consume queues hold %d of the %d messages from commit-log offset %d: re-dispatching all",
                units,
                found.records_before_mark - found.halves_before_mark,
                seg_start,
            )
            return fallback, 0
        queues_end = min(max(cq.max_physic_offset for cq in queues), end)
        if self.index_service is None:
            return queues_end, 0
        return min(queues_end, max(self.index_service.end_phy_offset, seg_start)), queues_end
