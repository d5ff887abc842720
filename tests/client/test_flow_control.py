"""Consumer flow control (seed 000, seed 004 §5): while the listener holds messages back the
consumer stops pulling, retries in 50 ms, and never caches more than a threshold plus one pull
batch. The listener is blocked on purpose (not merely slow), so what is cached is decided by the
thresholds, not by how fast this machine consumes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

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
from finchmq.client.consumer.process_queue import ProcessQueue
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
MIB = 1024 * 1024


async def fill(namesrv: str, topic: str, count: int, size: int = 16) -> None:
    async with Producer("pg", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}") as p:
        batch = [Message(topic, f"{i:06d}".encode().ljust(size, b".")) for i in range(count)]
        for start in range(0, count, 64):
            await p.send_batch(batch[start : start + 64])


def gated_consumer(
    namesrv: str, group: str, topic: str, gate: threading.Event | None = None, **kwargs: Any
) -> tuple[PushConsumer, list[int]]:
    """A consumer from the first offset whose listener waits for ``gate`` (when given) before it
    records the offsets it got."""
    done: list[int] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        if gate is not None:
            gate.wait(60)  # blocked until the test opens the gate (60 s: a failed test ends anyway)
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


@dataclass
class Pull:
    at: float  # time.monotonic() when the pull was sent
    offset: int
    count: int  # the queue's cached messages then
    size: int  # their bytes
    span: int  # last - first cached offset


def record_pulls(consumer: PushConsumer, topic: str) -> list[Pull]:
    """Every pull of ``topic`` the (started) consumer sends from now on, with its cache then."""
    pulls: list[Pull] = []
    api = consumer._pull_api
    assert api is not None
    send = api.pull_kernel_raw

    def spy(mq: MessageQueue, *args: Any) -> Awaitable[Any]:
        pq = consumer.rebalance.process_queue_table.get(mq)
        if mq.topic == topic and pq is not None:
            pulls.append(Pull(time.monotonic(), args[3], pq.msg_count, pq.msg_size, pq.get_max_span()))
        return send(mq, *args)

    api.pull_kernel_raw = spy  # type: ignore[method-assign]
    return pulls


async def process_queue_of(consumer: PushConsumer, topic: str) -> ProcessQueue:
    """The process queue of ``topic``'s only queue, once the consumer has been assigned it."""
    mq = MessageQueue(topic, "broker-a", 0)
    return await eventually(lambda: consumer.rebalance.process_queue_table.get(mq), what=f"{mq} assigned")


@contextlib.asynccontextmanager
async def sampling(pq: ProcessQueue, of: Callable[[ProcessQueue], int]) -> AsyncIterator[list[int]]:
    """``of(pq)`` every 5 ms while the block runs (how many samples does not matter: each one
    must respect the bound the test checks)."""
    samples: list[int] = []

    async def sample() -> None:
        while True:
            samples.append(of(pq))
            await asyncio.sleep(0.005)  # sampling interval

    task = asyncio.get_running_loop().create_task(sample())
    try:
        yield samples
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_message_count_threshold_pauses_pulling(
    namesrv: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 400)
    gate = threading.Event()
    c, done = gated_consumer(
        namesrv,
        f"g_{name}",
        name,
        gate,
        pull_threshold_for_queue=20,
        pull_batch_size=8,
        consume_thread_min=1,
        consume_thread_max=1,
    )
    try:
        async with c:
            pulls = record_pulls(c, name)
            pq = await process_queue_of(c, name)
            async with sampling(pq, lambda pq: pq.msg_count) as samples:
                # nothing is consumed: the cache grows by a batch per pull until it is over the
                # threshold, and then the pulls are only put off (every 50 ms)
                await eventually(lambda: c.queue_flow_control_times > 10, what="pulls held back")
                held = pq.msg_count
                assert 20 < held <= 20 + 8, "the threshold was reached, and passed by one batch at most"
                gate.set()
                await eventually(lambda: len(done) >= 400, what="all 400 consumed")
    finally:
        gate.set()
    flow_controlled = c.queue_flow_control_times
    assert max(samples) <= 20 + 8, "never above the threshold by more than one pull batch"
    assert pulls and all(p.count <= 20 for p in pulls), "a pull is sent only while at most 20 are cached"
    assert sorted(done) == list(range(400)), "consumption went on once the listener let it"
    warnings = [
        r for r in caplog.records if "the cached message count exceeds the threshold" in r.getMessage()
    ]
    assert len(warnings) == (flow_controlled + 999) // 1000, "one warning per 1,000 flow-controlled pulls"


