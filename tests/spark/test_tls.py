"""The ``rocketmq`` source and sink against an enforcing mutual-TLS server (certificates made by
``tests/tls_certs.py``): ``tls.enable`` and the ``tls.client.*`` options reach every client the
driver and the Python workers build (batch read, streaming read, at-least-once, exactly-once and
streaming writes), and a plain job fails with an error that names TLS."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import BlockingAdminClient, TlsConfig
from finchmq.testing import EmbeddedServer
from tests.tls_certs import TlsFiles, client_properties, server_properties

from .conftest import BROKER, error_of, read

pytestmark = pytest.mark.timeout(300)

TOPICS = ("SparkTlsIn", "SparkTlsOut")


@pytest.fixture
def tls_server(finchmq_server_factory: Callable[..., EmbeddedServer], tls_files: TlsFiles) -> EmbeddedServer:
    server = finchmq_server_factory({**BROKER, **server_properties(tls_files)})
    tls = TlsConfig.from_properties(client_properties(tls_files))
    with BlockingAdminClient(namesrv_addr=server.namesrv_addr, use_tls=True, tls=tls) as admin:
        for topic in TOPICS:
            admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
    return server


def tls_options(files: TlsFiles) -> dict[str, str]:
    """The data source's options: Java's names, as for every finchmq client."""
    return {"tls.enable": "true", **client_properties(files)}


def sink(df: Any, namesrv: str, options: dict[str, str]) -> Any:
    writer = df.write.format("rocketmq").option("nameServer", namesrv)
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.mode("append")


def bodies(rows: list[Any]) -> Counter[bytes]:
    return Counter(bytes(r.body) for r in rows)


def test_batch_and_streaming_over_mutual_tls(
    spark: Any, tls_server: EmbeddedServer, tls_files: TlsFiles, tmp_path: Path
) -> None:
    namesrv, options = tls_server.namesrv_addr, tls_options(tls_files)
    rows = spark.createDataFrame([(f"plain-{i}",) for i in range(12)], "body string")
    sink(rows, namesrv, {**options, "topic": "SparkTlsIn"}).save()  # at least once
    txn = spark.createDataFrame([(f"txn-{i}",) for i in range(8)], "body string")
    sink(txn, namesrv, {**options, "topic": "SparkTlsIn", "delivery": "exactly-once"}).save()
    expected = Counter(f"plain-{i}".encode() for i in range(12)) + Counter(
        f"txn-{i}".encode() for i in range(8)
    )
    assert bodies(read(spark, namesrv, "SparkTlsIn", **options).collect()) == expected

    # A stream reads it (committing consumerGroup offsets through the admin client) and writes
    # it exactly once to another topic.
    stream = spark.readStream.format("rocketmq").option("nameServer", namesrv).option("topic", "SparkTlsIn")
    for key, value in {**options, "startingOffsets": "earliest", "consumerGroup": "spark_tls_cg"}.items():
        stream = stream.option(key, value)
    writer = stream.load().selectExpr("upper(cast(body as string)) as body").writeStream.format("rocketmq")
    for key, value in {**options, "nameServer": namesrv, "topic": "SparkTlsOut"}.items():
        writer = writer.option(key, value)
    query = (
        writer.option("delivery", "exactly-once")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180) and query.exception() is None
    out = read(spark, namesrv, "SparkTlsOut", **options).collect()
    assert bodies(out) == Counter({body.upper(): n for body, n in expected.items()})


def test_a_plain_job_against_an_enforcing_server_fails_naming_tls(
    spark: Any, tls_server: EmbeddedServer
) -> None:
    namesrv = tls_server.namesrv_addr
    text = error_of(lambda: read(spark, namesrv, "SparkTlsIn").collect())
    assert "tls.server.mode=enforcing" in text and "tls.enable=true" in text
    rows = spark.createDataFrame([("x",)], "body string")
    text = error_of(lambda: sink(rows, namesrv, {"topic": "SparkTlsIn"}).save())
    assert "tls.server.mode=enforcing" in text and "tls.enable=true" in text
