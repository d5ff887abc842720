"""Push consumer against a real broker (seed 002): subscriptions, where to start, retries and the
DLQ, ackIndex, send-back fallbacks, consume timeout, hooks, async listeners, suspend/resume,
broadcasting with a local offset file, statistics and the broker's requests to the client."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import (
    AdminClient,
    ClientStateError,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeMessageContext,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MQClientError,
    OffsetStore,
    Producer,
    PullConsumer,
    PushConsumer,
    ReadOffsetType,
)
from finchmq.protocol.bodies import CMResult, GetConsumerStatusBody, OffsetSerializeWrapper
from finchmq.protocol.codes import RequestCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.headers import GetConsumerStatusRequestHeader
from finchmq.protocol.message import HostAddress
from finchmq.testing import EmbeddedServer

from .conftest import FAST_BROKER, FAST_CLIENT, create_topic, dead_letter, produce, pull_all, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


def consumer(namesrv: str, group: str, **kwargs: Any) -> PushConsumer:
    settings = {**FAST_CLIENT, "instance_name": f"c-{time.monotonic_ns()}", **kwargs}
    return PushConsumer(group, namesrv_addr=namesrv, **settings)


class Recorder:
    """A blocking listener that records what it got (thread-safe)."""

    def __init__(self, status: ConsumeConcurrentlyStatus = OK) -> None:
        self.msgs: list[MessageExt] = []
        self.lock = threading.Lock()
        self.status = status

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        with self.lock:
            self.msgs.extend(msgs)
        return self.status

    def bodies(self) -> list[str]:
        with self.lock:
            return [m.body.decode() for m in self.msgs]


async def consume_from_first(
    namesrv: str, group: str, topic: str, count: int, *, drain: bool = False, **kwargs: Any
) -> Recorder:
    """Run a member of ``group`` from the first offset until ``count`` messages of ``topic``
    arrived; then until every one is processed (``drain``: its offset is final) or for 0.5 s
    more (a message delivered again would show)."""
    rec = Recorder()
    c = consumer(namesrv, group, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kwargs)
    c.subscribe(topic)
    c.register_message_listener(rec)
    async with c:
        await wait_until(lambda: len(rec.msgs) >= count)
        if drain:
            await wait_until(
                lambda: all(pq.msg_count == 0 for pq in c.rebalance.process_queue_table.values())
            )
        else:
            await asyncio.sleep(0.5)
    return rec


async def test_consumes_every_matching_message_and_subscribes_the_retry_topic(
    namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 4)
    for tag in ("TagA", "TagB", "TagC"):
        await produce(namesrv, name, 10, tags=tag, prefix=tag)
    rec = Recorder()
    c = consumer(
        namesrv,
        f"g_{name}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        broker_suspend_max_time_millis=1000,  # the empty answer that moves the offset comes after 1 s
    )
    c.subscribe(name, "TagA || TagB")
    c.register_message_listener(rec)
    async with c:
        await wait_until(lambda: len(rec.msgs) >= 20)
        # the TagC messages count as consumed too (correctTagsOffset): the offsets pass them
        await wait_until(lambda: sum(c.offset_store.clone_offset_table(name).values()) == 30)
        await asyncio.sleep(0.3)
        async with AdminClient(namesrv_addr=namesrv) as admin:
            conn = await admin.consumer_connection(f"g_{name}")
    assert sorted(rec.bodies()) == sorted([f"TagA{i}" for i in range(10)] + [f"TagB{i}" for i in range(10)])
    assert {m.tags for m in rec.msgs} == {"TagA", "TagB"}
    assert conn.subscription_table[name].sub_string == "TagA || TagB"
    assert conn.subscription_table[f"%RETRY%g_{name}"].sub_string == "*"
    assert conn.message_model is MessageModel.CLUSTERING
    assert [c.language.name for c in conn.connection_set] == ["PYTHON"]


class MemoryOffsetStore:
    """A user-supplied OffsetStore that never finds a committed offset: consume_from_where decides."""

    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        if not increase_only or offset > self.table.get(mq, -1):
            self.table[mq] = offset

    def read_offset_from_memory(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        return -1 if read_type is ReadOffsetType.READ_FROM_STORE else self.table.get(mq, -1)

    async def persist_all(self, mqs: set[MessageQueue]) -> None:
        return None

    async def persist(self, mq: MessageQueue) -> None:
        return None

    def remove_offset(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return dict(self.table)


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, {"old0", "old1", "old2", "new0", "new1", "new2"}),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, {"new0", "new1", "new2"}),
        # the broker's searchOffset answers the message stored closest to the time: old2 at most
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, {"new0", "new1", "new2"}),
    ],
)
async def test_where_a_new_group_starts(
    namesrv: str, name: str, where: ConsumeFromWhere, expected: set[str]
) -> None:
    await create_topic(namesrv, name, 1)
    await produce(namesrv, name, 3, prefix="old")
    await asyncio.sleep(1.1)
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(time.time()))
    rec = Recorder()
    store = MemoryOffsetStore()
    assert isinstance(store, OffsetStore)
    c = consumer(namesrv, f"g_{name}", consume_from_where=where, consume_timestamp=stamp, offset_store=store)
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        await wait_until(lambda: len(c.rebalance.process_queue_table) == 2)  # the topic, its retry topic
        await asyncio.sleep(0.3)
        await produce(namesrv, name, 3, prefix="new")
        await wait_until(lambda: expected <= set(rec.bodies()))
        await asyncio.sleep(0.3)
    got = set(rec.bodies())
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        assert got - expected <= {"old2"}
    else:
        assert got == expected


async def test_failures_are_retried_then_dead_lettered(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await produce(namesrv, name, 2, prefix="m")
    seen: list[tuple[str, str, int]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            seen.append((m.body.decode(), m.topic, m.reconsume_times))
        return LATER if msgs[0].body == b"m1" else OK

    group = f"g_{name}"
    c = consumer(
        namesrv, group, max_reconsume_times=2, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    c.subscribe(name)
    c.register_message_listener(listener)
    async with c:
        await wait_until(lambda: len([s for s in seen if s[0] == "m1"]) >= 3, timeout=20)
        await asyncio.sleep(1.5)
    retries = [s for s in seen if s[0] == "m1"]
    assert [r[2] for r in retries] == [0, 1, 2], "consumed once, then retried max_reconsume_times=2 times"
    assert {r[1] for r in retries} == {name}, "a retried message shows its original topic"
    assert [s for s in seen if s[0] == "m0"] == [("m0", name, 0)]
    msg = await dead_letter(server, group)
    assert msg.body == b"m1" and msg.properties["RETRY_TOPIC"] == name


async def test_ack_index_acknowledges_part_of_a_batch(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    await produce(namesrv, name, 4, prefix="m")
    calls: list[list[tuple[str, int]]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        calls.append([(m.body.decode(), m.reconsume_times) for m in msgs])
        if len(calls) == 1:
            ctx.ack_index = 1  # m0 and m1 done; m2 and m3 back for a retry
        return OK

    c = consumer(
        namesrv,
        f"g_{name}",
        consume_message_batch_max_size=4,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe(name)
    c.register_message_listener(listener)
    async with c:
        await wait_until(lambda: sum(len(x) for x in calls) >= 6, timeout=20)
    assert calls[0] == [("m0", 0), ("m1", 0), ("m2", 0), ("m3", 0)]
    assert sorted(x for call in calls[1:] for x in call) == [("m2", 1), ("m3", 1)]


async def test_send_back_falls_back_to_the_inner_producer(namesrv: str, name: str) -> None:
    group = f"g_{name}"
    c = consumer(namesrv, group)
    c.subscribe(name)
    c.register_message_listener(Recorder())
    async with c:
        lost = MessageExt(
            name,
            b"payload",
            store_host=HostAddress("127.0.0.1", 1),
            properties={"color": "blue"},
            reconsume_times=0,
        )
        await c.send_message_back(lost, 0, broker_name="no-such-broker")
        [retry] = await pull_all(namesrv, f"%RETRY%{group}", 1, timeout=10)
    assert retry.body == b"payload" and retry.properties["color"] == "blue"
    assert retry.properties["RETRY_TOPIC"] == name and retry.reconsume_times == 1


class _BackFails(PushConsumer):
    async def send_message_back(
        self, msg: MessageExt, delay_level: int, broker_name: str | None = None
    ) -> None:
        raise MQClientError("both the broker and the inner producer refused")


async def test_when_sending_back_fails_the_message_is_consumed_again_locally(namesrv: str, name: str) -> None:
    await produce(namesrv, name, 1, prefix="m")
    times: list[float] = []
    queues: list[MessageQueue] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        times.append(time.monotonic())
        queues.append(ctx.message_queue)
        return LATER if len(times) == 1 else OK

    c = _BackFails(
        f"g_{name}",
        namesrv_addr=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST_CLIENT,
        instance_name=f"c-{time.monotonic_ns()}",
    )
    c.subscribe(name)
    c.register_message_listener(listener)
    async with c:
        await wait_until(lambda: len(times) >= 2, timeout=15)
        await wait_until(lambda: c.offset_store.read_offset_from_memory(queues[0]) == 1)
    assert 4.5 < times[1] - times[0] < 7, "submitConsumeRequestLater: 5 s"
    assert queues[0] == queues[1]


async def test_expired_consumption_is_given_back_after_consume_timeout(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    await produce(namesrv, name, 2, prefix="m")
    release = threading.Event()
    seen: list[tuple[str, int]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        m = msgs[0]
        seen.append((m.body.decode(), m.reconsume_times))
        if m.body == b"m0" and m.reconsume_times == 0:
            release.wait(10)
        return OK

    c = consumer(
        namesrv,
        f"g_{name}",
        consume_timeout=0.02,  # minutes: 1.2 s
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe(name)
    c.register_message_listener(listener)
    try:
        async with c:
            mq = MessageQueue(name, "broker-a", 0)
            await wait_until(lambda: c.offset_store.read_offset_from_memory(mq) == 2, timeout=10)
            await wait_until(lambda: ("m0", 1) in seen, timeout=10)
            release.set()
    finally:
        release.set()
    assert ("m1", 0) in seen


async def test_hooks_run_around_every_listener_call(namesrv: str, name: str) -> None:
    events: list[tuple[str, str, bool]] = []

    class Hook:
        def hook_name(self) -> str:
            return "recorder"

        def consume_message_before(self, context: ConsumeMessageContext) -> None:
            events.append(("before", context.msg_list[0].body.decode(), context.success))

        def consume_message_after(self, context: ConsumeMessageContext) -> None:
            events.append(("after", context.msg_list[0].body.decode(), context.success))

    await produce(namesrv, name, 3, prefix="h")
    c = consumer(namesrv, f"g_{name}", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(name)
    c.register_message_listener(Recorder())
    c.register_consume_message_hook(Hook())
    async with c:
        await wait_until(lambda: len(events) >= 6)
    for body in ("h0", "h1", "h2"):
        assert events.index(("before", body, False)) < events.index(("after", body, True))


async def test_async_listener_runs_on_the_loop(namesrv: str, name: str) -> None:
    await produce(namesrv, name, 30, prefix="a")
    got: list[str] = []
    running = 0
    peak = 0

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        got.extend(m.body.decode() for m in msgs)
        return OK

    c = consumer(
        namesrv,
        f"g_{name}",
        consume_thread_min=1,
        consume_thread_max=4,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe(name)
    c.register_message_listener(listener)
    async with c:
        await wait_until(lambda: len(got) >= 30)
    assert sorted(got) == sorted(f"a{i}" for i in range(30))
    assert 1 < peak <= 4, "concurrent, bounded by consume_thread_max"


async def test_suspend_stops_pulling_and_resume_restarts(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    rec = Recorder()
    c = consumer(namesrv, f"g_{name}")
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        await wait_until(lambda: sum(mq.topic == name for mq in c.rebalance.process_queue_table) == 2)
        await asyncio.sleep(0.5)
        c.suspend()
        await asyncio.sleep(0.2)
        await produce(namesrv, name, 5)
        await asyncio.sleep(2.5)  # a held long poll may still deliver what arrived first
        before = len(rec.msgs)
        await produce(namesrv, name, 5, prefix="late")
        await asyncio.sleep(1.5)
        assert not any(b.startswith("late") for b in rec.bodies()), "suspended: no new pull"
        c.resume()
        await wait_until(lambda: len(rec.msgs) >= 10)
    assert before <= 5


async def test_broadcasting_gives_every_member_everything_and_keeps_offsets_in_a_file(
    namesrv: str, name: str, tmp_path: Path
) -> None:
    await create_topic(namesrv, name, 2)
    group = f"g_{name}"
    recs = [Recorder(), Recorder()]
    members = []
    for i, rec in enumerate(recs):
        c = consumer(
            namesrv,
            group,
            message_model=MessageModel.BROADCASTING,
            instance_name=f"bc{i}",
            local_offset_store_dir=tmp_path,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        c.subscribe(name)
        c.register_message_listener(rec)
        await c.start()
        members.append(c)
    await produce(namesrv, name, 10)
    await wait_until(lambda: all(len(r.msgs) >= 10 for r in recs))
    client_id = members[0].client_id
    for c in members:
        await c.close()
    assert all(sorted(r.bodies()) == sorted(f"m{i}" for i in range(10)) for r in recs)
    offsets = tmp_path / client_id / group / "offsets.json"
    assert offsets.exists()
    table = OffsetSerializeWrapper.from_json(offsets.read_bytes()).offset_table
    assert sum(table.values()) == 10 and {mq.topic for mq in table} == {name}
    # a restarted member continues from its file: nothing old again
    await produce(namesrv, name, 4, prefix="n")
    rec = await consume_from_first(
        namesrv,
        group,
        name,
        4,
        message_model=MessageModel.BROADCASTING,
        instance_name="bc0",
        local_offset_store_dir=tmp_path,
    )
    assert sorted(rec.bodies()) == sorted(f"n{i}" for i in range(4))


async def test_offsets_survive_a_consumer_restart(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 4)
    group = f"g_{name}"
    await produce(namesrv, name, 40, prefix="a")
    await consume_from_first(namesrv, group, name, 40, drain=True)
    await produce(namesrv, name, 20, prefix="b")
    second = await consume_from_first(namesrv, group, name, 20)
    assert sorted(second.bodies()) == sorted(f"b{i}" for i in range(20)), "committed on close: no re-delivery"


async def test_offsets_survive_a_broker_restart(
    finchmq_server_factory: Any, tmp_path: Path, name: str
) -> None:
    data = tmp_path / "broker-data"
    group = f"g_{name}"
    server = finchmq_server_factory(FAST_BROKER, data_dir=data)
    await produce(server.namesrv_addr, name, 30, prefix="a")
    await consume_from_first(server.namesrv_addr, group, name, 30, drain=True)
    await asyncio.to_thread(server.stop)
    server = finchmq_server_factory(FAST_BROKER, data_dir=data)
    await produce(server.namesrv_addr, name, 10, prefix="b")
    second = await consume_from_first(server.namesrv_addr, group, name, 10)
    assert sorted(second.bodies()) == sorted(f"b{i}" for i in range(10))


async def test_broker_reset_offset_request_is_honoured(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    group = f"g_{name}"
    rec = Recorder()
    c = consumer(namesrv, group)
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        await wait_until(lambda: sum(mq.topic == name for mq in c.rebalance.process_queue_table) == 2)
        await asyncio.sleep(0.3)
        before = int(time.time() * 1000)
        await asyncio.sleep(0.05)
        await produce(namesrv, name, 20, prefix="r")
        await wait_until(lambda: len(rec.msgs) >= 20)
        await asyncio.sleep(1.0)  # offsets committed
        async with AdminClient(namesrv_addr=namesrv) as admin:
            table = await admin.reset_offset_by_time(group, name, before)
        assert sum(table.values()) == 0, "both queues back to offset 0"
        await wait_until(lambda: len(rec.msgs) >= 40, timeout=15)
    counts = Counter(rec.bodies())
    assert all(counts[f"r{i}"] >= 2 for i in range(20)), "every message consumed again after the reset"


async def test_running_info_statistics_and_consume_directly(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 2)
    group = f"g_{name}"
    consumed: list[str] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        consumed.extend(m.body.decode() for m in msgs)
        return LATER if msgs[0].body == b"bad" else OK

    c = consumer(namesrv, group, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(name)
    c.register_message_listener(listener)
    async with c:
        results = await produce(namesrv, name, 10, prefix="s")
        async with Producer("pg", namesrv_addr=namesrv, instance_name="bad-producer") as p:
            bad = await p.send(Message(name, b"bad"))
        await wait_until(lambda: len(consumed) >= 11)
        async with AdminClient(namesrv_addr=namesrv) as admin:
            info = await admin.consumer_running_info(group, c.client_id)
            direct = await admin.consume_message_directly(group, c.client_id, results[3].offset_msg_id)
            failed = await admin.consume_message_directly(group, c.client_id, bad.offset_msg_id)
        # GET_CONSUMER_STATUS_FROM_CLIENT, asked by the broker itself
        broker = server.broker
        assert broker is not None
        channel = broker.consumer_manager.get(group).find_channel(c.client_id).channel  # type: ignore[union-attr]
        header = GetConsumerStatusRequestHeader(topic=name, group=group)
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, header.to_ext_fields())
        answer = await asyncio.to_thread(server.call, broker.server.invoke(channel, request, 3000))
    props = info.properties
    assert props["PROP_CONSUMEORDERLY"] == "false" and props["consumerGroup"] == group
    assert (
        props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_NAMESERVER_ADDR"] == f"{namesrv};"
    )
    assert int(props["PROP_THREADPOOL_CORE_SIZE"]) == 20
    assert {s.topic for s in info.subscription_set} == {name, f"%RETRY%{group}"}
    assert {mq.queue_id for mq in info.mq_table if mq.topic == name} == {0, 1}
    stats = info.status_table[name]
    assert stats.consume_ok_tps > 0 and stats.pull_tps > 0 and stats.consume_failed_msgs >= 1
    assert direct.consume_result is CMResult.CR_SUCCESS and not direct.order
    assert failed.consume_result is CMResult.CR_LATER
    assert consumed.count("s3") == 2, "consumed once by the pull, once directly"
    status = GetConsumerStatusBody.from_json(answer.body)
    assert set(status.message_queue_table) == {
        MessageQueue(name, "broker-a", 0),
        MessageQueue(name, "broker-a", 1),
    }


async def test_start_requires_a_listener_and_a_free_group(namesrv: str, name: str) -> None:
    c = consumer(namesrv, f"g_{name}")
    c.subscribe(name)
    with pytest.raises(ClientStateError, match="messageListener is null"):
        await c.start()
    c.register_message_listener(Recorder())
    await c.start()
    twin = PushConsumer(f"g_{name}", namesrv_addr=namesrv, instance_name=c.config.instance_name)
    twin.subscribe(name)
    twin.register_message_listener(Recorder())
    with pytest.raises(ClientStateError, match="has been created before"):
        await twin.start()
    await c.close()
    with pytest.raises(ClientStateError, match="cannot be reopened"):
        await c.start()


async def test_a_queue_whose_pull_stalled_is_rebuilt(namesrv: str, name: str) -> None:
    """pull_max_idle_time: a ProcessQueue not pulled for that long is dropped and re-created."""
    await create_topic(namesrv, name, 1)
    rec = Recorder()
    # The broker holds each pull 3 s (empty queue) while the idle limit is 1 s.
    c = consumer(namesrv, f"g_{name}", pull_max_idle_time=1000, broker_suspend_max_time_millis=3000)
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        mq = MessageQueue(name, "broker-a", 0)
        await wait_until(lambda: mq in c.rebalance.process_queue_table)
        first = c.rebalance.process_queue_table[mq]
        await wait_until(lambda: c.rebalance.process_queue_table.get(mq) not in (None, first), timeout=10)
        assert first.dropped
        await produce(namesrv, name, 3)
        await wait_until(lambda: len(rec.msgs) >= 3)


async def test_thread_pool_grows_with_the_backlog_and_shrinks_back(namesrv: str, name: str) -> None:
    c = consumer(
        namesrv, f"g_{name}", consume_thread_min=2, consume_thread_max=4, adjust_thread_pool_nums_threshold=10
    )
    c.subscribe(name)
    c.register_message_listener(Recorder())
    async with c:
        await wait_until(lambda: len(c.rebalance.process_queue_table) >= 1)
        service = c.consume_service
        assert service is not None and service.core_pool_size == 2
        pq = next(iter(c.rebalance.process_queue_table.values()))
        pq.msg_acc_cnt = 100  # far behind the broker's max offset
        c.adjust_thread_pool()
        c.adjust_thread_pool()
        c.adjust_thread_pool()
        assert service.core_pool_size == 4, "up to consume_thread_max"
        pq.msg_acc_cnt = 0
        for _ in range(5):
            c.adjust_thread_pool()
        assert service.core_pool_size == 2, "down to consume_thread_min"


async def test_delay_level_minus_one_sends_a_failure_straight_to_the_dlq(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await produce(namesrv, name, 1, prefix="doomed")
    seen: list[str] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        ctx.delay_level_when_next_consume = -1
        return LATER

    group = f"g_{name}"
    c = consumer(namesrv, group, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(name)
    c.register_message_listener(listener)
    assert server.broker is not None
    store = server.broker.store
    async with c:
        await wait_until(lambda: store.get_max_offset_in_queue(f"%DLQ%{group}", 0) == 1, timeout=10)
        await asyncio.sleep(1.5)  # a retry would be back by now (1 s delay levels)
    assert seen == ["doomed0"], "no retry: dead-lettered at once"


async def test_an_illegal_committed_offset_is_corrected(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    """OFFSET_ILLEGAL: the queue is dropped, its offset fixed 10 s later, and consumption resumes."""
    await create_topic(namesrv, name, 1)
    group = f"g_{name}"
    mq = MessageQueue(name, "broker-a", 0)
    await produce(namesrv, name, 3)
    async with PullConsumer(group, namesrv_addr=namesrv, instance_name="bad-offset") as pull:
        pull.update_consume_offset(mq, 500)  # far beyond the 3 messages
    rec = Recorder()
    c = consumer(namesrv, group)
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        await wait_until(lambda: mq in c.rebalance.process_queue_table)
        first = c.rebalance.process_queue_table[mq]
        await wait_until(lambda: first.dropped, timeout=5)
        await wait_until(lambda: len(rec.msgs) >= 3, timeout=20)
    assert sorted(rec.bodies()) == ["m0", "m1", "m2"], "restarted at the broker's suggested offset"
