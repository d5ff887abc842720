"""The 5.x consumer side of finchmq's gRPC server (ReceiveMessage, AckMessage,
ChangeInvisibleDuration), driven by the official SDK (``sdk_driver.py``) against an embedded
server: messages a remoting producer (finchmq's own client) sent reach the SDK's SimpleConsumer
and PushConsumer intact, acks stick, a nack comes back, bad requests get the 5.x codes."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from google.protobuf import duration_pb2
from grpclib.client import Channel, UnaryStreamMethod, UnaryUnaryMethod
from grpclib.config import Configuration

from finchmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    PushConsumer,
)
from finchmq.client.admin import AdminClient
from finchmq.client.producer import Producer
from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.grpc.receipts import decode_handle
from finchmq.protocol.bodies import SubscriptionGroupConfig
from finchmq.protocol.codes import LanguageCode
from finchmq.protocol.message import Message, MessageQueue
from finchmq.testing import EmbeddedServer
from finchmq.testing.audit import stored_messages
from tests.waiting import eventually, wait_until

from .conftest import Target, grpc_endpoints, produce, push, simple

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
                topic,
                read_queue_nums=queues,
                write_queue_nums=queues,
                broker_addr=server.broker_addr,
                **options,
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


def test_simple_consumer_receives_what_a_remoting_producer_sent(sdk: Any, target: Target) -> None:
    topic, group, count = "RemotingToSdk", "GSimple", 10
    target.create_topic(topic, queues=4)
    ids = target.send(numbered(topic, count))
    consumer = simple(sdk, target.endpoints, topic, group, expect=count)
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
    again = simple(sdk, target.endpoints, topic, group, max_seconds=6)
    again.finish()
    assert not again.errors() and again.of("received") == []


def test_nack_redelivers_with_the_next_delivery_attempt(sdk: Any, target: Target) -> None:
    topic, group, count = "NackTopic", "GNack", 3
    target.create_topic(topic, queues=4)
    target.send(numbered(topic, count))
    consumer = simple(sdk, target.endpoints, topic, group, expect=count, nack_first=True)
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
            connection = asyncio.run(
                _admin(server, lambda a: a.consumer_connection(group, server.broker_addr))
            )
        except Exception:
            return []
        return [c.language for c in connection.connection_set]

    wait_until(lambda: languages() == [LanguageCode.PYTHON], what="the SDK consumer in consumerConnection")
    send(server, numbered(topic, 1))
    consumer.finish()
    assert not consumer.errors(), consumer.errors()


def test_a_handle_used_after_its_invisible_time_is_expired(sdk: Any, grpc_server_factory: Any) -> None:
    """The first delivery is left unacked; once it came back (so its invisible time passed) its
    first handle is refused without asking the broker, and the new one acks."""
    server = grpc_server_factory(CONF)
    topic = "StaleHandle"
    create_topic(server, topic)
    send(server, numbered(topic, 1))
    consumer = simple(sdk, grpc_endpoints(server), topic, "GStale", expect=1, ack_stale=True, invisible=10)
    consumer.finish()
    [stale] = consumer.of("stale")
    assert stale["code"] == INVALID_RECEIPT_HANDLE, stale
    assert [r["delivery_attempt"] for r in consumer.of("received")] == [1, 2]
    assert len(consumer.of("acked")) == 1


def test_push_consumer_retries_a_failure_once_then_consumes(sdk: Any, target: Target) -> None:
    topic, group, count = "PushTopic", "GPush", 8
    target.create_topic(topic, queues=4)
    target.send(numbered(topic, count))
    consumer = push(sdk, target.endpoints, topic, group, expect=count, fail_first=True)
    records = consumer.finish()
    assert not consumer.errors(), consumer.errors()
    consumed = [r for r in records if "consumed" in r]
    by_index: dict[int, list[tuple[int, str]]] = {}
    for r in consumed:
        by_index.setdefault(index(r["consumed"]), []).append((r["consumed"]["delivery_attempt"], r["result"]))
    assert by_index == {i: [(1, "FAILURE"), (2, "SUCCESS")] for i in range(count)}
    assert records[-1]["done"] == count


def test_fifo_push_consumer_keeps_each_message_group_in_order(sdk: Any, target: Target) -> None:
    topic, group, per_group = "FifoTopic", "GFifo", 6
    target.create_topic(topic, queues=4, attributes="+message.type=FIFO")
    target.create_group(group, consume_message_orderly=True)
    brokers = sorted(target.masters())
    messages = []
    for g in range(3):  # one queue per message group (over the brokers), as an orderly producer sends them
        queue = MessageQueue(topic, brokers[g % len(brokers)], g)
        for i in range(per_group):
            msg = Message.create(topic, f"g{g}-{i}".encode(), properties={"__SHARDINGKEY": f"group-{g}"})
            messages.append((queue, msg))

    async def run() -> None:
        async with Producer("remoting-fifo", namesrv_addr=target.namesrv) as producer:
            for queue, msg in messages:
                await producer.send(msg, queue=queue)

    asyncio.run(run())
    consumer = push(
        sdk,
        target.endpoints,
        topic,
        group,
        expect=3 * per_group,
        fail_first=True,
        fifo=True,
    )
    records = consumer.finish()
    assert not consumer.errors(), consumer.errors()
    assert records[0] == {"started": True, "fifo": True}
    order: dict[str, list[tuple[int, str]]] = {}
    for r in records:
        if "consumed" in r:
            c = r["consumed"]
            order.setdefault(c["message_group"], []).append((int(c["body"].split("-")[1]), r["result"]))
    # within a group: each message fails once and is retried before the next one is given
    expected = [(i, result) for i in range(per_group) for result in ("FAILURE", "SUCCESS")]
    assert order == {f"group-{g}": expected for g in range(3)}


def test_a_message_past_its_group_max_attempts_goes_to_the_dead_letter_queue(
    sdk: Any, grpc_server_factory: Any
) -> None:
    """With retryMaxTimes 0 (max attempts 1) a nacked message is not given again: the receive
    that pops it back forwards it to ``%DLQ%group`` (CONSUMER_SEND_MSG_BACK) and acks it."""
    server = grpc_server_factory(CONF)
    topic, group = "DlqTopic", "GDlq"
    create_topic(server, topic)
    create_group(server, group, retry_max_times=0)
    [msg_id] = send(server, numbered(topic, 1))
    consumer = simple(sdk, grpc_endpoints(server), topic, group, expect=1, nack_first=True)

    def dead_letters() -> list[Any]:
        return asyncio.run(stored_messages(server.broker_addr, f"%DLQ%{group}", queues=1))

    [dead] = wait_until(dead_letters, what="the message in the group's dead-letter queue")
    consumer.kill()  # a SimpleConsumer driver ends at --expect or --max-seconds only
    assert dead.body == b"body-0" and dead.properties["UNIQ_KEY"] == msg_id
    assert [r["delivery_attempt"] for r in consumer.of("received")] == [1]
    assert consumer.of("nacked") == [msg_id] and consumer.of("acked") == []


def test_push_consumer_handles_are_renewed_while_it_consumes(
    sdk: Any, grpc_server_factory: Any, tmp_path: Path
) -> None:
    """A PushConsumer receives with ``auto_renew``: the server pops with the default invisible
    time (3 s here) and renews the handle ahead of it; a consumption outlasting the first
    invisible time is not redelivered, and its ack (with the client's first handle) reaches the
    renewed one."""
    server = grpc_server_factory(
        CONF,
        {"defaultInvisibleTimeMills": "3000", "renewSchedulePeriodMillis": "200"},
    )
    manager = server.grpc.service.receipt_handles
    topic, group = "RenewTopic", "GRenew"
    create_topic(server, topic)
    send(server, numbered(topic, 1))
    hold = tmp_path / "release"
    consumer = push(sdk, grpc_endpoints(server), topic, group, expect=1, hold_file=str(hold))
    consumer.wait_for(lambda records: any("holding" in r for r in records), what="the consumption started")
    [record] = wait_until(
        lambda: [r for r in manager.records() if r.renew_times >= 1], what="the handle renewed"
    )
    first = decode_handle(record.original_handle)
    wait_until(lambda: time.time() * 1000 > first.next_visible_time, what="the first invisible time over")
    hold.touch()
    records = consumer.finish()
    assert not consumer.errors(), consumer.errors()
    consumed = [r for r in records if "consumed" in r]
    assert [(r["attempt"], r["consumed"]["delivery_attempt"]) for r in consumed] == [(1, 1)]
    wait_until(lambda: not manager.records(), what="the acked handle out of the manager")


def test_finchmq_push_consumer_receives_what_the_sdk_produced(sdk: Any, grpc_server_factory: Any) -> None:
    """The other direction: SDK Producer (gRPC SendMessage) → finchmq's own remoting PushConsumer."""
    server = grpc_server_factory(CONF)
    topic, count = "SdkToRemoting", 6
    create_topic(server, topic)
    sent = produce(
        sdk, grpc_endpoints(server), topic, count, tag="TagS", keys="key-{i}", prop=["color=amber{i}"]
    )
    ids = {r["sent"]: r["message_id"] for r in sent}
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def run() -> None:
        consumer = PushConsumer(
            "GRemotingFromSdk",
            namesrv_addr=server.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic, "TagS")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            await eventually(lambda: len(got) >= count, what="every SDK message consumed")
        finally:
            await consumer.close()

    asyncio.run(run())
    by_index = {int(m.body.decode().rsplit("-", 1)[1]): m for m in got}
    assert sorted(by_index) == list(range(count))
    for i, m in by_index.items():
        assert m.body == f"body-{i}".encode()
        assert (m.tags, m.keys, m.properties.get("color")) == ("TagS", f"key-{i}", f"amber{i}")
        assert m.properties["UNIQ_KEY"] == ids[i]


# -- raw calls (what the SDK does not send) -------------------------------------------------------

RAW_METADATA = {"x-mq-client-id": "raw-consumer", "x-mq-language": "PYTHON", "x-mq-client-version": "5.1.2"}


async def receive_raw(
    server: EmbeddedServer,
    request: spb.ReceiveMessageRequest,
    timeout: float = 30,
    metadata: Mapping[str, str] = RAW_METADATA,
) -> list[spb.ReceiveMessageResponse]:
    channel = Channel("127.0.0.1", server.grpc_port)
    try:
        stub = UnaryStreamMethod(
            channel,
            "/apache.rocketmq.v2.MessagingService/ReceiveMessage",
            spb.ReceiveMessageRequest,
            spb.ReceiveMessageResponse,
        )
        return list(await stub(request, timeout=timeout, metadata=dict(metadata)))
    finally:
        channel.close()


async def unary_raw(server: EmbeddedServer, method: str, request: Any, reply: type[Any]) -> Any:
    channel = Channel("127.0.0.1", server.grpc_port)
    try:
        stub = UnaryUnaryMethod(
            channel, f"/apache.rocketmq.v2.MessagingService/{method}", type(request), reply
        )
        return await stub(request, metadata=dict(RAW_METADATA))
    finally:
        channel.close()


def receive_request(topic: str, group: str, **fields: Any) -> spb.ReceiveMessageRequest:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=32,
        invisible_duration=duration_pb2.Duration(seconds=20),
        long_polling_timeout=duration_pb2.Duration(seconds=5),
    )
    for name, value in fields.items():
        field = getattr(request, name)
        if hasattr(field, "CopyFrom"):
            field.CopyFrom(value)
        else:
            setattr(request, name, value)
    return request


