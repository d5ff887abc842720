"""The 5.x producer side (SendMessage, EndTransaction and transaction checks, RecallMessage) driven
by the official SDK, and the refusals the SDK cannot provoke (it checks body size and message
type itself) by a raw gRPC call; messages are read back with finchmq's own pull."""

from __future__ import annotations

import itertools
import time
from typing import Any

from grpclib.client import Channel, UnaryUnaryMethod

from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.grpc.producer import consistent_hash
from finchmq.grpc.transactions import TransactionRegistry
from finchmq.protocol.message import MessageExt, java_string_hash
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.recall import RecallMessageHandle
from finchmq.testing import EmbeddedServer
from finchmq.testing.audit import stored_messages
from tests.client.conftest import create_topic as client_create_topic
from tests.drivers import flags
from tests.grpc5.conftest import Target, grpc_endpoints, produce, simple
from tests.waiting import eventually

QUEUES = 4
_ids = itertools.count()


async def create_topic(server: EmbeddedServer, topic: str, message_type: str | None = None) -> None:
    attributes = f"+message.type={message_type}" if message_type else None
    await client_create_topic(server.namesrv_addr, topic, QUEUES, attributes=attributes)


async def stored(server: EmbeddedServer, topic: str, count: int) -> list[MessageExt]:
    found: list[MessageExt] = []

    async def enough() -> bool:
        found[:] = await stored_messages(server.broker_addr, topic, queues=QUEUES)
        return len(found) >= count

    await eventually(enough, what=f"{count} messages stored in {topic}")
    return found


async def call(server: EmbeddedServer, method: str, request: Any, reply: type[Any]) -> Any:
    """One raw unary call, as a client with id ``raw-test`` would make it."""
    channel = Channel("127.0.0.1", server.grpc_port)
    try:
        stub = UnaryUnaryMethod(
            channel, f"/apache.rocketmq.v2.MessagingService/{method}", type(request), reply
        )
        return await stub(request, metadata={"x-mq-client-id": "raw-test", "x-mq-language": "PYTHON"})
    finally:
        channel.close()


def message(topic: str, body: bytes = b"b", **system: Any) -> pb.Message:
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        system_properties=pb.SystemProperties(message_id=f"id-{next(_ids)}", **system),
    )


def queue_ids(stored: dict[str, list[MessageExt]]) -> set[tuple[str, int]]:
    return {(broker, m.queue_id) for broker, messages in stored.items() for m in messages}


def test_normal_messages_are_stored_with_their_properties(sdk: Any, target: Target) -> None:
    topic = "grpc_normal"
    target.create_topic(topic, QUEUES)
    count = QUEUES * len(target.masters())
    sent = produce(sdk, target.endpoints, topic, count, tag="TagA", keys="k{i}", prop=["color=red{i}"])
    assert [r["sent"] for r in sent] == list(range(count))
    on_brokers = target.stored(topic, count)
    messages = [m for found in on_brokers.values() for m in found]
    by_id = {m.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]: m for m in messages}
    assert set(by_id) == {r["message_id"] for r in sent}
    for record in sent:
        msg = by_id[record["message_id"]]
        i = record["sent"]
        assert msg.body == f"body-{i}".encode()
        assert msg.tags == "TagA"
        assert msg.keys == f"k{i}"
        assert msg.properties.get("color") == f"red{i}", msg.properties
        assert msg.properties[MessageConst.PROPERTY_PRODUCER_GROUP] == topic
        assert MessageConst.PROPERTY_BORN_TIMESTAMP in msg.properties
        assert record["offset"] == msg.queue_offset
    assert len(queue_ids(on_brokers)) == count  # round robin over the write queues of every broker


def test_fifo_messages_of_a_group_share_one_queue(sdk: Any, target: Target) -> None:
    topic = "grpc_fifo"
    target.create_topic(topic, QUEUES, attributes="+message.type=FIFO")
    produce(sdk, target.endpoints, topic, 5, type="fifo", group="order-42")
    on_brokers = target.stored(topic, 5)
    messages = [m for found in on_brokers.values() for m in found]
    write_queues = sorted((broker, q) for broker in target.masters() for q in range(QUEUES))
    expected_queue = write_queues[consistent_hash(java_string_hash("order-42"), len(write_queues))]
    assert queue_ids(on_brokers) == {expected_queue}
    assert [m.body for m in sorted(messages, key=lambda m: m.queue_offset)] == [
        f"body-{i}".encode() for i in range(5)
    ]
    assert all(m.properties[MessageConst.PROPERTY_SHARDING_KEY] == "order-42" for m in messages)


