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
from finchmq.client.consumer.process_queue import PullRequest
from finchmq.protocol.bodies import CMResult, GetConsumerStatusBody, OffsetSerializeWrapper
from finchmq.protocol.codes import RequestCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.headers import GetConsumerStatusRequestHeader
from finchmq.protocol.hosts import HostAddress
from finchmq.protocol.topics import SCHEDULE_TOPIC
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_BROKER, FAST_CLIENT, create_topic, dead_letter, produce, pull_all

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


async def caught_up(c: PushConsumer, topic: str) -> None:
    """Wait until ``c`` has consumed every message of ``topic`` stored so far: its offset of each
    queue is the queue's end. Everything it was going to be handed (a message delivered again
    included) has then been handed to the listener, and closing it commits the end."""
    queues = await eventually(
        lambda: c.rebalance.topic_subscribe_info_table.get(topic), what=f"the queues of {topic}"
    )
    ends = {mq: await c.instance.max_offset(mq) for mq in queues}
    store = c.offset_store
    await eventually(
        lambda: all(store.read_offset_from_memory(mq) == end for mq, end in ends.items()),
        what=f"{topic} consumed to its end {ends}",
    )


async def consume_from_first(namesrv: str, group: str, topic: str, count: int, **kwargs: Any) -> Recorder:
    """Run a member of ``group`` from the first offset until ``count`` messages of ``topic``
    arrived and it has consumed the topic to its end."""
    rec = Recorder()
    c = consumer(namesrv, group, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **kwargs)
    c.subscribe(topic)
    c.register_message_listener(rec)
    async with c:
        await eventually(lambda: len(rec.msgs) >= count, what=f"{count} messages")
        await caught_up(c, topic)
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
        await eventually(lambda: len(rec.msgs) >= 20, what="20 messages")
        # the TagC messages count as consumed too (correctTagsOffset): the offsets pass them, and
        # so past every message there is: nothing else can be delivered
        await eventually(
            lambda: sum(c.offset_store.clone_offset_table(name).values()) == 30, what="offsets at 30"
        )
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
    # the timestamp (whole seconds) must be later than the old messages' store times
    stored = time.time()
    await eventually(lambda: int(time.time()) > stored, what="the next second")
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
    rec = Recorder()
    store = MemoryOffsetStore()
    assert isinstance(store, OffsetStore)
    c = consumer(namesrv, f"g_{name}", consume_from_where=where, consume_timestamp=stamp, offset_store=store)
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        # the topic and its retry topic; a queue is listed once its start offset is computed
        await eventually(lambda: len(c.rebalance.process_queue_table) == 2, what="both queues assigned")
        await produce(namesrv, name, 3, prefix="new")
        await eventually(lambda: expected <= set(rec.bodies()), what=f"{sorted(expected)} consumed")
        # consumed to the end of the queue: whatever else was to be delivered has been
        mq = MessageQueue(name, "broker-a", 0)
        await eventually(lambda: store.read_offset_from_memory(mq) == 6, what="the queue consumed to 6")
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
    assert server.broker is not None
    store = server.broker.store
    async with c:
        await eventually(lambda: len([s for s in seen if s[0] == "m1"]) >= 3, what="m1 consumed 3 times")
        # The third failure's send-back dead-letters m1 instead of retrying it: the broker then
        # holds exactly the two retries (each went through the schedule topic), so m1 cannot be
        # delivered again.
        msg = await dead_letter(server, group)
        scheduled = sum(store.get_max_offset_in_queue(SCHEDULE_TOPIC, q) for q in range(18))
        retried = store.get_max_offset_in_queue(f"%RETRY%{group}", 0)
    assert msg.body == b"m1" and msg.properties["RETRY_TOPIC"] == name
    assert (scheduled, retried) == (2, 2), "two retries, then the DLQ instead of a third"
    retries = [s for s in seen if s[0] == "m1"]
    assert [r[2] for r in retries] == [0, 1, 2], "consumed once, then retried max_reconsume_times=2 times"
    assert {r[1] for r in retries} == {name}, "a retried message shows its original topic"
    assert [s for s in seen if s[0] == "m0"] == [("m0", name, 0)]


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
        await eventually(lambda: sum(len(x) for x in calls) >= 6, what="m2 and m3 consumed again")
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
        [retry] = await pull_all(namesrv, f"%RETRY%{group}", 1)
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
        await eventually(lambda: len(times) >= 2, what="consumed again")
        await eventually(lambda: c.offset_store.read_offset_from_memory(queues[0]) == 1, what="offset 1")
    # submitConsumeRequestLater: 5 s after the failure (a lower bound: a slow machine only adds)
    assert times[1] - times[0] >= 4.9
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
            release.wait(60)  # stuck until the test has seen it given back
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
            await eventually(
                lambda: c.offset_store.read_offset_from_memory(mq) == 2, what="m0 given back, offset 2"
            )
            await eventually(lambda: ("m0", 1) in seen, what="m0 consumed again from the retry topic")
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
        await eventually(lambda: len(events) >= 6, what="6 hook calls")
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
        await asyncio.sleep(0.01)  # the listener waits: the others may run meanwhile
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
        await eventually(lambda: len(got) >= 30, what="30 messages")
    assert sorted(got) == sorted(f"a{i}" for i in range(30))
    assert 1 < peak <= 4, "concurrent, bounded by consume_thread_max"


