"""Clustering as members join and leave: every message is consumed, a queue has one consumer at a
time once a rebalance settles, and duplicates happen only around a rebalance."""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import defaultdict
from typing import Any

from finchmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
)

from .conftest import FAST_CLIENT, create_topic, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
SETTLE = 1.5  # s after a membership change by which every member has rebalanced (NOTIFY + 1 s periodic)


async def test_queues_move_between_members_without_loss(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 8)
    group = f"g_{name}"
    consumed: list[tuple[float, str, int, int]] = []  # when, member, queue id, offset
    changes: list[float] = []
    members: dict[str, PushConsumer] = {}

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

    async def produce() -> None:
        async with Producer("pg", namesrv_addr=namesrv, instance_name="rebalance-producer") as p:
            for i in range(600):
                r = await p.send(Message(name, f"m{i}".encode()))
                sent.append((r.message_queue.queue_id, r.queue_offset))
                await asyncio.sleep(0.008)

    async def sample() -> None:
        while True:
            snapshot = {
                tag: {
                    mq.queue_id
                    for mq, pq in c.rebalance.process_queue_table.items()
                    if mq.topic == name and not pq.dropped
                }
                for tag, c in list(members.items())
            }
            samples.append((time.monotonic(), snapshot))
            await asyncio.sleep(0.05)

    async def join(tag: str) -> None:
        c = member(tag)
        await c.start()
        members[tag] = c
        changes.append(time.monotonic())

    async def leave(tag: str) -> None:
        c = members.pop(tag)
        changes.append(time.monotonic())
        await c.close()

    sampler = asyncio.get_running_loop().create_task(sample())
    try:
        await join("A")
        producing = asyncio.get_running_loop().create_task(produce())
        await asyncio.sleep(1.5)
        await join("B")
        await asyncio.sleep(1.5)
        await join("C")
        await asyncio.sleep(1.5)
        await leave("B")
        await producing
        await wait_until(lambda: {(q, o) for _, _, q, o in consumed} >= set(sent), timeout=20)
        await asyncio.sleep(SETTLE)
    finally:
        sampler.cancel()
        for c in list(members.values()):
            await c.close()

    # every message consumed
    assert {(q, o) for _, _, q, o in consumed} >= set(sent) and len(sent) == 600

    def settled(t: float) -> bool:
        return all(not (c <= t < c + SETTLE) for c in changes)

    # once settled, each queue belongs to exactly one live member
    steady = [(t, s) for t, s in samples if settled(t) and s]
    assert len(steady) > 20
    for t, snapshot in steady:
        owners = [q for queues in snapshot.values() for q in queues]
        assert sorted(owners) == list(range(8)), f"at {t}: {snapshot}"

    # and only that member consumes it
    times = [t for t, _ in samples]
    for when, tag, queue_id, _ in consumed:
        if not settled(when):
            continue
        i = bisect.bisect_right(times, when)
        around = [samples[j][1] for j in (i - 1, i) if 0 <= j < len(samples)]  # the samples either side
        assert any(queue_id in s.get(tag, set()) for s in around), (
            f"{tag} consumed queue {queue_id} it did not hold"
        )

    # duplicates only around a rebalance
    by_message: dict[tuple[int, int], list[float]] = defaultdict(list)
    for when, _, queue_id, offset in consumed:
        by_message[(queue_id, offset)].append(when)
    duplicates = {k: sorted(v) for k, v in by_message.items() if len(v) > 1}
    for key, when in duplicates.items():
        assert not settled(when[-1]) or any(c <= when[-1] <= c + 2 * SETTLE for c in changes), (
            f"duplicate {key} consumed at {when}, far from any rebalance {changes}"
        )


async def test_notify_consumer_ids_changed_rebalances_at_once(namesrv: str, name: str) -> None:
    """With a 60 s rebalance interval, only the broker's NOTIFY_CONSUMER_IDS_CHANGED can move queues."""
    await create_topic(namesrv, name, 4)
    group = f"g_{name}"
    settings: dict[str, Any] = {**FAST_CLIENT, "rebalance_wait_interval": 60_000}

    def member(tag: str) -> PushConsumer:
        c = PushConsumer(group, namesrv_addr=namesrv, instance_name=tag, **settings)
        c.subscribe(name)
        c.register_message_listener(lambda msgs, ctx: OK)
        return c

    def mine(c: PushConsumer) -> set[MessageQueue]:
        return {mq for mq in c.rebalance.process_queue_table if mq.topic == name}

    async with member("A") as a:
        await wait_until(lambda: len(mine(a)) == 4)
        began = time.monotonic()
        async with member("B") as b:
            await wait_until(lambda: len(mine(a)) == 2 and len(mine(b)) == 2, timeout=10)
            assert time.monotonic() - began < 5
            assert mine(a).isdisjoint(mine(b))
        await wait_until(lambda: len(mine(a)) == 4, timeout=10)
