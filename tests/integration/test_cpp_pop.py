"""A 4.x producer and a 5.x POP consumer on one finchmq broker: messages sent by the official C++
client (librocketmq 1.2.4, which speaks RocketMQ 4.x's protocol and knows nothing of POP) are
popped and acked by POP requests as Java 5.x's client sends them (``tests/broker/pop_client.py``).
Bodies, tags, keys, user properties and message ids arrive intact, a tag expression filters on
what the C++ client set, and a message made visible again (CHANGE_MESSAGE_INVISIBLETIME) instead
of acked comes back once through the pop retry topic."""

from __future__ import annotations

import asyncio
from typing import Any

from finchmq.protocol import ResponseCode
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import ConsumeInitMode
from finchmq.remoting import RemotingClient
from finchmq.testing import EmbeddedServer
from tests.broker.pop_client import PopClient, Popped, pop_until
from tests.client.conftest import TEST_BROKER
from tests.waiting import eventually

from .conftest import produce

# revive rounds every 200 ms, so a redelivery comes within the test
CONF = {**TEST_BROKER, "waitTimeMillsInSendQueue": "5000", "reviveInterval": "200", "reviveMaxSlow": "1"}
COUNT = 12


def check(popped: Popped, topic: str, ids: dict[int, str]) -> int:
    """A popped message carries what the C++ producer gave message ``i``; returns ``i``."""
    msg = popped.msg
    i = int(msg.body.decode().rsplit("-", 1)[1])
    assert msg.body == f"cpp-body-{i}".encode()
    assert msg.topic == topic
    assert (msg.tags, msg.keys, msg.properties.get("color")) == (
        "TagA" if i % 2 == 0 else "TagB",
        f"cpp-key-{i}",
        f"amber{i}",
    ), msg.properties
    assert msg.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == ids[i]
    return i


async def pop_and_ack(server: EmbeddedServer, topic: str, ids: dict[int, str]) -> None:
    async with RemotingClient() as rc:
        group = "G_cpp_pop"
        client = PopClient(rc, server.broker_addr, group)
        first = await pop_until(
            client, topic, COUNT, what="every C++ message popped", invisible_ms=60_000,
            init_mode=ConsumeInitMode.MIN,
        )  # fmt: skip
        assert sorted(check(p, topic, ids) for p in first) == list(range(COUNT))
        assert all(p.msg.reconsume_times == 0 for p in first)
        # ack the even ones (one ACK_MESSAGE each); the odd ones are made visible again soon
        for popped in first:
            if check(popped, topic, ids) % 2 == 0:
                r = await client.ack(popped)
            else:
                r = await client.change_invisible_time(popped, 300)
            assert r.code == ResponseCode.SUCCESS, r.remark
        back = await pop_until(client, topic, COUNT // 2, what="the unacked half back")
        assert sorted(check(p, topic, ids) for p in back) == list(range(1, COUNT, 2))
        assert all(p.msg.reconsume_times == 1 for p in back)
        r = await client.batch_ack(back)
        assert r.code == ResponseCode.SUCCESS, r.remark
        await eventually(client.revive_settled, what="every check point acked")
        assert (await client.pop(topic)).messages == []

        # another group pops with a tag expression: only the C++ client's TagB messages
        tagged = PopClient(rc, server.broker_addr, "G_cpp_pop_tag")
        only_b = await pop_until(
            tagged, topic, COUNT // 2, what="the TagB messages", exp="TagB", exp_type="TAG",
            init_mode=ConsumeInitMode.MIN,
        )  # fmt: skip
        assert sorted(check(p, topic, ids) for p in only_b) == list(range(1, COUNT, 2))
        r = await tagged.batch_ack(only_b)
        assert r.code == ResponseCode.SUCCESS, r.remark


def test_messages_sent_by_the_cpp_client_are_popped_and_acked(finchmq_server_factory: Any, cpp: Any) -> None:
    server: EmbeddedServer = finchmq_server_factory(CONF)
    topic = "CppToPop"
    sent = produce(
        cpp, server.namesrv_addr, topic, COUNT, mode="sync", tags="TagA,TagB", keys_prefix="cpp-key-",
        prop="color=amber{i}", body_prefix="cpp-body-",
    )  # fmt: skip
    assert [r["status"] for r in sent] == [0] * COUNT
    ids = {r["i"]: r["msg_id"] for r in sent}
    asyncio.run(pop_and_ack(server, topic, ids))
