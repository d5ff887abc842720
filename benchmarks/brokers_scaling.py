"""Scaling across cores the RocketMQ way: ``finchmq server --brokers N`` against N = 1 and N = 2.

    python -m benchmarks.brokers_scaling [--seconds 15] [--threads 32] [--size 128]

Each run starts a fresh ``finchmq server --brokers N`` (one name server, N broker processes, each with
its own store), creates the topic with 8 queues on every broker, and drives it with the C load
generator on the official C++ client (``cpp_loadgen.c``: sync sends from ``--threads`` threads, routed
over all brokers as any RocketMQ client does). It prints sends/s, the brokers' CPU (all processes)
per send and the load generator's CPU, and writes ``benchmarks/results/brokers_scaling.txt``.
On this 2-core machine the load generator takes a share of the cores too.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from benchmarks._cpp import build_loadgen, run_loadgen
from benchmarks._server import ServerProcess
from finchmq.client import AdminClient

RESULTS = Path(__file__).parent / "results" / "brokers_scaling.txt"


def run(n: int, loadgen: Path, seconds: float, threads: int, size: int) -> dict[str, float]:
    with ServerProcess(metrics=False, brokers=n) as server:
        topic = f"Scale{n}"

        async def create() -> None:
            async with AdminClient(namesrv_addr=server.namesrv_addr) as admin:
                await admin.create_topic(
                    topic, cluster="DefaultCluster", read_queue_nums=8, write_queue_nums=8
                )

        asyncio.run(create())
        time.sleep(1)
        before = server.cpu_seconds()
        result = run_loadgen(loadgen, server.namesrv_addr, topic, threads=threads, seconds=seconds, size=size)
        brokers_cpu = server.cpu_seconds() - before
    # the generator measures (and we count CPU over) its whole run, warm-up included
    sent = result["messages"] * result["wall"] / result["elapsed"]
    return {
        "brokers": n,
        "tps": result["tps"],
        "p99_ms": result["p99_ms"],
        "errors": result["errors"],
        "broker_us": brokers_cpu / max(sent, 1) * 1e6,
        "broker_cores": brokers_cpu / result["wall"],
        "loadgen_cores": result["client_cpu_s"] / result["wall"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--size", type=int, default=128)
    args = parser.parse_args()
    loadgen = build_loadgen()
    lines = [
        f"# benchmarks/brokers_scaling.py {time.strftime('%Y-%m-%d %H:%M')}: "
        f"{args.threads} C++ sync senders, {args.size} B, {args.seconds:.0f} s",
        f"{'brokers':>8}{'sends/s':>10}{'p99 ms':>9}{'errors':>8}{'broker µs/send':>16}"
        f"{'broker cores':>14}{'loadgen cores':>15}",
    ]
    print("\n".join(lines), flush=True)
    for n in (1, 2):
        r = run(n, loadgen, args.seconds, args.threads, args.size)
        lines.append(
            f"{r['brokers']:>8}{r['tps']:>10,.0f}{r['p99_ms']:>9.2f}{r['errors']:>8}{r['broker_us']:>16.1f}"
            f"{r['broker_cores']:>14.2f}{r['loadgen_cores']:>15.2f}"
        )
        print(lines[-1], flush=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
