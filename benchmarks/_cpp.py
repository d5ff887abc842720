"""The C programs on librocketmq, built on demand and run as subprocesses: the load generator
(``cpp_loadgen.c``, sync sends) and the receive timer (``cpp_consume.c``, a push consumer).

librocketmq is the official C++ client bundled in PyPI ``rocketmq==0.4.4``; ``make test``
installs it into ``.venv-cpp``. Used by ``broker_send.py``, ``compare.py`` and ``sdk5.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks._server import ROOT

__all__ = ["build_consumer", "build_loadgen", "run_consumer", "run_loadgen"]

LIB_DIR = ROOT / ".venv-cpp" / "lib"
BUILD = Path(__file__).with_name(".build")


def build_loadgen() -> Path:
    """Compile ``cpp_loadgen.c`` against .venv-cpp's librocketmq.so (again when the source changed)."""
    return _build("cpp_loadgen")


def build_consumer() -> Path:
    """Compile ``cpp_consume.c`` against .venv-cpp's librocketmq.so (again when the source changed)."""
    return _build("cpp_consume")


def _build(name: str) -> Path:
    source = Path(__file__).with_name(f"{name}.c")
    libs = sorted(LIB_DIR.glob("python3*/site-packages/rocketmq/librocketmq.so"))
    if not libs:
        raise SystemExit(f"librocketmq.so not found under {LIB_DIR}: run `make test` first (it installs it)")
    lib = libs[0]
    binary = BUILD / name
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        BUILD.mkdir(exist_ok=True)
        subprocess.run(
            ["gcc", "-O2", "-o", str(binary), str(source), str(lib), "-lpthread", f"-Wl,-rpath,{lib.parent}"],
            check=True,
        )
    return binary


def run_loadgen(
    loadgen: Path,
    namesrv: str,
    topic: str,
    *,
    threads: int,
    seconds: float,
    size: int,
    batch: int = 0,
    warmup: float = 3,
) -> dict[str, Any]:
    """Sync sends (or batches) from ``threads`` threads; the generator's JSON line, plus ``tps``,
    the wall time and the generator's own CPU seconds (``os.wait4``)."""
    args = [namesrv, topic, str(threads), str(seconds), str(size), str(batch), str(warmup)]
    return _run(loadgen, args)


def run_consumer(
    consumer: Path, namesrv: str, topic: str, group: str, *, count: int, threads: int, timeout: float = 120
) -> dict[str, Any]:
    """A push consumer of the new ``group`` takes ``count`` messages of ``topic``; the timer's JSON
    line (``elapsed`` from the first message to the last), plus ``tps``, the wall time and its
    CPU seconds (``os.wait4``)."""
    return _run(consumer, [namesrv, topic, group, str(count), str(threads), str(timeout)])


def _run(binary: Path, args: list[str]) -> dict[str, Any]:
    began = time.monotonic()
    proc = subprocess.Popen(
        [str(binary), *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/tmp",  # librocketmq writes its logs under $HOME/logs, and a few files in the cwd
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"{binary.name} exited with {proc.returncode}: {out[-500:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["tps"] = result["messages"] / result["elapsed"] if result["elapsed"] else 0.0
    result["wall"] = time.monotonic() - began
    result["client_cpu_s"] = usage.ru_utime + usage.ru_stime
    return result
