"""The source with executors in other processes (``local-cluster``: a standalone master and two
worker JVMs, each executor with its own Python workers), as on a real cluster: finchmq installed
where the executors run (here the same venv, via spark.pyspark.python), the name server reachable
from them, the checkpoint on storage every process sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from finchmq.testing.process import ServerProcess
from tests.client.conftest import TEST_BROKER

# JVMs and process restarts: generous on a loaded 2-core machine (the default is 120 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = """
import os, sys
from pyspark.sql import SparkSession
import finchmq.spark
from finchmq.client import BlockingProducer, Message
namesrv, topic, out_topic, checkpoint = sys.argv[1:5]
os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python workers: an interpreter with finchmq
with BlockingProducer("cluster_mode_pg", namesrv_addr=namesrv) as producer:
    for i in range(200):
        producer.send(Message(topic, b"m%d" % i))
spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
         .config("spark.executor.memory", "512m")
         .config("spark.log.level", "ERROR").getOrCreate())
finchmq.spark.register(spark)  # checks the executors' Python too
def jvm_of_this_worker(_):
    pid = os.getpid()  # walk up to the JVM that runs this Python worker
    while pid > 1:
        if open(f"/proc/{pid}/comm").read().strip() == "java":
            return pid
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    return 0
driver_jvm = spark.sparkContext._jvm.ProcessHandle.current().pid()
jvms = set(spark.sparkContext.parallelize(range(8), 8).map(jvm_of_this_worker).collect())
pids = jvms - {driver_jvm, 0}
df = spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", topic).load()
print("rows", df.count(), "executor_parents", len(pids))
query = (spark.readStream.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
         .option("startingOffsets", "earliest").load().selectExpr("body")
         .writeStream.format("rocketmq").option("nameServer", namesrv).option("topic", out_topic)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
query.awaitTermination()
back = spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", out_topic).load()
print("copied", back.count())
spark.stop()
"""


def test_executors_in_other_processes_read_and_stream(tmp_path: Path) -> None:
    with ServerProcess(conf={"defaultTopicQueueNums": "4", **TEST_BROKER}) as server:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, server.namesrv_addr, "ClusterModeIn", "ClusterModeOut",
             str(tmp_path / "checkpoint")],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(
        line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("rows", "copied"))
    )
    rows, parents = lines["rows"].split(" executor_parents ")
    assert int(rows) == 200
    assert int(parents) >= 1  # the tasks ran under executor JVMs other than the driver's
    assert int(lines["copied"]) == 200
