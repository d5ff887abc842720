"""bodies: JSON bodies as Java writes them, as the C++ client writes them, and fastjson's key forms."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
import json
import random
import struct
import types
import typing
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finchmq.protocol import bodies
from finchmq.protocol.bodies import (
    DEFAULT_RETRY_NEXT_MILLIS,
    BodyError,
    BrokerData,
    CheckClientRequestBody,
    ClusterInfo,
    CMResult,
    Connection,
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerListByGroupResponseBody,
    ConsumerOffsetSerializeWrapper,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatus,
    ConsumeType,
    CustomizedRetryPolicy,
    DataVersion,
    ExponentialRetryPolicy,
    GroupRetryPolicy,
    GroupRetryPolicyType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    OffsetWrapper,
    PermName,
    ProcessQueueInfo,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    RemotingSerializable,
    ResetOffsetBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
)
from finchmq.protocol.codes import LanguageCode
from finchmq.protocol.errors import RemoteProtocolError
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.message import MessageQueue

DATA = Path(__file__).parent / "data"
ALL_BODIES = sorted(
    {
        obj
        for obj in vars(bodies).values()
        if inspect.isclass(obj) and issubclass(obj, RemotingSerializable) and obj is not RemotingSerializable
    },
    key=lambda cls: cls.__name__,
)
MQ_A0 = MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=0)
MQ_A1 = MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=1)


def compact(text: str) -> bytes:
    return json.dumps(json.loads(text), separators=(",", ":")).encode()


# ---------------------------------------------------------------------------------------------
# A strategy for any body, built from its type hints


TEXT = st.text(st.characters(codec="utf-8"), max_size=10)
LONGS = st.integers(-(2**63), 2**63 - 1)
MQS = st.builds(MessageQueue, topic=TEXT, broker_name=TEXT, queue_id=st.integers(-(2**31), 2**31 - 1))


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is types.UnionType or origin is typing.Union:
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | strategy_for(inner)
    if origin is tuple:
        return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
    if origin is dict:
        return st.dictionaries(strategy_for(args[0]), strategy_for(args[1]), max_size=3)
    if tp is str:
        return TEXT
    if tp is bool:
        return st.booleans()
    if tp is int:
        return LONGS
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if tp is MessageQueue:
        return MQS
    if tp is bodies.JavaBitSet:
        return st.frozensets(st.integers(0, 300), max_size=8).map(bodies.JavaBitSet)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and issubclass(tp, RemotingSerializable):
        return body_strategy(tp)
    raise AssertionError(f"no strategy for {tp!r}")


def _deferred(tp: Any) -> st.SearchStrategy[Any]:
    return st.deferred(lambda: strategy_for(tp))  # bodies refer to each other


def body_strategy(cls: type[RemotingSerializable]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("write", True):  # fields Java never writes cannot round-trip
            kwargs[f.name] = _deferred(hints[f.name])
    return st.builds(cls, **kwargs)


@pytest.mark.parametrize("cls", ALL_BODIES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("standard", [True, False], ids=["standard", "fastjson"])
@settings(max_examples=40)  # x 80 cases; nested bodies make each example large
@given(data=st.data())
def test_every_body_round_trips(cls: type[RemotingSerializable], standard: bool, data: st.DataObject) -> None:
    body = data.draw(body_strategy(cls))
    encoded = body.to_json(standard=standard)
    decoded = cls.from_json(encoded)
    assert decoded.to_json(standard=standard) == encoded  # HashSet fields come back in Java's order
    if standard:
        json.loads(encoded)  # the standard form is JSON, and canonical: sorted maps, hash-ordered sets
        assert cls.from_json(decoded.to_json()).to_json(standard=True) == encoded


# ---------------------------------------------------------------------------------------------
# Heartbeat


EXPECTED_CPP_HEARTBEAT = HeartbeatData(
    client_id="15590-127.0.0.1@DEFAULT",
    producer_data_set=(ProducerData(group_name="PG"),),
    consumer_data_set=(
        ConsumerData(
            group_name="CG",
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel.CLUSTERING,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            subscription_data_set=(
                SubscriptionData(topic="%RETRY%CG", sub_string="*", sub_version=1795298082373),
                SubscriptionData(topic="TopicTest", sub_string="*", sub_version=1795298082373),
            ),
        ),
    ),
)


def test_cpp_heartbeat_golden() -> None:
    raw = (DATA / "heartbeat_cpp.json").read_bytes()
    assert raw.endswith(b"}\n")  # jsoncpp FastWriter's trailing newline
    assert HeartbeatData.from_json(raw) == EXPECTED_CPP_HEARTBEAT


def test_java_heartbeat_with_enum_names_parses_to_the_same_value() -> None:
    java = EXPECTED_CPP_HEARTBEAT.to_json()
    assert b'"consumeType":"CONSUME_PASSIVELY"' in java
    assert b'"messageModel":"CLUSTERING"' in java
    assert b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET"' in java
    assert b'"subVersion":1795298082373' in java
    assert HeartbeatData.from_json(java) == EXPECTED_CPP_HEARTBEAT


def test_heartbeat_writes_java_key_order() -> None:
    body = HeartbeatData(client_id="c", producer_data_set=(ProducerData(group_name="PG"),))
    assert body.to_json() == b'{"clientID":"c","consumerDataSet":[],"producerDataSet":[{"groupName":"PG"}]}'


def test_heartbeat_without_data_sets_parses() -> None:
    assert HeartbeatData.from_json(b'{"clientID":"x"}\n') == HeartbeatData(client_id="x")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
        (5, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP),
        ('"4"', ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
        ('"CONSUME_FROM_MIN_OFFSET"', ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET),
    ],
)
def test_enums_parse_by_ordinal_or_name(value: object, expected: ConsumeFromWhere) -> None:
    text = f'{{"consumeFromWhere":{value},"consumeType":"CONSUME_ACTIVELY","messageModel":0}}'
    data = ConsumerData.from_json(text)
    assert data.consume_from_where is expected
    assert data.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert data.consume_type.type_cn == "PULL"
    assert data.message_model is MessageModel.BROADCASTING


def test_bad_enum_is_a_body_error_with_the_path() -> None:
    with pytest.raises(BodyError) as info:
        HeartbeatData.from_json(
            b'{"consumerDataSet":[{"consumeType":1,"messageModel":"BROADCAST","consumeFromWhere":0}]}'
        )
    message = str(info.value)
    assert message.startswith("HeartbeatData: consumerDataSet[0].messageModel:")
    assert "'BROADCAST'" in message


def test_missing_required_consumer_fields() -> None:
    with pytest.raises(BodyError, match=r"consumerDataSet\[0\]: required key 'consumeType' is missing"):
        HeartbeatData.from_json(b'{"consumerDataSet":[{"groupName":"G"}]}')


def test_subscription_data_reads_but_never_writes_filter_class_source() -> None:
    sub = SubscriptionData.from_json(
        b'{"topic":"T","subString":"A || B","filterClassSource":"src","codeSet":[0,0]}'
    )
    assert sub.filter_class_source == "src"
    assert sub.code_set == (0, 0)  # kept as sent, even cpp's atoi() codes
    assert b"filterClassSource" not in sub.to_json()


# ---------------------------------------------------------------------------------------------
# Routes


# Spec 3.1.1 example, as laid out there (constructed, Java key order).
SPEC_ROUTE = """{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},
   "brokerName":"broker-a","cluster":"DefaultCluster"}],
 "filterServerTable":{},
 "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"""
