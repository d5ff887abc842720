"""Append throughput of ``finchmq.store`` (issue 3): python -m benchmarks.store_append [--messages N].

Cases (single writer unless stated, ASYNC_FLUSH, consume-queue dispatch and index included):
  batch32-128B, batch32-1KiB   SEND_BATCH_MESSAGE-shaped bodies of 32 messages
  single-1KiB                  one message per put
  sync-64threads-1KiB          SYNC_FLUSH group commit, 64 writer threads, blocking puts
  sync-64inflight-1KiB         SYNC_FLUSH, one thread keeping 64 puts in flight via futures
``--volume-gib 4`` instead writes that many GiB of 1 KiB messages in batches and reports resident
memory (RssAnon / RssFile from /proc/self/status) along the way.
Every message carries TAGS and a 32-hex-digit UNIQ_KEY (indexed, as every client sends one);
``--no-uniq-key`` measures without the index.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.message import Message
from finchmq.store import (
    DefaultMessageStore,
    FlushDiskType,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageResult,
)


def rss() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "RssAnon", "RssFile", "RssShmem")):
                name, value = line.split(":")
                out[name] = int(value.split()[0]) // 1024  # MiB
    return out


def uniq(i: int) -> str:
    return f"7F000001{os.getpid() & 0xFFFF:04X}00C0FFEE{i:012X}"


def make_batches(count: int, size: int, per_batch: int, with_uniq: bool, distinct: int = 64) -> list[bytes]:
    batches = []
    for b in range(distinct):
        msgs = []
        for j in range(per_batch):
            props = {"TAGS": "TagA"}
            if with_uniq:
                props["UNIQ_KEY"] = uniq(b * per_batch + j)
            msgs.append(Message("BenchTopic", os.urandom(size), properties=props))
        batches.append(encode_batch(msgs))
    return batches


def config(root: Path, **kw: object) -> MessageStoreConfig:
    return dataclasses.replace(MessageStoreConfig(store_path_root_dir=root), **kw)  # type: ignore[arg-type]


def run_batches(root: Path, n: int, size: int, with_uniq: bool, queues: int = 4) -> float:
    batches = make_batches(n, size, 32, with_uniq)
    with DefaultMessageStore(config(root)) as store:
        rounds = n // 32
        t0 = time.perf_counter()
        for i in range(rounds):
            r = store.put_messages(
                MessageExtBatch(topic="BenchTopic", body=batches[i % len(batches)], queue_id=i % queues)
            )
            if not r.is_ok():
                raise SystemExit(f"put failed: {r.status.name}")
        dt = time.perf_counter() - t0
    return rounds * 32 / dt


def run_single(root: Path, n: int, size: int, with_uniq: bool, queues: int = 4) -> float:
    body = os.urandom(size)
    with DefaultMessageStore(config(root)) as store:
        t0 = time.perf_counter()
        for i in range(n):
            props = {"TAGS": "TagA", "UNIQ_KEY": uniq(i)} if with_uniq else {"TAGS": "TagA"}
            r = store.put_message(
                MessageExtBrokerInner(topic="BenchTopic", body=body, queue_id=i % queues, properties=props)
            )
            if not r.is_ok():
                raise SystemExit(f"put failed: {r.status.name}")
        dt = time.perf_counter() - t0
    return n / dt


def run_sync_threads(root: Path, n: int, size: int, with_uniq: bool, writers: int = 64) -> float:
    body = os.urandom(size)
    cfg = config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    per = n // writers
    errors: list[str] = []
    with DefaultMessageStore(cfg) as store:
        barrier = threading.Barrier(writers + 1)

        def writer(w: int) -> None:
            barrier.wait()
            for i in range(per):
                props = {"TAGS": "TagA", "UNIQ_KEY": uniq(w * per + i)} if with_uniq else {"TAGS": "TagA"}
                r = store.put_message(
                    MessageExtBrokerInner(topic="BenchTopic", body=body, queue_id=w % 4, properties=props)
                )
                if not r.is_ok():
                    errors.append(r.status.name)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} puts failed, e.g. {errors[0]}")
    return per * writers / dt


def run_sync_inflight(root: Path, n: int, size: int, with_uniq: bool, inflight: int = 64) -> float:
    body = os.urandom(size)
    cfg = config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    sem = threading.Semaphore(inflight)
    done = threading.Event()
    remaining = [n]
    lock = threading.Lock()
    errors: list[str] = []

    def finished(r: PutMessageResult) -> None:
        if not r.is_ok():
            errors.append(r.status.name)
        sem.release()
        with lock:
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

    with DefaultMessageStore(cfg) as store:
        t0 = time.perf_counter()
        for i in range(n):
            sem.acquire()
            props = {"TAGS": "TagA", "UNIQ_KEY": uniq(i)} if with_uniq else {"TAGS": "TagA"}
            outcome = store.put(
                MessageExtBrokerInner(topic="BenchTopic", body=body, queue_id=i % 4, properties=props)
            )
            if isinstance(outcome, Future):
                outcome.add_done_callback(lambda f: finished(f.result()))
            else:
                finished(outcome)
        done.wait()
        dt = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} puts failed, e.g. {errors[0]}")
    return n / dt


def run_volume(root: Path, gib: float, with_uniq: bool) -> None:
    batches = make_batches(32 * 64, 1024, 32, with_uniq)
    batch_bytes = len(batches[0])
    rounds = int(gib * 1024**3 // batch_bytes)
    print(f"writing {gib} GiB in {rounds} batches of 32 x 1 KiB; RSS in MiB")
    print(f"  start: {rss()}")
    with DefaultMessageStore(config(root, file_reserved_time=0)) as store:
        t0 = time.perf_counter()
        step = max(rounds // 8, 1)
        for i in range(rounds):
            r = store.put_messages(
                MessageExtBatch(topic="BenchTopic", body=batches[i % len(batches)], queue_id=i % 4)
            )
            if not r.is_ok():
                raise SystemExit(f"put failed: {r.status.name}")
            if (i + 1) % step == 0:
                written = (i + 1) * batch_bytes / 1024**3
                print(
                    f"  {written:5.2f} GiB  {(i + 1) * 32 / (time.perf_counter() - t0):9.0f} msgs/s  {rss()}"
                )
        print(f"  end (store open): {rss()}")
    print(f"  after shutdown: {rss()}")


CASES: dict[str, tuple[Callable[[Path, int, int, bool], float], int]] = {
    "batch32-128B": (run_batches, 128),
    "batch32-1KiB": (run_batches, 1024),
    "single-1KiB": (run_single, 1024),
    "sync-64threads-1KiB": (run_sync_threads, 1024),
    "sync-64inflight-1KiB": (run_sync_inflight, 1024),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=320_000)
    parser.add_argument("--sync-messages", type=int, default=64_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--dir", type=Path, default=None, help="store parent directory (default: a temp dir)")
    parser.add_argument("--no-uniq-key", action="store_true")
    parser.add_argument("--volume-gib", type=float, default=0.0)
    args = parser.parse_args()
    with_uniq = not args.no_uniq_key
    parent = Path(tempfile.mkdtemp(prefix="finchmq-bench-", dir=args.dir))
    try:
        if args.volume_gib:
            run_volume(parent / "volume", args.volume_gib, with_uniq)
            return
        for name in args.case or list(CASES):
            fn, size = CASES[name]
            n = args.sync_messages if name.startswith("sync") else args.messages
            if name == "single-1KiB":
                n = min(n, 200_000)
            rates = []
            for rep in range(args.repeat):
                root = parent / f"{name}-{rep}"
                rates.append(fn(root, n, size, with_uniq))
                shutil.rmtree(root, ignore_errors=True)
            best = max(rates)
            spread = ", ".join(f"{r:,.0f}" for r in rates)
            print(f"{name:22s} best {best:10,.0f} msgs/s {best * size / 1e6:8.1f} MB/s   runs: {spread}")
        print(f"RSS now: {rss()} MiB")
    finally:
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
