"""Crash cycles: SIGKILL ``finchmq server`` at random moments under load, restart it on the same
directory, and count what was lost. ``python -m benchmarks.chaos --cycles 200 --flush both``

Each cycle starts the server on the data directory of the previous one and runs, at once:
- the official C++ client (``.venv-cpp``, driven by ``tests/integration/cpp_driver.py``) sending
  sync to a topic that does not exist yet (auto-created through TBW102, one per cycle) and to a
  pre-created topic;
- a C++ push consumer of the pre-created topic (group ``chaos_g``), committing offsets as it goes.
After a random 0.3-2.5 s the server is killed with SIGKILL (then the clients). One cycle in five
also tears a state file (``topics.json``, ``subscriptionGroup.json``, ``consumerOffset.json`` or
the store checkpoint) as a crash in the middle of a non-atomic write would; start-up must recover
from the ``.bak`` or rebuild.

At the end one more start: every message a client was told SEND_OK must be stored and every
auto-created topic routable (``lost``), and the consumer group, draining from its committed
offsets, must reach every acknowledged message of the pre-created topic, together with what it
consumed during the cycles (``skipped``). A process kill keeps the page cache, so ASYNC_FLUSH
must lose nothing either. Figures go to stdout and ``benchmarks/results/chaos.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._server import ROOT, ServerProcess
from finchmq.client import AdminClient
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.remoting import RemotingClient, RemotingError
from finchmq.testing.audit import stored_bodies

__all__ = ["ChaosResult", "run_chaos"]

CPP_PYTHON = ROOT / ".venv-cpp" / "bin" / "python"
DRIVER = ROOT / "tests" / "integration" / "cpp_driver.py"
PRE_TOPIC = "chaos_pre"
GROUP = "chaos_g"
STATE_FILES = (
    "config/topics.json",
    "config/subscriptionGroup.json",
    "config/consumerOffset.json",
    "checkpoint",
)


@dataclass
class ChaosResult:
    flush: str
    cycles: int = 0
    acked: int = 0
    lost: list[str] = field(default_factory=list)
    unroutable: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    consumed: int = 0  # distinct acknowledged messages the group consumed during the cycles
    torn: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.unroutable or self.skipped)

    def line(self) -> str:
        return (
            f"{self.flush}: {self.cycles} cycles, {self.acked} messages acknowledged SEND_OK, "
            f"{len(self.lost)} lost, {len(self.unroutable)} auto-created topics unroutable, "
            f"{len(self.skipped)} skipped by the consumer group ({self.consumed} consumed in the cycles), "
            f"{len(self.torn)} torn state files, "
            f"{self.seconds:.0f} s"
        )


class _Client:
    """A cpp_driver.py process whose JSON lines go to a file (read after it is killed)."""

    def __init__(self, out: Path, *args: str) -> None:
        self.out = out
        with open(out, "wb") as sink:
            self.proc = subprocess.Popen(
                [str(CPP_PYTHON), str(DRIVER), *args], stdout=sink, stderr=subprocess.DEVNULL, cwd=out.parent
            )

    def kill(self) -> list[dict[str, Any]]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        records = []
        for line in self.out.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # the last line, cut by the kill
                continue
        return records


def _acked(records: list[dict[str, Any]], prefix: str) -> set[str]:
    return {f"{prefix}{r['i']}" for r in records if r.get("status") == 0 and "i" in r}


def _consumed(records: list[dict[str, Any]]) -> set[str]:
    return {base64.b64decode(r["body"]).decode() for r in records if "body" in r and not r.get("failed")}


async def _create_pre_topic(namesrv: str) -> None:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.create_topic(PRE_TOPIC, read_queue_nums=4, write_queue_nums=4)


async def _routable(namesrv: str, topic: str) -> bool:
    async with RemotingClient() as client:
        try:
            reply = await client.invoke(
                namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5000
            )
        except RemotingError:
            return False
    return reply.code == ResponseCode.SUCCESS


def _tear(data: Path, rng: random.Random) -> str | None:
    """Cut one state file at a random length, as a crash inside a non-atomic write would."""
    candidates = [data / "store" / name for name in STATE_FILES if (data / "store" / name).exists()]
    if not candidates:
        return None
    victim = rng.choice(candidates)
    content = victim.read_bytes()
    victim.write_bytes(content[: rng.randrange(0, max(len(content), 1))])
    return str(victim.relative_to(data))


def run_chaos(
    cycles: int, flush: str, *, seed: int = 1, data: Path | None = None, progress: bool = False
) -> ChaosResult:
    """``cycles`` kill-and-restart cycles in ``flush`` mode (SYNC_FLUSH or ASYNC_FLUSH)."""
    if not CPP_PYTHON.exists():
        raise SystemExit(f"{CPP_PYTHON} is missing: run `make test` first (it installs the C++ client)")
    rng = random.Random(seed)
    result = ChaosResult(flush=flush)
    began = time.monotonic()
    conf = {  # 64 MiB segments: hundreds of cycles must not fill the disk
        "flushDiskType": flush,
        "flushConsumerOffsetInterval": "1000",
        "mappedFileSizeCommitLog": str(64 << 20),
    }
    with tempfile.TemporaryDirectory(prefix="finchmq-chaos-") as scratch:
        data = data or Path(scratch) / "data"
        logs = Path(scratch)
        acked_pre: set[str] = set()
        acked_auto: dict[str, set[str]] = {}
        consumed: set[str] = set()
        for cycle in range(cycles):
            server = ServerProcess(conf=conf, data_dir=data, log_path=logs / f"server-{cycle}.log").start()
            if cycle == 0:
                asyncio.run(_create_pre_topic(server.namesrv_addr))
            auto = f"chaos_auto_{cycle}"
            common = ["--namesrv", server.namesrv_addr, "--timeout-ms", "3000"]  # fmt: skip
            producers = {
                topic: _Client(logs / f"{kind}-{cycle}.out", "produce", "--topic", topic, "--count", "999999",
                               "--body-prefix", f"c{cycle}-{kind}-", *common)
                for topic, kind in ((auto, "a"), (PRE_TOPIC, "p"))
            }  # fmt: skip
            consumer = _Client(
                logs / f"consumer-{cycle}.out", "push", "--namesrv", server.namesrv_addr,
                "--topic", PRE_TOPIC, "--group", GROUP, "--timeout", "3600",
            )  # fmt: skip
            time.sleep(rng.uniform(0.3, 2.5))
            assert server.proc is not None
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
            acked_auto[auto] = _acked(producers[auto].kill(), f"c{cycle}-a-")
            acked_pre |= _acked(producers[PRE_TOPIC].kill(), f"c{cycle}-p-")
            consumed |= _consumed(consumer.kill())
            if rng.random() < 0.2 and (torn := _tear(data, rng)) is not None:
                result.torn.append(f"cycle {cycle}: {torn}")
            result.cycles += 1
            if progress:
                total = len(acked_pre) + sum(map(len, acked_auto.values()))
                print(f"\r{flush} cycle {cycle + 1}/{cycles}: {total} acknowledged", end="", flush=True)
        if progress:
            print()
        server = ServerProcess(conf=conf, data_dir=data, log_path=logs / "server-final.log").start()
        try:
            broker = f"127.0.0.1:{server.broker_port}"
            stored_pre = {b.decode() for b in asyncio.run(stored_bodies(broker, PRE_TOPIC))}
            result.lost += sorted(acked_pre - stored_pre)
            for topic, acked in acked_auto.items():
                if acked and not asyncio.run(_routable(server.namesrv_addr, topic)):
                    result.unroutable.append(topic)
                result.lost += sorted(acked - {b.decode() for b in asyncio.run(stored_bodies(broker, topic))})
            result.acked = len(acked_pre) + sum(map(len, acked_auto.values()))
            result.consumed = len(acked_pre & consumed)
            missing = acked_pre - consumed
            if missing:  # the group drains from its committed offsets: it must reach the rest
                drain = _Client(
                    logs / "drain.out", "push", "--namesrv", server.namesrv_addr, "--topic", PRE_TOPIC,
                    "--group", GROUP, "--timeout", "3600",
                )  # fmt: skip
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    time.sleep(1)
                    drained = _consumed(
                        [
                            json.loads(line)
                            for line in drain.out.read_text().splitlines()
                            if line.endswith("}")
                        ]
                    )
                    if missing <= drained:
                        break
                missing -= _consumed(drain.kill())
            result.skipped = sorted(missing)
        finally:
            server.stop()
    result.seconds = time.monotonic() - began
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--flush", choices=["SYNC_FLUSH", "ASYNC_FLUSH", "both"], default="both")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    modes = ["SYNC_FLUSH", "ASYNC_FLUSH"] if args.flush == "both" else [args.flush]
    lines = []
    ok = True
    for mode in modes:
        result = run_chaos(args.cycles, mode, seed=args.seed, progress=sys.stdout.isatty())
        print(result.line(), flush=True)
        for kind in ("lost", "unroutable", "skipped"):
            if getattr(result, kind):
                print(f"  {kind}: {getattr(result, kind)[:10]}")
        lines.append(result.line())
        ok = ok and result.ok
    out = ROOT / "benchmarks" / "results" / "chaos.txt"
    out.parent.mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M")
    with open(out, "a") as f:
        f.write(f"# {stamp} python -m benchmarks.chaos --cycles {args.cycles} --flush {args.flush}")
        f.write(f" --seed {args.seed}\n")
        f.writelines(line + "\n" for line in lines)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
