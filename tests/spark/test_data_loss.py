"""failOnDataLoss, both ways, after the broker deleted commit-log segments a query still needed:
batch reads with explicit offsets, and a streaming query restarted from its checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from finchmq.client import BlockingPullConsumer, MessageQueue
from finchmq.testing import EmbeddedServer

from .conftest import BROKER, create_topic, error_of, fill, read

pytestmark = pytest.mark.timeout(300)

# 64 KiB commit-log segments and no retention: a few hundred 2 KiB messages span several
# segments, and a manual clean-up deletes all but the one being written.
SMALL_SEGMENTS = {**BROKER, "mappedFileSizeCommitLog": str(64 * 1024), "fileReservedTime": "0"}


def delete_old_segments(server: EmbeddedServer) -> int:
    """The broker's clean-up, now (it runs in a thread of its own, as the store's service does)."""
    assert server.broker is not None
    store = server.broker.store
    return int(server.call(asyncio.to_thread(store.clean_once, manual=True)))


def min_offset(namesrv: str, topic: str) -> int:
    with BlockingPullConsumer(f"probe_{abs(hash(topic)) % 10**6}", namesrv_addr=namesrv) as consumer:
        return consumer.min_offset(MessageQueue(topic, "broker-a", 0))


@pytest.fixture
def lossy(finchmq_server_factory: Callable[..., EmbeddedServer], name: str) -> tuple[EmbeddedServer, str]:
    server = finchmq_server_factory(SMALL_SEGMENTS)
    create_topic(server.namesrv_addr, name, queues=1)
    return server, name


def test_batch_read_of_deleted_offsets(spark: Any, lossy: tuple[EmbeddedServer, str]) -> None:
    server, topic = lossy
    namesrv = server.namesrv_addr
    fill(namesrv, topic, 120, queues=1, body=lambda q, i: b"%04d" % i + b"x" * 2000, batch=10)
    assert delete_old_segments(server) >= 2
    first = min_offset(namesrv, topic)
    assert 0 < first < 120

    def read_from_0(fail: str) -> Any:
        start = json.dumps({topic: {"broker-a": {"0": 0}}})
        return read(spark, namesrv, topic, startingOffsets=start, failOnDataLoss=fail)

    text = error_of(lambda: read_from_0("true").collect())
    assert f"rocketmq: queue {topic}@broker-a:0: offsets [0, {first}) are no longer on the broker" in text
    assert "Set the option failOnDataLoss=false" in text
    rows = read_from_0("false").select("queueOffset", "body").collect()
    assert sorted(r.queueOffset for r in rows) == list(range(first, 120))
    assert all(r.body.startswith(b"%04d" % r.queueOffset) for r in rows)
    # earliest is resolved when the query is planned: nothing is missing from it
    assert read(spark, namesrv, topic).count() == (120 - first)


def test_streaming_restart_after_deleted_offsets(
    spark: Any, lossy: tuple[EmbeddedServer, str], tmp_path: Path
) -> None:
    server, topic = lossy
    namesrv = server.namesrv_addr
    fill(namesrv, topic, 10, queues=1, body=lambda q, i: b"%04d" % i + b"x" * 2000, batch=10)
    seen: list[int] = []

    def run(fail: str) -> Any:
        query = (
            spark.readStream.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", fail)
            .load()
            .writeStream.foreachBatch(lambda df, _: seen.extend(r.queueOffset for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(StreamingQueryException):  # query.exception() has it
            query.awaitTermination(180)
        return query

    assert run("true").exception() is None
    assert sorted(seen) == list(range(10))
    # While the query is down, 110 more messages arrive and the old segments are deleted.
    fill(namesrv, topic, 110, queues=1, body=lambda q, i: b"%04d" % (10 + i) + b"x" * 2000, batch=10)
    assert delete_old_segments(server) >= 2
    first = min_offset(namesrv, topic)
    assert 10 < first < 120

    failed = run("true").exception()
    assert failed is not None
    assert f"offsets [10, {first}) are no longer on the broker" in str(failed)
    assert sorted(seen) == list(range(10))  # nothing delivered from the failed batch

    assert run("false").exception() is None
    assert sorted(seen) == list(range(10)) + list(range(first, 120))
