"""QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE's bodies, ``messageRequestMode.json`` and a popped
queue's running info: Java 5.3.3's bytes (``data/java/pop/``, recorded by ``record_java_pop.py``
from 5.3.3's own classes), round trips, and fuzz: a body from a peer decodes or raises
``BodyError``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol.bodies import (
    BodyError,
    ConsumerRunningInfo,
    MessageModel,
    MessageQueueAssignment,
    MessageRequestMode,
    MessageRequestModeSerializeWrapper,
    PopProcessQueueInfo,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    RemotingSerializable,
    SetMessageRequestModeRequestBody,
)
from finchmq.protocol.codes import RequestCode
from finchmq.protocol.message import MessageQueue

GOLDEN = Path(__file__).parent / "data" / "java" / "pop"


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def test_request_codes_have_java_numbers() -> None:
    assert RequestCode.QUERY_ASSIGNMENT == 400
    assert RequestCode.SET_MESSAGE_REQUEST_MODE == 401
    assert RequestCode.GET_ALL_MESSAGE_REQUEST_MODE == 402


def test_query_assignment_request_is_javas() -> None:
    body = QueryAssignmentRequestBody(
        topic="TopicA",
        consumer_group="GID_pop",
        client_id="10.0.0.1@1234",
        strategy_name="AVG",
        message_model=MessageModel.CLUSTERING,
    )
    assert body.to_json() == golden("query_assignment_request.json")
    assert QueryAssignmentRequestBody.from_json(golden("query_assignment_request.json")) == body


def test_query_assignment_response_is_javas() -> None:
    body = QueryAssignmentResponseBody(
        message_queue_assignments=(
            MessageQueueAssignment(
                message_queue=MessageQueue("TopicA", "broker-a", -1), mode=MessageRequestMode.POP
            ),
        )
    )
    assert body.to_json() == golden("query_assignment_response.json")
    assert QueryAssignmentResponseBody.from_json(golden("query_assignment_response.json")) == body
    # null: the broker could not tell (the client keeps its queues)
    assert QueryAssignmentResponseBody().to_json() == golden("query_assignment_response_null.json")
    assert QueryAssignmentResponseBody.from_json(b"{}").message_queue_assignments is None


def test_set_message_request_mode_is_javas() -> None:
    body = SetMessageRequestModeRequestBody(
        topic="TopicA", consumer_group="GID_pop", mode=MessageRequestMode.POP, pop_share_queue_num=2
    )
    assert body.to_json() == golden("set_message_request_mode.json")
    assert SetMessageRequestModeRequestBody.from_json(golden("set_message_request_mode.json")) == body
    # the mode travels by name; an ordinal reads too (fastjson reads both)
    assert SetMessageRequestModeRequestBody.from_json(b'{"mode":1}').mode is MessageRequestMode.POP


def test_message_request_mode_json_is_the_managers() -> None:
    table = {
        topic: {
            group: SetMessageRequestModeRequestBody(
                topic=topic,
                consumer_group=group,
                mode=MessageRequestMode.PULL if group == "GID_pull" else MessageRequestMode.POP,
            )
            for group in ("GID_pop", "GID_pull", "billing")
        }
        for topic in ("TopicA", "TopicB", "orders")
    }
    wrapper = MessageRequestModeSerializeWrapper(message_request_mode_map=table)
    assert wrapper.to_json() == golden("message_request_mode.json")  # ConcurrentHashMap key order
    assert MessageRequestModeSerializeWrapper.from_json(golden("message_request_mode.json")) == wrapper


def test_pop_process_queue_info_is_javas() -> None:
    info = PopProcessQueueInfo(wait_ack_count=7, droped=False, last_pop_timestamp=1700000000123)
    assert info.to_json() == golden("pop_process_queue_info.json")
    assert str(info) == golden("pop_process_queue_info.txt").decode()


def test_running_info_writes_the_pop_table_only_when_popping() -> None:
    """4.9.8's running info has no mqPopTable: a consumer that pops nothing writes 4.9.8's bytes."""
    plain = ConsumerRunningInfo()
    assert b"mqPopTable" not in plain.to_json()
    popping = ConsumerRunningInfo(
        mq_pop_table={
            MessageQueue("T", "b", 1): PopProcessQueueInfo(wait_ack_count=2),
            MessageQueue("T", "a", -1): PopProcessQueueInfo(last_pop_timestamp=5),
        }
    )
    text = popping.to_json()
    assert text.index(b'"brokerName":"a"') < text.index(b'"brokerName":"b"')  # a TreeMap
    assert ConsumerRunningInfo.from_json(text) == popping


BODIES: list[type[RemotingSerializable]] = [
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
    MessageRequestModeSerializeWrapper,
    PopProcessQueueInfo,
]


@pytest.mark.parametrize("cls", BODIES, ids=lambda c: c.__name__)
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_bodies_decode_or_raise_body_error(cls: type[RemotingSerializable], data: bytes) -> None:
    with contextlib.suppress(BodyError):
        cls.from_json(data)
