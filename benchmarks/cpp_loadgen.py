"""Load generator on the official C++ client (PyPI ``rocketmq==0.4.4``); runs under
``.venv-cpp/bin/python`` and never imports finchmq, so the broker is what gets measured.

    cpp_loadgen.py --namesrv ADDR --topic T --threads 32 --seconds 20 --size 1024 [--batch 32]

Prints one JSON line: messages sent, errors, elapsed seconds and per-call latencies (ms)
as p50/p99/max/avg. ctypes releases the GIL during each native call, so threads send in parallel.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq.client import Message, Producer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=0, help="messages per send_batch call (0: single sends)")
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args()

    producer = Producer("bench_producer", timeout=10_000)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    body = b"x" * args.size
    lock = threading.Lock()
    latencies: list[float] = []
    counts = {"messages": 0, "errors": 0}
    errors: list[str] = []
    measuring = threading.Event()
    stop = threading.Event()

    def one_message() -> Message:
        msg = Message(args.topic)
        msg.set_tags("bench")
        msg.set_body(body)
        return msg

    def worker() -> None:
        local_lat: list[float] = []
        sent = failed = 0
        while not stop.is_set():
            began = time.perf_counter()
            try:
                if args.batch:
                    producer.send_batch([one_message() for _ in range(args.batch)])
                else:
                    producer.send_sync(one_message())
            except Exception as exc:  # counted and reported
                if measuring.is_set():
                    failed += 1
                    if len(errors) < 5:
                        errors.append(str(exc)[:200])
                continue
            if measuring.is_set():
                local_lat.append((time.perf_counter() - began) * 1000)
                sent += args.batch or 1
        with lock:
            latencies.extend(local_lat)
            counts["messages"] += sent
            counts["errors"] += failed

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()
    time.sleep(args.warmup)
    measuring.set()
    began = time.perf_counter()
    time.sleep(args.seconds)
    stop.set()
    elapsed = time.perf_counter() - began
    for t in threads:
        t.join(30)
    producer.shutdown()
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * p))] if latencies else 0.0

    print(
        json.dumps(
            {
                "messages": counts["messages"],
                "calls": len(latencies),
                "errors": counts["errors"],
                "error_samples": errors,
                "elapsed": elapsed,
                "p50_ms": pct(0.50),
                "p99_ms": pct(0.99),
                "max_ms": latencies[-1] if latencies else 0.0,
                "avg_ms": sum(latencies) / len(latencies) if latencies else 0.0,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
