"""The broker's send capacity, driven by the official C++ client so the broker is measured,
then an overload run.

    python -m benchmarks.broker_send [--seconds 20] [--threads 32] [--overload-seconds 60]

Compiles ``cpp_loadgen.c`` against librocketmq (the C++ client bundled in PyPI
``rocketmq==0.4.4``, in ``.venv-cpp``; ``make test`` creates it), starts ``finchmq server`` in its
own process (fresh data directory, ASYNC_FLUSH), reports its idle RSS, then runs 1 KiB sync sends
from N producer threads and batches of 32, printing TPS, average/p99/max latency, the CPU used
by the broker and by the load generator (both on this 2-core machine) and the broker's RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._cpp import build_loadgen, run_loadgen
from benchmarks._server import ROOT, ServerProcess


def run_case(
    server: ServerProcess, loadgen: Path, name: str, *, threads: int, seconds: float, batch: int, size: int
) -> dict[str, float]:
    topic = "Bench_" + "".join(c for c in name if c.isalnum())
    cpu_before = server.cpu_seconds()
    result = run_loadgen(
        loadgen, server.namesrv_addr, topic, threads=threads, seconds=seconds, size=size, batch=batch
    )
    wall = result["wall"]
    broker_cpu = (server.cpu_seconds() - cpu_before) / wall * 100
    tps = result["tps"]
    print(
        f"{name:<24} {tps:>9,.0f} msgs/s  avg={result['avg_ms']:.2f}ms p99={result['p99_ms']:.2f}ms "
        f"max={result['max_ms']:.1f}ms errors={result['errors']}"
    )
    if result["errors"]:
        print(f"{'':<24} first error: {result['error_samples'][0]}")
    print(
        f"{'':<24} broker cpu {broker_cpu:.0f}%  load generator cpu "
        f"{result['client_cpu_s'] / wall * 100:.0f}%  broker rss {server.rss_mib():.0f} MiB"
    )
    return result


def _generator(
    server: ServerProcess, mode: list[str], seconds: float, interval: float
) -> list[dict[str, object]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._openloop", "--addr", f"127.0.0.1:{server.broker_port}",
         "--seconds", str(seconds), "--interval", str(interval), *mode],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    reports: list[dict[str, object]] = []
    for line in proc.stdout:
        report = json.loads(line)
        report["rss_mib"] = round(server.rss_mib(), 1)
        reports.append(report)
        rejected = report["rejected"]
        assert isinstance(rejected, dict)
        by_remark = ", ".join(f"{k} {v:,.0f}/s" for k, v in sorted(rejected.items())) or "none"
        held_back = float(report.get("not_offered", 0))  # type: ignore[arg-type]
        pushback = f" (TCP held back {held_back:,.0f}/s)" if held_back else ""
        print(
            f"  t={report['t']:>5}s written {report['offered']:>8,.0f}/s{pushback} "
            f"accepted {report['accepted']:>8,.0f}/s "
            f"p99 {report['p99_ms']:6.1f}ms rss {report['rss_mib']:5.1f}MiB rejected: {by_remark}"
        )
    proc.wait()
    return reports


def overload(server: ServerProcess, seconds: float) -> None:
    """Capacity with 64 sends in flight, then 2x that rate offered open-loop.

    An overloaded broker pauses reading a connection it refused (``overloadPauseReadMills``), so
    part of the offered load never leaves the generator: TCP holds it back, and each line says
    how much. Latency is from the generator's write, so it includes the time spent in socket
    buffers.
    """
    print("overload: unloaded capacity (raw-protocol generator, 64 sends of 1 KiB in flight, 10 s)")
    capacity_reports = _generator(server, ["--window", "64"], 10, 5)
    capacity = max(float(r["accepted"]) for r in capacity_reports)  # type: ignore[arg-type]
    print(
        f"overload: capacity {capacity:,.0f} msgs/s; offering {2 * capacity:,.0f} msgs/s for {seconds:.0f} s"
    )
    reports = _generator(server, ["--rate", str(2 * capacity)], seconds, 5)
    steady = reports[1:] or reports
    accepted = sum(float(r["accepted"]) for r in steady) / len(steady)  # type: ignore[arg-type]
    print(
        f"overload: accepted {accepted:,.0f} msgs/s under 2x load = {accepted / capacity * 100:.0f}% "
        f"of capacity (target >= 80%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--batch-threads", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--overload-seconds", type=float, default=60, help="0 skips the overload run")
    args = parser.parse_args()
    loadgen = build_loadgen()
    with ServerProcess() as server:
        time.sleep(2)
        print(f"broker_send: finchmq server pid {server.pid}, {os.cpu_count()} cores")
        print(f"idle RSS of finchmq server: {server.rss_mib():.1f} MiB (target <= 80)")
        run_case(
            server, loadgen, f"sync 1KiB x{args.threads} thr", threads=args.threads, seconds=args.seconds,
            batch=0, size=args.size,
        )  # fmt: skip
        print(f"{'':<24} broker log: {server.log_tail(3)}")
        run_case(
            server, loadgen, f"batch32 1KiB x{args.batch_threads} thr", threads=args.batch_threads,
            seconds=args.seconds, batch=32, size=args.size,
        )  # fmt: skip
    if args.overload_seconds > 0:
        with ServerProcess() as server:
            overload(server, args.overload_seconds)


if __name__ == "__main__":
    main()
