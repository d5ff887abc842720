"""Spark reading from and writing to finchmq through the ``rocketmq`` data source.

    python -m benchmarks.spark_read [--rows 400000] [--repeat 3] [--cores 2]
                                    [--only write write-eo latency read] [--pull-batch 32]

A ``finchmq server`` runs in its own process (ASYNC_FLUSH, fresh data directory); Spark runs in
local mode (``local[2]`` by default) in this one. Rows have 1 KiB bodies; the topic has 8 queues.
``--pull-batch N`` reads with ``pullBatchSize=N``; above 32 the broker's per-pull caps are raised
to match (``maxTransferCountOnMessageInMemory=N``, ``maxTransferBytesOnMessageInMemory`` N KiB +
25%), as an operator would for bulk readers; the default keeps RocketMQ's defaults (32, 256 KiB).
    write   spark.range(N) with a 1 KiB body column, df.write.format("rocketmq"): rows/s
    write-eo  the same with delivery=exactly-once (half messages, committed by the driver)
    latency   small writes (1,000 rows, 2 partitions: a micro-batch's worth), at least once and
            exactly once, one after the other: the median seconds of one, its commit included
    read    spark.read.format("rocketmq") of the whole topic into Spark's ``noop`` sink (every
            column materialised, nothing else done): rows/s; then a ``count()`` check
Each case runs ``--repeat`` times (reads re-read the same rows; writes go to a fresh topic each
time) and prints the best rate and the spread, with the CPU seconds the broker process used.
Targets (issue 7, 2-core machine): read >= 100,000 rows/s, write >= 30,000 rows/s.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks._server import ServerProcess
from finchmq.client import BlockingAdminClient
from finchmq.spark import local_session

QUEUES = 8
BODY_BYTES = 1024


def _create_topic(namesrv: str, topic: str) -> None:
    with BlockingAdminClient(namesrv_addr=namesrv) as admin:
        admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)


def _write(
    spark: Any, namesrv: str, topic: str, rows: int, delivery: str = "at-least-once", partitions: int = 0
) -> float:
    # A row number and a constant filler: distinct bodies at little cost to the JVM side.
    filler = "x" * (BODY_BYTES - 12)
    frame = spark.range(rows, numPartitions=partitions) if partitions else spark.range(rows)
    df = frame.selectExpr(f"cast(concat(lpad(cast(id as string), 12, '0'), '{filler}') as binary) as body")
    t0 = time.perf_counter()
    writer = df.write.format("rocketmq").option("nameServer", namesrv).option("topic", topic)
    writer.option("delivery", delivery).mode("append").save()
    return time.perf_counter() - t0


def _read(spark: Any, namesrv: str, topic: str, pull_batch: int = 32) -> float:
    df = (
        spark.read.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", topic)
        .option("pullBatchSize", str(pull_batch))
        .load()
    )
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def _report(name: str, rows: int, seconds: list[float], cpu: list[float]) -> None:
    rates = [rows / s for s in seconds]
    spread = ", ".join(f"{r:,.0f}" for r in rates)
    cpu_text = ", ".join(f"{c:.1f}" for c in cpu)
    print(
        f"{name:<8} {rows:>9,} rows  best {max(rates):>9,.0f} rows/s "
        f"({max(rates) * BODY_BYTES / 2**20:,.1f} MiB/s of bodies)  runs: {spread}  broker CPU s: {cpu_text}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    cases = ["write", "write-eo", "latency", "read"]
    parser.add_argument("--only", nargs="*", choices=cases, default=cases)
    parser.add_argument("--pull-batch", type=int, default=32, help="pullBatchSize of the reads (default 32)")
    args = parser.parse_args()
    conf = {}
    if args.pull_batch > 32:
        conf = {
            "maxTransferCountOnMessageInMemory": str(args.pull_batch),
            "maxTransferBytesOnMessageInMemory": str(args.pull_batch * (BODY_BYTES + 256)),
        }
    print(f"broker: {conf or 'RocketMQ defaults'}; reads with pullBatchSize={args.pull_batch}", flush=True)
    with ServerProcess(conf=conf) as server:
        namesrv = server.namesrv_addr
        spark = local_session("finchmq-bench", cores=args.cores)
        try:
            warm = "SparkWarmup"
            _create_topic(namesrv, warm)
            _write(spark, namesrv, warm, 2_000)  # start the Python workers, connect, route
            _read(spark, namesrv, warm)
            source = "SparkBench0"
            times: list[float] = []
            cpu: list[float] = []
            for run in range(args.repeat if "write" in args.only else 1):
                topic = f"SparkBench{run}"
                _create_topic(namesrv, topic)
                before = server.cpu_seconds()
                times.append(_write(spark, namesrv, topic, args.rows))
                cpu.append(server.cpu_seconds() - before)
            if "write" in args.only:
                _report("write", args.rows, times, cpu)
            if "write-eo" in args.only:
                _write(spark, namesrv, warm, 2_000, "exactly-once")
                times, cpu = [], []
                for run in range(args.repeat):
                    topic = f"SparkBenchEO{run}"
                    _create_topic(namesrv, topic)
                    before = server.cpu_seconds()
                    times.append(_write(spark, namesrv, topic, args.rows, "exactly-once"))
                    cpu.append(server.cpu_seconds() - before)
                _report("write-eo", args.rows, times, cpu)
            if "latency" in args.only:
                for delivery in ("at-least-once", "exactly-once"):
                    took = sorted(_write(spark, namesrv, warm, 1_000, delivery, 2) for _ in range(11))
                    print(f"latency {delivery:<13} 1,000 rows: median {took[5] * 1000:,.0f} ms", flush=True)
            if "read" in args.only:
                times, cpu = [], []
                for _ in range(args.repeat):
                    before = server.cpu_seconds()
                    times.append(_read(spark, namesrv, source, args.pull_batch))
                    cpu.append(server.cpu_seconds() - before)
                _report("read", args.rows, times, cpu)
                df = (
                    spark.read.format("rocketmq").option("nameServer", namesrv).option("topic", source).load()
                )
                count = df.count()
                if count != args.rows:
                    raise SystemExit(f"read {count} rows, wrote {args.rows}")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
