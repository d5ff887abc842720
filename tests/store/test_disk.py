"""Disk space: expiry, the disk-full flag, and a real full filesystem."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.store import DefaultMessageStore, MessageStoreConfig, PutMessageStatus

from .conftest import SEGMENT, msg, read_queue, small_config


def test_disk_full_refuses_puts_until_cleanup(cfg: MessageStoreConfig) -> None:
    usage = [0.5]
    c = dataclasses.replace(cfg, file_reserved_time=72)
    with DefaultMessageStore(c, disk_usage=lambda p: usage[0]) as store:
        for _ in range(30):
            assert store.put_message(msg("T", b"d" * 5000)).is_ok()
        usage[0] = 0.95
        store.clean_once()
        assert store.is_disk_full() and not store.is_writeable()
        assert store.put_message(msg("T", b"no")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        # above the clean-forcibly ratio even young files go, oldest first, the active one stays
        segments = len(store.commit_log.mapped_file_queue.files)
        deleted = store.clean_once()
        assert deleted == segments - 1
        usage[0] = 0.87  # between clean-forcibly and warning: still full (Java's hysteresis)
        store.clean_once()
        assert store.is_disk_full()
        usage[0] = 0.60
        store.clean_once()
        assert not store.is_disk_full()
        assert store.put_message(msg("T", b"yes")).is_ok()
        assert read_queue(store, "T", 0, store.get_min_offset_in_queue("T", 0))[-1] == b"yes"


def test_expired_files_deleted_only_when_due(cfg: MessageStoreConfig) -> None:
    usage = [0.5]
    c = dataclasses.replace(cfg, file_reserved_time=0, delete_when="23" if os.environ.get("TZ") else "00")
    with DefaultMessageStore(c, disk_usage=lambda p: usage[0]) as store:
        for _ in range(30):
            store.put_message(msg("T", b"e" * 5000))
        before = len(store.commit_log.mapped_file_queue.files)
        hour = time.localtime().tm_hour
        c2 = dataclasses.replace(c, delete_when=f"{(hour + 1) % 24:02d}")
        store.config = c2
        assert store.clean_once() == 0  # not the hour, disk not full
        usage[0] = 0.80  # above disk_max_used_space_ratio (75 %): expired files go now
        assert store.clean_once() == before - 1
        cq = store.get_consume_queue("T", 0)
        assert cq is not None
        assert store.get_min_offset_in_queue("T", 0) > 0  # consume queue trimmed to match
        first = cq.get_unit(store.get_min_offset_in_queue("T", 0))
        assert first is not None and first[0] >= store.get_min_phy_offset()


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A real small filesystem mounted at ``path`` (skips without root and mount permission)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root and mount permission)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.slow
def test_real_full_filesystem_refuses_cleanly_and_loses_nothing(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "mnt", "8m") as mnt:
        # no forced deletion while we check that everything acknowledged is still there
        c = small_config(
            mnt / "store", mapped_file_size_commit_log=SEGMENT * 4, clean_file_forcibly_enable=False
        )
        acked: list[bytes] = []
        refused: set[PutMessageStatus] = set()
        with DefaultMessageStore(c) as store:
            for i in range(6000):
                body = b"%05d" % i + os.urandom(2000)
                r = store.put_message(msg("T", body))
                if r.is_ok():
                    acked.append(body)
                else:
                    refused.add(r.status)
                    if i > len(acked) + 20:
                        break
            assert refused and refused <= {
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                PutMessageStatus.CREATE_MAPEDFILE_FAILED,
            }
            assert len(acked) > 1000  # most of the 8 MiB was used
            assert read_queue(store, "T", 0) == acked
            # cleanup frees space and puts are accepted again
            store.config = dataclasses.replace(c, file_reserved_time=0)
            assert store.clean_once(manual=True) > 0
            assert not store.is_disk_full()
            r = store.put_message(msg("T", b"again"))
            assert r.is_ok(), r.status
        with DefaultMessageStore(c) as store:  # and everything still acknowledged survives a restart
            tail = read_queue(store, "T", 0, store.get_min_offset_in_queue("T", 0))
            assert tail[-1] == b"again"
            assert tail[:-1] == acked[len(acked) - len(tail) + 1 :]


@pytest.mark.slow
def test_a_full_filesystem_logs_a_few_lines_not_one_per_refused_put(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _tmpfs(tmp_path / "mnt", "4m") as mnt:
        c = small_config(
            mnt / "store", mapped_file_size_commit_log=SEGMENT * 4, clean_file_forcibly_enable=False
        )
        refused = 0
        with DefaultMessageStore(c) as store:
            i = 0
            while refused == 0:  # fill it
                refused += not store.put_message(msg("T", b"%06d" % i + b"f" * 2000)).is_ok()
                i += 1
            with caplog.at_level(logging.WARNING, logger="finchmq"):
                for j in range(2000):
                    refused += not store.put_message(msg("T", b"%06d" % j + b"r" * 2000)).is_ok()
        assert refused > 2000
        lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert 0 < len(lines) <= 10, [r.getMessage() for r in lines]


def test_clean_expired_consumer_queue_destroys_queues_whose_records_are_gone(cfg: MessageStoreConfig) -> None:
    """Java ``cleanExpiredConsumerQueue`` (mqadmin ``cleanExpiredCQ``): a queue whose last record
    lies before the commit log's first offset goes; a queue with a record left stays, so does
    the schedule topic's."""
    c = dataclasses.replace(cfg, file_reserved_time=0)
    with DefaultMessageStore(c) as store:
        store.put_message(msg("SCHEDULE_TOPIC_XXXX", b"s"))
        for _ in range(15):
            store.put_message(msg("Old", b"o" * 5000))
        for _ in range(30):  # Old's last record is then in a segment that expires
            store.put_message(msg("Filler", b"f" * 5000))
        store.put_message(msg("New", b"n"))
        assert store.clean_expired_consumer_queue() == 0  # every record still there
        assert store.clean_once(manual=True) > 0
        assert store.get_consume_queue("Old", 0) is not None
        assert store.clean_expired_consumer_queue() == 1
        assert store.get_consume_queue("Old", 0) is None
        assert not (c.consume_queue_dir / "Old" / "0").exists() or not any(
            (c.consume_queue_dir / "Old" / "0").iterdir()
        )
        assert read_queue(store, "New", 0) == [b"n"]
        assert store.get_consume_queue("SCHEDULE_TOPIC_XXXX", 0) is not None


def test_clean_unused_topic_keeps_the_listed_system_and_lmq_topics(cfg: MessageStoreConfig) -> None:
    """Java ``cleanUnusedTopic`` (mqadmin ``cleanUnusedTopic``): the consume queues of topics not
    in the broker's table go, but for the schedule and transaction-op topics and LMQ queues."""
    with DefaultMessageStore(cfg) as store:
        for topic in ("Kept", "Gone", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "%LMQ%q"):
            store.put_message(msg(topic, b"x"))
        store.put_message(msg("Gone", b"x", queue_id=1))
        assert store.clean_unused_topic(["Kept"]) == 2
        assert sorted(store.topics()) == sorted(
            ["Kept", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "%LMQ%q"]
        )
        assert not (cfg.consume_queue_dir / "Gone").exists()
        assert store.put_message(msg("Gone", b"again")).is_ok()  # a later send starts the topic afresh
        assert read_queue(store, "Gone", 0) == [b"again"]
