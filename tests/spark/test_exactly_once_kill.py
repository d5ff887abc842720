"""The exactly-once sink across driver crashes: a RocketMQ -> Spark -> RocketMQ streaming query
whose driver (a process of its own, ``exactly_once_driver.py``) is SIGKILLed five times, each
time with a micro-batch in flight, at one of the three points where a crash means something
different to the sink:

- **planned**: Spark has written the batch to its offsets log, no half message of it is stored
  yet (the re-run sends everything);
- **sent**: every row of the batch is stored as a half message by this run, the sink wrote no
  commit record (the orphan halves must be rolled back, the re-run's committed);
- **recorded**: the sink's commit record of the batch is stored, Spark's commit log does not
  have the batch (the re-run must roll its own halves back, the orphans be committed).

The five points are drawn at random (each of the three at least once, in a random order) from
a seed the test prints; ``FINCHMQ_KILL_SEED=<seed>`` replays a run's draw. The test does not
guess a moment: it watches the checkpoint (Spark's side) and the broker's store (the half
messages and the commit records, the sink's side) until the point is reached, freezes the
driver's whole process tree (SIGSTOP), reads both again while nothing of the driver can move,
and SIGKILLs it only if the point still holds (else it lets it go on to the next batch). The
driver is restarted from its checkpoint after each kill, and the next kill is armed only once
the restarted query has committed a further batch (its re-run of the batch killed), so the
kills land on different batches. The last run ends the input, the broker's check ends every
orphan half, and the output topic holds each input row exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from finchmq.broker.transaction import HALF_TOPIC, TRANSACTION_GROUP
from finchmq.protocol.message import MessageExt
from finchmq.spark._transactions import CommitRecord
from finchmq.spark._write import TXN_PROPERTY, TxnTag
from finchmq.spark.partitions import from_offset_json
from finchmq.testing import EmbeddedServer
from finchmq.testing.audit import stored_bodies
from tests.waiting import wait_until

from .conftest import BROKER, create_topic, fill, queue_messages

pytestmark = pytest.mark.timeout(600)

DRIVER = Path(__file__).with_name("exactly_once_driver.py")
COMMIT_TOPIC = "finchmq-spark-commits"
# 4 queues: 60 rows; the driver reads 6 a micro-batch: 10 batches, the five kills need five
# (batches 0-4 when every point is caught on its first batch); a spare batch costs ~0.5 s.
PER_QUEUE = 15
POINTS = ("planned", "sent", "recorded")
KILLS = 5
SEED_VARIABLE = "FINCHMQ_KILL_SEED"


def kill_points(rng: random.Random) -> list[str]:
    """``KILLS`` points drawn from ``POINTS``, each of them at least once, in a random order."""
    points = [*POINTS, *(rng.choice(POINTS) for _ in range(KILLS - len(POINTS)))]
    rng.shuffle(points)
    return points


def process_tree(root: int) -> list[int]:
    """``root`` and its live descendants (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def stopped(pid: int) -> bool:
    """Every thread of ``pid`` is stopped (or the process is gone)."""
    try:
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            if stat.read_text().rsplit(")", 1)[1].split()[0] not in ("T", "t", "Z", "X"):
                return False
    except (OSError, IndexError):
        pass
    return True


def signal_all(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, signum)


class Driver:
    """``exactly_once_driver.py`` in a process of its own: its JVM and Python workers are its
    descendants, frozen, thawed and killed together."""

    def __init__(self, namesrv: str, source: str, target: str, checkpoint: Path, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.started_ms = int(time.time() * 1000)
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), namesrv, source, target, str(checkpoint)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # not in the test's process group (a terminal's ^C)
        )
        self.frozen: list[int] = []

    def alive(self) -> bool:
        return self.process.poll() is None

    def freeze(self) -> None:
        """SIGSTOP the whole tree (again for a child forked meanwhile); back once all are stopped."""
        while new := [pid for pid in process_tree(self.process.pid) if pid not in self.frozen]:
            signal_all(new, signal.SIGSTOP)
            self.frozen += new
        wait_until(lambda: all(map(stopped, self.frozen)), what="the driver's processes stopped")

    def thaw(self) -> None:
        signal_all(self.frozen, signal.SIGCONT)
        self.frozen = []

    def kill(self) -> None:
        signal_all(self.frozen + process_tree(self.process.pid), signal.SIGKILL)
        self.process.wait(60)
        self.log.close()