async def test_message_size_threshold_pauses_pulling(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 40, size=100 * 1024)  # 4 MB of bodies (compressed on the wire)
    gate = threading.Event()
    c, done = gated_consumer(
        namesrv,
        f"g_{name}",
        name,
        gate,
        pull_threshold_size_for_queue=1,
        pull_batch_size=4,
        consume_thread_min=1,
        consume_thread_max=1,
    )
    bound = 2 * MIB + 4 * 100 * 1024  # over the threshold once it holds 2 MiB (whole MiB), + one batch
    try:
        async with c:
            pulls = record_pulls(c, name)
            pq = await process_queue_of(c, name)
            async with sampling(pq, lambda pq: pq.msg_size) as samples:
                await eventually(lambda: c.queue_flow_control_times > 5, what="pulls held back")
                assert 2 * MIB <= pq.msg_size < bound, (
                    "the threshold was reached, and passed by one batch at most"
                )
                gate.set()
                await eventually(lambda: len(done) >= 40, what="all 40 consumed")
    finally:
        gate.set()
    assert max(samples) < bound, "size threshold (MiB) + one batch"
    assert pulls and all(p.size < 2 * MIB for p in pulls), "a pull is sent only while under 2 MiB"


async def test_span_threshold_throttles_pulls_behind_a_stuck_message(namesrv: str, name: str) -> None:
    """Java's span is last - first *cached* offset: behind a stuck message, each new batch pushes
    the span over the limit until it is consumed, so pulls go one batch at a time, retried every
    50 ms in between."""
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 600)
    release = threading.Event()
    done: list[int] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        if msgs[0].queue_offset == 0:
            release.wait(60)  # the first message hangs: the committed offset cannot move
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
            pulls = record_pulls(c, name)
            await eventually(lambda: c.queue_max_span_flow_control_times > 5, what="pulls held back")
            pulls_while_stuck = list(pulls)
            consumed_while_stuck = list(done)
            release.set()
            await eventually(lambda: len(done) >= 600, what="all 600 consumed")
    finally:
        release.set()
    assert 0 not in consumed_while_stuck
    assert pulls_while_stuck, "pulls went on behind the stuck message"
    assert all(p.span <= 30 for p in pulls_while_stuck), "a pull is sent only while the span is within 30"
    assert sorted(done) == list(range(600))


async def test_topic_threshold_is_shared_by_the_queues(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 4)
    c, _ = gated_consumer(
        namesrv, f"g_{name}", name, pull_threshold_for_topic=40, pull_threshold_size_for_topic=400
    )
    async with c:
        await eventually(
            lambda: sum(mq.topic == name for mq in c.rebalance.process_queue_table) == 4,
            what="the topic's 4 queues assigned",
        )
        await eventually(lambda: c.pull_threshold_for_queue == 8, what="the threshold spread over 5 queues")
    # 5 queues: the topic's 4 and the retry topic's 1
    assert c.pull_threshold_for_queue == 40 // 5 and c.pull_threshold_size_for_queue == 400 // 5


@pytest.mark.parametrize("pull_interval", [300])
async def test_pull_interval_spaces_pulls(namesrv: str, name: str, pull_interval: int) -> None:
    """After each pull that found messages the next one waits ``pull_interval`` ms: the gaps
    between pulls have that lower bound (a slow machine only makes them longer)."""
    await create_topic(namesrv, name, 1)
    await fill(namesrv, name, 40)
    c, _ = gated_consumer(namesrv, f"g_{name}", name, pull_interval=pull_interval, pull_batch_size=4)
    async with c:
        pulls = record_pulls(c, name)
        await eventually(lambda: len(pulls) >= 5, what="5 pulls")
    first = pulls[:5]
    start = first[0].offset
    assert [p.offset for p in first] == list(range(start, start + 20, 4)), "one batch of 4 per pull"
    gaps = [b.at - a.at for a, b in itertools.pairwise(first)]
    assert all(gap >= (pull_interval - 5) / 1000 for gap in gaps), gaps  # 5 ms: timer granularity
