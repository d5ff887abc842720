"""The charts' samples on disk (``finchmq.console.history``): kept across a restart, bounded,
and a damaged file loses only its bad tail, said once in the log; a ``finchmq console``
restarted with the same ``--data-dir`` serves the samples it took before."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from finchmq.console import Sample
from finchmq.console.history import FILE_NAME, SampleFile
from tests.waiting import wait_until

from .conftest import ADMIN_USER, Cluster, ConsoleProcess, WebClient


def sample(t: float, lag: int = 0) -> Sample:
    return Sample(time=t, brokers={"broker-a": (1.5, None)}, groups={"G": (lag, 2.0)})


def read(directory: Path, since: float = 0, keep: int = 1000, max_bytes: int = 16 << 20) -> list[Sample]:
    """What a console opening ``directory`` starts with (the file closed again)."""
    history = SampleFile(directory, max_bytes=max_bytes)
    try:
        return history.open(since=since, keep=keep)
    finally:
        history.close()


def test_samples_survive_a_reopen(tmp_path: Path) -> None:
    now = time.time()
    history = SampleFile(tmp_path)
    assert history.open(since=now - 3600, keep=360) == []
    taken = [sample(now - 30 + i, lag=i) for i in range(3)]
    for i, s in enumerate(taken):
        history.append(s, taken[: i + 1], keep=360)
    history.close()
    assert read(tmp_path, since=now - 3600, keep=360) == taken
    assert read(tmp_path, since=now - 10, keep=360) == [], "older than the window: dropped"


def test_a_second_console_keeps_its_samples_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = SampleFile(tmp_path)
    first.open(since=0, keep=10)
    second = SampleFile(tmp_path)
    with caplog.at_level(logging.WARNING, "finchmq.console.history"):
        assert second.open(since=0, keep=10) == []
    assert second.disabled is not None and "another console" in second.disabled
    assert "in memory only" in caplog.text
    second.append(sample(time.time()), [], keep=10)  # a no-op, not an error
    second.close()
    first.close()


@pytest.mark.parametrize(
    "damage",
    [b'{"t":17', b"not json\n", b'{"t":1,"b":{},"g":{"G":[null,1]}}\n', b"\x00\x00\x00\n"],
    ids=["cut-short", "garbage", "bad-figures", "zeros"],
)
def test_a_damaged_file_loses_only_its_bad_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: bytes
) -> None:
    now = time.time()
    history = SampleFile(tmp_path)
    history.open(since=0, keep=100)
    good = [sample(now - 2), sample(now - 1)]
    for s in good:
        history.append(s, good, keep=100)
    history.close()
    path = tmp_path / FILE_NAME
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(damage + b'{"t":1,"b":{},"g":{}}\n')  # what follows a bad line is dropped too
    with caplog.at_level(logging.WARNING, "finchmq.console.history"):
        reopened = SampleFile(tmp_path)
        assert reopened.open(since=0, keep=100) == good
    assert [r.getMessage() for r in caplog.records].count(
        f"console: {path} is damaged at byte {size}: the {len(damage) + 22} bytes from there are dropped "
        "(2 samples kept)"
    ) == 1
    assert path.stat().st_size == size, "the file is cut at the bad line"
    reopened.append(sample(now), [*good, sample(now)], keep=100)
    reopened.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, "finchmq.console.history"):
        assert read(tmp_path, keep=100) == [*good, sample(now)]
    assert caplog.records == [], "said once: the file is whole again"


def test_the_file_is_compacted_to_the_ring(tmp_path: Path) -> None:
    now = time.time()
    history = SampleFile(tmp_path)
    history.open(since=0, keep=5)
    ring: list[Sample] = []
    for i in range(40):
        ring = [*ring, sample(now + i, lag=i)][-5:]
        history.append(ring[-1], ring, keep=5)
        assert len((tmp_path / FILE_NAME).read_bytes().splitlines()) <= 10
    history.close()
    assert read(tmp_path, keep=5) == ring


def test_the_file_stays_under_max_bytes(tmp_path: Path) -> None:
    now = time.time()
    history = SampleFile(tmp_path, max_bytes=4096)
    history.open(since=0, keep=1000)
    many = {f"group-{i}": (i, 1.0) for i in range(20)}  # ~400 bytes a line
    ring: list[Sample] = []
    for i in range(100):
        ring.append(Sample(time=now + i, groups=many))
        history.append(ring[-1], ring, keep=1000)
        assert (tmp_path / FILE_NAME).stat().st_size <= 4096 + 500
    history.close()
    kept = read(tmp_path, max_bytes=4096)
    assert kept and kept == ring[-len(kept) :], "the newest samples are the ones kept"


def series(client: WebClient) -> dict[str, object]:
    status, data = client.call("GET", "/api/series/brokers")
    assert status == 200, data
    return data


def test_a_restarted_console_shows_the_samples_before(
    cluster: Cluster, users_file: Path, tmp_path: Path
) -> None:
    options = ("--data-dir", str(tmp_path / "samples"), "--sample-interval", "0.5")
    with ConsoleProcess(cluster.namesrv, users_file, tmp_path / "a", *options) as first:
        client = WebClient(first.url)
        assert client.login(ADMIN_USER[0], ADMIN_USER[1])[0] == 303
        before = wait_until(lambda: len((s := series(client))["time"]) >= 3 and s, what="three samples")  # type: ignore[arg-type]
        assert before["historyFile"] == str(tmp_path / "samples" / FILE_NAME)
    with ConsoleProcess(cluster.namesrv, users_file, tmp_path / "b", *options) as second:
        client = WebClient(second.url)
        assert client.login(ADMIN_USER[0], ADMIN_USER[1])[0] == 303
        after = series(client)
        assert after["time"][: len(before["time"])] == before["time"]  # type: ignore[index]
        assert after["historyError"] is None
