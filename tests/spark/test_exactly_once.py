"""The sink's exactly-once mode (``delivery=exactly-once``): each task's rows are half
messages, committed by the driver when Spark commits the write, rolled back when it aborts; a
retried task's first attempt is rolled back; a re-run of a committed batch is not delivered
again; the broker's check asks the sink's listener, which answers from the commit record."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import TaskContext
from pyspark.sql import functions as F

from finchmq.broker.transaction import HALF_TOPIC, OP_TOPIC
from finchmq.client import BlockingTransactionProducer, MessageConst
from finchmq.spark._clients import close_shared_clients
from finchmq.spark._transactions import (
    CommitRecord,
    ensure_commit_topic,
    find_record,
    shared_transaction_producer,
)
from finchmq.spark._write import TxnTag, WriteIds, write_halves
from finchmq.spark.options import WriteOptions
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

from .conftest import BROKER, create_topic, fill, queue_messages, read

pytestmark = pytest.mark.timeout(300)


def queue_size(server: EmbeddedServer, topic: str) -> int:
    assert server.broker is not None
    return server.broker.store.get_max_offset_in_queue(topic, 0)


def sent_halves(server: EmbeddedServer, since: int) -> set[int]:
    """The queue offsets of the half messages sent from offset ``since`` on; not the copies the
    broker's check puts back while a half is inside its check immunity (they have no op of their
    own: the op of the first one ends them too)."""
    halves, _ = queue_messages(server, HALF_TOPIC, since)
    prepared = MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET
    return {m.queue_offset for m in halves if prepared not in m.properties}


def ended_halves(server: EmbeddedServer) -> set[int]:
    """The half messages' queue offsets op messages mark done."""
    ops, _ = queue_messages(server, OP_TOPIC)
    return {int(offset) for m in ops for offset in m.body.split(b",") if offset}


def writer(df: Any, namesrv: str, topic: str, **options: str) -> Any:
    w = df.write.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
    w = w.option("delivery", "exactly-once")
    for key, value in options.items():
        w = w.option(key, value)
    return w.mode("append")


def bodies(spark: Any, namesrv: str, topic: str) -> Counter[bytes]:
    return Counter(r.body for r in read(spark, namesrv, topic).select("body").collect())


@pytest.fixture
def signal(tmp_path: Path, server: EmbeddedServer) -> Iterator[Callable[..., str]]:
    """``signal(n, also)``: a file that appears once ``n`` more half messages are stored than now
    and ``also()`` holds (a UDF in a Spark worker waits for it: the test process watches the
    embedded broker's store)."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def make(n: int, also: Callable[[], bool] = lambda: True) -> str:
        path = tmp_path / f"halves-{n}-{len(threads)}"
        target = queue_size(server, HALF_TOPIC) + n

        def watch() -> None:
            while not stop.is_set():
                if queue_size(server, HALF_TOPIC) >= target and also():
                    path.touch()
                    return
                stop.wait(0.05)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        threads.append(thread)
        return str(path)

    yield make
    stop.set()
    for thread in threads:
        thread.join()


def wait_for_file(path: str) -> None:
    """In a Spark worker: wait (60 s at most) for ``path`` to exist."""
    import os  # noqa: PLC0415 - runs in the worker
    import time  # noqa: PLC0415

    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_batch_write_commits_every_row_once(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name)
    df = spark.range(300, numPartitions=3).select(F.concat(F.lit("row-"), F.col("id")).alias("body"))
    writer(df, namesrv, name).save()
    assert bodies(spark, namesrv, name) == Counter(f"row-{i}".encode() for i in range(300))


def test_sharded_rows_are_committed_in_order(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name)
    keys = ["alice", "bob", "carol"]
    rows = [(f"{k}-{i:03d}", k) for i in range(30) for k in keys]
    df = spark.createDataFrame(rows, "body string, shardingKey string").repartition(1)
    writer(df, namesrv, name).save()
    back = read(spark, namesrv, name).select("queueId", "queueOffset", "body").collect()
    for key in keys:
        mine = sorted((r.queueOffset, r.body.decode()) for r in back if r.body.startswith(key.encode()))
        assert [b for _, b in mine] == [f"{key}-{i:03d}" for i in range(30)]


def test_aborted_write_delivers_nothing(
    spark: Any, namesrv: str, name: str, server: EmbeddedServer, signal: Callable[..., str]
) -> None:
    """Partition 0 succeeds (its halves stored); partition 1 fails on both attempts once that
    task is done; Spark aborts the write and the driver rolls partition 0's halves back."""
    create_topic(namesrv, name)
    tracker = spark.sparkContext.statusTracker()

    def a_task_done() -> bool:
        stages = (tracker.getStageInfo(s) for s in tracker.getActiveStageIds())
        return any(s is not None and s.numCompletedTasks >= 1 for s in stages)

    ready = signal(100, a_task_done)
    halves_before = queue_size(server, HALF_TOPIC)

    @F.udf("string", useArrow=False)
    def failing(i: int) -> str:
        context = TaskContext.get()
        if context is not None and context.partitionId() == 1 and i == 150:
            wait_for_file(ready)
            raise RuntimeError("injected failure on every attempt")
        return f"row-{i}"

    df = spark.range(200, numPartitions=2).select(failing("id").alias("body"))
    with pytest.raises(Exception, match="injected failure"):
        writer(df, namesrv, name).save()
    # Every stored half was ended (an op message names it) and none was committed.
    stored = len(sent_halves(server, halves_before))
    assert stored >= 100
    wait_until(
        lambda: not sent_halves(server, halves_before) - ended_halves(server),
        what=f"the {stored} halves rolled back",
    )
    assert bodies(spark, namesrv, name) == Counter()


