"""POP (RocketMQ 5.x) end to end over loopback: raw POP_MESSAGE / ACK_MESSAGE / BATCH_ACK_MESSAGE /
CHANGE_MESSAGE_INVISIBLETIME / PEEK_MESSAGE / NOTIFICATION / POLLING_INFO requests, as Java 5.x's
client sends them (``pop_client.py``), against an embedded broker. Nothing here waits a fixed
time: a test that expects a redelivery waits for it, one that expects none waits until the
revive service has dealt with the check point and then looks."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from finchmq.protocol import RequestCode, ResponseCode
from finchmq.protocol.bodies import KVTable, SubscriptionGroupConfig
from finchmq.protocol.headers import QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import REVIVE_GROUP, ConsumeInitMode, ExtraInfo
from finchmq.remoting import RemotingClient
from tests.broker.conftest import Broker
from tests.broker.pop_client import PopClient, Popped, pop_until
from tests.client.conftest import TEST_BROKER
from tests.scrape import scrape, value
from tests.waiting import eventually

# Revive rounds every 200 ms instead of every 1 to 4 s, so redeliveries come within a test.
POP_CONF = {"reviveInterval": "200", "reviveMaxSlow": "1"}
CLUSTER = "DefaultCluster"
REVIVE_TOPIC = f"rmq_sys_REVIVE_LOG_{CLUSTER}"

pytestmark = pytest.mark.broker_conf(POP_CONF)


async def send_all(broker: Broker, topic: str, bodies: list[str], queues: int = 4) -> None:
    for i, body in enumerate(bodies):
        r = await broker.send(topic, body.encode(), queue_id=i % queues)
        assert r.code == ResponseCode.SUCCESS, r.remark


async def create_group(broker: Broker, group: str, **settings: int) -> None:
    config = SubscriptionGroupConfig(group_name=group, **settings)  # type: ignore[arg-type]
    r = await broker.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config.to_json())
    assert r.code == ResponseCode.SUCCESS, r.remark


async def create_topic(broker: Broker, topic: str, queues: int) -> None:
    create = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
    }  # fmt: skip
    assert (await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)).code == ResponseCode.SUCCESS


async def query_offset(broker: Broker, group: str, topic: str, queue_id: int) -> int:
    header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id)
    r = await broker.call(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())
    if r.code != ResponseCode.SUCCESS:
        return -1
    return QueryConsumerOffsetResponseHeader.from_ext_fields(r.ext_fields).offset


async def runtime_info(broker: Broker) -> dict[str, str]:
    return KVTable.from_json((await broker.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table


async def revive_settled(broker: Broker) -> bool:
    """Every check point written was read, and each acked or revived (nothing pending)."""
    info = await runtime_info(broker)
    return (
        info["popRevivePendingCheckPoints"] == "0"
        and info["popReviveBehindMessages"] == "0"
        and info["popOffsetBufferSize"] == "0"
    )


def bodies(messages: list[Popped]) -> list[bytes]:
    return sorted(m.body for m in messages)


# ---------------------------------------------------------------------------------------------
# pop, ack, change invisible time


async def test_pop_then_ack_commits_the_offsets(broker: Broker) -> None:
    topic, group = "T_pop_ack", "G_pop_ack"
    await send_all(broker, topic, [f"m{i}" for i in range(8)])
    client = PopClient(broker.client, broker.addr, group)
    answer = await client.pop(topic, init_mode=ConsumeInitMode.MIN, invisible_ms=60_000)
    assert answer.code == ResponseCode.SUCCESS and answer.response.remark == "FOUND"
    assert bodies(answer.messages) == sorted(f"m{i}".encode() for i in range(8))
    header = answer.header
    assert header is not None and header.invisible_time == 60_000 and header.rest_num == 0
    assert 0 <= header.revive_qid < 8
    assert header.start_offset_info and header.msg_offset_info and header.order_count_info is None
    for popped in answer.messages:
        assert popped.msg.topic == topic and popped.msg.reconsume_times == 0
        assert popped.extra.pop_time == header.pop_time and popped.extra.broker_name == "broker-a"
    # invisible now: a second pop finds nothing and says so
    again = await client.pop(topic, init_mode=ConsumeInitMode.MIN)
    assert again.code == ResponseCode.POLLING_TIMEOUT and again.response.remark == "NO_MESSAGE_IN_QUEUE"
    assert again.header is not None and again.header.rest_num == 0
    for popped in answer.messages:
        r = await client.ack(popped)
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def committed() -> bool:
        return [await query_offset(broker, group, topic, q) for q in range(4)] == [2, 2, 2, 2]

    await eventually(committed, what="the pop offsets committed")
    await eventually(lambda: revive_settled(broker), what="the check points read and acked")
    assert (await client.pop(topic)).code == ResponseCode.POLLING_TIMEOUT


async def test_unacked_message_is_revived_through_the_retry_topic(broker: Broker) -> None:
    topic, group = "T_revive", "G_revive"
    await send_all(broker, topic, ["keep", "drop"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    first = await client.pop(topic, invisible_ms=1000, init_mode=ConsumeInitMode.MIN)
    assert bodies(first.messages) == [b"drop", b"keep"]
    dropped = next(m for m in first.messages if m.body == b"drop")
    kept = next(m for m in first.messages if m.body == b"keep")
    assert (await client.ack(kept)).code == ResponseCode.SUCCESS
    back = await pop_until(client, topic, 1, what="the unacked message back")
    assert [m.body for m in back] == [b"drop"]
    again = back[0]
    assert first.header is not None
    assert again.extra.pop_time >= first.header.pop_time + 1000, "handed out again while still invisible"
    assert again.msg.topic == topic, "answered as a message of the topic popped"
    assert again.msg.reconsume_times == 1
    assert again.msg.properties[MessageConst.PROPERTY_FIRST_POP_TIME] == str(first.header.pop_time)
    assert again.extra.retry == "1" and again.extra.real_topic(topic, group) == f"%RETRY%{group}_{topic}"
    assert again.msg.msg_id != dropped.msg.msg_id  # a new copy in the retry topic
    assert (await client.ack(again)).code == ResponseCode.SUCCESS
    await eventually(lambda: revive_settled(broker), what="the retry delivery acked")
    assert (await client.pop(topic)).messages == []


async def test_change_invisible_time(broker: Broker) -> None:
    topic, group = "T_invisible", "G_invisible"
    await send_all(broker, topic, ["sooner", "later", "old-handle"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    answer = await client.pop(topic, invisible_ms=300_000, init_mode=ConsumeInitMode.MIN)
    by_body = {m.body: m for m in answer.messages}
    # sooner: visible again in 1 s instead of 5 minutes
    sooner = by_body[b"sooner"]
    r = await client.change_invisible_time(sooner, 1000)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert sooner.extra.invisible_time == 1000 and sooner.extra.ck_queue_offset == sooner.extra.queue_offset
    # later: acked with the extra info the change returned: never comes back
    later = by_body[b"later"]
    assert (await client.change_invisible_time(later, 2000)).code == ResponseCode.SUCCESS
    assert (await client.ack(later)).code == ResponseCode.SUCCESS
    # old-handle: changed, then acked with the extra info of the pop: the new check point stays
    old = by_body[b"old-handle"]
    stale = old.extra.encode()
    assert (await client.change_invisible_time(old, 1000)).code == ResponseCode.SUCCESS
    assert (await client.ack(old, extra_info=stale)).code == ResponseCode.SUCCESS
    back = await pop_until(client, topic, 2, what="the two messages whose new check point is not acked")
    assert bodies(back) == [b"old-handle", b"sooner"]
    for popped in back:
        await client.ack(popped)
    await eventually(lambda: revive_settled(broker), what="everything acked")
    assert (await client.pop(topic)).messages == []


async def test_batch_ack(broker: Broker) -> None:
    topic, group = "T_batch_ack", "G_batch_ack"
    await send_all(broker, topic, [f"b{i}" for i in range(6)], queues=2)
    client = PopClient(broker.client, broker.addr, group)
    answer = await client.pop(topic, invisible_ms=1500, init_mode=ConsumeInitMode.MIN)
    assert len(answer.messages) == 6
    acked = [m for m in answer.messages if m.body in (b"b0", b"b1", b"b2", b"b5")]
    r = await client.batch_ack(acked)
    assert r.code == ResponseCode.SUCCESS, r.remark
    back = await pop_until(client, topic, 2, what="the two messages not acked")
    assert bodies(back) == [b"b3", b"b4"]
    await client.batch_ack(back)  # retry messages: their topic mark "1" names the retry topic
    await eventually(lambda: revive_settled(broker), what="everything acked")
    assert (await client.pop(topic)).messages == []


async def test_dead_letter_after_retry_max_times(broker: Broker) -> None:
    topic, group = "T_dlq", "G_dlq"
    await create_group(broker, group, retry_max_times=2)
    await send_all(broker, topic, ["poison"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    deliveries = await pop_until(client, topic, 3, what="three deliveries", invisible_ms=500)
    assert [m.msg.reconsume_times for m in deliveries] == [0, 1, 2]  # retryMaxTimes + 1 deliveries
    for earlier, later in itertools.pairwise(deliveries):  # each after the invisible time of the one before
        assert later.extra.pop_time >= earlier.extra.pop_time + 500

    async def dead_letter() -> list[object]:
        _response, found = await broker.pull(f"%DLQ%{group}", 0, 0, group="G_dlq_reader")
        return found

    found = await eventually(dead_letter, what="the message in the DLQ")
    assert [m.body for m in found] == [b"poison"]  # type: ignore[attr-defined]
    dead = found[0]
    assert dead.reconsume_times == 3  # type: ignore[attr-defined]
    assert dead.properties[MessageConst.PROPERTY_RETRY_TOPIC] == topic  # type: ignore[attr-defined]
    await eventually(lambda: revive_settled(broker), what="the last check point handled")
    assert (await client.pop(topic)).messages == []


# ---------------------------------------------------------------------------------------------
# peek, notification, polling info, long polling


async def test_peek_changes_nothing(broker: Broker) -> None:
    topic, group = "T_peek", "G_peek"
    await send_all(broker, topic, ["p0", "p1", "p2"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    response, found = await client.peek(topic, queue_id=0)
    assert response.code == ResponseCode.SUCCESS and [m.body for m in found] == [b"p0", b"p1", b"p2"]
    response, found = await client.peek(topic, queue_id=0, max_nums=1)
    assert [m.body for m in found] == [b"p0"]
    popped = await client.pop(topic, init_mode=ConsumeInitMode.MIN)
    assert bodies(popped.messages) == [b"p0", b"p1", b"p2"]
    response, found = await client.peek(topic, queue_id=0)
    assert response.code == ResponseCode.PULL_NOT_FOUND and found == []
    assert response.remark == "NO_MESSAGE_IN_QUEUE"


async def test_long_polling_pop_is_woken_by_an_arrival(broker: Broker) -> None:
    topic, group = "T_long_poll", "G_long_poll"
    await create_topic(broker, topic, 2)
    client = PopClient(broker.client, broker.addr, group)
    held = asyncio.create_task(client.pop(topic, poll_ms=20_000, init_mode=ConsumeInitMode.MIN))
    await eventually(lambda: client.polling_info(topic), what="the pop held")
    assert await client.polling_info(topic, queue_id=0) == 0  # held under queue id -1
    await send_all(broker, topic, ["wake"], queues=2)
    answer = await held  # a 20 s poll that times out would answer POLLING_TIMEOUT
    assert answer.code == ResponseCode.SUCCESS and [m.body for m in answer.messages] == [b"wake"]
    assert await client.polling_info(topic) == 0
    short = await client.pop(topic, poll_ms=300)
    assert short.code == ResponseCode.POLLING_TIMEOUT


async def test_notification(broker: Broker) -> None:
    topic, group = "T_notify", "G_notify"
    await create_topic(broker, topic, 2)
    client = PopClient(broker.client, broker.addr, group)
    response, header = await client.notification(topic, poll_ms=300)
    assert response.code == ResponseCode.SUCCESS and header is not None
    assert (header.has_msg, header.polling_full) == (False, False)
    held = asyncio.create_task(client.notification(topic, poll_ms=20_000))

    async def holding() -> bool:
        return (await runtime_info(broker))["popNotificationPollingNum"] == "1"

    await eventually(holding, what="the notification held")
    await send_all(broker, topic, ["n"], queues=1)
    response, header = await held
    assert header is not None and header.has_msg
    response, header = await client.notification(topic, poll_ms=20_000)  # answered at once
    assert header is not None and header.has_msg
    await client.pop(topic, init_mode=ConsumeInitMode.MIN)
    response, header = await client.notification(topic, queue_id=0)
    assert header is not None and not header.has_msg


# ---------------------------------------------------------------------------------------------
# orderly pop


async def test_orderly_pop_keeps_each_queue_in_order_across_two_consumers(broker: Broker) -> None:
    topic, group = "T_order", "G_order"
    await create_topic(broker, topic, 2)
    await send_all(broker, topic, [f"q{i % 2}-{i // 2}" for i in range(12)], queues=2)
    a = PopClient(broker.client, broker.addr, group)
    b = PopClient(broker.client, broker.addr, group)
    first = await a.pop(
        topic, queue_id=0, max_nums=3, order=True, invisible_ms=60_000, init_mode=ConsumeInitMode.MIN
    )
    assert [m.body for m in first.messages] == [b"q0-0", b"q0-1", b"q0-2"]
    assert first.header is not None and first.header.revive_qid == 999 and first.header.order_count_info
    # queue 0 is out with a: b gets nothing of it, but may take queue 1
    blocked = await b.pop(topic, queue_id=0, order=True, init_mode=ConsumeInitMode.MIN)
    assert blocked.messages == []
    other = await b.pop(topic, queue_id=1, max_nums=2, order=True, init_mode=ConsumeInitMode.MIN)
    assert [m.body for m in other.messages] == [b"q1-0", b"q1-1"]
    # b waits for queue 0; acking a's first two is not enough, the third frees it and wakes b
    waiting = asyncio.create_task(
        b.pop(topic, queue_id=0, max_nums=3, order=True, poll_ms=20_000, init_mode=ConsumeInitMode.MIN)
    )
    await eventually(lambda: b.polling_info(topic, queue_id=0), what="b held on queue 0")
    for popped in first.messages[:2]:
        assert (await a.ack(popped)).code == ResponseCode.SUCCESS
    assert await query_offset(broker, group, topic, 0) == 2
    assert not waiting.done()
    assert (await a.ack(first.messages[2])).code == ResponseCode.SUCCESS
    woken = await waiting
    assert [m.body for m in woken.messages] == [b"q0-3", b"q0-4", b"q0-5"]
    # b does not ack: once the invisible time passes a gets the same messages, counted
    for popped in other.messages:
        assert (await b.change_invisible_time(popped, 300)).code == ResponseCode.SUCCESS
    again = await pop_until(a, topic, 2, what="queue 1 handed out again", queue_id=1, max_nums=2, order=True)
    assert [m.body for m in again] == [b"q1-0", b"q1-1"]
    assert [m.consumed for m in again] == [1, 1]
    # an ack of an offset the pop did not hand out is refused (Java ackOrderly: MESSAGE_ILLEGAL)
    forged = woken.messages[0]
    not_out = ExtraInfo(forged.extra.ck_queue_offset, forged.extra.pop_time, forged.extra.invisible_time,
                        forged.extra.revive_qid, forged.extra.retry, forged.extra.broker_name, 0, 6)  # fmt: skip
    refused = await b.call(
        RequestCode.ACK_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": "0",
            "offset": "6",
            "extraInfo": not_out.encode(),
        },
    )
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL and "offset is illegal" in (refused.remark or "")
    for popped in woken.messages:
        assert (await b.ack(popped)).code == ResponseCode.SUCCESS
    assert await query_offset(broker, group, topic, 0) == 6


async def test_orderly_pop_hands_each_queue_out_from_its_first_unacked_message(broker: Broker) -> None:
    """Two consumers pop orderly in turns and ack only the first message of each answer: every
    answer of a queue starts at the first message not acked, so each queue is consumed in order
    whoever holds it."""
    topic, group = "T_order2", "G_order2"
    await create_topic(broker, topic, 2)
    await send_all(broker, topic, [f"{i}" for i in range(10)], queues=2)
    consumers = [PopClient(broker.client, broker.addr, group) for _ in range(2)]
    acked = {0: 0, 1: 0}  # queue -> messages acked (offsets 0.. in order)
    answers = 0

    async def step() -> bool:
        nonlocal answers
        who = answers % 2
        answers += 1
        answer = await consumers[who].pop(
            topic, max_nums=2, order=True, invisible_ms=300, poll_ms=200, init_mode=ConsumeInitMode.MIN
        )
        by_queue: dict[int, list[Popped]] = {}
        for m in answer.messages:
            by_queue.setdefault(m.msg.queue_id, []).append(m)
        for queue_id, messages in by_queue.items():
            offsets = [m.msg.queue_offset for m in messages]
            assert offsets == list(range(acked[queue_id], acked[queue_id] + len(offsets))), (
                queue_id,
                offsets,
            )
            assert (await consumers[who].ack(messages[0])).code == ResponseCode.SUCCESS
            acked[queue_id] += 1
        return acked == {0: 5, 1: 5}

    await eventually(step, what="both queues consumed in order")


# ---------------------------------------------------------------------------------------------
# pop and pull in one group, init modes, retry topic v2, buffer merge


async def test_pop_and_pull_in_one_group(broker: Broker) -> None:
    topic, group = "T_mixed", "G_mixed"
    await create_topic(broker, topic, 2)
    await send_all(broker, topic, [f"x{i}" for i in range(6)], queues=2)
    client = PopClient(broker.client, broker.addr, group)
    popped = await client.pop(topic, queue_id=0, init_mode=ConsumeInitMode.MIN)
    assert bodies(popped.messages) == [b"x0", b"x2", b"x4"]
    for m in popped.messages:
        await client.ack(m)
    _response, pulled = await broker.pull(topic, 1, 0, group=group, commit_offset=0)
    assert [m.body for m in pulled] == [b"x1", b"x3", b"x5"]
    await broker.pull(topic, 1, 3, group=group, commit_offset=3)

    async def both() -> bool:
        return (await query_offset(broker, group, topic, 0), await query_offset(broker, group, topic, 1)) == (
            3,
            3,
        )

    await eventually(both, what="the pop offset of queue 0 and the pull offset of queue 1")
    # a pop of queue 1 starts where the pulls committed
    assert (await client.pop(topic, queue_id=1)).messages == []


@pytest.mark.parametrize("in_memory", [True, False])
async def test_init_mode_max_starts_at_the_end(finchmq_server_factory: object, in_memory: bool) -> None:
    conf = {**TEST_BROKER, **POP_CONF, "initPopOffsetByCheckMsgInMem": "true" if in_memory else "false"}
    server = finchmq_server_factory(conf)  # type: ignore[operator]
    async with RemotingClient() as rc:
        broker = Broker(server, rc)
        await send_all(broker, "T_init", ["i0", "i1", "i2"], queues=1)
        client = PopClient(rc, broker.addr, "G_init")
        answer = await client.pop("T_init", init_mode=ConsumeInitMode.MAX)
        # Java: a new group whose queue is all in memory starts at 0; otherwise at the last message
        expected = [b"i0", b"i1", b"i2"] if in_memory else [b"i2"]
        assert bodies(answer.messages) == expected


@pytest.mark.broker_conf({**POP_CONF, "enableRetryTopicV2": "true"})
async def test_retry_topic_v2(broker: Broker) -> None:
    topic, group = "T_v2", "G_v2"
    await send_all(broker, topic, ["v"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    await client.pop(topic, invisible_ms=500)
    back = await pop_until(client, topic, 1, what="the message back from %RETRY%G+T")
    assert back[0].extra.retry == "2" and back[0].msg.topic == topic
    assert back[0].extra.real_topic(topic, group) == f"%RETRY%{group}+{topic}"
    assert (await client.ack(back[0])).code == ResponseCode.SUCCESS
    await eventually(lambda: revive_settled(broker), what="acked")


@pytest.mark.broker_conf({**POP_CONF, "enablePopBufferMerge": "true"})
async def test_buffer_merge_never_writes_a_check_point_acked_in_time(broker: Broker) -> None:
    topic, group = "T_merge", "G_merge"
    await send_all(broker, topic, ["a", "b", "c"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    answer = await client.pop(topic, invisible_ms=30_000, init_mode=ConsumeInitMode.MIN)
    for m in answer.messages:
        assert (await client.ack(m)).code == ResponseCode.SUCCESS

    async def committed() -> bool:
        return await query_offset(broker, group, topic, 0) == 3

    await eventually(committed, what="the offset committed")
    revive = [await query_offset(broker, REVIVE_GROUP, REVIVE_TOPIC, q) for q in range(8)]
    info = await runtime_info(broker)
    assert info["popBufferedCheckPointNum"] == "0"
    # nothing was written to the revive topic: its queues are empty
    _response, found = await broker.pull(REVIVE_TOPIC, answer.header.revive_qid, 0, group="G_merge_reader")  # type: ignore[union-attr]
    assert found == [], revive
    # one not acked in time is written with its acks merged, and revived
    await send_all(broker, topic, ["late"], queues=1)
    late = await client.pop(topic, invisible_ms=5000)
    assert [m.body for m in late.messages] == [b"late"]
    back = await pop_until(client, topic, 1, what="the unacked message back")
    assert [m.body for m in back] == [b"late"]


# ---------------------------------------------------------------------------------------------
# bad input: Java's answers, and nothing is lost


async def test_bad_requests_get_javas_answers(broker: Broker) -> None:
    topic, group = "T_bad", "G_bad"
    await send_all(broker, topic, ["x"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    too_many = await client.pop(topic, max_nums=33)
    assert too_many.code == ResponseCode.INVALID_PARAMETER and "greater than 32" in (
        too_many.response.remark or ""
    )
    bad_queue = await client.pop(topic, queue_id=7)
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER and "queueId[7] is illegal" in (
        bad_queue.response.remark or ""
    )
    no_topic = await client.pop("T_bad_missing")
    assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST
    late = await client.pop(topic, born_time=int(time.time() * 1000) - 60_000, poll_ms=1000)
    assert late.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in (late.response.remark or "")
    assert late.header is not None  # Java's client reads the header of a POLLING_TIMEOUT
    forever = await client.pop(topic, invisible_ms=5 * 24 * 3600 * 1000)
    assert forever.code == ResponseCode.INVALID_PARAMETER and "invisibleTime" in (
        forever.response.remark or ""
    )
    bad_sql = await client.pop(topic, exp="a >", exp_type="SQL92")
    assert bad_sql.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED

    answer = await client.pop(topic, invisible_ms=1000, init_mode=ConsumeInitMode.MIN)
    popped = answer.messages[0]
    garbage = await client.ack(popped, extra_info="not an extra info")
    assert garbage.code == ResponseCode.SYSTEM_ERROR and "extraInfo" in (garbage.remark or "")
    parts = popped.extra.encode().split()
    parts[3] = "50"
    nowhere = await client.ack(popped, extra_info=" ".join(parts))
    assert nowhere.code == ResponseCode.INVALID_PARAMETER and "reviveQid 50" in (nowhere.remark or "")
    wrong = await client.call(
        RequestCode.ACK_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": "0",
            "offset": "99",
            "extraInfo": popped.extra.encode(),
        },
    )
    assert wrong.code == ResponseCode.NO_MESSAGE and "offset is illegal" in (wrong.remark or "")
    wrong = await client.call(
        RequestCode.ACK_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": "9",
            "offset": "0",
            "extraInfo": popped.extra.encode(),
        },
    )
    assert wrong.code == ResponseCode.MESSAGE_ILLEGAL
    missing = await client.call(RequestCode.ACK_MESSAGE, {"consumerGroup": group, "topic": topic})
    assert missing.code == ResponseCode.SYSTEM_ERROR and "queueId" in (missing.remark or "")
    invisible = await client.change_invisible_time(popped, -1)
    assert invisible.code == ResponseCode.INVALID_PARAMETER and "invisibleTime" in (invisible.remark or "")
    assert invisible.ext_fields.get("popTime") == "0"  # Java's header, zeros
    batch = await client.call(RequestCode.BATCH_ACK_MESSAGE, {}, b"{not json")
    assert batch.code == ResponseCode.SYSTEM_ERROR
    assert (
        await client.call(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks":[]}')
    ).code == ResponseCode.NO_MESSAGE
    # none of that touched the message: not acked, it comes back
    back = await pop_until(client, topic, 1, what="the message back", invisible_ms=500)
    assert [m.body for m in back] == [b"x"]
    # an ack of the first delivery now (after its revive) is answered SUCCESS and changes nothing
    assert (await client.ack(popped)).code == ResponseCode.SUCCESS
    again = await pop_until(client, topic, 1, what="the retry copy back again", invisible_ms=500)
    assert [m.body for m in again] == [b"x"]
    # a receipt handle (the proxy's: extra info + commit-log offset) acks as an extra info
    handle = f"{again[0].extra.encode()} {again[0].msg.commit_log_offset}"
    assert (await client.ack(again[0], extra_info=handle)).code == ResponseCode.SUCCESS


# ---------------------------------------------------------------------------------------------
# figures


@pytest.mark.broker_conf({**POP_CONF, "metricsExporterType": "PROM", "metricsPromExporterPort": "0"})
async def test_pop_metrics_and_runtime_info(broker: Broker) -> None:
    topic, group = "T_pop_metrics", "G_pop_metrics"
    await send_all(broker, topic, ["m0", "m1"], queues=1)
    client = PopClient(broker.client, broker.addr, group)
    answer = await client.pop(topic, invisible_ms=500, init_mode=ConsumeInitMode.MIN)
    await client.ack(answer.messages[0])
    await pop_until(client, topic, 1, what="the revived message")
    controller = broker.server.broker
    assert controller is not None and controller.metrics_server is not None
    samples = await scrape(controller.metrics_server.port)
    assert value(samples, "rocketmq_pop_revive_in_message_total", consumer_group=group, topic=topic,
                 revive_message_type="CK", put_status="PUT_OK") >= 1  # fmt: skip
    assert value(samples, "rocketmq_pop_revive_in_message_total", consumer_group=group, topic=topic,
                 revive_message_type="ACK", put_status="PUT_OK") >= 1  # fmt: skip
    assert value(samples, "rocketmq_pop_revive_retry_messages_total", consumer_group=group, topic=topic,
                 put_status="PUT_OK") == 1  # fmt: skip
    for name in ("rocketmq_pop_offset_buffer_size", "rocketmq_pop_checkpoint_buffer_size",
                 "rocketmq_pop_buffer_scan_time_consume_count"):  # fmt: skip
        assert value(samples, name) >= 0
    assert value(samples, "rocketmq_pop_revive_lag", queue_id="0") >= 0
    assert value(samples, "rocketmq_processor_watermark", processor="ack") >= 0
    info = await runtime_info(broker)
    for key in ("ackThreadPoolQueueSize", "ackThreadPoolQueueCapacity", "ackThreadPoolQueueHeadWaitTimeMills",
                "popReviveBehindMessages", "popPollingNum", "popInflightMessageNum"):  # fmt: skip
        assert key in info
