"""Option parsing, offsets, partition planning, admission control and the row decoder, without
a JVM: every bad option is refused with a message naming the option and the value."""

from __future__ import annotations

import json
import pickle
import zlib

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from finchmq.client import MessageConst, TlsConfig
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import properties_to_string
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.msg_id import offset_msg_id_from_packed
from finchmq.protocol.stored import encode_stored
from finchmq.spark import SCHEMA, OptionError
from finchmq.spark._columns import ARROW_SCHEMA, Columns
from finchmq.spark._read import tag_set
from finchmq.spark._write import SinkError, WriteIds, check_input_schema
from finchmq.spark.options import EARLIEST, LATEST, ReadOptions, WriteOptions
from finchmq.spark.partitions import (
    QueuePartition,
    from_offset_json,
    plan_partitions,
    rate_limit,
    to_offset_json,
)
from tests.tls_certs import TlsFiles, client_properties

BASE = {"nameServer": "127.0.0.1:9876", "topic": "Orders"}


def parse(streaming: bool = False, **extra: str) -> ReadOptions:
    return ReadOptions.parse({**BASE, **extra}, streaming=streaming)


# -- read options ----------------------------------------------------------------------------------


def test_defaults_follow_the_kafka_source() -> None:
    batch = parse()
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert (batch.sub_expression, batch.fail_on_data_loss, batch.pull_batch_size) == ("*", True, 32)
    assert batch.max_records_per_partition is None and batch.consumer_group is None
    stream = parse(streaming=True)
    assert stream.starting.kind == "latest"


def test_names_are_case_insensitive_and_topics_comma_separated() -> None:
    opts = ReadOptions.parse(
        {"NAMESERVER": "127.0.0.1:1;10.0.0.2:9876", "Topic": " A , B,A", "pullbatchsize": "64"},
        streaming=False,
    )
    assert opts.name_server == "127.0.0.1:1;10.0.0.2:9876"
    assert opts.topics == ("A", "B")
    assert opts.pull_batch_size == 64


def test_required_options() -> None:
    with pytest.raises(OptionError, match=r"rocketmq option nameServer='': required"):
        ReadOptions.parse({"topic": "T"}, streaming=False)
    with pytest.raises(OptionError, match=r"rocketmq option topic='': required"):
        ReadOptions.parse({"nameServer": "h:1"}, streaming=False)


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("nameServer", "localhost", "expected host:port"),
        ("topic", "a b", "not a valid topic name"),
        ("topic", "A,,B", "empty topic name"),
        ("pullBatchSize", "many", "expected an integer"),
        ("pullBatchSize", "0", "must be between 1 and 1024"),
        ("pullTimeoutMs", "1.5", "expected an integer"),
        ("maxRecordsPerPartition", "-3", "must be >= 1"),
        ("maxOffsetsPerTrigger", "ten", "expected an integer"),
        ("failOnDataLoss", "yes", "expected true or false"),
        ("startingTimestamp", "yesterday", "expected an integer"),
        ("startingOffsets", "first", 'expected "earliest", "latest"'),
        ("startingOffsets", '{"Orders": {"broker-a": {"0": 5}', "malformed JSON"),
        ("startingOffsets", '["Orders"]', 'expected "earliest", "latest" or {"topic"'),
        ("endingOffsets", "[1]", 'expected "earliest", "latest" or {"topic"'),
        ("endingOffsets", "3", 'expected "earliest", "latest" or {"topic"'),
        (
            "startingOffsets",
            '{"Other": {"broker-a": {"0": 5}}}',
            "topic 'Other' is not one of the topics read",
        ),
        ("startingOffsets", '{"Orders": {"broker-a": {"zero": 5}}}', "queue id 'zero' is not an integer"),
        ("startingOffsets", '{"Orders": {"broker-a": {"0": "5"}}}', "offset '5' must be an integer"),
        ("startingOffsets", '{"Orders": {"broker-a": {"0": -3}}}', "offset -3 must be an integer"),
        ("startingOffsets", "latest", "cannot start at latest"),
        ("startingOffsets", '{"Orders": {"broker-a": {"0": -1}}}', "-1 (latest) is not allowed"),
        ("endingOffsets", "earliest", "cannot end at earliest"),
        ("endingOffsets", '{"Orders": {"broker-a": {"1": -2}}}', "-2 (earliest) is not allowed"),
        ("consumerGroup", "bad group!", "illegal characters"),
        ("subExpression", "  ", "empty tag expression"),
    ],
)
def test_bad_read_options_name_the_option_and_value(option: str, value: str, match: str) -> None:
    with pytest.raises(OptionError) as info:
        ReadOptions.parse({**BASE, option: value}, streaming=False)
    text = str(info.value)
    assert text.startswith(f"rocketmq option {option}=")
    assert repr(value) in text
    assert match in text, text


