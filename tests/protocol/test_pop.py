"""``protocol/pop.py`` and POP's headers and bodies: Java 5.3.3's bytes (``data/java/pop/``,
recorded by ``record_java_pop.py`` from 5.3.3's own classes), round trips, and fuzz: whatever a
client sends, a decoder answers with a value or the protocol's error, nothing else."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol import pop
from finchmq.protocol.bodies import BatchAck, BatchAckMessageRequestBody, BodyError, JavaBitSet
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.errors import HeaderError, RemoteProtocolError
from finchmq.protocol.headers import (
    REQUEST_HEADERS,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    CommandHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from finchmq.protocol.message_const import RESERVED_PROPERTY_NAMES, MessageConst
from finchmq.protocol.pop import (
    AckMsg,
    BatchAckMsg,
    ConsumerOrderInfoWrapper,
    ExtraInfo,
    ExtraInfoError,
    OrderInfo,
    PopCheckPoint,
    ReceiptHandle,
    TopicMark,
)

GOLDEN = Path(__file__).parent / "data" / "java" / "pop"
POP_TIME = 1700000000123


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


# ---------------------------------------------------------------------------------------------
# Codes, names and constants


def test_request_codes_have_java_numbers() -> None:
    assert (
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.PEEK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        RequestCode.NOTIFICATION,
        RequestCode.POLLING_INFO,
        RequestCode.BATCH_ACK_MESSAGE,
    ) == (200050, 200051, 200052, 200053, 200054, 200055, 200151)


def test_response_codes_of_5x_are_aliases_of_the_4x_numbers() -> None:
    assert (ResponseCode.POLLING_FULL, ResponseCode.POLLING_TIMEOUT, ResponseCode.INVALID_PARAMETER) == (
        209,
        210,
        29,
    )
    assert ResponseCode.NO_MESSAGE == 208


def test_message_properties_and_reserved_names() -> None:
    assert (
        MessageConst.PROPERTY_POP_CK,
        MessageConst.PROPERTY_POP_CK_OFFSET,
        MessageConst.PROPERTY_FIRST_POP_TIME,
    ) == ("POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME")
    assert {"POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME"} <= RESERVED_PROPERTY_NAMES


def test_topic_names_are_javas() -> None:
    lines = golden("strings.txt").decode().splitlines()
    assert pop.build_pop_retry_topic_v1("TopicA", "GID_pop") == lines[6] == "%RETRY%GID_pop_TopicA"
    assert pop.build_pop_retry_topic_v2("TopicA", "GID_pop") == lines[7] == "%RETRY%GID_pop+TopicA"
    assert pop.build_pop_retry_topic("TopicA", "GID_pop") == "%RETRY%GID_pop_TopicA"
    assert pop.build_pop_retry_topic("TopicA", "GID_pop", enable_retry_v2=True) == "%RETRY%GID_pop+TopicA"
    assert pop.build_polling_key("TopicA", "GID_pop", 3) == lines[8]
    assert pop.build_cluster_revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
    assert pop.is_revive_topic("rmq_sys_REVIVE_LOG_x") and not pop.is_revive_topic("TopicA")
    assert pop.REVIVE_GROUP == "CID_RMQ_SYS_REVIVE_GROUP"
    assert (pop.CK_TAG, pop.ACK_TAG, pop.BATCH_ACK_TAG) == ("ck", "ack", "bAck")


@pytest.mark.parametrize(
    ("topic", "group", "normal", "mark"),
    [
        ("TopicA", "G", "TopicA", TopicMark.NORMAL),
        ("%RETRY%G_TopicA", "G", "TopicA", TopicMark.RETRY_V1),
        ("%RETRY%G+TopicA", "G", "TopicA", TopicMark.RETRY_V2),
        ("%RETRY%G_a_b", "G", "a_b", TopicMark.RETRY_V1),
    ],
)
def test_retry_topics_parse_back(topic: str, group: str, normal: str, mark: TopicMark) -> None:
    assert pop.parse_normal_topic(topic, group) == normal
    assert pop.topic_mark(topic) is mark
    assert pop.real_topic(normal, group, mark) == topic


def test_key_builder_without_group_splits_only_v2_names() -> None:
    assert pop.parse_normal_topic("%RETRY%G+TopicA") == "TopicA"
    assert pop.parse_group("%RETRY%G+TopicA") == "G"
    assert pop.parse_normal_topic("%RETRY%G_TopicA") == "%RETRY%G_TopicA"
    assert pop.parse_group("%RETRY%G_TopicA") == "G_TopicA"  # Java cannot split a v1 name either


# ---------------------------------------------------------------------------------------------
# Extra info, offset infos, receipt handles: Java's strings


def test_extra_info_strings_are_javas() -> None:
    lines = golden("strings.txt").decode().splitlines()
    assert ExtraInfo.build(100, POP_TIME, 60000, 5, "TopicA", "broker-a", 3).encode() == lines[0]
    retry = ExtraInfo.build(100, POP_TIME, 60000, 5, "%RETRY%GID_pop_TopicA", "broker-a", 0, 104)
    assert retry.encode() == lines[1]
    assert ExtraInfo.build(7, 1, 2, 999, "%RETRY%GID_pop+TopicA", "b", 0, 8).encode() == lines[2]
    assert ExtraInfo.parse(lines[1]) == retry
    assert retry.real_topic("TopicA", "GID_pop") == "%RETRY%GID_pop_TopicA"
    assert retry.revive_time == POP_TIME + 60000
    assert ExtraInfo.parse(lines[2]).is_order and not retry.is_order


def test_offset_infos_are_javas() -> None:
    lines = golden("strings.txt").decode().splitlines()
    start = ";".join(
        [
            pop.start_offset_info_item("TopicA", 3, 100),
            pop.start_offset_info_item("%RETRY%GID_pop_TopicA", 0, 7),
        ]
    )
    assert start == lines[3]
    assert pop.parse_start_offset_info(start) == {"0@3": 100, "1@0": 7}
    msgs = ";".join(
        [
            pop.msg_offset_info_item("TopicA", 3, [100, 101, 105]),
            pop.msg_offset_info_item("%RETRY%GID_pop+TopicA", 0, [7]),
        ]
    )
    assert msgs == lines[4]
    assert pop.parse_msg_offset_info(msgs) == {"0@3": [100, 101, 105], "2@0": [7]}
    counts = ";".join(
        [pop.queue_offset_order_count_item("TopicA", 3, 10, 2), pop.order_count_item("TopicA", 3, 0)]
    )
    assert counts == lines[5]
    assert pop.parse_order_count_info(counts) == {"0@qo3%10": 2, "0@3": 0}
    assert pop.start_offset_map_key("TopicA", 3) == "0@3"
    assert pop.queue_offset_map_key("TopicA", 3, 10) == "0@qo3%10"
    for parse in (pop.parse_start_offset_info, pop.parse_msg_offset_info, pop.parse_order_count_info):
        assert parse(None) is None
        assert parse("") is None


def test_receipt_handle_is_javas() -> None:
    text = golden("strings.txt").decode().splitlines()[9]
    handle = ReceiptHandle.decode(text)
    assert handle == ReceiptHandle(
        start_offset=100,
        retrieve_time=POP_TIME,
        invisible_time=60000,
        revive_queue_id=5,
        topic_type=TopicMark.RETRY_V1,
        broker_name="broker-a",
        queue_id=0,
        offset=104,
        commit_log_offset=123456,
    )
    assert handle.encode() == text
    assert handle.is_retry_topic
    assert handle.real_topic("TopicA", "GID_pop") == "%RETRY%GID_pop_TopicA"
    assert handle.next_visible_time == POP_TIME + 60000
    assert handle.is_expired(POP_TIME + 60000) and not handle.is_expired(POP_TIME + 59999)
    # a receipt handle is an extra info with a ninth part: the broker acks with it as is
    info = ExtraInfo.parse(text)
    assert (info.ck_queue_offset, info.queue_id, info.queue_offset) == (100, 0, 104)
    assert ReceiptHandle.decode(" ".join(text.split()[:8])).commit_log_offset == -1


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("1 2 3 4 0", "5 parts"),
        ("x 2 3 4 0 b 1", "ckQueueOffset"),
        ("1 2 3 99999999999 0 b 1", "reviveQid"),
        ("1 2 3 4 0 b 1 ٣", "queueOffset"),  # Python's int() takes Arabic digits, Java does not
        ("1 2 3 4 0 b 1_0", "queueId"),
        ("1  2 3 4 0 b", "popTime"),  # Java split keeps the empty part between two separators
        ("9223372036854775808 2 3 4 0 b", "out of range"),
    ],
)
def test_bad_extra_info(text: str, match: str) -> None:
    with pytest.raises(ExtraInfoError, match=match) as raised:
        ExtraInfo.parse(text)
    assert raised.value.response_code == ResponseCode.SYSTEM_ERROR
    assert isinstance(raised.value, RemoteProtocolError)


def test_six_parts_are_enough_for_an_ack_as_in_java() -> None:
    info = ExtraInfo.parse("1 2 3 4 0 b  ")
    assert (info.broker_name, info.queue_id, info.queue_offset) == ("b", None, None)
    assert info.encode() == "1 2 3 4 0 b"


@pytest.mark.parametrize(
    "text",
    ["0 3", "0 3 100;0 3 101", "0 3 1,,2", "a b c d", "0 3 x"],
)
def test_bad_offset_infos(text: str) -> None:
    for parse in (pop.parse_start_offset_info, pop.parse_msg_offset_info, pop.parse_order_count_info):
        with pytest.raises(ExtraInfoError):
            parse(text)


def test_unknown_retry_mark() -> None:
    with pytest.raises(ExtraInfoError, match="retry mark"):
        pop.real_topic("T", "G", "7")
    assert ExtraInfo.parse("1 2 3 4 7 b").real_topic("T", "G") == "T"  # Java: any other mark is T


# ---------------------------------------------------------------------------------------------
# The revive topic's JSON and consumerOrderInfo.json: fastjson's bytes


def ck(**changes: Any) -> PopCheckPoint:
    base = PopCheckPoint(
        start_offset=100,
        pop_time=POP_TIME,
        invisible_time=60000,
        num=3,
        queue_id=3,
        topic="TopicA",
        cid="GID_pop",
        queue_offset_diff=(0, 1, 5),
        broker_name="broker-a",
    )
    return dataclasses.replace(base, **changes)


CHECK_POINTS = {
    "ck_popped.json": ck(),
    "ck_reput.json": ck(
        start_offset=105,
        num=1,
        bit_map=1,
        topic="%RETRY%GID_pop_TopicA",
        queue_offset_diff=(0,),
        revive_offset=42,
        re_put_times="3",
    ),
    "ck_old.json": ck(start_offset=7, num=2, queue_offset_diff=None, broker_name=None),
    "ck_unicode.json": ck(start_offset=0, num=1, topic="Tópic-ü", cid="组", queue_offset_diff=None),
}


@pytest.mark.parametrize("name", sorted(CHECK_POINTS))
def test_check_points_are_javas_bytes(name: str) -> None:
    value = CHECK_POINTS[name]
    assert value.to_json() == golden(name)
    assert PopCheckPoint.from_json(golden(name)) == value


def test_acks_are_javas_bytes() -> None:
    ack = AckMsg(
        ack_offset=101,
        start_offset=100,
        consumer_group="GID_pop",
        topic="TopicA",
        queue_id=3,
        pop_time=POP_TIME,
        broker_name="broker-a",
    )
    assert ack.to_json() == golden("ack.json")
    assert AckMsg.from_json(golden("ack.json")) == ack
    batch = BatchAckMsg(
        ack_offset_list=(100, 105),
        start_offset=100,
        consumer_group="GID_pop",
        topic="TopicA",
        queue_id=3,
        pop_time=POP_TIME,
    )
    assert batch.to_json() == golden("batch_ack_msg.json")
    assert BatchAckMsg.from_json(golden("batch_ack_msg.json")) == batch
    processor = dataclasses.replace(batch, ack_offset=-1, broker_name="broker-a")
    assert processor.to_json() == golden("batch_ack_msg_processor.json")
    assert processor.offsets() == (100, 105) and ack.offsets() == (101,)


def test_long_names_are_read_too() -> None:
    """fastjson's ``alternateNames``: an ack written with the field names parses the same."""
    long_form = {
        "ackOffset": 1,
        "startOffset": 0,
        "consumerGroup": "G",
        "topic": "T",
        "queueId": 2,
        "popTime": 5,
        "brokerName": "b",
    }
    assert AckMsg.from_json(json.dumps(long_form)) == AckMsg(
        ack_offset=1, start_offset=0, consumer_group="G", topic="T", queue_id=2, pop_time=5, broker_name="b"
    )
    assert BatchAckMsg.from_json(json.dumps({"ackOffsetList": [3, 4], "topic": "T"})).offsets() == (3, 4)


