"""The broker's send capacity, driven by the official C++ client so the broker is measured.

    python -m benchmarks.broker_send [--seconds 20] [--threads 32]

Starts ``finchmq server`` in its own process (fresh data directory, ASYNC_FLUSH), reports its
idle RSS, then runs 1 KiB sync sends from N producer threads and batches of 32, printing TPS,
average/p99/max latency, the broker's CPU use and RSS. Needs ``.venv-cpp`` (``make test``
creates it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from benchmarks._server import ROOT, ServerProcess

CPP_PYTHON = ROOT / ".venv-cpp" / "bin" / "python"
LOADGEN = Path(__file__).with_name("cpp_loadgen.py")


def run_case(server: ServerProcess, name: str, *, threads: int, seconds: float, batch: int, size: int) -> dict[str, float]:
    cpu_before = server.cpu_seconds()
    began = time.monotonic()
    out = subprocess.run(
        [
            str(CPP_PYTHON), str(LOADGEN), "--namesrv", server.namesrv_addr, "--topic", "Bench_" + "".join(c for c in name if c.isalnum()),
            "--threads", str(threads), "--seconds", str(seconds), "--size", str(size), "--batch", str(batch),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=True,
        cwd="/tmp",
    )
    wall = time.monotonic() - began
    cpu = (server.cpu_seconds() - cpu_before) / wall * 100
    result = json.loads(out.stdout.strip().splitlines()[-1])
    tps = result["messages"] / result["elapsed"]
    print(
        f"{name:<22} {tps:>10,.0f} msgs/s  calls avg={result['avg_ms']:.2f}ms p99={result['p99_ms']:.2f}ms "
        f"max={result['max_ms']:.1f}ms  errors={result['errors']}  broker cpu={cpu:.0f}%  rss={server.rss_mib():.0f}MiB"
    )
    if result["error_samples"]:
        print(f"{'':<22} error samples: {result['error_samples'][:2]}")
    return {"tps": tps, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    if not CPP_PYTHON.exists():
        raise SystemExit(f"{CPP_PYTHON} is missing: run `make test` first (it installs the C++ client)")
    with ServerProcess() as server:
        time.sleep(2)
        print(f"broker_send: finchmq server pid {server.pid}, idle RSS {server.rss_mib():.1f} MiB (target <= 80)")
        run_case(server, "sync 1KiB x32 threads", threads=args.threads, seconds=args.seconds, batch=0, size=args.size)
        run_case(server, "batch32 1KiB x8 threads", threads=8, seconds=args.seconds, batch=32, size=args.size)


if __name__ == "__main__":
    main()
