"""Clustering as members join and leave: every message is consumed, a queue has one consumer at a
time once a rebalance settles, and a member never consumes a message twice while the assignment
holds. Every phase waits for a condition, never for a duration."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import pytest

from finchmq.client import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
)
from finchmq.client.consumer.executor import ThreadConsumeExecutor
from finchmq.client.consumer.process_queue import ProcessQueue
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class RememberingTable(dict[MessageQueue, ProcessQueue]):
    """A consumer's process queue table that also keeps every queue it ever held in ``every``."""

    def __init__(self, table: dict[MessageQueue, ProcessQueue]) -> None:
        super().__init__(table)
        self.every: list[ProcessQueue] = list(table.values())

    def __setitem__(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        self.every.append(pq)
        super().__setitem__(mq, pq)


async def test_queues_move_between_members_without_loss(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 8)
    group = f"g_{name}"
    consumed: list[tuple[float, str, int, int]] = []  # when, member, queue id, offset
    members: dict[str, PushConsumer] = {}
    # Steady windows: from the moment the members' queues are seen to partition the topic (and
    # no listener call on a queue a member gave up is under way) until the next membership
    # change; (start, end, the assignment seen at the start).
    windows: list[tuple[float, float, dict[str, set[int]]]] = []

    def member(tag: str) -> PushConsumer:
        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            now = time.monotonic()
            consumed.extend((now, tag, m.queue_id, m.queue_offset) for m in msgs)
            return OK

        c = PushConsumer(
            group,
            namesrv_addr=namesrv,
            instance_name=tag,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            **FAST_CLIENT,
        )
        c.subscribe(name)
        c.register_message_listener(listener)
        return c

    sent: list[tuple[int, int]] = []
    samples: list[tuple[float, dict[str, set[int]]]] = []

    def assignment() -> dict[str, set[int]]:
        return {
            tag: {
                mq.queue_id
                for mq, pq in c.rebalance.process_queue_table.items()
                if mq.topic == name and not pq.dropped
            }
            for tag, c in list(members.items())
        }

    def partitioned(snapshot: dict[str, set[int]]) -> bool:
        owners = sorted(q for queues in snapshot.values() for q in queues)
        return owners == list(range(8)) and all(snapshot.values())

    async def produce() -> None:
        async with Producer("pg", namesrv_addr=namesrv, instance_name="rebalance-producer") as p:
            for i in range(600):
                r = await p.send(Message(name, f"m{i}".encode()))
                sent.append((r.message_queue.queue_id, r.queue_offset))
                await asyncio.sleep(0.008)  # scenario: production spread over the joins and leave

    async def sample() -> None:
        while True:
            samples.append((time.monotonic(), assignment()))
            await asyncio.sleep(0.05)  # sampling interval (no assertion counts samples)

    def settled() -> bool:
        """A member's listener call that began before it dropped the queue may still run: the
        window starts once none does."""
        return all(
            pq.in_flight == 0
            for c in members.values()
            for pq in cast("RememberingTable", c.rebalance.process_queue_table).every
            if pq.dropped
        )

    async def steady() -> None:
        """Wait until the live members partition the queues, and for a sample taken after that."""
        await eventually(lambda: partitioned(assignment()) and settled(), timeout=60)
        start = time.monotonic()
        windows.append((start, float("inf"), assignment()))
        await eventually(lambda: bool(samples) and samples[-1][0] > start, timeout=60)

    def change() -> None:
        if windows:
            start, _, snapshot = windows[-1]
            windows[-1] = (start, time.monotonic(), snapshot)

    async def join(tag: str) -> None:
        change()
        c = member(tag)
        await c.start()
        c.rebalance.process_queue_table = RememberingTable(c.rebalance.process_queue_table)
        members[tag] = c
        await steady()

    async def leave(tag: str) -> None:
        change()
        c = members.pop(tag)
        await c.close()
        # its consume threads end after the call they run (close does not wait for them)
        executor = c.consume_service.executor if c.consume_service is not None else None
        assert isinstance(executor, ThreadConsumeExecutor)
        await eventually(
            lambda: not any(t.is_alive() for t in executor._threads), what=f"{tag}'s threads ended"
        )
        await steady()

    sampler = asyncio.get_running_loop().create_task(sample())
    try:
        await join("A")
        producing = asyncio.get_running_loop().create_task(produce())
        await eventually(lambda: len(sent) >= 100, timeout=60)
        await join("B")
        await eventually(lambda: len(sent) >= 250, timeout=60)
        await join("C")
        await eventually(lambda: len(sent) >= 400, timeout=60)
        await leave("B")
        await producing
        await eventually(lambda: {(q, o) for _, _, q, o in consumed} >= set(sent), timeout=60)
        change()
    finally:
        sampler.cancel()
        for c in list(members.values()):
            await c.close()

    # every message consumed
    assert {(q, o) for _, _, q, o in consumed} >= set(sent) and len(sent) == 600

    def window_of(t: float) -> dict[str, set[int]] | None:
        for start, end, snapshot in windows:
            if start <= t < end:
                return snapshot
        return None

    # within a steady window the assignment does not move: each queue has exactly one live member
    assert len(windows) == 4
    for t, snapshot in samples:
        expected = window_of(t)
        if expected is not None:
            assert snapshot == expected, f"at {t}: {snapshot}, expected {expected}"

    # and only that member consumes it, never the same message twice
    seen: set[tuple[int, str, int, int]] = set()
    for when, tag, queue_id, offset in consumed:
        for index, (start, end, snapshot) in enumerate(windows):
            if start <= when < end:
                assert queue_id in snapshot[tag], f"{tag} consumed queue {queue_id} it did not hold"
                key = (index, tag, queue_id, offset)
                assert key not in seen, f"{tag} consumed {queue_id}@{offset} twice in a steady window"
                seen.add(key)


async def test_notify_consumer_ids_changed_rebalances_at_once(namesrv: str, name: str) -> None:
    """With an hour's rebalance interval, only the broker's NOTIFY_CONSUMER_IDS_CHANGED (or a
    member's own start) can move queues, however long the waits below take."""
    await create_topic(namesrv, name, 4)
    group = f"g_{name}"
    settings: dict[str, Any] = {**FAST_CLIENT, "rebalance_wait_interval": 3_600_000}

    def member(tag: str) -> PushConsumer:
        c = PushConsumer(group, namesrv_addr=namesrv, instance_name=tag, **settings)
        c.subscribe(name)
        c.register_message_listener(lambda msgs, ctx: OK)
        return c

    def mine(c: PushConsumer) -> set[MessageQueue]:
        return {mq for mq in c.rebalance.process_queue_table if mq.topic == name}

    async with member("A") as a:
        await eventually(lambda: len(mine(a)) == 4)
        async with member("B") as b:
            await eventually(lambda: len(mine(a)) == 2 and len(mine(b)) == 2)
            assert mine(a).isdisjoint(mine(b))
        await eventually(lambda: len(mine(a)) == 4)


async def test_a_rebalance_finishing_after_close_ends_quietly(
    namesrv: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rebalance that was under way when its consumer closed reports its result to a closed
    consumer: that must not raise (it used to: "cannot start heartbeat-after-rebalance")."""
    await create_topic(namesrv, name, 4)
    c = PushConsumer(f"g_{name}", namesrv_addr=namesrv, **FAST_CLIENT)
    c.subscribe(name)
    c.register_message_listener(lambda msgs, ctx: OK)
    await c.start()
    await eventually(lambda: bool(c.rebalance.process_queue_table))
    queues = set(c.rebalance.process_queue_table)
    await c.close()
    with caplog.at_level(logging.ERROR):
        c.rebalance.message_queue_changed(name, queues, queues)  # as the late rebalance does
        await asyncio.sleep(0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


class RoomOfName:
    """Machine rooms: the one broker is in "hz"; a member is where its instance name says."""

    def broker_deploy_in(self, message_queue: MessageQueue) -> str:
        return "hz"

    def consumer_deploy_in(self, client_id: str) -> str:
        return client_id.split("@")[1].split("-", maxsplit=1)[0]


async def test_machine_room_nearby_keeps_a_rooms_queues_in_the_room(namesrv: str, name: str) -> None:
    """AllocateMachineRoomNearby on live members: while a member is alive in the broker's room it
    takes every queue there; once it leaves, the member of the other room takes them over."""
    await create_topic(namesrv, name, 4)
    strategy = AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), RoomOfName())

    def member(tag: str) -> PushConsumer:
        c = PushConsumer(
            f"g_{name}", namesrv_addr=namesrv, instance_name=tag, allocate_message_queue_strategy=strategy,
            **FAST_CLIENT,
        )  # fmt: skip
        c.subscribe(name)
        c.register_message_listener(lambda msgs, ctx: OK)
        return c

    def mine(c: PushConsumer) -> set[MessageQueue]:
        return {mq for mq in c.rebalance.process_queue_table if mq.topic == name}

    async with member("sh-1") as far:
        await eventually(lambda: len(mine(far)) == 4)  # nobody in "hz": everyone shares its queues
        async with member("hz-1") as near:
            await eventually(lambda: len(mine(near)) == 4 and not mine(far))
        await eventually(lambda: len(mine(far)) == 4)