def test_unique_ids_are_javas() -> None:
    assert pop.ck_unique_id(ck()) == f"TopicA@3@100@GID_pop@{POP_TIME}@broker-a@ck"
    ack = AckMsg(ack_offset=101, start_offset=100, consumer_group="G", topic="T", queue_id=3, pop_time=7)
    assert pop.ack_unique_id(ack) == "T@3@101@G@7@null@ack"
    batch = BatchAckMsg(ack_offset_list=(1, 2), consumer_group="G", topic="T", queue_id=3, pop_time=7)
    assert pop.batch_ack_unique_id(batch) == "T@3@[1, 2]@G@7@bAck"


def test_check_point_bookkeeping() -> None:
    point = ck(bit_map=0b101)
    assert point.revive_time == POP_TIME + 60000
    assert [point.index_of_ack(o) for o in (99, 100, 101, 102, 105, 106)] == [-1, 0, 1, -1, 2, -1]
    assert point.queue_offsets() == [100, 101, 105]
    assert [point.is_acked(i) for i in range(3)] == [True, False, True]
    old = ck(queue_offset_diff=None, num=2)
    assert [old.index_of_ack(o) for o in (100, 101, 102)] == [0, 1, -1]
    assert old.queue_offsets() == [100, 101]
    assert ck().parse_re_put_times() == 0
    assert ck(re_put_times="4").parse_re_put_times() == 4
    assert ck(re_put_times="x").parse_re_put_times() == 127


