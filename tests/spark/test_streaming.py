"""Structured Streaming reads: Trigger.AvailableNow and processing-time triggers, stopped and
restarted from the checkpoint, into a foreachBatch sink that de-duplicates by batch id (Spark's
idempotent-sink pattern): every message ends up there exactly once. Also admission control,
queues added while a query runs, and offsets committed for lag monitoring."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import BlockingAdminClient

from .conftest import Sent, create_topic, fill, wait_while_running

pytestmark = pytest.mark.timeout(300)

Key = tuple[int, int]  # (queueId, queueOffset)


class DedupSink:
    """foreachBatch target: keeps the first delivery of each batch id and checks replays match."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, int, bytes]]] = {}
        self.replays_differing: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted(
            (r.queueId, r.queueOffset, bytes(r.body))
            for r in df.select("queueId", "queueOffset", "body").collect()
        )
        with self.lock:
            if batch_id in self.batches:
                if self.batches[batch_id] != rows:
                    self.replays_differing.append(batch_id)
                return
            self.batches[batch_id] = rows

    def keys(self) -> list[Key]:
        with self.lock:
            return [(q, o) for rows in self.batches.values() for q, o, _ in rows]

    def count(self) -> int:
        return len(self.keys())

    def bodies(self) -> dict[Key, bytes]:
        with self.lock:
            return {(q, o): b for rows in self.batches.values() for q, o, b in rows}


def stream(spark: Any, namesrv: str, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def assert_exactly_once(sink: DedupSink, sent: Sent) -> None:
    keys = sink.keys()
    duplicates = [k for k, n in Counter(keys).items() if n > 1]
    assert not duplicates, f"delivered twice: {duplicates[:5]}"
    assert set(keys) == sent.keys()
    bodies = sink.bodies()
    for q, rows in sent.rows.items():
        for offset, body, *_ in rows:
            assert bodies[(q, offset)] == body
    assert not sink.replays_differing


def test_available_now_with_admission_control_then_resume(
    spark: Any, namesrv: str, name: str, tmp_path: Path
) -> None:
    create_topic(namesrv, name)
    sent = fill(namesrv, name, 25)
    sink = DedupSink()

    def run() -> Any:
        query = (
            stream(spark, namesrv, name, startingOffsets="earliest", maxOffsetsPerTrigger="40")
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "availableNow query did not finish"
        return query

    first = run()
    sizes = [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]]
    assert sizes == [40, 40, 20]  # 100 offsets, at most 40 per micro-batch
    assert_exactly_once(sink, sent)

    fill(namesrv, name, 5, sent=sent)  # 20 more while no query runs
    second = run()
    assert sum(p["numInputRows"] for p in second.recentProgress) == 20
    assert_exactly_once(sink, sent)


def test_processing_time_trigger_stop_and_restart_exactly_once(
    spark: Any, namesrv: str, name: str, tmp_path: Path
) -> None:
    create_topic(namesrv, name)
    group = f"lag_{name}"[:60]
    sent = fill(namesrv, name, 10)
    sink = DedupSink()

    def start() -> Any:
        return (
            stream(spark, namesrv, name, startingOffsets="earliest", consumerGroup=group)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    query = start()
    wait_while_running(query, lambda: sink.count() >= 40, "first wave read")
    fill(namesrv, name, 10, sent=sent)
    wait_while_running(query, lambda: sink.count() >= 80, "second wave read")
    query.stop()
    fill(namesrv, name, 10, sent=sent)  # written while the query is down
    query = start()
    try:
        wait_while_running(query, lambda: sink.count() >= 120, "third wave read after the restart")
        wait_while_running(
            query, lambda: query.lastProgress is not None and query.lastProgress["numInputRows"] == 0, "idle"
        )
    finally:
        query.stop()
    assert_exactly_once(sink, sent)
    # The committed offsets reached the broker for lag monitoring (Spark's checkpoint is the truth).
    with BlockingAdminClient(namesrv_addr=namesrv) as admin:
        stats = admin.consume_stats(group, name)
    assert {mq.queue_id: w.consumer_offset for mq, w in stats.offset_table.items()} == dict.fromkeys(
        range(4), 30
    )
    assert stats.compute_total_diff() == 0


def test_new_queues_are_read_from_their_start(spark: Any, namesrv: str, name: str, tmp_path: Path) -> None:
    create_topic(namesrv, name, queues=2)
    sent = fill(namesrv, name, 5, queues=2)
    sink = DedupSink()
    query = (
        stream(spark, namesrv, name, startingOffsets="earliest")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_while_running(query, lambda: sink.count() >= 10, "the first two queues read")
        create_topic(namesrv, name, queues=4)  # two more queues appear
        fill(namesrv, name, 6, queues=4, sent=sent)
        wait_while_running(query, lambda: sink.count() >= 10 + 24, "the new queues read")
    finally:
        query.stop()
    assert_exactly_once(sink, sent)
    assert sorted(o for q, o in sink.keys() if q == 3)  # noqa: SIM118 - a method, not a dict == list(range(6))


def test_starting_offsets_latest_skips_what_is_there(
    spark: Any, namesrv: str, name: str, tmp_path: Path
) -> None:
    create_topic(namesrv, name, queues=2)
    fill(namesrv, name, 5, queues=2)
    sink = DedupSink()
    query = (
        stream(spark, namesrv, name)  # streaming default: latest
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_while_running(query, lambda: query.lastProgress is not None, "a first micro-batch")
        fresh = fill(namesrv, name, 3, queues=2, body=lambda q, i: f"fresh-{q}-{i}".encode())
        wait_while_running(query, lambda: sink.count() >= 6, "the fresh messages read")
    finally:
        query.stop()
    assert sorted(sink.keys()) == sorted(fresh.keys()) == [(q, o) for q in range(2) for o in range(5, 8)]
