"""Send and pull over the wire: validation with RocketMQ's codes and remarks, auto-creation,
tag filtering, offsets, long polling."""

from __future__ import annotations

import asyncio
import time

import pytest

from finchmq.broker.long_polling import PullRequestHoldService
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import TopicRouteData
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.protocol.stored import decode_stored, decode_stored_all
from finchmq.remoting import RemotingClient, RemotingConnectError
from tests.waiting import eventually

from .conftest import Broker


async def test_send_then_pull_returns_the_stored_message(broker: Broker) -> None:
    sent = await broker.send(
        "T_basic", b"hello", tags="TagA", keys="k1 k2", queue_id=1, props={"color": "red"}
    )
    assert sent.code == ResponseCode.SUCCESS
    assert sent.ext_fields["queueId"] == "1" and sent.ext_fields["queueOffset"] == "0"
    assert sent.ext_fields["MSG_REGION"] == "DefaultRegion" and sent.ext_fields["TRACE_ON"] == "true"
    host, port, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
    assert (host, port) == ("127.0.0.1", int(broker.addr.split(":")[1]))
    response, messages = await broker.pull("T_basic", 1, 0)
    assert response.code == ResponseCode.SUCCESS and response.remark == "FOUND"
    assert response.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "1",
        "minOffset": "0",
        "maxOffset": "1",
    }
    [m] = messages
    assert (m.topic, m.body, m.tags, m.keys, m.properties["color"]) == (
        "T_basic",
        b"hello",
        "TagA",
        "k1 k2",
        "red",
    )
    assert m.commit_log_offset == offset and m.queue_offset == 0 and m.store_host.port == port


async def test_auto_create_through_tbw102_registers_the_route_at_once(broker: Broker) -> None:
    assert (await broker.send("T_auto", b"x")).code == ResponseCode.SUCCESS
    route = await broker.call(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T_auto"}, addr=broker.server.namesrv_addr
    )
    assert route.code == ResponseCode.SUCCESS
    queues = TopicRouteData.from_json(route.body).queue_datas
    assert [(q.read_queue_nums, q.write_queue_nums, q.perm) for q in queues] == [(4, 4, 6)]  # min(4, 8), RW


@pytest.mark.broker_conf({"autoCreateTopicEnable": "false"})
async def test_unknown_topic_without_auto_create_is_topic_not_exist(broker: Broker) -> None:
    response = await broker.send("T_never", b"x")
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark is not None and response.remark.startswith(
        "topic[T_never] not exist, apply first please!"
    )


@pytest.mark.parametrize(
    ("topic", "queue_id", "code", "remark"),
    [
        ("bad topic!", -1, ResponseCode.SYSTEM_ERROR, "The specified topic contains illegal characters"),
        ("x" * 128, -1, ResponseCode.SYSTEM_ERROR, "longer than topic max length 127"),
        (
            "SCHEDULE_TOPIC_XXXX",
            -1,
            ResponseCode.NO_PERMISSION,
            "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.",
        ),
        ("T_queue", 99, ResponseCode.SYSTEM_ERROR, "request queueId[99] is illegal"),
    ],
)
async def test_send_validation(broker: Broker, topic: str, queue_id: int, code: int, remark: str) -> None:
    response = await broker.send(topic, b"x", queue_id=queue_id)
    assert response.code == code
    assert response.remark is not None and remark in response.remark


@pytest.mark.broker_conf({"maxMessageSize": "1024"})
async def test_oversized_body_is_message_illegal_and_not_stored(broker: Broker) -> None:
    response = await broker.send("T_big", b"x" * 2000, queue_id=0)
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert response.remark is not None and "msg body length limit 1024B" in response.remark
    assert (await broker.send("T_big", b"small", queue_id=0)).code == ResponseCode.SUCCESS
    _, messages = await broker.pull("T_big", 0, 0)
    assert [m.body for m in messages] == [b"small"]


