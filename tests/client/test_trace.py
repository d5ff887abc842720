"""Message trace end to end: a producer and a push consumer with ``enable_msg_trace`` record
the send (Pub) and the consumption (SubBefore, SubAfter) in RMQ_SYS_TRACE_TOPIC, and
``finchmq admin queryMsgTraceById`` prints them as mqadmin does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from finchmq.cli.__main__ import main
from finchmq.client import ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer
from finchmq.protocol.topics import RMQ_SYS_TRACE_TOPIC
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_BROKER, FAST_CLIENT, create_topic


async def test_send_and_consume_are_traced(
    finchmq_server_factory: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server: EmbeddedServer = finchmq_server_factory({**FAST_BROKER, "traceTopicEnable": "true"})
    assert server.broker is not None
    store = server.broker.store
    await create_topic(server.namesrv_addr, name, 1)
    consumed: list[str] = []

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        consumed.extend(m.client_msg_id for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        f"cg_{name}", namesrv_addr=server.namesrv_addr, enable_msg_trace=True, **FAST_CLIENT
    )
    consumer.subscribe(name)
    consumer.register_message_listener(listener)
    async with consumer:
        async with Producer(
            f"pg_{name}", namesrv_addr=server.namesrv_addr, enable_msg_trace=True
        ) as producer:
            sent = await producer.send(Message.create(name, b"traced", tags="T", keys="order-7"))
        await eventually(lambda: consumed == [sent.msg_id])
    # both dispatchers flushed on close: Pub, SubBefore and SubAfter are stored
    await eventually(lambda: store.get_max_offset_in_queue(RMQ_SYS_TRACE_TOPIC, 0) >= 2)

    args = ["admin", "queryMsgTraceById", "-i", sent.msg_id, "-n", server.namesrv_addr]
    code = await asyncio.to_thread(main, args)  # the CLI's blocking client: off this event loop
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert out[1].split()[:2] == ["Pub", f"pg_{name}"] and out[1].split()[-1] == "success"
    sub_header = out.index(next(line for line in out if "#ConsumerGroup" in line))
    assert (
        out[sub_header + 1].split()[:2] == ["Sub", f"cg_{name}"]
        and out[sub_header + 1].split()[-1] == "success"
    )