def statuses(responses: list[spb.ReceiveMessageResponse]) -> list[int]:
    return [r.status.code for r in responses if r.HasField("status")]


async def test_the_stream_is_status_messages_then_delivery_time_and_acks_are_per_entry(
    grpc_server: EmbeddedServer,
) -> None:
    topic, group = "RawStream", "GRawStream"
    await asyncio.to_thread(create_topic, grpc_server, topic)
    ids = await asyncio.to_thread(send, grpc_server, numbered(topic, 3))
    before = time.time()
    responses = await receive_raw(grpc_server, receive_request(topic, group))
    kinds = [r.WhichOneof("content") for r in responses]
    assert kinds == ["status", "message", "message", "message", "delivery_timestamp"], responses
    assert responses[0].status.code == pb.OK
    assert responses[-1].delivery_timestamp.seconds >= int(before)
    messages = [r.message for r in responses[1:-1]]
    assert sorted(m.system_properties.message_id for m in messages) == sorted(ids)
    for m in messages:
        system = m.system_properties
        i = int(m.body.decode().rsplit("-", 1)[1])
        assert system.body_digest.type == pb.MD5
        assert system.body_digest.checksum == hashlib.md5(m.body).hexdigest().upper()
        assert system.body_encoding == pb.IDENTITY and system.message_type == pb.NORMAL
        assert system.delivery_attempt == 1 and system.born_host and system.store_host
        assert dict(m.user_properties) == {"color": f"amber{i}"}
        handle = decode_handle(system.receipt_handle)
        assert handle.commit_log_offset >= 0 and handle.queue_id == system.queue_id
        assert handle.offset == system.queue_offset and handle.invisible_time == 20_000
    entries = [
        spb.AckMessageEntry(
            message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
        )
        for m in messages
    ]
    entries.append(spb.AckMessageEntry(message_id="bogus", receipt_handle="not a handle"))
    ack = spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries)
    answer = await unary_raw(grpc_server, "AckMessage", ack, spb.AckMessageResponse)
    assert answer.status.code == pb.MULTIPLE_RESULTS
    assert [e.status.code for e in answer.entries] == [pb.OK] * 3 + [pb.INVALID_RECEIPT_HANDLE]
    # acked: nothing left
    empty = await receive_raw(grpc_server, receive_request(topic, group))
    assert [r.WhichOneof("content") for r in empty] == ["status", "delivery_timestamp"]
    assert empty[0].status.code == pb.MESSAGE_NOT_FOUND and empty[0].status.message == "no new message"


