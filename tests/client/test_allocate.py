"""Allocation strategies (pure): Java 4.x's splits, and the properties every member relies on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.client import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    MachineRoomResolver,
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


# -- machine rooms ------------------------------------------------------------------------------
# The expected allocations below were printed by Java 4.9.8's own classes for the same input.


class ByPrefix:
    """Java's AllocateMachineRoomNearByTest resolver: the room is what comes before the first '-'."""

    def broker_deploy_in(self, message_queue: MessageQueue) -> str:
        return message_queue.broker_name.split("-")[0]

    def consumer_deploy_in(self, client_id: str) -> str:
        return client_id.split("-", maxsplit=1)[0]


def shares(
    strategy: AllocateMessageQueueStrategy, mqs: list[MessageQueue], cids: list[str]
) -> dict[str, list[tuple[str, int]]]:
    return {c: [(q.broker_name, q.queue_id) for q in strategy.allocate("g", c, mqs, cids)] for c in cids}


def test_by_machine_room_like_javas_unit_test() -> None:
    # AllocateMessageQueueByMachineRoomTest: 5 queues in room1, 5 in room2, consumeridcs {room1}
    mqs = [MessageQueue("topic", "room1@broker-a" if i < 5 else "room2@broker-b", i) for i in range(10)]
    cids = ["CID_PREFIX0", "CID_PREFIX1"]
    strategy = AllocateMessageQueueByMachineRoom({"room1"})
    assert strategy.get_name() == "MACHINE_ROOM"
    assert [ids(strategy.allocate("", c, mqs, cids)) for c in cids] == [[0, 1, 4], [2, 3]]
    with pytest.raises(ValueError, match="mqAll is null or mqAll empty"):
        strategy.allocate("", cids[0], [], cids)


def test_by_machine_room_like_java() -> None:
    # only "<room>@<name>" brokers of the configured rooms; Java's split drops a trailing empty part
    brokers = [
        "room1@broker-a",
        "room2@broker-b",
        "room3@broker-c",
        "broker-d",
        "room1@x@y",
        "room3@broker-e@",
    ]
    mqs = [MessageQueue("T", b, i) for b in brokers for i in range(4)]
    strategy = AllocateMessageQueueByMachineRoom()
    strategy.set_consumeridcs(["room1", "room3"])
    assert shares(strategy, mqs, ["c0", "c1", "c2", "c3", "c4"]) == {
        "c0": [("room1@broker-a", 0), ("room1@broker-a", 1), ("room3@broker-e@", 2)],
        "c1": [("room1@broker-a", 2), ("room1@broker-a", 3), ("room3@broker-e@", 3)],
        "c2": [("room3@broker-c", 0), ("room3@broker-c", 1)],
        "c3": [("room3@broker-c", 2), ("room3@broker-c", 3)],
        "c4": [("room3@broker-e@", 0), ("room3@broker-e@", 1)],
    }
    assert strategy.allocate("g", "stranger", mqs, ["c0"]) == []


# brokers in IDC1, IDC2, IDC3; members in IDC1 (two), IDC2, IDC4 (a room without brokers)
ROOM_MQS = [MessageQueue("T", f"{room}-broker", i) for room in ("IDC1", "IDC2", "IDC3") for i in range(3)]
ROOM_CIDS = ["IDC1-c0", "IDC1-c1", "IDC2-c0", "IDC4-c0"]


def test_machine_room_nearby_like_java() -> None:
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), ByPrefix())
    assert nearby.get_name() == "MACHINE_ROOM_NEARBY-AVG"
    assert shares(nearby, ROOM_MQS, ROOM_CIDS) == {
        "IDC1-c0": [("IDC1-broker", 0), ("IDC1-broker", 1), ("IDC3-broker", 0)],
        "IDC1-c1": [("IDC1-broker", 2), ("IDC3-broker", 1)],
        "IDC2-c0": [("IDC2-broker", 0), ("IDC2-broker", 1), ("IDC2-broker", 2), ("IDC3-broker", 2)],
        "IDC4-c0": [],
    }
    circle = AllocateMachineRoomNearby(AllocateMessageQueueAveragelyByCircle(), ByPrefix())
    assert circle.get_name() == "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE"
    assert shares(circle, ROOM_MQS, ROOM_CIDS) == {
        "IDC1-c0": [("IDC1-broker", 0), ("IDC1-broker", 2), ("IDC3-broker", 0)],
        "IDC1-c1": [("IDC1-broker", 1), ("IDC3-broker", 1)],
        "IDC2-c0": [("IDC2-broker", 0), ("IDC2-broker", 1), ("IDC2-broker", 2), ("IDC3-broker", 2)],
        "IDC4-c0": [],
    }


def test_machine_room_nearby_refuses_an_unknown_room_and_a_missing_part() -> None:
    class NoRoom(ByPrefix):
        def consumer_deploy_in(self, client_id: str) -> str:
            return ""

    assert isinstance(ByPrefix(), MachineRoomResolver)
    with pytest.raises(ValueError, match="Machine room is null for consumer id IDC1-c0"):
        AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), NoRoom()).allocate(
            "g", "IDC1-c0", ROOM_MQS, ROOM_CIDS
        )
    with pytest.raises(ValueError, match="machineRoomResolver is null"):
        AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allocateMessageQueueStrategy is null"):
        AllocateMachineRoomNearby(None, ByPrefix())  # type: ignore[arg-type]
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), ByPrefix())
    assert nearby.allocate("g", "stranger", ROOM_MQS, ROOM_CIDS) == []


def rooms(prefix_count: int, start: int = 1) -> list[str]:
    return [f"IDC{i}" for i in range(start, start + prefix_count)]


@given(
    broker_rooms=st.integers(1, 6),
    member_rooms=st.integers(1, 6),
    offset=st.integers(0, 3),
    queues=st.integers(1, 12),
    members=st.integers(1, 8),
)
def test_machine_room_nearby_properties_of_javas_test(
    broker_rooms: int, member_rooms: int, offset: int, queues: int, members: int
) -> None:
    """Java's AllocateMachineRoomNearByTest, over any mix of rooms: every queue goes to exactly one
    member; the queues of a room with members go to members of that room only."""
    mqs = [
        MessageQueue("topic_test", f"{r}-brokerName", i) for r in rooms(broker_rooms) for i in range(queues)
    ]
    cids = [f"{r}-CID-{i}" for r in rooms(member_rooms, 1 + offset) for i in range(members)]
    nearby = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), ByPrefix())
    resolver = ByPrefix()
    member_room_set = {resolver.consumer_deploy_in(c) for c in cids}
    flat = []
    for cid in cids:
        for mq in nearby.allocate("Test-C-G", cid, mqs, cids):
            if resolver.broker_deploy_in(mq) in member_room_set:
                assert resolver.broker_deploy_in(mq) == resolver.consumer_deploy_in(cid)
            flat.append(mq)
    assert sorted(flat) == sorted(mqs), "disjoint and complete"
