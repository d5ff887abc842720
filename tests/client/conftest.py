"""Shared set-up of the client tests: a real embedded name server + broker per test (short delay
levels), short client intervals, topic names from the test id, and helpers that wait for what they
need (routes, a dead-lettered message, stored messages). Waiting itself is ``tests.waiting``."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from finchmq.client import AdminClient, Message, MessageExt, NoRouteError, Producer, PullConsumer, PullStatus
from finchmq.client.results import SendResult
from finchmq.protocol.stored import decode_stored_all
from finchmq.testing import EmbeddedServer
from tests.waiting import DEFAULT_TIMEOUT, eventually

# The broker.conf of the suite's servers (tests/broker's `broker` fixture starts with it too):
# - small store files: the defaults (1 GiB commit-log segments, a 420 MB index file allocated up
#   front) would make this suite write ~25 GB;
# - flow control out of a loaded machine's reach: a send that waits longer than
#   waitTimeMillsInSendQueue (200 ms) is answered SYSTEM_BUSY, which neither Java's client nor
#   ours retries, and two suites on two cores can hold a queue that long. The flow-control
#   tests set their own values.
TEST_BROKER = {
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(6000 * 20),
    "maxHashSlotNum": "20000",
    "maxIndexNum": "80000",
    "waitTimeMillsInSendQueue": "10000",
}
# Retries come back after 1 s instead of 10 s, 30 s, 1 min...
FAST_BROKER = {
    "messageDelayLevel": "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s",
    **TEST_BROKER,
}

# Client intervals shortened so rebalancing and persistence happen within a test.
FAST_CLIENT: dict[str, Any] = {
    "rebalance_wait_interval": 1000,
    "heartbeat_broker_interval": 1000,
    "persist_consumer_offset_interval": 500,
    "poll_name_server_interval": 1000,
}


@pytest.fixture
def server(finchmq_server_factory: Callable[..., EmbeddedServer]) -> EmbeddedServer:
    return finchmq_server_factory(FAST_BROKER)


@pytest.fixture
def namesrv(server: EmbeddedServer) -> str:
    return server.namesrv_addr


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A topic/group-safe name derived from the test id (aiokafka ``random_topic_name``)."""
    base = re.sub(r"[^a-zA-Z0-9_-]", "_", request.node.name)[:60]
    return f"{base}_{time.monotonic_ns() % 100000}"


def short_name(request: pytest.FixtureRequest) -> str:
    """A short name from the test id: a pop retry topic (``%RETRY%group_topic``) must stay within
    the 127 bytes a stored topic may have."""
    base = re.sub(r"[^a-zA-Z0-9_-]", "_", request.node.name.removeprefix("test_"))[:24]
    return f"{base}_{time.monotonic_ns() % 100000}"


async def create_topic(
    namesrv: str,
    topic: str,
    queues: int = 4,
    *,
    attributes: str | None = None,
    cluster: str = "DefaultCluster",
    brokers: int = 1,
) -> None:
    """Create ``topic`` with ``queues`` read/write queues on every master of ``cluster`` (5.x
    ``attributes`` such as ``+message.type=FIFO``) and wait until the name server routes it to
    ``brokers`` brokers."""
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.create_topic(
            topic, cluster=cluster, read_queue_nums=queues, write_queue_nums=queues, attributes=attributes
        )

        async def routed() -> bool:
            try:
                route = await admin.topic_route(topic)
            except Exception:
                return False
            datas = route.queue_datas
            return len(datas) == brokers and all(q.read_queue_nums == queues for q in datas)

        await eventually(routed, what=f"the name server routes {topic} to {brokers} x {queues} queues")


async def produce(
    namesrv: str,
    topic: str,
    count: int,
    *,
    tags: str | None = None,
    prefix: str = "m",
    group: str = "pg_test",
) -> list[SendResult]:
    async with Producer(
        group, namesrv_addr=namesrv, instance_name=f"producer-{time.monotonic_ns()}"
    ) as producer:
        return [
            await producer.send(Message.create(topic, f"{prefix}{i}".encode(), tags=tags, keys=f"k{i}"))
            for i in range(count)
        ]


async def dead_letter(server: EmbeddedServer, group: str) -> MessageExt:
    """The one message in ``group``'s dead letter queue, once the broker has stored it."""
    assert server.broker is not None
    store = server.broker.store
    dead = f"%DLQ%{group}"
    await eventually(lambda: store.get_max_offset_in_queue(dead, 0) == 1, what=f"a message in {dead}")
    with store.get_message("check", dead, 0, 0, 1) as result:
        [msg] = decode_stored_all(result.body())
    return msg


async def pull_all(
    namesrv: str, topic: str, expected: int, timeout: float = DEFAULT_TIMEOUT
) -> list[MessageExt]:
    """Every message of ``topic`` read with the low-level pull API, once ``expected`` are there
    (what is there after ``timeout`` s otherwise: the caller's assertion shows what was missing)."""
    found: dict[tuple[int, int], MessageExt] = {}
    async with PullConsumer(
        "pull_checker", namesrv_addr=namesrv, instance_name=f"checker-{time.monotonic_ns()}"
    ) as c:
        deadline = time.monotonic() + timeout
        while True:
            try:
                queues = await c.fetch_subscribe_message_queues(topic)
            except NoRouteError:  # not registered with the name server yet
                queues = set()
            for mq in queues:
                offset = 0
                while True:
                    result = await c.pull(mq, "*", offset, 32)
                    for m in result.msg_found_list:
                        found[(m.queue_id, m.queue_offset)] = m
                    if result.pull_status is not PullStatus.FOUND:
                        break
                    offset = result.next_begin_offset
            if len(found) >= expected or time.monotonic() > deadline:
                return [found[k] for k in sorted(found)]
            await asyncio.sleep(0.1)  # polling interval
