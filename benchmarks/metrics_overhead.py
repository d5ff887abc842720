"""What Prometheus metrics cost the broker at full send load: broker CPU per message with
metrics off and on, the same load, the same machine, interleaved runs.

    python -m benchmarks.metrics_overhead [--rounds 3] [--seconds 15] [--scrape-interval 1]
        [--sender cpp|rawsend] [--threads 32] [--size 1024] [--save benchmarks/results/metrics_overhead.txt]

Each round starts a fresh ``finchmq server`` twice, metrics off (``--metrics-port 0``) and on
(a free port), in alternating order, and drives it with closed-loop sync 1 KiB sends until the
broker's CPU is the limit: ``--sender cpp`` is the official C++ client's load generator
(``cpp_loadgen.c``, built against .venv-cpp's librocketmq), ``rawsend`` the raw SEND_MESSAGE_V2
sender of /work/shared/tools/perf (built with gcc; less client CPU beside the broker on two
cores). With metrics on, a scraper GETs /metrics every ``--scrape-interval`` seconds (1 s by
default: 15 times Prometheus' default rate, so the scrape cost is not understated). The broker's
CPU (user + system, from /proc) over the measured window is divided by the messages sent in it.
Prints each run, the median per mode and the difference; ``--save`` writes the report too.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import threading
import urllib.request
from pathlib import Path

from benchmarks._cpp import build_loadgen, run_loadgen
from benchmarks._server import ROOT, ServerProcess

RAWSEND_SOURCE = Path("/work/shared/tools/perf/rawsend.c")


class Scraper(threading.Thread):
    """GET ``url`` every ``interval`` s until stopped; counts scrapes and bytes."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.interval = interval
        self.stopped = threading.Event()
        self.scrapes = 0
        self.bytes = 0

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                self.bytes += len(answer.read())
            self.scrapes += 1


def build_rawsend() -> Path:
    binary = ROOT / "benchmarks" / ".build" / "rawsend"
    if not binary.exists():
        if not RAWSEND_SOURCE.exists() or shutil.which("gcc") is None:
            raise SystemExit(f"--sender rawsend needs gcc and {RAWSEND_SOURCE}")
        binary.parent.mkdir(exist_ok=True)
        subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(RAWSEND_SOURCE)], check=True)
    return binary


def send_load(args: argparse.Namespace, server: ServerProcess, sender: Path, topic: str) -> tuple[int, float]:
    """Run the load; (messages sent, broker CPU seconds) over the measured window."""
    if args.sender == "cpp":
        before = server.cpu_seconds()
        # the loadgen's warm-up is inside its run: measure CPU over a separate warm-up instead
        run_loadgen(
            sender, server.namesrv_addr, topic, threads=args.threads, seconds=3, size=args.size, warmup=0
        )
        before = server.cpu_seconds()
        result = run_loadgen(
            sender,
            server.namesrv_addr,
            topic,
            threads=args.threads,
            seconds=args.seconds,
            size=args.size,
            warmup=0,
        )
        return int(result["messages"]), server.cpu_seconds() - before
    command = [str(sender), "127.0.0.1", str(server.broker_port), str(args.threads)]
    subprocess.run([*command, "3", str(args.size), topic], check=True, capture_output=True)  # warm-up
    before = server.cpu_seconds()
    out = subprocess.run(
        [*command, str(args.seconds), str(args.size), topic], check=True, capture_output=True, text=True
    ).stdout
    cpu = server.cpu_seconds() - before
    fields = dict(part.split("=") for part in out.split())
    return int(fields["requests"]) - int(fields["errors"]), cpu


def run_once(args: argparse.Namespace, sender: Path, metrics: bool, n: int) -> dict[str, float]:
    with ServerProcess(metrics=metrics) as server:
        scraper = None
        if metrics:
            scraper = Scraper(f"http://127.0.0.1:{server.metrics_port}/metrics", args.scrape_interval)
            scraper.start()
        messages, cpu = send_load(args, server, sender, f"MetricsOverhead{n}")
        if scraper is not None:
            scraper.stopped.set()
            scraper.join()
    us = cpu / max(messages, 1) * 1e6
    row = {"messages": messages, "cpu_s": cpu, "us_per_msg": us, "tps": messages / args.seconds}
    if scraper is not None:
        row["scrapes"] = scraper.scrapes
        row["scrape_kib"] = scraper.bytes / max(scraper.scrapes, 1) / 1024
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument("--sender", choices=["cpp", "rawsend"], default="cpp")
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    sender = build_loadgen() if args.sender == "cpp" else build_rawsend()
    lines = [
        f"metrics overhead: {args.sender} sender, {args.threads} threads, {args.size} B sync sends, "
        f"{args.seconds:.0f} s per run, {args.rounds} rounds (off/on alternating), "
        f"scrape every {args.scrape_interval:g} s while on",
    ]
    print(lines[0], flush=True)
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for n in range(args.rounds):
        order = (False, True) if n % 2 == 0 else (True, False)
        for metrics in order:
            row = run_once(args, sender, metrics, n)
            results[metrics].append(row)
            extra = f"  {row['scrapes']:.0f} scrapes of {row['scrape_kib']:.0f} KiB" if metrics else ""
            line = (
                f"round {n + 1} metrics {'on ' if metrics else 'off'}: {row['tps']:>8,.0f} msgs/s  "
                f"broker cpu {row['cpu_s']:.2f} s  {row['us_per_msg']:.1f} us/msg{extra}"
            )
            print(line, flush=True)
            lines.append(line)
    off = statistics.median(r["us_per_msg"] for r in results[False])
    on = statistics.median(r["us_per_msg"] for r in results[True])
    summary = [
        f"median broker CPU per message: off {off:.2f} us, on {on:.2f} us, "
        f"difference {on - off:+.2f} us ({(on - off) / off * 100:+.1f} %)",
        f"median throughput: off {statistics.median(r['tps'] for r in results[False]):,.0f} msgs/s, "
        f"on {statistics.median(r['tps'] for r in results[True]):,.0f} msgs/s",
    ]
    for line in summary:
        print(line)
    lines += summary
    if args.save is not None:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
