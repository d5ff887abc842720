"""``SimpleConsumer`` against a real broker (POP): receive, ack and change-invisible round trips,
redelivery after the invisible time, the DLQ after ``max_reconsume_times``, long polling woken by
an arrival, tag and SQL92 filters, FIFO receiving with two consumers keeping each queue's order,
the errors a stale receipt handle gets, and the blocking form. Nothing waits a fixed time: a
redelivery is waited for; "nothing more comes" is checked once the broker's revive service has
dealt with every check point."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from finchmq.client import (
    AdminClient,
    BlockingSimpleConsumer,
    ClientStateError,
    InvalidReceiptHandleError,
    Message,
    MessageExt,
    MessageSelector,
    MQBrokerError,
    Producer,
    SimpleConsumer,
    ValidationError,
)
from finchmq.client.consumer.pop import receipt_handle
from finchmq.protocol.bodies import KVTable, SubscriptionGroupConfig
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.message_const import MessageConst
from finchmq.remoting import RemotingClient
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually, wait_until

from .conftest import FAST_BROKER, FAST_CLIENT, create_topic, dead_letter, produce, short_name

# revive rounds every 200 ms (Java: 1 s, and up to 3 more when idle): redeliveries within a test
POP_BROKER = {**FAST_BROKER, "reviveInterval": "200", "reviveMaxSlow": "1", "enablePropertyFilter": "true"}
INVISIBLE = 60_000  # ms: long enough that nothing comes back by itself within a test


@pytest.fixture
def server(finchmq_server_factory: Any) -> EmbeddedServer:
    return finchmq_server_factory(POP_BROKER)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return short_name(request)


def simple(namesrv: str, group: str, **kwargs: Any) -> SimpleConsumer:
    settings = {**FAST_CLIENT, "instance_name": f"s-{time.monotonic_ns()}", "await_duration": 1000, **kwargs}
    return SimpleConsumer(group, namesrv_addr=namesrv, **settings)


async def receive_all(
    consumer: SimpleConsumer, count: int, invisible: int = INVISIBLE, what: str = ""
) -> list[MessageExt]:
    """Receive until ``count`` messages came (long polling); returns them in arrival order."""
    got: list[MessageExt] = []

    async def more() -> bool:
        got.extend(await consumer.receive(32, invisible))
        return len(got) >= count

    await eventually(more, what=what or f"{count} messages received")
    return got


async def revive_settled(server: EmbeddedServer) -> bool:
    """The broker's revive service has read every check point and acked or revived each."""
    async with RemotingClient() as client:
        answer = await client.invoke(
            server.broker_addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5000
        )
    info = KVTable.from_json(answer.body).table
    return (
        info["popRevivePendingCheckPoints"] == "0"
        and info["popReviveBehindMessages"] == "0"
        and info["popOffsetBufferSize"] == "0"
    )


async def keep_receiving_until_dead(
    consumer: SimpleConsumer, server: EmbeddedServer, group: str
) -> MessageExt:
    """Receive (nothing must come) until the message is in ``%DLQ%group``: the delivery past the
    limit is what moves it."""
    assert server.broker is not None
    store = server.broker.store

    async def moved() -> bool:
        assert await consumer.receive(32, 1000) == []
        return store.get_max_offset_in_queue(f"%DLQ%{group}", 0) >= 1

    await eventually(moved, what=f"a message in %DLQ%{group}")
    return await dead_letter(server, group)


def bodies(msgs: list[MessageExt]) -> list[str]:
    return sorted(m.body.decode() for m in msgs)


async def test_receive_then_ack_and_nothing_comes_back(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 4)
    async with simple(namesrv, f"g_{name}", subscription={name: "*"}) as consumer:
        # a new group pops from the end (as 5.x's SimpleConsumer): send once it is there
        await produce(namesrv, name, 8)
        got = await receive_all(consumer, 8)
        assert bodies(got) == sorted(f"m{i}" for i in range(8))
        for msg in got:
            assert msg.topic == name and msg.reconsume_times == 0 and msg.keys is not None
            _, extra = receipt_handle(msg)
            assert extra.invisible_time == INVISIBLE and extra.queue_offset == msg.queue_offset
            await consumer.ack(msg)
        await eventually(lambda: revive_settled(server), what="every check point acked")
        assert await consumer.receive(32, INVISIBLE) == []