def test_streaming_refuses_ending_options() -> None:
    with pytest.raises(OptionError, match=r"endingOffsets='latest': only for batch queries"):
        ReadOptions.parse({**BASE, "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match=r"endingTimestamp='5': only for batch queries"):
        ReadOptions.parse({**BASE, "endingTimestamp": "5"}, streaming=True)


def test_offset_json_and_timestamps() -> None:
    text = json.dumps({"Orders": {"broker-a": {"0": 5, "1": -2}, "broker-b": {"3": 7}}})
    opts = parse(startingOffsets=text, endingOffsets=json.dumps({"Orders": {"broker-a": {"0": 9}}}))
    assert opts.starting.kind == "offsets" and opts.starting.text == text
    assert opts.starting.offset_map() == {
        ("Orders", "broker-a", 0): 5,
        ("Orders", "broker-a", 1): EARLIEST,
        ("Orders", "broker-b", 3): 7,
    }
    assert opts.ending.offset_map() == {("Orders", "broker-a", 0): 9} and opts.ending.default == "latest"
    timed = parse(startingTimestamp="1000", startingOffsets="earliest", endingTimestamp="2000")
    assert (timed.starting.kind, timed.starting.timestamp) == ("timestamp", 1000)  # timestamp wins
    assert (timed.ending.kind, timed.ending.timestamp) == ("timestamp", 2000)
    assert parse(streaming=True, startingOffsets='{"Orders":{"b":{"0":-1}}}').starting.offset_map() == {
        ("Orders", "b", 0): LATEST
    }


def test_read_options_pickle() -> None:
    opts = parse(
        startingOffsets='{"Orders":{"b":{"0":3}}}', subExpression="A || B", maxRecordsPerPartition="10"
    )
    assert pickle.loads(pickle.dumps(opts)) == opts


# -- write options and the sink's columns -------------------------------------------------------------


def test_write_options() -> None:
    opts = WriteOptions.parse({"nameServer": "h:1"})
    assert (opts.topic, opts.producer_group, opts.send_timeout_ms, opts.send_batch_size) == (
        None,
        "finchmq-spark-writer",
        3000,
        64,
    )
    opts = WriteOptions.parse({"nameServer": "h:1", "topic": "T", "sendBatchSize": "16", "maxInFlight": "2"})
    assert (opts.topic, opts.send_batch_size, opts.max_in_flight) == ("T", 16, 2)
    for option, value, match in [
        ("sendTimeoutMs", "soon", "expected an integer"),
        ("sendBatchSize", "2000", "between 1 and 1024"),
        ("producerGroup", "a/b", "illegal characters"),
        ("topic", "bad topic", "not a valid topic name"),
    ]:
        with pytest.raises(OptionError) as info:
            WriteOptions.parse({"nameServer": "h:1", option: value})
        assert str(info.value).startswith(f"rocketmq option {option}={value!r}: ") and match in str(
            info.value
        )


def test_exactly_once_options() -> None:
    opts = WriteOptions.parse({"nameServer": "h:1"})
    assert (opts.delivery, opts.exactly_once) == ("at-least-once", False)
    opts = WriteOptions.parse({"nameServer": "h:1", "delivery": " Exactly-Once "})
    assert opts.exactly_once
    assert (opts.producer_group, opts.commit_topic, opts.transaction_timeout_ms, opts.max_in_flight) == (
        "finchmq-spark-transactional",
        "finchmq-spark-commits",
        120_000,
        64,
    )
    opts = WriteOptions.parse(
        {"nameServer": "h:1", "delivery": "exactly-once", "commitTopic": "C", "transactionTimeoutMs": "30000"}
    )
    assert (opts.commit_topic, opts.transaction_timeout_ms) == ("C", 30_000)
    for option, value, match in [
        ("delivery", "twice", "expected at-least-once or exactly-once"),
        ("commitTopic", "bad topic", "not a valid topic name"),
        ("transactionTimeoutMs", "5000", "10000"),
    ]:
        with pytest.raises(OptionError) as info:
            WriteOptions.parse({"nameServer": "h:1", option: value})
        assert str(info.value).startswith(f"rocketmq option {option}=") and match in str(info.value)


def test_acl_keys() -> None:
    """accessKey + secretKey sign every request for the broker's ACL; one without the other is refused."""
    assert parse().credentials is None
    opts = parse(accessKey=" app_account ", secretKey="app_secret_1")
    assert opts.credentials is not None
    assert (opts.credentials.access_key, opts.credentials.secret_key) == ("app_account", "app_secret_1")
    assert "app_secret_1" not in repr(opts)
    assert pickle.loads(pickle.dumps(opts)) == opts
    write = WriteOptions.parse({"nameServer": "h:1", "accessKey": "k", "secretKey": "s"})
    assert write.credentials is not None and write.credentials.access_key == "k"
    with pytest.raises(OptionError, match="rocketmq option secretKey='': required with accessKey"):
        parse(accessKey="app_account")
    with pytest.raises(OptionError, match="rocketmq option accessKey='': required with secretKey"):
        WriteOptions.parse({"nameServer": "h:1", "secretKey": "s"})


def test_namespace() -> None:
    """``namespace`` (Java ClientConfig.namespace): topics are the user's names; one given as
    ``namespace%topic`` (topic or offsets JSON) is taken as ``topic``; a blank one or one with
    ``%`` is refused."""
    assert parse().namespace is None and WriteOptions.parse({"nameServer": "h:1"}).namespace is None
    offsets = json.dumps({"tenant_a%Orders": {"broker-a": {"0": 5}}, "Refunds": {"broker-a": {"1": 2}}})
    opts = parse(namespace=" tenant_a ", topic="tenant_a%Orders,Refunds", startingOffsets=offsets)
    assert opts.namespace == "tenant_a"
    assert opts.topics == ("Orders", "Refunds")
    assert opts.starting.offset_map() == {("Orders", "broker-a", 0): 5, ("Refunds", "broker-a", 1): 2}
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert parse(topic="other%Orders", namespace="tenant_a").topics == ("other%Orders",)
    assert WriteOptions.parse({"nameServer": "h:1", "namespace": "tenant_a"}).namespace == "tenant_a"
    for bad in ("", "  ", "a%b"):
        with pytest.raises(
            OptionError, match=r"rocketmq option namespace=.*must be non-blank and without '%'"
        ):
            parse(namespace=bad)
        with pytest.raises(OptionError, match=r"rocketmq option namespace="):
            WriteOptions.parse({"nameServer": "h:1", "namespace": bad})


def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t) for n, t in fields])  # type: ignore[arg-type]