def test_task_retry_rolls_back_the_first_attempt(
    spark: Any, namesrv: str, name: str, server: EmbeddedServer, signal: Callable[..., str]
) -> None:
    """A task that fails after part of its halves were stored is retried: the consumer sees each
    row once (no de-duplication needed)."""
    create_topic(namesrv, name, queues=2)
    halves_before = queue_size(server, HALF_TOPIC)
    ready = signal(60)  # rows 0-59 of the first attempt (the UDF's output reaches the sink in buffers)

    @F.udf("string", useArrow=False)
    def flaky(i: int) -> str:
        context = TaskContext.get()
        if i == 150 and context is not None and context.attemptNumber() == 0:
            wait_for_file(ready)
            raise RuntimeError("injected failure on the first attempt")
        return f"row-{i}-" + "x" * 2000  # big enough that the UDF worker's output buffer flushes

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
    try:
        df = spark.range(200, numPartitions=1).select(flaky("id").alias("body"))
        writer(df, namesrv, name).save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert bodies(spark, namesrv, name) == Counter(f"row-{i}-".encode() + b"x" * 2000 for i in range(200))
    assert queue_size(server, HALF_TOPIC) - halves_before >= 260, "the first attempt stored no halves"


def test_the_commit_record_names_the_batch(spark: Any, namesrv: str, name: str) -> None:
    create_topic(namesrv, name)
    commits = name + "_commits"
    df = spark.range(20, numPartitions=2).select(F.col("id").cast("string").alias("body"))
    writer(df, namesrv, name, commitTopic=commits).save()
    opts = WriteOptions.parse({"nameServer": namesrv})
    found = read(spark, namesrv, commits).collect()
    assert len(found) == 1
    query = found[0].keys.split("/")[0]
    record = wait_until(lambda: find_record(opts, commits, query, 0), what="the commit record by key")
    assert record is not None and record.batch == 0 and len(record.epochs) == 2


def stream(spark: Any, namesrv: str, source: str, target: str, checkpoint: str, **options: str) -> Any:
    """topic -> upper-cased body -> topic, exactly once, ``Trigger.AvailableNow``."""
    frame = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .load()
        .select(F.upper(F.col("body").cast("string")).alias("body"))
    )
    w = (
        frame.writeStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", target)
        .option("delivery", "exactly-once")
        .option("checkpointLocation", checkpoint)
    )
    for key, value in options.items():
        w = w.option(key, value)
    return w.trigger(availableNow=True).start()


