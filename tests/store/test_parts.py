"""The store's parts on their own, on real files in ``tmp_path``: a mapped file, the index, the
flush manager (on a real store, as its ``ServicedStore``). ``test_message_store.py`` covers them
together through ``DefaultMessageStore``."""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from pathlib import Path

from finchmq.store import (
    DefaultMessageStore,
    FlushDiskType,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
)
from finchmq.store.consume_queue import ConsumeQueue
from finchmq.store.dispatch import ReputMessageService
from finchmq.store.index import IndexService
from finchmq.store.mapped_file import MappedFile
from finchmq.store.mapped_file_queue import MappedFileQueue
from finchmq.store.services import FlushManager

from .conftest import msg


def test_a_mapped_file_appends_flushes_and_reopens_with_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / f"{4096:020d}"
    mf = MappedFile(path, 4096, create=True)
    assert mf.file_from_offset == 4096 and mf.wrote_position == 0
    assert mf.append(b"a" * 1000) and mf.append(b"b" * 3000)
    assert not mf.append(b"c" * 97), "an append past the end is refused, nothing written"
    assert mf.wrote_position == 4000 and not mf.is_full()
    mf.flush(0)
    assert mf.flushed_position == 4000
    view = mf.select(990, 20)
    assert view is not None and bytes(view) == b"a" * 10 + b"b" * 10
    mf.close()
    again = MappedFile(path, 4096, create=False)
    again.set_positions(4000)  # recovery tells a reopened file where its data ends
    data = again.select(0, 4000)
    assert data is not None and bytes(data) == b"a" * 1000 + b"b" * 3000
    again.close()


def test_the_index_finds_keys_by_time_and_rolls_to_a_new_file(tmp_path: Path) -> None:
    index = IndexService(tmp_path / "index", hash_slot_num=8, index_num=16, max_msgs_num_batch=64)
    index.load()
    base = 1_700_000_000_000
    for i in range(40):  # more than one file holds: it rolls over; one message a second
        assert index.put_keys([(f"T#key{i % 4}", 1000 + i, base + i * 1000)])
    assert len(index.files) > 1
    found = index.query_offset("T#key1", 64, base, base + 100_000)
    assert sorted(found.phy_offsets) == [1000 + i for i in range(40) if i % 4 == 1]
    late = index.query_offset("T#key1", 64, base + 20_000, base + 100_000)  # the index keeps seconds
    assert sorted(late.phy_offsets) == [1000 + i for i in range(20, 40) if i % 4 == 1]
    assert index.query_offset("T#missing", 64, 0, 2_000_000_000_000).phy_offsets == []
    index.shutdown()


def _store(root: Path, flush: FlushDiskType) -> DefaultMessageStore:
    config = MessageStoreConfig(
        store_path_root_dir=root, mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=1000 * 20,
        max_hash_slot_num=64, max_index_num=256, flush_disk_type=flush,
    )  # fmt: skip
    return DefaultMessageStore(dataclasses.replace(config))


def test_the_flush_manager_answers_sync_puts_once_flushed(tmp_path: Path) -> None:
    with _store(tmp_path, FlushDiskType.SYNC_FLUSH) as store:
        manager = FlushManager(store, sync_flush=True, transient_pool=False)
        assert manager.group_commit is not None and manager.flush_service is None
        manager.start()
        try:
            appended = store.put_message(msg("T", b"x", WAIT="false"))
            assert appended.is_ok() and appended.append_message_result is not None
            waiting = manager.handle_disk_flush(appended, True)
            assert isinstance(waiting, Future)
            flushed = waiting.result(30)
            assert flushed.status is PutMessageStatus.PUT_OK
            end = appended.append_message_result.wrote_offset + appended.append_message_result.wrote_bytes
            assert store.commit_log.mapped_file_queue.flushed_where >= end
            assert manager.handle_disk_flush(appended, False) is None  # WAIT=false: final at once
        finally:
            manager.shutdown()


def test_the_flush_manager_leaves_async_puts_final(tmp_path: Path) -> None:
    with _store(tmp_path, FlushDiskType.ASYNC_FLUSH) as store:
        manager = FlushManager(store, sync_flush=False, transient_pool=False)
        assert manager.group_commit is None and manager.flush_service is not None
        appended = store.put_message(msg("T", b"x"))
        assert isinstance(appended, PutMessageResult)
        assert manager.handle_disk_flush(appended, True) is None


def test_a_mapped_file_queue_rolls_finds_flushes_truncates_and_reloads(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path / "q", 1000)
    for i in range(10):  # 10 x 250 bytes in files of 1000: a new file when the last is full
        last = queue.get_last_mapped_file_create(queue.get_max_wrote_position())
        assert last is not None and last.append(bytes([i]) * 250, commit=True)
    assert [f.file_from_offset for f in queue.files] == [0, 1000, 2000]
    assert queue.get_max_wrote_position() == 2500 and queue.remain_how_many_data_to_flush() > 0
    found = queue.find_mapped_file_by_offset(1500)
    assert found is not None and found.file_from_offset == 1000
    queue.flush_all()
    assert queue.flushed_where == 2500 and queue.remain_how_many_data_to_flush() == 0
    queue.truncate_dirty_files(1250)  # recovery found the data ends there
    assert [f.file_from_offset for f in queue.files] == [0, 1000] and queue.get_max_wrote_position() == 1250
    queue.shutdown()
    again = MappedFileQueue(tmp_path / "q", 1000)
    assert again.load() == []
    assert [f.file_from_offset for f in again.files] == [0, 1000]
    again.shutdown()


def test_dispatch_rebuilds_consume_queues_and_index_from_the_commit_log(tmp_path: Path) -> None:
    """The dispatcher on its own: fed a commit log written by a store, it rebuilds the consume
    queues (one unit per message, in order, with the right offsets and sizes) and the key index,
    and doing it twice changes nothing."""
    with _store(tmp_path / "source", FlushDiskType.ASYNC_FLUSH) as store:
        offsets = []
        for i in range(10):
            r = store.put_message(msg("T", b"m%d" % i, queue_id=i % 2, KEYS=f"k{i}"))
            assert r.is_ok() and r.append_message_result is not None
            offsets.append((i % 2, r.append_message_result.wrote_offset, r.append_message_result.wrote_bytes))
        end = store.get_max_phy_offset()
        queues: dict[tuple[str, int], ConsumeQueue] = {}

        def find(topic: str, queue_id: int) -> ConsumeQueue:
            key = (topic, queue_id)
            if key not in queues:
                queues[key] = ConsumeQueue(topic, queue_id, tmp_path / "rebuilt" / "consumequeue", 1000 * 20)
            return queues[key]

        index = IndexService(
            tmp_path / "rebuilt" / "index", hash_slot_num=64, index_num=256, max_msgs_num_batch=64
        )
        index.load()
        reput = ReputMessageService(find, index, store.config.delay_levels_ms)
        assert reput.rebuild(store.commit_log.mapped_file_queue, 0, end) == 10
        assert reput.rebuild(store.commit_log.mapped_file_queue, 0, end) == 10  # idempotent
    for queue_id in (0, 1):
        cq = queues[("T", queue_id)]
        expected = [(phy, size) for q, phy, size in offsets if q == queue_id]
        assert cq.get_max_offset_in_queue() == len(expected)
        units = [cq.get_unit(i) for i in range(len(expected))]
        assert [(u[0], u[1]) for u in units if u is not None] == expected
    found = index.query_offset("T#k3", 8, 0, 2**62).phy_offsets
    assert found == [offsets[3][1]]
    index.shutdown()
