"""Abnormal recovery's fast scan (issue 15) against real files: torn tails, bad CRCs, lying size
fields, segment ends (BLANK), half messages, and consume queues or an index that lag the log.

The scan walks runs of same-shape records with one unpack each (``recovery._walk``) and
leaves anything unusual to ``recovery.check_record``; the property tests check that the two
agree, and agree with ``decode_stored`` (the one decoder), on any corrupted byte of a uniform log
and on logs of any record shapes, hosts, half messages and segment ends.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.stored import MESSAGE_MAGIC_CODE, StoredLayout, decode_stored
from finchmq.store import DefaultMessageStore, MessageStoreConfig
from finchmq.store.commit_log import CommitLog
from finchmq.store.inner import LOCAL_HOST
from finchmq.store.mapped_file_queue import MappedFileQueue
from finchmq.store.recovery import check_record, scan

from .conftest import SEGMENT, batch, make_abnormal, msg, read_queue, reopen, small_config

BODY = 128


def fill(
    cfg: MessageStoreConfig, n: int, queues: int = 2, keys: list[str] | None = None
) -> dict[int, list[bytes]]:
    """``n`` messages of ``BODY`` bytes with KEYS (appended to ``keys``), in batches of 4 and
    single puts; the bodies by queue."""
    by_queue: dict[int, list[bytes]] = {q: [] for q in range(queues)}
    with DefaultMessageStore(cfg) as s:
        i = 0
        while i < n:
            q = i % queues
            if i % 3 == 0 and i + 4 <= n:
                bodies = [os.urandom(BODY) for _ in range(4)]
                assert s.put_messages(batch("T", bodies, queue_id=q, KEYS=f"k{i}")).is_ok()
            else:
                bodies = [os.urandom(BODY)]
                assert s.put_message(msg("T", bodies[0], queue_id=q, KEYS=f"k{i}")).is_ok()
            by_queue[q] += bodies
            if keys is not None:
                keys.append(f"k{i}")
            i += len(bodies)
    return by_queue


def assert_queues_then_next_put(s: DefaultMessageStore, by_queue: dict[int, list[bytes]]) -> None:
    """Every queue reads back its bodies, and a new put on queue 1 takes the next queue offset."""
    for q, bodies in by_queue.items():
        assert read_queue(s, "T", q) == bodies
    r = s.put_message(msg("T", b"next", queue_id=1))
    assert r.append_message_result is not None
    assert r.append_message_result.logics_offset == len(by_queue[1])


def records(cfg: MessageStoreConfig) -> list[tuple[Path, int, int]]:
    """(segment, position, TOTALSIZE) of every message, from the files."""
    out = []
    for seg in sorted(cfg.commit_log_dir.iterdir()):
        data = seg.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            total, magic = StoredLayout.SIZE_MAGIC.unpack_from(data, pos)
            if magic != MESSAGE_MAGIC_CODE or total <= 0:
                break
            out.append((seg, pos, total))
            pos += total
    return out


def patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


@pytest.fixture
def big_cfg(tmp_path: Path) -> MessageStoreConfig:
    """Segments of 256 KiB: about a thousand 128-byte messages each."""
    return small_config(tmp_path / "store", mapped_file_size_commit_log=4 * SEGMENT)


# ---------------------------------------------------------------------------------------------
# The fast walk against check_record and decode_stored, on every kind of corrupted byte


@pytest.fixture(scope="module")
def scanned_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CommitLog, int]]:
    cfg = small_config(tmp_path_factory.mktemp("scan") / "store", mapped_file_size_commit_log=4 * SEGMENT)
    fill(cfg, 600)
    s = DefaultMessageStore(cfg)
    s.load()
    try:
        yield s.commit_log, s.get_max_phy_offset()
    finally:
        s.shutdown()


def reference_scan(cl: CommitLog, check_crc: bool, mark: int) -> tuple[int, int | None, str | None, int]:
    """The scan with check_record alone, record by record: (end, bad offset, reason, records before mark)."""
    mf = cl.mapped_file_queue.files[0]
    pos = before = 0
    while True:
        size, reason = check_record(mf, pos, check_crc)
        if size <= 0:
            return pos, (pos if reason else None), reason, before
        before += pos < mark
        pos += size


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    record=st.integers(0, 599),
    at=st.integers(0, 300),
    xor=st.integers(1, 255),
    check_crc=st.booleans(),
    mark_record=st.integers(0, 600),
)
def test_fast_walk_agrees_with_check_record_and_the_decoder(
    scanned_store: tuple[CommitLog, int], record: int, at: int, xor: int, check_crc: bool, mark_record: int
) -> None:
    cl, end = scanned_store
    mf = cl.mapped_file_queue.files[0]
    view = mf.view
    starts = []
    pos = 0
    while pos < end:
        starts.append(pos)
        pos += StoredLayout.SIZE_MAGIC.unpack_from(view, pos)[0]
    record = min(record, len(starts) - 1)
    start = starts[record]
    size = StoredLayout.SIZE_MAGIC.unpack_from(view, start)[0]
    flip = start + at % size
    mark = starts[mark_record] if mark_record < len(starts) else end
    original = view[flip]
    view[flip] = original ^ xor
    try:
        got = scan(cl.mapped_file_queue, 0, check_crc, mark=mark)
        ref_end, ref_bad, ref_reason, ref_before = reference_scan(cl, check_crc, mark)
        assert got.end == ref_end
        bad = (got.corrupt.offset, got.corrupt.reason) if got.corrupt is not None else (None, None)
        assert bad == (ref_bad, ref_reason)
        assert got.records_before_mark == ref_before
        # The decoder agrees on everything both check (it also checks UTF-8 and host ports,
        # which Java's recovery does not; recovery also checks PHYSICALOFFSET and STORETIMESTAMP).
        error: str | None = None
        try:
            decode_stored(view[: start + size], start, verify_crc=check_crc)
        except MessageDecodeError as exc:
            error = exc.field or "?"
        if got.end > start:
            assert error in (None, "TOPIC", "PROPERTIES", "BORNHOST", "STOREHOST")
        else:
            assert got.end == start
            reason = got.corrupt.reason if got.corrupt is not None else ""
            assert error is not None or reason.split()[0] in ("PHYSICALOFFSET", "STORETIMESTAMP")
    finally:
        view[flip] = original
    assert scan(cl.mapped_file_queue, 0, check_crc).end == end


def reference_scan_all(mfq: MappedFileQueue, check_crc: bool, mark: int) -> tuple[object, ...]:
    """``scan`` from the first segment with check_record alone, record by record and segment by
    segment: (end, bad (path, offset, reason) or None, messages, before mark, halves before mark)."""
    files = mfq.files
    index = pos = records = before = halves = 0
    while True:
        mf = files[index]
        size, reason = check_record(mf, pos, check_crc)
        if size > 0:
            records += 1
            if mf.file_from_offset + pos < mark:
                before += 1
                sys_flag = int.from_bytes(
                    mf.view[pos + StoredLayout.SYS_FLAG : pos + StoredLayout.SYS_FLAG + 4]
                )
                halves += bool(sys_flag & MessageSysFlag.TRANSACTION_PREPARED_TYPE)
            pos += size
        elif size == 0 and index + 1 < len(files):
            index += 1
            pos = 0
        else:
            end = mf.file_from_offset + (mf.file_size if size == 0 else pos)
            bad = (str(mf.path), pos, reason) if reason is not None else None
            return end, bad, records, before, halves


_V6 = pack_host("2001:db8::5", 10911)
_TRANSACTION = st.sampled_from(
    [0, 0, MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE, 0xC]
)
_records = st.lists(
    st.tuples(
        st.sampled_from(["T", "TopicTest", "主题"]),
        st.integers(0, 300),  # body length
        st.sampled_from(
            [{}, {"KEYS": "k"}, {"TAGS": "TagA", "UNIQ_KEY": "7F00000100002A9F0000000000000001"}]
        ),
        st.booleans(),  # IPv6 born host
        st.booleans(),  # IPv6 store host
        _TRANSACTION,
        st.integers(1, 3),  # 1: a single put; more: a batch of that many
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    puts=_records,
    flip=st.none() | st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
    mark_at=st.floats(0, 1),
    check_crc=st.booleans(),
)
def test_scan_of_any_log_agrees_with_check_record_record_by_record(
    tmp_path_factory: pytest.TempPathFactory,
    puts: list[tuple[str, int, dict[str, str], bool, bool, int, int]],
    flip: tuple[float, int] | None,
    mark_at: float,
    check_crc: bool,
) -> None:
    """Runs of changing shapes, IPv6 hosts (which ``_walk`` leaves to ``check_record``), half
    messages before and after the mark, BLANK fillers between 4 KiB segments, and at most one
    flipped byte anywhere in the written log or just past its end."""
    cfg = small_config(tmp_path_factory.mktemp("scan-any") / "store", mapped_file_size_commit_log=4096)
    with DefaultMessageStore(cfg) as s:
        for topic, body_len, props, born_v6, store_v6, tran, count in puts:
            born, store = (_V6 if born_v6 else LOCAL_HOST), (_V6 if store_v6 else LOCAL_HOST)
            if count == 1:
                m = msg(topic, os.urandom(body_len), **props)
                m.born_host, m.store_host, m.sys_flag = born, store, tran
                assert s.put_message(m).is_ok()
            else:
                b = batch(topic, [os.urandom(body_len)] * count, **props)
                b.born_host, b.store_host = born, store
                assert s.put_messages(b).is_ok()
    s = DefaultMessageStore(cfg)
    s.load()
    try:
        mfq = s.commit_log.mapped_file_queue
        end = s.get_max_phy_offset()
        starts = [0]
        while starts[-1] < end:  # record starts, a BLANK's too; the mark is one of them
            mf = mfq.find_mapped_file_by_offset(starts[-1])
            assert mf is not None
            starts.append(
                starts[-1] + StoredLayout.SIZE_MAGIC.unpack_from(mf.view, starts[-1] - mf.file_from_offset)[0]
            )
        mark = starts[int(mark_at * (len(starts) - 1))]
        if flip is not None:
            where, xor = flip
            offset = int(where * min(end + 8, len(mfq.files) * 4096))
            mf = mfq.find_mapped_file_by_offset(offset)
            assert mf is not None
            mf.view[offset - mf.file_from_offset] ^= xor
        got = scan(mfq, 0, check_crc, mark=mark)
        bad = (got.corrupt.path, got.corrupt.offset, got.corrupt.reason) if got.corrupt is not None else None
        assert (got.end, bad, got.records, got.records_before_mark, got.halves_before_mark) == (
            reference_scan_all(mfq, check_crc, mark)
        )
        if flip is None:
            assert (got.end, got.corrupt) == (end, None)
    finally:
        s.shutdown()


# ---------------------------------------------------------------------------------------------
# Restarts after a crash


def test_sigkill_like_restart_scans_everything_and_redispatches_nothing(big_cfg: MessageStoreConfig) -> None:
    by_queue = fill(big_cfg, 1500)
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        assert s.recovery_report == []
        counts = s.recovery_counts
        assert counts["scanned"] == 1500
        # the queues hold everything: only the last indexed message is looked at again
        assert counts["rebuilt"] <= 1 and counts["rebuild_from"] >= counts["end"] - 300
        assert_queues_then_next_put(s, by_queue)
    finally:
        s.shutdown()


def test_torn_tail_mid_record_is_truncated(big_cfg: MessageStoreConfig) -> None:
    by_queue = fill(big_cfg, 300, queues=1)
    seg, pos, total = records(big_cfg)[-1]
    patch(seg, pos + 40, bytes(total - 40))  # the head is there, the rest of the record is not
    make_abnormal(big_cfg)
    s = reopen(big_cfg)
    try:
        [bad] = [p for p in s.recovery_report if p.offset == pos]
        assert bad.path == str(seg) and bad.reason.startswith("bad")
        assert s.get_max_phy_offset() == int(seg.name) + pos
        assert read_queue(s, "T", 0) == by_queue[0][:-1]
        r = s.put_message(msg("T", b"after", queue_id=0))
        assert r.append_message_result is not None and r.append_message_result.logics_offset == 299
        assert read_queue(s, "T", 0)[-1] == b"after"
    finally:
        s.shutdown()


@pytest.mark.parametrize("check_crc", [True, False])
def test_bad_crc_in_the_middle_ends_the_log_there_only_when_checked(
    big_cfg: MessageStoreConfig, check_crc: bool
) -> None:
    cfg = dataclasses.replace(big_cfg, check_crc_on_recover=check_crc)
    by_queue = fill(cfg, 400, queues=1)
    seg, pos, _ = records(cfg)[150]
    at = pos + StoredLayout.SCAN_HEADS[0].size + 7  # a body byte: only BODYCRC can tell
    patch(seg, at, bytes((seg.read_bytes()[at] ^ 0x5A,)))
    make_abnormal(cfg, from_first_segment=True)
    s = reopen(cfg)
    try:
        if check_crc:  # Java checkCRCOnRecover: the record and everything after it are dropped
            [bad] = [p for p in s.recovery_report if p.offset == pos]
            assert "BODYCRC" in bad.reason
            assert read_queue(s, "T", 0) == by_queue[0][:150]
        else:  # not checked: the record is kept, as Java does
            assert s.recovery_report == []
            assert s.get_max_offset_in_queue("T", 0) == 400
    finally:
        s.shutdown()


# (field, position in a record with IPv4 hosts, the lie as a big-endian int of that width)
_LIES = [
    ("TOTALSIZE", 0, 4, +8),
    ("TOTALSIZE", 0, 4, -8),
    ("TOTALSIZE", 0, 4, +100_000_000),
    ("BODYLENGTH", 84, 4, +1),
    ("BODYLENGTH", 84, 4, -1),
    ("BODYLENGTH", 84, 4, -(2**31) - BODY),  # negative
    ("TOPICLENGTH", 88 + BODY, 1, +1),
    ("PROPERTIESLENGTH", 88 + BODY + 2, 2, +3),
    ("PROPERTIESLENGTH", 88 + BODY + 2, 2, -(2**15)),  # negative as an int16
]


@pytest.mark.parametrize(("field", "at", "width", "delta"), _LIES)
def test_a_lying_size_field_ends_the_log_at_its_record(
    big_cfg: MessageStoreConfig, field: str, at: int, width: int, delta: int
) -> None:
    by_queue = fill(big_cfg, 300, queues=1)
    seg, pos, _ = records(big_cfg)[200]
    data = seg.read_bytes()
    value = int.from_bytes(data[pos + at : pos + at + width], "big", signed=True)
    lie = (value + delta) % 2 ** (8 * width)
    patch(seg, pos + at, lie.to_bytes(width, "big"))
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        [bad] = [p for p in s.recovery_report if p.offset == pos]
        assert bad.reason.startswith("bad") or "TOTALSIZE" in bad.reason
        assert read_queue(s, "T", 0) == by_queue[0][:200]
        assert s.get_max_phy_offset() == int(seg.name) + pos
    finally:
        s.shutdown()


def test_blank_filler_moves_the_scan_to_the_next_segment(big_cfg: MessageStoreConfig) -> None:
    by_queue = fill(big_cfg, 3000)  # a bit over 2.5 segments
    segs = sorted(big_cfg.commit_log_dir.iterdir())
    assert len(segs) == 3
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        assert s.recovery_report == []
        assert s.recovery_counts["scanned"] == 3000
        for q, bodies in by_queue.items():
            assert read_queue(s, "T", q) == bodies
    finally:
        s.shutdown()


def test_blank_filler_of_the_wrong_size_ends_the_log_there(big_cfg: MessageStoreConfig) -> None:
    by_queue = fill(big_cfg, 1500)
    first = sorted(big_cfg.commit_log_dir.iterdir())[0]
    in_first = [r for r in records(big_cfg) if r[0] == first]
    _, last_pos, last_total = in_first[-1]
    blank = last_pos + last_total
    data = first.read_bytes()
    total = int.from_bytes(data[blank : blank + 4], "big")
    assert total == len(data) - blank  # the BLANK record: TOTALSIZE to the segment end
    patch(first, blank, (total - 4).to_bytes(4, "big"))
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        [bad] = [p for p in s.recovery_report if p.offset == blank]
        assert "BLANK" in bad.reason
        assert s.get_max_phy_offset() == blank
        got = read_queue(s, "T", 0) + read_queue(s, "T", 1)
        assert len(got) == len(in_first)
        assert set(got) <= set(by_queue[0] + by_queue[1])
        assert len(sorted(big_cfg.commit_log_dir.iterdir())) == 1  # later segments deleted
    finally:
        s.shutdown()


# ---------------------------------------------------------------------------------------------
# Consume queues, index and half messages behind the log


def _zero_last_units(cfg: MessageStoreConfig, queue_id: int, n: int) -> None:
    """Zero the last ``n`` units of a consume queue, as if they had never been written."""
    qdir = cfg.consume_queue_dir / "T" / str(queue_id)
    for path in sorted(qdir.iterdir(), reverse=True):
        data = bytearray(path.read_bytes())
        end = len(data.rstrip(b"\0"))
        end += -end % 20  # a unit's tagsCode may end in zeros
        k = min(n, end // 20)
        data[end - 20 * k : end] = bytes(20 * k)
        path.write_bytes(bytes(data))
        n -= k
        if n == 0:
            return


def test_one_consume_queue_lagging_the_others_is_redispatched(big_cfg: MessageStoreConfig) -> None:
    by_queue = fill(big_cfg, 1500)
    _zero_last_units(big_cfg, 1, 40)  # queue 1 lost its last 40 units, queue 0 has all
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        assert s.recovery_counts["rebuilt"] == 1500  # the counts disagree: re-dispatch all, as Java
        assert_queues_then_next_put(s, by_queue)
    finally:
        s.shutdown()


def test_consume_queue_behind_the_log_is_redispatched_from_where_it_stops(
    big_cfg: MessageStoreConfig,
) -> None:
    by_queue = fill(big_cfg, 1500, queues=1)
    _zero_last_units(big_cfg, 0, 30)  # what a kill between the append and the dispatch leaves
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        assert s.recovery_counts["rebuilt"] == 30
        assert read_queue(s, "T", 0) == by_queue[0]
    finally:
        s.shutdown()


def test_lost_index_is_rebuilt(big_cfg: MessageStoreConfig) -> None:
    keys: list[str] = []
    fill(big_cfg, 1000, keys=keys)
    shutil.rmtree(big_cfg.index_dir)
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        for key in (keys[0], keys[len(keys) // 2], keys[-1]):
            with s.query_message("T", key, 8, 0, 2**62) as q:
                assert q.buffers, key
    finally:
        s.shutdown()


def test_half_messages_have_no_unit_and_do_not_force_a_full_redispatch(big_cfg: MessageStoreConfig) -> None:
    with DefaultMessageStore(big_cfg) as s:
        for i in range(600):
            flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE if i % 5 == 0 else 0
            m = msg("T", os.urandom(BODY), queue_id=0, KEYS=f"k{i}")
            m.sys_flag = flag
            assert s.put_message(m).is_ok()
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        assert s.recovery_report == []
        assert s.recovery_counts["scanned"] == 600
        assert s.recovery_counts["rebuilt"] <= 1
        assert len(read_queue(s, "T", 0)) == 480
    finally:
        s.shutdown()


def test_messages_without_keys_are_not_decoded_again_for_the_index(big_cfg: MessageStoreConfig) -> None:
    with DefaultMessageStore(big_cfg) as s:
        for i in range(500):
            assert s.put_message(msg("T", os.urandom(BODY), queue_id=i % 2)).is_ok()
        assert s.put_message(msg("T", b"keyed", queue_id=0, KEYS="last")).is_ok()
    shutil.rmtree(big_cfg.index_dir)
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        # the index holds nothing: every message is looked at, only the keyed one decoded
        assert s.recovery_counts["rebuild_from"] == 0
        assert s.recovery_counts["rebuilt"] == 1
        with s.query_message("T", "last", 4, 0, 2**62) as q:
            assert len(q.buffers) == 1
        assert len(read_queue(s, "T", 0)) == 251
    finally:
        s.shutdown()


def test_keyless_log_is_not_walked_again_for_the_index(big_cfg: MessageStoreConfig) -> None:
    with DefaultMessageStore(big_cfg) as s:
        for i in range(2500):  # over two segments
            assert s.put_message(msg("T", os.urandom(BODY), queue_id=i % 2)).is_ok()
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        assert s.recovery_report == []
        assert s.recovery_counts["rebuilt"] == 0
        assert len(read_queue(s, "T", 0)) == len(read_queue(s, "T", 1)) == 1250
        assert s.put_message(msg("T", b"k", queue_id=0, KEYS="after")).is_ok()
        with s.query_message("T", "after", 4, 0, 2**62) as q:
            assert len(q.buffers) == 1
    finally:
        s.shutdown()


def test_ipv6_hosts_take_the_careful_path_and_are_checked_the_same(big_cfg: MessageStoreConfig) -> None:
    v6 = pack_host("2001:db8::7", 40001)
    bodies = []
    with DefaultMessageStore(big_cfg) as s:
        for i in range(300):
            m = msg("T", os.urandom(BODY), queue_id=0, KEYS=f"k{i}")
            if i % 3 == 0:
                m.born_host = v6
            if i % 4 == 0:
                m.store_host = v6
            assert s.put_message(m).is_ok()
            bodies.append(m.body)
    seg, pos, _ = records(big_cfg)[264]  # born and store hosts IPv6: BODYLENGTH at 108
    patch(seg, pos + StoredLayout.SCAN_HEADS[3].size - 4, (BODY + 1).to_bytes(4, "big"))
    make_abnormal(big_cfg, from_first_segment=True)
    s = reopen(big_cfg)
    try:
        [bad] = [p for p in s.recovery_report if p.offset == pos]
        assert bad.reason.startswith("bad")
        assert s.recovery_counts["scanned"] == 264
        assert read_queue(s, "T", 0) == bodies[:264]
    finally:
        s.shutdown()