def test_sink_columns_are_checked_by_name_and_type() -> None:
    opts = WriteOptions.parse({"nameServer": "h:1"})
    with_topic = WriteOptions.parse({"nameServer": "h:1", "topic": "T"})
    ok = schema(
        ("body", StringType()),
        ("topic", StringType()),
        ("tags", StringType()),
        ("keys", ArrayType(StringType())),
        ("properties", MapType(StringType(), StringType())),
        ("shardingKey", IntegerType()),
        ("extra", DoubleType()),
    )
    check_input_schema(ok, opts)
    check_input_schema(schema(("body", BinaryType())), with_topic)
    with pytest.raises(SinkError, match="needs a 'body' column"):
        check_input_schema(schema(("value", BinaryType())), with_topic)
    with pytest.raises(SinkError, match="no topic: set the 'topic' option"):
        check_input_schema(schema(("body", BinaryType())), opts)
    bad = [
        (("body", IntegerType()), "column 'body' is int; it must be binary or string"),
        (("keys", IntegerType()), "column 'keys' is int; it must be string or array<string>"),
        (("properties", MapType(StringType(), IntegerType())), "it must be map<string,string>"),
        (("shardingKey", DoubleType()), "column 'shardingKey' is double"),
        (("tags", BinaryType()), "column 'tags' is binary"),
    ]
    for column, match in bad:
        fields = [("body", BinaryType()), column] if column[0] != "body" else [column]
        with pytest.raises(SinkError, match=match.replace("(", r"\(")):
            check_input_schema(schema(*fields), with_topic)


def test_uniq_keys_are_deterministic_and_distinct() -> None:
    ids = WriteIds("query-1", "7", 3)
    assert ids.uniq_key(5) == WriteIds("query-1", "7", 3).uniq_key(5)
    assert len(ids.uniq_key(5)) == 32 and ids.uniq_key(5) == ids.uniq_key(5).upper()
    others = {
        WriteIds("query-1", "7", 3).uniq_key(6),
        WriteIds("query-1", "8", 3).uniq_key(5),
        WriteIds("query-1", "7", 4).uniq_key(5),
        WriteIds("query-2", "7", 3).uniq_key(5),
    }
    assert ids.uniq_key(5) not in others and len(others) == 4


