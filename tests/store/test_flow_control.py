"""Put-lock timing (page cache busy), the transient store pool, SYNC_FLUSH group commit."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from concurrent.futures import Future

import pytest

from finchmq.store import (
    DefaultMessageStore,
    FlushDiskType,
    GetMessageStatus,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
)
from tests.waiting import wait_until

from .conftest import SEGMENT, msg, read_queue


def test_inject_put_delay_makes_page_cache_busy(cfg: MessageStoreConfig) -> None:
    # the slow put holds the lock 2 s: busy after 0.1 s, so the checks below have 1.9 s to run in
    c = dataclasses.replace(cfg, inject_put_delay_millis=2000, os_page_cache_busy_time_out_mills=100)
    with DefaultMessageStore(c) as store:
        assert not store.is_os_page_cache_busy() and store.lock_time_mills() == 0
        results: list[PutMessageResult] = []
        t = threading.Thread(target=lambda: results.append(store.put_message(msg("T", b"slow"))))
        t.start()
        wait_until(store.is_os_page_cache_busy, what="the slow put holding the lock past the busy time")
        holder = store.commit_log.begin_time_in_lock
        assert holder > 0 and store.lock_time_mills() > 100
        # a put arriving while the lock is held too long is refused at once, never queued: it is
        # answered while the slow put still holds the lock
        assert store.put_message(msg("T", b"other")).status is PutMessageStatus.OS_PAGECACHE_BUSY
        assert store.commit_log.begin_time_in_lock == holder and t.is_alive()
        t.join()
        assert results[0].is_ok()
        assert results[0].append_message_result is not None
        assert results[0].append_message_result.page_cache_rt >= 2000
        assert not store.is_os_page_cache_busy() and store.commit_log.begin_time_in_lock == 0


def test_transient_store_pool_commits_then_serves(cfg: MessageStoreConfig) -> None:
    c = dataclasses.replace(cfg, transient_store_pool_enable=True, transient_store_pool_size=3)
    with DefaultMessageStore(c) as store:
        assert store.transient_store_pool is not None
        assert store.remain_transient_store_buffer_numbs() <= 3
        for i in range(40):
            assert store.put_message(msg("T", b"%d" % i + b"p" * 4000)).is_ok()
        wait_until(
            lambda: store.get_max_offset_in_queue("T", 0) >= 40, what="the pool committed to the files"
        )
        assert [b[: len(b) - 4000] for b in read_queue(store, "T", 0)] == [b"%d" % i for i in range(40)]
        files = store.commit_log.mapped_file_queue.files
        assert all(not f.uses_pool_buffer for f in files[:-1])  # full segments gave their buffer back
    with DefaultMessageStore(c) as store:  # the data reached the files
        assert len(read_queue(store, "T", 0)) == 40


def test_transient_store_pool_deficient_and_fast_fail(cfg: MessageStoreConfig) -> None:
    c = dataclasses.replace(
        cfg,
        transient_store_pool_enable=True,
        transient_store_pool_size=1,
        fast_fail_if_no_buffer_in_store_pool=True,
        commit_interval_commit_log=60_000,
        commit_commit_log_thorough_interval=60_000,
    )
    with DefaultMessageStore(c) as store:
        assert store.put_message(msg("T", b"a" * 30_000)).is_ok()
        assert store.is_transient_store_pool_deficient()
        statuses = {store.put_message(msg("T", b"b" * 30_000)).status for _ in range(3)}
        assert PutMessageStatus.CREATE_MAPEDFILE_FAILED in statuses
        # not committed yet: the consumer does not see it
        assert store.get_message("g", "T", 0, 0, 32).status is not GetMessageStatus.FOUND


def test_sync_flush_waits_for_group_commit(cfg: MessageStoreConfig) -> None:
    c = dataclasses.replace(cfg, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with DefaultMessageStore(c) as store:
        for _ in range(20):
            r = store.put_message(msg("T", b"s" * 5000))
            assert r.is_ok() and r.append_message_result is not None
            end = r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes
            assert store.commit_log.mapped_file_queue.flushed_where >= end
        puts = [store.put(msg("T", b"%d" % i)) for i in range(64)]
        futs = [p.pending for p in puts]
        assert all(isinstance(f, Future) for f in futs), "SYNC_FLUSH with WAIT: answered once flushed"
        done = threading.Event()
        seen: list[PutMessageStatus] = []

        def cb(f: Future[PutMessageResult]) -> None:
            seen.append(f.result().status)
            if len(seen) == 64:
                done.set()

        for f in futs:
            assert isinstance(f, Future)
            f.add_done_callback(cb)
        wait_until(done.is_set, what="the group commit of the 64 puts")
        assert set(seen) == {PutMessageStatus.PUT_OK}
        nowait = store.put(msg("T", b"nowait", WAIT="false"))
        assert nowait.is_ok() and nowait.pending is None  # final at once


def test_sync_flush_timeout(cfg: MessageStoreConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    c = dataclasses.replace(cfg, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=200)
    with DefaultMessageStore(c) as store:
        real = os.fdatasync
        monkeypatch.setattr(os, "fdatasync", lambda fd: time.sleep(0.5))  # scenario: a slow disk
        t0 = time.monotonic()
        r = store.put_message(msg("T", b"late"))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT  # flushed 0.3 s or more too late
        assert time.monotonic() - t0 > 0.15  # not before sync_flush_timeout
        assert r.append_message_result is not None  # stored, just not known flushed
        end = r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes
        monkeypatch.setattr(os, "fdatasync", real)
        mfq = store.commit_log.mapped_file_queue
        wait_until(lambda: mfq.flushed_where >= end, what="the flush that hung to finish")
        # Healthy again: a put is answered PUT_OK. Each must be flushed within the 200 ms, which a
        # loaded machine can miss: put until one is (each put is stored, whatever its answer).
        answers: list[PutMessageResult] = []

        def put_ok() -> bool:
            answers.append(store.put_message(msg("T", b"ok")))
            return answers[-1].is_ok()

        wait_until(put_ok, what="a put flushed in time after the disk came back")
        assert {a.status for a in answers[:-1]} <= {PutMessageStatus.FLUSH_DISK_TIMEOUT}
        assert read_queue(store, "T", 0) == [b"late"] + [b"ok"] * len(answers)


def test_put_is_final_at_once_for_async_flush(store: DefaultMessageStore) -> None:
    r = store.put(msg("T", b"x"))
    assert r.is_ok() and r.pending is None
    assert store.dispatch_behind_bytes() == 0
    assert store.get_max_phy_offset() > 0 and store.flush() == store.get_max_phy_offset()


def test_segment_preallocation_keeps_next_file_ready(store: DefaultMessageStore) -> None:
    for _ in range(14):
        store.put_message(msg("T", b"q" * 5000))  # > one 64 KiB segment
    nxt = store.config.commit_log_dir / f"{2 * SEGMENT:020d}"
    wait_until(nxt.exists, what="the next segment created ahead, off the put path")
