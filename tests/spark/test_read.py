"""Batch reads through real Spark (local mode) from the embedded broker: exact offset ranges,
contents, timestamps, tag filters, partitioning, and the errors users see."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from finchmq.client import MessageConst

from .conftest import Sent, create_topic, error_of, fill, read

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def orders(namesrv: str, name: str) -> Sent:
    """4 queues x 30 messages with tags, keys and a user property."""
    create_topic(namesrv, name)
    return fill(
        namesrv,
        name,
        30,
        tags=lambda q, i: "even" if i % 2 == 0 else "odd",
        keys=lambda q, i: f"order-{q}-{i}",
        props=lambda q, i: {"shop": f"s{q}", "n": str(i)},
    )


def test_reads_every_message_with_its_columns(spark: Any, namesrv: str, orders: Sent) -> None:
    rows = read(spark, namesrv, orders.topic).collect()
    assert len(rows) == orders.count() == 120
    got = {(r.queueId, r.queueOffset): r for r in rows}
    assert set(got) == orders.keys()
    for q, sent_rows in orders.rows.items():
        for offset, body, tags, keys, props in sent_rows:
            row = got[(q, offset)]
            assert (row.topic, row.brokerName, row.body, row.tags, row.keys) == (
                orders.topic,
                "broker-a",
                body,
                tags,
                keys,
            )
            assert row.properties == props
            assert len(row.msgId) == 32 and row.reconsumeTimes == 0
            assert row.bornTimestamp <= row.storeTimestamp
    assert len({r.msgId for r in rows}) == 120


def test_exact_offset_ranges(spark: Any, namesrv: str, orders: Sent) -> None:
    topic = orders.topic
    start = json.dumps({topic: {"broker-a": {"0": 5, "1": -2, "2": 29}}})
    end = json.dumps({topic: {"broker-a": {"0": 12, "1": 3, "3": 0}}})
    df = read(spark, namesrv, topic, startingOffsets=start, endingOffsets=end)
    rows = df.select("queueId", "queueOffset", "body").collect()
    got = sorted((r.queueId, r.queueOffset) for r in rows)
    expected = [(0, o) for o in range(5, 12)] + [(1, o) for o in range(3)] + [(2, 29)]
    assert got == expected  # queue 2 runs to latest (30); queue 3 starts at earliest, ends at 0
    assert {r.body for r in rows if r.queueId == 0} == {f"q0-m{i}".encode() for i in range(5, 12)}
    assert df.rdd.getNumPartitions() == 3


def test_max_records_per_partition_splits_a_queue(spark: Any, namesrv: str, orders: Sent) -> None:
    df = read(spark, namesrv, orders.topic, maxRecordsPerPartition="8")
    assert df.rdd.getNumPartitions() == 4 * 4  # 30 offsets per queue -> 8 + 8 + 8 + 6
    rows = df.select("queueId", "queueOffset").collect()
    assert sorted((r.queueId, r.queueOffset) for r in rows) == sorted(orders.keys())


def test_tag_filter(spark: Any, namesrv: str, orders: Sent) -> None:
    rows = read(spark, namesrv, orders.topic, subExpression="odd").select("tags", "queueOffset").collect()
    assert len(rows) == 60 and {r.tags for r in rows} == {"odd"}
    both = read(spark, namesrv, orders.topic, subExpression="odd || even").count()
    assert both == 120


def test_sql92_filter_on_properties(spark: Any, namesrv: str, name: str) -> None:
    """subExpressionType=SQL92: the broker evaluates the expression on each message's properties
    (the suite's broker runs with enablePropertyFilter=true); filtered offsets are not losses."""
    create_topic(namesrv, name, queues=2)
    fill(namesrv, name, 30, queues=2, props=lambda q, i: {"n": str(i), "region": "eu" if i % 3 else "us"})
    rows = read(spark, namesrv, name, subExpression="n >= 10 AND region = 'us'", subExpressionType="SQL92")
    got = sorted((r.queueId, int(r.properties["n"])) for r in rows.select("queueId", "properties").collect())
    assert got == [(q, i) for q in range(2) for i in range(30) if i >= 10 and i % 3 == 0]
    error = error_of(
        lambda: read(spark, namesrv, name, subExpression="n >", subExpressionType="SQL92").count()
    )
    assert "subExpression" in error and "column" in error


def test_timestamps_resolve_per_queue(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name, queues=2)
    first = fill(namesrv, name, 10, queues=2)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    fill(namesrv, name, 7, queues=2, body=lambda q, i: f"late-{q}-{i}".encode(), sent=first)
    time.sleep(0.05)
    after = int(time.time() * 1000)
    fill(namesrv, name, 3, queues=2, body=lambda q, i: f"later-{q}-{i}".encode(), sent=first)
    rows = read(spark, namesrv, name, startingTimestamp=str(middle), endingTimestamp=str(after)).collect()
    assert sorted((r.queueId, r.queueOffset) for r in rows) == [
        (q, o) for q in range(2) for o in range(10, 17)
    ]
    assert all(r.body.startswith(b"late-") for r in rows)
    assert read(spark, namesrv, name, startingTimestamp=str(int(time.time() * 1000) + 60_000)).count() == 0


def test_several_topics(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name + "A", queues=2)
    create_topic(namesrv, name + "B", queues=3)
    fill(namesrv, name + "A", 5, queues=2)
    fill(namesrv, name + "B", 4, queues=3)
    rows = read(spark, namesrv, f"{name}A,{name}B").groupBy("topic").count().collect()
    assert {r.topic: r["count"] for r in rows} == {name + "A": 10, name + "B": 12}


def test_empty_topic_reads_nothing(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name, queues=2)
    assert read(spark, namesrv, name).count() == 0


def test_written_keys_and_uniq_key_surface_as_columns(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name, queues=1)
    uniq = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    fill(namesrv, name, 1, queues=1, props=lambda q, i: {uniq: "0123456789ABCDEF0123456789ABCDEF", "a": "b"})
    row = read(spark, namesrv, name).first()
    assert row.msgId == "0123456789ABCDEF0123456789ABCDEF" and row.properties == {"a": "b"}


# -- errors: one clear message naming the option and the value --------------------------------------


def test_unknown_topic(spark: Any, namesrv: str, name: str) -> None:
    text = error_of(lambda: read(spark, namesrv, "NoSuchTopic_" + name).collect())
    assert f"rocketmq option topic='NoSuchTopic_{name}': topic 'NoSuchTopic_{name}' does not exist" in text


def test_unreachable_name_server(spark: Any) -> None:
    text = error_of(lambda: read(spark, "127.0.0.1:1", "Orders").collect())
    assert "rocketmq option nameServer='127.0.0.1:1': cannot reach the name server" in text


def test_malformed_offsets_json(spark: Any, namesrv: str, orders: Sent) -> None:
    text = error_of(lambda: read(spark, namesrv, orders.topic, startingOffsets='{"x": ').collect())
    assert "rocketmq option startingOffsets='{\"x\": ': malformed JSON" in text


def test_option_of_the_wrong_type(spark: Any, namesrv: str, orders: Sent) -> None:
    text = error_of(lambda: read(spark, namesrv, orders.topic, pullBatchSize="lots").collect())
    assert "rocketmq option pullBatchSize='lots': expected an integer" in text


def test_unknown_queue_in_offsets(spark: Any, namesrv: str, orders: Sent) -> None:
    start = json.dumps({orders.topic: {"broker-z": {"0": 1}}})
    text = error_of(lambda: read(spark, namesrv, orders.topic, startingOffsets=start).collect())
    assert f"queue {orders.topic}@broker-z:0 does not exist" in text and "startingOffsets=" in text


def test_start_after_end(spark: Any, namesrv: str, orders: Sent) -> None:
    start = json.dumps({orders.topic: {"broker-a": {"0": 20}}})
    end = json.dumps({orders.topic: {"broker-a": {"0": 10}}})
    text = error_of(
        lambda: read(spark, namesrv, orders.topic, startingOffsets=start, endingOffsets=end).collect()
    )
    assert "the range would start at 20, after its end 10" in text


def test_a_schema_cannot_be_imposed(spark: Any, namesrv: str, orders: Sent) -> None:
    reader = spark.read.format("rocketmq").schema("body binary").option("nameServer", namesrv)
    text = error_of(lambda: reader.option("topic", orders.topic).load().collect())
    assert "the rocketmq source has a fixed schema" in text