async def test_tag_filter_and_pull_status_mapping(broker: Broker) -> None:
    for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA"]):
        await broker.send("T_tags", f"m{i}".encode(), tags=tag, queue_id=0)
    response, messages = await broker.pull("T_tags", 0, 0, expression="TagA || TagC")
    assert [m.body for m in messages] == [b"m0", b"m2", b"m3"]
    assert response.ext_fields["nextBeginOffset"] == "4"
    response, messages = await broker.pull("T_tags", 0, 0, expression="TagZ")
    assert response.code == ResponseCode.PULL_RETRY_IMMEDIATELY and not messages  # scanned, none matched
    assert response.ext_fields["nextBeginOffset"] == "4"
    response, _ = await broker.pull("T_tags", 0, 4)
    assert response.code == ResponseCode.PULL_NOT_FOUND and response.ext_fields["nextBeginOffset"] == "4"
    response, _ = await broker.pull("T_tags", 0, 9)
    # Java's getMessage: past the end with minOffset 0, the next pull starts over at 0.
    assert response.code == ResponseCode.PULL_OFFSET_MOVED and response.ext_fields["nextBeginOffset"] == "0"
    response, _ = await broker.pull("T_tags", 2, 0)  # empty queue, offset 0
    assert response.code == ResponseCode.PULL_NOT_FOUND
    response, _ = await broker.pull("T_tags", 2, 3)  # empty queue, offset != 0
    assert response.code == ResponseCode.PULL_OFFSET_MOVED
    response, _ = await broker.pull("T_tags", 7, 0)
    assert response.code == ResponseCode.SYSTEM_ERROR and "queueId[7] is illegal" in (response.remark or "")
    response, _ = await broker.pull("T_nope", 0, 0)
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


