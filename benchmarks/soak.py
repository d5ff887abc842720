"""Soak: ``finchmq bench e2e`` at a fixed rate well below capacity for a long time, against a
``finchmq server`` of this checkout. ``python -m benchmarks.soak --rate 3000 --size 512 --duration 120``

Below capacity a broker must not shed (issue 29: one ``[OVERLOAD]`` among 720,000 sends at
15 % of capacity). The soak prints the throughput, the end-to-end and send latency percentiles,
every SYSTEM_BUSY the broker answered by kind (its ``flowControl.*`` counters,
GET_BROKER_RUNTIME_INFO, read before and after) and in which 10 s intervals they came, memory
(the broker's resident set at the start, its peak sampled every second and at the end; the load
generator's peak), the broker's CPU, how long its event loop waited for a CPU
(``/proc/PID/schedstat``: on a shared machine, a send that waited 200 ms in the queue while the
broker had no CPU is answered TIMEOUT_CLEAN_QUEUE, Java's rule, rightly) and the broker log's
warnings. ``--fraction F`` first measures the capacity with ``finchmq bench producer`` (closed
loop, same message size) and soaks at F of it; ``--rate`` gives the rate directly. The figures
are appended to ``benchmarks/results/soak.txt``; the exit status is 1 when the broker answered
more than ``--max-busy`` SYSTEM_BUSY (default 0) or a message was not received.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._server import ROOT, ServerProcess, rss_mib
from finchmq.client import AdminClient

__all__ = ["main", "run_soak"]

RESULTS = Path(__file__).with_name("results") / "soak.txt"


def _bench(args: list[str]) -> tuple[dict[str, Any], float, list[dict[str, Any]]]:
    """Run ``finchmq bench ARGS --json``: its summary, the load generator's peak RSS (MiB) and
    its progress lines (one every 10 s)."""
    cmd = [sys.executable, "-m", "finchmq.cli", "bench", *args, "--json", "--interval", "10"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    summaries = [json.loads(line) for line in out.splitlines() if line.startswith('{"type": "summary"')]
    if not summaries:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode} and no summary:\n{out[-2000:]}")
    progress = [json.loads(line) for line in out.splitlines() if line.startswith('{"type": "progress"')]
    return summaries[-1], usage.ru_maxrss / 1024, progress  # ru_maxrss: KiB on Linux


def _cpu_wait_seconds(pid: int) -> float:
    """Seconds the process's main thread (the broker's event loop) has waited for a CPU."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


async def _flow_control(namesrv: str, broker_addr: str) -> dict[str, int]:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        info = await admin.instance.api.get_broker_runtime_info(broker_addr, 5000)
    return {k.removeprefix("flowControl."): int(v) for k, v in info.items() if k.startswith("flowControl.")}