async def test_change_invisible_duration_answers_a_new_handle(grpc_server: EmbeddedServer) -> None:
    topic, group = "RawChange", "GRawChange"
    await asyncio.to_thread(create_topic, grpc_server, topic)
    await asyncio.to_thread(send, grpc_server, numbered(topic, 1))
    [_, first, _] = await receive_raw(grpc_server, receive_request(topic, group))
    system = first.message.system_properties

    def change(seconds: int, handle: str) -> spb.ChangeInvisibleDurationRequest:
        return spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=group),
            topic=pb.Resource(name=topic),
            receipt_handle=handle,
            invisible_duration=duration_pb2.Duration(seconds=seconds),
            message_id=system.message_id,
        )

    too_long = await unary_raw(
        grpc_server,
        "ChangeInvisibleDuration",
        change(13 * 3600, system.receipt_handle),
        spb.ChangeInvisibleDurationResponse,
    )
    assert too_long.status.code == pb.ILLEGAL_INVISIBLE_TIME
    answer = await unary_raw(
        grpc_server,
        "ChangeInvisibleDuration",
        change(30, system.receipt_handle),
        spb.ChangeInvisibleDurationResponse,
    )
    assert answer.status.code == pb.OK
    old, new = decode_handle(system.receipt_handle), decode_handle(answer.receipt_handle)
    assert new.invisible_time == 30_000 and new.retrieve_time >= old.retrieve_time
    assert (new.commit_log_offset, new.queue_id, new.offset) == (
        old.commit_log_offset,
        old.queue_id,
        old.offset,
    )
    ack = spb.AckMessageRequest(
        group=pb.Resource(name=group),
        topic=pb.Resource(name=topic),
        entries=[spb.AckMessageEntry(message_id=system.message_id, receipt_handle=answer.receipt_handle)],
    )
    acked = await unary_raw(grpc_server, "AckMessage", ack, spb.AckMessageResponse)
    assert acked.status.code == pb.OK, acked