async def test_unacked_messages_come_back_after_their_invisible_time(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 2)
    async with simple(namesrv, f"g_{name}", subscription={name: "*"}) as consumer:
        await produce(namesrv, name, 2)
        first = await receive_all(consumer, 2, invisible=1000)
        keep = next(m for m in first if m.body == b"m0")
        drop = next(m for m in first if m.body == b"m1")
        await consumer.ack(keep)
        again = await receive_all(consumer, 1, what="the unacked message delivered again")
        assert [m.body for m in again] == [b"m1"]
        back = again[0]
        assert back.topic == name and back.reconsume_times == 1
        assert back.client_msg_id == drop.client_msg_id
        assert (
            back.properties[MessageConst.PROPERTY_FIRST_POP_TIME]
            == drop.properties[MessageConst.PROPERTY_FIRST_POP_TIME]
        )
        # the first delivery's handle is stale now: refused with a remark saying what to do
        with pytest.raises(InvalidReceiptHandleError, match="delivers it again") as caught:
            await consumer.ack(drop)
        assert caught.value.receipt_handle == drop.properties[MessageConst.PROPERTY_POP_CK]
        await consumer.ack(back)
        await eventually(lambda: revive_settled(server), what="the retry delivery acked")
        assert await consumer.receive(32, INVISIBLE) == []


async def test_change_invisible_duration(server: EmbeddedServer, namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    async with simple(namesrv, f"g_{name}", subscription={name: "*"}) as consumer:
        await produce(namesrv, name, 1)
        [msg] = await receive_all(consumer, 1)
        # more time: the returned message carries the new handle, the old one is spent
        later = await consumer.change_invisible_duration(msg, 1000)
        assert later.properties[MessageConst.PROPERTY_POP_CK] != msg.properties[MessageConst.PROPERTY_POP_CK]
        assert receipt_handle(later)[1].invisible_time == 1000
        # ... and it comes back once that is over
        [again] = await receive_all(consumer, 1, what="the message after its new invisible time")
        assert again.client_msg_id == msg.client_msg_id and again.reconsume_times == 1
        longer = await consumer.change_invisible_duration(again, INVISIBLE)
        await consumer.ack(longer)
        await eventually(lambda: revive_settled(server), what="acked with the changed handle")
        assert await consumer.receive(32, INVISIBLE) == []
        with pytest.raises(ValidationError, match="out of range") as caught:
            await consumer.change_invisible_duration(longer, -1)
        assert caught.value.response_code == ResponseCode.INVALID_PARAMETER


async def test_messages_past_max_reconsume_times_go_to_the_dlq(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 1)
    async with simple(namesrv, group, subscription={name: "*"}, max_reconsume_times=1) as consumer:
        await produce(namesrv, name, 1)
        deliveries: list[MessageExt] = []

        async def delivered_twice() -> bool:
            deliveries.extend(await consumer.receive(32, 1000))  # never acked
            return len(deliveries) >= 2

        await eventually(delivered_twice, what="two deliveries")
        assert [m.reconsume_times for m in deliveries] == [0, 1]  # max_reconsume_times + 1
        dead = await keep_receiving_until_dead(consumer, server, group)  # the third: moved, not returned
        assert dead.body == b"m0" and dead.properties[MessageConst.PROPERTY_RETRY_TOPIC]
        await eventually(lambda: revive_settled(server), what="the last delivery acked by the move")
        assert await consumer.receive(32, INVISIBLE) == []


async def test_long_polling_returns_as_soon_as_a_message_arrives(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 2)
    assert server.broker is not None
    polling = server.broker.context.pop.long_polling
    async with simple(namesrv, group, subscription={name: "*"}, await_duration=120_000) as consumer:
        waiting = asyncio.ensure_future(consumer.receive(32, INVISIBLE))
        # the broker holds the pop (queue -1: one broker's pop covers both queues) ...
        await eventually(lambda: polling.polling_num(name, group, -1) == 1, what="the pop held by the broker")
        async with Producer(
            "pg_wake", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}"
        ) as producer:
            for mq in sorted(await producer.fetch_publish_message_queues(name)):
                await producer.send(Message(name, b"wake"), queue=mq)
        # ... and answers it once a message arrives, long before its 120 s are over
        await eventually(waiting.done, what="the held pop answered on arrival")
        got = waiting.result()
        assert got and {m.body for m in got} == {b"wake"}
        assert polling.polling_num(name, group, -1) == 0
        for msg in got:
            await consumer.ack(msg)


