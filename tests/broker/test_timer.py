"""5.x timer messages through a real broker: TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS,
5.x's refusals, the recall handle and RECALL_MESSAGE, rolls, the timer's runtime info, admin
codes and metrics. Delivery is asserted "not before" its time only (a lower bound)."""

from __future__ import annotations

import struct
import time

import pytest

from finchmq.protocol import RequestCode, ResponseCode
from finchmq.protocol._json import loads
from finchmq.protocol.bodies import KVTable
from finchmq.protocol.headers import EndTransactionRequestHeader
from finchmq.protocol.message import MessageExt
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.protocol.recall import RecallMessageHandle
from tests.waiting import eventually

from .conftest import Broker

FAST = {"timerPrecisionMs": "100"}
RECALL = {**FAST, "recallMessageEnable": "true"}
ILLEGAL_REMARK = (
    "timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set del msg, "
    "the delay time should be bigger than the current time"
)


def now_ms() -> int:
    return int(time.time() * 1000)


async def delivered(broker: Broker, topic: str, count: int, queue_id: int = 0) -> list[MessageExt]:
    """The queue's messages once it holds at least ``count``."""

    async def enough() -> list[MessageExt] | None:
        _, found = await broker.pull(topic, queue_id, 0, group="inspector")
        return found if len(found) >= count else None

    return await eventually(enough, what=f"{count} message(s) delivered to {topic}:{queue_id}")


async def runtime_info(broker: Broker) -> dict[str, str]:
    reply = await broker.call(RequestCode.GET_BROKER_RUNTIME_INFO)
    return KVTable.from_json(reply.body).table


