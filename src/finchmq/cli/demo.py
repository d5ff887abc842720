"""``finchmq demo``: the main job, a streaming pipeline on an embedded finchmq, end to end.

1. starts ``finchmq server`` (name server + broker) on free loopback ports, data in OUTPUT/;
2. a producer streams synthetic e-commerce orders (JSON bodies, tag = category, key = order
   id) to the topic ``demo-orders`` at RATE events/s; their event times span MINUTES of a
   simulated trading day, slightly out of order;
3. a Spark Structured Streaming job reads them through the ``rocketmq`` source, computes
   revenue and order counts per category and per minute of event time (tumbling windows, a
   1-minute watermark), and writes each finished window to the topic ``demo-revenue`` through
   the ``rocketmq`` sink and to Parquet files;
4. a finchmq push consumer reads ``demo-revenue`` and prints a summary table, checked against
   the producer's own totals and against the Parquet files;
5. everything stops; the output locations are printed.

The input is bounded: after the last order the producer sends one heartbeat event ten minutes
later in event time, which moves the watermark past the last window so Spark emits it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from finchmq.testing.process import ServerProcess

__all__ = ["add_demo_parser"]

ORDERS_TOPIC: Final = "demo-orders"
REVENUE_TOPIC: Final = "demo-revenue"
HEARTBEAT: Final = "_heartbeat"
# category -> (weight, lowest price, highest price) in cents
CATEGORIES: Final = {
    "books": (24, 499, 4_999),
    "electronics": (12, 1_999, 89_999),
    "fashion": (20, 999, 14_999),
    "groceries": (22, 199, 5_999),
    "home": (14, 1_499, 29_999),
    "toys": (8, 799, 9_999),
}
_LOG4J: Final = """\
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def add_demo_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "demo",
        help="run the main job: orders -> finchmq -> Spark Structured Streaming -> finchmq + Parquet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--events", type=int, default=12_000, help="orders the producer sends (default 12000)"
    )
    parser.add_argument(
        "--rate", type=float, default=200.0, help="orders per second the producer sends (default 200)"
    )
    parser.add_argument(
        "--minutes",
        type=int,
        default=30,
        help="minutes of event time the orders span: one result row per minute and category (default 30)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path("demo-output"),
        help="where the server's data, the Parquet files, the checkpoints and logs go "
        "(default ./demo-output; the demo's subdirectories there are emptied first)",
    )
    parser.set_defaults(handler=_run_demo)


def _say(text: str) -> None:
    print(text, flush=True)


# -- the orders -----------------------------------------------------------------------------


@dataclass
class _Truth:
    """What the producer sent, aggregated the way the Spark job does: per (minute, category)."""

    orders: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))
    cents: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, event_ms: int, category: str, cents: int) -> None:
        key = (event_ms - event_ms % 60_000, category)
        self.orders[key] += 1
        self.cents[key] += cents


