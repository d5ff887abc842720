"""DefaultMessageStore put/get paths over real files with 64 KiB segments."""

from __future__ import annotations

import dataclasses
import time

import pytest

from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import tags_hash_code
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.msg_id import create_offset_msg_id
from finchmq.protocol.stored import BLANK_MAGIC_CODE, decode_stored, decode_stored_all, peek_stored
from finchmq.store import (
    SCHEDULE_TOPIC,
    AppendMessageStatus,
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
    TagsFilter,
)
from finchmq.store.consume_queue import CQ_UNIT

from .conftest import SEGMENT, batch, msg, read_queue


def test_put_then_get_returns_stored_bytes_with_offsets(store: DefaultMessageStore) -> None:
    host = pack_host("10.0.0.7", 10911)
    before = int(time.time() * 1000)
    r = store.put_message(
        MessageExtBrokerInner(
            topic="T",
            body=b"hello",
            queue_id=3,
            flag=5,
            properties={"TAGS": "TagA", "KEYS": "k1 k2"},
            born_timestamp=1234,
            born_host=pack_host("1.2.3.4", 555),
            store_host=host,
        )
    )
    assert r.status is PutMessageStatus.PUT_OK
    ar = r.append_message_result
    assert ar is not None and ar.status is AppendMessageStatus.PUT_OK
    assert ar.wrote_offset == 0 and ar.logics_offset == 0
    assert ar.msg_id == create_offset_msg_id("10.0.0.7", 10911, 0)
    with store.get_message("g", "T", 3, 0, 32) as got:
        assert got.status is GetMessageStatus.FOUND
        assert (got.next_begin_offset, got.min_offset, got.max_offset) == (1, 0, 1)
        [m] = decode_stored_all(got.body(), verify_crc=True)
    assert (m.topic, m.body, m.queue_id, m.flag, m.queue_offset) == ("T", b"hello", 3, 5, 0)
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert m.born_timestamp == 1234 and str(m.born_host) == "1.2.3.4:555"
    assert str(m.store_host) == "10.0.0.7:10911"
    assert before <= m.store_timestamp <= int(time.time() * 1000)
    assert m.store_size == ar.wrote_bytes
    looked = store.look_message_by_offset(0)
    assert looked is not None and looked.body == b"hello"


def test_queue_offsets_are_per_queue_and_consecutive(store: DefaultMessageStore) -> None:
    offsets = {}
    for i in range(30):
        r = store.put_message(msg("T", f"m{i}".encode(), queue_id=i % 3))
        assert r.append_message_result is not None
        offsets.setdefault(i % 3, []).append(r.append_message_result.logics_offset)
    assert offsets == {q: list(range(10)) for q in range(3)}
    assert store.get_max_offset_in_queue("T", 1) == 10
    assert read_queue(store, "T", 2) == [f"m{i}".encode() for i in range(2, 30, 3)]


def test_roll_over_writes_blank_filler_and_continues_in_next_segment(store: DefaultMessageStore) -> None:
    body = b"x" * 5000
    offsets = []
    for _ in range(30):
        r = store.put_message(msg("T", body))
        assert r.is_ok() and r.append_message_result is not None
        offsets.append(r.append_message_result.wrote_offset)
    files = store.commit_log.mapped_file_queue.files
    assert len(files) >= 3
    assert [f.path.name for f in files[:2]] == [f"{0:020d}", f"{SEGMENT:020d}"]
    first_in_second = min(o for o in offsets if o >= SEGMENT)
    assert first_in_second == SEGMENT  # messages never span segments
    last_in_first = max(o for o in offsets if o < SEGMENT)
    blank_pos = last_in_first + 5000 + 91 + 1  # TOTALSIZE of our record
    total, magic = peek_stored(files[0].view, blank_pos)
    assert magic == BLANK_MAGIC_CODE and total == SEGMENT - blank_pos
    assert read_queue(store, "T", 0) == [body] * 30


