"""finchmq side by side with NATS JetStream and Redis Streams, on this machine, in one session.

    python -m benchmarks.compare [--duration 10] [--warmup 2] [--repeat 3] [--systems finchmq,nats,redis]

Each system runs as its own server process on loopback, with a fresh temporary data directory,
started and stopped here: ``finchmq server`` (ASYNC_FLUSH, RocketMQ's defaults), Debian's
``nats-server`` (JetStream, file storage) and ``redis-server`` (Streams, AOF with
``appendfsync everysec``); missing Debian packages are installed with apt-get, missing Python
packages (the ``bench`` extra: nats-py, redis + hiredis, matplotlib) with pip.

Workloads, each driven by the system's own Python client through the same asyncio loops
(``finchmq.cli.bench``: ``closed_loop`` and ``fixed_rate``), the load generator being a separate
process on uvloop:

- persistent publish, 128 B and 1 KiB bodies, 1 and 32 concurrent publishers, each awaiting its
  acknowledgement before the next publish (``--warmup`` s, then ``--duration`` s measured);
- consume: a backlog of ``--backlog`` 128 B messages, published first, drained by 8 consumer
  tasks (finchmq: a push consumer, whose topic has 8 queues; also a pull consumer loop per
  queue), timed from the first message to the last;
- end to end: ``--e2e-rate`` messages/s published on a fixed schedule while consuming, latency
  from just before the publish to the consumer's hands (p50/p99);
- finchmq again driven by the C++ client (librocketmq, ``cpp_loadgen.c``: N threads of sync
  sends), publish only, to show what the broker itself sustains;
- finchmq only (both clients): 1 KiB in RocketMQ batches of 32 from 8 publishers, the batch case
  of ``broker_send.py`` (the peers' Python clients have no batch publish).

``--baseline-src DIR`` runs the Python-client cases once more with another checkout's client
(``DIR`` is its ``src``, e.g. of ``git worktree add /tmp/base main``), against a fresh server of
this checkout, as the column "finchmq (baseline client)": a client change before and after in
one run.

``--profile CASE`` records the finchmq server with py-spy during one case and summarises it.

Prints one table (best of ``--repeat`` runs, their spread, and finchmq/peer ratios), writes it
with every run to ``benchmarks/results/compare.json`` and ``compare.txt``, and draws
``compare.png``. The machine's 2 cores are shared by the servers, the load generators and
anything else running: read the spread before the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from benchmarks._cpp import build_loadgen, run_loadgen
from benchmarks._peers import NatsServer, PeerServer, RedisServer
from benchmarks._profile import py_spy, summarize
from benchmarks._server import ROOT, ServerProcess
from finchmq.client import BlockingAdminClient

RESULTS = Path(__file__).with_name("results")
BENCH_REQUIREMENTS = (
    "nats-py>=2.6",
    "redis>=5",
    "hiredis>=2",
    "matplotlib>=3.7",
)  # pyproject's `bench` extra
PUBLISH_CASES = ((128, 1), (128, 32), (1024, 1), (1024, 32))  # (body bytes, concurrent publishers)
CONSUMERS = 8
BATCH_CASE = "publish_1024_batch32_8"  # broker_send's batch case: RocketMQ batches, which the peers lack
SYSTEMS = ("finchmq", "finchmq-base", "finchmq-cpp", "nats", "redis")
COLUMNS = {
    "finchmq": "finchmq (Python client)",
    "finchmq-base": "finchmq (baseline client)",
    "finchmq-cpp": "finchmq (C++ client)",
    "nats": "NATS JetStream",
    "redis": "Redis Streams",
}
FINCHMQ_SETTINGS = (
    "finchmq server, flushDiskType=ASYNC_FLUSH (page cache at once, fsync every flushIntervalCommitLog="
    "500 ms), 1 GiB commit-log segments, topics of 8 queues created up front"
)


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    unit: str  # "msg/s" or "ms"
    metric: str  # the summary key
    higher_is_better: bool = True


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


ROWS = (
    *(
        Row(f"publish_{size}_{n}", f"publish {_size(size)}, {n} publisher{'s'[: n - 1]}", "msg/s", "tps")
        for size, n in PUBLISH_CASES
    ),
    Row(BATCH_CASE, "publish 1 KiB in batches of 32, 8 publishers (finchmq only)", "msg/s", "tps"),
    Row("consume", "consume 128 B backlog", "msg/s", "tps"),
    Row("consume_pull", "consume 128 B backlog (finchmq: pull loops)", "msg/s", "tps"),
    Row("e2e_p50", "end-to-end p50 at the fixed rate", "ms", "p50_ms", higher_is_better=False),
    Row("e2e_p99", "end-to-end p99 at the fixed rate", "ms", "p99_ms", higher_is_better=False),
)  # fmt: skip


def ensure_python_packages() -> None:
    missing = [m for m in ("nats", "redis", "hiredis", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        print(
            f"compare: installing {', '.join(BENCH_REQUIREMENTS)} (pip install -e '.[bench]' does the same)"
        )
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *BENCH_REQUIREMENTS], check=True)


class Runner:
    """Runs the load generators as subprocesses and records CPU use alongside their summaries."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.runs: list[dict[str, Any]] = []
        self.profile_raw: Path | None = None

    def _record(
        self, system: str, case: str, repeat: int, result: dict[str, Any], extra: dict[str, Any]
    ) -> None:
        entry = {"system": system, "case": case, "repeat": repeat, **extra, "result": result}
        self.runs.append(entry)
        metric = f"{result['tps']:,.0f} msg/s" if case != "e2e" else (
            f"p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms at {result['send_tps']:,.0f}/s, "
            f"lost {result['lost']}"
        )  # fmt: skip
        errors = result.get("send_failed", 0) + result.get("response_failed", 0) + result.get("errors", 0)
        print(
            f"  {system:<12} {case:<16} {metric:<44} server cpu {extra['server_cpu_pct']:>4.0f}%  "
            f"client cpu {extra['client_cpu_pct']:>4.0f}%  errors {errors}  "
            f"load {extra['load_1m_at_start']:.1f}",
            flush=True,
        )

    def run_json(
        self, cmd: list[str], server_cpu: Callable[[], float], env: dict[str, str] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run a load generator, return its last JSON line and the CPU both sides used."""
        load = os.getloadavg()[0]
        cpu_before = server_cpu()
        began = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
        )
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read()
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - began
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(
                f"{' '.join(cmd)} exited with {proc.returncode} and no JSON:\n{out[-800:]}{err[-1500:]}"
            )
        result: dict[str, Any] = json.loads(lines[-1])
        return result, {
            "load_1m_at_start": round(load, 2),
            "wall_s": round(wall, 2),
            "server_cpu_pct": round((server_cpu() - cpu_before) / wall * 100, 1),
            "client_cpu_pct": round((usage.ru_utime + usage.ru_stime) / wall * 100, 1),
        }

    # -- finchmq ----------------------------------------------------------------------------------------

    def _profiled(
        self, system: str, case: str, repeat: int, server: ServerProcess
    ) -> contextlib.AbstractContextManager[None]:
        """py-spy on the finchmq server during ``--profile``'s case, in the last repeat."""
        a = self.args
        name = {"finchmq": case, "finchmq-cpp": f"cpp_{case}"}.get(system)
        if a.profile is None or a.profile != name or repeat != a.repeat - 1:
            return contextlib.nullcontext()
        a.out.mkdir(parents=True, exist_ok=True)
        self.profile_raw = a.out / f"profile_{name}.raw"
        return py_spy(server.pid, a.warmup + a.duration + 1, self.profile_raw)

    def finchmq(self, repeat: int, with_cpp: bool, system: str = "finchmq", src: Path | None = None) -> None:
        """The Python-client cases (then the C++ client's); ``src``: the client of another
        checkout (``--baseline-src``) drives this checkout's server."""
        a = self.args
        bench = [sys.executable, "-m", "finchmq.cli", "bench"]
        common = ["--interval", "3600", "--json"]
        env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
        tag = "" if src is None else "b"
        with ServerProcess() as server:
            addr = server.namesrv_addr
            time.sleep(1)
            for size, n in PUBLISH_CASES:
                case = f"publish_{size}_{n}"
                args = f"producer -n {addr} -t Pub_{size}_{n}_{repeat}{tag} -w {n} -s {size} -d {a.duration}"
                cmd = [*bench, *args.split(), "--warmup", str(a.warmup), *common]
                with self._profiled(system, case, repeat, server):
                    measured = self.run_json(cmd, server.cpu_seconds, env)
                self._record(system, case, repeat, *measured)
            args = f"producer -n {addr} -t Batch_{repeat}{tag} -w 8 -b 32 -s 1024 -d {a.duration}"
            with self._profiled(system, BATCH_CASE, repeat, server):
                measured = self.run_json(
                    [*bench, *args.split(), "--warmup", str(a.warmup), *common], server.cpu_seconds, env
                )
            self._record(system, BATCH_CASE, repeat, *measured)
            backlog = f"Backlog_{repeat}{tag}"
            args = f"producer -n {addr} -t {backlog} -w 32 -q {a.backlog} -d 0"
            preload, _ = self.run_json([*bench, *args.split(), *common], server.cpu_seconds, env)
            for case, mode in (("consume", "push"), ("consume_pull", "pull")):
                args = (
                    f"consumer -n {addr} -t {backlog} -g bench_{mode}_{repeat}{tag} -m {mode} --from first "
                    f"-q {preload['messages']} -d {a.consume_timeout}"
                )
                with self._profiled(system, case, repeat, server):
                    measured = self.run_json([*bench, *args.split(), *common], server.cpu_seconds, env)
                self._record(system, case, repeat, *measured)
            args = f"e2e -n {addr} -t E2E_{repeat}{tag} -r {a.e2e_rate} -d {a.duration}"
            with self._profiled(system, "e2e", repeat, server):
                measured = self.run_json([*bench, *args.split(), *common], server.cpu_seconds, env)
            self._record(system, "e2e", repeat, *measured)
            if with_cpp:
                self._cpp(server, repeat)

    def _cpp(self, server: ServerProcess, repeat: int) -> None:
        loadgen = build_loadgen()
        cases = {f"publish_{size}_{n}": (size, n, 0) for size, n in PUBLISH_CASES}
        cases[BATCH_CASE] = (1024, 8, 32)
        topics = {case: f"Cpp_{case}_{repeat}" for case in cases}
        with BlockingAdminClient(namesrv_addr=server.namesrv_addr) as admin:
            for topic in topics.values():
                admin.create_topic(topic, read_queue_nums=8, write_queue_nums=8)
        time.sleep(0.5)
        for case, (size, n, batch) in cases.items():
            topic = topics[case]
            load = os.getloadavg()[0]
            before = server.cpu_seconds()
            with self._profiled("finchmq-cpp", case, repeat, server):
                result = run_loadgen(
                    loadgen, server.namesrv_addr, topic, threads=n, seconds=self.args.duration, size=size,
                    batch=batch, warmup=self.args.warmup,
                )  # fmt: skip
            wall = result["wall"]
            extra = {
                "load_1m_at_start": round(load, 2),
                "wall_s": round(wall, 2),
                "server_cpu_pct": round((server.cpu_seconds() - before) / wall * 100, 1),
                "client_cpu_pct": round(result["client_cpu_s"] / wall * 100, 1),
            }
            self._record("finchmq-cpp", case, repeat, result, extra)

    # -- peers ------------------------------------------------------------------------------------------

    def peer(self, server: PeerServer, repeat: int) -> None:
        a = self.args
        name = server.name
        gen = [sys.executable, "-m", "benchmarks._peer_bench", name]
        with server:
            time.sleep(0.5)
            for size, n in PUBLISH_CASES:
                args = (
                    f"publish --addr {server.addr} --stream pub_{size}_{n} --size {size} --concurrency {n} "
                    f"--duration {a.duration} --warmup {a.warmup}"
                )
                self._record(
                    name,
                    f"publish_{size}_{n}",
                    repeat,
                    *self.run_json([*gen, *args.split()], server.cpu_seconds),
                )
            args = f"publish --addr {server.addr} --stream backlog --concurrency 32 --messages {a.backlog}"
            preload, _ = self.run_json([*gen, *args.split(), "--duration", "0"], server.cpu_seconds)
            args = (
                f"consume --addr {server.addr} --stream backlog --consumers {CONSUMERS} "
                f"--messages {preload['messages']} --duration {a.consume_timeout}"
            )
            self._record(name, "consume", repeat, *self.run_json([*gen, *args.split()], server.cpu_seconds))
            args = (
                f"e2e --addr {server.addr} --stream e2e --consumers {CONSUMERS} --rate {a.e2e_rate} "
                f"--duration {a.duration}"
            )
            self._record(name, "e2e", repeat, *self.run_json([*gen, *args.split()], server.cpu_seconds))


# -- the table -------------------------------------------------------------------------------------------


def _values(runs: list[dict[str, Any]], system: str, row: Row) -> list[float]:
    case = "e2e" if row.key.startswith("e2e") else row.key
    if system in ("nats", "redis") and row.key == "consume_pull":
        case = "consume"  # the peers' consumers are pull loops already: the same figure
    return [float(r["result"][row.metric]) for r in runs if r["system"] == system and r["case"] == case]


def build_table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    table = []
    for row in ROWS:
        cells: dict[str, Any] = {}
        for system in SYSTEMS:
            values = _values(runs, system, row)
            if not values:
                continue
            best = max(values) if row.higher_is_better else min(values)
            spread = (max(values) - min(values)) / best * 100 if best else 0.0
            cells[system] = {"best": best, "values": values, "spread_pct": round(spread, 1)}
        ratios = {}
        if "finchmq" in cells:
            for peer in ("nats", "redis", "finchmq-base"):
                if peer in cells and cells[peer]["best"]:
                    ratios[peer] = round(cells["finchmq"]["best"] / cells[peer]["best"], 2)
        table.append(
            {
                "key": row.key,
                "label": row.label,
                "unit": row.unit,
                "higher_is_better": row.higher_is_better,
                "cells": cells,
                "finchmq_over": ratios,
            }
        )
    return table


def _columns(table: list[dict[str, Any]]) -> list[str]:
    """Every system's column; the baseline client's only when it ran."""
    ran = {s for t in table for s in t["cells"]}
    return [s for s in SYSTEMS if s != "finchmq-base" or s in ran]


def format_table(table: list[dict[str, Any]], repeats: int) -> str:
    def cell(c: dict[str, Any] | None, unit: str) -> str:
        if c is None:
            return "-"
        value = f"{c['best']:,.0f}" if unit == "msg/s" else f"{c['best']:.2f}"
        return f"{value} ({c['spread_pct']:.0f}%)" if repeats > 1 else value

    systems = _columns(table)
    ratios = {"nats": "finchmq/NATS", "redis": "finchmq/Redis"}
    if "finchmq-base" in systems:
        ratios["finchmq-base"] = "finchmq/baseline"
    headers = ["workload", "unit", *(COLUMNS[s] for s in systems), *ratios.values()]
    rows = []
    for t in table:
        arrow = "" if t["higher_is_better"] else " (lower is better)"
        rows.append([
            t["label"] + arrow, t["unit"], *(cell(t["cells"].get(s), t["unit"]) for s in systems),
            *(f"{t['finchmq_over'][p]:.2f}" if p in t["finchmq_over"] else "-" for p in ratios),
        ])  # fmt: skip
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    for r in rows:
        lines.append(
            " | ".join(
                (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


def format_cpu(runs: list[dict[str, Any]]) -> str:
    """Median CPU of the server and of the load generator per system and case, and the CPU per
    message of each (its CPU share over the whole case divided by the measured rate: slightly
    low, as it includes start-up; steadier than the rates when other work shares the cores)."""
    cases = [*(f"publish_{s}_{n}" for s, n in PUBLISH_CASES), BATCH_CASE, "consume", "consume_pull"]
    lines = [
        "CPU while measuring, median of the runs: server % / load generator % (100% = one core), "
        "and ~server / ~load generator (client) CPU µs per message:"
    ]
    for system in SYSTEMS:
        parts = []
        for case in [*cases, "e2e"]:
            rs = sorted(
                (r for r in runs if r["system"] == system and r["case"] == case),
                key=lambda r: r["server_cpu_pct"],
            )
            if not rs:
                continue
            mid = rs[len(rs) // 2]
            part = f"{case} {mid['server_cpu_pct']:.0f}/{mid['client_cpu_pct']:.0f}"
            per_msg = sorted(
                r["server_cpu_pct"] / 100 / r["result"]["tps"] * 1e6 for r in rs if r["result"]["tps"]
            )
            client_per_msg = sorted(
                r["client_cpu_pct"] / 100 / r["result"]["tps"] * 1e6 for r in rs if r["result"]["tps"]
            )
            if case in cases and per_msg:
                mid_msg = len(per_msg) // 2
                part += f" ~{per_msg[mid_msg]:.0f}/{client_per_msg[mid_msg]:.0f} µs"
            parts.append(part)
        if parts:
            lines.append(f"  {COLUMNS[system]}: " + ", ".join(parts))
    return "\n".join(lines)


def draw(table: list[dict[str, Any]], path: Path, subtitle: str) -> None:
    import matplotlib  # noqa: PLC0415 - installed by ensure_python_packages() when missing

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    colors = {
        "finchmq": "#d95f02",
        "finchmq-base": "#a6761d",
        "finchmq-cpp": "#fdae6b",
        "nats": "#1b9e77",
        "redis": "#7570b3",
    }
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 1]})
    for ax, unit in ((left, "msg/s"), (right, "ms")):
        rows = [t for t in table if t["unit"] == unit]
        systems = _columns(table)
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            xs, ys, lo, hi = [], [], [], []
            for x, t in enumerate(rows):
                c = t["cells"].get(system)
                if c is None:
                    continue
                xs.append(x + (i - (len(systems) - 1) / 2) * width)
                ys.append(c["best"])
                lo.append(c["best"] - min(c["values"]))
                hi.append(max(c["values"]) - c["best"])
            if xs:
                ax.bar(xs, ys, width, label=COLUMNS[system], color=colors[system], yerr=[lo, hi], capsize=2)
        ax.set_xticks(range(len(rows)))
        labels = [t["label"].replace(" at the fixed rate", "").replace("end-to-end", "e2e") for t in rows]
        ax.set_xticklabels([textwrap.fill(lb, 20) for lb in labels], fontsize=8)
        ax.set_ylabel("messages per second (best run)" if unit == "msg/s" else "milliseconds (best run)")
        ax.grid(axis="y", alpha=0.3)
    left.set_title("Throughput (higher is better)")
    right.set_title("End-to-end latency (lower is better)")
    left.legend(fontsize=8)
    fig.suptitle(f"finchmq vs NATS JetStream vs Redis Streams, same machine\n{subtitle}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=10, help="measured seconds per case (default 10)")
    parser.add_argument("--warmup", type=float, default=2, help="seconds before measuring (default 2)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of everything; best and spread (default 1)"
    )
    parser.add_argument("--backlog", type=int, default=100_000, help="messages drained by the consume case")
    parser.add_argument("--consume-timeout", type=float, default=60, help="cap on the consume case (s)")
    parser.add_argument("--e2e-rate", type=float, default=1000, help="messages/s in the end-to-end case")
    parser.add_argument("--systems", default="finchmq,nats,redis", help="comma-separated (default all)")
    parser.add_argument("--no-cpp", action="store_true", help="skip the C++ client runs")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        metavar="DIR",
        help="also run the Python-client cases with the client in DIR (another checkout's src)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for compare.json/.txt/.png")
    parser.add_argument(
        "--profile",
        metavar="CASE",
        help="py-spy the finchmq server during CASE of the last run (publish_128_32, consume, e2e, ...; "
        "cpp_publish_128_32 for the C++ client's): writes profile_CASE.raw and profile_CASE.txt",
    )
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="only redraw the table and chart from a compare.json"
    )
    args = parser.parse_args()
    if args.render:
        report(json.loads(args.render.read_text()), args.out)
        return
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    ensure_python_packages()
    peers = {"nats": NatsServer, "redis": RedisServer}
    versions = {name: cls.version() for name, cls in peers.items() if name in systems}
    settings = {"finchmq": FINCHMQ_SETTINGS} | {n: c.settings for n, c in peers.items() if n in systems}
    info = machine()
    print(
        f"compare: {info['cpus']} cores ({info['cpu_model']}), load average {info['load_average_at_start']}"
    )
    for name, text in settings.items():
        print(f"  {name}: {text}")
    runner = Runner(args)
    started = datetime.now(UTC)
    for repeat in range(args.repeat):
        print(f"run {repeat + 1}/{args.repeat}", flush=True)
        for system in systems:
            if system == "finchmq":
                runner.finchmq(repeat, with_cpp=not args.no_cpp)
                if args.baseline_src is not None:
                    runner.finchmq(repeat, with_cpp=False, system="finchmq-base", src=args.baseline_src)
            else:
                runner.peer(peers[system](), repeat)
    document = {
        "started": started.isoformat(timespec="seconds"),
        "machine": info,
        "parameters": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "settings": settings,
        "versions": versions,
        "clients": (
            f"nats-py {_version('nats-py')}, redis-py {_version('redis')} (hiredis {_version('hiredis')})"
        ),
        "runs": runner.runs,
    }
    report(document, args.out)
    if runner.profile_raw is not None and runner.profile_raw.exists():
        summary = summarize(runner.profile_raw)
        runner.profile_raw.with_suffix(".txt").write_text(
            f"py-spy --gil, finchmq server, {args.profile}\n{summary}\n"
        )
        print(f"\nprofile of the finchmq server during {args.profile}:\n{summary}")


def report(document: dict[str, Any], out: Path) -> None:
    """Print the table and write compare.txt, compare.json and compare.png into ``out``."""
    info, p = document["machine"], document["parameters"]
    table = document["table"] = build_table(document["runs"])
    subtitle = (
        f"{info['cpus']} cores ({info['cpu_model']}) shared by servers, load generators and other work; "
        f"{p['duration']:g} s per case, best of {p['repeat']}"
    )
    started = datetime.fromisoformat(document["started"])
    loads = [r["load_1m_at_start"] for r in document["runs"] if "load_1m_at_start" in r]
    load = f" Load average (1 min) at the cases' starts: {min(loads):.1f}-{max(loads):.1f}." if loads else ""
    text = "\n".join([
        f"finchmq compare, {started:%Y-%m-%d %H:%M} UTC: {subtitle}.{load}",
        f"Cells: best run{' (spread of the runs, (max-min)/best)' if p['repeat'] > 1 else ''}. "
        f"Ratios: finchmq (Python client) / peer; above 1 is better for throughput, worse for latency.",
        f"End to end: {p['e2e_rate']:,.0f} msg/s of 128 B for {p['duration']:g} s. "
        f"Consume: a backlog of {p['backlog']:,} 128 B messages.",
        "",
        format_table(table, p["repeat"]),
        "",
        format_cpu(document["runs"]),
        "",
        "Settings:",
        *(f"  {COLUMNS.get(k, k)}: {v}" for k, v in document["settings"].items()),
        f"  versions: {', '.join(f'{k} {v}' for k, v in document['versions'].items())}; "
        f"{document.get('clients', '')}",
    ])  # fmt: skip
    print()
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.txt").write_text(text + "\n")
    (out / "compare.json").write_text(json.dumps(document, indent=1) + "\n")
    draw(table, out / "compare.png", subtitle)
    print(f"\nwrote {out / 'compare.txt'}, {out / 'compare.json'} and {out / 'compare.png'}")


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "-"


if __name__ == "__main__":
    main()
