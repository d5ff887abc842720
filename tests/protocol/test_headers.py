"""headers: typed custom headers <-> extFields, as Java's RemotingCommand converts them."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol import headers
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.errors import HeaderError, LocalProtocolError
from finchmq.protocol.headers import (
    REQUEST_HEADERS,
    CommandHeader,
    CreateTopicRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetMaxOffsetRequestHeader,
    HeaderField,
    Long,
    PullMessageRequestHeader,
    PullSysFlag,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    command_header,
    wire,
)

ALL_HEADERS = sorted(
    {
        obj
        for obj in vars(headers).values()
        if inspect.isclass(obj) and issubclass(obj, CommandHeader) and obj is not CommandHeader
    },
    key=lambda cls: cls.__name__,
)
TEXT = st.text(st.characters(codec="utf-8"), max_size=20)
_KIND_STRATEGIES = {
    "str": TEXT,
    "int": st.integers(-(2**31), 2**31 - 1),
    "Long": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
}


def header_strategy(cls: type[CommandHeader]) -> st.SearchStrategy[CommandHeader]:
    kwargs = {}
    for f in cls.header_fields():
        strategy = _KIND_STRATEGIES[f.kind]
        if f.default is None:
            strategy = st.none() | strategy
        kwargs[f.name] = strategy
    return st.builds(cls, **kwargs)


# Captured from the C++ client 1.2.4 (spec 3.2.1 / 7.1): V1 names, "0"/"1" booleans, signature keys.
CPP_SEND_EXT_FIELDS = {
    "AccessKey": "",
    "OnsChannel": "ALIYUN",
    "Signature": "",
    "batch": "1",
    "bornTimestamp": "1700000000123",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "flag": "0",
    "producerGroup": "PG",
    "properties": "WAIT\x01true\x02",
    "queueId": "2",
    "sysFlag": "0",
    "topic": "TopicTest",
    "unitMode": "0",
}


def test_cpp_send_header_decodes_with_batch_one_as_true() -> None:
    header = SendMessageRequestHeader.from_ext_fields(CPP_SEND_EXT_FIELDS)
    assert header == SendMessageRequestHeader(
        producer_group="PG",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=2,
        sys_flag=0,
        born_timestamp=1700000000123,
        flag=0,
        properties="WAIT\x01true\x02",
        batch=True,
        unit_mode=False,
    )


def test_v2_encodes_like_java_writing_primitive_booleans_and_skipping_nulls() -> None:
    header = SendMessageRequestHeaderV2(
        producer_group="PG",
        topic="T",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        sys_flag=0,
        born_timestamp=1700000000000,
        flag=0,
        properties="TAGS\x01A",
        max_reconsume_times=16,
    )
    assert header.to_ext_fields() == {
        "a": "PG",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "1",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "TAGS\x01A",
        "k": "false",
        "l": "16",
        "m": "false",
    }


def test_v1_v2_conversion_keeps_every_field() -> None:
    v1 = SendMessageRequestHeader.from_ext_fields({**CPP_SEND_EXT_FIELDS, "brokerName": "broker-a"})
    v2 = SendMessageRequestHeaderV2.from_v1(v1)
    assert v2.to_ext_fields()["n"] == "broker-a"
    assert v2.to_ext_fields()["m"] == "true"
    assert v2.to_v1() == v1
    assert SendMessageRequestHeaderV2.from_ext_fields(v2.to_ext_fields()).to_v1() == v1


@given(st.data())
def test_v1_v2_round_trip(data: st.DataObject) -> None:
    v2 = data.draw(header_strategy(SendMessageRequestHeaderV2))
    assert isinstance(v2, SendMessageRequestHeaderV2)
    assert SendMessageRequestHeaderV2.from_v1(v2.to_v1()) == v2
    assert {f.name for f in SendMessageRequestHeader.header_fields()} == {
        f.name for f in SendMessageRequestHeaderV2.header_fields()
    }


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_every_header_round_trips(cls: type[CommandHeader], data: st.DataObject) -> None:
    header = data.draw(header_strategy(cls))
    ext_fields = header.to_ext_fields()
    assert all(type(v) is str for v in ext_fields.values())
    assert cls.from_ext_fields(ext_fields) == header
    # Unknown keys (the C++ client's signature fields) change nothing.
    assert cls.from_ext_fields({**ext_fields, "AccessKey": "k", "Signature": "s"}) == header


@pytest.mark.parametrize(
    ("code", "cls"), sorted(REQUEST_HEADERS.items()), ids=lambda v: getattr(v, "name", "")
)
def test_every_not_null_key_of_every_request_header_is_required(
    code: RequestCode, cls: type[CommandHeader]
) -> None:
    assert isinstance(code, RequestCode)
    required = [f for f in cls.header_fields() if f.not_null]
    assert required, f"{cls.__name__} has no @CFNotNull field"
    complete = {f.key: {"str": "x", "bool": "true"}.get(f.kind, "1") for f in cls.header_fields()}
    cls.from_ext_fields(complete)
    for f in required:
        fields = dict(complete)
        del fields[f.key]
        with pytest.raises(HeaderError) as info:
            cls.from_ext_fields(fields)
        message = str(info.value)
        assert cls.__name__ in message
        assert repr(f.key) in message
        assert "missing" in message


def test_optional_fields_may_be_absent() -> None:
    header = UnregisterClientRequestHeader.from_ext_fields({"clientID": "1-127.0.0.1@DEFAULT"})
    assert header.producer_group is None
    assert header.consumer_group is None
    assert header.to_ext_fields() == {"clientID": "1-127.0.0.1@DEFAULT"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        ("false", False),
        ("0", False),
        ("yes", False),
        ("", False),
    ],
)
def test_booleans_parse_like_java_plus_cpp_one(value: str, expected: bool) -> None:
    assert QueryDataVersionResponseHeader.from_ext_fields({"changed": value}).changed is expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("queueId", "abc"),
        ("queueId", ""),
        ("queueId", "1.5"),
        ("queueId", str(2**31)),
        ("queueId", str(-(2**31) - 1)),
    ],
)
def test_bad_int_names_key_and_value(key: str, value: str) -> None:
    with pytest.raises(HeaderError) as info:
        GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", key: value})
    assert repr(key) in str(info.value)
    assert repr(value) in str(info.value)
    assert "GetMaxOffsetRequestHeader" in str(info.value)


def test_long_fields_take_64_bits_and_reject_more() -> None:
    fields = {
        "consumerGroup": "CG",
        "topic": "T",
        "queueId": "0",
        "queueOffset": str(2**62),
        "maxMsgNums": "32",
        "sysFlag": "6",
        "commitOffset": "-1",
        "suspendTimeoutMillis": "15000",
        "subVersion": "1700000000000",
    }
    assert PullMessageRequestHeader.from_ext_fields(fields).queue_offset == 2**62
    with pytest.raises(HeaderError, match="queueOffset"):
        PullMessageRequestHeader.from_ext_fields({**fields, "queueOffset": str(2**63)})


def test_header_error_is_a_local_protocol_error_answered_with_system_error() -> None:
    with pytest.raises(LocalProtocolError) as info:
        PullMessageRequestHeader.from_ext_fields({})
    assert isinstance(info.value, HeaderError)
    assert info.value.response_code is ResponseCode.SYSTEM_ERROR


def test_wire_keys_follow_java_names() -> None:
    def keys(cls: type[CommandHeader]) -> set[str]:
        return {f.key for f in cls.header_fields()}

    assert keys(UnregisterClientRequestHeader) == {"clientID", "producerGroup", "consumerGroup"}
    assert keys(ResetOffsetRequestHeader) == {"topic", "group", "timestamp", "isForce"}
    assert "clientId" in keys(GetConsumerRunningInfoRequestHeader)
    assert keys(RegisterBrokerRequestHeader) == {
        "brokerName",
        "brokerAddr",
        "clusterName",
        "haServerAddr",
        "brokerId",
        "compressed",
        "bodyCrc32",
    }
    assert [f.key for f in SendMessageRequestHeaderV2.header_fields()] == list("abcdefghijklmn")
    assert "indexLastUpdatePhyoffset" in keys(headers.QueryMessageResponseHeader)


def test_not_null_fields_with_java_defaults() -> None:
    # @CFNotNull boolean isForce: optional for the constructor, required on the wire.
    header = ResetOffsetRequestHeader(topic="T", group="G", timestamp=5)
    assert header.to_ext_fields()["isForce"] == "false"
    with pytest.raises(HeaderError, match="isForce"):
        ResetOffsetRequestHeader.from_ext_fields({"topic": "T", "group": "G", "timestamp": "5"})
    create = CreateTopicRequestHeader(
        topic="T", default_topic="TBW102", read_queue_nums=4, write_queue_nums=4, perm=6
    )
    assert create.to_ext_fields()["topicFilterType"] == "SINGLE_TAG"
    assert create.to_ext_fields()["order"] == "false"
    assert "topicSysFlag" not in create.to_ext_fields()


def test_send_response_carries_java_extra_keys() -> None:
    response = SendMessageResponseHeader(
        msg_id="7F00000100002A9F00000000000000A8",
        queue_id=1,
        queue_offset=0,
        msg_region="DefaultRegion",
        trace_on=True,
    )
    assert response.to_ext_fields() == {
        "msgId": "7F00000100002A9F00000000000000A8",
        "queueId": "1",
        "queueOffset": "0",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    plain = SendMessageResponseHeader(msg_id="x", queue_id=0, queue_offset=0)
    assert set(plain.to_ext_fields()) == {"msgId", "queueId", "queueOffset"}


def test_headers_are_frozen_and_slotted() -> None:
    header = GetMaxOffsetRequestHeader(topic="T", queue_id=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.topic = "U"  # type: ignore[misc]
    assert not hasattr(header, "__dict__")
    decoded = GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": "0"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.queue_id = 1  # type: ignore[misc]
    assert decoded == header
    assert hash(decoded) == hash(header)


def test_header_fields_describe_the_wire() -> None:
    fields = {f.name: f for f in PullMessageRequestHeader.header_fields()}
    assert fields["queue_offset"] == HeaderField(
        name="queue_offset", key="queueOffset", kind="Long", not_null=True, default=dataclasses.MISSING
    )
    assert fields["queue_id"].kind == "int"
    assert not fields["subscription"].not_null


def test_unsupported_field_types_fail_at_class_creation() -> None:
    with pytest.raises(TypeError, match="unsupported header field type"):

        @command_header
        class BadHeader(CommandHeader):
            ratio: float


def test_post_init_and_factories_are_refused() -> None:
    with pytest.raises(TypeError, match="__post_init__"):

        @command_header
        class Validating(CommandHeader):
            topic: str

            def __post_init__(self) -> None:
                pass

    with pytest.raises(TypeError, match="factory"):

        @command_header
        class Factory(CommandHeader):
            topic: str = dataclasses.field(default_factory=str)


def test_custom_header_declaration() -> None:
    @command_header
    class Custom(CommandHeader):
        client_id: str = wire("clientID")
        big: Long
        flag: bool | None = None

    header = Custom.from_ext_fields({"clientID": "c", "big": "9", "flag": "1"})
    assert header == Custom(client_id="c", big=9, flag=True)
    assert header.to_ext_fields() == {"clientID": "c", "big": "9", "flag": "true"}


def test_request_headers_mapping() -> None:
    assert REQUEST_HEADERS[RequestCode.SEND_MESSAGE] is SendMessageRequestHeader
    assert REQUEST_HEADERS[RequestCode.SEND_MESSAGE_V2] is SendMessageRequestHeaderV2
    assert REQUEST_HEADERS[RequestCode.SEND_BATCH_MESSAGE] is SendMessageRequestHeaderV2
    assert REQUEST_HEADERS[RequestCode.PULL_MESSAGE] is PullMessageRequestHeader
    assert RequestCode.HEART_BEAT not in REQUEST_HEADERS  # body only
    assert RequestCode.LOCK_BATCH_MQ not in REQUEST_HEADERS
    assert all("RequestHeader" in cls.__name__ for cls in REQUEST_HEADERS.values())


def test_pull_sys_flag() -> None:
    assert PullSysFlag.build_sys_flag(False, True, True, False) == 6  # cpp push consumer
    assert PullSysFlag.build_sys_flag(True, True, True, False) == 7
    assert PullSysFlag.build_sys_flag(False, False, True, False) == 4  # cpp pull consumer
    assert PullSysFlag.build_sys_flag(False, False, False, False, lite_pull=True) == 16
    assert PullSysFlag.has_commit_offset_flag(7)
    assert not PullSysFlag.has_commit_offset_flag(6)
    assert PullSysFlag.has_suspend_flag(6)
    assert PullSysFlag.has_subscription_flag(4)
    assert not PullSysFlag.has_class_filter_flag(7)
    assert PullSysFlag.has_class_filter_flag(8)
    assert PullSysFlag.has_lite_pull_flag(16)
    assert PullSysFlag.clear_commit_offset_flag(7) == 6
    assert PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND == 6
