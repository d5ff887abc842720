"""Store test helpers: tiny segments so roll-over happens within a few messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.message import Message
from finchmq.protocol.stored import decode_stored_all
from finchmq.store import DefaultMessageStore, MessageExtBatch, MessageExtBrokerInner, MessageStoreConfig
from finchmq.store.checkpoint import StoreCheckpoint

SEGMENT = 64 * 1024


def small_config(root: Path, **overrides: object) -> MessageStoreConfig:
    base = MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=100 * 20,
        max_hash_slot_num=64,
        max_index_num=256,
        flush_interval_commit_log=50,
        flush_interval_consume_queue=50,
        commit_interval_commit_log=20,
        clean_resource_interval=60_000,
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


def msg(topic: str = "T", body: bytes = b"hello", queue_id: int = 0, **props: str) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, body=body, queue_id=queue_id, properties=dict(props))


def batch(topic: str, bodies: list[bytes], queue_id: int = 0, **props: str) -> MessageExtBatch:
    body = encode_batch([Message(topic, b, properties=dict(props)) for b in bodies])
    return MessageExtBatch(topic=topic, body=body, queue_id=queue_id)


def read_queue(store: DefaultMessageStore, topic: str, queue_id: int, start: int = 0) -> list[bytes]:
    """All message bodies of a queue from ``start`` (follows next_begin_offset)."""
    out: list[bytes] = []
    offset = start
    while True:
        with store.get_message("g", topic, queue_id, offset, 32) as r:
            if not r.buffers:
                return out
            out += [m.body for m in decode_stored_all(r.body(), verify_crc=True)]
            offset = r.next_begin_offset


def reopen(cfg: MessageStoreConfig) -> DefaultMessageStore:
    """A store on ``cfg``'s directory, loaded (recovered) and started."""
    s = DefaultMessageStore(cfg)
    s.load()
    s.start()
    return s


def make_abnormal(cfg: MessageStoreConfig, *, from_first_segment: bool = False) -> None:
    """What a SIGKILL leaves: the abort file and no clean-shutdown record; ``from_first_segment``
    also zeroes the checkpoint's times, so the scan starts at the first segment."""
    cfg.abort_path.write_text("1")
    cp = StoreCheckpoint(cfg.checkpoint_path)
    cp.clear_clean_shutdown()
    if from_first_segment:
        cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = 0
        cp.flush()
    cp.shutdown()


@pytest.fixture
def cfg(tmp_path: Path) -> MessageStoreConfig:
    return small_config(tmp_path / "store")


@pytest.fixture
def store(cfg: MessageStoreConfig) -> Iterator[DefaultMessageStore]:
    s = DefaultMessageStore(cfg)
    s.load()
    s.start()
    yield s
    s.shutdown()
