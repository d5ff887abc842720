"""Transactional messages end to end: finchmq's TransactionProducer against a real broker
(half messages, END_TRANSACTION, the broker's check, transactionCheckMax), as Java 4.9.8 does
them. The broker checks every 300 ms here and counts a transaction as old after 500 ms."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from finchmq.broker.transaction import CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC, TRANSACTION_GROUP
from finchmq.client import (
    AdminClient,
    LocalTransactionState,
    Message,
    MessageConst,
    MessageExt,
    MQBrokerError,
    TransactionProducer,
)
from finchmq.client.sync import BlockingTransactionProducer
from finchmq.testing import EmbeddedServer
from finchmq.testing.process import ServerProcess
from tests.waiting import eventually

from .conftest import TEST_BROKER, create_topic, pull_all

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
FAST_CHECKS = {"transactionCheckInterval": "300", "transactionTimeOut": "500", **TEST_BROKER}


@dataclass
class Listener:
    """Answers with fixed states and records what it was asked."""

    execute: LocalTransactionState
    check: LocalTransactionState = UNKNOW
    executed: list[Message] = field(default_factory=list)
    checked: list[MessageExt] = field(default_factory=list)
    real_topic_empty_during_execute: list[bool] = field(default_factory=list)
    server: EmbeddedServer | None = None

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.executed.append(msg)
        if self.server is not None and self.server.broker is not None:
            store = self.server.broker.store
            self.real_topic_empty_during_execute.append(
                all(store.get_max_offset_in_queue(msg.topic, q) == 0 for q in range(4))
            )
        return self.execute

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        return self.check


@pytest.fixture
def server(finchmq_server_factory: Any) -> EmbeddedServer:
    return finchmq_server_factory(FAST_CHECKS)


@pytest.fixture
def patient_server(finchmq_server_factory: Any) -> EmbeddedServer:
    """Checks only transactions older than 10 s: one ended at once is never asked about."""
    return finchmq_server_factory({**FAST_CHECKS, "transactionTimeOut": "10000"})


async def asked_no_more(server: EmbeddedServer, listener: Listener) -> None:
    """Once a transaction is decided, the broker stops asking about it (checks already in
    flight when the decision landed may still arrive: wait for the count to settle first)."""
    await after_checks(server)
    settled = len(listener.checked)
    await after_checks(server)
    assert len(listener.checked) == settled, "a decided transaction is not asked about again"


def passes(server: EmbeddedServer) -> int:
    assert server.broker is not None
    return server.broker.transactions.passes


async def after_checks(server: EmbeddedServer, count: int = 3) -> None:
    """Wait until the broker has run ``count`` more check passes."""
    start = passes(server)
    await eventually(lambda: passes(server) >= start + count)


async def producer_registered(server: EmbeddedServer, group: str) -> None:
    """Wait for the producer's first heartbeat (1 s after it starts, as Java's)."""
    assert server.broker is not None
    producers = server.broker.producer_manager
    await eventually(lambda: group in producers.groups)


def queue_size(server: EmbeddedServer, topic: str) -> int:
    assert server.broker is not None
    return server.broker.store.get_max_offset_in_queue(topic, 0)


async def test_commit_makes_the_message_visible_only_after_the_local_transaction(
    patient_server: EmbeddedServer, name: str
) -> None:
    server = patient_server
    await create_topic(server.namesrv_addr, name)
    listener = Listener(COMMIT, server=server)
    async with TransactionProducer(
        f"tx_{name}", namesrv_addr=server.namesrv_addr, transaction_listener=listener
    ) as p:
        result = await p.send_message_in_transaction(Message.create(name, b"order-1", keys="o1"), arg="ctx")
    assert result.local_transaction_state is COMMIT and listener.real_topic_empty_during_execute == [True]
    [executed] = listener.executed
    assert executed.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == result.msg_id
    [msg] = await pull_all(server.namesrv_addr, name, 1)
    assert msg.body == b"order-1" and msg.keys == "o1" and msg.unique_key == result.msg_id
    assert MessageConst.PROPERTY_TRANSACTION_PREPARED not in msg.properties
    assert MessageConst.PROPERTY_REAL_TOPIC not in msg.properties
    assert msg.properties[MessageConst.PROPERTY_PRODUCER_GROUP] == f"tx_{name}"
    assert queue_size(server, HALF_TOPIC) == 1
    await eventually(lambda: queue_size(server, OP_TOPIC) == 1)  # written right after the commit
    await after_checks(server)
    assert listener.checked == []  # ended: never asked about


async def test_rollback_never_delivers(patient_server: EmbeddedServer, name: str) -> None:
    server = patient_server
    await create_topic(server.namesrv_addr, name)
    listener = Listener(ROLLBACK)
    async with TransactionProducer(
        f"tx_{name}", namesrv_addr=server.namesrv_addr, transaction_listener=listener
    ) as p:
        result = await p.send_message_in_transaction(Message.create(name, b"cancelled"))
        assert result.local_transaction_state is ROLLBACK
        await eventually(lambda: queue_size(server, OP_TOPIC) == 1)
        await after_checks(server)
    assert listener.checked == []
    assert server.broker is not None
    assert all(server.broker.store.get_max_offset_in_queue(name, q) == 0 for q in range(4))


@pytest.mark.parametrize(("answer", "delivered"), [(COMMIT, 1), (ROLLBACK, 0)])
async def test_unknown_then_the_check_decides(
    server: EmbeddedServer, name: str, answer: LocalTransactionState, delivered: int
) -> None:
    await create_topic(server.namesrv_addr, name)
    listener = Listener(UNKNOW, check=answer)
    async with TransactionProducer(
        f"tx_{name}", namesrv_addr=server.namesrv_addr, transaction_listener=listener
    ) as p:
        result = await p.send_message_in_transaction(Message.create(name, b"pending", tags="T"))
        await eventually(lambda: len(listener.checked) >= 1)
        asked = listener.checked[0]
        assert (asked.topic, asked.body, asked.tags) == (name, b"pending", "T")  # as its real topic's
        assert asked.unique_key == result.msg_id
        await eventually(lambda: queue_size(server, OP_TOPIC) >= 1)
        await asked_no_more(server, listener)
    assert server.broker is not None
    assert sum(server.broker.store.get_max_offset_in_queue(name, q) for q in range(4)) == delivered
    if delivered:
        [msg] = await pull_all(server.namesrv_addr, name, 1)
        assert msg.unique_key == result.msg_id


async def test_check_max_moves_the_message_aside(finchmq_server_factory: Any, name: str) -> None:
    server = finchmq_server_factory({**FAST_CHECKS, "transactionCheckMax": "2"})
    await create_topic(server.namesrv_addr, name)
    listener = Listener(UNKNOW, check=UNKNOW)
    async with TransactionProducer(
        f"tx_{name}", namesrv_addr=server.namesrv_addr, transaction_listener=listener
    ) as p:
        await producer_registered(server, f"tx_{name}")  # else the first checks find no one to ask
        await p.send_message_in_transaction(Message.create(name, b"undecided"))
        await eventually(lambda: queue_size(server, CHECK_MAX_TIME_TOPIC) == 1)
        await eventually(lambda: len(listener.checked) == 2)  # transactionCheckMax asks
        await after_checks(server)
    assert len(listener.checked) == 2, "given up: not asked again"
    assert server.broker is not None
    assert server.broker.runtime_info()["transactionCheckMaxDiscarded"] == "1"
    assert all(server.broker.store.get_max_offset_in_queue(name, q) == 0 for q in range(4))


async def test_a_delay_level_is_ignored_as_javas_producer_does(server: EmbeddedServer, name: str) -> None:
    await create_topic(server.namesrv_addr, name)
    listener = Listener(COMMIT)
    async with TransactionProducer(
        f"tx_{name}", namesrv_addr=server.namesrv_addr, transaction_listener=listener
    ) as p:
        await p.send_message_in_transaction(Message.create(name, b"now").with_delay_time_level(3))
    [msg] = await pull_all(server.namesrv_addr, name, 1)
    assert MessageConst.PROPERTY_DELAY_TIME_LEVEL not in msg.properties


def test_blocking_producer_with_plain_function_listener(server: EmbeddedServer, name: str) -> None:
    asyncio.run(create_topic(server.namesrv_addr, name))
    seen: list[str] = []

    class Plain:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            time.sleep(0.05)  # a blocking call: runs in a worker thread, not on the event loop
            seen.append(arg)
            return COMMIT

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return ROLLBACK

    with BlockingTransactionProducer(
        f"tx_{name}", namesrv_addr=server.namesrv_addr, transaction_listener=Plain()
    ) as producer:
        result = producer.send_message_in_transaction(Message.create(name, b"blocking"), "arg-1")
    assert result.local_transaction_state is COMMIT and seen == ["arg-1"]
    assert [m.body for m in asyncio.run(pull_all(server.namesrv_addr, name, 1))] == [b"blocking"]


async def test_a_half_message_sent_here_is_ended_by_another_producer_of_the_group(
    patient_server: EmbeddedServer, name: str
) -> None:
    """``send_half_message`` leaves the transaction open; a producer of the group in another
    client instance (another process, as the Spark sink's driver) ends it from the
    ``HalfMessage`` alone, awaiting the broker's answer."""
    server = patient_server
    await create_topic(server.namesrv_addr, name)
    group = f"tx_{name}"
    listener = Listener(UNKNOW)
    async with (
        TransactionProducer(group, namesrv_addr=server.namesrv_addr, transaction_listener=listener) as sender,
        TransactionProducer(
            group, namesrv_addr=server.namesrv_addr, transaction_listener=listener, instance_name="ender"
        ) as ender,
    ):
        kept_sent, kept = await sender.send_half_message(Message.create(name, b"kept", keys="k"))
        _, dropped = await sender.send_half_message(
            Message.create(name, b"dropped"), queue=kept_sent.message_queue
        )
        assert (kept.topic, kept.broker_name, kept.msg_id) == (name, "broker-a", kept_sent.msg_id)
        assert queue_size(server, HALF_TOPIC) == 2 and listener.executed == []
        await ender.end_transaction(kept, COMMIT, oneway=False)  # answered once stored
        assert [m.body for m in await pull_all(server.namesrv_addr, name, 1)] == [b"kept"]
        await ender.end_transaction(dropped, ROLLBACK, oneway=False)
        await eventually(lambda: queue_size(server, OP_TOPIC) == 2)
        with pytest.raises(MQBrokerError, match="The transaction state table offset wrong"):
            await ender.end_transaction(
                replace(kept, queue_offset=kept.queue_offset + 7), COMMIT, oneway=False
            )
        with pytest.raises(ValueError, match="UNKNOW"):
            await ender.end_transaction(kept, UNKNOW, oneway=False)
        await after_checks(server)
    assert listener.checked == []
    assert [m.body for m in await pull_all(server.namesrv_addr, name, 1)] == [b"kept"]


# -- killed processes ------------------------------------------------------------------------------

DYING_PRODUCER = """
import asyncio, sys, time
from finchmq.client import LocalTransactionState, Message, TransactionProducer

class Hang:
    def execute_local_transaction(self, msg, arg):
        print("IN-TRANSACTION", flush=True)
        time.sleep(600)  # killed here: the half message is stored, END_TRANSACTION never sent

    def check_local_transaction(self, msg):
        return LocalTransactionState.UNKNOW

async def main():
    namesrv, group, topic = sys.argv[1:]
    async with TransactionProducer(group, namesrv_addr=namesrv, transaction_listener=Hang()) as producer:
        await producer.send_message_in_transaction(Message.create(topic, b"orphan"))

asyncio.run(main())
"""


@pytest.mark.slow
async def test_another_producer_of_the_group_answers_for_one_that_died(
    server: EmbeddedServer, name: str
) -> None:
    await create_topic(server.namesrv_addr, name)
    group = f"tx_{name}"
    dying = subprocess.Popen(
        [sys.executable, "-c", DYING_PRODUCER, server.namesrv_addr, group, name],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert dying.stdout is not None
        line = await asyncio.to_thread(dying.stdout.readline)
        assert line.strip() == "IN-TRANSACTION", line
        assert queue_size(server, HALF_TOPIC) == 1
    finally:
        dying.send_signal(signal.SIGKILL)
        dying.wait()
        dying.stdout.close()
    listener = Listener(UNKNOW, check=COMMIT)
    async with TransactionProducer(group, namesrv_addr=server.namesrv_addr, transaction_listener=listener):
        [msg] = await pull_all(server.namesrv_addr, name, 1, timeout=60)
        assert msg.body == b"orphan"
        await asked_no_more(server, listener)
    assert server.broker is not None
    assert sum(server.broker.store.get_max_offset_in_queue(name, q) for q in range(4)) == 1


@pytest.mark.slow
async def test_half_messages_survive_a_broker_sigkill_and_end_once(tmp_path: Path, name: str) -> None:
    """Transactions left open when the broker is killed are checked after the restart: each
    committed one is delivered once, no rolled-back one ever."""
    topic, group = "TxCrash", "tx_crash"
    server = ServerProcess(
        conf={**TEST_BROKER, "transactionTimeOut": "3600000"}, data_dir=tmp_path / "broker"
    )
    server.start()
    try:
        await create_topic(server.namesrv_addr, topic)
        opened = Listener(UNKNOW)
        async with TransactionProducer(
            group, namesrv_addr=server.namesrv_addr, transaction_listener=opened
        ) as p:
            for i in range(20):
                await p.send_message_in_transaction(Message.create(topic, f"tx-{i}".encode()))
            committed = Listener(COMMIT)
            p.set_transaction_listener(committed)
            for i in range(20, 25):
                await p.send_message_in_transaction(Message.create(topic, f"tx-{i}".encode()))
        # END_TRANSACTION is oneway: the kill must come after the broker has committed those five
        # (else the restarted broker rightly checks them too), so wait until they are delivered
        landed = await pull_all(server.namesrv_addr, topic, 5)
        assert sorted(m.body.decode() for m in landed) == [f"tx-{i}" for i in range(20, 25)]
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        server.conf = {**TEST_BROKER, **FAST_CHECKS}
        server.start()

        class Decide:
            def __init__(self) -> None:
                self.asked: list[str] = []

            async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
                return UNKNOW

            async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
                self.asked.append(msg.body.decode())
                return COMMIT if int(msg.body.decode()[3:]) % 2 == 0 else ROLLBACK

        decide = Decide()
        async with TransactionProducer(group, namesrv_addr=server.namesrv_addr, transaction_listener=decide):
            expected = sorted([f"tx-{i}" for i in range(0, 20, 2)] + [f"tx-{i}" for i in range(20, 25)])
            opened_ids = {f"tx-{i}" for i in range(20)}
            await eventually(lambda: set(decide.asked) == opened_ids, timeout=60)

            async def all_ended() -> bool:
                async with AdminClient(namesrv_addr=server.namesrv_addr) as admin:
                    stats = await admin.consume_stats(TRANSACTION_GROUP, HALF_TOPIC)
                return stats.compute_total_diff() == 0

            await eventually(all_ended, timeout=60)
            delivered = sorted(
                m.body.decode() for m in await pull_all(server.namesrv_addr, topic, len(expected))
            )
        assert delivered == expected, "each committed transaction exactly once, no rolled-back one"
        assert set(decide.asked) == opened_ids, "every open transaction was asked about"
    finally:
        server.stop()
