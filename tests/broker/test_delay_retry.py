"""Delay levels, consumer send-back, retry topics and dead letters (spec §4.10)."""

from __future__ import annotations

import time

import pytest

from finchmq.protocol import RequestCode, ResponseCode
from finchmq.protocol.bodies import SubscriptionGroupConfig, TopicConfigSerializeWrapper
from finchmq.protocol.message import MessageExt
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.protocol.stored import decode_stored_all
from tests.waiting import eventually

from .conftest import Broker

LEVELS = {"messageDelayLevel": "1s 2s 1s 1s 1s 1s"}


async def messages(broker: Broker, topic: str, queue_id: int, count: int) -> list[MessageExt]:
    """The queue's messages, once it holds at least ``count`` (waiting for them)."""

    async def enough() -> list[MessageExt] | None:
        _, found = await broker.pull(topic, queue_id, 0, group="inspector")
        return found if len(found) >= count else None

    return await eventually(enough, what=f"{count} message(s) in {topic}:{queue_id}")


@pytest.mark.broker_conf(LEVELS)
async def test_delayed_message_arrives_when_due_not_before(broker: Broker) -> None:
    sent_at = time.monotonic()
    sent = await broker.send(
        "T_delay", b"later", queue_id=2, tags="TagD", props={"DELAY": "2", "color": "blue"}
    )
    assert sent.code == ResponseCode.SUCCESS
    _, scheduled = await broker.pull("SCHEDULE_TOPIC_XXXX", 1, 0, group="inspector")
    assert [m.properties["REAL_TOPIC"] for m in scheduled] == ["T_delay"], "level 2 waits in queue 1"
    [m] = await messages(broker, "T_delay", 2, 1)
    # Not before it is due (lower bounds only: a slow machine can only deliver it later). By the
    # broker's clock: stored again 2 s or more after it was stored in the schedule topic; by ours:
    # the first pull that found it came 2 s or more after the send.
    assert m.store_timestamp - scheduled[0].store_timestamp >= 2000
    arrived = time.monotonic() - sent_at
    assert arrived >= 1.9, f"level 2 (2 s) arrived after {arrived:.2f} s"
    assert (m.body, m.tags, m.properties["color"]) == (b"later", "TagD", "blue")
    assert (
        "DELAY" not in m.properties
        and m.properties["REAL_TOPIC"] == "T_delay"
        and m.properties["REAL_QID"] == "2"
    )


@pytest.mark.broker_conf(LEVELS)
async def test_delay_level_above_the_highest_is_clamped(broker: Broker) -> None:
    await broker.send("T_clamp", b"x", queue_id=0, props={"DELAY": "99"})
    _, scheduled = await broker.pull("SCHEDULE_TOPIC_XXXX", 5, 0, group="inspector")
    assert len(scheduled) == 1 and scheduled[0].properties["DELAY"] == "6"


@pytest.mark.broker_conf(LEVELS)
async def test_send_back_retries_then_dead_letters(broker: Broker) -> None:
    group = SubscriptionGroupConfig(group_name="G_back", retry_max_times=2)
    await broker.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json())
    sent = await broker.send("T_back", b"fragile", queue_id=0, tags="TagF", keys="kf", props={"color": "red"})
    _, _, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
    retries: list[MessageExt] = []
    for attempt in range(1, 3):
        back = await broker.call(
            RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(offset), "group": "G_back", "delayLevel": "0"}
        )
        assert back.code == ResponseCode.SUCCESS
        retries = await messages(broker, "%RETRY%G_back", 0, attempt)
        assert len(retries) == attempt
        offset = retries[-1].commit_log_offset  # the consumer gives back the retry copy next time
    first, second = retries
    assert (first.reconsume_times, second.reconsume_times) == (1, 2)
    for m in retries:
        assert (m.body, m.tags, m.keys, m.properties["color"]) == (b"fragile", "TagF", "kf", "red")
        assert (
            m.properties["RETRY_TOPIC"] == "T_back"
            and m.properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
        )
        assert "DELAY" not in m.properties
    # reconsumeTimes (2) reached retryMaxTimes (2): the next give-back is a dead letter.
    back = await broker.call(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(offset), "group": "G_back", "delayLevel": "0"}
    )
    assert back.code == ResponseCode.SUCCESS
    configs = TopicConfigSerializeWrapper.from_json(
        (await broker.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body
    )
    assert configs.topic_config_table["%DLQ%G_back"].perm == 6, "the DLQ is created readable (4.9.8: RW)"
    assert broker.server.broker is not None
    store = broker.server.broker.store
    with store.get_message("inspector", "%DLQ%G_back", 0, 0, 32) as result:
        [dead] = decode_stored_all(result.body())
    assert (dead.body, dead.reconsume_times, dead.properties["RETRY_TOPIC"]) == (b"fragile", 3, "T_back")


async def test_send_back_of_an_unknown_offset_is_an_error(broker: Broker) -> None:
    await broker.send("T_x", b"x", queue_id=0)
    back = await broker.call(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "123456789", "group": "G", "delayLevel": "0"}
    )
    assert (
        back.code == ResponseCode.SYSTEM_ERROR and back.remark == "look message by offset failed, 123456789"
    )


async def test_retry_topic_send_past_max_goes_to_the_dlq(broker: Broker) -> None:
    await broker.heartbeat("c@h", "G_dlq", {"T_r": "*"})
    response = await broker.send("%RETRY%G_dlq", b"give-up", queue_id=0, reconsume_times=16)
    assert response.code == ResponseCode.SUCCESS
    assert broker.server.broker is not None
    assert broker.server.broker.store.get_max_offset_in_queue("%DLQ%G_dlq", 0) == 1
    assert broker.server.broker.store.get_max_offset_in_queue("%RETRY%G_dlq", 0) == 0


async def test_send_back_to_a_read_only_retry_topic_is_no_permission(broker: Broker) -> None:
    sent = await broker.send("T_ro", b"x", queue_id=0)
    _, _, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
    create = {
        "topic": "%RETRY%G_ro", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "4",
        "topicFilterType": "SINGLE_TAG", "order": "false",
    }  # fmt: skip
    assert (await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)).code == ResponseCode.SUCCESS
    back = await broker.call(
        RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(offset), "group": "G_ro", "delayLevel": "0"}
    )
    assert back.code == ResponseCode.NO_PERMISSION
    assert back.remark == "the topic[%RETRY%G_ro] sending message is forbidden"
