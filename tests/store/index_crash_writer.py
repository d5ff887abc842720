"""Subprocess for the index crash tests: leaves the index as a SIGKILL at a chosen point of
``IndexService.put_hashes`` does, then kills itself.

``header``: puts ``COUNT`` messages with KEYS ``KEY`` and UNIQ_KEY ``U<i>``, snapshots the last
index file's header, puts one more (``last``, same key, UNIQ_KEY ``Ulast``) and writes the
snapshot back over the header: the last message's entries and hash slots written, the header not
(what the file holds before that put's ``write_header``).

``roll``: puts messages (KEYS ``KEY``, UNIQ_KEY ``U<i>``) until the last index file has room for
fewer than two, flushes it (as the flush service does between puts), then puts a batch of four
(UNIQ_KEY ``B<j>``) whose entries fill that file and roll over to a new one, and is killed.

Usage: python -m tests.store.index_crash_writer ROOT header|roll COUNT KEY
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.message import Message
from finchmq.store import DefaultMessageStore, MessageExtBatch

from .conftest import msg, small_config

HEADER = 40  # INDEX_HEADER_SIZE


def main() -> None:
    root, mode, count, key = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = DefaultMessageStore(small_config(root))
    store.load()
    store.start()
    index = store.index_service
    assert index is not None
    i = 0
    while i < count or (mode == "roll" and index.files[-1].index_num - index.files[-1].index_count >= 4):
        assert store.put_message(msg("T", b"m%d" % i, queue_id=i % 2, KEYS=key, UNIQ_KEY=f"U{i}")).is_ok()
        i += 1
    print(f"COUNT {i}", flush=True)
    files_before = len(index.files)
    if mode == "header":
        fd = os.open(index.files[-1].path, os.O_RDWR)
        header = os.pread(fd, HEADER, 0)
        assert store.put_message(msg("T", b"last", queue_id=0, KEYS=key, UNIQ_KEY="Ulast")).is_ok()
        assert len(index.files) == files_before, "the put rolled the index file: use fewer messages"
        os.pwrite(fd, header, 0)  # the header as it was before the put's write_header
    else:
        index.files[-1].flush()
        items = [Message("T", b"b%d" % j, properties={"KEYS": key, "UNIQ_KEY": f"B{j}"}) for j in range(4)]
        assert store.put_messages(MessageExtBatch(topic="T", body=encode_batch(items), queue_id=0)).is_ok()
        assert len(index.files) == files_before + 1, "the batch did not roll the index file over"
    print("KILL", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
