"""Abnormal recovery against what a SIGKILL can leave that the fast path must not miss: real
processes killed with SIGKILL, real files, then a restart on the same directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from finchmq.protocol.message import decode_stored
from finchmq.store import DefaultMessageStore

from .conftest import msg, small_config

REPO = Path(__file__).resolve().parents[2]


def _killed_inside_index_write(root: Path, count: int, key: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.store.index_crash_writer", str(root), str(count), key],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "KILL" in proc.stdout, proc.stderr
    assert proc.returncode == -9


def _bodies(store: DefaultMessageStore, key: str) -> list[bytes]:
    out = []
    with store.query_message("T", key, 1000, 0, 2**62) as q:
        for buf in q.buffers:
            out.append(decode_stored(buf).body)
    return out


def test_kill_inside_an_index_write_keeps_every_older_message_findable_by_key(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _killed_inside_index_write(root, 60, "order-1")
    s = DefaultMessageStore(small_config(root))
    s.load()
    s.start()
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
    s = DefaultMessageStore(small_config(root))
    s.load()
    s.start()
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
    s = DefaultMessageStore(cfg)
    s.load()
    s.start()
    try:
        assert s.get_max_phy_offset() < end
        assert _bodies(s, "k19") == []
        assert s.put_message(msg("T", b"after", queue_id=0, KEYS="after")).is_ok()
        assert s.put_message(msg("T", b"after2", queue_id=0, KEYS="after")).is_ok()
        assert sorted(_bodies(s, "after")) == [b"after", b"after2"]
        assert _bodies(s, "k18") == [b"m18" * 100]
    finally:
        s.shutdown()