@pytest.mark.broker_conf(FAST)
async def test_timer_message_waits_for_its_time(broker: Broker) -> None:
    deliver = now_ms() + 1500
    sent = await broker.send(
        "T_timer", b"later", queue_id=2, tags="TagT", props={"TIMER_DELIVER_MS": str(deliver)}
    )
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    assert sent.ext_fields["queueId"] == "2", "answered with its own queue, as Java 5.x"
    assert sent.ext_fields["recallHandle"]
    _, waiting = await broker.pull("rmq_sys_wheel_timer", 0, 0, group="inspector")
    assert [(m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) for m in waiting] == [("T_timer", "2")]
    assert int(waiting[0].properties["TIMER_OUT_MS"]) == deliver // 100 * 100 - (
        100 if deliver % 100 == 0 else 0
    )
    [m] = await delivered(broker, "T_timer", 1, queue_id=2)
    assert m.store_timestamp >= deliver, "not before its time"
    assert (m.body, m.tags) == (b"later", "TagT")
    props = m.properties
    assert props["TIMER_DELIVER_MS"] == str(deliver)
    assert {"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "UNIQ_KEY"} <= set(props)
    assert int(props["TIMER_DEQUEUE_MS"]) >= deliver
    # as Java 5.x's: the stored properties keep the real topic and queue
    assert (props["REAL_TOPIC"], props["REAL_QID"]) == ("T_timer", "2")


@pytest.mark.broker_conf(FAST)
@pytest.mark.parametrize(
    ("name", "value", "delay_ms"), [("TIMER_DELAY_SEC", "1", 1000), ("TIMER_DELAY_MS", "1200", 1200)]
)
async def test_relative_delays_count_from_the_broker_s_clock(
    broker: Broker, name: str, value: str, delay_ms: int
) -> None:
    before = now_ms()
    sent = await broker.send(f"T_{name}", b"x", queue_id=0, props={name: value})
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    [m] = await delivered(broker, f"T_{name}", 1)
    assert m.store_timestamp >= before + delay_ms
    assert m.properties[name] == value


@pytest.mark.broker_conf({**FAST, "timerMaxDelaySec": "60"})
@pytest.mark.parametrize(
    "props",
    [
        {"TIMER_DELAY_SEC": "61"},
        {"TIMER_DELIVER_MS": "later"},
        {"TIMER_DELAY_MS": "1.5"},
        {"TIMER_DELIVER_MS": str(2**63)},
    ],
)
async def test_too_late_or_unreadable_times_are_refused_as_5x_does(
    broker: Broker, props: dict[str, str]
) -> None:
    sent = await broker.send("T_refused", b"x", props=props)
    assert sent.code == ResponseCode.MESSAGE_ILLEGAL
    assert sent.remark == ILLEGAL_REMARK.format(60_000)


@pytest.mark.broker_conf({"timerWheelEnable": "false"})
async def test_without_the_wheel_timer_messages_are_refused(broker: Broker) -> None:
    sent = await broker.send("T_off", b"x", props={"TIMER_DELAY_SEC": "5"})
    assert sent.code == ResponseCode.SYSTEM_ERROR
    assert sent.remark == "accurate timer message is not enabled, timerWheelEnable is false"
    info = await runtime_info(broker)
    assert [info[k] for k in ("timerReadBehind", "timerOffsetBehind", "timerCongestNum")] == ["0", "0", "0"]
    assert (info["timerEnqueueTps"], info["timerDequeueTps"]) == ("0.0", "0.0")


@pytest.mark.broker_conf({**FAST, "messageDelayLevel": "1s 1s"})
async def test_a_delay_level_wins_and_clears_the_timer(broker: Broker) -> None:
    sent = await broker.send("T_both", b"x", queue_id=0, props={"DELAY": "1", "TIMER_DELAY_SEC": "3600"})
    assert sent.code == ResponseCode.SUCCESS
    assert "recallHandle" not in sent.ext_fields
    _, scheduled = await broker.pull("SCHEDULE_TOPIC_XXXX", 0, 0, group="inspector")
    assert len(scheduled) == 1 and "TIMER_DELAY_SEC" not in scheduled[0].properties
    [m] = await delivered(broker, "T_both", 1)
    assert "TIMER_OUT_MS" not in m.properties


@pytest.mark.broker_conf(FAST)
async def test_a_time_already_past_is_delivered_at_once(broker: Broker) -> None:
    sent = await broker.send("T_past", b"x", queue_id=1, props={"TIMER_DELIVER_MS": str(now_ms() - 10_000)})
    assert sent.code == ResponseCode.SUCCESS and "recallHandle" not in sent.ext_fields
    _, found = await broker.pull("T_past", 1, 0, group="inspector")
    assert len(found) == 1 and "TIMER_OUT_MS" not in found[0].properties


@pytest.mark.broker_conf({**FAST, "timerRollWindowSlot": "4"})
async def test_a_time_past_the_roll_window_rolls_through_the_wheel(broker: Broker) -> None:
    deliver = now_ms() + 2000  # the window is 4 slots of 100 ms: several rolls
    sent = await broker.send("T_roll", b"far", queue_id=0, props={"TIMER_DELIVER_MS": str(deliver)})
    assert sent.code == ResponseCode.SUCCESS
    [m] = await delivered(broker, "T_roll", 1)
    assert m.store_timestamp >= deliver
    assert int(m.properties["TIMER_ROLL_TIMES"]) >= 1


@pytest.mark.broker_conf(FAST)
async def test_timers_are_delivered_in_time_order(broker: Broker) -> None:
    base = now_ms() + 1000
    order = [3, 0, 4, 1, 2]
    for i in order:
        sent = await broker.send(
            "T_order", f"m{i}".encode(), queue_id=0, props={"TIMER_DELIVER_MS": str(base + i * 300)}
        )
        assert sent.code == ResponseCode.SUCCESS
    found = await delivered(broker, "T_order", 5)
    assert [m.body for m in found] == [f"m{i}".encode() for i in range(5)]
    for m in found:
        assert m.store_timestamp >= int(m.properties["TIMER_DELIVER_MS"])


# -- recall ---------------------------------------------------------------------------------------


async def recall(broker: Broker, topic: str, handle: str) -> tuple[int, str | None, dict[str, str]]:
    reply = await broker.call(
        RequestCode.RECALL_MESSAGE, {"producerGroup": "test_pg", "topic": topic, "recallHandle": handle}
    )
    return reply.code, reply.remark, reply.ext_fields


@pytest.mark.broker_conf(RECALL)
async def test_a_recalled_message_is_not_delivered(broker: Broker) -> None:
    deliver = now_ms() + 2000
    sent = await broker.send("T_recall", b"recalled", queue_id=0, props={"TIMER_DELIVER_MS": str(deliver)})
    handle = sent.ext_fields["recallHandle"]
    decoded = RecallMessageHandle.decode(handle)
    assert decoded.topic == "T_recall" and decoded.broker_name == broker.server.broker.config.broker_name
    kept = await broker.send("T_recall", b"kept", queue_id=0, props={"TIMER_DELIVER_MS": str(deliver)})
    later = await broker.send(
        "T_recall", b"later", queue_id=0, props={"TIMER_DELIVER_MS": str(deliver + 300)}
    )
    assert kept.code == later.code == ResponseCode.SUCCESS
    code, remark, ext = await recall(broker, "T_recall", handle)
    assert (code, remark) == (ResponseCode.SUCCESS, None)
    assert ext["msgId"] == decoded.message_id
    found = await delivered(broker, "T_recall", 2)  # "later" comes after the recalled one's slot
    assert [m.body for m in found] == [b"kept", b"later"]
    assert all(m.store_timestamp >= deliver for m in found)


@pytest.mark.broker_conf(RECALL)
async def test_recall_answers_as_5x(broker: Broker) -> None:
    sent = await broker.send("T_answers", b"x", props={"TIMER_DELAY_SEC": "30"})
    handle = RecallMessageHandle.decode(sent.ext_fields["recallHandle"])
    assert (await recall(broker, "T_answers", "not base64!"))[:2] == (
        ResponseCode.ILLEGAL_OPERATION,
        "recall handle is invalid",
    )
    other_topic = await broker.send("T_answers2", b"x", props={"TIMER_DELAY_SEC": "30"})
    assert (await recall(broker, "T_answers", other_topic.ext_fields["recallHandle"]))[:2] == (
        ResponseCode.ILLEGAL_OPERATION,
        "recall failed, topic not match",
    )
    elsewhere = RecallMessageHandle(
        topic="T_answers", broker_name="another-broker", timestamp_str=handle.timestamp_str, message_id="X"
    )
    assert (await recall(broker, "T_answers", elsewhere.encode()))[:2] == (
        ResponseCode.ILLEGAL_OPERATION,
        "recall failed, broker service not available",
    )
    expired = RecallMessageHandle(
        topic="T_answers", broker_name=handle.broker_name, timestamp_str=str(now_ms() - 1), message_id="X"
    )
    assert (await recall(broker, "T_answers", expired.encode()))[:2] == (
        ResponseCode.ILLEGAL_OPERATION,
        "recall failed, timestamp invalid",
    )
    assert (await recall(broker, "T_nowhere", handle.encode()))[:2] == (
        ResponseCode.TOPIC_NOT_EXIST,
        "recall failed, the topic[T_nowhere] not exist",
    )
    # a handle of no pending message: stored all the same, answered SUCCESS (5.x)
    unknown = RecallMessageHandle(
        topic="T_answers",
        broker_name=handle.broker_name,
        timestamp_str=handle.timestamp_str,
        message_id="NOPE",
    )
    code, _, ext = await recall(broker, "T_answers", unknown.encode())
    assert (code, ext["msgId"]) == (ResponseCode.SUCCESS, "NOPE")


@pytest.mark.broker_conf(FAST)
async def test_recall_is_off_by_default(broker: Broker) -> None:
    sent = await broker.send("T_off_recall", b"x", props={"TIMER_DELAY_SEC": "30"})
    code, remark, _ = await recall(broker, "T_off_recall", sent.ext_fields["recallHandle"])
    assert (code, remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")


# -- what the broker reports ----------------------------------------------------------------------


@pytest.mark.broker_conf(FAST)
async def test_runtime_info_admin_codes_and_metrics_show_the_backlog(broker: Broker) -> None:
    for i in range(3):
        await broker.send("T_backlog", b"x%d" % i, props={"TIMER_DELAY_SEC": "600"})
    info = await eventually(lambda: _congested(broker, 3), what="three timers in the wheel (timerCongestNum)")
    assert int(info["timerOffsetBehind"]) >= 0 and int(info["timerReadBehind"]) >= 0
    float(info["timerEnqueueTps"])
    float(info["timerDequeueTps"])
    reply = await broker.call(RequestCode.GET_TIMER_CHECK_POINT)
    assert reply.code == ResponseCode.SUCCESS and len(reply.body) == 56
    read_time, _, queue_offset, master_offset = struct.unpack(">qqqq", reply.body[:32])
    assert read_time > 0 and queue_offset == master_offset
    metrics = await broker.call(RequestCode.GET_TIMER_METRICS)
    counts = loads(metrics.body)["timingCount"]
    assert counts["T_backlog"]["count"] == 3


async def _congested(broker: Broker, count: int) -> dict[str, str] | None:
    info = await runtime_info(broker)
    return info if int(info["timerCongestNum"]) >= count else None


@pytest.mark.broker_conf({**FAST, "recallMessageEnable": "true"})
async def test_a_committed_transaction_message_waits_for_its_time(broker: Broker) -> None:
    deliver = now_ms() + 1200
    half = await broker.send(
        "T_tx_timer",
        b"tx",
        queue_id=0,
        props={"TRAN_MSG": "true", "PGROUP": "test_pg", "TIMER_DELIVER_MS": str(deliver)},
    )
    assert half.code == ResponseCode.SUCCESS
    end = EndTransactionRequestHeader(
        producer_group="test_pg",
        tran_state_table_offset=int(half.ext_fields["queueOffset"]),
        commit_log_offset=decode_offset_msg_id(half.ext_fields["msgId"]).commit_log_offset,
        commit_or_rollback=8,
        msg_id=half.ext_fields["msgId"],
    )
    reply = await broker.call(RequestCode.END_TRANSACTION, end.to_ext_fields())
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    [m] = await delivered(broker, "T_tx_timer", 1)
    assert m.store_timestamp >= deliver
