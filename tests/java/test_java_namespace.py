"""Namespaces across clients: Java 4.9.8's client and finchmq's, both with namespace X, on one
finchmq server, see each other's messages under the user's topic name."""

from __future__ import annotations

import asyncio
import time

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
from finchmq.testing.process import ServerProcess
from tests.client.conftest import create_topic
from tests.waiting import eventually

from .conftest import run_java

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NS = "interop_ns"
JVM = (f"-Dinterop.namespace={NS}",)
COUNT = 3
MODES = ("sync", "async", "oneway", "selector", "batch")


def test_java_producer_to_finchmq_consumer_in_one_namespace(
    java_classes: str, finchmq_server: ServerProcess
) -> None:
    topic = f"NsJavaToFinch{time.monotonic_ns() % 100000}"
    namesrv = finchmq_server.namesrv_addr
    asyncio.run(create_topic(namesrv, f"{NS}%{topic}"))
    run_java(java_classes, "produce", namesrv, topic, str(COUNT), jvm_args=JVM)
    expected = {f"{mode}-{i}" for mode in MODES for i in range(COUNT)}

    async def consume() -> list[MessageExt]:
        seen: list[MessageExt] = []

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            seen.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "ns_finch_g",
            namesrv_addr=namesrv,
            namespace=NS,
            instance_name=f"ns-{time.monotonic_ns()}",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        async with consumer:
            await eventually(lambda: {m.keys for m in seen} >= expected, what="every Java message")
        return seen

    seen = asyncio.run(consume())
    assert {m.keys for m in seen} == expected
    assert {m.topic for m in seen} == {topic}
    assert all(m.body == f"body-{m.keys}".encode() for m in seen)


def test_finchmq_producer_to_java_consumer_in_one_namespace(
    java_classes: str, finchmq_server: ServerProcess
) -> None:
    topic = f"NsFinchToJava{time.monotonic_ns() % 100000}"
    namesrv = finchmq_server.namesrv_addr

    async def produce() -> None:
        await create_topic(namesrv, f"{NS}%{topic}")
        async with Producer(
            "ns_finch_pg", namesrv_addr=namesrv, namespace=NS, instance_name=f"ns-{time.monotonic_ns()}"
        ) as producer:
            for i in range(COUNT):
                await producer.send(Message.create(topic, f"body-k{i}".encode(), keys=f"k{i}"))

    asyncio.run(produce())
    got = run_java(
        java_classes, "push", namesrv, "ns_java_g", topic, str(COUNT), "concurrent", "k0", jvm_args=JVM
    )
    assert {m["key"] for m in got} == {f"k{i}" for i in range(COUNT)}
    assert all(m["topic"] == topic and m["body"] == f"body-{m['key']}" for m in got)
    # k0 refused once: Java's consumer retried it through %RETRY%interop_ns%ns_java_g
    assert sorted(m["reconsume"] for m in got if m["key"] == "k0")[:2] == [0, 1]
