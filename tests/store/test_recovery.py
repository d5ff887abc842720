"""Recovery: normal (checkpoint), abnormal (abort file), rebuilt consume queues and index, corruption."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from finchmq.store import DefaultMessageStore, MessageStoreConfig, StoreCorruptedError
from finchmq.store.checkpoint import StoreCheckpoint

from .conftest import SEGMENT, make_abnormal, msg, read_queue, reopen


def fill(cfg: MessageStoreConfig, n: int = 60, size: int = 3000) -> list[bytes]:
    bodies = [os.urandom(size) for _ in range(n)]
    with DefaultMessageStore(cfg) as s:
        for i, b in enumerate(bodies):
            assert s.put_message(msg("T", b, queue_id=i % 2, KEYS=f"k{i}")).is_ok()
    return bodies


def last_segment(cfg: MessageStoreConfig) -> Path:
    return sorted(cfg.commit_log_dir.iterdir())[-1]


def test_normal_restart_uses_checkpoint_and_keeps_appending(cfg: MessageStoreConfig) -> None:
    bodies = fill(cfg)
    cp = StoreCheckpoint(cfg.checkpoint_path)
    assert cp.clean_commit_log_max_offset is not None and cp.clean_commit_log_max_offset > 2 * SEGMENT
    assert cp.physic_msg_timestamp > 0 and cp.logics_msg_timestamp > 0
    cp.shutdown()
    assert not cfg.abort_path.exists()
    s = reopen(cfg)
    try:
        assert s.recovery_report == []
        assert cfg.abort_path.exists()  # running
        assert read_queue(s, "T", 0) == bodies[0::2]
        r = s.put_message(msg("T", b"next", queue_id=0))
        assert r.append_message_result is not None and r.append_message_result.logics_offset == 30
    finally:
        s.shutdown()


def test_abnormal_restart_rebuilds_lost_consume_queues_and_index(cfg: MessageStoreConfig) -> None:
    bodies = fill(cfg)
    shutil.rmtree(cfg.consume_queue_dir)
    shutil.rmtree(cfg.index_dir)
    make_abnormal(cfg)
    s = reopen(cfg)
    try:
        assert s.recovery_report == []
        assert read_queue(s, "T", 0) == bodies[0::2]
        assert read_queue(s, "T", 1) == bodies[1::2]
        with s.query_message("T", "k17", 4, 0, 2**62) as q:
            assert len(q.buffers) == 1
        assert s.put_message(msg("T", b"x", queue_id=1)).append_message_result.logics_offset == 30  # type: ignore[union-attr]
    finally:
        s.shutdown()


def test_torn_tail_is_truncated_and_reported_with_file_and_offset(cfg: MessageStoreConfig) -> None:
    bodies = fill(cfg)
    seg = last_segment(cfg)
    with DefaultMessageStore(cfg) as s:
        end = s.get_max_phy_offset()
    cut = end - int(seg.name) - 1000  # in the middle of the last record
    with open(seg, "r+b") as f:
        f.truncate(cut)
    make_abnormal(cfg)
    s = reopen(cfg)
    try:
        assert all(isinstance(p, StoreCorruptedError) and p.path == str(seg) for p in s.recovery_report)
        assert any("shorter" in p.reason or "expected" in p.reason for p in s.recovery_report)
        [problem] = [p for p in s.recovery_report if p.reason.startswith("bad")]
        assert "PROPERTIESLENGTH" in problem.reason
        assert problem.offset == end - int(seg.name) - 3000 - 91 - 1 - len("KEYS\x01k59")
        got = read_queue(s, "T", 0) + read_queue(s, "T", 1)
        assert sorted(got) == sorted(bodies[:-1])  # the torn record is gone, nothing else
        assert s.get_max_phy_offset() == end - (3000 + 91 + 1 + len("KEYS\x01k59"))
        assert s.put_message(msg("T", b"after", queue_id=1)).is_ok()
        assert read_queue(s, "T", 1)[-1] == b"after"
    finally:
        s.shutdown()


# Bytes the stored layout lets recovery check: BODYCRC covers the body; TOTALSIZE, MAGICCODE,
# BODYLENGTH, TOPICLENGTH and PHYSICALOFFSET are cross-checked. (QUEUEID, FLAG, hosts and born
# time are covered by nothing in RocketMQ's format, so a flip there cannot be detected.)
@pytest.mark.parametrize(
    "where",
    [("body", 200), ("totalsize", 2), ("magic", 5), ("physical", 33), ("bodylength", 86), ("topic", 3088)],
)
def test_flipped_byte_is_detected_truncated_and_never_served(
    cfg: MessageStoreConfig, where: tuple[str, int]
) -> None:
    bodies = fill(cfg)
    seg = last_segment(cfg)
    with DefaultMessageStore(cfg) as s:
        cq = s.get_consume_queue("T", 0)
        assert cq is not None
        offset = (cq.get_unit(28) or (0, 0, 0))[0]  # message 56
    pos = offset - int(seg.name)
    assert pos >= 0
    flip = pos + where[1]
    data = bytearray(seg.read_bytes())
    data[flip] ^= 0x40
    seg.write_bytes(bytes(data))
    make_abnormal(cfg)
    s = reopen(cfg)
    try:
        bad = [p for p in s.recovery_report if p.path == str(seg)]
        assert bad and bad[0].offset == pos
        q0 = read_queue(s, "T", 0)
        assert q0 == bodies[0:56:2]  # message 56 and everything after it are gone
        assert read_queue(s, "T", 1) == bodies[1:56:2]
    finally:
        s.shutdown()


def test_zeroed_tail_after_truncation_does_not_resurrect_old_records(cfg: MessageStoreConfig) -> None:
    bodies = fill(cfg)
    seg = last_segment(cfg)
    with DefaultMessageStore(cfg) as s:
        cq = s.get_consume_queue("T", 0)
        assert cq is not None
        offset = (cq.get_unit(25) or (0, 0, 0))[0]
    data = bytearray(seg.read_bytes())
    data[offset - int(seg.name) + 4] ^= 0xFF  # break the magic of message 50
    seg.write_bytes(bytes(data))
    make_abnormal(cfg)
    s = reopen(cfg)
    try:
        s.put_message(msg("T", b"tiny", queue_id=0))
    finally:
        s.shutdown()
    make_abnormal(cfg)  # crash again: the stale records after "tiny" must stay dead
    s = reopen(cfg)
    try:
        assert s.recovery_report == []
        assert read_queue(s, "T", 0) == [*bodies[0:50:2], b"tiny"]
    finally:
        s.shutdown()


def test_short_segment_in_the_middle_refuses_to_load(cfg: MessageStoreConfig) -> None:
    fill(cfg)
    first = sorted(cfg.commit_log_dir.iterdir())[0]
    with open(first, "r+b") as f:
        f.truncate(1000)
    s = DefaultMessageStore(cfg)
    with pytest.raises(StoreCorruptedError) as err:
        s.load()
    assert err.value.path == str(first) and err.value.offset == 1000
    s.load = None  # type: ignore[method-assign]


def test_corrupt_consume_queue_unit_is_not_served(cfg: MessageStoreConfig) -> None:
    bodies = fill(cfg, n=10)
    cq_file = next((cfg.consume_queue_dir / "T" / "0").iterdir())
    data = bytearray(cq_file.read_bytes())
    data[20 * 2 + 7] ^= 0x08  # unit 2: commit-log offset off by 8
    cq_file.write_bytes(bytes(data))
    s = reopen(cfg)
    try:
        assert read_queue(s, "T", 0) == [bodies[0], bodies[2], *bodies[6:10:2]]
    finally:
        s.shutdown()


def test_segment_files_named_by_offset(cfg: MessageStoreConfig) -> None:
    fill(cfg)
    names = sorted(p.name for p in cfg.commit_log_dir.iterdir())
    assert names[:3] == [f"{i * SEGMENT:020d}" for i in range(3)]
    assert (cfg.consume_queue_dir / "T" / "0").is_dir()
    assert cfg.checkpoint_path.stat().st_size == 4096


def test_recovery_config_copy(cfg: MessageStoreConfig) -> None:
    c2 = dataclasses.replace(cfg, check_crc_on_recover=False)
    fill(c2, n=5)
    make_abnormal(c2)
    s = reopen(c2)
    s.shutdown()
    assert s.recovery_report == []
