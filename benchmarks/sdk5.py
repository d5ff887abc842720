"""The official RocketMQ 5.x SDK (gRPC) next to finchmq's own client and the 4.x C++ client (remoting)
on the same broker, and finchmq's two gRPC transports, grpclib against grpcio, measured.

    python -m benchmarks.sdk5 [--seconds 20] [--threads 8] [--receive 20000] [--size 1024] [--rounds 1]
                              [--only finchmq cpp sdk-grpclib sdk-grpcio] [--profile DIR]

``finchmq server`` runs in its own process (fresh data directory, its defaults, ASYNC_FLUSH) with
its gRPC endpoint on: the first server with the default transport (grpclib, pure Python on the
broker's event loop) serves the finchmq, C++ and 5.x SDK rows; a second one with
``grpcServerImpl=grpcio`` (grpcio's aio server, its own threads) serves a second 5.x SDK row.
``--rounds N`` runs the two SDK rows N times, alternating, each on a fresh server (on a shared
machine one round can be unlucky). Each row, on a topic of its own (8 queues):

    publish   ``--threads`` concurrent sync sends of ``--size``-byte messages for ``--seconds``
    receive   a new consumer group takes ``--receive`` messages of that topic's backlog (topped
              up with finchmq batch sends when the publish left fewer)

by these clients:

    finchmq   finchmq.client.Producer, ``--threads`` send tasks on one producer (asyncio, in this
              process); receive: finchmq.client.SimpleConsumer (POP over remoting, as the 5.x
              SimpleConsumer does through a proxy), ``--threads`` tasks of receive(32, 30 s) then
              one ACK_MESSAGE per message
    cpp       the C++ client 1.2.4 through its C API (``cpp_loadgen.c``: ``--threads`` threads of
              SendMessageSync; its first sends fail while its route is on its way: counted as
              errors, not messages); receive: a push consumer (``cpp_consume.c``, ``--threads``
              consume threads, pull batches of 32, offsets committed), timed from its first
              message to the last, so its rebalance at start is left out (printed as a note);
              pull has no per-message ack, so this row is the remoting ceiling, not a
              like-for-like of the SimpleConsumer rows
    sdk-*     rocketmq-python-client 5.1.2 under ``.venv-v5/bin/python`` (``_sdk5_load.py``): one
              Producer shared by ``--threads`` threads of sync ``send``; receive: one
              SimpleConsumer shared by ``--threads`` threads of receive(32, 30 s) then ``ack``
              of each message (one AckMessage RPC each)

Both SimpleConsumers long-poll 5 s (the 5.x proxy's minimum; the SDK's RPC deadline is its request
timeout, 3 s, plus that).

``--profile DIR`` records the broker with py-spy (``--gil``) during the C++ and SDK rows (its CPU
figures then include py-spy's sampling) and writes a summary per row to DIR. Each client's clock
starts once it has started. Printed per row: msgs/s, the broker's CPU seconds per 10k messages
(its /proc figures from before the client starts to after it ends, start-up and shut-down
included) and the client's (``os.wait4`` of the child; this process's own for finchmq). The SDK
rows are limited by the SDK's own CPU (about as much per message as the broker's) on a 2-core
machine, so for the two transports the broker's CPU per message is the figure to compare; msgs/s
at equal load (the same threads) moves with whatever else runs on the machine.
The figures go to ``benchmarks/results/sdk5.txt`` too, with the machine, date and commit.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import resource
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._cpp import build_consumer, build_loadgen, run_consumer, run_loadgen
from benchmarks._profile import py_spy_while, summarize
from benchmarks._server import ROOT, ServerProcess
from finchmq.client import AdminClient, BrokerBusyError, Message, Producer, SimpleConsumer
from finchmq.remoting import run

QUEUES = 8
BATCH = 32
INVISIBLE_S = 30
AWAIT_S = 5  # long polling: the 5.x proxy's minimum (grpcClientConsumerMinLongPollingTimeoutMillis)
ROWS = ("finchmq", "cpp", "sdk-grpclib", "sdk-grpcio")
SDK_PYTHON = ROOT / ".venv-v5" / "bin" / "python"
SDK_LOAD = ROOT / "benchmarks" / "_sdk5_load.py"
RESULTS = ROOT / "benchmarks" / "results" / "sdk5.txt"


@dataclass
class Row:
    client: str
    phase: str
    messages: int
    seconds: float
    broker_cpu: float
    client_cpu: float | None
    note: str = ""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    def per_10k(self, cpu: float | None) -> str:
        if cpu is None or not self.messages:
            return "-"
        return f"{cpu / self.messages * 10_000:.2f}"

    def line(self) -> str:
        return (
            f"{self.client:<27} {self.phase:<8} {self.rate:>9,.0f} {self.messages:>8,} {self.seconds:>6.1f}"
            f" {self.per_10k(self.broker_cpu):>10} {self.per_10k(self.client_cpu):>10}   {self.note}"
        ).rstrip()


HEADER = (
    f"{'client':<27} {'phase':<8} {'msgs/s':>9} {'msgs':>8} {'s':>6} {'broker':>10} {'client':>10}\n"
    f"{'':<27} {'':<8} {'':>9} {'':>8} {'':>6} {'cpu s/10k':>10} {'cpu s/10k':>10}"
)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _note(result: dict[str, Any]) -> str:
    if not result.get("errors"):
        return ""
    return f"errors {result['errors']} (first: {result.get('first_error', '')[:120]})"


class Bench:
    def __init__(self, server: ServerProcess, args: argparse.Namespace) -> None:
        self.server = server
        self.args = args
        self.namesrv = server.namesrv_addr
        self.body = b"x" * args.size

    async def topic(self, name: str) -> str:
        topic = f"Bench_sdk5_{name}_{os.getpid()}"
        async with AdminClient(namesrv_addr=self.namesrv) as admin:
            await admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            for _ in range(100):
                route = await admin.topic_route(topic)
                if sum(q.write_queue_nums for q in route.queue_datas) == QUEUES:
                    break
                await asyncio.sleep(0.05)
        return topic

    def producer(self) -> Producer:
        return Producer("bench_sdk5_pg", namesrv_addr=self.namesrv, instance_name=f"b-{time.monotonic_ns()}")

    async def top_up(self, topic: str, published: int) -> None:
        """Batch sends until the topic holds ``--receive`` messages."""
        missing = self.args.receive - published
        if missing <= 0:
            return
        async with self.producer() as producer:
            while missing > 0:
                n = min(64, missing)
                try:
                    await producer.send_batch([Message(topic, self.body) for _ in range(n)])
                except BrokerBusyError:
                    await asyncio.sleep(0.05)
                    continue
                missing -= n

    def child(self, client: str, phase: str, work: Callable[[], dict[str, Any]]) -> Row:
        """A row measured around a child process: ``work`` runs it and returns its JSON result
        with ``client_cpu_s``. With ``--profile DIR`` the broker is recorded by py-spy meanwhile."""
        before = self.server.cpu_seconds()
        if self.args.profile is None:
            result = work()
        else:
            name = "".join(c if c.isalnum() else "_" for c in f"{client}_{phase}").strip("_")
            raw = self.args.profile / f"sdk5_broker_{name}.raw"
            with py_spy_while(self.server.pid, raw):
                result = work()
            summary = summarize(raw)
            raw.with_suffix(".txt").write_text(f"py-spy --gil, the broker, {client} {phase}\n{summary}\n")
        broker = self.server.cpu_seconds() - before
        row = Row(client, phase, result["messages"], result["elapsed"], broker, result["client_cpu_s"])
        row.note = _note(result)
        return row

    async def here(
        self, client: str, phase: str, work: Callable[[], Awaitable[tuple[int, float, str]]]
    ) -> Row:
        """A row measured around ``work`` in this process (messages, seconds, note)."""
        before, own = self.server.cpu_seconds(), _own_cpu()
        messages, seconds, note = await work()
        broker = self.server.cpu_seconds() - before
        return Row(client, phase, messages, seconds, broker, _own_cpu() - own, note)

    # -- finchmq's client ---------------------------------------------------------------------

    async def finchmq(self) -> list[Row]:
        topic = await self.topic("finchmq")
        args = self.args

        async def publish() -> tuple[int, float, str]:
            async with self.producer() as producer:
                sent = busy = 0
                began = time.monotonic()
                deadline = began + args.seconds

                msg = Message.create(topic, self.body, tags="bench")  # frozen: one for all sends

                async def sender() -> None:
                    nonlocal sent, busy
                    while time.monotonic() < deadline:
                        try:
                            await producer.send(msg)
                        except BrokerBusyError:
                            busy += 1
                            continue
                        sent += 1

                await asyncio.gather(*(sender() for _ in range(args.threads)))
                return sent, time.monotonic() - began, f"SYSTEM_BUSY {busy}" if busy else ""

        rows = [await self.here("finchmq (remoting)", "publish", publish)]
        await self.top_up(topic, rows[0].messages)

        async def receive() -> tuple[int, float, str]:
            consumer = SimpleConsumer(
                f"bench_sdk5_finchmq_{os.getpid()}",
                namesrv_addr=self.namesrv,
                instance_name=f"b-{time.monotonic_ns()}",
                subscription={topic: "*"},
                await_duration=AWAIT_S * 1000,
            )
            async with consumer:
                acked = 0
                began = time.monotonic()
                deadline = began + args.max_seconds
                finished = 0.0

                async def receiver() -> None:
                    nonlocal acked, finished
                    while acked < args.receive and time.monotonic() < deadline:
                        for msg in await consumer.receive(BATCH, INVISIBLE_S * 1000):
                            await consumer.ack(msg)
                            acked += 1
                            if acked == args.receive:
                                finished = time.monotonic()

                await asyncio.gather(*(receiver() for _ in range(args.threads)))
                return min(acked, args.receive), (finished or time.monotonic()) - began, ""

        rows.append(await self.here("finchmq (remoting)", "receive", receive))
        return rows

    # -- the C++ client -----------------------------------------------------------------------

    async def cpp(self) -> list[Row]:
        topic = await self.topic("cpp")
        args = self.args
        loadgen, consumer = build_loadgen(), build_consumer()

        def publish() -> dict[str, Any]:
            result = run_loadgen(
                loadgen,
                self.namesrv,
                topic,
                threads=args.threads,
                seconds=args.seconds,
                size=args.size,
                warmup=0,
            )
            result["first_error"] = (result.get("error_samples") or [""])[0]
            return result

        rows = [self.child("C++ 1.2.4 (remoting)", "publish", publish)]
        await self.top_up(topic, rows[0].messages)
        started = 0.0

        def receive() -> dict[str, Any]:
            nonlocal started
            group = f"bench_sdk5_cpp_{os.getpid()}"
            result = run_consumer(
                consumer, self.namesrv, topic, group, count=args.receive, threads=args.threads
            )
            started = result["startup"]
            return result

        row = self.child("C++ 1.2.4 (remoting)", "receive", receive)
        row.note = (
            row.note + f" push consumer; {started:.2f} s from start to its first message, not timed"
        ).strip()
        rows.append(row)
        return rows

    # -- the 5.x SDK --------------------------------------------------------------------------

    def sdk(self, *command: str) -> dict[str, Any]:
        proc = subprocess.Popen(
            [str(SDK_PYTHON), str(SDK_LOAD), *command, "--endpoints", f"127.0.0.1:{self.server.grpc_port}"],
            stdout=subprocess.PIPE,
            text=True,
            cwd="/tmp",
        )
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 or not out.strip():
            raise RuntimeError(f"_sdk5_load.py {command[0]} exited with {code}: {out[-500:]}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        result["client_cpu_s"] = usage.ru_utime + usage.ru_stime
        return result

    async def sdk5(self, transport: str) -> list[Row]:
        name = f"5.x SDK (gRPC, {transport})"
        topic = await self.topic(transport)
        args = self.args
        threads = ["--topic", topic, "--threads", str(args.threads)]
        loop = asyncio.get_running_loop()
        publish = ["publish", *threads, "--seconds", str(args.seconds), "--size", str(args.size)]
        row = await loop.run_in_executor(None, self.child, name, "publish", lambda: self.sdk(*publish))
        rows = [row]
        await self.top_up(topic, row.messages)
        receive = [
            "receive", *threads, "--group", f"bench_sdk5_{transport}_{os.getpid()}", "--count",
            str(args.receive), "--batch", str(BATCH), "--invisible", str(INVISIBLE_S),
            "--await", str(AWAIT_S), "--max-seconds", str(args.max_seconds),
        ]  # fmt: skip
        rows.append(await loop.run_in_executor(None, self.child, name, "receive", lambda: self.sdk(*receive)))
        return rows


async def row_group(
    server: ServerProcess, args: argparse.Namespace, names: list[str], label: str
) -> list[Row]:
    bench = Bench(server, args)
    rows: list[Row] = []
    for name in names:
        try:
            if name == "finchmq":
                got = await bench.finchmq()
            elif name == "cpp":
                got = await bench.cpp()
            else:
                got = await bench.sdk5(name.removeprefix("sdk-"))
        except Exception as exc:  # a row that cannot run says why; the others still run
            got = [Row(name, "-", 0, 0.0, 0.0, None, f"failed: {type(exc).__name__}: {exc}"[:300])]
        for row in got:
            row.client += label
            print(row.line(), flush=True)
        rows += got
    return rows


def machine() -> str:
    """The cores, CPU model, Python, date and commit, for the results file."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], check=False, capture_output=True, text=True
        ).stdout

    commit = git("rev-parse", "--short", "HEAD").strip()
    dirty = " (+ changes)" if git("status", "--porcelain", "--untracked-files=no").strip() else ""
    now = datetime.datetime.now(datetime.UTC)
    return (
        f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, "
        f"{now:%Y-%m-%d %H:%M} UTC, commit {commit}{dirty}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20, help="publish time per client (default 20)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent senders/receivers (default 8)")
    parser.add_argument("--receive", type=int, default=20_000, help="backlog to receive (default 20000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--max-seconds", type=float, default=120, help="receive gives up after this long")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the two SDK rows this many times, alternating (default 1)"
    )
    parser.add_argument("--only", nargs="+", choices=ROWS, help="run these rows only")
    parser.add_argument(
        "--profile", type=Path, metavar="DIR", help="py-spy the broker during the C++ and SDK rows, into DIR"
    )
    parser.add_argument("--no-results", action="store_true", help=f"do not write {RESULTS.name}")
    args = parser.parse_args()
    chosen = args.only or list(ROWS)
    about = machine()
    load_before = os.getloadavg()[0]
    print(f"sdk5: {about}; finchmq server in its own process", flush=True)
    print(HEADER, flush=True)
    rows: list[Row] = []
    first = [name for name in chosen if name != "sdk-grpcio"]
    for round_ in range(1, args.rounds + 1):
        label = f" #{round_}" if args.rounds > 1 else ""
        if first:
            with ServerProcess(grpc=True) as server:  # grpcServerImpl: grpclib, the default
                rows += run(row_group(server, args, first, label))
        if "sdk-grpcio" in chosen:
            with ServerProcess(grpc=True, conf={"grpcServerImpl": "grpcio"}) as server:
                rows += run(row_group(server, args, ["sdk-grpcio"], label))
        first = [name for name in first if name == "sdk-grpclib"]  # later rounds: the transports only
    if args.no_results:
        return
    command = f"python -m benchmarks.sdk5 --seconds {args.seconds:g} --threads {args.threads}"
    command += f" --receive {args.receive} --size {args.size} --rounds {args.rounds}"
    command += f" --only {' '.join(args.only)}" if args.only else ""
    loads = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    RESULTS.write_text(
        f"{command}\n{about}\n"
        f"Other sessions' work ran on the same cores ({loads}): compare rows of this run.\n"
        "finchmq, cpp and the first sdk-grpclib share one server (grpclib); each other row group its own.\n\n"
        f"{HEADER}\n" + "\n".join(row.line() for row in rows) + "\n"
    )
    print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
