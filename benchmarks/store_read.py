"""Read throughput of ``finchmq.store``: python -m benchmarks.store_read [--messages N].

Fills a store with 1 KiB messages over 4 queues, then measures ``get_message`` of 32 messages
(the pull path: consume-queue scan, tag filter, zero-copy views), sequentially through each queue;
also with a TagsFilter and with the body joined into bytes (what a broker sends).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.message import Message
from finchmq.store import DefaultMessageStore, MessageExtBatch, MessageStoreConfig, TagsFilter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=256_000)
    parser.add_argument("--calls", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="finchmq-read-", dir=args.dir))
    cfg = dataclasses.replace(MessageStoreConfig(store_path_root_dir=root))
    body = encode_batch([Message("R", os.urandom(1024), properties={"TAGS": "TagA"}) for _ in range(32)])
    try:
        with DefaultMessageStore(cfg) as store:
            for i in range(args.messages // 32):
                assert store.put_messages(MessageExtBatch(topic="R", body=body, queue_id=i % 4)).is_ok()
            per_queue = store.get_max_offset_in_queue("R", 0)
            cases = {
                "get32": (None, False),
                "get32+TagsFilter": (TagsFilter("TagA || TagB"), False),
                "get32+join body": (None, True),
            }
            for name, (flt, join) in cases.items():
                rates = []
                for _ in range(args.repeat):
                    offsets = [0, 0, 0, 0]
                    n = 0
                    t0 = time.perf_counter()
                    while n < args.calls:
                        q = n % 4
                        r = store.get_message("bench", "R", q, offsets[q], 32, flt)
                        if r.message_count != 32:
                            offsets[q] = 0
                        else:
                            offsets[q] = r.next_begin_offset if r.next_begin_offset < per_queue else 0
                        if join:
                            r.body()
                        r.release()
                        n += 1
                    rates.append(n / (time.perf_counter() - t0))
                spread = ", ".join(f"{x:,.0f}" for x in rates)
                best = max(rates)
                print(f"{name:18s} best {best:10,.0f} calls/s ({best * 32:,.0f} msgs/s)  runs: {spread}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
