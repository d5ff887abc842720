"""The put path's seams on their own, without a network: the stored-record layout (one owner,
``protocol.stored.StoredLayout``), ``MappedFile`` owning its positions (``append_record`` with
its in-place patch callback, ``fill_to_end``, the transient pool buffer), the commit log's batch
encoder taking the batch object, and ``DefaultMessageStore.put`` as the one put path."""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from pathlib import Path

import pytest

from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.stored import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    StoredLayout,
    decode_stored,
    decode_stored_all,
    encode_blank_into,
    encode_stored,
    stored_size,
)
from finchmq.store import (
    DefaultMessageStore,
    FlushDiskType,
    MessageExtBatch,
    PutMessageStatus,
)
from finchmq.store.commit_log import EncodedBatch
from finchmq.store.mapped_file import OS_PAGE_SIZE, MappedFile, TransientStorePool

from .conftest import batch, msg, small_config

V4 = pack_host("10.0.0.1", 9876)
V6 = pack_host("fe80::1", 9876)


def _record(born: bytes = V4, store: bytes = V4, body: bytes = b"body") -> bytearray:
    return encode_stored(
        topic=b"T",
        body=body,
        properties=b"TAGS\x01a",
        born_host=born,
        store_host=store,
        queue_id=3,
        queue_offset=11,
        commit_log_offset=22,
        born_timestamp=33,
        store_timestamp=44,
    )


# ------------------------------------------------------------------ layout


@pytest.mark.parametrize(("born", "store"), [(V4, V4), (V6, V4), (V4, V6), (V6, V6)])
def test_the_layout_positions_are_where_the_encoder_writes(born: bytes, store: bytes) -> None:
    record = _record(born, store)
    assert len(record) == stored_size(4, 1, len(b"TAGS\x01a"), len(born) == 20, len(store) == 20)
    size, magic = StoredLayout.SIZE_MAGIC.unpack_from(record, 0)
    assert (size, magic) == (len(record), MESSAGE_MAGIC_CODE)
    assert StoredLayout.OFFSETS.unpack_from(record, StoredLayout.QUEUE_OFFSET) == (11, 22)
    sys_flag = int.from_bytes(record[StoredLayout.SYS_FLAG : StoredLayout.SYS_FLAG + 4], "big")
    assert bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG) == (len(born) == 20)
    ts_pos = StoredLayout.store_timestamp_pos(sys_flag)
    assert ts_pos == StoredLayout.STORE_TIMESTAMP_V4 + (StoredLayout.V6_EXTRA if len(born) == 20 else 0)
    assert StoredLayout.TIMESTAMP.unpack_from(record, ts_pos)[0] == 44
    assert StoredLayout.read_store_timestamp(record) == 44
    assert StoredLayout.read_store_timestamp(record[: ts_pos + 7]) is None  # cut short: no answer


def test_the_v4_patch_struct_rewrites_offsets_and_store_time_in_place() -> None:
    record = _record()
    head = StoredLayout.HEADS[0].unpack_from(record, 0)
    StoredLayout.PATCH_V4.pack_into(record, StoredLayout.QUEUE_OFFSET, 7, 4096, head[7], head[8], V4, 99)
    decoded = decode_stored(record, verify_crc=True)
    assert (decoded.queue_offset, decoded.commit_log_offset, decoded.store_timestamp) == (7, 4096, 99)
    assert (decoded.born_timestamp, decoded.queue_id, decoded.body) == (33, 3, b"body")


# ------------------------------------------------------------------ MappedFile


def test_append_record_patches_in_place_and_writes_the_head_last(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 4096, create=True)
    try:
        record = _record()
        seen: list[tuple[int, bytes]] = []

        def patch(view: memoryview, pos: int) -> None:
            seen.append((pos, bytes(view[pos : pos + 8])))  # the head is not there yet
            StoredLayout.OFFSETS.pack_into(view, pos + StoredLayout.QUEUE_OFFSET, 5, pos)

        first = mf.append_record(memoryview(record), 1234)
        second = mf.append_record(memoryview(record), 5678, patch)
        assert (first, second) == (0, len(record))
        assert seen == [(len(record), bytes(8))]
        assert mf.wrote_position == 2 * len(record) and mf.store_timestamp == 5678
        view = mf.select(second, len(record))
        assert view is not None
        with view:
            decoded = decode_stored(view, verify_crc=True)
        assert (decoded.queue_offset, decoded.commit_log_offset) == (5, len(record))
    finally:
        mf.close()


def test_fill_to_end_closes_the_file_with_a_blank_record(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / f"{0:020d}", 4096, create=True)
    try:
        mf.append_record(memoryview(_record()), 1)
        pos = mf.wrote_position
        mf.fill_to_end(encode_blank_into)
        assert mf.is_full() and mf.wrote_position == 4096
        head = mf.select(pos, 8)
        assert head is not None
        with head:
            assert StoredLayout.SIZE_MAGIC.unpack(head) == (4096 - pos, BLANK_MAGIC_CODE)
    finally:
        mf.close()


