"""``BackgroundTasks``: the one supervisor of background work (broker, name server, clients)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from finchmq.common.tasks import BackgroundTasks
from tests.waiting import eventually


async def test_a_crash_is_logged_and_close_waits_for_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks("unit")
    started = asyncio.Event()

    async def crash() -> None:
        raise ValueError("boom")

    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    with caplog.at_level(logging.ERROR, logger="finchmq.common.tasks"):
        crashed = tasks.spawn(crash(), "crash")
        tasks.spawn(forever(), "forever")
        await asyncio.wait([crashed])
        await started.wait()
        await asyncio.sleep(0)
    assert any("finchmq-unit-crash crashed" in r.getMessage() for r in caplog.records)
    await tasks.close()
    assert tasks.closed


async def test_work_started_after_close_is_dropped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    tasks = BackgroundTasks("unit")
    await tasks.close()
    ran = False

    async def late() -> None:
        nonlocal ran
        ran = True

    with caplog.at_level(logging.DEBUG, logger="finchmq.common.tasks"):
        task = tasks.spawn(late(), "late")  # e.g. a rebalance finishing while its consumer closes
        await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and not ran
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_failing_periodic_job_runs_again() -> None:
    tasks = BackgroundTasks("unit")
    calls: list[int] = []
    again = asyncio.Event()

    def job() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first pass fails")
        again.set()

    tasks.every(1, job, "job")
    await eventually(again.is_set, what="the job run again after its failure")
    await tasks.close()
    assert len(calls) >= 2