def test_consumer_order_info_is_javas_bytes() -> None:
    wrapper = ConsumerOrderInfoWrapper(
        table={
            "TopicA@GID_order": {
                3: OrderInfo(
                    attempt_id="attempt-1",
                    pop_time=POP_TIME,
                    invisible_time=60000,
                    offset_list=(10, 1, 4),
                    last_consume_timestamp=1700000000456,
                    commit_offset_bit=2,
                    offset_next_visible_time={14: 1700000099000},
                    offset_consumed_count={10: 2, 14: 1},
                ),
                0: OrderInfo(
                    pop_time=1700000000000,
                    invisible_time=30000,
                    offset_list=(5,),
                    last_consume_timestamp=1700000000001,
                ),
            },
            "TopicB@GID_order": {
                17: OrderInfo(
                    attempt_id="a",
                    pop_time=1,
                    invisible_time=2,
                    offset_list=(0, 1),
                    last_consume_timestamp=3,
                    commit_offset_bit=1,
                )
            },
        }
    )
    assert wrapper.to_json() == golden("consumer_order_info.json")
    assert ConsumerOrderInfoWrapper.from_json(golden("consumer_order_info.json")) == wrapper


def test_batch_ack_body_is_javas_bytes() -> None:
    first = BatchAck(
        consumer_group="GID_pop",
        topic="TopicA",
        retry="0",
        start_offset=100,
        queue_id=3,
        revive_queue_id=5,
        pop_time=POP_TIME,
        invisible_time=60000,
        bit_set=JavaBitSet({0, 5, 9, 64}),
    )
    second = BatchAck(
        consumer_group="GID_pop",
        topic="TopicA",
        retry="1",
        start_offset=0,
        queue_id=0,
        revive_queue_id=999,
        pop_time=1700000000999,
        invisible_time=30000,
        bit_set=JavaBitSet(),
    )
    body = BatchAckMessageRequestBody(broker_name="broker-a", acks=(first, second))
    assert body.to_json() == golden("batch_ack_body.json")
    assert BatchAckMessageRequestBody.from_json(golden("batch_ack_body.json")) == body


