"""py-spy on a running server: record while a workload runs, then a text summary of where its
GIL-holding time went (self time and inclusive time per function, line numbers folded).

    with py_spy(server.pid, seconds, Path("profile.txt")):
        run the workload
    print(summarize(Path("profile.txt")))

``--gil`` keeps only samples of the thread holding the GIL: for a CPython server that is the CPU
time that counts (waiting threads and the idle event loop drop out). Frames inside C extensions
(uvloop, the socket calls) are charged to the Python function that called them.
"""

from __future__ import annotations

import collections
import contextlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["py_spy", "py_spy_while", "summarize"]

_LINE = re.compile(r":\d+\)")


def _py_spy() -> str:
    path = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(path).exists():
        raise SystemExit("py-spy not found: pip install py-spy")
    return path


@contextlib.contextmanager
def py_spy(pid: int, seconds: float, raw: Path, rate: int = 200) -> Iterator[None]:
    """Record ``pid`` for ``seconds`` into ``raw`` (collapsed stacks) while the block runs."""
    proc = subprocess.Popen(
        [_py_spy(), "record", "-p", str(pid), "-d", str(max(1, round(seconds))), "-r", str(rate),
         "-f", "raw", "--gil", "--nonblocking", "-o", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield
    finally:
        _, err = proc.communicate()
        if proc.returncode != 0:
            print(f"py-spy failed ({proc.returncode}): {err[-500:]}", file=sys.stderr)


@contextlib.contextmanager
def py_spy_while(pid: int, raw: Path, rate: int = 1000) -> Iterator[None]:
    """Record ``pid`` (this process too) into ``raw`` for as long as the block runs."""
    proc = subprocess.Popen(
        [_py_spy(), "record", "-p", str(pid), "-d", "3600", "-r", str(rate),
         "-f", "raw", "--gil", "--nonblocking", "-o", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(0.5)  # attached before the workload starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
        _, err = proc.communicate()
        if not raw.exists():
            print(f"py-spy failed ({proc.returncode}): {err[-500:]}", file=sys.stderr)


def summarize(raw: Path, top_self: int = 25, top_inclusive: int = 35) -> str:
    """Self and inclusive shares of the samples in ``raw``, biggest first."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_LINE.sub(")", f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return f"{raw}: no samples"
    lines = [f"{total} samples holding the GIL", "", "self time:"]
    lines += [f"  {n / total * 100:5.1f}%  {f}" for f, n in own.most_common(top_self)]
    lines += ["", "inclusive time:"]
    lines += [f"  {n / total * 100:5.1f}%  {f}" for f, n in inclusive.most_common(top_inclusive)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1])))