def test_delay_message_is_delivered_at_its_time_and_recall(sdk: Any, target: Target) -> None:
    """A delay message reaches a SimpleConsumer once its time came; one far ahead is recalled,
    its recall handle naming the broker that keeps it."""
    topic, group = "grpc_delay", "GDelay"
    target.create_topic(topic, QUEUES, attributes="+message.type=DELAY")
    [record] = produce(sdk, target.endpoints, topic, 1, type="delay", delay_seconds=3600)
    assert RecallMessageHandle.decode(record["recall_handle"]).broker_name in target.masters()
    recall = sdk(
        "recall", "--endpoints", target.endpoints, "--topic", topic, "--handle", record["recall_handle"]
    )
    records = recall.finish()
    assert not recall.errors(), records
    [soon] = produce(sdk, target.endpoints, topic, 1, type="delay", delay_seconds=2, body_prefix="soon-")
    consumer = simple(sdk, target.endpoints, topic, group, expect=1)
    consumer.finish()
    assert not consumer.errors(), consumer.errors()
    [received] = [r for r in consumer.records if "received" in r]
    assert received["received"]["message_id"] == soon["message_id"]
    assert received["at"] >= received["received"]["delivery_timestamp"]


async def test_delivery_times_the_server_refuses(sdk: Any, grpc_server: EmbeddedServer) -> None:
    topic = "grpc_delay_refused"
    await create_topic(grpc_server, topic, "DELAY")
    endpoints = grpc_endpoints(grpc_server)
    # the SDK's ms quirk: a ms value in Timestamp.seconds is not a valid Timestamp (Java
    # Timestamps.toMillis → IllegalArgumentException → INTERNAL_SERVER_ERROR); a value past the
    # max delay (1 day) is ILLEGAL_DELIVERY_TIME
    for raw, code in ((int(time.time() * 1000) + 60_000, pb.INTERNAL_SERVER_ERROR),
                      (int(time.time()) + 2 * 86400, pb.ILLEGAL_DELIVERY_TIME)):  # fmt: skip
        process = sdk(
            "produce", "--endpoints", endpoints, "--topic", topic, "--count", "1", "--type", "delay",
            "--delivery-timestamp", str(raw),
        )  # fmt: skip
        process.finish()
        assert [e.get("code") for e in process.errors()] == [code], process.records


def test_transactions_commit_rollback_and_check(sdk: Any, target: Target) -> None:
    topic = "grpc_tx"
    target.create_topic(topic, QUEUES, attributes="+message.type=TRANSACTION")
    endpoints = target.endpoints
    committed = produce(sdk, endpoints, topic, 2, type="tx", tx_resolution="commit", body_prefix="c-")
    produce(sdk, endpoints, topic, 1, type="tx", tx_resolution="rollback", body_prefix="r-")
    checker = sdk(
        "produce", "--endpoints", endpoints, "--topic", topic, "--count", "1", "--type", "tx",
        "--tx-resolution", "unknown", "--checker", "commit", "--body-prefix", "u-", "--stoppable",
    )  # fmt: skip
    checker.wait_for(lambda records: any("sending_done" in r for r in records))
    # the checker's answer commits the third
    messages = [m for found in target.stored(topic, 3).values() for m in found]
    checker.stop()
    assert checker.of("message_id")[0] in checker.of("checked")
    assert sorted(m.body for m in messages) == [b"c-0", b"c-1", b"u-0"]
    assert {r["transaction_id"] for r in committed} <= {
        m.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in messages
    }


async def test_bad_input_from_the_sdk(sdk: Any, grpc_server: EmbeddedServer) -> None:
    topic = "grpc_bad"
    await create_topic(grpc_server, topic)
    endpoints = grpc_endpoints(grpc_server)
    cases: list[tuple[dict[str, Any], int]] = [
        ({"topic": "grpc_no_such_topic"}, pb.TOPIC_NOT_FOUND),
        ({"prop": ["UNIQ_KEY=x"]}, pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"prop": [f"p{i}=v" for i in range(129)]}, pb.MESSAGE_PROPERTIES_TOO_LARGE),
        ({"prop": ["big=" + "x" * 17_000]}, pb.MESSAGE_PROPERTIES_TOO_LARGE),
    ]
    for options, code in cases:
        process = sdk(
            "produce", "--endpoints", endpoints, "--count", "1", *flags({"topic": topic, **options})
        )
        process.finish()
        assert [e.get("code") for e in process.errors()] == [code], (options, process.records)