EXPECTED_ROUTE = TopicRouteData(
    queue_datas=(QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6),),
    broker_datas=(
        BrokerData(cluster="DefaultCluster", broker_name="broker-a", broker_addrs={0: "127.0.0.1:10911"}),
    ),
)


def test_spec_route_example_is_what_we_write() -> None:
    assert TopicRouteData.from_json(SPEC_ROUTE) == EXPECTED_ROUTE
    assert EXPECTED_ROUTE.to_json(standard=True) == compact(SPEC_ROUTE)


def test_route_fastjson_numeric_keys_and_legacy_topic_syn_flag() -> None:
    route = TopicRouteData.from_json((DATA / "route_fastjson_numeric_keys.json").read_bytes())
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert route.queue_datas[0].topic_sys_flag == 0
    legacy = QueueData.from_json(b'{"brokerName":"b","topicSynFlag":3}')
    assert legacy.topic_sys_flag == 3
    assert b'"topicSysFlag":3' in legacy.to_json()
    assert b"topicSynFlag" not in legacy.to_json()


def test_route_fastjson_compat_writes_bare_broker_ids() -> None:
    assert EXPECTED_ROUTE.to_json() == compact(SPEC_ROUTE).replace(b'{"0":', b"{0:")


def test_route_always_writes_queue_and_broker_arrays() -> None:
    assert TopicRouteData().to_json() == b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'
    assert TopicRouteData(order_topic_conf="broker-a:4").to_json().startswith(b'{"brokerDatas":[],')


