"""Request-reply (RocketMQ 4.7+): ``Producer.request`` sends a message carrying CORRELATION_ID,
REPLY_TO_CLIENT and TTL; a consumer answers with ``create_reply_message`` (to the cluster's
reply topic, SEND_REPLY_MESSAGE_V2); the broker pushes the reply to the requester
(PUSH_REPLY_MESSAGE_TO_CLIENT) and stores it."""

from __future__ import annotations

import asyncio

import pytest

from finchmq.client import (
    ConsumeConcurrentlyStatus,
    Message,
    MessageConst,
    MessageExt,
    Producer,
    PushConsumer,
    RequestTimeoutError,
    ValidationError,
    create_reply_message,
)
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic


async def responder(server: EmbeddedServer, topic: str, name: str, delay: float = 0.0) -> PushConsumer:
    """A consumer that answers each request with ``re:`` + its body, after ``delay`` seconds."""
    replier = Producer(f"reply_pg_{name}", namesrv_addr=server.namesrv_addr)
    await replier.start()

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            await asyncio.sleep(delay)
            await replier.send(create_reply_message(msg, b"re:" + msg.body))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(f"rg_{name}", namesrv_addr=server.namesrv_addr, **FAST_CLIENT)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    await consumer.start()
    consumer.replier = replier  # type: ignore[attr-defined]
    return consumer


async def stop(consumer: PushConsumer) -> None:
    await consumer.close()
    await consumer.replier.close()  # type: ignore[attr-defined]


async def test_request_gets_the_reply(server: EmbeddedServer, name: str) -> None:
    await create_topic(server.namesrv_addr, name, 2)
    consumer = await responder(server, name, name)
    try:
        async with Producer(f"req_{name}", namesrv_addr=server.namesrv_addr) as requester:
            replies = [await requester.request(Message(name, f"q{i}".encode()), 15_000) for i in range(3)]
            assert [r.body for r in replies] == [b"re:q0", b"re:q1", b"re:q2"]
            reply = replies[0]
            assert reply.topic == "DefaultCluster_REPLY_TOPIC"
            assert (
                reply.properties[MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT]
                == requester.instance.client_id
            )
            assert MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME in reply.properties
            assert MessageConst.PROPERTY_PUSH_REPLY_TIME in reply.properties
            got: list[bytes] = []
            future = requester.request_async(
                Message(name, b"async"), lambda r: got.append(r.body), None, 15_000
            )
            assert (await future).body == b"re:async" and got == [b"re:async"]
            assert requester.instance.reply_futures == {}
    finally:
        await stop(consumer)
    assert server.broker is not None  # storeReplyMessageEnable (Java's default): replies are kept
    store = server.broker.store
    await eventually(lambda: store.get_max_offset_in_queue("DefaultCluster_REPLY_TOPIC", 0) == 4)


async def test_a_request_nobody_answers_times_out(server: EmbeddedServer, name: str) -> None:
    await create_topic(server.namesrv_addr, name, 1)
    async with Producer(f"req_{name}", namesrv_addr=server.namesrv_addr) as requester:
        with pytest.raises(RequestTimeoutError, match=f"send request message to <{name}> OK, but wait reply"):
            await requester.request(Message(name, b"hello?"), 1_000)
        assert requester.instance.reply_futures == {}


async def test_a_late_reply_is_dropped(server: EmbeddedServer, name: str) -> None:
    await create_topic(server.namesrv_addr, name, 1)
    consumer = await responder(server, name, name, delay=1.5)
    try:
        async with Producer(f"req_{name}", namesrv_addr=server.namesrv_addr) as requester:
            with pytest.raises(RequestTimeoutError):
                await requester.request(Message(name, b"slow"), 1_000)
            assert server.broker is not None
            store = server.broker.store
            await eventually(lambda: store.get_max_offset_in_queue("DefaultCluster_REPLY_TOPIC", 0) == 1)
            assert requester.instance.reply_futures == {}  # nothing waits for it: dropped
    finally:
        await stop(consumer)


def test_a_reply_needs_a_request_from_a_broker() -> None:
    with pytest.raises(ValidationError, match=r"property\[CLUSTER\] is null"):
        create_reply_message(Message("T", b"not a request"), b"reply")
