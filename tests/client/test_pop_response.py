"""Reading POP_MESSAGE answers (Java 5.3.3 ``MQClientAPIImpl.processPopResponse``): each popped
message gets its receipt handle (``POP_CK``) from ``startOffsetInfo``/``msgOffsetInfo``, its
first pop time, an orderly pop's consume count, and the topic asked for; the statuses map as
Java's; a bad answer raises the client's error. Pure: responses built here, no broker."""

from __future__ import annotations

import pytest

from finchmq.client import MQBrokerError, MQClientError, PopStatus
from finchmq.client.api import MQClientAPI
from finchmq.client.consumer.pop import matches_tags, receipt_handle
from finchmq.client.errors import InvalidReceiptHandleError
from finchmq.protocol import pop
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.headers import PopMessageRequestHeader, PopMessageResponseHeader
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.stored import encode_message_ext

POP_TIME = 1700000000123
GROUP = "GID_pop"
TOPIC = "TopicA"
RETRY = pop.build_pop_retry_topic_v1(TOPIC, GROUP)


def _request(order: bool = False) -> PopMessageRequestHeader:
    return PopMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=32, invisible_time=60_000,
        poll_time=15_000, born_time=POP_TIME, init_mode=pop.ConsumeInitMode.MAX, order=order,
    )  # fmt: skip


def _stored(topic: str, queue_id: int, offset: int, body: bytes = b"x", **props: str) -> bytes:
    msg = MessageExt(
        topic, body, properties={MessageConst.PROPERTY_TAGS: "TagA", **props},
        queue_id=queue_id, queue_offset=offset, commit_log_offset=1000 + offset,
    )  # fmt: skip
    return encode_message_ext(msg)


def _response(
    code: int,
    body: bytes = b"",
    *,
    start: str | None = None,
    offsets: str | None = None,
    counts: str | None = None,
    revive_qid: int = 3,
) -> RemotingCommand:
    header = PopMessageResponseHeader(
        pop_time=POP_TIME, invisible_time=60_000, revive_qid=revive_qid, rest_num=5,
        start_offset_info=start, msg_offset_info=offsets, order_count_info=counts,
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, {})
    return request.make_response(code, "FOUND", header.to_ext_fields(), body)


def test_found_messages_carry_their_receipt_handles() -> None:
    body = _stored(TOPIC, 1, 7) + _stored(TOPIC, 1, 9) + _stored(RETRY, 0, 2)
    start = ";".join([pop.start_offset_info_item(TOPIC, 1, 7), pop.start_offset_info_item(RETRY, 0, 2)])
    offsets = ";".join([pop.msg_offset_info_item(TOPIC, 1, [7, 9]), pop.msg_offset_info_item(RETRY, 0, [2])])
    result = MQClientAPI.process_pop_response(
        "broker-a", _response(ResponseCode.SUCCESS, body, start=start, offsets=offsets), _request(), "addr"
    )
    assert (result.pop_status, result.pop_time, result.invisible_time, result.rest_num) == (
        PopStatus.FOUND, POP_TIME, 60_000, 5
    )  # fmt: skip
    handles = [m.properties[MessageConst.PROPERTY_POP_CK] for m in result.msg_found_list]
    assert handles == [
        f"7 {POP_TIME} 60000 3 0 broker-a 1 7",
        f"7 {POP_TIME} 60000 3 0 broker-a 1 9",  # one check point: the start offset of the first
        f"2 {POP_TIME} 60000 3 1 broker-a 0 2",  # mark 1: from the v1 pop retry topic
    ]
    # every message shows the topic asked for; the handle says where it really was
    assert [m.topic for m in result.msg_found_list] == [TOPIC] * 3
    retry = result.msg_found_list[2]
    _, extra = receipt_handle(retry)
    assert extra.real_topic(retry.topic, GROUP) == RETRY
    assert {m.properties[MessageConst.PROPERTY_FIRST_POP_TIME] for m in result.msg_found_list} == {
        str(POP_TIME)
    }


def test_an_old_broker_without_offset_info_gets_a_handle_per_queue() -> None:
    body = _stored(TOPIC, 2, 4) + _stored(TOPIC, 2, 5)
    result = MQClientAPI.process_pop_response("b", _response(ResponseCode.SUCCESS, body), _request(), "a")
    assert [m.properties[MessageConst.PROPERTY_POP_CK] for m in result.msg_found_list] == [
        f"4 {POP_TIME} 60000 3 0 b 2 4",
        f"4 {POP_TIME} 60000 3 0 b 2 5",
    ]


