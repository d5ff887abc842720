"""Orderly consumption: per-queue order kept through failures (SUSPEND) and membership changes,
broker locks held by exactly one member, lock renewal, and the DLQ after max_reconsume_times."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from typing import Any

from finchmq.client import (
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    MessageListenerOrderly,
    Producer,
    PushConsumer,
    select_message_queue_by_hash,
)
from finchmq.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic, dead_letter

SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


async def produce_ordered(namesrv: str, topic: str, keys: int, per_key: int) -> None:
    async with Producer("pg", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}") as p:
        for seq in range(per_key):
            for k in range(keys):
                key = f"order-{k}"
                msg = Message.create(topic, f"{key}:{seq}".encode(), keys=key)
                await p.send(msg, selector=select_message_queue_by_hash, arg=key)


class OrderChecker(MessageListenerOrderly):
    """Records every attempt; fails some of them (SUSPEND) at random, deterministically seeded."""

    def __init__(self, fail_ratio: float = 0.0, seed: int = 7) -> None:
        self.attempts: dict[str, list[int]] = defaultdict(list)
        self.done: dict[str, list[int]] = defaultdict(list)
        self.by_member: dict[str, list[str]] = defaultdict(list)
        self.fail_ratio = fail_ratio
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.overtaken: list[tuple[str, int]] = []

    def consume_message(self, msgs: list[MessageExt], context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        with self.lock:
            parsed = [m.body.decode().split(":") for m in msgs]
            batch = {(key, int(seq)) for key, seq in parsed}
            for key, seq in parsed:
                self.attempts[key].append(int(seq))
                done = set(self.done[key])
                if any(earlier not in done and (key, earlier) not in batch for earlier in range(int(seq))):
                    self.overtaken.append((key, int(seq)))
            if self.random.random() < self.fail_ratio:
                return SUSPEND
            for key, seq in parsed:
                self.done[key].append(int(seq))
            return ConsumeOrderlyStatus.SUCCESS

    def total_done(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.done.values())


def make(namesrv: str, group: str, topic: str, listener: object, **kwargs: Any) -> PushConsumer:
    settings = {
        **FAST_CLIENT,
        "instance_name": f"o-{time.monotonic_ns()}",
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        "suspend_current_queue_time_millis": 50,
        "consume_thread_min": 2,
        "consume_thread_max": 2,
        **kwargs,
    }
    c = PushConsumer(group, namesrv_addr=namesrv, **settings)
    c.subscribe(topic)
    c.register_message_listener(listener, orderly=True)  # type: ignore[arg-type]
    assert c.consume_orderly
    return c


async def test_order_is_kept_per_key_through_failures(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 4)
    await produce_ordered(namesrv, name, keys=8, per_key=25)
    checker = OrderChecker(fail_ratio=0.2)
    c = make(namesrv, f"g_{name}", name, checker, consume_message_batch_max_size=3)
    async with c:
        await eventually(lambda: checker.total_done() >= 200)
        held = {mq for mq in c.rebalance.process_queue_table if mq.topic == name}
        assert server.broker is not None
        locks = server.broker.rebalance_lock_manager
        assert {locks.holder(f"g_{name}", mq) for mq in held} == {c.client_id}, "the broker locks are ours"
    for key, seqs in checker.done.items():
        assert seqs == list(range(25)), f"{key}: consumed out of order or twice: {seqs}"
    assert checker.overtaken == [], "a message was handed over before an earlier one succeeded"
    assert sum(len(v) for v in checker.attempts.values()) > 200, "some attempts failed and were retried"


async def test_one_member_per_queue_and_order_kept_when_members_change(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 4)
    group = f"g_{name}"
    checker = OrderChecker()
    a = make(namesrv, group, name, checker, instance_name="orderly-A")
    b = make(namesrv, group, name, checker, instance_name="orderly-B")
    await a.start()
    producing = asyncio.get_running_loop().create_task(produce_ordered(namesrv, name, keys=8, per_key=40))
    await asyncio.sleep(0.5)  # scenario: A consumes alone for a while before B joins
    await b.start()
    try:

        def split() -> bool:
            mine_a = {
                mq for mq, pq in a.rebalance.process_queue_table.items() if mq.topic == name and pq.locked
            }
            mine_b = {
                mq for mq, pq in b.rebalance.process_queue_table.items() if mq.topic == name and pq.locked
            }
            return len(mine_a) == 2 and len(mine_b) == 2 and not mine_a & mine_b

        await eventually(split)
        assert server.broker is not None
        locks = server.broker.rebalance_lock_manager
        for c in (a, b):
            for mq in c.rebalance.process_queue_table:
                if mq.topic == name:
                    assert locks.holder(group, mq) == c.client_id
        await b.close()
        await producing
        await eventually(lambda: checker.total_done() >= 320, timeout=40)
    finally:
        await b.close()
        await a.close()
    for key, seqs in checker.done.items():
        assert seqs == sorted(seqs), f"{key} out of order: {seqs}"
        assert set(seqs) == set(range(40)), f"{key} lost messages"


async def test_locks_are_renewed(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    c = make(namesrv, f"g_{name}", name, OrderChecker(), rebalance_lock_interval=300)
    async with c:
        await eventually(lambda: sum(mq.topic == name for mq in c.rebalance.process_queue_table) == 2)
        pq = next(pq for mq, pq in c.rebalance.process_queue_table.items() if mq.topic == name)
        first = pq.last_lock_timestamp
        await eventually(lambda: pq.last_lock_timestamp > first + 250)
        assert pq.locked


async def test_a_message_failing_too_often_goes_to_the_dlq(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 1)
    group = f"g_{name}"
    seen: list[tuple[str, int]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        seen.append((msgs[0].body.decode(), msgs[0].reconsume_times))
        return SUSPEND if msgs[0].body == b"poison" else ConsumeOrderlyStatus.SUCCESS

    async with Producer("pg", namesrv_addr=namesrv, instance_name="dlq-producer") as p:
        for body in (b"before", b"poison", b"after"):
            await p.send(Message(name, body))
    c = make(namesrv, group, name, listener, max_reconsume_times=2)
    async with c:
        await eventually(lambda: ("after", 0) in seen)
    assert [s for s in seen if s[0] == "poison"] == [("poison", 0), ("poison", 1), ("poison", 2)]
    assert seen.index(("poison", 2)) < seen.index(("after", 0)), "the queue waited for the poison message"
    msg = await dead_letter(server, group)
    assert msg.body == b"poison"


async def test_a_busy_queue_yields_after_max_time_consume_continuously(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    await produce_ordered(namesrv, name, keys=1, per_key=30)
    checker = OrderChecker()
    calls: list[float] = []

    def slow(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        calls.append(time.monotonic())
        time.sleep(0.02)  # a slow listener on purpose: 30 calls outlast several 60 ms turns
        return checker.consume_message(msgs, ctx)

    c = make(namesrv, f"g_{name}", name, slow, max_time_consume_continuously=60)
    yields: list[int] = []
    async with c:
        service = c.consume_service
        assert isinstance(service, ConsumeMessageOrderlyService)
        submit_later = service._submit_later

        def counting(pq: object, mq: object, delay_ms: int) -> None:
            yields.append(delay_ms)
            submit_later(pq, mq, delay_ms)  # type: ignore[arg-type]

        service._submit_later = counting  # type: ignore[method-assign]
        await eventually(lambda: checker.total_done() >= 30)
    assert checker.done["order-0"] == list(range(30)), "resubmitted requests keep the order"
    assert yields.count(10) >= 4, "600 ms of work in 60 ms turns: the request gave the queue up and came back"