class Watch:
    """The query's progress as the test reads it: Spark's offsets and commit logs in the
    checkpoint, and, straight from the embedded broker's store, the half messages (by batch,
    UNIQ_KEY and born time) and the sink's commit records."""

    def __init__(self, server: EmbeddedServer, checkpoint: Path, source: str) -> None:
        self.server = server
        self.checkpoint = checkpoint
        self.source = source
        self.halves: list[tuple[int, int, str]] = []  # (batch, born ms, UNIQ_KEY)
        self.records: set[int] = set()  # batches with a commit record
        self._read = {HALF_TOPIC: 0, COMMIT_TOPIC: 0}

    def _log(self, name: str) -> int:
        """The newest batch id of a checkpoint log, -1 if none."""
        return max((int(p.name) for p in (self.checkpoint / name).glob("[0-9]*")), default=-1)

    def _source_end(self, batch: int) -> int:
        """Where batch ``batch`` ends in the source topic: its offsets summed over the queues."""
        if batch < 0:
            return 0
        offsets = json.loads((self.checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])
        return sum(o for (topic, _, _), o in from_offset_json(offsets).items() if topic == self.source)

    def _query(self) -> str:
        return str(json.loads((self.checkpoint / "metadata").read_text())["id"])

    def _new(self, topic: str) -> list[MessageExt]:
        """The messages of ``topic`` (queue 0) stored since the last call."""
        found, self._read[topic] = queue_messages(self.server, topic, self._read[topic])
        return found

    def _refresh(self, query: str) -> None:
        for m in self._new(HALF_TOPIC):
            tag = TxnTag.parse(m.properties.get(TXN_PROPERTY))
            if tag is not None and tag.query == query:
                self.halves.append((tag.batch, m.born_timestamp, m.unique_key or ""))
        for m in self._new(COMMIT_TOPIC):
            record = CommitRecord.parse(m)
            if record is not None and record.query == query:
                self.records.add(record.batch)

    def point(self, since_ms: int) -> str:
        """Where the query is: ``between batches``, or, for the newest planned batch Spark has
        not committed, ``recorded`` (its commit record is stored), ``sent`` (all its rows are
        stored as halves born since ``since_ms``, no record), ``sending`` (some) or ``planned``
        (none)."""
        planned, committed = self._log("offsets"), self._log("commits")
        if planned <= committed:
            return "between batches"
        self._refresh(self._query())
        if planned in self.records:
            return "recorded"
        sent = len({key for batch, born, key in self.halves if batch == planned and born >= since_ms})
        if sent == 0:
            return "planned"
        return "sent" if sent >= self._source_end(planned) - self._source_end(planned - 1) else "sending"

    def batch(self) -> int:
        """The newest batch Spark planned (wrote to its offsets log)."""
        return self._log("offsets")

    def committed(self) -> int:
        """The newest batch Spark committed (wrote to its commit log), -1 if none."""
        return self._log("commits")

    def input_done(self, rows: int) -> bool:
        """Spark committed a batch that ends at the end of the input (``rows`` in all)."""
        committed = self.committed()
        return committed >= 0 and self._source_end(committed) >= rows


def checked_up_to_the_end(server: EmbeddedServer) -> bool:
    """The broker's check has no half message left that nobody ended."""
    assert server.broker is not None
    store = server.broker.store
    done = server.broker.consumer_offset_manager.query_offset(TRANSACTION_GROUP, HALF_TOPIC, 0)
    return done >= store.get_max_offset_in_queue(HALF_TOPIC, 0)


def test_driver_killed_with_a_batch_in_flight_every_row_once(
    finchmq_server_factory: Any, name: str, tmp_path: Path
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
    watch = Watch(server, checkpoint, source)
    log = tmp_path / "driver.log"
    seed = int(os.environ.get(SEED_VARIABLE) or random.randrange(2**32))
    points = kill_points(random.Random(seed))
    print(f"kill points {points} from {SEED_VARIABLE}={seed}")
    hit: list[str] = []

    def failed(what: str) -> str:
        return f"{what} ({SEED_VARIABLE}={seed}, killed at {hit}, the driver's log: {log})"

    for point in points:
        # The first run may be killed on its first batch; a restarted one only after it has
        # committed a batch (its re-run of the batch killed): the kills land on different batches.
        committed = watch.committed() if hit else None
        driver = Driver(namesrv, source, target, checkpoint, log)

        def reached(d: Driver = driver, p: str = point, c: int | None = committed) -> bool:
            armed = c is None or watch.committed() > c
            return (
                (armed and watch.point(d.started_ms) == p) or not d.alive() or watch.input_done(len(expected))
            )

        try:
            while True:
                wait_until(reached, timeout=240, what=failed(f"a batch {point}"), interval=0.005)
                assert driver.alive(), failed(f"the driver exited: {log.read_text()[-3000:]}")
                assert not watch.input_done(len(expected)), failed(
                    f"the input ran out before a batch {point}: more rows (PER_QUEUE) needed"
                )
                driver.freeze()
                if watch.point(driver.started_ms) == point:  # still, with the driver stopped
                    break
                driver.thaw()  # it moved on meanwhile: the next batch
        finally:
            driver.kill()
        hit.append(f"batch {watch.batch()} {point}")
    print("killed at:", ", ".join(hit), f"({SEED_VARIABLE}={seed})")

    driver = Driver(namesrv, source, target, checkpoint, log)
    try:

        def out() -> Counter[bytes]:
            return Counter(asyncio.run(stored_bodies(server.broker_addr, target, queues=2)))

        wait_until(
            lambda: sum(out().values()) >= len(expected) or not driver.alive(),
            timeout=300,
            what="every row out",
            interval=0.5,
        )
        # Orphan halves of the killed runs: the restarted query's producer answers their checks.
        wait_until(
            lambda: checked_up_to_the_end(server) or not driver.alive(),
            timeout=300,
            what="every half ended",
            interval=0.5,
        )
        assert driver.alive(), failed(log.read_text()[-3000:])
        assert out() == expected, failed("not every row exactly once")
    finally:
        driver.kill()