def test_a_pooled_file_is_readable_only_once_committed_and_then_returns_its_buffer(tmp_path: Path) -> None:
    pool = TransientStorePool(1, 2 * OS_PAGE_SIZE)
    mf = MappedFile(tmp_path / f"{0:020d}", 2 * OS_PAGE_SIZE, create=True, pool=pool)
    try:
        assert mf.uses_pool_buffer and pool.available_buffer_nums() == 0
        record = _record(body=b"x" * 1000)
        mf.append_record(memoryview(record), 1)
        assert mf.select(0, len(record)) is None, "written to the pool buffer, not yet to the file"
        assert mf.commit(1) == 0, "less than one page: not committed yet"
        assert mf.commit(0) == len(record)
        view = mf.select(0, len(record))
        assert view is not None
        with view:
            assert decode_stored(view).body == b"x" * 1000
        mf.fill_to_end(encode_blank_into)
        assert mf.commit(0) == 2 * OS_PAGE_SIZE
        assert not mf.uses_pool_buffer and pool.available_buffer_nums() == 1
    finally:
        mf.close()
        pool.destroy()


# ------------------------------------------------------------------ the put path


def test_put_of_a_message_and_of_a_batch_returns_final_results(tmp_path: Path) -> None:
    with DefaultMessageStore(small_config(tmp_path / "s")) as store:
        one = store.put(msg("T", b"single", TAGS="a"))
        many = store.put(batch("T", [b"a", b"b", b"c"]))
        assert one.is_ok() and many.is_ok()
        assert one.pending is None and many.pending is None  # ASYNC_FLUSH: final at once
        a1, an = one.append_message_result, many.append_message_result
        assert a1 is not None and an is not None
        assert (a1.msg_num, a1.logics_offset, a1.offsets) == (1, 0, (0,))
        assert (an.msg_num, an.logics_offset, an.wrote_offset) == (3, 1, a1.wrote_bytes)
        assert an.offsets[0] == an.wrote_offset and sum(1 for _ in an.offsets) == 3
        data = store.commit_log.get_data(0, a1.wrote_bytes + an.wrote_bytes)
        assert data is not None
        with data:
            stored = decode_stored_all(data, verify_crc=True)
        assert [(m.body, m.queue_offset, m.commit_log_offset) for m in stored] == [
            (b"single", 0, 0),
            (b"a", 1, an.offsets[0]),
            (b"b", 2, an.offsets[1]),
            (b"c", 3, an.offsets[2]),
        ]
        assert [m.store_timestamp for m in stored[1:]] == [an.store_timestamp] * 3


def test_put_refuses_what_java_refuses_and_writes_nothing(tmp_path: Path) -> None:
    with DefaultMessageStore(small_config(tmp_path / "s")) as store:
        delayed = batch("T", [b"a"])
        delayed = dataclasses.replace(delayed, properties={"DELAY": "1"})
        prepared = dataclasses.replace(batch("T", [b"a"]), sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
        torn = MessageExtBatch(topic="T", body=bytes(batch("T", [b"abc"]).body)[:-1])
        for bad in (delayed, prepared, torn):
            r = store.put(bad)
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and r.pending is None
        assert store.get_max_phy_offset() == 0
    stopped = DefaultMessageStore(small_config(tmp_path / "t"))
    stopped.load()
    try:
        r = stopped.put(msg("T", b"x"))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and r.pending is None
    finally:
        stopped.shutdown()


def test_the_commit_log_encodes_a_batch_object_with_the_layout_sizes(tmp_path: Path) -> None:
    with DefaultMessageStore(small_config(tmp_path / "s")) as store:
        b = dataclasses.replace(batch("Topic", [b"a" * 10, b"b" * 20]), born_host=V6)
        encoded = store.commit_log.encode_batch(b)
        assert isinstance(encoded, EncodedBatch)
        assert encoded.v6_born and encoded.sys_flag & MessageSysFlag.BORNHOST_V6_FLAG
        props = [len(p) for p in encoded.props]
        assert encoded.sizes == [
            stored_size(10, 5, props[0], born_v6=True),
            stored_size(20, 5, props[1], born_v6=True),
        ]
        assert encoded.rel_offsets == [0, encoded.sizes[0]] and encoded.total == sum(encoded.sizes)
        status, result = store.commit_log.put_messages(b, encoded)
        assert status is PutMessageStatus.PUT_OK and result is not None
        data = store.commit_log.get_data(result.wrote_offset, result.wrote_bytes)
        assert data is not None
        with data:
            stored = decode_stored_all(data, verify_crc=True)
        assert [m.body for m in stored] == [b"a" * 10, b"b" * 20]
        assert all(m.born_host.packed == V6 and m.store_timestamp == result.store_timestamp for m in stored)


def test_a_sync_flush_put_is_pending_unless_it_does_not_wait(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s", flush_disk_type=FlushDiskType.SYNC_FLUSH)
    with DefaultMessageStore(cfg) as store:
        waiting = store.put(batch("T", [b"a", b"b"]))
        assert waiting.status is PutMessageStatus.PUT_OK and isinstance(waiting.pending, Future)
        flushed = waiting.pending.result(30)
        assert flushed.status is PutMessageStatus.PUT_OK and flushed.append_message_result is not None
        end = flushed.append_message_result.wrote_offset + flushed.append_message_result.wrote_bytes
        assert store.commit_log.mapped_file_queue.flushed_where >= end
        final = store.put(msg("T", b"x", WAIT="false"))
        assert final.is_ok() and final.pending is None