def test_tls_options_use_javas_names(tls_files: TlsFiles) -> None:
    """``tls.enable`` and ``tls.client.*`` (Java's names, any case) become the clients' TLS
    settings; they travel to the workers with the options."""
    assert parse().tls.enable is not True and WriteOptions.parse({"nameServer": "h:1"}).tls.enable is not True
    props = {k.upper() if k.endswith("certPath") else k: v for k, v in client_properties(tls_files).items()}
    opts = parse(**{"TLS.ENABLE": "true", **props})
    assert opts.tls == TlsConfig.from_properties({"tls.enable": "true", **client_properties(tls_files)})
    assert opts.tls.client_auth_server and opts.tls.client_trust_cert_path == str(tls_files.ca_cert)
    assert pickle.loads(pickle.dumps(opts)) == opts
    write = WriteOptions.parse({"nameServer": "h:1", "tls.enable": "true"})
    assert write.tls.enable and write.tls.test_mode_enable  # Java's default: any server is trusted
    conf = tls_files.ca_cert.parent / "spark-tls.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in client_properties(tls_files).items()))
    from_file = parse(**{"tls.enable": "true", "tls.config.file": str(conf)}).tls
    assert from_file.client_cert_path == str(tls_files.client_cert) and not from_file.test_mode_enable


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"tls.enable": "yes"}, r"tls.enable='yes': expected true or false"),
        ({"tls.client.authServer": "1", "tls.enable": "true"}, r"tls.client.authServer='1': expected true"),
        (
            {"tls.client.trustCertPath": "/x.pem"},
            r"tls.enable='': tls.client.trustCertPath given but TLS is off: set tls.enable=true",
        ),
        ({"tls.server.mode": "enforcing"}, r"tls.server.mode='enforcing': a server setting"),
        ({"tls.client.keyPassword2": "s"}, r"tls.client.keyPassword2='\*\*\*': not a TLS client setting"),
        (
            {"tls.enable": "true", "tls.config.file": "/nowhere/tls.properties"},
            r"tls.config.file='/nowhere/tls.properties': tls.config.file /nowhere/tls.properties does not exist",
        ),
        (
            {
                "tls.enable": "true",
                "tls.test.mode.enable": "false",
                "tls.client.authServer": "true",
                "tls.client.trustCertPath": "/nowhere/ca.pem",
            },
            r"tls.client.trustCertPath='/nowhere/ca.pem': cannot load tls.client.trustCertPath",
        ),
    ],
)
def test_bad_tls_options(extra: dict[str, str], match: str) -> None:
    with pytest.raises(OptionError, match="rocketmq option " + match):
        parse(**extra)
    with pytest.raises(OptionError, match="rocketmq option " + match):
        WriteOptions.parse({"nameServer": "h:1", **extra})


# -- offsets, partitions, admission control -------------------------------------------------------------


def test_offset_json_round_trip() -> None:
    offsets = {("T", "broker-a", 10): 5, ("T", "broker-a", 2): 0, ("U", "broker-b", 0): 9}
    data = to_offset_json(offsets)
    assert data == {"T": {"broker-a": {"2": 0, "10": 5}}, "U": {"broker-b": {"0": 9}}}
    assert from_offset_json(json.loads(json.dumps(data))) == offsets


def test_plan_partitions_one_per_queue_split_by_max_records() -> None:
    a, b, c = ("T", "b", 0), ("T", "b", 1), ("T", "b", 2)
    start, end = {a: 10, b: 5, c: 7}, {a: 35, b: 5, c: 8, ("T", "b", 3): 2}
    whole = plan_partitions(start, end, None)
    assert [(p.queue_id, p.start, p.end) for p in whole] == [(0, 10, 35), (2, 7, 8), (3, 0, 2)]
    split = plan_partitions(start, end, 10)
    assert [(p.queue_id, p.start, p.end) for p in split] == [
        (0, 10, 20),
        (0, 20, 30),
        (0, 30, 35),
        (2, 7, 8),
        (3, 0, 2),
    ]
    assert plan_partitions(start, start, None) == []


def test_partitions_pickle() -> None:
    part = QueuePartition("T", "broker-a", 3, 10, 20)
    again = pickle.loads(pickle.dumps(part))
    assert again == part and again.key == ("T", "broker-a", 3)
    assert "T@broker-a:3 [10, 20)" in repr(part)


