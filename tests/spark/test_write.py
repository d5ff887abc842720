"""Writing through the ``rocketmq`` sink: batch saves read back intact, ordered routing by
sharding key, deterministic UNIQ_KEYs that survive task retries, the errors users see, and a
streaming topic -> transform -> topic round trip."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark import TaskContext
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType

from finchmq.client import BlockingAdminClient, Message, MessageQueue, select_message_queue_by_hash
from finchmq.spark._write import WriteIds

from .conftest import create_topic, error_of, fill, read

pytestmark = pytest.mark.timeout(300)

ROWS = StructType(
    [
        StructField("body", StringType()),
        StructField("topic", StringType()),
        StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)


def test_write_then_read_back_with_properties_intact(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name)
    rows = [
        (
            f"order {i}",
            name,
            f"cat{i % 3}",
            [f"o{i}", f"c{i % 5}"],
            {"amount": str(i * 10), "currency": "EUR"},
        )
        for i in range(50)
    ]
    df = spark.createDataFrame(rows, ROWS)
    df.write.format("rocketmq").option("nameServer", namesrv).mode("append").save()
    back = read(spark, namesrv, name).collect()
    assert len(back) == 50
    by_body = {r.body.decode(): r for r in back}
    for body, _, tags, keys, props in rows:
        row = by_body[body]
        assert row.tags == tags and row.keys == " ".join(keys) and row.properties == props
    assert len({r.msgId for r in back}) == 50


def test_topic_option_overrides_the_column_and_binary_bodies(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name, queues=2)
    df = spark.createDataFrame(
        [(bytes([i, 0, 255]), "elsewhere") for i in range(10)], "body binary, topic string"
    )
    df.write.format("rocketmq").option("nameServer", namesrv).option("topic", name).mode("append").save()
    assert sorted(r.body for r in read(spark, namesrv, name).collect()) == [
        bytes([i, 0, 255]) for i in range(10)
    ]


def test_sharding_key_routes_in_order(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name)
    keys = ["alice", "bob", "carol", "dave", "erin"]
    rows = [(f"{k}-{i:03d}", k) for i in range(40) for k in keys]
    df = spark.createDataFrame(rows, "body string, shardingKey string").repartition(1)
    df.write.format("rocketmq").option("nameServer", namesrv).option("topic", name).option(
        "sendBatchSize", "7"
    ).mode("append").save()
    back = read(spark, namesrv, name).select("queueId", "queueOffset", "body").collect()
    queues = [MessageQueue(name, "broker-a", q) for q in range(4)]
    for key in keys:
        mine = sorted(
            (r.queueOffset, r.queueId, r.body.decode()) for r in back if r.body.startswith(key.encode())
        )
        expected_queue = select_message_queue_by_hash(queues, Message(name, b"x"), key).queue_id
        assert {q for _, q, _ in mine} == {expected_queue}, key
        assert [b for _, _, b in mine] == [f"{key}-{i:03d}" for i in range(40)]  # stored in order


def test_task_retry_resends_with_the_same_ids(spark: Any, namesrv: str, name: str) -> None:
    """A task that fails after part of its rows were sent is retried; the resent messages carry
    the ids of the first attempt, so de-duplicating by msgId gives every row exactly once."""
    create_topic(namesrv, name, queues=2)

    @F.udf("string", useArrow=False)  # an Arrow UDF would need pandas
    def flaky(i: int) -> str:
        context = TaskContext.get()
        if i == 150 and context is not None and context.attemptNumber() == 0:
            # Fail only once the first rows are stored: the retry must re-send them.
            with BlockingAdminClient(namesrv_addr=namesrv) as admin:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    stats = admin.topic_status(name).offset_table.values()
                    if sum(w.max_offset for w in stats) > 0:
                        break
                    time.sleep(0.05)
            raise RuntimeError("injected failure on the first attempt")
        return f"row-{i}-" + "x" * 2000  # big enough that the UDF worker's output buffer flushes

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
    try:
        df = spark.range(200, numPartitions=1).select(flaky("id").alias("body"))
        df.write.format("rocketmq").option("nameServer", namesrv).option("topic", name).option(
            "sendBatchSize", "10"
        ).mode("append").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    back = read(spark, namesrv, name).select("msgId", "body").collect()
    by_id: dict[str, set[bytes]] = {}
    for r in back:
        by_id.setdefault(r.msgId, set()).add(r.body)
    assert len(by_id) == 200
    assert sorted(b for bodies in by_id.values() for b in bodies) == sorted(
        f"row-{i}-".encode() + b"x" * 2000 for i in range(200)
    )
    assert len(back) > 200, "the first attempt sent nothing before failing; the retry was not exercised"


def test_save_modes_other_than_append_are_refused(spark: Any, namesrv: str, name: str) -> None:
    df = spark.createDataFrame([("x",)], "body string")
    writer = df.write.format("rocketmq").option("nameServer", namesrv).option("topic", name)
    text = error_of(lambda: writer.mode("overwrite").save())
    assert "rocketmq sink: save mode 'overwrite' is not supported" in text and "mode('append')" in text
    for mode in ("ignore", "errorifexists"):
        text = error_of(lambda mode=mode: writer.mode(mode).save())
        assert "cannot be written in the" in text and "Append" in text


def test_bad_columns_and_rows(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name, queues=1)
    no_body = spark.createDataFrame([("x",)], "value string")
    text = error_of(
        lambda: (
            no_body.write.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", name)
            .mode("append")
            .save()
        )
    )
    assert "rocketmq sink: the DataFrame needs a 'body' column" in text
    no_topic = spark.createDataFrame([("x",)], "body string")
    text = error_of(
        lambda: no_topic.write.format("rocketmq").option("nameServer", namesrv).mode("append").save()
    )
    assert "no topic: set the 'topic' option or give the DataFrame a 'topic' column" in text
    null_body = spark.createDataFrame([("x",), (None,)], "body string").repartition(1)
    text = error_of(
        lambda: (
            null_body.write.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", name)
            .mode("append")
            .save()
        )
    )
    assert "rocketmq sink: row 1 of this partition has an empty or null body" in text


def test_unreachable_name_server_names_the_option(spark: Any) -> None:
    df = spark.createDataFrame([("x",)], "body string")
    writer = df.write.format("rocketmq").option("nameServer", "127.0.0.1:1").option("topic", "T")
    text = error_of(lambda: writer.mode("append").save())
    assert "rocketmq option nameServer='127.0.0.1:1': cannot reach the name server" in text


def test_unknown_topic_without_auto_creation(spark: Any, finchmq_server_factory: Any, name: str) -> None:
    server = finchmq_server_factory({"autoCreateTopicEnable": "false"})
    df = spark.createDataFrame([("x",)], "body string")
    writer = df.write.format("rocketmq").option("nameServer", server.namesrv_addr).option("topic", name)
    text = error_of(lambda: writer.mode("append").save())
    assert f"rocketmq sink: topic '{name}' does not exist on the name server {server.namesrv_addr}" in text


def test_streaming_topic_to_topic_round_trip(spark: Any, namesrv: str, name: str, tmp_path: Path) -> None:
    source, target = name + "_in", name + "_out"
    create_topic(namesrv, source)
    create_topic(namesrv, target, queues=2)
    sent = fill(
        namesrv,
        source,
        15,
        tags=lambda q, i: "vip" if i % 3 == 0 else "std",
        keys=lambda q, i: f"k{q}-{i}",
        props=lambda q, i: {"hop": "1"},
    )
    transformed = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            F.upper(F.col("body").cast("string")).alias("body"),
            "tags",
            "keys",
            F.map_concat("properties", F.create_map(F.lit("from"), F.col("msgId"))).alias("properties"),
        )
    )
    query = (
        transformed.writeStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    source_rows = {r.msgId: r for r in read(spark, namesrv, source).collect()}
    out = read(spark, namesrv, target).collect()
    assert len(out) == sent.count() == 60
    for row in out:
        origin = source_rows[row.properties["from"]]
        assert row.body == origin.body.decode().upper().encode()
        assert (row.tags, row.keys, row.properties["hop"]) == (origin.tags, origin.keys, "1")
    # UNIQ_KEY = hash(query id, batch id, partition, row index): the ids the sink promises.
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
    possible = {
        WriteIds(str(query.id), str(b), p).uniq_key(i) for b in batches for p in range(8) for i in range(60)
    }
    assert Counter(r.msgId in possible for r in out) == Counter({True: 60})
