"""Message trace end to end: a producer and a push consumer with ``enable_msg_trace`` record
the send (Pub) and the consumption (SubBefore, SubAfter) in RMQ_SYS_TRACE_TOPIC, and
``finchmq admin queryMsgTraceById`` prints them as mqadmin does; a transaction producer records
each end of a transaction (EndTransaction)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from finchmq.broker.transaction import OP_TOPIC
from finchmq.cli.__main__ import main
from finchmq.client import (
    AdminClient,
    ConsumeConcurrentlyStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from finchmq.protocol.topics import RMQ_SYS_TRACE_TOPIC
from finchmq.protocol.trace import (
    CONTENT_SPLITOR,
    FIELD_SPLITOR,
    TraceMessageType,
    TraceType,
    decode_trace_data,
)
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_BROKER, FAST_CLIENT, create_topic, pull_all
from .test_transactions import FAST_CHECKS, Listener


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


async def test_ended_transactions_are_traced_as_java_does(finchmq_server_factory: Any, name: str) -> None:
    """A committed transaction, and one left unknown that the broker's check rolls back: each end
    is an EndTransaction record in the trace topic, in Java's 13-field layout."""
    # no check at all until the first transaction is committed (however slow the machine)
    server: EmbeddedServer = finchmq_server_factory(
        {**FAST_CHECKS, "transactionTimeOut": "3600000", "traceTopicEnable": "true"}
    )
    assert server.broker is not None
    store = server.broker.store
    await create_topic(server.namesrv_addr, name, 1)
    group = f"tx_{name}"
    async with TransactionProducer(
        group,
        namesrv_addr=server.namesrv_addr,
        transaction_listener=Listener(LocalTransactionState.COMMIT_MESSAGE),
        enable_msg_trace=True,
    ) as p:
        first = await p.send_message_in_transaction(Message.create(name, b"one", tags="TagA", keys="k1 k2"))
        await eventually(lambda: store.get_max_offset_in_queue(OP_TOPIC, 0) >= 1)  # committed
        async with AdminClient(namesrv_addr=server.namesrv_addr) as admin:
            await admin.update_broker_config(server.broker_addr, {"transactionTimeOut": "500"})
        p.set_transaction_listener(
            Listener(LocalTransactionState.UNKNOW, check=LocalTransactionState.ROLLBACK_MESSAGE)
        )
        second = await p.send_message_in_transaction(Message.create(name, b"two"))
        await eventually(lambda: store.get_max_offset_in_queue(OP_TOPIC, 0) >= 2)  # the check rolled it back
    # closing flushed the dispatcher: every record is stored
    stored = store.get_max_offset_in_queue(RMQ_SYS_TRACE_TOPIC, 0)
    trace_msgs = await pull_all(server.namesrv_addr, RMQ_SYS_TRACE_TOPIC, stored)
    bodies = "".join(m.body.decode() for m in trace_msgs)
    raw = [r.split(CONTENT_SPLITOR) for r in bodies.split(FIELD_SPLITOR) if r.startswith("EndTransaction")]
    assert all(len(fields) == 13 for fields in raw), "Java's EndTransaction layout has 13 fields"
    assert all(int(f[1]) > 0 for f in raw)
    layout = [tuple(f[:1] + f[2:]) for f in raw]  # everything but the time stamp
    addr = server.broker_addr
    commit = str(int(TraceMessageType.Trans_msg_Commit))
    one = ("EndTransaction", "DefaultRegion", group, name, first.msg_id, "TagA", "k1 k2", addr, commit)
    two = ("EndTransaction", "DefaultRegion", group, name, second.msg_id, "null", "null", addr, commit)
    expected = [
        (*one, first.msg_id, "COMMIT_MESSAGE", "false"),
        (*two, second.msg_id, "UNKNOW", "false"),
        (*two, second.msg_id, "ROLLBACK_MESSAGE", "true"),
    ]
    # a check already in flight when the rollback landed may be answered (and traced) again
    assert layout[:3] == expected and all(extra == expected[2] for extra in layout[3:]), layout
    ends = [c for c in decode_trace_data(bodies) if c.trace_type is TraceType.EndTransaction]
    assert [c.trace_beans[0].from_transaction_check for c in ends[:3]] == [False, False, True]
    # the trace message is indexed by the traced message's id and keys, as Java's
    assert any({first.msg_id, "k1", "k2"} <= set((m.keys or "").split(" ")) for m in trace_msgs)