def test_batch_is_one_contiguous_write_with_batch_properties(store: DefaultMessageStore) -> None:
    store.put_message(msg("T", b"before"))
    b = batch("T", [b"a", b"bb", b"ccc"], TAGS="TagB", KEYS="bk")
    b.properties = {"CLUSTER": "c1"}
    r = store.put_messages(b)
    assert r.is_ok()
    ar = r.append_message_result
    assert ar is not None and ar.msg_num == 3 and ar.logics_offset == 1
    assert len(ar.msg_id.split(",")) == 3
    with store.get_message("g", "T", 0, 1, 32) as got:
        msgs = decode_stored_all(got.body(), verify_crc=True)
    assert [m.body for m in msgs] == [b"a", b"bb", b"ccc"]
    assert [m.queue_offset for m in msgs] == [1, 2, 3]
    assert [m.commit_log_offset for m in msgs] == list(ar.offsets)
    assert all(m.properties == {"TAGS": "TagB", "KEYS": "bk", "CLUSTER": "c1"} for m in msgs)
    assert len({m.store_timestamp for m in msgs}) == 1
    assert store.query_message("T", "bk", 10, 0, 2**62).buffers.__len__() == 3


def test_batch_that_does_not_fit_goes_whole_to_next_segment(store: DefaultMessageStore) -> None:
    store.put_message(msg("T", b"x" * 60_000))
    r = store.put_messages(batch("T", [b"y" * 3000] * 3))
    assert r.is_ok() and r.append_message_result is not None
    assert r.append_message_result.wrote_offset == SEGMENT
    assert read_queue(store, "T", 0) == [b"x" * 60_000] + [b"y" * 3000] * 3


def test_batch_larger_than_a_segment_is_illegal_and_wastes_nothing(store: DefaultMessageStore) -> None:
    store.put_message(msg("T", b"a"))
    before = store.commit_log.mapped_file_queue.get_max_offset()
    r = store.put_messages(batch("T", [b"z" * 20_000] * 4))  # > SEGMENT, < maxMessageSize
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert r.append_message_result is not None
    assert r.append_message_result.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
    assert store.commit_log.mapped_file_queue.get_max_offset() == before, "no BLANK filler, no roll"
    assert store.put_message(msg("T", b"b")).is_ok()
    assert read_queue(store, "T", 0) == [b"a", b"b"]


def test_oversized_messages_are_refused_and_never_written(cfg: MessageStoreConfig) -> None:
    with DefaultMessageStore(dataclasses.replace(cfg, max_message_size=1000)) as store:
        r = store.put_message(msg("T", b"x" * 1000))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert r.append_message_result is not None
        assert r.append_message_result.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
        big_props = {f"p{i}": "v" * 100 for i in range(400)}
        assert (
            store.put_message(msg("T", b"x", **big_props)).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        )
        assert store.put_message(msg("T" * 128, b"x")).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.put_messages(batch("T", [b"ok", b"x" * 2000])).status is PutMessageStatus.MESSAGE_ILLEGAL
        bad = MessageExtBatch(topic="T", body=b"\x00\x00\x00\x05garbage")
        assert store.put_messages(bad).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.get_max_phy_offset() == 0
        assert store.put_message(msg("T", b"small")).is_ok()
        assert read_queue(store, "T", 0) == [b"small"]


def test_get_message_statuses(store: DefaultMessageStore) -> None:
    r = store.get_message("g", "nope", 0, 0, 32)
    assert r.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE and r.next_begin_offset == 0
    store.find_consume_queue("empty", 0)
    assert store.get_message("g", "empty", 0, 5, 32).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    for i in range(5):
        store.put_message(msg("T", b"%d" % i))
    r = store.get_message("g", "T", 0, 5, 32)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_ONE and r.next_begin_offset == 5
    r = store.get_message("g", "T", 0, 9, 32)
    assert r.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and r.next_begin_offset == 0  # min is 0
    with store.get_message("g", "T", 0, 2, 2) as r:
        assert r.status is GetMessageStatus.FOUND
        assert r.message_count == 2 and r.next_begin_offset == 4 and r.queue_offsets == [2, 3]


