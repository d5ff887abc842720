"""Consumer flow control (seed 000, seed 004 §5): with a slow listener the consumer stops pulling,
retries in 50 ms, and never caches more than a threshold plus one pull batch."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from finchmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)

from .conftest import FAST_CLIENT, create_topic, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def fill(namesrv: str, topic: str, count: int, size: int = 16) -> None:
    async with Producer("pg", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}") as p:
        batch = [Message(topic, f"{i:06d}".encode().ljust(size, b".")) for i in range(count)]
        for start in range(0, count, 64):
            await p.send_batch(batch[start : start + 64])


def slow_consumer(
    namesrv: str, group: str, topic: str, delay: float, **kwargs: Any
) -> tuple[PushConsumer, list[int]]:
    done: list[int] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        time.sleep(delay)
        done.extend(m.queue_offset for m in msgs)
        return OK

    c = PushConsumer(
        group,
        namesrv_addr=namesrv,
        instance_name=f"c-{time.monotonic_ns()}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **{**FAST_CLIENT, **kwargs},
    )
    c.subscribe(topic)
    c.register_message_listener(listener)
    return c, done


async def sample(consumer: PushConsumer, topic: str, seconds: float) -> list[tuple[int, int, int]]:
    """(count, size, span) of the topic's ProcessQueue every 5 ms."""
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for mq, pq in consumer.rebalance.process_queue_table.items():
            if mq.topic == topic:
                samples.append((pq.msg_count, pq.msg_size, pq.get_max_span()))
        await asyncio.sleep(0.005)
    return samples


async def test_message_count_threshold_pauses_pulling(
    namesrv: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 400)
    c, done = slow_consumer(
        namesrv,
        f"g_{name}",
        name,
        0.01,
        pull_threshold_for_queue=20,
        pull_batch_size=8,
        consume_thread_min=1,
        consume_thread_max=1,
    )
    async with c:
        samples = await sample(c, name, 2.0)
        flow_controlled = c.queue_flow_control_times
    assert max(s[0] for s in samples) <= 20 + 8, "never above the threshold by more than one pull batch"
    assert max(s[0] for s in samples) > 20, "the threshold was reached"
    assert flow_controlled > 10, "pulls were delayed (50 ms each)"
    assert 50 < len(done) < 250, "consumption went on at the listener's pace"
    warnings = [
        r for r in caplog.records if "the cached message count exceeds the threshold" in r.getMessage()
    ]
    assert len(warnings) == (flow_controlled + 999) // 1000, "one warning per 1,000 flow-controlled pulls"


async def test_message_size_threshold_pauses_pulling(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 40, size=100 * 1024)  # 4 MB of bodies (compressed on the wire)
    c, _ = slow_consumer(
        namesrv,
        f"g_{name}",
        name,
        0.05,
        pull_threshold_size_for_queue=1,
        pull_batch_size=4,
        consume_thread_min=1,
        consume_thread_max=1,
    )
    async with c:
        samples = await sample(c, name, 2.0)
        flow_controlled = c.queue_flow_control_times
    mib = 1024 * 1024
    assert max(s[1] for s in samples) < 2 * mib + 4 * 100 * 1024, "size threshold (MiB) + one batch"
    assert flow_controlled > 5


async def test_span_threshold_throttles_pulls_behind_a_stuck_message(namesrv: str, name: str) -> None:
    """Java's span is last - first *cached* offset: behind a stuck message, each new batch pushes
    the span over the limit until it is consumed, so pulls go one batch per 50 ms delay."""
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 600)
    release = threading.Event()
    done: list[int] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        if msgs[0].queue_offset == 0:
            release.wait(10)  # the first message hangs: the committed offset cannot move
        done.append(msgs[0].queue_offset)
        return OK

    c = PushConsumer(
        f"g_{name}",
        namesrv_addr=namesrv,
        instance_name=f"c-{time.monotonic_ns()}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_concurrently_max_span=30,
        pull_batch_size=8,
        consume_thread_min=4,
        consume_thread_max=4,
        **FAST_CLIENT,
    )
    c.subscribe(name)
    c.register_message_listener(listener)
    try:
        async with c:
            await asyncio.sleep(1.5)
            span_controlled = c.queue_max_span_flow_control_times
            consumed_while_stuck = len(done)
            release.set()
            await wait_until(lambda: len(done) >= 600)
    finally:
        release.set()
    assert span_controlled > 5
    assert consumed_while_stuck <= 8 * (1500 // 50 + 6), "about one batch per 50 ms while stuck, not all 600"


async def test_topic_threshold_is_shared_by_the_queues(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 4)
    c, _ = slow_consumer(
        namesrv, f"g_{name}", name, 0, pull_threshold_for_topic=40, pull_threshold_size_for_topic=400
    )
    async with c:
        await wait_until(lambda: sum(mq.topic == name for mq in c.rebalance.process_queue_table) == 4)
        await wait_until(lambda: c.pull_threshold_for_queue == 8)
    # 5 queues: the topic's 4 and the retry topic's 1
    assert c.pull_threshold_for_queue == 40 // 5 and c.pull_threshold_size_for_queue == 400 // 5


@pytest.mark.parametrize("pull_interval", [300])
async def test_pull_interval_spaces_pulls(namesrv: str, name: str, pull_interval: int) -> None:
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 40)
    c, done = slow_consumer(namesrv, f"g_{name}", name, 0, pull_interval=pull_interval, pull_batch_size=4)
    async with c:
        await asyncio.sleep(1.0)
        consumed = len(done)
    assert 4 <= consumed <= 4 * (1000 // pull_interval + 2), "one batch of 4 per pull_interval"