def only_arrivals_wake_held_pulls(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> PullRequestHoldService:
    """The broker's hold service without its periodic check (every 5 s, which also answers a held
    pull whose queue grew, and the pulls whose time is up): a held pull is then answered only
    when the store reports an arrival, so a test sees that path without timing it."""
    assert broker.server.broker is not None
    hold = broker.server.broker.pull_hold_service
    monkeypatch.setattr(hold, "check_hold_requests", lambda: None)
    return hold


async def test_long_poll_is_woken_by_the_arrival_itself(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = only_arrivals_wake_held_pulls(broker, monkeypatch)
    await broker.send("T_lp", b"first", queue_id=0)
    waiting = asyncio.ensure_future(broker.pull("T_lp", 0, 1, suspend_ms=15_000))
    await eventually(lambda: hold.held_count == 1, what="the pull held")
    assert not waiting.done(), "nothing new: the broker holds the pull"
    await broker.send("T_lp", b"second", queue_id=0)
    response, messages = await waiting  # nothing else would answer it within the client's 30 s
    assert response.code == ResponseCode.SUCCESS and [m.body for m in messages] == [b"second"]
    assert hold.wakeups == {"arrival": 1, "timeout": 0}


async def test_held_pull_ignores_messages_its_filter_rejects(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = only_arrivals_wake_held_pulls(broker, monkeypatch)
    await broker.send("T_lpf", b"zero", queue_id=0, tags="TagA")
    waiting = asyncio.ensure_future(broker.pull("T_lpf", 0, 1, expression="TagB", suspend_ms=15_000))
    # A second pull held on the queue, for the tag that comes next: its answer shows that the
    # arrival has been looked at.
    witness = asyncio.ensure_future(broker.pull("T_lpf", 0, 1, expression="TagA", suspend_ms=15_000))
    await eventually(lambda: hold.held_count == 2, what="both pulls held")
    await broker.send("T_lpf", b"not-for-me", queue_id=0, tags="TagA")
    _, seen = await witness
    assert [m.body for m in seen] == [b"not-for-me"]
    await eventually(lambda: hold.held_count < 2, what="the arrival looked at")
    assert hold.held_count == 1 and not waiting.done(), (
        "a message the subscription filters out does not wake the pull"
    )
    await broker.send("T_lpf", b"for-me", queue_id=0, tags="TagB")
    _, messages = await waiting
    assert [m.body for m in messages] == [b"for-me"]


@pytest.mark.broker_conf({"longPollingEnable": "false", "shortPollingTimeMills": "300"})
async def test_short_polling_answers_not_found_after_short_polling_time(broker: Broker) -> None:
    await broker.send("T_sp", b"x", queue_id=1)  # create the topic
    began = time.monotonic()
    # a long poll would hold it for the hour it asks for, past the client's 30 s: it would fail
    response, _ = await broker.pull("T_sp", 0, 0, suspend_ms=3_600_000)
    elapsed = time.monotonic() - began
    assert response is not None and response.code == ResponseCode.PULL_NOT_FOUND
    assert elapsed > 0.25, f"held {elapsed:.2f}s, not about shortPollingTimeMills (0.3 s)"


async def test_held_pulls_of_a_closed_connection_are_dropped(broker: Broker) -> None:
    await broker.send("T_drop", b"x", queue_id=1)
    other = RemotingClient()
    held = Broker(broker.server, other)
    task = asyncio.ensure_future(held.pull("T_drop", 0, 0, suspend_ms=15_000))
    controller = broker.server.broker
    assert controller is not None
    await eventually(lambda: controller.pull_hold_service.held_count == 1, what="the pull held")
    await other.close()
    with pytest.raises(RemotingConnectError):
        await task
    await eventually(lambda: controller.pull_hold_service.held_count == 0, what="the held pull dropped")


async def test_offsets_queries_and_the_new_group_rule(broker: Broker) -> None:
    before = int(time.time() * 1000)
    for i in range(5):
        await broker.send("T_off", f"m{i}".encode(), queue_id=0)
        await asyncio.sleep(0.01)
    q = {"consumerGroup": "g_new", "topic": "T_off", "queueId": "0"}
    response = await broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (response.code, response.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"}), (
        "new group starts at 0"
    )
    await broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "3"})
    assert (await broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q)).ext_fields == {"offset": "3"}
    # The commit bit on a pull stores the offset too.
    await broker.pull("T_off", 0, 3, group="g_new", commit_offset=4)
    assert (await broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q)).ext_fields == {"offset": "4"}
    tq = {"topic": "T_off", "queueId": "0"}
    assert (await broker.call(RequestCode.GET_MAX_OFFSET, tq)).ext_fields == {"offset": "5"}
    assert (await broker.call(RequestCode.GET_MIN_OFFSET, tq)).ext_fields == {"offset": "0"}
    assert (
        await broker.call(RequestCode.GET_MAX_OFFSET, {"topic": "T_none", "queueId": "3"})
    ).ext_fields == {"offset": "0"}
    earliest = int((await broker.call(RequestCode.GET_EARLIEST_MSG_STORETIME, tq)).ext_fields["timestamp"])
    assert before <= earliest <= int(time.time() * 1000)
    search = await broker.call(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**tq, "timestamp": str(before - 1000)}
    )
    assert search.ext_fields == {"offset": "0"}
    search = await broker.call(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**tq, "timestamp": str(int(time.time() * 1000) + 60_000)}
    )
    assert search.ext_fields == {"offset": "4"}  # Java: the nearest entry, the last message


async def test_view_by_id_and_query_by_key(broker: Broker) -> None:
    sent = await broker.send("T_q", b"find-me", keys="order-42 other", queue_id=0)
    msg_id = sent.ext_fields["msgId"]
    _, _, offset = decode_offset_msg_id(msg_id)
    response = await broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    assert response.code == ResponseCode.SUCCESS and decode_stored(response.body).body == b"find-me"
    query = {
        "topic": "T_q",
        "key": "order-42",
        "maxNum": "10",
        "beginTimestamp": "0",
        "endTimestamp": str(2**62),
    }
    response = await broker.call(RequestCode.QUERY_MESSAGE, query)
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_stored_all(response.body)] == [b"find-me"]
    response = await broker.call(RequestCode.QUERY_MESSAGE, {**query, "key": "absent"})
    assert response.code == ResponseCode.QUERY_NOT_FOUND
    response = await broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "999999"})
    assert response.code == ResponseCode.SYSTEM_ERROR


async def test_unknown_request_code_is_not_supported(broker: Broker) -> None:
    response = await broker.client.invoke(broker.addr, RemotingCommand.request(9999), 3000)
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
