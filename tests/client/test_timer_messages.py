"""finchmq's client and 5.x timer messages: ``Message.with_deliver_time_ms`` / ``with_delay_time_sec``
/ ``with_delay_time_ms`` reach a push consumer at their time, not before; ``SendResult.recall_handle``
and ``Producer.recall_message`` withdraw one."""

from __future__ import annotations

import time

import pytest

from finchmq.client import ConsumeFromWhere, Message, MQBrokerError, Producer
from finchmq.protocol.codes import ResponseCode
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_BROKER, create_topic
from .test_push_consumer import Recorder, consumer


def test_message_timer_setters_set_5x_s_properties() -> None:
    msg = (
        Message("T", b"x")
        .with_deliver_time_ms(1_700_000_000_000)
        .with_delay_time_sec(5)
        .with_delay_time_ms(1500)
    )
    assert msg.properties == {
        "TIMER_DELIVER_MS": "1700000000000",
        "TIMER_DELAY_SEC": "5",
        "TIMER_DELAY_MS": "1500",
    }
    assert (msg.deliver_time_ms, msg.delay_time_sec, msg.delay_time_ms) == (1_700_000_000_000, 5, 1500)
    assert Message("T", b"x").deliver_time_ms == 0


async def test_a_push_consumer_gets_timer_messages_at_their_time(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    rec = Recorder()
    c = consumer(namesrv, f"g_{name}", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(name, "*")
    c.register_message_listener(rec)
    async with (
        c,
        Producer("pg_timer", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}") as producer,
    ):
        deliver = int(time.time() * 1000) + 2500
        before = int(time.time() * 1000)
        await producer.send(Message.create(name, b"at", tags="T").with_deliver_time_ms(deliver))
        await producer.send(Message.create(name, b"sec").with_delay_time_sec(2))
        await producer.send(Message.create(name, b"ms").with_delay_time_ms(1500))
        await eventually(lambda: len(rec.msgs) >= 3, what="the three timer messages")
        got = {m.body: (m, time.time() * 1000) for m in rec.msgs}
    at, at_received = got[b"at"]
    assert at.store_timestamp >= deliver and at_received >= deliver, "not before its time"
    assert got[b"sec"][0].store_timestamp >= before + 2000
    assert got[b"ms"][0].store_timestamp >= before + 1500
    assert at.properties["TIMER_DELIVER_MS"] == str(deliver)


@pytest.fixture
def recall_server(finchmq_server_factory) -> EmbeddedServer:  # type: ignore[no-untyped-def]
    return finchmq_server_factory({**FAST_BROKER, "recallMessageEnable": "true", "timerPrecisionMs": "100"})


async def test_a_producer_recalls_a_timer_message(recall_server: EmbeddedServer, name: str) -> None:
    namesrv = recall_server.namesrv_addr
    await create_topic(namesrv, name, 1)
    rec = Recorder()
    c = consumer(namesrv, f"g_{name}", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(name, "*")
    c.register_message_listener(rec)
    async with (
        c,
        Producer("pg_recall", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}") as producer,
    ):
        deliver = int(time.time() * 1000) + 2000
        doomed = await producer.send(Message(name, b"doomed").with_deliver_time_ms(deliver))
        await producer.send(Message(name, b"kept").with_deliver_time_ms(deliver + 200))
        assert doomed.recall_handle
        assert await producer.recall_message(name, doomed.recall_handle) == doomed.msg_id
        await eventually(lambda: rec.bodies() == ["kept"], what="only the message not recalled")
        with pytest.raises(MQBrokerError) as refused:
            await producer.recall_message(name, doomed.recall_handle)  # expired now
        assert refused.value.response_code == ResponseCode.ILLEGAL_OPERATION