async def test_a_handle_the_broker_refuses_carries_its_response_code(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    """A handle naming an offset past the end of its queue (what a queue cleaned up under a slow
    consumer leaves) is NO_MESSAGE from the broker: an ``InvalidReceiptHandleError`` with that
    code; a queue id the topic does not have is the broker's MESSAGE_ILLEGAL."""
    await create_topic(namesrv, name, 1)
    async with simple(namesrv, f"g_{name}", subscription={name: "*"}) as consumer:
        await produce(namesrv, name, 1)
        [msg] = await receive_all(consumer, 1)
        text, extra = receipt_handle(msg)

        def forged(**changes: int) -> MessageExt:
            handle = dataclasses.replace(extra, **changes).encode()
            return dataclasses.replace(
                msg, properties={**msg.properties, MessageConst.PROPERTY_POP_CK: handle}
            )

        gone = forged(queue_offset=msg.queue_offset + 1000)
        with pytest.raises(InvalidReceiptHandleError, match="no longer has it") as caught:
            await consumer.ack(gone)
        assert caught.value.response_code == ResponseCode.NO_MESSAGE
        assert caught.value.receipt_handle == gone.properties[MessageConst.PROPERTY_POP_CK]
        with pytest.raises(InvalidReceiptHandleError, match="no longer has it") as caught:
            await consumer.change_invisible_duration(gone, 5000)
        assert caught.value.response_code == ResponseCode.NO_MESSAGE
        with pytest.raises(MQBrokerError, match="queueId") as refused:
            await consumer.ack(forged(queue_id=7))
        assert refused.value.response_code == ResponseCode.MESSAGE_ILLEGAL
        # the real handle still works
        await consumer.ack(msg)
        assert msg.properties[MessageConst.PROPERTY_POP_CK] == text
        await eventually(lambda: revive_settled(server), what="the message acked")
        assert await consumer.receive(32, INVISIBLE) == []


async def test_tag_and_sql_filters(server: EmbeddedServer, namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    other = f"{name}_sql"
    await create_topic(namesrv, other, 1)
    async with simple(namesrv, f"g_{name}", subscription={name: "TagA || TagB"}) as consumer:
        consumer.subscribe(other, MessageSelector.by_sql("a > 5"))
        async with Producer(
            "pg_filter", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}"
        ) as producer:
            for tag in ("TagA", "TagC", "TagB"):
                await producer.send(Message.create(name, tag.encode(), tags=tag))
            for a in (3, 7):
                await producer.send(Message.create(other, str(a).encode()).with_user_property("a", str(a)))
        got = await receive_all(consumer, 3)
        assert bodies(got) == ["7", "TagA", "TagB"]
        for msg in got:
            await consumer.ack(msg)
        await eventually(lambda: revive_settled(server), what="every check point acked")
    with pytest.raises(ValidationError, match="subscription"):
        SimpleConsumer("g", namesrv_addr=namesrv).subscribe(name, MessageSelector.by_sql("a >"))


async def test_fifo_receiving_keeps_each_queue_in_order_across_two_consumers(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 2)
    per_queue = 6
    first = simple(namesrv, group, subscription={name: "*"}, fifo=True)
    second = simple(namesrv, group, subscription={name: "*"}, fifo=True)
    async with first, second:
        async with Producer(
            "pg_fifo", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}"
        ) as producer:
            queues = sorted(await producer.fetch_publish_message_queues(name))
            for i in range(per_queue):
                for mq in queues:
                    await producer.send(Message(name, f"{mq.queue_id}-{i}".encode()), queue=mq)
        seen: dict[int, list[int]] = defaultdict(list)  # queue -> offsets, in the order handled
        failed_once: set[str] = set()

        async def work(consumer: SimpleConsumer) -> None:
            stopped: set[int] = set()  # queues with a failure in this batch: the rest waits
            for msg in await consumer.receive(3, 2000):
                body = msg.body.decode()
                if msg.queue_id in stopped:
                    continue
                if body.endswith("-2") and body not in failed_once:
                    failed_once.add(body)  # not acked: it and what follows in its queue come again
                    stopped.add(msg.queue_id)
                    continue
                seen[msg.queue_id].append(msg.queue_offset)
                await consumer.ack(msg)

        async def everything() -> bool:
            await asyncio.gather(work(first), work(second))
            return sum(len(v) for v in seen.values()) >= per_queue * len(queues)

        await eventually(everything, what="every message handled once, in order")
        for queue_id, offsets in seen.items():
            assert offsets == list(range(per_queue)), f"queue {queue_id} handled out of order: {offsets}"


