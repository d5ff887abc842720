"""Subprocess for the SIGKILL tests: writes messages and prints ``ACK <id> <queue> <offset>`` for
every PUT_OK, flushed, so the parent knows what was acknowledged when it kills us.

Usage: python -m tests.store.crash_writer ROOT SYNC_FLUSH|ASYNC_FLUSH FIRST_ID [keys]

With ``keys`` every message has UNIQ_KEY ``U<id>`` and KEYS ``k<id> s<id % 7>`` (index tests).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.message import Message
from finchmq.store import DefaultMessageStore, FlushDiskType, MessageExtBatch

from .conftest import batch, msg, small_config


def body_of(i: int) -> bytes:
    seed = hashlib.sha256(b"%d" % i).digest()
    return b"id=%08d;" % i + seed * (1 + i % 60)


def keys_of(i: int) -> dict[str, str]:
    return {"UNIQ_KEY": f"U{i}", "KEYS": f"k{i} s{i % 7}"}


def main() -> None:
    root, mode, first = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    keyed = sys.argv[4:] == ["keys"]
    cfg = small_config(root, flush_disk_type=FlushDiskType[mode], flush_interval_commit_log=20)
    store = DefaultMessageStore(cfg)
    store.load()
    store.start()
    print("READY", flush=True)
    i = first
    while True:
        q = i % 3
        if i % 5 == 0:
            ids = list(range(i, i + 4))
            if keyed:
                items = [Message("C", body_of(j), properties=keys_of(j)) for j in ids]
                r = store.put_messages(MessageExtBatch(topic="C", body=encode_batch(items), queue_id=q))
            else:
                r = store.put_messages(batch("C", [body_of(j) for j in ids], queue_id=q))
        else:
            ids = [i]
            r = store.put_message(msg("C", body_of(i), queue_id=q, **(keys_of(i) if keyed else {})))
        if r.is_ok() and r.append_message_result is not None:
            lo = r.append_message_result.logics_offset
            print("\n".join(f"ACK {j} {q} {lo + k}" for k, j in enumerate(ids)), flush=True)
        i += len(ids)


if __name__ == "__main__":
    main()
