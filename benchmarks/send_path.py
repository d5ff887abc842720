"""The broker's CPU per send, next to the floor of a Python broker's send path and Apache
RocketMQ 4.9.8 (Java), in one run.

    python -m benchmarks.send_path [--seconds 10] [--warmup 3] [--java-warmup 10] [--conns 32]
                                   [--repeat 1] [--cases single128,single1k,batch32] [--keys]
                                   [--brokers N[,M...]] [--pure] [--no-java]
                                   [--baseline REV] [--profile DIR] [--save LABEL]

Compiles ``send_gen.c`` (a closed-loop generator of raw SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
frames, one thread and one request in flight per connection) into ``benchmarks/.build/``,
starts a fresh ``finchmq server`` (metrics and console off), ``send_floor.py`` and, when
``../shared/java-rocketmq`` (or ``$FINCHMQ_JAVA_ROCKETMQ``) is there, Java's name server and
broker (else it says why it skips them), and drives each in turn with the same frames. Every
server's CPU seconds (user + system of all its processes and threads, from /proc), and the
generator's, are read when the generator's counting window opens and closes; CPU per message is
the server's difference over the messages answered in the window. The servers run in the same
run so that the ratios finchmq/floor and finchmq/Java, not the absolute figures, are what count
on a shared machine. Java gets a longer warm-up before each window (``--java-warmup``) so that
its JIT has compiled the send path; rounds (``--repeat``) alternate the servers' order and end
with the medians.

Cases: single sends of 128 B and 1 KiB, and batches of 32 x 1 KiB (per message). ``--keys``
gives every message a UNIQ_KEY (the Java client's habit; finchmq indexes it). ``--brokers 1,2``
drives ``finchmq server --brokers N`` for each count (a row "finchmq xN" for N > 1): the
generator spreads its connections evenly over the N brokers' ports, the CPU is all N processes'
and sends/s the total. ``--pure`` also drives a server started with ``FINCHMQ_NO_EXTENSIONS=1``
(finchmq-pure: no compiled extensions). ``--profile DIR`` records py-spy on the (first) finchmq
broker during each of its cases (slows it down: figures of such a run are not comparable).
``--baseline REV`` also drives a ``finchmq server`` run from git revision REV's ``src``
(exported into ``benchmarks/.build/``) in the same run: before and after a change, side by
side, case by case. ``--save LABEL`` appends the output to ``benchmarks/results/send_path.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from benchmarks._java import java_broker, java_missing
from benchmarks._profile import py_spy, summarize
from benchmarks._server import ROOT, ChildServer, ServerProcess, cpu_seconds, free_port

SOURCE = Path(__file__).with_name("send_gen.c")
BUILD = Path(__file__).with_name(".build")
RESULTS = Path(__file__).with_name("results") / "send_path.txt"
JAVA = "Java 4.9.8"


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
    cpu: float  # server CPU seconds in the window (all its processes)
    generator_cpu: float  # the generator's CPU seconds in the window
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


@dataclass
class Target:
    """A server the generator drives: its row label, the processes whose CPU counts, its ports
    (the generator spreads its connections over them) and its warm-up before each window."""

    label: str
    pids: list[int]
    ports: list[int]
    warmup: float


def drive(generator: Path, target: Target, case: Case, load: Load) -> Figures:
    """Run the generator against ``target``; its processes' CPU (and the generator's) is read
    around the counting window."""
    topic = "SendPath_" + "".join(c for c in case.name if c.isalnum())
    ports = ",".join(str(port) for port in target.ports)
    proc = subprocess.Popen(
        [str(generator), "127.0.0.1", ports, str(load.conns), str(target.warmup), str(load.seconds),
         str(case.body), str(case.batch), topic, "1" if load.keys else "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None

    def cpu() -> tuple[float, float]:
        return sum(cpu_seconds(pid) for pid in target.pids), cpu_seconds(proc.pid)

    before = after = (0.0, 0.0)
    figures: dict[str, str] = {}
    first_error = ""
    for line in proc.stdout:
        if line.startswith("measure"):
            before = cpu()
        elif line.startswith("done"):
            after = cpu()
            figures = dict(item.split("=", 1) for item in line.split()[1:])
        elif line.startswith("first_error="):
            first_error = line.strip().removeprefix("first_error=")
    if proc.wait() != 0 or not figures:
        raise RuntimeError(f"send_gen failed against {target.label} on {ports} (exit {proc.returncode})")
    return Figures(
        requests=int(figures["requests"]),
        messages=int(figures["messages"]),
        errors=int(figures["errors"]),
        seconds=float(figures["seconds"]),
        cpu=after[0] - before[0],
        generator_cpu=after[1] - before[1],
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
        f"{case.name:<18} {server:<12} {f.requests / f.seconds:>9,.0f} {f.messages / f.seconds:>10,.0f} "
        f"{f.cpu_us_per_message:>10.2f} {f.cpu / f.seconds * 100:>8.0f}% "
        f"{f.generator_cpu / f.seconds * 100:>8.0f}% {f.errors:>7}"
    )


def _revision() -> str:
    try:
        command = ["git", "-C", str(ROOT), "describe", "--always", "--dirty"]
        rev = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return rev


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _brokers(text: str) -> list[int]:
    counts = [int(n) for n in text.split(",")]
    if not counts or any(not 1 <= n <= 26 for n in counts):
        raise argparse.ArgumentTypeError("broker counts must be in 1..26, comma-separated")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10, help="counting window per case")
    parser.add_argument("--warmup", type=float, default=3, help="seconds of load before each window")
    parser.add_argument("--java-warmup", type=float, default=10, help="the same for Java (its JIT)")
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1, help="run the cases this many times")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--keys", action="store_true", help="give every message a UNIQ_KEY")
    parser.add_argument(
        "--brokers", type=_brokers, default=[1], metavar="N[,M...]",
        help="finchmq server --brokers N (a row for each count; default 1)",
    )  # fmt: skip
    parser.add_argument("--pure", action="store_true", help="also drive finchmq with FINCHMQ_NO_EXTENSIONS=1")
    parser.add_argument("--no-java", action="store_true", help="leave Apache RocketMQ 4.9.8 (Java) out")
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
    java_absent = "left out (--no-java)" if args.no_java else java_missing()
    with contextlib.ExitStack() as servers:
        targets: list[Target] = []
        for n in args.brokers:
            server = servers.enter_context(ServerProcess(metrics=False, brokers=n))
            label = "finchmq" if n == 1 else f"finchmq x{n}"
            targets.append(Target(label, server.pids, server.broker_ports, load.warmup))
        if args.pure:
            pure = servers.enter_context(ServerProcess(metrics=False, env={"FINCHMQ_NO_EXTENSIONS": "1"}))
            targets.append(Target("finchmq-pure", pure.pids, pure.broker_ports, load.warmup))
        if baseline_src is not None:
            before = servers.enter_context(ServerProcess(metrics=False, source=baseline_src))
            targets.append(Target("before", before.pids, before.broker_ports, load.warmup))
        if not java_absent:
            java = servers.enter_context(java_broker())
            targets.append(Target(JAVA, [java.pid], [java.port], args.java_warmup))
        floor = servers.enter_context(FloorServer())
        targets.append(Target("floor", [floor.pid], [floor.port], load.warmup))
        emit(
            f"send_path: finchmq {_revision()}, {os.cpu_count()} cores, {args.conns} connections, "
            f"{args.seconds:g} s per case after {args.warmup:g} s of warm-up"
            + (f" ({args.java_warmup:g} s for Java)" if not java_absent else "")
            + (", every message with a UNIQ_KEY" if args.keys else "")
            + (f"; 'before' is finchmq at {baseline_sha}" if baseline_src is not None else "")
            + ("; finchmq xN: `finchmq server --brokers N`, the connections spread over its N brokers"
               if any(n > 1 for n in args.brokers) else "")
        )  # fmt: skip
        if java_absent:
            emit(f"{JAVA}: skipped, {java_absent}")
        emit(
            f"{'case':<18} {'server':<12} {'sends/s':>9} {'msgs/s':>10} {'CPU us/msg':>10} {'srv CPU':>9} "
            f"{'gen CPU':>9} {'errors':>7}"
        )
        runs: dict[tuple[str, str], list[Figures]] = {}
        for round_ in range(args.repeat):
            # alternate the order round by round, so no server always follows the same one
            order = targets if round_ % 2 == 0 else targets[::-1]
            for case in cases:
                for target in order:
                    if args.profile is not None and target is targets[0]:
                        args.profile.mkdir(parents=True, exist_ok=True)
                        raw = args.profile / f"send_path_{case.name.replace(' ', '_')}.raw"
                        with py_spy(target.pids[0], load.warmup + load.seconds, raw):
                            figures = drive(generator, target, case, load)
                        raw.with_suffix(".txt").write_text(summarize(raw) + "\n")
                    else:
                        figures = drive(generator, target, case, load)
                    runs.setdefault((case.name, target.label), []).append(figures)
                    emit(_row(case, target.label, figures))
                    if figures.errors:
                        emit(f"{'':<18} first error: {figures.first_error[:300]}")
        if args.repeat > 1:
            emit(f"median of {args.repeat} rounds:")
            for case in cases:
                for target in targets:
                    emit(_median_row(case, target.label, runs[(case.name, target.label)]))
        ours = [t.label for t in targets if t.label.startswith("finchmq") or t.label == "before"]
        comparisons = (
            ("floor", "CPU per message"),
            (JAVA, "CPU per message"),
            (JAVA, "sends/s"),
            ("before", "CPU per message"),
        )
        for other, what in comparisons:
            if not any(t.label == other for t in targets):
                continue
            for label in (label for label in ours if label != other):
                ratios = []
                for case in cases:
                    mine, theirs = runs[(case.name, label)], runs[(case.name, other)]
                    if what == "sends/s":
                        ratio = _median([f.messages / f.seconds for f in mine]) / max(
                            _median([f.messages / f.seconds for f in theirs]), 1e-9
                        )
                    else:
                        ratio = _median([f.cpu_us_per_message for f in mine]) / max(
                            _median([f.cpu_us_per_message for f in theirs]), 1e-9
                        )
                    ratios.append(f"{case.name}: {ratio:.2f}x")
                emit(
                    f"ratio {label}/{other} ({what}{', medians' if args.repeat > 1 else ''}): "
                    + ", ".join(ratios)
                )
    if args.save:
        RESULTS.parent.mkdir(exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(f"\n### {args.save} ({time.strftime('%Y-%m-%d %H:%M')})\n\n" + "\n".join(out) + "\n")


def _median_row(case: Case, server: str, runs: list[Figures]) -> str:
    """The medians of a case's rounds, figure by figure (errors: the total)."""
    return (
        f"{case.name:<18} {server:<12} {_median([f.requests / f.seconds for f in runs]):>9,.0f} "
        f"{_median([f.messages / f.seconds for f in runs]):>10,.0f} "
        f"{_median([f.cpu_us_per_message for f in runs]):>10.2f} "
        f"{_median([f.cpu / f.seconds * 100 for f in runs]):>8.0f}% "
        f"{_median([f.generator_cpu / f.seconds * 100 for f in runs]):>8.0f}% "
        f"{sum(f.errors for f in runs):>7}"
    )


if __name__ == "__main__":
    main()
