"""Shared set-up of the Spark tests: one local-mode SparkSession and one embedded finchmq server
for the whole suite (Spark takes ~15 s to start), topic names from the test id, and helpers to
fill queues with known messages.

Spark's Python workers are separate processes; they reach the embedded broker on loopback.
Tests that need a server of their own (small segments for data loss) start one with
``finchmq_server_factory``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'finchmq[spark]'")

from finchmq.client import (
    BlockingAdminClient,
    BlockingProducer,
    Message,
    MessageExt,
    MessageQueue,
    NoRouteError,
)
from finchmq.protocol.stored import decode_stored_all
from finchmq.spark import local_session
from finchmq.store import GetMessageStatus
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

# The broker sheds sends queued for half of waitTimeMillsInSendQueue; Spark and the broker share
# two cores here, so that is raised to keep tests about other things free of SYSTEM_BUSY.
BROKER = {"waitTimeMillsInSendQueue": "5000", "enablePropertyFilter": "true"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("finchmq-tests", cores=2, task_attempts=2)  # one retry: see test_write
    yield session
    session.stop()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(tmp_path_factory.mktemp("spark-broker"), BROKER) as embedded:
        yield embedded


@pytest.fixture(scope="session")
def namesrv(server: EmbeddedServer) -> str:
    return server.namesrv_addr


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A topic/group-safe name derived from the test id."""
    base = re.sub(r"[^a-zA-Z0-9_-]", "_", request.node.name)[:50]
    return f"{base}_{time.monotonic_ns() % 1_000_000}"


@dataclass
class Sent:
    """What ``fill`` stored: queue id -> list of (offset, body, tags, keys, properties)."""

    topic: str
    rows: dict[int, list[tuple[int, bytes, str | None, str | None, dict[str, str]]]] = field(
        default_factory=dict
    )

    def count(self) -> int:
        return sum(len(v) for v in self.rows.values())

    def keys(self) -> set[tuple[int, int]]:
        return {(q, row[0]) for q, rows in self.rows.items() for row in rows}


def create_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    with BlockingAdminClient(namesrv_addr=namesrv) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    with BlockingAdminClient(namesrv_addr=namesrv) as admin:

        def routed() -> bool:  # the broker registers the new topic with the name server right away
            try:
                route = admin.topic_route(topic)
            except NoRouteError:
                return False
            return bool(route.queue_datas) and route.queue_datas[0].read_queue_nums == queues

        wait_until(routed, what=f"the route of {topic} with {queues} queues")


def fill(
    namesrv: str,
    topic: str,
    per_queue: int,
    queues: int = 4,
    *,
    body: Callable[[int, int], bytes] = lambda q, i: f"q{q}-m{i}".encode(),
    tags: Callable[[int, int], str | None] = lambda q, i: None,
    keys: Callable[[int, int], str | None] = lambda q, i: None,
    props: Callable[[int, int], dict[str, str]] = lambda q, i: {},
    sent: Sent | None = None,
    batch: int = 200,
) -> Sent:
    """Send ``per_queue`` messages to each of ``queues`` queues (in batches, to the queue), so
    offsets are known: message ``i`` of queue ``q`` is at offset ``i`` (plus what was there)."""
    sent = sent or Sent(topic)
    with BlockingProducer(f"fill_{abs(hash(topic)) % 10**8}", namesrv_addr=namesrv) as producer:
        for q in range(queues):
            mq = MessageQueue(topic, "broker-a", q)
            msgs = [
                Message.create(topic, body(q, i), tags=tags(q, i), keys=keys(q, i), properties=props(q, i))
                for i in range(per_queue)
            ]
            base = None
            for lo in range(0, per_queue, batch):
                result = producer.send_batch(msgs[lo : lo + batch], queue=mq)[0]
                base = result.queue_offset - lo if base is None else base
            rows = sent.rows.setdefault(q, [])
            for i, msg in enumerate(msgs):
                rows.append((base + i if base is not None else i, msg.body, msg.tags, msg.keys, props(q, i)))
    return sent


def while_running(query: Any, predicate: Callable[[], bool], what: str) -> Callable[[], bool]:
    """``predicate`` for ``wait_until`` that fails at once if the streaming ``query`` died (rather
    than at the deadline)."""

    def check() -> bool:
        if predicate():
            return True
        if not query.isActive:
            raise AssertionError(f"{what}: the streaming query stopped: {query.exception()}")
        return False

    return check


def wait_while_running(query: Any, predicate: Callable[[], bool], what: str) -> None:
    """Wait for ``predicate`` as the streaming ``query`` runs (a look every 0.2 s: each may ask
    the JVM; 60 s, as micro-batches on a loaded machine are slow)."""
    wait_until(while_running(query, predicate, what), timeout=60, what=what, interval=0.2)


def queue_messages(
    server: EmbeddedServer, topic: str, start: int = 0, queue_id: int = 0
) -> tuple[list[MessageExt], int]:
    """The messages of a queue from offset ``start`` on, read straight from the embedded broker's
    store (system topics too, no consumer group), and the offset after them."""
    assert server.broker is not None
    found: list[MessageExt] = []
    while True:
        with server.broker.store.get_message("test-observer", topic, queue_id, start, 32) as result:
            if result.status is not GetMessageStatus.FOUND:
                return found, start
            found += decode_stored_all(result.body())
            start = result.next_begin_offset


def checkpoint(tmp_path: Path, name: str = "checkpoint") -> str:
    return str(tmp_path / name)


def read(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    """A batch DataFrame of ``topic``; ``options`` are further reader options."""
    reader = spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def error_of(action: Callable[[], Any]) -> str:
    """The text of the exception ``action`` raises (the test fails if it raises none)."""
    with pytest.raises(Exception) as info:
        action()
    return str(info.value)