@given(st.frozensets(st.integers(0, 2000), max_size=40))
def test_bitset_bytes_round_trip(bits: frozenset[int]) -> None:
    value = JavaBitSet(bits)
    data = value.to_byte_array()
    assert not data or data[-1] != 0  # Java trims trailing zero bytes
    assert JavaBitSet.from_byte_array(data) == value


def test_bitset_reads_a_number_array_and_refuses_the_rest() -> None:
    body = BatchAck.from_json(b'{"b":[33,2,-128]}')
    assert body.bit_set == JavaBitSet({0, 5, 9, 23})
    for bad in (b'{"b":"***"}', b'{"b":[300]}', b'{"b":{}}', b'{"b":[true]}'):
        with pytest.raises(BodyError, match="BitSet"):
            BatchAck.from_json(bad)
    with pytest.raises(BodyError, match="longer"):
        BatchAck.from_json(json.dumps({"b": "A" * (JavaBitSet.MAX_BYTES * 2)}))
    with pytest.raises(ValueError, match="ints >= 0"):
        JavaBitSet({-1})


# ---------------------------------------------------------------------------------------------
# Headers


def test_pop_request_header_round_trip_and_java_defaults() -> None:
    header = PopMessageRequestHeader(
        consumer_group="G",
        topic="T",
        queue_id=-1,
        max_msg_nums=32,
        invisible_time=60000,
        poll_time=15000,
        born_time=POP_TIME,
        init_mode=pop.ConsumeInitMode.MAX,
        exp_type="TAG",
        exp="a || b",
        broker_name="broker-a",
    )
    fields = header.to_ext_fields()
    assert fields["bname"] == "broker-a"
    assert fields["order"] == "false"  # Java Boolean.FALSE is written
    assert "attemptId" not in fields
    assert PopMessageRequestHeader.from_ext_fields(fields) == header
    with pytest.raises(HeaderError, match="invisibleTime"):
        PopMessageRequestHeader.from_ext_fields({**fields, "invisibleTime": "soon"})
    missing = dict(fields)
    del missing["initMode"]
    with pytest.raises(HeaderError, match="initMode"):
        PopMessageRequestHeader.from_ext_fields(missing)