def test_broker_data_address_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    both = BrokerData(broker_addrs={1: "slave:10911", 0: "master:10911"})
    assert both.master_addr == "master:10911"
    assert both.select_broker_addr() == "master:10911"
    slaves = BrokerData(broker_addrs={1: "s1", 2: "s2"})
    assert slaves.master_addr is None
    monkeypatch.setattr(random, "choice", lambda seq: seq[-1])
    assert slaves.select_broker_addr() == "s2"
    assert BrokerData().select_broker_addr() is None


def test_cluster_info_and_topic_list() -> None:
    info = ClusterInfo.from_json(
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"a:1"},"brokerName":"broker-a","cluster":"C"}},'
        b'"clusterAddrTable":{"C":["broker-a"]}}'
    )
    assert info.broker_addr_table["broker-a"].master_addr == "a:1"
    assert info.cluster_addr_table == {"C": ("broker-a",)}
    assert TopicList(topic_list=("A", "B")).to_json() == b'{"topicList":["A","B"]}'


# ---------------------------------------------------------------------------------------------
# Broker registration


EXPECTED_REGISTER = RegisterBrokerBody(
    topic_config_serialize_wrapper=TopicConfigSerializeWrapper(
        data_version=DataVersion(counter=3, timestamp=1700000000000),
        topic_config_table={
            "TBW102": TopicConfig(topic_name="TBW102", read_queue_nums=8, write_queue_nums=8, perm=7),
            "TopicTest": TopicConfig(topic_name="TopicTest", read_queue_nums=4, write_queue_nums=4, perm=6),
        },
    )
)


def test_register_broker_body_spec_example() -> None:
    text = (DATA / "register_broker_body.json").read_text()
    assert RegisterBrokerBody.decode(text.encode(), compressed=False) == EXPECTED_REGISTER
    encoded = EXPECTED_REGISTER.encode(compress=False)  # topics in the broker table's hash order
    assert json.loads(encoded) == json.loads(text)
    assert RegisterBrokerBody.decode(encoded, compressed=False) == EXPECTED_REGISTER


def test_register_broker_body_compressed_layout() -> None:
    raw = zlib.decompress(EXPECTED_REGISTER.encode(compress=True))
    version = b'{"counter":3,"timestamp":1700000000000}'
    topics = [b"TBW102 8 8 7 SINGLE_TAG", b"TopicTest 4 4 6 SINGLE_TAG"]
    expected = struct.pack(">i", len(version)) + version + struct.pack(">i", 2)
    expected += b"".join(struct.pack(">i", len(t)) + t for t in topics)
    expected += struct.pack(">i", 2) + b"[]"
    assert raw == expected
    assert (
        RegisterBrokerBody.decode(EXPECTED_REGISTER.encode(compress=True), compressed=True)
        == EXPECTED_REGISTER
    )


