"""SIGKILL a real writer process at random moments; every acknowledged message must survive."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from finchmq.protocol.stored import decode_stored_all
from finchmq.store import DefaultMessageStore

from .conftest import small_config
from .crash_writer import body_of

REPO = Path(__file__).resolve().parents[2]


def run_and_kill(
    root: Path, mode: str, first: int, rng: random.Random, *, keys: bool = False, min_acks: int = 30
) -> dict[int, tuple[int, int]]:
    """Run ``crash_writer`` (``keys``: with KEYS and UNIQ_KEY) and SIGKILL it at a random moment
    once it acknowledged ``min_acks`` messages; the acknowledged messages: id -> (queue, queue offset)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.store.crash_writer",
            str(root),
            mode,
            str(first),
            *(["keys"] if keys else []),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    acked: dict[int, tuple[int, int]] = {}

    def take(line: str) -> None:
        parts = line.split()
        if len(parts) == 4 and parts[0] == "ACK":  # a line cut by the kill is not an ACK
            acked[int(parts[1])] = (int(parts[2]), int(parts[3]))

    while len(acked) < min_acks:  # however slow the machine, every run writes something
        line = proc.stdout.readline()
        assert line, "the writer stopped"
        take(line)
    time.sleep(rng.uniform(0.05, 0.6))  # scenario: where the kill lands among the writes
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    for line in out.splitlines():
        take(line)
    return acked


def _verify(root: Path, acked: dict[int, tuple[int, int]]) -> int:
    store = DefaultMessageStore(small_config(root))
    store.load()
    store.start()
    try:
        seen: dict[int, tuple[int, int]] = {}
        for q in range(3):
            offset = 0
            last_id = -1
            while True:
                with store.get_message("v", "C", q, offset, 32) as r:
                    if not r.buffers:
                        break
                    # verify_crc: no partial or corrupt record is ever served
                    msgs = decode_stored_all(r.body(), verify_crc=True)
                    for m, qo in zip(msgs, r.queue_offsets, strict=True):
                        mid = int(m.body[3:11])
                        assert m.body == body_of(mid), f"message {mid} differs"
                        assert m.queue_offset == qo
                        assert mid > last_id, "messages out of order"
                        last_id = mid
                        seen[mid] = (q, qo)
                    offset = r.next_begin_offset
        missing = [i for i in acked if i not in seen]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
        for i, where in acked.items():
            assert seen[i] == where, f"message {i} acknowledged at {where}, found at {seen[i]}"
        return max(seen, default=-1) + 1
    finally:
        store.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, mode: str) -> None:
    rng = random.Random(f"{mode}-{os.getpid()}")
    root = tmp_path / "store"
    acked: dict[int, tuple[int, int]] = {}
    next_id = 0
    for _ in range(8):
        acked.update(run_and_kill(root, mode, next_id, rng))
        next_id = _verify(root, acked)
    assert len(acked) >= 8 * 30  # the writer really wrote across kills (and segments)
    assert len(list((root / "commitlog").iterdir())) > 2
