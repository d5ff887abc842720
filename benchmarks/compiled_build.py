"""A mypyc-compiled copy of finchmq's send path, out of tree, and the broker's CPU per send with it
against the pure package, alternating on the same machine (issue 15; docs/compiled.md).

    python -m benchmarks.compiled_build [--out DIR]                  # build only
    python -m benchmarks.compiled_build --compare [--reuse] [--rounds 2] [--cases single128,single1k,batch32]

The build copies ``src/finchmq`` to ``DIR`` (default ``benchmarks/.build/compiled``) and compiles
``MODULES`` next to their ``.py`` files with ``mypyc.build.mypycify`` (mypyc ships with mypy, a dev
dependency; it needs a C compiler). Run anything against it with ``DIR`` first on ``PYTHONPATH``;
servers spawned as ``sys.executable -m finchmq`` inherit it:

    PYTHONPATH=benchmarks/.build/compiled:. python -m benchmarks.client_cpu

``--compare`` starts two ``finchmq server`` processes, one pure (``src``) and one compiled, and
drives them in turn with ``send_path``'s generator, case by case and round by round, printing
each one's CPU per message and the user share of it (the rest is system time: the socket writes).
The build stays a measurement: finchmq installs and runs as pure Python (docs/compiled.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from mypyc.build import mypycify
from setuptools import Distribution

from benchmarks._server import ROOT, ServerProcess
from benchmarks.send_path import CASES, Load, build_generator, drive

DEFAULT_OUT = Path(__file__).with_name(".build") / "compiled"
SRC = ROOT / "src"

# The send path's modules, compiled together (calls between them are native calls). Left out:
# protocol/_json.py (ObjectKey subclasses tuple: mypyc refuses) and protocol/headers.py (its
# header classes get their codecs from generated source at import: mypyc refuses the classes, and
# the generated functions would stay interpreted anyway).
MODULES = [
    "protocol/command.py",
    "protocol/codec.py",
    "remoting/connection.py",
    "remoting/processor.py",
    "store/commit_log.py",
    "store/mapped_file.py",
    "store/consume_queue.py",
    "store/dispatch.py",
    "store/message_store.py",
    "store/inner.py",
    "broker/put_service.py",
    "broker/processor/send.py",
    "broker/processor/pull.py",
    "client/producer.py",
    "client/api.py",
]


def build(out: Path) -> float:
    """Build the compiled copy into ``out``; returns the seconds it took."""
    began = time.perf_counter()
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(SRC / "finchmq", out / "finchmq", ignore=shutil.ignore_patterns("__pycache__"))
    temp = out.with_name(out.name + "-temp")
    cwd = Path.cwd()
    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] and names modules from src/
    try:
        # Errors in the modules these import (not compiled) are `make typecheck`'s business.
        paths = ["--follow-imports=silent", *(f"src/finchmq/{module}" for module in MODULES)]
        extensions = mypycify(
            paths, opt_level="3", debug_level="0", group_name="finchmq", target_dir=str(temp / "c")
        )
        dist = Distribution({"name": "finchmq-compiled", "ext_modules": extensions})
        command = dist.get_command_obj("build_ext")
        command.build_lib = str(out)
        command.build_temp = str(temp / "obj")
        dist.run_command("build_ext")
    finally:
        os.chdir(cwd)
    return time.perf_counter() - began


def _ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])  # utime, stime


def compare(out: Path, rounds: int, cases: list[str], load: Load) -> None:
    generator = build_generator()
    servers: dict[str, ServerProcess] = {}
    saved = os.environ.get("PYTHONPATH")
    try:
        for label, path in (("pure", SRC), ("compiled", out)):
            os.environ["PYTHONPATH"] = os.pathsep.join([str(path), str(ROOT)])
            servers[label] = ServerProcess(metrics=False).start()
        if saved is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved
        print(
            f"{'round':<6} {'case':<18} {'build':<9} {'msgs/s':>9} {'CPU us/msg':>10} {'user':>5}", flush=True
        )
        for round_ in range(1, rounds + 1):
            for name in cases:
                case = CASES[name]
                for label, server in servers.items():
                    user0, sys0 = _ticks(server.pid)
                    figures = drive(generator, server.pid, server.broker_port, case, load)
                    user1, sys1 = _ticks(server.pid)
                    user = (user1 - user0) / max(1, user1 - user0 + sys1 - sys0)
                    print(
                        f"{round_:<6} {case.name:<18} {label:<9} {figures.messages / figures.seconds:>9,.0f} "
                        f"{figures.cpu_us_per_message:>10.2f} {user:>5.0%}"
                        + (f"  errors={figures.errors}" if figures.errors else ""),
                        flush=True,
                    )
    finally:
        for server in servers.values():
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the compiled copy goes")
    parser.add_argument("--compare", action="store_true", help="then compare its broker with the pure one")
    parser.add_argument("--reuse", action="store_true", help="compare with the copy already in --out")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--seconds", type=float, default=8, help="counting window per case")
    parser.add_argument("--warmup", type=float, default=2, help="seconds of load before each window")
    args = parser.parse_args()
    out = args.out.resolve()
    if not (args.reuse and out.exists()):
        seconds = build(out)
        print(f"built {len(MODULES)} compiled modules into {out} in {seconds:.0f} s", file=sys.stderr)
    if args.compare:
        compare(out, args.rounds, args.cases.split(","), Load(32, args.warmup, args.seconds, False))


if __name__ == "__main__":
    main()
