"""The push consumer in POP mode (RocketMQ 5.x) against a real broker: the broker assigns queues
(QUERY_ASSIGNMENT) and says PULL or POP (``setConsumeMode``, through AdminClient and through
``finchmq admin``); concurrent consumption acks on CONSUME_SUCCESS and retries RECONSUME_LATER by
changing the invisible time; two members consume every message once; the DLQ after
``max_reconsume_times``; orderly consumption by two members keeps each queue's order across a
suspension; running info shows the popped queues."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from finchmq.cli.__main__ import main
from finchmq.client import (
    AdminClient,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    MessageQueue,
    MessageRequestMode,
    MQBrokerError,
    Producer,
    PushConsumer,
)
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import build_pop_retry_topic_v1
from finchmq.testing import EmbeddedServer
from tests.scrape import scrape, value
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic, dead_letter, produce, short_name
from .test_simple_consumer import POP_BROKER, revive_settled

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
FAST_RETRY = (1,) * 16  # s: RECONSUME_LATER comes back after 1 s instead of 10 s, 30 s, 1 min...


@pytest.fixture
def server(finchmq_server_factory: Any) -> EmbeddedServer:
    return finchmq_server_factory(POP_BROKER)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    return short_name(request)


def pop_consumer(namesrv: str, group: str, **kwargs: Any) -> PushConsumer:
    settings = {
        **FAST_CLIENT,
        "instance_name": f"c-{time.monotonic_ns()}",
        "client_rebalance": False,
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        "broker_suspend_max_time_millis": 1000,
        "pop_delay_level": FAST_RETRY,
        **kwargs,
    }
    return PushConsumer(group, namesrv_addr=namesrv, **settings)


async def set_pop(namesrv: str, topic: str, group: str, share: int = 0) -> None:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.set_message_request_mode(
            topic, group, MessageRequestMode.POP, share, cluster="DefaultCluster"
        )


class Recorder:
    """A blocking concurrent listener: records what it got; fails each body in ``fail`` ``times``."""

    def __init__(self, fail: set[str] | None = None, times: int = 1) -> None:
        self.msgs: list[MessageExt] = []
        self.lock = threading.Lock()
        self.fail = fail or set()
        self.times = times
        self.failures: dict[str, int] = defaultdict(int)

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        with self.lock:
            self.msgs.extend(msgs)
            for msg in msgs:
                body = msg.body.decode()
                if body in self.fail and self.failures[body] < self.times:
                    self.failures[body] += 1
                    return LATER
        return OK

    def bodies(self) -> list[str]:
        with self.lock:
            return sorted(m.body.decode() for m in self.msgs)


async def test_broker_assigns_pull_by_default_and_pop_once_set(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 4)
    await produce(namesrv, name, 8)
    pulled = Recorder()
    consumer = pop_consumer(namesrv, group)
    consumer.subscribe(name)
    consumer.register_message_listener(pulled)
    async with consumer:
        # nothing set: PULL, the group's queues divided as client rebalancing would
        await eventually(lambda: len(pulled.msgs) >= 8, what="8 messages pulled")
        rebalance = consumer.rebalance
        assert {mq.queue_id for mq in rebalance.process_queue_table if mq.topic == name} == {0, 1, 2, 3}
        assert rebalance.pop_process_queue_table == {}
        # the pop retry topic is pulled too while the topic is pulled (what was revived while popping)
        assert build_pop_retry_topic_v1(name, group) in rebalance.subscription_inner
    assert pulled.bodies() == sorted(f"m{i}" for i in range(8))

    await set_pop(namesrv, name, group)
    popped = Recorder()
    consumer = pop_consumer(namesrv, group)
    consumer.subscribe(name)
    consumer.register_message_listener(popped)
    async with consumer:
        rebalance = consumer.rebalance
        await eventually(lambda: rebalance.pop_process_queue_table, what="the broker's POP assignment")
        assert set(rebalance.pop_process_queue_table) == {MessageQueue(name, "broker-a", -1)}
        assert not [mq for mq in rebalance.process_queue_table if mq.topic == name]
        assert build_pop_retry_topic_v1(name, group) not in rebalance.subscription_inner
        await produce(namesrv, name, 5, prefix="p")
        await eventually(lambda: len(popped.msgs) >= 5, what="5 messages popped")
        info = consumer.consumer_running_info()
        assert info.mq_pop_table is not None and MessageQueue(name, "broker-a", -1) in info.mq_pop_table
        await eventually(lambda: revive_settled(server), what="every popped message acked")
    assert popped.bodies() == sorted(f"p{i}" for i in range(5))


async def test_two_members_consume_every_message_once(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    """Both members pop every queue of the broker (queue -1, popShareQueueNum 0): each message is
    handed to one of them, once, and acked."""
    group = f"g_{name}"
    await create_topic(namesrv, name, 4)
    await set_pop(namesrv, name, group)
    recorders = [Recorder(), Recorder()]
    members = []
    for rec in recorders:
        member = pop_consumer(namesrv, group, pop_batch_nums=4)
        member.subscribe(name)
        member.register_message_listener(rec)
        members.append(member)
    count = 40
    async with members[0], members[1]:
        for member in members:
            await eventually(lambda m=member: m.rebalance.pop_process_queue_table, what="the POP assignment")
            assert set(member.rebalance.pop_process_queue_table) == {MessageQueue(name, "broker-a", -1)}
        await produce(namesrv, name, count)

        def consumed() -> int:
            return sum(len(rec.msgs) for rec in recorders)

        await eventually(lambda: consumed() >= count, what=f"{count} messages consumed")
        await eventually(lambda: revive_settled(server), what="every message acked")
        # acked: nothing is delivered again once the broker has dealt with every check point
        assert consumed() == count
    every = sorted(body for rec in recorders for body in rec.bodies())
    assert every == sorted(f"m{i}" for i in range(count)), "each message consumed exactly once"
    assert all(m.reconsume_times == 0 for rec in recorders for m in rec.msgs)


async def test_reconsume_later_comes_back_with_one_more_reconsume_time(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 2)
    await set_pop(namesrv, name, group)
    rec = Recorder(fail={"m1"}, times=2)
    consumer = pop_consumer(namesrv, group)
    consumer.subscribe(name)
    consumer.register_message_listener(rec)
    async with consumer:
        await eventually(lambda: consumer.rebalance.pop_process_queue_table, what="the POP assignment")
        await produce(namesrv, name, 3)
        await eventually(lambda: rec.bodies().count("m1") >= 3, what="m1 three times")
        deliveries = [m.reconsume_times for m in rec.msgs if m.body == b"m1"]
        assert deliveries == [0, 1, 2]
        await eventually(lambda: revive_settled(server), what="every message acked")
        assert sorted(set(rec.bodies())) == ["m0", "m1", "m2"]
        for msg in rec.msgs:
            assert msg.topic == name  # a retry delivery shows its topic
            assert MessageConst.PROPERTY_POP_CK in msg.properties


async def test_dlq_after_max_reconsume_times(server: EmbeddedServer, namesrv: str, name: str) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 1)
    await set_pop(namesrv, name, group)
    rec = Recorder(fail={"m0"}, times=100)
    consumer = pop_consumer(namesrv, group, max_reconsume_times=1)
    consumer.subscribe(name)
    consumer.register_message_listener(rec)
    async with consumer:
        await eventually(lambda: consumer.rebalance.pop_process_queue_table, what="the POP assignment")
        await produce(namesrv, name, 1)
        dead = await dead_letter(server, group)
        assert dead.body == b"m0"
        assert [m.reconsume_times for m in rec.msgs] == [0, 1]  # delivered max + 1 times
        await eventually(lambda: revive_settled(server), what="the dead-lettered message acked")


async def test_orderly_pop_keeps_each_queue_in_order_across_two_members(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 2)
    await set_pop(namesrv, name, group)
    per_queue = 8
    seen: dict[int, list[int]] = defaultdict(list)
    suspended: set[str] = set()
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        with lock:
            for msg in msgs:
                body = msg.body.decode()
                if body.endswith("-3") and body not in suspended:
                    # once: the queue waits, then goes on with this whole batch again, in order
                    suspended.add(body)
                    ctx.suspend_current_queue_time_millis = 200
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            for msg in msgs:  # the batch succeeded: consumed, each once
                seen[msg.queue_id].append(msg.queue_offset)
        return ConsumeOrderlyStatus.SUCCESS

    members = []
    for _ in range(2):
        member = pop_consumer(namesrv, group, consume_message_batch_max_size=2, pop_batch_nums=4)
        member.subscribe(name)
        member.register_message_listener(listener, orderly=True)
        members.append(member)
    async with members[0], members[1]:
        for member in members:
            await eventually(lambda m=member: m.rebalance.pop_process_queue_table, what="the POP assignment")
        async with Producer(
            "pg_order", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}"
        ) as producer:
            queues = sorted(await producer.fetch_publish_message_queues(name))
            for i in range(per_queue):
                for mq in queues:
                    await producer.send(Message(name, f"{mq.queue_id}-{i}".encode()), queue=mq)

        def done() -> bool:
            with lock:
                return sum(len(v) for v in seen.values()) >= per_queue * len(queues)

        await eventually(done, what="every message consumed once")
        await eventually(lambda: revive_settled(server), what="every message acked")
    for queue_id, offsets in seen.items():
        assert offsets == list(range(per_queue)), f"queue {queue_id} consumed out of order: {offsets}"
    assert suspended == {f"{q}-3" for q in range(2)}


async def test_set_consume_mode_refusals_and_the_cli(
    server: EmbeddedServer, namesrv: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    group = f"g_{name}"
    await create_topic(namesrv, name, 1)
    async with AdminClient(namesrv_addr=namesrv) as admin:
        with pytest.raises(MQBrokerError) as caught:
            await admin.set_message_request_mode(
                f"%RETRY%{group}", group, MessageRequestMode.POP, broker_addr=server.broker_addr
            )
        assert caught.value.response_code == ResponseCode.NO_PERMISSION
        assert caught.value.remark == "retry topic is not allowed to set mode"
        with pytest.raises(MQBrokerError, match=r"topic\[Nope\] not exist"):
            await admin.set_message_request_mode(
                "Nope", group, MessageRequestMode.POP, broker_addr=server.broker_addr
            )
    # the CLI runs its blocking client: off this test's event loop, as from a shell
    code = await asyncio.to_thread(
        main, ["admin", "setConsumeMode", "-n", namesrv, "-b", server.broker_addr, "-t", name, "-g", group,
               "-m", "POP", "-q", "2"],
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines() == [
        f"set consume mode to {server.broker_addr} success.",
        f"topic[{name}] group[{group}] consume mode[POP] popShareQueueNum[2]",
    ]
    assert server.broker is not None
    mode = server.broker.context.message_request_mode_manager.get_message_request_mode(name, group)
    assert mode is not None and mode.mode is MessageRequestMode.POP and mode.pop_share_queue_num == 2
    with pytest.raises(SystemExit):  # neither -b nor -c
        await asyncio.to_thread(
            main, ["admin", "setConsumeMode", "-n", namesrv, "-t", name, "-g", group, "-m", "POP"]
        )
    with pytest.raises(SystemExit) as bad:
        await asyncio.to_thread(
            main, ["admin", "setConsumeMode", "-n", namesrv, "-c", "DefaultCluster", "-t", name, "-g", group,
                   "-m", "PUSH"],
        )  # fmt: skip
    assert bad.value.code == 2
    assert "PULL or POP" in capsys.readouterr().err


async def test_admin_and_metrics_show_a_popping_group(
    finchmq_server_factory: Any,
    name: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What 5.x's mqadmin and broker metrics show of a group that pops: consumerStatus's
    ``#Consumer Pop Detail#`` (with -i, and in the files it writes without), consumerProgress's
    offsets of the topic and of the group's pop retry topic (the broker moves them as it hands
    messages out), and the broker's rocketmq_pop_* series for the group."""
    prom = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}
    server = finchmq_server_factory({**POP_BROKER, **prom})
    namesrv = server.namesrv_addr
    group = f"g_{name}"
    pop_retry = build_pop_retry_topic_v1(name, group)
    monkeypatch.chdir(tmp_path)  # consumerStatus writes <now>/<clientId> files, as mqadmin

    async def admin(*args: str) -> str:
        code = await asyncio.to_thread(main, ["admin", *args, "-n", namesrv])  # off the test's loop
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return captured.out

    await create_topic(namesrv, name, 2)
    await admin("setConsumeMode", "-c", "DefaultCluster", "-t", name, "-g", group, "-m", "POP")
    rec = Recorder(fail={"m1"})  # once: m1 goes through the pop retry topic
    consumer = pop_consumer(namesrv, group)
    consumer.subscribe(name)
    consumer.register_message_listener(rec)
    async with consumer:
        await eventually(lambda: consumer.rebalance.pop_process_queue_table, what="the POP assignment")
        await produce(namesrv, name, 3)
        await eventually(lambda: len(rec.msgs) >= 4, what="m1 back once")
        await eventually(lambda: revive_settled(server), what="every message acked")
        assert rec.bodies() == ["m0", "m1", "m1", "m2"]

        status = await admin("consumerStatus", "-g", group, "-i", consumer.client_id)
        detail = status.split("#Consumer Pop Detail#\n", 1)[1].splitlines()
        assert detail[0].split() == ["#Topic", "#Broker", "Name", "#QID", "#ProcessQueueInfo"]
        assert detail[1].split()[:5] == [name, "broker-a", "-1", "PopProcessQueueInfo", "[waitAckCount:0,"]
        summary = (await admin("consumerStatus", "-g", group)).splitlines()
        [row] = [line for line in summary[1:] if consumer.client_id in line]
        written = (tmp_path / row.split()[-1]).read_text()
        assert f"{name:<32}  broker-a" in written.split("#Consumer Pop Detail#", 1)[1]

        progress = json.loads(await admin("consumerProgress", "-g", group, "--json"))
        offsets = {
            (q["topic"], q["queueId"]): (q["brokerOffset"], q["consumerOffset"]) for q in progress["queues"]
        }
        assert offsets[(name, 0)][0] + offsets[(name, 1)][0] == 3
        assert all(broker == consumer_offset for broker, consumer_offset in offsets.values())
        assert offsets[(pop_retry, 0)] == (1, 1)  # m1's retry copy, popped
        assert progress["diffTotal"] == 0
        text = (await admin("consumerProgress", "-g", group)).splitlines()
        assert [line.split()[0] for line in text[1:] if line.startswith(pop_retry)] == [pop_retry]

    assert server.broker is not None and server.broker.metrics_server is not None
    samples = await scrape(server.broker.metrics_server.port)
    for kind in ("CK", "ACK"):
        assert value(samples, "rocketmq_pop_revive_in_message_total", consumer_group=group, topic=name,
                     revive_message_type=kind, put_status="PUT_OK") >= 1  # fmt: skip
        out = samples["rocketmq_pop_revive_out_message_total"]  # one series per revive queue
        wanted = {"consumer_group": group, "topic": name, "revive_message_type": kind}
        assert sum(v for labels, v in out if wanted.items() <= labels.items()) >= 1
    assert value(samples, "rocketmq_pop_revive_retry_messages_total", consumer_group=group, topic=name,
                 put_status="PUT_OK") == 1  # fmt: skip
    for gauge in ("rocketmq_pop_offset_buffer_size", "rocketmq_pop_checkpoint_buffer_size"):
        assert gauge in samples