def test_compressed_register_body_drops_what_topic_config_encode_drops() -> None:
    body = RegisterBrokerBody(
        topic_config_serialize_wrapper=TopicConfigSerializeWrapper(
            topic_config_table={"O": TopicConfig(topic_name="O", order=True, topic_sys_flag=1)}
        ),
        filter_server_list=("10.0.0.1:1",),
    )
    decoded = RegisterBrokerBody.decode(body.encode(compress=True), compressed=True)
    assert decoded.topic_config_serialize_wrapper.topic_config_table["O"] == TopicConfig(topic_name="O")
    assert decoded.filter_server_list == ("10.0.0.1:1",)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"not zlib", "does not inflate"),
        (zlib.compress(struct.pack(">i", 50) + b"{}"), "truncated in dataVersion"),
        (zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1)), "truncated in topic config"),
        (
            zlib.compress(
                struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 3) + b"a b"
            ),
            "TopicConfig: bad encoded form",
        ),
        (
            zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0) + struct.pack(">i", 2) + b"{}"),
            "filterServerList",
        ),
    ],
)
def test_bad_compressed_register_bodies(data: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        RegisterBrokerBody.decode(data, compressed=True)


def test_topic_config_encoded_form() -> None:
    config = TopicConfig(
        topic_name="T",
        read_queue_nums=4,
        write_queue_nums=2,
        perm=6,
        topic_filter_type=TopicFilterType.MULTI_TAG,
    )
    assert config.encode() == "T 4 2 6 MULTI_TAG"
    assert TopicConfig.decode("T 4 2 6 MULTI_TAG") == config
    assert TopicConfig.decode('T 4 2 6 SINGLE_TAG {"+a":"b"}').topic_filter_type is TopicFilterType.SINGLE_TAG
    with pytest.raises(BodyError, match="bad encoded form"):
        TopicConfig.decode("T 4 x 6 SINGLE_TAG")
    with pytest.raises(BodyError, match="bad encoded form"):
        TopicConfig.decode("T 4 2 6 NO_SUCH_TYPE")


def test_java_defaults() -> None:
    config = TopicConfig.from_json(b"{}")
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (16, 16, 6)
    assert config.topic_filter_type is TopicFilterType.SINGLE_TAG
    group = SubscriptionGroupConfig.from_json(b'{"groupName":"G"}')
    assert group == SubscriptionGroupConfig(
        group_name="G",
        consume_enable=True,
        consume_from_min_enable=True,
        consume_broadcast_enable=True,
        retry_queue_nums=1,
        retry_max_times=16,
        broker_id=0,
        which_broker_when_consume_slowly=1,
        notify_consumer_ids_changed_enable=True,
    )
    assert json.loads(group.to_json()) == {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "groupName": "G",
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }
    assert ConsumeMessageDirectlyResult().auto_commit is True


# Java 5.3.3 ``SubscriptionGroupConfig.encode()`` of a group given -o true and mqadmin's -p example.
JAVA_533_GROUP = (
    b'{"attributes":{},"brokerId":0,"consumeBroadcastEnable":false,"consumeEnable":true,'
    b'"consumeFromMinEnable":false,"consumeMessageOrderly":true,"consumeTimeoutMinute":15,'
    b'"groupName":"G5","groupRetryPolicy":{"exponentialRetryPolicy":{"initial":5000,"max":7200000,'
    b'"multiplier":2},"type":"EXPONENTIAL"},"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,'
    b'"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}'
)


def test_subscription_group_5x_fields_with_java_names() -> None:
    group = SubscriptionGroupConfig.from_json(JAVA_533_GROUP)
    assert group.consume_message_orderly is True and group.is_consume_message_orderly
    assert group.group_retry_policy == GroupRetryPolicy(
        type=GroupRetryPolicyType.EXPONENTIAL, exponential_retry_policy=ExponentialRetryPolicy()
    )
    out = json.loads(group.to_json())
    assert out["consumeMessageOrderly"] is True
    assert out["groupRetryPolicy"] == {
        "exponentialRetryPolicy": {"initial": 5000, "max": 7200000, "multiplier": 2},
        "type": "EXPONENTIAL",
    }
    assert SubscriptionGroupConfig.from_json(group.to_json()) == group
    customized = GroupRetryPolicy.from_json(
        b'{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000]}}'
    )
    assert customized.retry_policy == CustomizedRetryPolicy(next=(1000, 5000))
    assert json.loads(customized.to_json()) == {
        "customizedRetryPolicy": {"next": [1000, 5000]},
        "type": "CUSTOMIZED",
    }
    # Java 5.3.3's default group writes {"type":"CUSTOMIZED"} and consumeMessageOrderly false
    default = SubscriptionGroupConfig.from_json(
        b'{"groupName":"G","consumeMessageOrderly":"false","groupRetryPolicy":{"type":"CUSTOMIZED"}}'
    )
    assert default.consume_message_orderly is False
    assert default.effective_group_retry_policy.retry_policy == CustomizedRetryPolicy()


def test_subscription_group_5x_fields_absent_keep_4_9_8_form() -> None:
    group = SubscriptionGroupConfig.from_json(b'{"groupName":"G"}')
    assert group.consume_message_orderly is None and group.group_retry_policy is None
    assert not group.is_consume_message_orderly
    assert group.effective_group_retry_policy == GroupRetryPolicy(type=GroupRetryPolicyType.CUSTOMIZED)
    assert group.effective_group_retry_policy.retry_policy.next_delay_duration(0) == 10_000  # level 3
    keys = json.loads(group.to_json())
    assert "consumeMessageOrderly" not in keys and "groupRetryPolicy" not in keys


def test_retry_policies_next_delay_duration_as_java() -> None:
    customized = CustomizedRetryPolicy()
    assert customized.next == DEFAULT_RETRY_NEXT_MILLIS and len(customized.next) == 18
    # index reconsumeTimes + 2, clamped to the table
    assert [customized.next_delay_duration(n) for n in (-3, 0, 1, 15, 16, 100)] == [
        10_000, 10_000, 30_000, 7_200_000, 7_200_000, 7_200_000
    ]  # fmt: skip
    exponential = ExponentialRetryPolicy()
    assert (exponential.initial, exponential.max, exponential.multiplier) == (5_000, 7_200_000, 2)
    assert [exponential.next_delay_duration(n) for n in (-1, 0, 1, 3, 10, 11, 99)] == [
        5_000, 5_000, 10_000, 40_000, 5_120_000, 7_200_000, 7_200_000
    ]  # fmt: skip
    # Java long arithmetic: (long) Math.pow(10, 32) saturates, 5000 * Long.MAX_VALUE wraps to -5000
    assert ExponentialRetryPolicy(multiplier=10).next_delay_duration(32) == -5_000
    policy = GroupRetryPolicy(type=GroupRetryPolicyType.EXPONENTIAL)  # absent: Java's default policy
    assert policy.retry_policy == CustomizedRetryPolicy()


def test_data_version_next() -> None:
    version = DataVersion(timestamp=1, counter=41)
    later = version.next_version()
    assert later.counter == 42
    assert later.timestamp > 1
    assert version.counter == 41


def test_perm_name() -> None:
    assert PermName.READ | PermName.WRITE == 6
    assert PermName.is_readable(6)
    assert PermName.is_writeable(6)
    assert not PermName.is_inherited(6)
    assert PermName.is_inherited(7)
    assert PermName.perm2string(7) == "RWX"
    assert PermName.perm2string(4) == "R--"
    assert int(PermName.PRIORITY) == 8


# ---------------------------------------------------------------------------------------------
# Maps keyed by MessageQueue (fastjson object keys) and by numbers


EXPECTED_STATS = ConsumeStats(
    consume_tps=2.5,
    offset_table={
        MQ_A0: OffsetWrapper(broker_offset=10, consumer_offset=4, last_timestamp=1700000000000),
        MQ_A1: OffsetWrapper(broker_offset=7, consumer_offset=7, last_timestamp=0),
    },
)


def test_consume_stats_fastjson_object_keys_golden() -> None:
    raw = (DATA / "consume_stats_fastjson.json").read_bytes()
    assert ConsumeStats.from_json(raw) == EXPECTED_STATS
    # Java iterates its HashMap<MessageQueue, ..> by hash: queue 1's bucket comes first here
    # (test_java_goldens checks this order against fastjson itself).
    assert EXPECTED_STATS.to_json() == (
        b'{"consumeTps":2.5,"offsetTable":{'
        b'{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:'
        b'{"brokerOffset":7,"consumerOffset":7,"lastTimestamp":0},'
        b'{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
        b'{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1700000000000}}}'
    )
    assert EXPECTED_STATS.compute_total_diff() == 6


def test_consume_stats_standard_form_uses_string_keys() -> None:
    encoded = EXPECTED_STATS.to_json(standard=True)
    tree = json.loads(encoded)
    key = '{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}'
    assert tree["offsetTable"][key] == {
        "brokerOffset": 10,
        "consumerOffset": 4,
        "lastTimestamp": 1700000000000,
    }
    assert ConsumeStats.from_json(encoded) == EXPECTED_STATS


def test_topic_stats_and_running_info_object_keys() -> None:
    stats = TopicStatsTable.from_json(
        b'{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:{"lastUpdateTimestamp":9,"maxOffset":5,"minOffset":1}}}'
    )
    ((mq, offset),) = stats.offset_table.items()
    assert mq == MessageQueue(topic="T", broker_name="b", queue_id=3)
    assert (offset.min_offset, offset.max_offset, offset.last_update_timestamp) == (1, 5, 9)
    info = ConsumerRunningInfo(
        properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
        mq_table={MQ_A0: ProcessQueueInfo(commit_offset=3, cached_msg_size_in_mib=2, droped=True)},
        status_table={"TopicTest": ConsumeStatus(pull_rt=1.5, consume_ok_tps=2.0, consume_failed_msgs=1)},
    )
    compat = info.to_json()
    assert b'"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{' in compat
    assert b'"cachedMsgSizeInMiB":2' in compat
    assert b'"pullRT":1.5' in compat
    assert b'"consumeOKTPS":2.0' in compat
    assert ConsumerRunningInfo.from_json(compat) == info


def test_running_info_properties_coerce_java_non_string_values() -> None:
    info = ConsumerRunningInfo.from_json(
        b'{"properties":{"PROP_CONSUMER_START_TIMESTAMP":1700000000000,"x":true}}'
    )
    assert info.properties == {"PROP_CONSUMER_START_TIMESTAMP": "1700000000000", "x": "true"}


def test_reset_offset_body_reads_cpp_array_form_and_java_map_forms() -> None:
    expected = ResetOffsetBody(
        offset_table={MQ_A0: 42, MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=3): -1}
    )
    assert ResetOffsetBody.from_json((DATA / "reset_offset_cpp.json").read_bytes()) == expected
    assert ResetOffsetBody.from_json(expected.to_json()) == expected
    assert ResetOffsetBody.from_json(expected.to_json()) == expected
    assert ResetOffsetBody.from_json(expected.to_cpp_json()) == expected
    assert json.loads(expected.to_cpp_json())["offsetTable"][0] == {
        "brokerName": "broker-a",
        "queueId": 0,
        "topic": "TopicTest",
        "offset": 42,
    }
    with pytest.raises(BodyError, match=r"offsetTable\[1\]"):
        ResetOffsetBody.from_json(b'{"offsetTable":[{"topic":"T","offset":1},7]}')


