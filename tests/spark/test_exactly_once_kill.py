"""The exactly-once sink across driver crashes: a RocketMQ -> Spark -> RocketMQ streaming query
whose driver (a process of its own, ``exactly_once_driver.py``) is SIGKILLed five times, at a
micro-batch's planning (before its sends), while its halves are being sent (before the commit)
and right after the sink's commit record (before Spark's commit log), and restarted from its
checkpoint each time. The output holds each input row exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from finchmq.broker.transaction import HALF_TOPIC, TRANSACTION_GROUP
from finchmq.client import NoRouteError
from finchmq.protocol.stored import decode_stored_all
from finchmq.spark._transactions import find_record
from finchmq.spark.options import WriteOptions
from finchmq.store import GetMessageStatus
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

from .conftest import BROKER, create_topic, fill, read

pytestmark = pytest.mark.timeout(900)

DRIVER = Path(__file__).with_name("exactly_once_driver.py")
COMMIT_TOPIC = "finchmq-spark-commits"
PER_QUEUE = 100  # 4 queues: 400 rows, 20 micro-batches of 20


def queue_size(server: EmbeddedServer, topic: str) -> int:
    assert server.broker is not None
    return server.broker.store.get_max_offset_in_queue(topic, 0)


def newest_half_born(server: EmbeddedServer) -> int:
    """When the newest half message was sent (a copy the check wrote back keeps its born time)."""
    assert server.broker is not None
    store = server.broker.store
    last = store.get_max_offset_in_queue(HALF_TOPIC, 0) - 1
    if last < 0:
        return 0
    with store.get_message("test-observer", HALF_TOPIC, 0, last, 1) as result:
        if result.status is not GetMessageStatus.FOUND:
            return 0
        return max(m.born_timestamp for m in decode_stored_all(result.body()))


def checked_up_to_the_end(server: EmbeddedServer) -> bool:
    """The broker's check has no half message left that nobody ended."""
    assert server.broker is not None
    done = server.broker.consumer_offset_manager.query_offset(TRANSACTION_GROUP, HALF_TOPIC, 0)
    return done >= queue_size(server, HALF_TOPIC)


def batches_planned(checkpoint: Path) -> int:
    return sum(1 for p in (checkpoint / "offsets").glob("[0-9]*")) if (checkpoint / "offsets").exists() else 0


class Driver:
    def __init__(self, namesrv: str, source: str, target: str, checkpoint: Path, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), namesrv, source, target, str(checkpoint)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its JVM and Python workers share its process group
        )

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(60)
        self.log.close()

    def alive(self) -> bool:
        return self.process.poll() is None


def test_driver_killed_five_times_every_row_once(
    spark: Any, finchmq_server_factory: Any, name: str, tmp_path: Path
) -> None:
    server = finchmq_server_factory(
        {**BROKER, "transactionCheckInterval": "1000", "transactionCheckMax": "1000"}
    )
    namesrv = server.namesrv_addr
    source, target = name + "_in", name + "_out"
    create_topic(namesrv, source)
    create_topic(namesrv, target, queues=2)
    fill(namesrv, source, PER_QUEUE)
    expected = Counter(f"Q{q}-M{i}".encode() for q in range(4) for i in range(PER_QUEUE))
    checkpoint = tmp_path / "checkpoint"

    def when_planned() -> Callable[[], bool]:
        planned = batches_planned(checkpoint)
        return lambda: batches_planned(checkpoint) > planned

    def when_sending() -> Callable[[], bool]:
        """A half message of this run is stored, and no commit record since it started."""
        started_ms, records = int(time.time() * 1000), queue_size(server, COMMIT_TOPIC)
        return lambda: newest_half_born(server) >= started_ms and queue_size(server, COMMIT_TOPIC) == records

    def when_committed() -> Callable[[], bool]:
        records = queue_size(server, COMMIT_TOPIC)
        return lambda: queue_size(server, COMMIT_TOPIC) > records

    kills = [
        ("before sends", when_planned),
        ("between sends and commit", when_sending),
        ("after the sink's commit", when_committed),
        ("between sends and commit", when_sending),
        ("after the sink's commit", when_committed),
    ]
    opts = WriteOptions.parse({"nameServer": namesrv})
    hit: list[str] = []  # where each kill landed, as the checkpoint and the records tell

    def landed() -> str:
        planned, done = (
            max((int(p.name) for p in (checkpoint / d).glob("[0-9]*")), default=-1)
            for d in ("offsets", "commits")
        )
        if planned <= done:
            return "between batches"
        query = json.loads((checkpoint / "metadata").read_text())["id"]
        try:
            record = find_record(opts, COMMIT_TOPIC, query, planned)
        except NoRouteError:  # the commit topic is not routed yet: no record was written
            record = None
        if record is None:
            return f"batch {planned} before the sink's commit"
        return f"batch {planned} after the sink's commit, before Spark's"

    log = tmp_path / "driver.log"
    for what, moment in kills:
        driver = Driver(namesrv, source, target, checkpoint, log)
        try:
            ready = moment()
            wait_until(
                lambda ready=ready, driver=driver: ready() or not driver.alive(),  # type: ignore[misc]
                timeout=240,
                what=f"the moment {what}",
                interval=0.005,
            )
            assert driver.alive(), f"the driver exited: {log.read_text()[-3000:]}"
        finally:
            driver.kill()
        hit.append(f"{what}: {landed()}")
    print("kills:", *hit, sep="\n  ")
    driver = Driver(namesrv, source, target, checkpoint, log)
    try:

        def out() -> Counter[bytes]:
            return Counter(r.body for r in read(spark, namesrv, target).select("body").collect())

        wait_until(
            lambda: sum(out().values()) >= len(expected), timeout=300, what="every row out", interval=1
        )
        # Orphan halves of the killed runs: the restarted query's producers answer their checks.
        wait_until(lambda: checked_up_to_the_end(server), timeout=300, what="every half ended", interval=0.5)
        assert driver.alive(), log.read_text()[-3000:]
        assert out() == expected, hit
    finally:
        driver.kill()