def test_transfer_limits_count_and_bytes(cfg: MessageStoreConfig) -> None:
    with DefaultMessageStore(dataclasses.replace(cfg, mapped_file_size_commit_log=1024 * 1024)) as store:
        for i in range(100):
            store.put_message(msg("T", b"%03d" % i + b"." * 10_000))
        with store.get_message("g", "T", 0, 0, 64) as r:
            # 256 KiB in memory: 25 records of ~10.1 KB fit, the 26th would exceed
            assert r.message_count == 25
            assert r.buffer_total_size <= 256 * 1024
            assert r.next_begin_offset == 25
        for _ in range(100):
            store.put_message(msg("S", b"s"))
        with store.get_message("g", "S", 0, 0, 64) as r:
            assert r.message_count == 32 and r.next_begin_offset == 32  # maxTransferCountOnMessageInMemory


def test_tags_filter_skips_units_and_moves_next_begin_offset(store: DefaultMessageStore) -> None:
    for i in range(10):
        store.put_message(msg("T", b"%d" % i, TAGS="A" if i % 2 else "B"))
    with store.get_message("g", "T", 0, 0, 32, TagsFilter("A")) as r:
        assert [m.body for m in decode_stored_all(r.body())] == [b"1", b"3", b"5", b"7", b"9"]
        assert r.queue_offsets == [1, 3, 5, 7, 9] and r.next_begin_offset == 10
    with store.get_message("g", "T", 0, 0, 32, TagsFilter("C || D")) as r:
        assert r.status is GetMessageStatus.NO_MATCHED_MESSAGE and r.next_begin_offset == 10
    assert TagsFilter("*").is_matched_by_consume_queue(123)
    assert TagsFilter("TagA").codes == {2598919}


def test_consume_queue_units_and_rolled_consume_queue_files(store: DefaultMessageStore) -> None:
    for i in range(250):  # 100 units per CQ file: three files
        store.put_message(msg("T", b"%d" % i, TAGS="TagA"))
    cq = store.get_consume_queue("T", 0)
    assert cq is not None and len(cq.mapped_file_queue.files) == 3
    offset, size, tags = cq.get_unit(150) or (0, 0, 0)
    assert tags == tags_hash_code("TagA")
    buf = store.select_one_message_by_offset(offset)
    assert buf is not None and len(buf) == size
    assert decode_stored(buf).body == b"150"
    buf.release()
    assert store.get_commit_log_offset_in_queue("T", 0, 150) == offset
    assert read_queue(store, "T", 0, 95) == [b"%d" % i for i in range(95, 250)]
    assert CQ_UNIT.size == 20


def test_query_by_key_and_unique_key(store: DefaultMessageStore) -> None:
    for i in range(50):
        store.put_message(msg("T", b"%d" % i, KEYS=f"order-{i % 5} all", UNIQ_KEY=f"U{i:04d}"))
    store.put_message(msg("Other", b"o", KEYS="order-1"))
    with store.query_message("T", "order-1", 32, 0, 2**62) as q:
        bodies = sorted(decode_stored(b).body for b in q.buffers)
    assert bodies == sorted(b"%d" % i for i in range(1, 50, 5))
    with store.query_message("T", "U0042", 32, 0, 2**62) as q:
        assert [decode_stored(b).body for b in q.buffers] == [b"42"]
    with store.query_message("T", "all", 100, 0, 2**62) as q:
        assert len(q.buffers) == 50  # index files rolled (256 entries each) and chained
    assert len(store.index_service.files) >= 1 if store.index_service else False
    now = int(time.time() * 1000)
    assert store.query_message("T", "order-1", 32, now + 60_000, now + 120_000).buffers == []


def test_offset_by_time_and_earliest_time(store: DefaultMessageStore) -> None:
    stamps = []
    for i in range(6):
        r = store.put_message(msg("T", b"%d" % i))
        assert r.append_message_result is not None
        stamps.append(r.append_message_result.store_timestamp)
        time.sleep(0.01)
    assert store.get_offset_in_queue_by_time("T", 0, stamps[3]) == 3
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("T", 0, stamps[-1] + 10_000) == 5
    assert store.get_offset_in_queue_by_time("nope", 0, 0) == 0
    assert store.get_earliest_message_time("T", 0) == stamps[0]
    assert store.get_earliest_message_time() == stamps[0]
    assert store.get_message_store_timestamp("T", 0, 4) == stamps[4]