def test_an_orderly_pop_reports_consume_counts_as_reconsume_times() -> None:
    body = _stored(TOPIC, 0, 10) + _stored(TOPIC, 0, 11) + _stored(TOPIC, 0, 12)
    counts = ";".join(
        [
            pop.queue_offset_order_count_item(TOPIC, 0, 11, 3),  # this message's own count
            pop.order_count_item(TOPIC, 0, 2),  # the queue's, for the others
        ]
    )
    response = _response(
        ResponseCode.SUCCESS,
        body,
        start=pop.start_offset_info_item(TOPIC, 0, 10),
        offsets=pop.msg_offset_info_item(TOPIC, 0, [10, 11, 12]),
        counts=counts,
        revive_qid=pop.POP_ORDER_REVIVE_QUEUE,
    )
    result = MQClientAPI.process_pop_response("b", response, _request(order=True), "a")
    assert [m.reconsume_times for m in result.msg_found_list] == [2, 3, 2]
    assert pop.ExtraInfo.parse(result.msg_found_list[0].properties[MessageConst.PROPERTY_POP_CK]).is_order
    # the counts are only read for an orderly pop
    plain = MQClientAPI.process_pop_response("b", response, _request(order=False), "a")
    assert [m.reconsume_times for m in plain.msg_found_list] == [0, 0, 0]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.POLLING_FULL, PopStatus.POLLING_FULL),
        (ResponseCode.POLLING_TIMEOUT, PopStatus.POLLING_NOT_FOUND),
        (ResponseCode.PULL_NOT_FOUND, PopStatus.POLLING_NOT_FOUND),
    ],
)
def test_statuses_as_java_maps_them(code: int, status: PopStatus) -> None:
    result = MQClientAPI.process_pop_response("b", _response(code), _request(), "a")
    assert (result.pop_status, result.msg_found_list, result.rest_num) == (status, [], 5)
    # an answer without the header (an older or other broker) still has its status
    bare = RemotingCommand.request(RequestCode.POP_MESSAGE, {}).make_response(code, "x")
    assert MQClientAPI.process_pop_response("b", bare, _request(), "a").pop_status is status


def test_other_answers_raise_the_brokers_error() -> None:
    refused = RemotingCommand.request(RequestCode.POP_MESSAGE, {}).make_response(
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group [g] does not exist"
    )
    with pytest.raises(MQBrokerError) as caught:
        MQClientAPI.process_pop_response("b", refused, _request(), "addr")
    assert caught.value.response_code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "does not exist" in str(caught.value) and "addr" in str(caught.value)


def test_offset_info_that_does_not_cover_a_message_is_a_bad_answer() -> None:
    body = _stored(TOPIC, 1, 7)
    response = _response(
        ResponseCode.SUCCESS,
        body,
        start=pop.start_offset_info_item(TOPIC, 2, 7),  # another queue
        offsets=pop.msg_offset_info_item(TOPIC, 2, [7]),
    )
    with pytest.raises(MQClientError, match="no check point"):
        MQClientAPI.process_pop_response("b", response, _request(), "a")
    garbled = _response(ResponseCode.SUCCESS, body, start="0 1", offsets="0 1 7")
    with pytest.raises(MQClientError, match="startOffsetInfo"):
        MQClientAPI.process_pop_response("b", garbled, _request(), "a")


def test_receipt_handles_are_checked_before_use() -> None:
    plain = MessageExt(TOPIC, b"x")
    with pytest.raises(InvalidReceiptHandleError, match="no receipt handle"):
        receipt_handle(plain)
    garbled = MessageExt(TOPIC, b"x", properties={MessageConst.PROPERTY_POP_CK: "1 2 x"})
    with pytest.raises(InvalidReceiptHandleError, match="bad receipt handle") as caught:
        receipt_handle(garbled)
    assert caught.value.receipt_handle == "1 2 x"
    short = MessageExt(TOPIC, b"x", properties={MessageConst.PROPERTY_POP_CK: "1 2 3 4 0 b"})
    with pytest.raises(InvalidReceiptHandleError, match="no queue id"):
        receipt_handle(short)


def test_tags_are_filtered_again_as_the_broker_filters_by_hash() -> None:
    sub = build_subscription_data(TOPIC, "TagA || TagB")
    tagged = MessageExt(TOPIC, b"", properties={MessageConst.PROPERTY_TAGS: "TagB"})
    other = MessageExt(TOPIC, b"", properties={MessageConst.PROPERTY_TAGS: "TagC"})
    untagged = MessageExt(TOPIC, b"")
    assert [matches_tags(sub, m) for m in (tagged, other, untagged)] == [True, False, False]
    everything = build_subscription_data(TOPIC, "*")
    assert all(matches_tags(everything, m) for m in (tagged, other, untagged))
