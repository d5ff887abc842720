"""The source over Spark Connect (PySpark 4.x registers Python data sources from a Connect
client): batch read, batch write and a streaming copy, through a local Connect server. It runs in
a child process: a Connect session in this process would turn the suite's classic session into a
Connect one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finchmq.client import BlockingPullConsumer, PullStatus
from finchmq.testing import EmbeddedServer

from .conftest import create_topic, fill

pytest.importorskip("grpc", reason="Spark Connect needs the connect extra: pip install 'finchmq[connect]'")

# A JVM, a Connect server and three queries: generous on a loaded 2-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import upper, col
import finchmq.spark

namesrv, topic, batch_out, stream_out, checkpoint = sys.argv[1:]
spark = SparkSession.builder.remote("local[2]").getOrCreate()
finchmq.spark.register(spark)  # checks the workers with a UDF: Connect has no RDD API

def source(name):
    return spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", name).load()

rows = source(topic).select("queueId", "queueOffset", "body").collect()
print(json.dumps({"read": sorted([r.queueId, r.queueOffset, r.body.decode()] for r in rows)}), flush=True)

(source(topic).select(upper(col("body").cast("string")).alias("body"))
 .write.format("rocketmq").option("nameServer", namesrv).option("topic", batch_out).mode("append").save())

query = (spark.readStream.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
         .option("startingOffsets", "earliest").load().select("body")
         .writeStream.format("rocketmq").option("nameServer", namesrv).option("topic", stream_out)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
query.awaitTermination()
spark.stop()
"""


def bodies(namesrv: str, topic: str) -> list[bytes]:
    out: list[bytes] = []
    with BlockingPullConsumer("connect_check", namesrv_addr=namesrv) as consumer:
        for mq in sorted(consumer.fetch_subscribe_message_queues(topic)):
            offset = 0
            while True:
                result = consumer.pull(mq, "*", offset, 32)
                if result.pull_status is not PullStatus.FOUND:
                    break
                out.extend(m.body for m in result.msg_found_list)
                offset = result.next_begin_offset
    return sorted(out)


def test_read_write_and_stream_over_spark_connect(server: EmbeddedServer, name: str, tmp_path: Path) -> None:
    namesrv = server.namesrv_addr
    sent = fill(namesrv, name, per_queue=5, queues=2)
    batch_out, stream_out = f"{name}_b", f"{name}_s"
    create_topic(namesrv, batch_out, 2)
    create_topic(namesrv, stream_out, 2)
    # SPARK_TESTING: the local Connect server takes a free port (not 15002), so two suites can run
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_TESTING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, namesrv, name, batch_out, stream_out, str(tmp_path / "checkpoint")],
        capture_output=True, text=True, timeout=540, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    [read] = [json.loads(line)["read"] for line in done.stdout.splitlines() if line.startswith('{"read"')]
    stored = [(q, offset, body) for q, rows in sent.rows.items() for offset, body, *_ in rows]
    assert read == sorted([q, offset, body.decode()] for q, offset, body in stored)
    assert bodies(namesrv, batch_out) == sorted(body.upper() for _, _, body in stored)
    assert bodies(namesrv, stream_out) == sorted(body for _, _, body in stored)