def test_schedule_topic_tags_code_is_deliver_time(store: DefaultMessageStore) -> None:
    r = store.put_message(msg(SCHEDULE_TOPIC, b"d", queue_id=2, DELAY="3", TAGS="x"))
    assert r.append_message_result is not None
    ts = r.append_message_result.store_timestamp
    cq = store.get_consume_queue(SCHEDULE_TOPIC, 2)
    assert cq is not None and cq.get_unit(0) == (0, r.append_message_result.wrote_bytes, ts + 10_000)
    store.put_message(msg(SCHEDULE_TOPIC, b"d", queue_id=2, DELAY="99"))  # clamped to level 18 (2h)
    unit = cq.get_unit(1)
    assert unit is not None and unit[2] - store.get_message_store_timestamp(SCHEDULE_TOPIC, 2, 1) == 7_200_000


def test_prepared_transaction_messages_are_not_in_consume_queue(store: DefaultMessageStore) -> None:
    r = store.put_message(
        MessageExtBrokerInner(
            topic="T",
            body=b"half",
            sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
            properties={"KEYS": "tx"},
        )
    )
    assert r.is_ok() and r.append_message_result is not None and r.append_message_result.logics_offset == 0
    assert store.get_max_offset_in_queue("T", 0) == 0
    store.put_message(msg("T", b"normal"))
    assert read_queue(store, "T", 0) == [b"normal"]
    with store.query_message("T", "tx", 5, 0, 2**62) as q:
        assert len(q.buffers) == 1  # prepared messages are indexed, as Java


def test_arrival_listener_is_called_per_message(store: DefaultMessageStore) -> None:
    seen: list[tuple[str, int, int, int, dict[str, str]]] = []
    store.register_message_arriving_listener(
        lambda topic, qid, logic, tags, ts, props: seen.append((topic, qid, logic, tags, dict(props)))
    )
    store.put_message(msg("T", b"1", queue_id=1, TAGS="A"))
    store.put_messages(batch("T", [b"2", b"3"], queue_id=1, TAGS="B"))
    assert [(s[0], s[1], s[2]) for s in seen] == [("T", 1, 1), ("T", 1, 2), ("T", 1, 3)]
    assert seen[0][3] == tags_hash_code("A") and seen[2][4]["TAGS"] == "B"

    def boom(*_: object) -> None:
        raise RuntimeError("listener bug")

    store.register_message_arriving_listener(boom)
    assert store.put_message(msg("T", b"4", queue_id=1)).is_ok()  # a failing listener breaks nothing
    assert store.get_max_offset_in_queue("T", 1) == 4


def test_views_survive_segment_deletion(cfg: MessageStoreConfig) -> None:
    with DefaultMessageStore(dataclasses.replace(cfg, file_reserved_time=0)) as store:
        for _ in range(40):
            store.put_message(msg("T", b"z" * 5000))
        held = store.get_message("g", "T", 0, 0, 4)
        first = bytes(held.buffers[0])
        assert store.clean_once(manual=True) >= 1
        assert not (cfg.commit_log_dir / f"{0:020d}").exists()
        assert bytes(held.buffers[0]) == first  # still mapped: the view keeps its segment alive
        held.release()
        r = store.get_message("g", "T", 0, 0, 4)
        assert r.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert r.next_begin_offset == r.min_offset > 0
        files = store.commit_log.mapped_file_queue.files
        assert len(files) == 1  # every expired segment but the active one is gone
        assert store.get_min_phy_offset() == files[0].file_from_offset >= SEGMENT


def test_puts_are_refused_when_not_running(cfg: MessageStoreConfig) -> None:
    s = DefaultMessageStore(cfg)
    assert s.put_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    s.load()
    s.start()
    s.shutdown()
    assert s.put_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    with pytest.raises(RuntimeError, match="state=SHUTDOWN"):
        s.start()


def test_second_process_cannot_open_a_locked_store(
    store: DefaultMessageStore, cfg: MessageStoreConfig
) -> None:
    other = DefaultMessageStore(cfg)
    with pytest.raises(RuntimeError, match="locked"):
        other.load()
