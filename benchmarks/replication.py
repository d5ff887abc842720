"""Master/slave replication figures: ``python -m benchmarks.replication [--duration 20]``

1. Send throughput and latency (``finchmq bench producer``, 32 concurrent sync senders, 1 KiB) against
   one broker group of separate processes: a lone master, an ASYNC_MASTER with a slave, and a
   SYNC_MASTER with a slave (each send acknowledged once the slave has it).
2. Replication lag under that load: the master's commit-log end minus the slave's, sampled every
   0.2 s from both brokers' ``brokerStatus`` (``commitLogMaxOffset``).
3. What an ASYNC_MASTER may lose: ``--kills`` times, SIGKILL the master while 32 senders run and
   count the messages acknowledged SEND_OK that the slave does not have. SYNC_MASTER is run the
   same way for contrast (it must lose none).

All processes share this machine's cores, so the figures compare configurations run side by side;
they are not what separate machines would give. Results go to stdout and
``benchmarks/results/replication.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from finchmq.client import AdminClient, Message, Producer
from finchmq.client.errors import MQClientError
from finchmq.client.results import SendStatus
from finchmq.testing.audit import stored_bodies
from finchmq.testing.cluster import LocalCluster

RESULTS = Path(__file__).parent / "results" / "replication.txt"
TOPIC = "ReplBench"


def _cluster(root: Path, role: str, slaves: int) -> LocalCluster:
    return LocalCluster(
        root, groups=1, slaves=slaves, namesrvs=1, role=role, conf={"defaultTopicQueueNums": "8"}
    )


async def _offset(admin: AdminClient, addr: str) -> int:
    return int((await admin.broker_runtime_stats(addr))["commitLogMaxOffset"])


def _sample_lag(cluster: LocalCluster, stop: threading.Event, lags: list[int]) -> None:
    async def run() -> None:
        master, slave = cluster.broker("broker-a", 0), cluster.broker("broker-a", 1)
        async with AdminClient(namesrv_addr=cluster.namesrv_addr) as admin:
            while not stop.is_set():
                m, s = await asyncio.gather(_offset(admin, master.addr), _offset(admin, slave.addr))
                lags.append(max(m - s, 0))
                await asyncio.sleep(0.2)

    asyncio.run(run())


def throughput(role: str, slaves: int, duration: int, root: Path) -> dict[str, Any]:
    with _cluster(root, role, slaves) as cluster:
        lags: list[int] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_lag, args=(cluster, stop, lags)) if slaves else None
        cmd = [
            sys.executable, "-m", "finchmq.cli", "bench", "producer", "-n", cluster.namesrv_addr,
            "-t", TOPIC, "-d", str(duration), "-w", "32", "-s", "1024", "--queues", "8",
            "--warmup", "2", "--json", "--interval", "5",
        ]  # fmt: skip
        if sampler:
            sampler.start()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        stop.set()
        if sampler:
            sampler.join()
        summary = next(json.loads(line) for line in out.splitlines() if '"summary"' in line)
        return {
            "config": f"{role} + {slaves} slave" if slaves else "single master",
            "tps": summary["tps"],
            "p50_ms": summary["p50_ms"],
            "p99_ms": summary["p99_ms"],
            "failed": summary["send_failed"] + summary["response_failed"],
            "lag_avg_kib": round(statistics.mean(lags) / 1024, 1) if lags else None,
            "lag_max_kib": round(max(lags) / 1024, 1) if lags else None,
        }


async def _kill_under_load(cluster: LocalCluster, run: int) -> tuple[int, int, int]:
    """(acknowledged, missing on the slave, answered other than SEND_OK) for one kill."""
    master, slave = cluster.broker("broker-a", 0), cluster.broker("broker-a", 1)
    acked: list[bytes] = []
    not_ok = 0
    stop = asyncio.Event()
    async with Producer(
        f"repl_kill_{run}", namesrv_addr=cluster.namesrv_addr, retry_times_when_send_failed=0
    ) as p:

        async def sender(k: int) -> None:
            nonlocal not_ok
            i = 0
            while not stop.is_set():
                body = f"r{run}-{k}-{i}".encode() + b"x" * 1000
                i += 1
                try:
                    result = await p.send(Message(TOPIC, body), timeout_millis=2000)
                except MQClientError:
                    await asyncio.sleep(0.05)
                    continue
                if result.send_status is SendStatus.SEND_OK:
                    acked.append(body)
                else:
                    not_ok += 1

        senders = [asyncio.create_task(sender(k)) for k in range(32)]
        await asyncio.sleep(2.0)
        master.kill()
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*senders)
    on_slave = set(await stored_bodies(slave.addr, TOPIC, queues=8))
    missing = sum(1 for b in acked if b not in on_slave)
    master.start()
    cluster.wait_slaves_connected()
    return len(acked), missing, not_ok


def loss(role: str, kills: int, root: Path) -> dict[str, Any]:
    with _cluster(root, role, 1) as cluster:

        async def prepare() -> None:  # the topic exists and the slave serves it (it syncs every 10 s)
            async with AdminClient(namesrv_addr=cluster.namesrv_addr) as admin:
                await admin.create_topic(TOPIC, cluster="FinchCluster", read_queue_nums=8, write_queue_nums=8)
            async with Producer("repl_warm", namesrv_addr=cluster.namesrv_addr) as p:
                await p.send(Message(TOPIC, b"warm"))
            slave = cluster.broker("broker-a", 1)
            deadline = time.monotonic() + 60
            while b"warm" not in await stored_bodies(slave.addr, TOPIC, queues=8):
                if time.monotonic() > deadline:
                    raise RuntimeError("the slave never served the topic")
                await asyncio.sleep(0.5)

        asyncio.run(prepare())
        rows = [asyncio.run(_kill_under_load(cluster, run)) for run in range(kills)]
    return {
        "config": role,
        "kills": kills,
        "acknowledged": sum(r[0] for r in rows),
        "missing_on_slave": sum(r[1] for r in rows),
        "max_missing_per_kill": max(r[1] for r in rows),
        "not_send_ok": sum(r[2] for r in rows),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=20, help="seconds of load per configuration")
    parser.add_argument("--kills", type=int, default=5, help="master kills per role for the loss figure")
    args = parser.parse_args()
    lines = [
        f"# benchmarks/replication.py, {time.strftime('%Y-%m-%d %H:%M')}, 2 cores shared by all processes"
    ]
    with tempfile.TemporaryDirectory(prefix="finchmq-repl-") as tmp:
        root = Path(tmp)
        lines.append("\n## send throughput, 32 concurrent sync senders, 1 KiB bodies")
        lines.append(
            f"{'config':<24}{'msgs/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'failed':>8}"
            f"{'lag avg KiB':>13}{'lag max KiB':>13}"
        )
        for i, (role, slaves) in enumerate([("ASYNC_MASTER", 0), ("ASYNC_MASTER", 1), ("SYNC_MASTER", 1)]):
            r = throughput(role, slaves, args.duration, root / f"t{i}")
            lines.append(
                f"{r['config']:<24}{r['tps']:>10.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['failed']:>8}"
                f"{r['lag_avg_kib'] if r['lag_avg_kib'] is not None else '-':>13}"
                f"{r['lag_max_kib'] if r['lag_max_kib'] is not None else '-':>13}"
            )
            print(lines[-1], flush=True)
        lines.append(f"\n## SIGKILL of the master under load ({args.kills} kills each, 32 senders)")
        lines.append(
            f"{'config':<16}{'acked':>9}{'missing on slave':>18}{'max per kill':>14}{'not SEND_OK':>13}"
        )
        for i, role in enumerate(["ASYNC_MASTER", "SYNC_MASTER"]):
            r = loss(role, args.kills, root / f"k{i}")
            lines.append(
                f"{r['config']:<16}{r['acknowledged']:>9}{r['missing_on_slave']:>18}"
                f"{r['max_missing_per_kill']:>14}{r['not_send_ok']:>13}"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