async def test_a_closed_or_misused_consumer_says_what_is_wrong(namesrv: str, name: str) -> None:
    consumer = simple(namesrv, f"g_{name}")
    with pytest.raises(ClientStateError):
        await consumer.receive(1, INVISIBLE)
    async with consumer:
        with pytest.raises(ValidationError, match="subscribe"):
            await consumer.receive(1, INVISIBLE)
        consumer.subscribe(name)
        with pytest.raises(ValidationError, match="milliseconds") as caught:
            await consumer.receive(1, 15)  # seconds, as the gRPC SDK takes them: refused
        assert caught.value.response_code == ResponseCode.INVALID_PARAMETER
        with pytest.raises(ValidationError, match="max_message_num"):
            await consumer.receive(0, INVISIBLE)
        with pytest.raises(InvalidReceiptHandleError, match="no receipt handle"):
            await consumer.ack(MessageExt(name, b"x"))
    with pytest.raises(ClientStateError):
        await consumer.start()


async def test_the_broker_lists_the_simple_consumer(namesrv: str, name: str) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 1)
    async with (
        simple(namesrv, group, subscription={name: "*"}) as consumer,
        AdminClient(namesrv_addr=namesrv) as admin,
    ):
        connection = await admin.consumer_connection(group)
        assert [c.client_id for c in connection.connection_set] == [consumer.client_id]
        assert connection.consume_type is not None and connection.consume_type.type_cn == "PULL"
        assert name in connection.subscription_table


def test_blocking_simple_consumer(server: EmbeddedServer, namesrv: str, name: str) -> None:
    group = f"g_{name}"
    asyncio.run(create_topic(namesrv, name, 2))
    with BlockingSimpleConsumer(
        group, namesrv_addr=namesrv, subscription={name: "*"}, await_duration=1000, **FAST_CLIENT,
        instance_name=f"b-{time.monotonic_ns()}",
    ) as consumer:  # fmt: skip
        asyncio.run(produce(namesrv, name, 3))
        got: list[MessageExt] = []
        lock = threading.Lock()

        def more() -> bool:
            with lock:
                got.extend(consumer.receive(32, INVISIBLE))
                return len(got) >= 3

        wait_until(more, what="three messages received")
        assert bodies(got) == ["m0", "m1", "m2"]
        extended = consumer.change_invisible_duration(got[0], INVISIBLE)
        consumer.ack(extended)
        for msg in got[1:]:
            consumer.ack(msg)
        with pytest.raises(InvalidReceiptHandleError, match="no receipt handle"):
            consumer.ack(MessageExt(name, b"not popped"))
    asyncio.run(_settled(server))


async def _settled(server: EmbeddedServer) -> None:
    await eventually(lambda: revive_settled(server), what="every check point acked")


async def test_group_retry_max_times_also_bounds_deliveries(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    """The broker dead-letters after the group's retryMaxTimes + 1 deliveries on its own (the
    client's limit can only be lower)."""
    group = f"g_{name}"
    await create_topic(namesrv, name, 1)
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.create_subscription_group(
            SubscriptionGroupConfig(group_name=group, retry_max_times=1), broker_addr=server.broker_addr
        )
    async with simple(namesrv, group, subscription={name: "*"}, max_reconsume_times=16) as consumer:
        await produce(namesrv, name, 1)
        deliveries: list[MessageExt] = []

        async def two() -> bool:
            deliveries.extend(await consumer.receive(32, 1000))
            return len(deliveries) >= 2

        await eventually(two, what="two deliveries")
        assert [m.reconsume_times for m in deliveries[:2]] == [0, 1]
        assert (await dead_letter(server, group)).body == b"m0"
