"""finchmq's Python client and the official C++ client (librocketmq 1.2.4) on one finchmq server:
finchmq producer -> C++ consumers, C++ producer -> finchmq consumers, and one consumer group with
members of both (they must agree on who consumes which queue). Bodies, tags, keys and user
properties must arrive intact every way."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from finchmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    select_message_queue_by_hash,
)
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER, create_topic
from tests.waiting import eventually

from .conftest import body, check_fields, consume, consume_all, cpp_consumer_queues, produce

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
# Sends are shed after 100 ms in the broker's queue by default; a loaded test machine is not the subject here.
# Small store files too (the default index file alone is 420 MB).
RELAXED = {**TEST_BROKER, "waitTimeMillsInSendQueue": "5000"}


@pytest.fixture
def finchmq_server(finchmq_server_factory: Any) -> EmbeddedServer:
    server: EmbeddedServer = finchmq_server_factory(RELAXED)
    return server


def finchmq_message(topic: str, i: int) -> Message:
    return Message.create(
        topic, f"py-body-{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB", keys=f"py-key-{i}"
    ).with_user_property("color", f"teal{i}")


def check_cpp_record(record: dict[str, Any], topic: str) -> None:
    """A C++ consumer's record of a ``finchmq_message``."""
    assert record["topic"] == topic
    check_fields(record, tags="TagA,TagB", keys_prefix="py-key-", prop="color=teal{i}")
    assert len(record["id"]) == 32


async def test_finchmq_producer_to_cpp_push_consumer(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    addr = finchmq_server.namesrv_addr
    topic = "PyToCppPush"
    await create_topic(addr, topic, 4)
    async with Producer("py_pg", namesrv_addr=addr) as p:
        for i in range(10):
            await p.send(finchmq_message(topic, i))
        await asyncio.gather(*(p.send_async(finchmq_message(topic, i)) for i in range(10, 16)))
        await p.send_batch([finchmq_message(topic, i) for i in range(16, 20)])
        big = Message.create(topic, b"py-body-20-" + b"z" * 10_000, tags="TagA", keys="py-key-20")
        await p.send(big.with_user_property("color", "teal20"))  # compressed on the wire
    got = await asyncio.to_thread(
        consume_all, cpp, "push", addr, topic, "cpp_from_py", expect=21, prop_key="color", timeout=60
    )
    assert len(got) == 21
    assert sorted(body(r) for r in got if len(body(r)) < 100) == sorted(f"py-body-{i}" for i in range(20))
    for r in got:
        if len(body(r)) < 100:
            check_cpp_record(r, topic)
        else:
            assert body(r) == "py-body-20-" + "z" * 10_000, "the C++ client inflates our zlib body"


async def test_finchmq_sharding_key_order_reaches_a_cpp_orderly_consumer(
    finchmq_server: EmbeddedServer, cpp: Any
) -> None:
    addr = finchmq_server.namesrv_addr
    topic = "PyToCppOrderly"
    await create_topic(addr, topic, 4)
    async with Producer("py_pg_orderly", namesrv_addr=addr) as p:
        for seq in range(10):
            for key in ("k-a", "k-b", "k-c"):
                msg = Message.create(topic, f"{key}:{seq}".encode(), keys=key)
                await p.send(msg, selector=select_message_queue_by_hash, arg=key)
    got = await asyncio.to_thread(
        consume_all, cpp, "push", addr, topic, "cpp_orderly_from_py", orderly=True, expect=30, timeout=60
    )
    per_key: dict[str, list[int]] = defaultdict(list)
    for r in got:
        key, seq = body(r).split(":")
        per_key[key].append(int(seq))
    assert per_key == {k: list(range(10)) for k in ("k-a", "k-b", "k-c")}


async def test_cpp_producer_to_finchmq_push_and_pull_consumers(
    finchmq_server: EmbeddedServer, cpp: Any
) -> None:
    addr = finchmq_server.namesrv_addr
    topic = "CppToPy"
    for mode in ("sync", "batch"):
        await asyncio.to_thread(
            produce,
            cpp,
            addr,
            topic,
            10,
            mode=mode,
            tags="TagA,TagB",
            keys_prefix=f"{mode}-key-",
            prop="color=amber{i}",
            body_prefix=f"{mode}-body-",
            batch_size=5,
        )
    got: dict[str, MessageExt] = {}

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got[m.body.decode()] = m
        return OK

    consumer = PushConsumer(
        "py_from_cpp", namesrv_addr=addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic, "TagA || TagB")
    consumer.register_message_listener(listener)
    async with consumer:
        await eventually(lambda: len(got) >= 20, what="the finchmq push consumer got the 20 messages")
    assert sorted(got) == sorted(f"{mode}-body-{i}" for mode in ("sync", "batch") for i in range(10))
    for text, m in got.items():
        mode, _, i = text.split("-")
        assert m.tags == ("TagA" if int(i) % 2 == 0 else "TagB")
        assert m.keys == f"{mode}-key-{i}" and m.properties["color"] == f"amber{i}"
        assert m.topic == topic and m.born_host.host == "127.0.0.1"
    async with PullConsumer("py_pull_from_cpp", namesrv_addr=addr) as pull:
        pulled = []
        for mq in sorted(await pull.fetch_subscribe_message_queues(topic)):
            result = await pull.pull(mq, "TagA", 0, 32)
            if result.pull_status is PullStatus.FOUND:
                pulled.extend(m.body.decode() for m in result.msg_found_list)
    assert sorted(pulled) == sorted(f"{mode}-body-{i}" for mode in ("sync", "batch") for i in range(0, 10, 2))


async def test_a_group_of_finchmq_and_cpp_members_splits_the_queues(
    finchmq_server: EmbeddedServer, cpp: Any
) -> None:
    addr = finchmq_server.namesrv_addr
    topic = "MixedGroup"
    group = "mixed_group"
    await create_topic(addr, topic, 8)
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return OK

    py = PushConsumer(group, namesrv_addr=addr, rebalance_wait_interval=1000, instance_name="py-member")
    py.subscribe(topic)
    py.register_message_listener(listener)
    async with py:
        member = consume(cpp, "push", addr, topic, group, timeout=300, instance="cpp-member")

        def mine() -> set[int]:
            return {mq.queue_id for mq in py.rebalance.process_queue_table if mq.topic == topic}

        async def split() -> bool:  # each member rebalanced (on the broker's notice): 4 + 4
            theirs = set(await cpp_consumer_queues(addr, group, member, topic))
            return len(mine()) == len(theirs) == 4 and mine() | theirs == set(range(8))

        await eventually(
            split, what="the Python and the C++ member hold 4 of the 8 queues each", interval=0.25
        )
        async with Producer("py_pg_mixed", namesrv_addr=addr) as p:
            for i in range(80):
                await p.send(Message(topic, f"mixed-{i}".encode()))

        def cpp_got() -> list[dict[str, Any]]:
            return [r for r in member.messages() if body(r).startswith("mixed-")]

        await eventually(lambda: len(got) + len(cpp_got()) >= 80, what="the 80 messages consumed")
        assert {m.queue_id for m in got} <= mine()
        assert {r["queue_id"] for r in cpp_got()}.isdisjoint(mine()), "the C++ member took the other half"
        assert sorted([m.body.decode() for m in got] + [body(r) for r in cpp_got()]) == sorted(
            f"mixed-{i}" for i in range(80)
        )
        member.kill()