def test_rate_limit_is_proportional_and_exact() -> None:
    a, b, c = ("T", "b", 0), ("T", "b", 1), ("T", "b", 2)
    start = {a: 0, b: 100, c: 50}
    latest = {a: 600, b: 400, c: 50, ("T", "b", 3): 100}  # backlogs 600, 300, 0, 100 (new queue)
    end = rate_limit(start, latest, 100)
    taken = {k: end[k] - start.get(k, 0) for k in end}
    assert sum(taken.values()) == 100
    assert taken == {a: 60, b: 30, c: 0, ("T", "b", 3): 10}
    # everything fits: all of it
    assert rate_limit(start, latest, 10_000) == latest
    # odd shares: the remainder goes to the largest fractions, never past a backlog
    uneven = rate_limit({a: 0, b: 0, c: 0}, {a: 1, b: 1, c: 1}, 2)
    assert sum(uneven.values()) == 2 and all(v <= 1 for v in uneven.values())


# -- the row decoder ----------------------------------------------------------------------------------


def test_arrow_schema_is_what_spark_expects() -> None:
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def record(offset: int, body: bytes, props: dict[str, str], *, sys_flag: int = 0, v6: bool = False) -> bytes:
    host = pack_host("::1", 10911) if v6 else pack_host("10.1.2.3", 10911)
    if v6:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return encode_stored(
        topic=b"T",
        body=body,
        properties=properties_to_string(props).encode(),
        born_host=pack_host("127.0.0.1", 5),
        store_host=host,
        queue_offset=offset,
        commit_log_offset=1000 + offset,
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + offset,
        store_timestamp=1_700_000_000_500 + offset,
        reconsume_times=offset % 3,
    )


def test_columns_decode_records_like_the_protocol_decoder() -> None:
    uniq = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    body = b"".join(
        [
            record(
                0, b"plain", {uniq: "A" * 32, "TAGS": "red", "KEYS": "k1 k2", "color": "blue", "WAIT": "true"}
            ),
            record(1, b"no uniq key", {"TAGS": "green"}),
            record(
                2, zlib.compress(b"inflated " * 50), {"TAGS": "red"}, sys_flag=MessageSysFlag.COMPRESSED_FLAG
            ),
            record(3, b"ipv6 store host", {"TAGS": "red", "x": "y"}, v6=True),
            record(4, b"beyond the range", {"TAGS": "red"}),
        ]
    )
    columns = Columns("T", "broker-a", 2)
    assert columns.add(body, 0, 4, None) == 0
    assert columns.body_bytes == len(b"plain" + b"no uniq key" + b"inflated " * 50 + b"ipv6 store host")
    batch = columns.flush()
    assert columns.body_bytes == 0
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["queueOffset"] for r in rows] == [0, 1, 2, 3]
    assert rows[0]["msgId"] == "A" * 32
    assert rows[1]["msgId"] == offset_msg_id_from_packed(pack_host("10.1.2.3", 10911), 1001)
    assert [r["body"] for r in rows] == [b"plain", b"no uniq key", b"inflated " * 50, b"ipv6 store host"]
    assert [r["tags"] for r in rows] == ["red", "green", "red", "red"]
    assert rows[0]["keys"] == "k1 k2" and rows[1]["keys"] is None
    assert [dict(r["properties"]) for r in rows] == [{"color": "blue"}, {}, {}, {"x": "y"}]
    assert rows[2]["reconsumeTimes"] == 2 and rows[0]["topic"] == "T" and rows[3]["queueId"] == 2
    assert (
        rows[0]["bornTimestamp"].timestamp() == 1_700_000_000
        and rows[0]["storeTimestamp"].microsecond == 500_000
    )
    assert len(columns) == 0  # flushed


def test_columns_filter_tags_exactly_and_report_the_first_offset() -> None:
    body = b"".join(record(i, b"m%d" % i, {"TAGS": tag}) for i, tag in enumerate(["a", "b", "ab", "b"]))
    columns = Columns("T", "broker-a", 0)
    assert columns.add(body, 1, 10, tag_set("b || c")) == 1
    assert [r["queueOffset"] for r in columns.flush().to_pylist()] == [1, 3]
    assert tag_set("*") is None and tag_set(" a ||b||") == frozenset({"a", "b"})


def test_columns_refuse_a_corrupt_record() -> None:
    good = record(0, b"x", {})
    columns = Columns("T", "broker-a", 0)
    with pytest.raises(MessageDecodeError, match="offset 0"):
        columns.add(good[:-3], 0, 10, None)