def test_consumer_offset_wrapper_numeric_keys_both_forms() -> None:
    expected = ConsumerOffsetSerializeWrapper(offset_table={"TopicTest@CG": {0: 5, 1: 7}})
    assert ConsumerOffsetSerializeWrapper.from_json(b'{"offsetTable":{"TopicTest@CG":{0:5,1:7}}}') == expected
    assert (
        ConsumerOffsetSerializeWrapper.from_json(b'{"offsetTable":{"TopicTest@CG":{"0":5,"1":7}}}')
        == expected
    )
    assert expected.to_json() == b'{"offsetTable":{"TopicTest@CG":{0:5,1:7}}}'
    assert expected.to_json(standard=True) == b'{"offsetTable":{"TopicTest@CG":{"0":5,"1":7}}}'


def test_bad_map_keys() -> None:
    with pytest.raises(
        BodyError, match=r"brokerDatas\[0\]\.brokerAddrs\['master'\]: bad int map key 'master'"
    ):
        TopicRouteData.from_json(b'{"brokerDatas":[{"brokerAddrs":{"master":"a:1"}}]}')
    with pytest.raises(BodyError, match="MessageQueue"):
        ConsumeStats.from_json(b'{"offsetTable":{"not a queue":{}}}')


# ---------------------------------------------------------------------------------------------
# Locks, consumer lists, connections


