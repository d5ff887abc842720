"""The broker's CPU per send, next to the floor of a Python broker's send path, in one run.

    python -m benchmarks.send_path [--seconds 10] [--warmup 3] [--conns 32] [--repeat 1]
                                   [--cases single128,single1k,batch32] [--keys]
                                   [--baseline REV] [--profile DIR] [--save LABEL]

Compiles ``send_gen.c`` (a closed-loop generator of raw SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
frames, one thread and one request in flight per connection) into ``benchmarks/.build/``,
starts a fresh ``finchmq server`` (metrics and console off) and ``send_floor.py``, and drives
each in turn with the same frames. The server's CPU seconds (user + system, from /proc) are read
when the generator's counting window opens and closes; CPU per message is their difference
over the messages answered in the window. The two servers run in the same run so that the
ratio finchmq/floor, not the absolute figures, is what counts on a shared machine.

Cases: single sends of 128 B and 1 KiB, and batches of 32 x 1 KiB (per message). ``--keys``
gives every message a UNIQ_KEY (the Java client's habit; finchmq indexes it). ``--profile DIR``
records py-spy on the broker during each of its cases (slows it down: figures of such a run
are not comparable). ``--baseline REV`` also drives a ``finchmq server`` run from git revision
REV's ``src`` (exported into ``benchmarks/.build/``) in the same run: before and after a change,
side by side, case by case. ``--save LABEL`` appends the output to ``benchmarks/results/send_path.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from benchmarks._profile import py_spy, summarize
from benchmarks._server import ROOT, ChildServer, ServerProcess, cpu_seconds, free_port

SOURCE = Path(__file__).with_name("send_gen.c")
BUILD = Path(__file__).with_name(".build")
RESULTS = Path(__file__).with_name("results") / "send_path.txt"


@dataclass(frozen=True)
class Case:
    name: str
    body: int
    batch: int  # 0: single sends (code 310); n: batches of n messages (code 320)


CASES = {
    "single128": Case("single 128 B", 128, 0),
    "single1k": Case("single 1 KiB", 1024, 0),
    "batch32": Case("batch 32 x 1 KiB", 1024, 32),
}


@dataclass(frozen=True)
class Load:
    conns: int
    warmup: float  # s of load before the counting window
    seconds: float  # the counting window
    keys: bool  # every message with a UNIQ_KEY


@dataclass
class Figures:
    requests: int
    messages: int
    errors: int
    seconds: float
    cpu: float  # server CPU seconds in the window
    first_error: str = ""

    @property
    def cpu_us_per_message(self) -> float:
        return self.cpu / max(1, self.messages) * 1e6


def build_generator() -> Path:
    """Compile ``send_gen.c`` (again when the source changed)."""
    binary = BUILD / "send_gen"
    if not binary.exists() or binary.stat().st_mtime < SOURCE.stat().st_mtime:
        BUILD.mkdir(exist_ok=True)
        subprocess.run(["gcc", "-O2", "-pthread", "-o", str(binary), str(SOURCE)], check=True)
    return binary


class FloorServer(ChildServer):
    """``send_floor.py`` on a free loopback port, its log file in its own temporary directory."""

    name = "floor server"

    def __init__(self) -> None:
        super().__init__(None, "finchmq-floor-")
        self.port = free_port()

    def start(self) -> Self:
        log_file = self.data_dir / "floor.log"
        args = [sys.executable, "-m", "benchmarks.send_floor", str(self.port), str(log_file)]
        self._spawn(args, ROOT, lambda: "listening" in self.log_path.read_text(errors="replace"), "listen")
        return self


def drive(generator: Path, pid: int, port: int, case: Case, load: Load) -> Figures:
    """Run the generator against ``port``; the server ``pid``'s CPU is read around its window."""
    topic = "SendPath_" + "".join(c for c in case.name if c.isalnum())
    proc = subprocess.Popen(
        [str(generator), "127.0.0.1", str(port), str(load.conns), str(load.warmup), str(load.seconds),
         str(case.body), str(case.batch), topic, "1" if load.keys else "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    cpu_before = cpu_after = 0.0
    figures: dict[str, str] = {}
    first_error = ""
    for line in proc.stdout:
        if line.startswith("measure"):
            cpu_before = cpu_seconds(pid)
        elif line.startswith("done"):
            cpu_after = cpu_seconds(pid)
            figures = dict(item.split("=", 1) for item in line.split()[1:])
        elif line.startswith("first_error="):
            first_error = line.strip().removeprefix("first_error=")
    if proc.wait() != 0 or not figures:
        raise RuntimeError(f"send_gen failed against port {port} (exit {proc.returncode})")
    return Figures(
        requests=int(figures["requests"]),
        messages=int(figures["messages"]),
        errors=int(figures["errors"]),
        seconds=float(figures["seconds"]),
        cpu=cpu_after - cpu_before,
        first_error=first_error,
    )


def export_revision(rev: str) -> tuple[str, Path]:
    """``rev``'s ``src`` tree, exported once into ``benchmarks/.build/src-<sha>``: (short sha, path)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    target = BUILD / f"src-{sha}"
    if not (target / "src" / "finchmq").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha, "src"], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return sha, target / "src"


def _row(case: Case, server: str, f: Figures) -> str:
    return (
        f"{case.name:<18} {server:<8} {f.requests / f.seconds:>9,.0f} {f.messages / f.seconds:>10,.0f} "
        f"{f.cpu_us_per_message:>10.2f} {f.cpu / f.seconds * 100:>8.0f}% {f.errors:>7}"
    )


def _revision() -> str:
    try:
        command = ["git", "-C", str(ROOT), "describe", "--always", "--dirty"]
        rev = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return rev


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10, help="counting window per case")
    parser.add_argument("--warmup", type=float, default=3, help="seconds of load before each window")
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1, help="run the cases this many times")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--keys", action="store_true", help="give every message a UNIQ_KEY")
    parser.add_argument("--baseline", metavar="REV", help="also drive finchmq as of git revision REV")
    parser.add_argument("--profile", type=Path, help="record py-spy on the broker into this directory")
    parser.add_argument("--save", metavar="LABEL", help=f"append the output to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    cases = [CASES[name] for name in args.cases.split(",")]
    load = Load(args.conns, args.warmup, args.seconds, args.keys)
    generator = build_generator()
    out: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        out.append(line)

    baseline_sha, baseline_src = export_revision(args.baseline) if args.baseline else ("", None)
    with contextlib.ExitStack() as servers:
        finchmq = servers.enter_context(ServerProcess(metrics=False))
        floor = servers.enter_context(FloorServer())
        before = None
        if baseline_src is not None:
            before = servers.enter_context(ServerProcess(metrics=False, source=baseline_src))
        emit(
            f"send_path: finchmq {_revision()}, {os.cpu_count()} cores, {args.conns} connections, "
            f"{args.seconds:g} s per case after {args.warmup:g} s of warm-up"
            + (", every message with a UNIQ_KEY" if args.keys else "")
            + (f"; 'before' is finchmq at {baseline_sha}" if before is not None else "")
        )
        emit(
            f"{'case':<18} {'server':<8} {'sends/s':>9} {'msgs/s':>10} {'CPU us/msg':>10} {'srv CPU':>9} "
            f"{'errors':>7}"
        )
        ratios: list[str] = []
        changes: list[str] = []
        for _ in range(args.repeat):
            for case in cases:
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    raw = args.profile / f"send_path_{case.name.replace(' ', '_')}.raw"
                    with py_spy(finchmq.pid, load.warmup + load.seconds, raw):
                        ours = drive(generator, finchmq.pid, finchmq.broker_port, case, load)
                    raw.with_suffix(".txt").write_text(summarize(raw) + "\n")
                else:
                    ours = drive(generator, finchmq.pid, finchmq.broker_port, case, load)
                emit(_row(case, "finchmq", ours))
                if ours.errors:
                    emit(f"{'':<18} first error: {ours.first_error[:300]}")
                if before is not None:
                    then = drive(generator, before.pid, before.broker_port, case, load)
                    emit(_row(case, "before", then))
                    change = ours.cpu_us_per_message / max(then.cpu_us_per_message, 1e-9)
                    changes.append(f"{case.name}: {change:.2f}x")
                base = drive(generator, floor.pid, floor.port, case, load)
                emit(_row(case, "floor", base))
                ratio = ours.cpu_us_per_message / max(base.cpu_us_per_message, 1e-9)
                ratios.append(f"{case.name}: {ratio:.2f}x")
        emit("ratio finchmq/floor (CPU per message): " + ", ".join(ratios))
        if changes:
            emit(f"ratio finchmq/before ({baseline_sha}) (CPU per message): " + ", ".join(changes))
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(f"\n### {args.save} ({time.strftime('%Y-%m-%d %H:%M')})\n\n" + "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