async def test_polling_time_and_filter_refusals(grpc_server: EmbeddedServer) -> None:
    topic, group = "RawRefusals", "GRawRefusals"
    await asyncio.to_thread(create_topic, grpc_server, topic)
    no_poll = receive_request(topic, group)
    no_poll.ClearField("long_polling_timeout")
    # a deadline shorter than the minimum polling time (5 s): ILLEGAL_POLLING_TIME from SDK 5.0.3 on
    short = await receive_raw(grpc_server, no_poll, timeout=3)
    assert statuses(short) == [pb.ILLEGAL_POLLING_TIME] and short[-1].HasField("delivery_timestamp")
    old_client = {k: v for k, v in RAW_METADATA.items() if k != "x-mq-client-version"}
    assert statuses(await receive_raw(grpc_server, no_poll, timeout=3, metadata=old_client)) == [
        pb.BAD_REQUEST
    ]
    no_sql = receive_request(topic, group, filter_expression=pb.FilterExpression(type=pb.SQL))
    assert statuses(await receive_raw(grpc_server, no_sql)) == [pb.ILLEGAL_FILTER_EXPRESSION]
    # a malformed SQL92 expression is the broker's refusal (Java's FilterAPI passes it on unparsed)
    bad_sql = receive_request(
        topic, group, filter_expression=pb.FilterExpression(type=pb.SQL, expression="a >")
    )
    [refused] = [r.status for r in await receive_raw(grpc_server, bad_sql) if r.HasField("status")]
    assert refused.code == pb.INTERNAL_SERVER_ERROR and refused.message, refused
    short_invisible = receive_request(topic, group, invisible_duration=duration_pb2.Duration(seconds=9))
    assert statuses(await receive_raw(grpc_server, short_invisible)) == [pb.ILLEGAL_INVISIBLE_TIME]
    system_group = receive_request(topic, "CID_RMQ_SYS_TRANS")
    assert statuses(await receive_raw(grpc_server, system_group)) == [pb.ILLEGAL_CONSUMER_GROUP]