def _orders(count: int, minutes: int, start_ms: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """Synthetic orders in event-time order, each up to 20 s early or late (out of order)."""
    rng = random.Random(seed)
    names = list(CATEGORIES)
    weights = [CATEGORIES[c][0] for c in names]
    span = minutes * 60_000
    for i in range(count):
        category = rng.choices(names, weights)[0]
        _, low, high = CATEGORIES[category]
        quantity = rng.choice((1, 1, 1, 2, 2, 3))
        cents = rng.randint(low, high) * quantity
        jitter = rng.randint(-20_000, 20_000)
        event_ms = min(max(start_ms + i * span // count + jitter, start_ms), start_ms + span - 1)
        yield {
            "order_id": f"o-{i:06d}",
            "customer": f"c-{rng.randint(1, 2_000):04d}",
            "category": category,
            "quantity": quantity,
            "amount": f"{cents // 100}.{cents % 100:02d}",
            "event_ms": event_ms,
        }


class _Progress:
    """A one-line progress bar (a line per 10% when the output is not a terminal)."""

    def __init__(self, total: int, label: str, status: Callable[[], str]) -> None:
        self.total, self.label, self.status = total, label, status
        self.tty = sys.stdout.isatty()
        self.began = time.monotonic()
        self.next_decile = 1

    def update(self, done: int) -> None:
        rate = done / max(time.monotonic() - self.began, 1e-9)
        if self.tty:
            filled = 30 * done // self.total
            bar = "#" * filled + "." * (30 - filled)
            line = f"\r      {self.label} [{bar}] {done:,}/{self.total:,}  {rate:,.0f}/s  {self.status()}"
            print(line, end="", flush=True)
            if done >= self.total:
                print(flush=True)
        elif done * 10 >= self.next_decile * self.total:
            _say(
                f"      {self.label}: {done:,}/{self.total:,} ({100 * done // self.total}%)  {rate:,.0f}/s  "
                f"{self.status()}"
            )
            self.next_decile = 10 * done // self.total + 1


def _produce(
    namesrv: str, args: argparse.Namespace, start_ms: int, truth: _Truth, status: Callable[[], str]
) -> float:
    """Send the orders at ``args.rate``, then the heartbeat; returns the seconds it took."""
    from finchmq.client import BlockingProducer, Message  # noqa: PLC0415

    progress = _Progress(args.events, "orders sent", status)
    began = time.monotonic()
    with BlockingProducer("demo-producer", namesrv_addr=namesrv) as producer:
        for i, order in enumerate(_orders(args.events, args.minutes, start_ms)):
            due = began + i / args.rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            body = json.dumps(order).encode()
            producer.send(Message.create(ORDERS_TOPIC, body, tags=order["category"], keys=order["order_id"]))
            cents = int(Decimal(order["amount"]) * 100)
            truth.add(order["event_ms"], order["category"], cents)
            if (i + 1) % 100 == 0 or i + 1 == args.events:
                progress.update(i + 1)
        elapsed = time.monotonic() - began
        late = start_ms + (args.minutes + 10) * 60_000
        heartbeat = {"order_id": HEARTBEAT, "category": HEARTBEAT, "amount": "0.00", "event_ms": late}
        producer.send(Message.create(ORDERS_TOPIC, json.dumps(heartbeat).encode(), tags=HEARTBEAT))
    return elapsed


# -- the results ------------------------------------------------------------------------------


class _Collector:
    """The push consumer's listener: the result rows, one per (minute, category), by msgId."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, str], tuple[int, Decimal]] = {}
        self.messages = 0
        self.ids: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, msgs: list[Any], context: Any) -> Any:
        from finchmq.client import ConsumeConcurrentlyStatus  # noqa: PLC0415

        with self.lock:
            for msg in msgs:
                self.messages += 1
                if msg.client_msg_id in self.ids:  # the sink is at least once: drop re-sends
                    continue
                self.ids.add(msg.client_msg_id)
                row = json.loads(msg.body, parse_float=Decimal)
                self.rows[(row["window_start_ms"], row["category"])] = (
                    row["orders"],
                    Decimal(row["revenue"]),
                )
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.rows)


def _spark_job(spark: Any, namesrv: str, out: Path) -> tuple[Any, Any]:
    """Start the two streaming queries: windows to the topic (rocketmq sink) and to Parquet."""
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.types import (  # noqa: PLC0415
        DecimalType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    order = StructType(
        [
            StructField("order_id", StringType()),
            StructField("customer", StringType()),
            StructField("category", StringType()),
            StructField("quantity", IntegerType()),
            StructField("amount", DecimalType(10, 2)),
            StructField("event_ms", LongType()),
        ]
    )
    orders = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", ORDERS_TOPIC)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", "demo-spark")  # lag: `finchmq admin consumerProgress -g demo-spark`
        .load()
        .select(F.from_json(F.col("body").cast("string"), order).alias("o"))
        .select("o.*")
        .withColumn("event_time", F.timestamp_millis("event_ms"))
    )
    windows = (
        orders.withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"), "category")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("revenue"))
        .select(
            F.unix_millis(F.col("window.start")).alias("window_start_ms"),
            F.col("window.start").alias("window_start"),
            "category",
            "orders",
            "revenue",
        )
    )
    to_topic = (
        windows.select(
            F.to_json(F.struct("window_start_ms", "category", "orders", "revenue")).alias("body"),
            F.col("category").alias("tags"),
            F.concat_ws("@", "category", F.date_format("window_start", "HH:mm")).alias("keys"),
        )
        .writeStream.format("rocketmq")
        .queryName("revenue-to-finchmq")
        .option("nameServer", namesrv)
        .option("topic", REVENUE_TOPIC)
        .option("checkpointLocation", str(out / "checkpoints" / "topic"))
        .outputMode("append")
        .trigger(processingTime="2 seconds")
        .start()
    )
    to_parquet = (
        windows.writeStream.format("parquet")
        .queryName("revenue-to-parquet")
        .option("path", str(out / "parquet"))
        .option("checkpointLocation", str(out / "checkpoints" / "parquet"))
        .outputMode("append")
        .trigger(processingTime="2 seconds")
        .start()
    )
    return to_topic, to_parquet


def _money(value: Decimal | int) -> str:
    return f"{Decimal(value):,.2f}"


def _summary(
    collector: _Collector, truth: _Truth, parquet: dict[tuple[int, str], tuple[int, Decimal]]
) -> bool:
    """Print the table; returns whether every result matches the producer's own totals."""
    per_category: dict[str, list[tuple[int, int, Decimal]]] = defaultdict(list)
    for (minute, category), (orders, revenue) in collector.rows.items():
        per_category[category].append((minute, orders, revenue))
    header = (
        f"  {'category':<12}{'minutes':>8}{'orders':>9}{'revenue':>15}{'avg order':>11}{'best minute':>24}"
    )
    _say(header)
    _say("  " + "-" * (len(header) - 2))
    total_orders, total_revenue = 0, Decimal(0)
    for category in sorted(per_category, key=lambda c: -sum(r for _, _, r in per_category[c])):
        rows = per_category[category]
        orders = sum(o for _, o, _ in rows)
        revenue = sum((r for _, _, r in rows), Decimal(0))
        best = max(rows, key=lambda row: row[2])
        best_text = f"{time.strftime('%H:%M', time.gmtime(best[0] / 1000))} ({_money(best[2])})"
        _say(
            f"  {category:<12}{len(rows):>8}{orders:>9,}{_money(revenue):>15}{_money(revenue / orders):>11}"
            f"{best_text:>24}"
        )
        total_orders += orders
        total_revenue += revenue
    _say("  " + "-" * (len(header) - 2))
    _say(f"  {'total':<12}{len(collector.rows):>8}{total_orders:>9,}{_money(total_revenue):>15}")
    expected = {key: (truth.orders[key], Decimal(truth.cents[key]) / 100) for key in truth.orders}
    topic_ok = collector.rows == expected
    parquet_ok = parquet == expected
    sent = sum(truth.orders.values())
    _say(
        f"\n  check: {len(expected)} (minute, category) windows from {sent:,} orders sent; "
        f"{len(collector.rows)} read back from {REVENUE_TOPIC} "
        f"({'all equal to' if topic_ok else 'NOT equal to'} the producer's totals), "
        f"{len(parquet)} in Parquet ({'equal' if parquet_ok else 'NOT equal'})"
    )
    return topic_ok and parquet_ok


# -- the job --------------------------------------------------------------------------------


def _prepare(out: Path) -> None:
    """Empty the demo's own subdirectories of a previous run (nothing else in OUTPUT)."""
    out.mkdir(parents=True, exist_ok=True)
    for sub in ("finchmq-data", "parquet", "checkpoints", "spark-warehouse"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "log4j2.properties").write_text(_LOG4J)


def _run_demo(args: argparse.Namespace) -> int:
    if args.events < 1 or args.rate <= 0 or args.minutes < 1:
        print("finchmq demo: --events and --minutes must be >= 1 and --rate > 0", file=sys.stderr)
        return 2
    try:
        import pyspark  # noqa: F401, PLC0415
    except ImportError:
        print(
            "finchmq demo needs the spark extra: pip install 'finchmq[spark]' (and Java 17+); "
            "`make demo` installs both",
            file=sys.stderr,
        )
        return 2
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print("finchmq demo: Spark needs Java 17+ (no `java` on PATH, no JAVA_HOME)", file=sys.stderr)
        return 2
    out = args.output_dir.resolve()
    _prepare(out)
    began = time.monotonic()
    server = ServerProcess(data_dir=out / "finchmq-data", log_path=out / "server.log")
    _say(f"[1/5] starting finchmq server (data in {out / 'finchmq-data'})")
    try:
        server.start()
        ok = _pipeline(args, out, server, began)
    except RuntimeError as exc:  # the server did not start, a streaming query failed
        print(f"finchmq demo: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    if not ok:
        _say("  MISMATCH: see the check above.")
        return 1
    _say("  the finchmq server has been stopped.")
    return 0


def _pipeline(args: argparse.Namespace, out: Path, server: ServerProcess, began: float) -> bool:
    """Topics, consumer, Spark, producer, summary; returns whether the results check out."""
    from finchmq.client import BlockingAdminClient, BlockingPushConsumer, ConsumeFromWhere  # noqa: PLC0415
    from finchmq.spark import local_session  # noqa: PLC0415

    namesrv = server.namesrv_addr
    _say(f"      name server {namesrv}, broker 127.0.0.1:{server.broker_port}")
    with BlockingAdminClient(namesrv_addr=namesrv) as admin:
        admin.create_topic(ORDERS_TOPIC, read_queue_nums=4, write_queue_nums=4)
        admin.create_topic(REVENUE_TOPIC, read_queue_nums=2, write_queue_nums=2)
    collector = _Collector()
    consumer = BlockingPushConsumer(
        "demo-summary", namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(REVENUE_TOPIC, "*")
    consumer.register_message_listener(collector)
    consumer.start()
    _say("[2/5] starting Spark (local[2]) and the streaming job")
    spark = local_session(
        "finchmq-demo",
        cores=2,
        conf={
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{out / 'log4j2.properties'}",
            "spark.sql.warehouse.dir": str(out / "spark-warehouse"),
        },
    )
    queries: list[Any] = []
    try:
        queries = list(_spark_job(spark, namesrv, out))
        start_ms = (int(time.time() * 1000) // 86_400_000) * 86_400_000 + 9 * 3_600_000  # today 09:00 UTC
        _say(
            f"[3/5] producing {args.events:,} orders at {args.rate:,.0f}/s to {ORDERS_TOPIC} "
            f"(event time 09:00-{9 + args.minutes // 60:02d}:{args.minutes % 60:02d} UTC)"
        )
        truth = _Truth()
        produce_seconds = _produce(
            namesrv, args, start_ms, truth, lambda: f"| windows back from Spark: {collector.count()}"
        )
        expected = len(truth.orders)
        _say(f"[4/5] waiting for Spark to emit the last of {expected} per-minute windows")
        deadline = time.monotonic() + 300
        while collector.count() < expected and time.monotonic() < deadline:
            for query in queries:
                if query.exception() is not None:
                    raise RuntimeError(f"streaming query {query.name} failed: {query.exception()}")
            time.sleep(0.5)
        parquet_rows = _wait_for_parquet(spark, out / "parquet", expected, deadline)
        batches = max(q.lastProgress["batchId"] for q in queries if q.lastProgress) + 1
        for query in queries:
            query.stop()
        _say(f"[5/5] summary of {REVENUE_TOPIC}, read back by a finchmq push consumer\n")
        ok = _summary(collector, truth, parquet_rows)
    finally:
        for query in queries:
            query.stop()
        spark.stop()
        consumer.shutdown()
    elapsed = time.monotonic() - began
    _say(
        f"\n  {args.events:,} orders produced in {produce_seconds:.1f} s; the Spark job ran {batches} "
        f"micro-batches per query; {collector.messages} result messages consumed; total {elapsed:.0f} s"
    )
    _say("  outputs:")
    _say(f"    Parquet        {out / 'parquet'}")
    _say(f"    finchmq data   {out / 'finchmq-data'}  (topics {ORDERS_TOPIC}, {REVENUE_TOPIC})")
    _say(f"    checkpoints    {out / 'checkpoints'}")
    _say(f"    server log     {out / 'server.log'}")
    return ok


def _wait_for_parquet(
    spark: Any, path: Path, expected: int, deadline: float
) -> dict[tuple[int, str], tuple[int, Decimal]]:
    """The Parquet sink's rows once it has all ``expected`` windows (or at the deadline)."""
    rows: dict[tuple[int, str], tuple[int, Decimal]] = {}
    while time.monotonic() < deadline:
        if (path / "_spark_metadata").exists():
            found = spark.read.parquet(str(path)).select("window_start_ms", "category", "orders", "revenue")
            rows = {(r.window_start_ms, r.category): (r.orders, r.revenue) for r in found.collect()}
            if len(rows) >= expected:
                break
        time.sleep(1)
    return rows