def test_response_headers_write_java_primitives() -> None:
    assert NotificationResponseHeader().to_ext_fields() == {"hasMsg": "false", "pollingFull": "false"}
    assert PollingInfoResponseHeader(polling_num=3).to_ext_fields() == {"pollingNum": "3"}
    assert ChangeInvisibleTimeResponseHeader(pop_time=1, invisible_time=2, revive_qid=3).to_ext_fields() == {
        "popTime": "1",
        "invisibleTime": "2",
        "reviveQid": "3",
    }
    header = PopMessageResponseHeader(pop_time=1, invisible_time=2, revive_qid=3, rest_num=4)
    assert header.to_ext_fields() == {"popTime": "1", "invisibleTime": "2", "reviveQid": "3", "restNum": "4"}


HEADERS: list[type[CommandHeader]] = [
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PeekMessageRequestHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
]


def test_pop_request_headers_are_registered() -> None:
    for code, cls in [
        (RequestCode.POP_MESSAGE, PopMessageRequestHeader),
        (RequestCode.ACK_MESSAGE, AckMessageRequestHeader),
        (RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ChangeInvisibleTimeRequestHeader),
        (RequestCode.PEEK_MESSAGE, PeekMessageRequestHeader),
        (RequestCode.NOTIFICATION, NotificationRequestHeader),
        (RequestCode.POLLING_INFO, PollingInfoRequestHeader),
    ]:
        assert REQUEST_HEADERS[code] is cls


# ---------------------------------------------------------------------------------------------
# Fuzz: every decoder answers a value or the protocol's error


WORDS = st.sampled_from(["0", "1", "2", "-1", "999", "9" * 20, "+5", "b", "", "x", "1,2", "qo1%2", "٣"])
TEXTS = (
    st.text(max_size=40)
    | st.lists(WORDS, max_size=10).map(" ".join)
    | st.lists(st.lists(WORDS, max_size=4).map(" ".join), max_size=3).map(";".join)
)


@given(TEXTS)
def test_string_decoders_raise_only_extra_info_error(text: str) -> None:
    for decode in (
        ExtraInfo.parse,
        ReceiptHandle.decode,
        pop.parse_start_offset_info,
        pop.parse_msg_offset_info,
        pop.parse_order_count_info,
    ):
        try:
            value = decode(text)
        except ExtraInfoError:
            continue
        if isinstance(value, ExtraInfo):
            assert ExtraInfo.parse(value.encode()) == value
        elif isinstance(value, ReceiptHandle):
            assert ReceiptHandle.decode(value.encode()) == value


JSON_TREES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)
KEYS = ["so", "pt", "it", "bm", "n", "q", "t", "c", "ro", "d", "bn", "rp", "ao", "aol", "b", "r", "rq"]
KEYS += ["acks", "brokerName", "table", "o", "oc", "ot", "i", "a", "cm", "l", "popTime"]
JSON_DECODERS: list[Any] = [
    PopCheckPoint,
    AckMsg,
    BatchAckMsg,
    OrderInfo,
    ConsumerOrderInfoWrapper,
    BatchAck,
    BatchAckMessageRequestBody,
]


@given(
    st.binary(max_size=64)
    | JSON_TREES.map(lambda tree: json.dumps(tree).encode())
    | st.dictionaries(st.sampled_from(KEYS), JSON_TREES, max_size=5).map(lambda d: json.dumps(d).encode())
)
def test_json_decoders_raise_only_body_error(data: bytes) -> None:
    for cls in JSON_DECODERS:
        with contextlib.suppress(BodyError):
            cls.from_json(data)


@given(
    st.dictionaries(st.sampled_from(["queueId", "offset", "invisibleTime", "pollTime"]), st.text(max_size=6))
)
def test_header_decoders_raise_only_header_error(fields: dict[str, str]) -> None:
    base = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "0",
        "maxMsgNums": "1",
        "invisibleTime": "1",
        "pollTime": "0",
        "bornTime": "0",
        "initMode": "0",
        "extraInfo": "x",
        "offset": "0",
    }
    for cls in HEADERS:
        with contextlib.suppress(HeaderError):
            cls.from_ext_fields({**base, **fields})