async def test_messages_a_broken_stream_did_not_deliver_come_back_soon(grpc_server: EmbeddedServer) -> None:
    """Java nacks (invisible 1 s) what a ReceiveMessage stream could not write: the client reads
    the status and the first of three large messages (its HTTP/2 window of 64 KiB holds the server
    on the second), then cancels; the other two come back at once, the first stays invisible (12 h)."""
    topic, group = "RawBroken", "GRawBroken"
    await asyncio.to_thread(create_topic, grpc_server, topic, 1)
    bodies = [bytes([i]) * 300_000 for i in range(3)]
    await asyncio.to_thread(send, grpc_server, [Message.create(topic, b) for b in bodies])
    request = receive_request(topic, group, invisible_duration=duration_pb2.Duration(seconds=12 * 3600))
    small_window = Configuration(http2_connection_window_size=65_535, http2_stream_window_size=65_535)
    channel = Channel("127.0.0.1", grpc_server.grpc_port, config=small_window)
    try:
        stub = UnaryStreamMethod(
            channel,
            "/apache.rocketmq.v2.MessagingService/ReceiveMessage",
            spb.ReceiveMessageRequest,
            spb.ReceiveMessageResponse,
        )
        async with stub.open(metadata=dict(RAW_METADATA), timeout=30) as stream:
            await stream.send_message(request, end=True)
            status = await stream.recv_message()
            first = await stream.recv_message()
            await stream.cancel()
    finally:
        channel.close()
    assert status is not None and status.status.code == pb.OK
    assert first is not None and first.message.body == bodies[0]
    again: list[pb.Message] = []

    async def the_other_two_back() -> bool:
        responses = await receive_raw(grpc_server, receive_request(topic, group))
        again.extend(r.message for r in responses if r.HasField("message"))
        return len(again) >= 2

    await eventually(the_other_two_back, what="the undelivered messages received again")
    assert sorted(m.body[0] for m in again) == [1, 2]
    assert {m.system_properties.delivery_attempt for m in again} == {2}


