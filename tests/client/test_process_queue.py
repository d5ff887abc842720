"""ProcessQueue (seed 002/004): offsets committed = smallest still cached; counters flow control
reads; the orderly take/commit/put-back cycle; expiry."""

from __future__ import annotations

import time

from finchmq.client import MessageExt
from finchmq.client.consumer.process_queue import ProcessQueue


def msgs(*offsets: int, size: int = 10) -> list[MessageExt]:
    return [MessageExt("T", b"x" * size, queue_offset=o) for o in offsets]


def test_put_counts_each_offset_once_and_dispatches_once() -> None:
    pq = ProcessQueue()
    assert pq.put_message(msgs(0, 1, 2)) is True
    assert pq.put_message(msgs(2, 3)) is False, "already consuming"
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (4, 40, 3)
    assert pq.get_max_span() == 3


def test_committed_offset_is_the_smallest_offset_still_cached() -> None:
    pq = ProcessQueue()
    pq.put_message(msgs(10, 20, 40, 50, 70))
    # seed 004 §4.7.1: tasks (20,40) and (50,70) finish while 10 is still consumed
    assert pq.remove_message(msgs(50, 70)) == 10
    assert pq.remove_message(msgs(20, 40)) == 10
    pq.put_message(msgs(100))
    assert pq.remove_message(msgs(10)) == 100
    assert pq.remove_message(msgs(100)) == 101, "empty: the offset after the last one"
    assert pq.remove_message(msgs(100)) == -1, "nothing cached at all"
    assert (pq.msg_count, pq.msg_size) == (0, 0)


def test_orderly_take_commit_and_put_back() -> None:
    pq = ProcessQueue()
    pq.put_message(msgs(0, 1, 2, 3))
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    assert list(pq.msg_tree_map) == [2, 3]
    pq.make_message_to_consume_again(taken)
    assert list(pq.msg_tree_map) == [0, 1, 2, 3], "put back in offset order"
    taken = pq.take_messages(3)
    assert pq.commit() == 3
    assert pq.msg_count == 1
    assert pq.take_messages(5)[0].queue_offset == 3
    pq.rollback()
    assert list(pq.msg_tree_map) == [3]
    pq.take_messages(1)
    assert pq.take_messages(1) == [] and pq.consuming is False, "nothing left: not consuming"


def test_out_of_order_put_keeps_the_map_sorted() -> None:
    pq = ProcessQueue()
    pq.put_message(msgs(5, 6))
    pq.put_message(msgs(3))
    assert list(pq.msg_tree_map) == [3, 5, 6]
    assert pq.get_max_span() == 3


def test_expiry_and_info() -> None:
    pq = ProcessQueue()
    # 5 s ago: expired for a 1 s limit, and not for an hour's however long this line takes
    pq.last_pull_timestamp = int(time.time() * 1000) - 5000
    assert pq.is_pull_expired(1000) and not pq.is_pull_expired(3_600_000)
    pq.last_lock_timestamp = int(time.time() * 1000) - 5000
    assert pq.is_lock_expired(1000) and not pq.is_lock_expired(3_600_000)
    pq.put_message(msgs(7, 9))
    pq.take_messages(1)
    info = pq.fill_process_queue_info(commit_offset=7)
    assert (info.commit_offset, info.cached_msg_min_offset, info.cached_msg_max_offset) == (7, 9, 9)
    assert (info.transaction_msg_min_offset, info.transaction_msg_count) == (7, 1)


def test_max_offset_tracks_accumulation() -> None:
    pq = ProcessQueue()
    pq.put_message(msgs(0, 1), max_offset=100)
    assert pq.msg_acc_cnt == 99
