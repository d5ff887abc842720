"""The ``namespace`` option (Java ``ClientConfig.namespace``): the source and the sink send topics,
groups and the commit topic as ``namespace%name``, and the ``topic`` column shows the user's
name. What a namespace writes, a read in the same namespace sees; a read without it does not
(its plain topic does not exist). The broker side is checked with the admin API."""

from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import BlockingAdminClient, MessageConst, MQClientError, NoRouteError

from .conftest import create_topic, error_of, read, wait_while_running

pytestmark = pytest.mark.timeout(300)


def namespace_of_test(name: str) -> str:
    return f"ns{zlib.crc32(name.encode()):08x}"


def stored(admin: BlockingAdminClient, topic: str) -> int:
    """How many messages the broker holds in ``topic`` (every queue's max - min offset)."""
    return sum(o.max_offset - o.min_offset for o in admin.topic_status(topic).offset_table.values())


def sink(df: Any, namesrv: str, namespace: str, **options: str) -> Any:
    w = df.write.format("rocketmq").option("nameServer", namesrv).option("namespace", namespace)
    for key, value in options.items():
        w = w.option(key, value)
    return w.mode("append")


def test_batch_write_and_read_in_a_namespace(spark: Any, namesrv: str, name: str) -> None:
    ns = namespace_of_test(name)
    on_broker = f"{ns}%{name}"
    create_topic(namesrv, on_broker)
    # At least once, the topic from the column; exactly once, from the option.
    plain = spark.createDataFrame([(name, f"plain-{i}") for i in range(20)], "topic string, body string")
    sink(plain, namesrv, ns).save()
    txn = spark.createDataFrame([(f"txn-{i}",) for i in range(10)], "body string")
    sink(txn, namesrv, ns, topic=name, delivery="exactly-once").save()

    rows = read(spark, namesrv, name, namespace=ns).collect()
    expected = {f"plain-{i}".encode() for i in range(20)} | {f"txn-{i}".encode() for i in range(10)}
    assert Counter(bytes(r.body) for r in rows) == Counter(expected)
    assert {r.topic for r in rows} == {name}  # the user's name, not ns%name
    assert {r.properties.get(MessageConst.PROPERTY_INSTANCE_ID) for r in rows} == {ns}  # as Java's producer

    with BlockingAdminClient(namesrv_addr=namesrv) as admin:
        assert stored(admin, on_broker) == 30
        with pytest.raises(NoRouteError):
            admin.topic_route(name)
        assert stored(admin, f"{ns}%finchmq-spark-commits") == 1  # the commit record, in the namespace

    # Without the namespace the plain topic does not exist; the full name reads the same rows.
    text = error_of(lambda: read(spark, namesrv, name).collect())
    assert f"topic {name!r} does not exist" in text
    text = error_of(lambda: read(spark, namesrv, name, namespace=ns + "x").collect())
    assert f"topic {name!r} ('{ns}x%{name}' in namespace {ns}x) does not exist" in text
    full = read(spark, namesrv, on_broker).select("topic", "body").collect()
    assert {r.topic for r in full} == {on_broker} and len(full) == 30


def test_streaming_read_and_write_in_a_namespace(spark: Any, namesrv: str, name: str, tmp_path: Path) -> None:
    """A stream reads ``ns%source`` (committing offsets for ``ns%group``) and writes exactly once
    to ``ns%target``; the offsets JSON and the topic column name the plain topics."""
    ns = namespace_of_test(name)
    source, target, group = name + "_in", name + "_out", f"g_{name}"[:60]
    create_topic(namesrv, f"{ns}%{source}")
    create_topic(namesrv, f"{ns}%{target}", queues=2)
    rows = spark.createDataFrame([(f"m{i}",) for i in range(24)], "body string")
    sink(rows, namesrv, ns, topic=source).save()
    stream = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("namespace", ns)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", group)
        .load()
        .selectExpr("upper(cast(body as string)) as body", "topic as origin")
        .selectExpr("body", "map('origin', origin) as properties")
    )
    query = (
        stream.writeStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("namespace", ns)
        .option("topic", target)
        .option("delivery", "exactly-once")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    with BlockingAdminClient(namesrv_addr=namesrv) as admin:

        def consumed() -> bool:  # the query's offsets, stored for ns%group on ns%source
            try:
                stats = admin.consume_stats(f"{ns}%{group}", f"{ns}%{source}")
            except MQClientError:  # no offsets stored for the group yet
                return False
            return sum(w.consumer_offset for w in stats.offset_table.values()) == 24

        try:
            wait_while_running(query, consumed, f"offsets of {ns}%{group}")
            wait_while_running(query, lambda: stored(admin, f"{ns}%{target}") >= 24, "the rows written")
        finally:
            query.stop()
        assert query.exception() is None
        assert stored(admin, f"{ns}%{target}") == 24
        offsets = query.recentProgress[0]["sources"][0]["endOffset"]
        assert source in offsets and f"{ns}%{source}" not in offsets
    out = read(spark, namesrv, target, namespace=ns).collect()
    assert Counter(bytes(r.body) for r in out) == Counter(f"M{i}".encode() for i in range(24))
    assert {r.topic for r in out} == {target} and {r.properties["origin"] for r in out} == {source}
