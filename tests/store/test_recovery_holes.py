"""Abnormal recovery against what a SIGKILL can leave that the fast path must not miss: real
processes killed with SIGKILL, real files, then a restart on the same directory."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path

import pytest

from finchmq.protocol.stored import decode_stored
from finchmq.store import BrokerRole, DefaultMessageStore

from .conftest import msg, read_queue, reopen, small_config
from .crash_writer import body_of
from .test_crash import run_and_kill

REPO = Path(__file__).resolve().parents[2]


def _killed_inside_index_write(root: Path, count: int, key: str, mode: str = "header") -> int:
    """Run ``index_crash_writer`` in ``mode``; how many single messages it put."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.store.index_crash_writer", str(root), mode, str(count), key],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,  # a deadline only a writer that hangs reaches
    )
    assert "KILL" in proc.stdout, proc.stderr
    assert proc.returncode == -9
    return int(proc.stdout.split("COUNT ")[1].split()[0])


def _bodies(store: DefaultMessageStore, key: str) -> list[bytes]:
    out = []
    with store.query_message("T", key, 1000, 0, 2**62) as q:
        for buf in q.buffers:
            out.append(decode_stored(buf).body)
    return out


def test_kill_inside_an_index_write_keeps_every_older_message_findable_by_key(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _killed_inside_index_write(root, 60, "order-1")
    s = reopen(small_config(root))
    try:
        # the last message is re-indexed: its hash slots must still lead to the older entries
        assert sorted(_bodies(s, "order-1")) == sorted([b"m%d" % i for i in range(60)] + [b"last"])
        assert _bodies(s, "Ulast") == [b"last"]
        for i in range(60):
            assert _bodies(s, f"U{i}") == [b"m%d" % i], i
    finally:
        s.shutdown()


def test_stale_hash_slots_of_a_killed_index_write_do_not_hide_entries_later(tmp_path: Path) -> None:
    """The entries past the header are written over by later puts: a hash slot still naming one
    of them would lead its chain into another key's."""
    root = tmp_path / "store"
    _killed_inside_index_write(root, 60, "order-1")
    s = reopen(small_config(root))
    try:
        for i in range(10):
            assert s.put_message(
                msg("T", b"n%d" % i, queue_id=1, KEYS=f"other-{i}", UNIQ_KEY=f"N{i}")
            ).is_ok()
        assert len(_bodies(s, "order-1")) == 61
        for i in range(10):
            assert _bodies(s, f"other-{i}") == [b"n%d" % i]
    finally:
        s.shutdown()


def test_first_message_after_a_truncated_log_is_indexed(tmp_path: Path) -> None:
    """The commit log loses its tail (a torn last record) that the index had already indexed:
    the message then written where the log now ends must be indexed too."""
    cfg = small_config(tmp_path / "store")
    with DefaultMessageStore(cfg) as s:
        for i in range(20):
            assert s.put_message(msg("T", b"m%d" % i * 100, queue_id=0, KEYS=f"k{i}")).is_ok()
        end = s.get_max_phy_offset()
    seg = sorted(cfg.commit_log_dir.iterdir())[-1]
    with open(seg, "r+b") as f:
        f.truncate(end - int(seg.name) - 50)  # the last record loses its end
    cfg.abort_path.write_text("1")  # a crash: abnormal recovery
    s = reopen(cfg)
    try:
        assert s.get_max_phy_offset() < end
        assert _bodies(s, "k19") == []
        assert s.put_message(msg("T", b"after", queue_id=0, KEYS="after")).is_ok()
        assert s.put_message(msg("T", b"after2", queue_id=0, KEYS="after")).is_ok()
        assert sorted(_bodies(s, "after")) == [b"after", b"after2"]
        assert _bodies(s, "k18") == [b"m18" * 100]
    finally:
        s.shutdown()


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_keeps_every_acknowledged_message_findable_by_its_keys(tmp_path: Path, mode: str) -> None:
    """A writer with KEYS and UNIQ_KEY on every message (small index files: many roll-overs, 64
    hash slots: long shared chains), killed at random moments: every acknowledged message is
    found by its UNIQ_KEY, by its own key, and through the key it shares with a seventh of them."""
    rng = random.Random(f"{mode}-keys")
    root = tmp_path / "store"
    acked: dict[int, tuple[int, int]] = {}
    for cycle in range(4):  # ids never reused: a message written but not acknowledged stays stored
        acked.update(run_and_kill(root, mode, cycle * 1_000_000, rng, keys=True))
        s = reopen(small_config(root, max_msgs_num_batch=10**6))
        try:
            ids = sorted(acked)
            sample = set(rng.sample(ids, min(150, len(ids)))) | set(ids[-30:])
            for i in sorted(sample):
                with s.query_message("C", f"U{i}", 4, 0, 2**62) as q:
                    assert [decode_stored(b).body for b in q.buffers] == [body_of(i)], f"U{i}"
                with s.query_message("C", f"k{i}", 4, 0, 2**62) as q:
                    assert [decode_stored(b).body for b in q.buffers] == [body_of(i)], f"k{i}"
            shared = {i for i in acked if i % 7 == 3}
            found: set[int] = set()
            with s.query_message("C", "s3", 10**6, 0, 2**62) as q:
                found = {int(decode_stored(b).body[3:11]) for b in q.buffers}
            assert not shared - found, sorted(shared - found)[:5]
        finally:
            s.shutdown()
    assert len(acked) >= 4 * 30  # the writer wrote across the kills (and index roll-overs)


def test_kill_after_an_index_roll_over_keeps_the_entries_put_into_the_full_file(tmp_path: Path) -> None:
    """A batch fills the index file (flushed by the flush service just before) and rolls over:
    the full file's header must count the batch's entries in it, though only the new file's
    header is written after the batch."""
    root = tmp_path / "store"
    n = _killed_inside_index_write(root, 10, "order-1", mode="roll")
    s = reopen(small_config(root, max_msgs_num_batch=10**6))
    try:
        expected = [b"m%d" % i for i in range(n)] + [b"b%d" % j for j in range(4)]
        assert sorted(_bodies(s, "order-1")) == sorted(expected)
        for j in range(4):
            assert _bodies(s, f"B{j}") == [b"b%d" % j], j
        assert _bodies(s, f"U{n - 1}") == [b"m%d" % (n - 1)]
    finally:
        s.shutdown()


@pytest.mark.parametrize("cut", [0, 1, 9])
def test_slave_drops_a_last_record_copied_only_up_to_its_properties(tmp_path: Path, cut: int) -> None:
    """A slave killed while the last record was partly copied (the cut inside its properties,
    which no checksum covers): recovery must not take the zeros for the record's end, else the
    slave asks the master for what follows and keeps the broken copy for good."""
    cfg = small_config(tmp_path / "store")
    with DefaultMessageStore(cfg) as s:
        for i in range(5):
            assert s.put_message(msg("T", b"m%d" % i, queue_id=0, KEYS=f"k{i}", TAGS="tag")).is_ok()
        end = s.get_max_phy_offset()
        last = s.get_message("g", "T", 0, 4, 1)
        with last:
            start = decode_stored(last.buffers[0]).commit_log_offset
    seg = sorted(cfg.commit_log_dir.iterdir())[-1]
    missing = 1 + cut  # the bytes the slave had not received yet read as zeros
    with open(seg, "r+b") as f:
        f.seek(end - int(seg.name) - missing)
        f.write(bytes(missing))
    cfg.abort_path.write_text("1")
    slave = dataclasses.replace(cfg, broker_role=BrokerRole.SLAVE)
    s = DefaultMessageStore(slave)
    s.load()
    try:
        assert s.get_max_phy_offset() == start  # replication resumes with the whole record
        assert any("partial copy" in p.reason for p in s.recovery_report)
        assert s.get_max_offset_in_queue("T", 0) == 4
    finally:
        s.shutdown()


def test_slave_keeps_a_whole_last_record(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "store")
    with DefaultMessageStore(cfg) as s:
        for i in range(5):
            assert s.put_message(msg("T", b"m%d" % i, queue_id=0, KEYS=f"k{i}")).is_ok()
        end = s.get_max_phy_offset()
    cfg.abort_path.write_text("1")
    s = DefaultMessageStore(dataclasses.replace(cfg, broker_role=BrokerRole.SLAVE))
    s.load()
    try:
        assert s.get_max_phy_offset() == end
        assert s.recovery_report == []
    finally:
        s.shutdown()


def test_deleted_topic_makes_the_counts_disagree_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    """A deleted topic's records stay in the log without units: the fast path must not take the
    queues as complete; the full re-dispatch (as Java) keeps every message sent since."""
    cfg = small_config(tmp_path / "store")
    with DefaultMessageStore(cfg) as s:
        for i in range(30):
            assert s.put_message(msg("A", b"old%d" % i, queue_id=0)).is_ok()
        assert s.delete_topics(["A"]) == 1
        for i in range(10):
            assert s.put_message(msg("A", b"new%d" % i, queue_id=0)).is_ok()
            assert s.put_message(msg("B", b"b%d" % i, queue_id=0)).is_ok()
    cfg.abort_path.write_text("1")
    s = reopen(cfg)
    try:
        assert s.recovery_counts["rebuild_from"] == 0  # the units are fewer than the messages
        assert read_queue(s, "B", 0) == [b"b%d" % i for i in range(10)]
        # the new messages keep their offsets; the deleted ones come back after them, as in Java
        assert read_queue(s, "A", 0)[:10] == [b"new%d" % i for i in range(10)]
    finally:
        s.shutdown()