async def test_refusals_the_sdk_cannot_provoke(grpc_server: EmbeddedServer) -> None:
    topic = "grpc_raw"
    await create_topic(grpc_server, topic)

    async def send(*messages: pb.Message) -> int:
        response = await call(
            grpc_server, "SendMessage", spb.SendMessageRequest(messages=messages), spb.SendMessageResponse
        )
        return int(response.status.code)

    assert await send() == pb.MESSAGE_CORRUPTED
    assert await send(message(topic, b"x" * (4 * 1024 * 1024 + 1))) == pb.MESSAGE_BODY_TOO_LARGE
    assert await send(message(topic, b"")) == pb.MESSAGE_BODY_EMPTY
    assert await send(message(topic, message_group="g")) == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert await send(message(topic, message_group="g" * 64)) == pb.ILLEGAL_MESSAGE_GROUP
    assert await send(message(topic), message("other")) == pb.MESSAGE_CORRUPTED
    assert await send(message(topic, keys=[" "])) == pb.ILLEGAL_MESSAGE_KEY
    assert await send(message(topic, tag="a|b")) == pb.ILLEGAL_MESSAGE_TAG  # the SDK refuses it too
    blank_id = message(topic)
    blank_id.system_properties.message_id = " "
    assert await send(blank_id) == pb.ILLEGAL_MESSAGE_ID
    assert await send(message("%SYS_nope")) in (pb.ILLEGAL_TOPIC, pb.TOPIC_NOT_FOUND)

    ok = await call(
        grpc_server, "SendMessage", spb.SendMessageRequest(messages=[message(topic)]), spb.SendMessageResponse
    )
    assert ok.status.code == pb.OK and len(ok.entries) == 1 and ok.entries[0].message_id

    batch = [message(topic, b"one"), message(topic, b"two")]
    answer = await call(
        grpc_server, "SendMessage", spb.SendMessageRequest(messages=batch), spb.SendMessageResponse
    )
    assert answer.status.code == pb.OK and len(answer.entries) == 1  # Java: one entry for the batch
    # one queue, in order; as with Java's proxy, the header's properties are the first message's
    # and the broker appends them to each item's, so both carry the first message's UNIQ_KEY
    in_batch = [m for m in await stored(grpc_server, topic, 3) if m.body in (b"one", b"two")]
    assert len({m.queue_id for m in in_batch}) == 1
    assert [m.body for m in sorted(in_batch, key=lambda m: m.queue_offset)] == [b"one", b"two"]

    async def end(transaction_id: str) -> int:
        request = spb.EndTransactionRequest(
            topic=pb.Resource(name=topic), message_id="m", transaction_id=transaction_id, resolution=pb.COMMIT
        )
        return int(
            (await call(grpc_server, "EndTransaction", request, spb.EndTransactionResponse)).status.code
        )

    assert await end(" ") == pb.INVALID_TRANSACTION_ID
    assert await end("unknown") == pb.INTERNAL_SERVER_ERROR  # "cannot found transaction data"

    recall = spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle="bogus")
    answer = await call(grpc_server, "RecallMessage", recall, spb.RecallMessageResponse)
    assert answer.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE  # a NORMAL topic

    forward = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="g"), topic=pb.Resource(name=topic), receipt_handle="1 2 3", message_id="m"
    )
    answer = await call(
        grpc_server, "ForwardMessageToDeadLetterQueue", forward, spb.ForwardMessageToDeadLetterQueueResponse
    )
    assert answer.status.code == pb.INVALID_RECEIPT_HANDLE


def test_consistent_hash_matches_guava() -> None:
    """Values from Guava's algorithm run on a JVM (``Hashing.consistentHash(s.hashCode(), n)``)."""
    expected = {
        "g1": (6, 0, 0),
        "group-a": (7, 2, 2),
        "order-42": (3, 3, 2),
        "": (0, 0, 0),
        "中文": (3, 3, 0),
    }
    for group, buckets in expected.items():
        assert tuple(consistent_hash(java_string_hash(group), n) for n in (8, 4, 3)) == buckets, group


def test_transaction_registry_keeps_the_newest_unexpired() -> None:
    registry = TransactionRegistry(expire_seconds=30, max_num=2)
    for offset in (1, 2, 3):
        registry.add(
            "T", broker_name="b", topic="T", tran_state_table_offset=offset, commit_log_offset=offset,
            transaction_id="tx",
        )  # fmt: skip
    assert registry.add("T", broker_name=" ", topic="T", tran_state_table_offset=0, commit_log_offset=0,
                        transaction_id="tx") is None  # fmt: skip
    first = registry.poll("T", "tx")
    second = registry.poll("T", "tx")
    assert first is not None and second is not None
    assert {first.commit_log_offset, second.commit_log_offset} <= {2, 3}  # at most max_num kept
    assert registry.poll("T", "tx") is None and len(registry) == 0
    expired = TransactionRegistry(expire_seconds=-1)
    expired.add(
        "T", broker_name="b", topic="T", tran_state_table_offset=0, commit_log_offset=0, transaction_id="x"
    )
    assert expired.poll("T", "x") is None
