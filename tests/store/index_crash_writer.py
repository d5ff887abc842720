"""Subprocess for the index crash tests: leaves the index as a SIGKILL inside
``IndexService.put_hashes`` does (the last message's entries and hash slots written, the file
header not yet), then kills itself.

It puts ``COUNT`` messages with KEYS ``KEY`` and UNIQ_KEY ``U<i>``, snapshots the last index file's header, puts one
more (``last``, same key, UNIQ_KEY ``Ulast``), writes the snapshot back over the header (what the file held before
that put's ``write_header``) and sends itself SIGKILL.

Usage: python -m tests.store.index_crash_writer ROOT COUNT KEY
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from finchmq.store import DefaultMessageStore

from .conftest import msg, small_config

HEADER = 40  # INDEX_HEADER_SIZE


def main() -> None:
    root, count, key = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    store = DefaultMessageStore(small_config(root))
    store.load()
    store.start()
    for i in range(count):
        assert store.put_message(msg("T", b"m%d" % i, queue_id=i % 2, KEYS=key, UNIQ_KEY=f"U{i}")).is_ok()
    index = store.index_service
    assert index is not None
    path = index.files[-1].path
    fd = os.open(path, os.O_RDWR)
    header = os.pread(fd, HEADER, 0)
    files_before = len(index.files)
    assert store.put_message(msg("T", b"last", queue_id=0, KEYS=key, UNIQ_KEY="Ulast")).is_ok()
    assert len(index.files) == files_before, "the put rolled the index file: use fewer messages"
    os.pwrite(fd, header, 0)  # the header as it was before the put's write_header
    print("KILL", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
