"""Restart after SIGKILL (issue 15): python -m benchmarks.recovery [--records N] [--size 128].

A child process fills a store with N messages of ``--size`` bytes of body (TAGS and a
32-hex-digit UNIQ_KEY each, as clients send; 32-message batches through the store API over
``--queues`` queues), prints DONE and is killed with SIGKILL: the abort file and checkpoint stay
as a killed broker leaves them. This process then opens the store and times ``load()``, the
abnormal recovery, split into the commit-log scan (magic, sizes, physical offset, body CRC)
and the dispatch of records to consume queues and index (``rebuild``); ``other`` is mapping
the files and recovering the consume queues. The recovery runs ``--repeat`` times (a store
loaded and closed without ``start()`` keeps its abort file, so every load is abnormal).

Default N: as many as fit in one 1 GiB commit-log segment (~3.8M of 128 B), so the segment
that recovery must scan is a full one. The pages are in the page cache (a killed process does
not lose them): this measures CPU, not the disk. The store is deleted at the end (``--dir``
to put it elsewhere than the system temp dir).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.message import Message, properties_to_string
from finchmq.protocol.stored import stored_size
from finchmq.store import DefaultMessageStore, MessageExtBatch, MessageStoreConfig, recovery
from finchmq.store.dispatch import ReputMessageService

TOPIC = "BenchTopic"
PER_BATCH = 32
DISTINCT = 64


def config(root: Path, segment: int) -> MessageStoreConfig:
    return dataclasses.replace(
        MessageStoreConfig(store_path_root_dir=root), mapped_file_size_commit_log=segment
    )


def props_of(i: int, keys: bool = True) -> dict[str, str]:
    if not keys:
        return {"TAGS": "TagA"}
    return {"TAGS": "TagA", "UNIQ_KEY": f"7F000001{os.getpid() & 0xFFFF:04X}00C0FFEE{i:012X}"}


def record_size(size: int, keys: bool = True) -> int:
    props = properties_to_string(props_of(0, keys)).encode()
    return stored_size(size, len(TOPIC), len(props), False, False)


def default_records(size: int, segment: int, keys: bool) -> int:
    """As many records as fit in one segment (leaving room for the BLANK filler), in whole batches."""
    fit = (segment - 8) // record_size(size, keys) - 1
    return fit // PER_BATCH * PER_BATCH


def fill(root: Path, records: int, size: int, queues: int, segment: int, keys: bool) -> None:
    """The child: write ``records`` messages, print DONE, wait to be killed."""
    batches = [
        encode_batch(
            [
                Message(TOPIC, os.urandom(size), properties=props_of(b * PER_BATCH + j, keys))
                for j in range(PER_BATCH)
            ]
        )
        for b in range(DISTINCT)
    ]
    store = DefaultMessageStore(config(root, segment))
    store.load()
    store.start()
    t0 = time.perf_counter()
    for i in range(records // PER_BATCH):
        r = store.put_messages(MessageExtBatch(topic=TOPIC, body=batches[i % DISTINCT], queue_id=i % queues))
        if not r.is_ok():
            print(f"FAILED {r.status.name}", flush=True)
            return
    dt = time.perf_counter() - t0
    print(f"DONE {records} {store.get_max_phy_offset()} {dt:.2f}", flush=True)
    time.sleep(3600)


def timed(owner: object, name: str, sink: dict[str, float]) -> Callable[[], None]:
    """Wrap ``owner.name`` (a class's method or a module's function) to add its wall time to
    ``sink[name]``; returns the undo."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            sink[name] = sink.get(name, 0.0) + time.perf_counter() - t0

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, original)


def recover_once(root: Path, segment: int, records: int, queues: int) -> tuple[dict[str, float], str]:
    cfg = config(root, segment)
    if not cfg.abort_path.exists():
        raise SystemExit("no abort file: the store was shut down cleanly, the restart would not be abnormal")
    times: dict[str, float] = {}
    undo = [timed(recovery, "scan", times), timed(ReputMessageService, "rebuild", times)]
    try:
        store = DefaultMessageStore(cfg)
        t0 = time.perf_counter()
        store.load()
        times["total"] = time.perf_counter() - t0
    finally:
        for u in undo:
            u()
    counts = getattr(store, "recovery_counts", None)  # absent before issue 15
    try:
        got = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(queues))
        if got != records:
            raise SystemExit(f"recovered {got} messages in the consume queues, expected {records}")
        if store.recovery_report:
            raise SystemExit(f"recovery reported corruption: {store.recovery_report}")
    finally:
        store.shutdown()  # loaded, never started: the abort file stays for the next round
    return times, (f"; re-dispatched {counts['rebuilt']} records" if counts else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=0, help="messages to write (default: one full segment)")
    ap.add_argument("--size", type=int, default=128, help="body bytes per message")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--segment-mib", type=int, default=1024, help="commit-log segment size")
    ap.add_argument("--repeat", type=int, default=3, help="recoveries to time (best and all printed)")
    ap.add_argument("--no-keys", action="store_true", help="messages without UNIQ_KEY (nothing to index)")
    ap.add_argument("--dir", type=Path, default=None, help="parent directory of the temporary store")
    ap.add_argument("--fill", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    segment = args.segment_mib * 1024 * 1024
    keys = not args.no_keys
    records = args.records or default_records(args.size, segment, keys)
    records -= records % PER_BATCH
    if args.fill is not None:
        fill(args.fill, records, args.size, args.queues, segment, keys)
        return
    tmp = Path(tempfile.mkdtemp(prefix="finchmq-recovery-", dir=args.dir))
    root = tmp / "store"
    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "benchmarks.recovery", "--fill", str(root), "--records", str(records)),
            *("--size", str(args.size), "--queues", str(args.queues), "--segment-mib", str(args.segment_mib)),
            *(["--no-keys"] if args.no_keys else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        if not line or line[0] != "DONE":
            raise SystemExit(f"the writer failed: {line}")
        end, fill_s = int(line[2]), float(line[3])
        child.send_signal(signal.SIGKILL)
        child.wait()
        print(
            f"wrote {records} records of {args.size} B ({record_size(args.size, keys)} B stored, "
            f"{end / 2**20:.0f} MiB of commit log) in {fill_s:.1f} s; writer killed with SIGKILL",
            flush=True,
        )
        runs = []
        for i in range(args.repeat):
            t, note = recover_once(root, segment, records, args.queues)
            runs.append(t)
            scan, rebuild = t.get("scan", 0.0), t.get("rebuild", 0.0)
            print(
                f"  run {i + 1}: total {t['total']:.2f} s ({records / t['total']:,.0f} records/s): "
                f"scan+CRC {scan:.2f} s ({records / scan if scan else 0:,.0f} records/s), "
                f"dispatch {rebuild:.2f} s, other {t['total'] - scan - rebuild:.2f} s{note}",
                flush=True,
            )
        best = min(runs, key=lambda t: t["total"])
        print(
            f"best: {records} records, {best['total']:.2f} s, {records / best['total']:,.0f} records/s "
            f"(scan+CRC {best.get('scan', 0.0):.2f} s, dispatch {best.get('rebuild', 0.0):.2f} s)"
        )
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
