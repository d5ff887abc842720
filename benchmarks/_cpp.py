"""The C load generator on librocketmq (``cpp_loadgen.c``): built on demand, run as a subprocess.

librocketmq is the official C++ client bundled in PyPI ``rocketmq==0.4.4``; ``make test``
installs it into ``.venv-cpp``. Used by ``broker_send.py`` and ``compare.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks._server import ROOT

__all__ = ["build_loadgen", "run_loadgen"]

LIB_DIR = ROOT / ".venv-cpp" / "lib"
SOURCE = Path(__file__).with_name("cpp_loadgen.c")
BUILD = Path(__file__).with_name(".build")


def build_loadgen() -> Path:
    """Compile ``cpp_loadgen.c`` against .venv-cpp's librocketmq.so (again when the source changed)."""
    libs = sorted(LIB_DIR.glob("python3*/site-packages/rocketmq/librocketmq.so"))
    if not libs:
        raise SystemExit(f"librocketmq.so not found under {LIB_DIR}: run `make test` first (it installs it)")
    lib = libs[0]
    binary = BUILD / "cpp_loadgen"
    if not binary.exists() or binary.stat().st_mtime < SOURCE.stat().st_mtime:
        BUILD.mkdir(exist_ok=True)
        subprocess.run(
            ["gcc", "-O2", "-o", str(binary), str(SOURCE), str(lib), "-lpthread", f"-Wl,-rpath,{lib.parent}"],
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
    began = time.monotonic()
    proc = subprocess.Popen(
        [str(loadgen), namesrv, topic, str(threads), str(seconds), str(size), str(batch), str(warmup)],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/tmp",  # librocketmq writes its logs under $HOME/logs, and a few files in the cwd
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"cpp_loadgen exited with {proc.returncode}: {out[-500:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["tps"] = result["messages"] / result["elapsed"]
    result["wall"] = time.monotonic() - began
    result["client_cpu_s"] = usage.ru_utime + usage.ru_stime
    return result