async def test_suspend_stops_pulling_and_resume_restarts(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 2)
    assert server.broker is not None
    hold = server.broker.pull_hold_service
    rec = Recorder()
    c = consumer(namesrv, f"g_{name}")
    c.subscribe(name)
    c.register_message_listener(rec)
    handed: list[tuple[int, bool]] = []  # (queue id, suspended) per pull request the pull service ran
    pulled_while_suspended: list[int] = []

    def put_off_since(mark: int) -> bool:
        """Each queue's pull request came round (so no pull of it is in flight) while suspended."""
        return {queue for queue, suspended in handed[mark:] if suspended} == {0, 1}

    async with c:
        pull_message, api = c.pull_message, c._pull_api
        assert api is not None
        send = api.pull_kernel_raw

        def watched_pull_message(request: PullRequest) -> None:
            if request.message_queue.topic == name:
                handed.append((request.message_queue.queue_id, c.paused))
            pull_message(request)

        def watched_send(mq: MessageQueue, *args: Any) -> Any:
            if mq.topic == name and c.paused:
                pulled_while_suspended.append(mq.queue_id)
            return send(mq, *args)

        c.pull_message = watched_pull_message  # type: ignore[method-assign]
        api.pull_kernel_raw = watched_send  # type: ignore[method-assign]
        await eventually(
            lambda: all((name, q) in hold._table for q in (0, 1)), what="a pull of each queue held"
        )
        c.suspend()
        await produce(namesrv, name, 5)  # wakes the held pulls: what they bring is still delivered
        await eventually(lambda: put_off_since(0), what="the held pulls answered, the next ones put off")
        mark = len(handed)
        await produce(namesrv, name, 5, prefix="late")
        await eventually(lambda: put_off_since(mark), what="each queue's next pull put off again")
        assert not any(b.startswith("late") for b in rec.bodies()), "suspended: no new pull"
        c.resume()
        expected = [f"m{i}" for i in range(5)] + [f"late{i}" for i in range(5)]
        await eventually(lambda: set(rec.bodies()) >= set(expected), what="all 10 consumed after resume")
    assert pulled_while_suspended == [], "suspended: no pull was sent"
    assert sorted(rec.bodies()) == sorted(expected)


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
    await eventually(lambda: all(len(r.msgs) >= 10 for r in recs), what="10 messages each")
    for c in members:  # then closing them writes the final offsets
        await caught_up(c, name)
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
    await consume_from_first(namesrv, group, name, 40)
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
    await consume_from_first(server.namesrv_addr, group, name, 30)
    await asyncio.to_thread(server.stop)
    server = finchmq_server_factory(FAST_BROKER, data_dir=data)
    await produce(server.namesrv_addr, name, 10, prefix="b")
    second = await consume_from_first(server.namesrv_addr, group, name, 10)
    assert sorted(second.bodies()) == sorted(f"b{i}" for i in range(10))


