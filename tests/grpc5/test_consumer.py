"""The 5.x consumer side of finchmq's gRPC server (ReceiveMessage, AckMessage,
ChangeInvisibleDuration), driven by the official SDK (``sdk_driver.py``) against an embedded
server: messages a remoting producer (finchmq's own client) sent reach the SDK's SimpleConsumer
and PushConsumer intact, acks stick, a nack comes back, bad requests get the 5.x codes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from finchmq.client.admin import AdminClient
from finchmq.client.producer import Producer
from finchmq.protocol.bodies import SubscriptionGroupConfig
from finchmq.protocol.codes import LanguageCode
from finchmq.protocol.message import Message
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

from .conftest import grpc_endpoints, push, simple

# retries come back after 1 s instead of 10 s, and POP revives quickly
CONF = {"messageDelayLevel": "1s 1s 1s 1s 1s", "reviveInterval": "200", "reviveMaxSlow": "1"}

OK = 20000
ILLEGAL_INVISIBLE_TIME = 40011
INVALID_RECEIPT_HANDLE = 40013


async def _admin(server: EmbeddedServer, work: Any) -> Any:
    async with AdminClient(namesrv_addr=server.namesrv_addr) as admin:
        return await work(admin)


def create_topic(server: EmbeddedServer, topic: str, queues: int = 4, **options: Any) -> None:
    asyncio.run(
        _admin(
            server,
            lambda a: a.create_topic(
                topic, read_queue_nums=queues, write_queue_nums=queues, broker_addr=server.broker_addr, **options
            ),
        )
    )


def create_group(server: EmbeddedServer, group: str, **options: Any) -> None:
    config = SubscriptionGroupConfig(group_name=group, **options)
    asyncio.run(_admin(server, lambda a: a.create_subscription_group(config, broker_addr=server.broker_addr)))


def send(server: EmbeddedServer, messages: Iterable[Message]) -> list[str]:
    """Send with finchmq's own (remoting) producer; returns the message ids (UNIQ_KEY)."""

    async def run() -> list[str]:
        async with Producer("remoting-pg", namesrv_addr=server.namesrv_addr) as producer:
            return [(await producer.send(m)).msg_id for m in messages]

    return asyncio.run(run())


def numbered(topic: str, count: int, **extra: Any) -> list[Message]:
    return [
        Message.create(
            topic,
            f"body-{i}".encode(),
            tags="TagA" if i % 2 == 0 else "TagB",
            keys=[f"k{i}", f"key-{i}"],
            properties={"color": f"amber{i}", **{k: v.format(i=i) for k, v in extra.items()}},
        )
        for i in range(count)
    ]


def index(record: Mapping[str, Any]) -> int:
    return int(record["body"].rsplit("-", 1)[1])


def test_simple_consumer_receives_what_a_remoting_producer_sent(sdk: Any, grpc_server_factory: Any) -> None:
    server = grpc_server_factory(CONF)
    topic, group, count = "RemotingToSdk", "GSimple", 10
    create_topic(server, topic)
    ids = send(server, numbered(topic, count))
    consumer = simple(sdk, grpc_endpoints(server), topic, group, expect=count)
    records = consumer.finish()
    assert not consumer.errors(), consumer.errors()
    received = consumer.of("received")
    assert sorted(index(r) for r in received) == list(range(count))
    for r in received:
        i = index(r)
        assert r["message_id"] == ids[i]
        assert r["topic"] == topic
        assert r["tag"] == ("TagA" if i % 2 == 0 else "TagB")
        assert r["keys"] == sorted([f"k{i}", f"key-{i}"])
        assert r["properties"] == {"color": f"amber{i}"}
        assert r["delivery_attempt"] == 1
        assert r["message_type"] == 1  # NORMAL
    assert records[-1]["done"] == count
    # acked: a second consumer of the group finds nothing
    again = simple(sdk, grpc_endpoints(server), topic, group, max_seconds=6)
    again.finish()
    assert not again.errors() and again.of("received") == []


def test_nack_redelivers_with_the_next_delivery_attempt(sdk: Any, grpc_server_factory: Any) -> None:
    server = grpc_server_factory(CONF)
    topic, group, count = "NackTopic", "GNack", 3
    create_topic(server, topic)
    send(server, numbered(topic, count))
    consumer = simple(sdk, grpc_endpoints(server), topic, group, expect=count, nack_first=True)
    consumer.finish()
    assert not consumer.errors(), consumer.errors()
    received = consumer.of("received")
    attempts: dict[int, list[int]] = {}
    for r in received:
        attempts.setdefault(index(r), []).append(r["delivery_attempt"])
    assert attempts == {i: [1, 2] for i in range(count)}
    assert len(consumer.of("nacked")) == count and len(consumer.of("acked")) == count


def test_invisible_time_below_the_minimum_is_refused(sdk: Any, grpc_server_factory: Any) -> None:
    server = grpc_server_factory(CONF)
    topic = "ShortInvisible"
    create_topic(server, topic)
    consumer = simple(sdk, grpc_endpoints(server), topic, "GShort", invisible=5, max_seconds=10)
    consumer.finish()
    [error] = consumer.errors()
    assert error["code"] == ILLEGAL_INVISIBLE_TIME, error


def test_empty_topic_receives_nothing(sdk: Any, grpc_server_factory: Any) -> None:
    server = grpc_server_factory(CONF)
    topic = "EmptyTopic"
    create_topic(server, topic)
    consumer = simple(sdk, grpc_endpoints(server), topic, "GEmpty", max_seconds=6)
    records = consumer.finish()
    assert not consumer.errors(), consumer.errors()
    assert consumer.of("received") == [] and consumer.of("batch") and set(consumer.of("batch")) == {0}
    assert records[-1]["done"] == 0


def test_admin_lists_the_sdk_consumer_as_a_python_client(sdk: Any, grpc_server_factory: Any) -> None:
    server = grpc_server_factory(CONF)
    topic, group = "ConnTopic", "GConn"
    create_topic(server, topic)
    consumer = simple(sdk, grpc_endpoints(server), topic, group, max_seconds=60, expect=1)

    def languages() -> list[LanguageCode]:
        try:
            connection = asyncio.run(_admin(server, lambda a: a.consumer_connection(group, server.broker_addr)))
        except Exception:
            return []
        return [c.language for c in connection.connection_set]

    wait_until(lambda: languages() == [LanguageCode.PYTHON], what="the SDK consumer in consumerConnection")
    send(server, numbered(topic, 1))
    consumer.finish()
    assert not consumer.errors(), consumer.errors()
