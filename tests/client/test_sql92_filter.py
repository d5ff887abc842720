"""SQL92 subscriptions (``MessageSelector.by_sql``) end to end: the broker evaluates the
expression on each message's properties at pull time and when a held pull's message arrives;
without ``enablePropertyFilter`` it refuses them with Java's text; a malformed expression is
refused with the position of the error."""

from __future__ import annotations

from typing import Any

import pytest

from finchmq.client import (
    AdminClient,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageSelector,
    MQBrokerError,
    Producer,
    PushConsumer,
    ValidationError,
)
from finchmq.protocol.bodies import SubscriptionData
from finchmq.protocol.codes import ResponseCode
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_BROKER, FAST_CLIENT, create_topic

SQL = "a > 5 AND (TAGS = 'T' OR color IN ('red', 'blue')) AND b IS NULL"


def matches(i: int, tag: str, color: str, b: str | None) -> bool:
    return i > 5 and (tag == "T" or color in ("red", "blue")) and b is None


def message(topic: str, i: int) -> tuple[Message, bool]:
    tag = "T" if i % 3 == 0 else "U"
    color = ("red", "green", "blue", "grey")[i % 4]
    b = "x" if i % 5 == 0 else None
    props = {"a": str(i), "color": color, **({"b": b} if b else {})}
    return Message.create(topic, f"m{i}".encode(), tags=tag, properties=props), matches(i, tag, color, b)


async def test_push_consumer_gets_exactly_the_matching_messages(
    finchmq_server_factory: Any, name: str
) -> None:
    server: EmbeddedServer = finchmq_server_factory({**FAST_BROKER, "enablePropertyFilter": "true"})
    await create_topic(server.namesrv_addr, name, 2)
    expected: set[bytes] = set()
    got: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer(f"pg_{name}", namesrv_addr=server.namesrv_addr) as producer:
        for i in range(20):  # stored before the consumer starts: filtered at pull time
            msg, wanted = message(name, i)
            await producer.send(msg)
            if wanted:
                expected.add(msg.body)
        consumer = PushConsumer(
            f"g_{name}",
            namesrv_addr=server.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            **FAST_CLIENT,
        )
        consumer.subscribe(name, MessageSelector.by_sql(SQL))
        consumer.register_message_listener(listener)
        async with consumer:
            await eventually(lambda: set(got) == expected)
            for i in range(20, 40):  # sent while pulls are held: matched on arrival
                msg, wanted = message(name, i)
                await producer.send(msg)
                if wanted:
                    expected.add(msg.body)
            await eventually(lambda: set(got) == expected)
    assert sorted(got) == sorted(expected), "each matching message once, no other"


async def test_without_enable_property_filter_the_consumer_is_refused(
    server: EmbeddedServer, name: str
) -> None:
    await create_topic(server.namesrv_addr, name, 1)
    consumer = PushConsumer(f"g_{name}", namesrv_addr=server.namesrv_addr)
    consumer.subscribe(name, MessageSelector.by_sql("a > 1"))
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with pytest.raises(
        MQBrokerError, match="The broker does not support consumer to filter message by SQL92"
    ):
        await consumer.start()


async def test_a_malformed_expression_is_refused_with_its_position(
    finchmq_server_factory: Any, name: str
) -> None:
    consumer = PushConsumer(f"g_{name}", namesrv_addr="127.0.0.1:1")
    with pytest.raises(ValidationError, match="column 5"):
        consumer.subscribe(name, MessageSelector.by_sql("a > "))
    # A client that does not check (Java's does not) hears it from the broker.
    server: EmbeddedServer = finchmq_server_factory({**FAST_BROKER, "enablePropertyFilter": "true"})
    await create_topic(server.namesrv_addr, name, 1)
    async with AdminClient(namesrv_addr=server.namesrv_addr) as admin:
        bad = SubscriptionData(topic=name, sub_string="a = 'x", expression_type="SQL92")
        with pytest.raises(MQBrokerError) as info:
            await admin.instance.api.check_client_in_broker(server.broker_addr, f"g_{name}", "c1", bad)
    assert info.value.response_code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "column 5" in str(info.value)
