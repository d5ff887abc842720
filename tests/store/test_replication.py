"""The store's side of master/slave replication, without the network: a master store's commit log
copied chunk by chunk into a slave store with ``get_commit_log_data``/``append_to_commit_log``, and
the SYNC_MASTER wait on slave acknowledgements."""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.store import DefaultMessageStore, PutMessageResult, PutMessageStatus
from finchmq.store.config import BrokerRole
from tests.waiting import DEFAULT_TIMEOUT

from .conftest import msg, read_queue, small_config


def replicate(master: DefaultMessageStore, slave: DefaultMessageStore, chunk: int) -> None:
    """What the HA connection does: from the slave's end, ``chunk`` bytes at a time."""
    while True:
        offset = slave.get_max_phy_offset()
        data = master.get_commit_log_data(offset, chunk)
        if not data:
            return
        assert slave.append_to_commit_log(offset, data)


def fill(master: DefaultMessageStore, n: int, topic: str = "T") -> list[bytes]:
    bodies = [f"{topic}-{i}-".encode() + b"x" * (i % 700) for i in range(n)]
    for i, body in enumerate(bodies):
        assert master.put_message(msg(topic, body, queue_id=i % 3)).status is PutMessageStatus.PUT_OK
    return bodies


@pytest.fixture
def pair(tmp_path: Path):  # type: ignore[no-untyped-def]
    master = DefaultMessageStore(small_config(tmp_path / "m"))
    slave = DefaultMessageStore(small_config(tmp_path / "s", broker_role=BrokerRole.SLAVE))
    for s in (master, slave):
        s.load()
        s.start()
    yield master, slave
    for s in (master, slave):
        s.shutdown()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunk=st.integers(min_value=1, max_value=70_000))
def test_any_chunking_gives_the_slave_the_same_log_and_queues(
    tmp_path_factory: pytest.TempPathFactory, chunk: int
) -> None:
    root = tmp_path_factory.mktemp("rep")
    master = DefaultMessageStore(small_config(root / "m"))
    slave = DefaultMessageStore(small_config(root / "s", broker_role=BrokerRole.SLAVE))
    for s in (master, slave):
        s.load()
        s.start()
    try:
        fill(master, 300)  # several 64 KiB segments, each ending in a BLANK filler
        replicate(master, slave, chunk)
        assert slave.get_max_phy_offset() == master.get_max_phy_offset()
        for q in range(3):
            assert read_queue(slave, "T", q) == read_queue(master, "T", q)
        assert slave.dispatch_behind_bytes() == 0
    finally:
        for s in (master, slave):
            s.shutdown()


def test_a_slave_refuses_data_that_does_not_continue_its_log(pair) -> None:  # type: ignore[no-untyped-def]
    master, slave = pair
    fill(master, 20)
    data = master.get_commit_log_data(0, 1000)
    assert data
    assert not slave.append_to_commit_log(100, data)  # an empty log starts at a segment boundary
    assert slave.append_to_commit_log(0, data)
    assert not slave.append_to_commit_log(0, data)  # not the end of its log
    assert not slave.append_to_commit_log(5000, data)
    assert slave.get_max_phy_offset() == 1000


def test_a_slave_refuses_puts(pair) -> None:  # type: ignore[no-untyped-def]
    _, slave = pair
    assert slave.put_message(msg()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_a_slave_stopped_in_the_middle_of_a_record_resumes_from_a_whole_record(tmp_path: Path) -> None:
    master = DefaultMessageStore(small_config(tmp_path / "m"))
    slave_cfg = small_config(tmp_path / "s", broker_role=BrokerRole.SLAVE)
    slave = DefaultMessageStore(slave_cfg)
    for s in (master, slave):
        s.load()
        s.start()
    bodies = fill(master, 50)
    replicate(master, slave, 10_000)
    half = slave.get_max_phy_offset()
    more = fill(master, 10, topic="U")
    head_only = master.get_commit_log_data(half, 10)  # part of the next record only
    assert head_only is not None and slave.append_to_commit_log(half, head_only)
    assert slave.dispatch_behind_bytes() > 0  # a record it has only part of
    slave.shutdown()  # not a clean end: the next start recovers and drops the partial record

    slave = DefaultMessageStore(slave_cfg)
    slave.load()
    slave.start()
    try:
        assert slave.get_max_phy_offset() == half
        replicate(master, slave, 7_000)
        everything = [body for t in "TU" for q in range(3) for body in read_queue(slave, t, q)]
        assert sorted(everything) == sorted(bodies + more)
    finally:
        slave.shutdown()
        master.shutdown()


def sync_master(tmp_path: Path, **overrides: object) -> DefaultMessageStore:
    cfg = dataclasses.replace(
        small_config(tmp_path / "sm"),
        broker_role=BrokerRole.SYNC_MASTER,
        **overrides,  # type: ignore[arg-type]
    )
    store = DefaultMessageStore(cfg)
    store.load()
    store.start()
    return store


def test_sync_master_without_a_slave_answers_slave_not_available(tmp_path: Path) -> None:
    store = sync_master(tmp_path)
    try:
        assert store.put_message(msg()).status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert len(read_queue(store, "T", 0)) == 1  # stored all the same, as Java does
        # a put that does not ask to wait for the store is not held back
        assert store.put_message(msg(WAIT="false")).status is PutMessageStatus.PUT_OK
    finally:
        store.shutdown()


def test_sync_master_waits_for_the_slave_acknowledgement(tmp_path: Path) -> None:
    store = sync_master(tmp_path, slave_timeout=600_000)  # no FLUSH_SLAVE_TIMEOUT within the test
    try:
        store.replication.slave_connected()
        appended = store.put(msg())
        outcome = appended.pending
        assert appended.status is PutMessageStatus.PUT_OK and isinstance(outcome, Future)
        assert not outcome.done()
        end = store.get_max_phy_offset()
        store.replication.notify_transfer_some(end - 1)
        with pytest.raises(TimeoutError):
            # not acknowledged far enough yet; nothing else can complete it within the test, so
            # a slow machine can only make this pass more surely, never fail it
            outcome.result(0.2)
        store.replication.notify_transfer_some(end)
        result: PutMessageResult = outcome.result(DEFAULT_TIMEOUT)
        assert result.status is PutMessageStatus.PUT_OK
    finally:
        store.shutdown()


def test_sync_master_answers_flush_slave_timeout_when_the_slave_is_too_slow(tmp_path: Path) -> None:
    store = sync_master(tmp_path, slave_timeout=200)
    try:
        store.replication.slave_connected()
        assert store.put_message(msg()).status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    finally:
        store.shutdown()


def test_sync_flush_and_sync_master_combine_as_java(tmp_path: Path) -> None:
    store = sync_master(
        tmp_path,
        flush_disk_type=__import__("finchmq.store.config", fromlist=["x"]).FlushDiskType.SYNC_FLUSH,
        sync_flush_timeout=600_000,  # neither wait may time out on a slow machine or disk
        slave_timeout=600_000,
    )
    try:
        store.replication.slave_connected()
        outcome = store.put(msg()).pending
        assert isinstance(outcome, Future)
        store.replication.notify_transfer_some(store.get_max_phy_offset())
        assert outcome.result(DEFAULT_TIMEOUT).status is PutMessageStatus.PUT_OK
    finally:
        store.shutdown()