def test_streaming_round_trip_and_a_rerun_of_a_committed_batch(
    spark: Any, namesrv: str, name: str, tmp_path: Path
) -> None:
    """Every micro-batch is committed with Spark's; then the last batch's entry in the
    checkpoint's commit log is removed (as when the driver dies after the sink's commit, before
    Spark's): the restarted query runs that batch again and the sink rolls it back."""
    source, target = name + "_in", name + "_out"
    create_topic(namesrv, source)
    create_topic(namesrv, target, queues=2)
    fill(namesrv, source, 15)
    expected = Counter(f"Q{q}-M{i}".encode() for q in range(4) for i in range(15))
    checkpoint = str(tmp_path / "checkpoint")
    query = stream(spark, namesrv, source, target, checkpoint)
    assert query.awaitTermination(180) and query.exception() is None
    assert bodies(spark, namesrv, target) == expected
    commits = sorted(Path(checkpoint, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) >= 3  # 60 rows, 20 a batch
    commits[-1].unlink()
    Path(checkpoint, "commits", f".{commits[-1].name}.crc").unlink(missing_ok=True)  # Hadoop's checksum
    query = stream(spark, namesrv, source, target, checkpoint)
    assert query.awaitTermination(180) and query.exception() is None
    assert Path(checkpoint, "commits", commits[-1].name).exists()  # Spark ran it again
    assert bodies(spark, namesrv, target) == expected
    # The re-run found the batch's record and wrote none (the broker's memory of committed
    # UNIQ_KEYs would hide a second commit of the same rows: the records tell them apart).
    mine = Counter(
        r.keys
        for r in read(spark, namesrv, "finchmq-spark-commits").select("keys").collect()
        if r.keys.startswith(f"{query.id}/")
    )
    assert mine == Counter({f"{query.id}/{int(p.name)}": 1 for p in commits})


def test_the_check_answers_from_the_commit_record(spark: Any, finchmq_server_factory: Any, name: str) -> None:
    """Halves nobody ended (their driver died): the broker checks them with the restarted
    query's producer; the listener commits those the commit record names, rolls back those of
    another attempt of a recorded batch, and those of an unrecorded batch once they are older
    than transactionTimeoutMs."""
    # A check a second; the broker counts a pass over a half still inside its immunity time as a
    # check (as Java's), so transactionCheckMax must outlast transactionTimeoutMs.
    server = finchmq_server_factory(
        {**BROKER, "transactionCheckInterval": "1000", "transactionCheckMax": "100"}
    )
    namesrv = server.namesrv_addr
    create_topic(namesrv, name)
    commits = name + "_commits"
    opts = WriteOptions.parse(
        {
            "nameServer": namesrv,
            "topic": name,
            "delivery": "exactly-once",
            "producerGroup": "txn_" + name,
            "commitTopic": commits,
            "transactionTimeoutMs": "10000",
        }
    )
    ensure_commit_topic(opts)
    query = "q" + name

    def rows(lo: int, hi: int) -> Iterator[pa.RecordBatch]:
        return iter([pa.record_batch({"body": [f"row-{i}" for i in range(lo, hi)]})])

    halves_before, ops_before = queue_size(server, HALF_TOPIC), queue_size(server, OP_TOPIC)
    with BlockingTransactionProducer(opts.producer_group, namesrv_addr=namesrv) as dead:
        committed = TxnTag(commits, query, 0, "epoch-committed", 1)
        write_halves(rows(0, 10), opts, WriteIds(query, "0", 0), committed, dead)
        other = TxnTag(commits, query, 0, "epoch-other-attempt", 2)
        write_halves(rows(100, 110), opts, WriteIds(query, "0", 1), other, dead)
        unrecorded = TxnTag(commits, query, 1, "epoch-unrecorded", 3)
        write_halves(rows(200, 210), opts, WriteIds(query, "1", 0), unrecorded, dead)
        dead.send(CommitRecord(query, 0, frozenset({"epoch-committed"})).message(commits))
    assert queue_size(server, HALF_TOPIC) - halves_before == 30
    shared_transaction_producer(opts)  # the restarted query's: it answers the checks
    try:
        wait_until(
            lambda: queue_size(server, OP_TOPIC) - ops_before >= 30, timeout=120, what="every half ended"
        )
        assert bodies(spark, namesrv, name) == Counter(f"row-{i}".encode() for i in range(10))
    finally:
        close_shared_clients()  # this test's server stops with it; later users connect anew


def test_streaming_task_failure_mid_batch(
    spark: Any, namesrv: str, name: str, tmp_path: Path, server: EmbeddedServer, signal: Callable[..., str]
) -> None:
    """A micro-batch's task fails after part of its halves were stored; Spark retries it: the
    output has every row once."""
    source, target = name + "_in", name + "_out"
    create_topic(namesrv, source, queues=1)
    create_topic(namesrv, target, queues=2)
    fill(namesrv, source, 200, queues=1, body=lambda q, i: f"m{i:03d}-".encode() + b"x" * 2000)
    halves_before = queue_size(server, HALF_TOPIC)
    ready = signal(60)

    @F.udf("string", useArrow=False)
    def flaky(body: bytes) -> str:
        context = TaskContext.get()
        if body.startswith(b"m150-") and context is not None and context.attemptNumber() == 0:
            wait_for_file(ready)
            raise RuntimeError("injected failure on the first attempt")
        return body.decode()

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
    try:
        frame = (
            spark.readStream.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .load()
            .select(flaky("body").alias("body"))
        )
        query = (
            frame.writeStream.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", target)
            .option("delivery", "exactly-once")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(240) and query.exception() is None
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert bodies(spark, namesrv, target) == Counter(f"m{i:03d}-".encode() + b"x" * 2000 for i in range(200))
    assert queue_size(server, HALF_TOPIC) - halves_before >= 260, "the first attempt stored no halves"