def test_lock_batch_bodies() -> None:
    request = LockBatchRequestBody.from_json(
        b'{"clientId":"c","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}\n'
    )
    assert request == LockBatchRequestBody(consumer_group="G", client_id="c", mq_set=(MQ_A0,))
    response = LockBatchResponseBody(lock_ok_mq_set=(MQ_A0,))
    assert (
        response.to_json() == b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}'
    )


def test_consumer_list_body() -> None:
    body = ConsumerListByGroupResponseBody(consumer_id_list=("1-127.0.0.1@DEFAULT",))
    assert body.to_json() == b'{"consumerIdList":["1-127.0.0.1@DEFAULT"]}'


def test_connection_language_by_name_and_unknown_as_other() -> None:
    assert Connection.from_json(b'{"language":"CPP","version":63}').language is LanguageCode.CPP
    assert Connection.from_json(b'{"language":"COBOL"}').language is LanguageCode.OTHER
    assert Connection(language=LanguageCode.PYTHON).to_json().count(b'"language":"PYTHON"') == 1


def test_cm_result_by_name() -> None:
    result = ConsumeMessageDirectlyResult.from_json(b'{"consumeResult":"CR_SUCCESS","spentTimeMills":3}')
    assert result.consume_result is CMResult.CR_SUCCESS
    assert result.spent_time_mills == 3


