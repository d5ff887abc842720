"""Allocation strategies (pure): Java 4.x's splits, and the properties every member relies on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.client import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueConsistentHash,
    MessageQueue,
)

MQS = [MessageQueue("T", "broker-a", i) for i in range(8)]


def ids(queues: list[MessageQueue]) -> list[int]:
    return [q.queue_id for q in queues]


def test_averagely_8_queues_3_members_like_java() -> None:
    strategy = AllocateMessageQueueAveragely()
    cids = ["c1", "c2", "c3"]
    assert [ids(strategy.allocate("g", c, MQS, cids)) for c in cids] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_averagely_4_queues_3_members_gives_everyone_one() -> None:
    # Java 4.x (and the C++ client) give [0,1] [2] [3]; seed 002's 3.x formula gave [0,1] [2,3] [].
    strategy = AllocateMessageQueueAveragely()
    cids = ["c1", "c2", "c3"]
    assert [ids(strategy.allocate("g", c, MQS[:4], cids)) for c in cids] == [[0, 1], [2], [3]]


def test_more_members_than_queues_leaves_the_last_idle() -> None:
    strategy = AllocateMessageQueueAveragely()
    cids = [f"c{i}" for i in range(5)]
    assert [ids(strategy.allocate("g", c, MQS[:3], cids)) for c in cids] == [[0], [1], [2], [], []]


def test_by_circle() -> None:
    strategy = AllocateMessageQueueAveragelyByCircle()
    cids = ["c1", "c2", "c3"]
    assert [ids(strategy.allocate("g", c, MQS, cids)) for c in cids] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_not_a_member_gets_nothing_and_empty_inputs_raise() -> None:
    strategy = AllocateMessageQueueAveragely()
    assert strategy.allocate("g", "stranger", MQS, ["c1"]) == []
    with pytest.raises(ValueError, match="currentCID is empty"):
        strategy.allocate("g", "", MQS, ["c1"])
    with pytest.raises(ValueError, match="mqAll is null or mqAll empty"):
        strategy.allocate("g", "c1", [], ["c1"])
    with pytest.raises(ValueError, match="cidAll is null or cidAll empty"):
        strategy.allocate("g", "c1", MQS, [])


def test_by_config_returns_the_configured_queues() -> None:
    strategy = AllocateMessageQueueByConfig([MQS[1], MQS[5]])
    assert strategy.allocate("g", "anyone", MQS, ["x"]) == [MQS[1], MQS[5]]


def test_consistent_hash_moves_few_queues_when_a_member_leaves() -> None:
    mqs = [MessageQueue("T", f"broker-{b}", i) for b in "ab" for i in range(16)]
    cids = [f"10.0.0.{i}@pid" for i in range(4)]
    strategy = AllocateMessageQueueConsistentHash(virtual_node_cnt=20)
    before = {c: set(strategy.allocate("g", c, mqs, cids)) for c in cids}
    after = {c: set(strategy.allocate("g", c, mqs, cids[:3])) for c in cids[:3]}
    for c in cids[:3]:
        assert before[c] <= after[c], "a remaining member keeps every queue it had"
    assert set().union(*after.values()) == set(mqs)


@pytest.mark.parametrize(
    "strategy",
    [
        AllocateMessageQueueAveragely(),
        AllocateMessageQueueAveragelyByCircle(),
        AllocateMessageQueueConsistentHash(),
    ],
    ids=lambda s: s.get_name(),
)
@given(queues=st.integers(1, 40), members=st.integers(1, 12))
def test_every_queue_goes_to_exactly_one_member(strategy: object, queues: int, members: int) -> None:
    mqs = sorted(MessageQueue("T", f"b{i % 3}", i) for i in range(queues))
    cids = sorted(f"192.168.0.{i}@{i}" for i in range(members))
    shares = [strategy.allocate("g", c, mqs, cids) for c in cids]  # type: ignore[attr-defined]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat) == mqs, "disjoint and complete"
    if strategy.get_name() != "CONSISTENT_HASH":  # type: ignore[attr-defined]
        sizes = [len(s) for s in shares]
        assert max(sizes) - min(sizes) <= 1, "balanced"