class _RssSampler:
    """The broker's resident set, every second, in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.first = rss_mib(pid)
        self.peak = self.first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, rss_mib(self.pid))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        last = rss_mib(self.pid)
        self.peak = max(self.peak, last)
        return last


def run_soak(args: argparse.Namespace) -> tuple[str, bool]:
    """Run the soak; the report and whether it passed."""
    with ServerProcess() as server:
        broker = f"127.0.0.1:{server.broker_port}"
        capacity = 0.0
        rate = args.rate
        if args.fraction:
            measured, _, _ = _bench(
                [
                    "producer",
                    "-n",
                    server.namesrv_addr,
                    "-s",
                    str(args.size),
                    "-d",
                    str(args.capacity_seconds),
                ]
            )
            capacity = float(measured["tps"])
            rate = round(capacity * args.fraction)
        before = asyncio.run(_flow_control(server.namesrv_addr, broker))
        cpu_before = server.cpu_seconds()
        waited_before = _cpu_wait_seconds(server.pid)
        rss = _RssSampler(server.pid)
        load = os.getloadavg()
        began = time.monotonic()
        summary, client_peak, progress = _bench(
            [
                "e2e",
                "-n",
                server.namesrv_addr,
                "-r",
                str(rate),
                "-s",
                str(args.size),
                "-d",
                str(args.duration),
            ]
        )
        wall = time.monotonic() - began
        rss_last = rss.stop()
        load_after = os.getloadavg()[0]
        cpu = server.cpu_seconds() - cpu_before
        waited = _cpu_wait_seconds(server.pid) - waited_before
        after = asyncio.run(_flow_control(server.namesrv_addr, broker))
        warnings = _warnings(server.log_path.read_text(errors="replace"))
    busy = {kind: n - before.get(kind, 0) for kind, n in sorted(after.items()) if n - before.get(kind, 0)}
    total_busy = sum(busy.values())
    send = summary["send_rt"]
    passed = total_busy <= args.max_busy and not summary["lost"]
    sent = summary["sent"]
    lines = [
        f"== soak {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {_revision()}, "
        f"load average {load[0]:.2f} at start, {load_after:.2f} at the end, {os.cpu_count()} cores",
        f"rate {rate:,.0f}/s x {args.size} B x {args.duration:g} s"
        + (f" ({args.fraction:.0%} of a measured capacity of {capacity:,.0f} sends/s)" if capacity else ""),
        f"  throughput: sent {sent:,} (achieved {summary['send_tps']:,.0f}/s), "
        f"received {summary['messages']:,} ({summary['tps']:,.0f}/s), "
        f"not received within the drain {summary['lost']:,}, duplicates {summary['duplicates']:,}",
        f"  end-to-end RT (ms): p50 {summary['p50_ms']:.2f} p99 {summary['p99_ms']:.2f} "
        f"p99.9 {summary['p999_ms']:.2f} max {summary['max_ms']:.2f}",
        f"  send RT (ms): p50 {send['p50_ms']:.2f} p99 {send['p99_ms']:.2f} p99.9 {send['p999_ms']:.2f} "
        f"max {send['max_ms']:.2f}; send failed {summary['send_failed']}, "
        f"response failed {summary['response_failed']}",
        "  SYSTEM_BUSY by kind: " + (", ".join(f"{k} {n}" for k, n in busy.items()) if busy else "none"),
        f"  broker: RSS {rss.first:.0f} MiB at start, peak {rss.peak:.0f}, end {rss_last:.0f}; "
        f"CPU {cpu / wall * 100:.0f} % ({cpu / max(sent, 1) * 1e6:.0f} us a message), its event loop "
        f"waited {waited:.1f} s for a CPU ({waited / wall * 100:.1f} % of the run); "
        f"load generator peak RSS {client_peak:.0f} MiB",
        f"  {'PASS' if passed else 'FAIL'}: {total_busy} SYSTEM_BUSY (at most {args.max_busy}), "
        f"{summary['lost']} not received",
    ]
    busy_at = [
        f"{(i + 1) * 10}s: {p['response_failed']}" for i, p in enumerate(progress) if p["response_failed"]
    ]
    if busy_at:
        lines.insert(-1, "  SYSTEM_BUSY by 10 s interval (end of interval: count): " + ", ".join(busy_at))
    for what, n in warnings.most_common(6):
        lines.insert(-1, f"  broker log: {n} x {what}")
    if summary.get("first_error"):
        lines.insert(-1, f"  first error: {summary['first_error']}")
    if summary["send_tps"] < 0.95 * rate:
        lines.insert(
            -1,
            f"  the rate was not reached (load average {load_after:.2f} at the end): the machine was "
            "short of CPU, so these figures are not the broker's below its capacity",
        )
    return "\n".join(lines), passed


def _warnings(log: str) -> Counter[str]:
    """The broker log's warnings and errors, by logger and the start of the message (numbers out)."""
    out: Counter[str] = Counter()
    for line in log.splitlines():
        parts = line.split(" ", 4)
        if len(parts) == 5 and parts[2] in ("WARNING", "ERROR", "CRITICAL"):
            out[f"{parts[2]} {parts[3]} {re.sub(r'[0-9.]+', 'N', parts[4])[:70]}"] += 1
    return out


def _revision() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-r", "--rate", type=float, default=3000.0, help="messages/s (default 3000)")
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.0,
        help="soak at this fraction of a measured capacity instead of --rate",
    )
    parser.add_argument("--capacity-seconds", type=float, default=20.0, help="length of the capacity run")
    parser.add_argument("-s", "--size", type=int, default=512, help="body bytes (default 512)")
    parser.add_argument("-d", "--duration", type=float, default=120.0, help="seconds (default 120)")
    parser.add_argument("--max-busy", type=int, default=0, help="SYSTEM_BUSY answers tolerated (default 0)")
    parser.add_argument("--no-save", action="store_true", help=f"do not append to {RESULTS.name}")
    args = parser.parse_args()
    if not (0.0 <= args.fraction < 1.0):
        parser.error("--fraction must be in [0, 1)")
    report, passed = run_soak(args)
    print(report, flush=True)
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(report + "\n\n")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