async def test_a_tag_the_broker_cannot_tell_apart_is_filtered_by_the_server(
    grpc_server: EmbeddedServer,
) -> None:
    """The broker filters tags by hash code; "Aa" and "BB" share Java's. The server drops (acks)
    a popped message whose tag does not match (Java ``PopMessageResultFilterImpl``): a pop of
    nothing but "BB" answers MESSAGE_NOT_FOUND "no match message"."""
    topic, group = "RawTagClash", "GRawTagClash"
    await asyncio.to_thread(create_topic, grpc_server, topic, 1)
    tag_aa = receive_request(
        topic, group, filter_expression=pb.FilterExpression(type=pb.TAG, expression="Aa")
    )
    await asyncio.to_thread(send, grpc_server, [Message.create(topic, b"bb", tags="BB")])
    [refused] = [r.status for r in await receive_raw(grpc_server, tag_aa) if r.HasField("status")]
    assert (refused.code, refused.message) == (pb.MESSAGE_NOT_FOUND, "no match message")
    await asyncio.to_thread(send, grpc_server, [Message.create(topic, b"aa", tags="Aa")])
    responses = await receive_raw(grpc_server, tag_aa)
    assert [r.message.body for r in responses if r.HasField("message")] == [b"aa"]


def test_a_groups_progress_is_one_whichever_protocol_its_members_speak(
    sdk: Any, grpc_server_factory: Any
) -> None:
    """A 5.x SimpleConsumer (POP over gRPC) and finchmq's remoting PushConsumer in one group: what
    the first acknowledged, the second does not get again (it would, from the first offset, if the
    progress were not shared), and what the second consumed, a 5.x consumer does not get again."""
    server = grpc_server_factory(CONF)
    topic, group = "OneProgress", "GOneProgress"
    create_topic(server, topic)
    send(server, numbered(topic, 8))
    first = simple(sdk, grpc_endpoints(server), topic, group, expect=8)
    first.finish()
    assert not first.errors(), first.errors()

    async def offsets() -> int:
        stats = await _admin(server, lambda a: a.consume_stats(group, topic))
        return sum(o.consumer_offset for o in stats.offset_table.values())

    async def offsets_reach(total: int) -> bool:
        return await offsets() == total

    asyncio.run(eventually(lambda: offsets_reach(8), what="the 5.x acks as the group's offsets"))

    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def remoting_member() -> None:
        consumer = PushConsumer(
            group,
            namesrv_addr=server.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            async with Producer("remoting-pg", namesrv_addr=server.namesrv_addr) as producer:
                for i in range(4):
                    await producer.send(Message.create(topic, f"late-{i}".encode()))
            await eventually(lambda: offsets_reach(12), what="the push consumer's progress committed")
        finally:
            await consumer.close()

    asyncio.run(remoting_member())
    assert sorted(m.body for m in got) == [f"late-{i}".encode() for i in range(4)]

    send(server, [Message.create(topic, f"after-{i}".encode()) for i in range(3)])
    last = simple(sdk, grpc_endpoints(server), topic, group, expect=3)
    last.finish()
    assert sorted(r["body"] for r in last.of("received")) == [f"after-{i}" for i in range(3)]
