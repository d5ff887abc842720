"""Clients with a namespace (Java ``ClientConfig.namespace``): the broker stores ``ns%topic`` and
``%RETRY%ns%group`` / ``%DLQ%ns%group``, the user sees its own names."""

from __future__ import annotations

import time
from typing import Any

import pytest

from finchmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from finchmq.client.config import ProducerConfig
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic, dead_letter, pull_all

NS = "ns_a"


def test_namespace_must_not_hold_the_separator() -> None:
    with pytest.raises(ValueError, match="namespace"):
        ProducerConfig(producer_group="pg", namespace="a%b")
    with pytest.raises(ValueError, match="namespace"):
        ProducerConfig(producer_group="pg", namespace=" ")


def _settings(**kwargs: Any) -> dict[str, Any]:
    return {**FAST_CLIENT, "instance_name": f"ns-{time.monotonic_ns()}", "namespace": NS, **kwargs}


async def test_producer_and_push_consumer_see_their_names_the_broker_stores_namespaced(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, f"{NS}%{name}")
    group = f"g_{name}"
    async with Producer(f"pg_{name}", namesrv_addr=namesrv, **_settings()) as producer:
        assert producer.config.producer_group == f"{NS}%pg_{name}"
        sent = [await producer.send(Message.create(name, f"m{i}".encode())) for i in range(3)]
        assert {r.message_queue.topic for r in sent} == {name}
        queues = await producer.fetch_publish_message_queues(name)
        assert {q.topic for q in queues} == {name}
        picked = await producer.send(
            Message.create(name, b"m3"), selector=lambda mqs, msg, arg: sorted(mqs)[0]
        )
        assert picked.message_queue == sorted(queues)[0]
    stored = await pull_all(namesrv, f"{NS}%{name}", 4)
    assert sorted(m.body for m in stored) == [b"m0", b"m1", b"m2", b"m3"]
    assert {m.properties.get("INSTANCE_ID") for m in stored} == {NS}

    seen: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        namesrv_addr=namesrv,
        **_settings(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
    )
    consumer.subscribe(name)
    consumer.register_message_listener(listener)
    async with consumer:
        assert consumer.config.consumer_group == f"{NS}%{group}"
        await eventually(lambda: len(seen) >= 4, what="the four messages consumed")
        assert {m.topic for m in seen} == {name}
        assert {q.topic for q in await consumer.fetch_subscribe_message_queues(name)} == {name}


async def test_retries_and_dead_letters_go_to_the_namespaced_topics(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, f"{NS}%{name}")
    async with Producer(f"pg_{name}", namesrv_addr=namesrv, **_settings()) as producer:
        await producer.send(Message.create(name, b"fail"))
    seen: list[tuple[str, int]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        seen.extend((m.topic, m.reconsume_times) for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    group = f"g_{name}"
    consumer = PushConsumer(
        group,
        namesrv_addr=namesrv,
        **_settings(max_reconsume_times=1, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
    )
    consumer.subscribe(name)
    consumer.register_message_listener(listener)
    assert server.broker is not None
    store = server.broker.store
    async with consumer:
        dead = await dead_letter(server, f"{NS}%{group}")
        retried = store.get_max_offset_in_queue(f"%RETRY%{NS}%{group}", 0)
    assert dead.body == b"fail" and dead.topic == f"%DLQ%{NS}%{group}"
    assert dead.properties["RETRY_TOPIC"] == f"{NS}%{name}"
    assert retried == 1
    assert seen == [(name, 0), (name, 1)], "the retry shows the user's topic"


async def test_lite_pull_consumer_with_a_namespace(server: EmbeddedServer, namesrv: str, name: str) -> None:
    await create_topic(namesrv, f"{NS}%{name}", queues=1)
    async with Producer(f"pg_{name}", namesrv_addr=namesrv, **_settings()) as producer:
        await producer.send(Message.create(name, b"x"))
    consumer = LitePullConsumer(
        f"g_{name}",
        namesrv_addr=namesrv,
        **_settings(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
    )
    async with consumer:
        [mq] = await consumer.fetch_message_queues(name)
        assert mq.topic == name
        consumer.assign([mq])
        got: list[MessageExt] = []

        async def polled() -> bool:
            got.extend(await consumer.poll(200))
            return bool(got)

        await eventually(polled, what="the message polled")
        assert [(m.topic, m.body) for m in got] == [(name, b"x")]
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 1