async def test_broker_reset_offset_request_is_honoured(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 2)
    group = f"g_{name}"
    assert server.broker is not None
    offsets = server.broker.consumer_offset_manager
    rec = Recorder()
    c = consumer(namesrv, group)
    c.subscribe(name)
    c.register_message_listener(rec)
    async with c:
        # a queue is listed once its start offset (the end: a new group) is computed
        await eventually(
            lambda: sum(mq.topic == name for mq in c.rebalance.process_queue_table) == 2,
            what="both queues assigned",
        )
        before = int(time.time() * 1000)
        await asyncio.sleep(0.05)  # every message is stored after ``before``, not in its millisecond
        await produce(namesrv, name, 20, prefix="r")
        await eventually(lambda: len(rec.msgs) >= 20, what="20 messages")
        await eventually(  # the consumer commits every 500 ms
            lambda: offsets.query_offset(group, name, 0) + offsets.query_offset(group, name, 1) == 20,
            what="the offsets committed on the broker",
        )
        async with AdminClient(namesrv_addr=namesrv) as admin:
            table = await admin.reset_offset_by_time(group, name, before)
        assert sum(table.values()) == 0, "both queues back to offset 0"
        await eventually(lambda: len(rec.msgs) >= 40, what="20 messages again")
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
        await eventually(lambda: len(consumed) >= 11, what="11 messages")
        # the failure is counted once the listener has returned (then RECONSUME_LATER is applied)
        await eventually(
            lambda: c.stats.consume_status(group, name).consume_failed_msgs >= 1, what="the failure counted"
        )
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
        first = await eventually(lambda: c.rebalance.process_queue_table.get(mq), what=f"{mq} assigned")
        await eventually(
            lambda: c.rebalance.process_queue_table.get(mq) not in (None, first), what="a new process queue"
        )
        assert first.dropped
        await produce(namesrv, name, 3)
        await eventually(lambda: len(rec.msgs) >= 3, what="3 messages")


async def test_thread_pool_grows_with_the_backlog_and_shrinks_back(namesrv: str, name: str) -> None:
    c = consumer(
        namesrv, f"g_{name}", consume_thread_min=2, consume_thread_max=4, adjust_thread_pool_nums_threshold=10
    )
    c.subscribe(name)
    c.register_message_listener(Recorder())
    async with c:
        await eventually(lambda: len(c.rebalance.process_queue_table) >= 1, what="a queue assigned")
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
        await eventually(lambda: store.get_max_offset_in_queue(f"%DLQ%{group}", 0) == 1, what="the DLQ")
        # The one send-back dead-lettered it: no retry was scheduled (a retry goes through the
        # schedule topic, then the retry topic), so it cannot come back.
        scheduled = sum(store.get_max_offset_in_queue(SCHEDULE_TOPIC, q) for q in range(18))
        retried = store.get_max_offset_in_queue(f"%RETRY%{group}", 0)
    assert (scheduled, retried) == (0, 0), "no retry: dead-lettered at once"
    assert seen == ["doomed0"]


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
        first = await eventually(lambda: c.rebalance.process_queue_table.get(mq), what=f"{mq} assigned")
        await eventually(lambda: first.dropped, what="the queue dropped (OFFSET_ILLEGAL)")
        await eventually(lambda: len(rec.msgs) >= 3, what="3 messages, after the 10 s fix")
    assert sorted(rec.bodies()) == ["m0", "m1", "m2"], "restarted at the broker's suggested offset"