# ---------------------------------------------------------------------------------------------
# Leniency and errors


def test_lenient_scalars_null_and_unknown_keys() -> None:
    data = QueueData.from_json(b'{"brokerName":null,"perm":"6","readQueueNums":4.0,"unknown":{"x":[1]}}')
    assert data == QueueData(perm=6, read_queue_nums=4)
    assert (
        SubscriptionGroupConfig.from_json(b'{"consumeEnable":"false","retryQueueNums":"2"}').consume_enable
        is False
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "body is empty"),
        (b"{", "body is not JSON"),
        (b"[1,2]", "expected an object, got list"),
        (b'{"queueDatas":{}}', "queueDatas: expected an array, got dict"),
        (b'{"queueDatas":[{"perm":"abc"}]}', r"queueDatas\[0\]\.perm: expected an integer, got str 'abc'"),
        (b'{"queueDatas":[{"brokerName":[1]}]}', r"queueDatas\[0\]\.brokerName: expected a string"),
        (b'{"filterServerTable":{"a":[{}]}}', r"filterServerTable\['a'\]\[0\]: expected a string"),
    ],
)
def test_bad_bodies_raise_body_error_naming_class_and_path(data: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match) as info:
        TopicRouteData.from_json(data)
    assert str(info.value).startswith("TopicRouteData: ")
    assert isinstance(info.value, RemoteProtocolError)


def test_bodies_are_frozen_values() -> None:
    body = LockBatchRequestBody(consumer_group="G")
    with pytest.raises(dataclasses.FrozenInstanceError):
        body.consumer_group = "H"  # type: ignore[misc]
    assert not hasattr(body, "__dict__")
    assert hash(body) == hash(LockBatchRequestBody(consumer_group="G"))


FUZZ_TREES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)
FUZZ_TARGETS: list[type[RemotingSerializable]] = [
    TopicRouteData,
    HeartbeatData,
    ConsumeStats,
    ResetOffsetBody,
    ConsumerRunningInfo,
]


@pytest.mark.parametrize("cls", FUZZ_TARGETS, ids=lambda cls: cls.__name__)
@given(data=st.binary(max_size=64) | FUZZ_TREES.map(lambda tree: json.dumps(tree).encode()))
def test_garbage_only_ever_raises_body_error(cls: type[RemotingSerializable], data: bytes) -> None:
    with contextlib.suppress(BodyError):
        cls.from_json(data)


@given(FUZZ_TREES)
def test_garbage_under_known_keys_only_ever_raises_body_error(tree: Any) -> None:
    for key in ("offsetTable", "consumerDataSet", "brokerDatas", "queueDatas", "mqTable"):
        for cls in FUZZ_TARGETS:
            with contextlib.suppress(BodyError):
                cls.from_json(json.dumps({key: tree, "x": [tree]}))


def test_check_client_config_body_for_an_sql92_subscription_is_javas_bytes() -> None:
    """CHECK_CLIENT_CONFIG's body for ``FilterAPI.build("T", "a > 5 AND b = 'x'", "SQL92")``:
    the bytes ``CheckClientRequestBody.encode()`` of Java 4.9.8 (fastjson 1.2.69) printed."""
    sub = build_subscription_data("T", "a > 5 AND b = 'x'", "SQL92", 1700000000000)
    body = CheckClientRequestBody(client_id="127.0.0.1@1", group="g", subscription_data=sub)
    assert body.to_json() == (
        b'{"clientId":"127.0.0.1@1","group":"g","subscriptionData":{"classFilterMode":false,"codeSet":[],'
        b'"expressionType":"SQL92","subString":"a > 5 AND b = \'x\'","subVersion":1700000000000,'
        b'"tagsSet":[],"topic":"T"}}'
    )
    assert CheckClientRequestBody.from_json(body.to_json()) == body
