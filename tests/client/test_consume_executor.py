"""The async listeners' executor: bounded concurrency when listeners wait, one worker when
they do not."""

from __future__ import annotations

import asyncio

from finchmq.client.consumer.executor import AsyncConsumeExecutor


def _workers(name: str) -> int:
    return sum(1 for t in asyncio.all_tasks() if t.get_name().startswith(f"finchmq-{name}-"))


async def test_waiting_jobs_run_concurrently_up_to_the_limit_in_order() -> None:
    executor = AsyncConsumeExecutor("waits", 3)
    release = asyncio.Event()
    started: list[int] = []
    done: list[tuple[int, object, BaseException | None]] = []

    async def job(n: int) -> int:
        started.append(n)
        await release.wait()
        if n == 4:
            raise ValueError("job 4 fails")
        return n * 10

    for n in range(8):
        executor.submit(job, n, lambda arg, result, exc: done.append((arg, result, exc)))
    for _ in range(50):  # every worker that can start has started
        await asyncio.sleep(0)
    assert started == [0, 1, 2], "three at once, first in first started"
    release.set()
    for _ in range(200):
        if len(done) == 8:
            break
        await asyncio.sleep(0)
    assert started == list(range(8))
    assert sorted((arg, result) for arg, result, exc in done if exc is None) == [
        (n, n * 10) for n in range(8) if n != 4
    ]
    assert [(arg, str(exc)) for arg, _, exc in done if exc is not None] == [(4, "job 4 fails")]
    assert _workers("waits") == 3
    await executor.shutdown()
    assert _workers("waits") == 0


async def test_jobs_that_never_wait_are_run_by_one_worker() -> None:
    executor = AsyncConsumeExecutor("quick", 64)
    done: list[int] = []

    async def job(n: int) -> int:
        return n

    for n in range(100):
        executor.submit(job, n, lambda arg, result, exc: done.append(result))
    for _ in range(10):
        await asyncio.sleep(0)
    assert done == list(range(100)), "all run, in order"
    assert _workers("quick") == 1, "no worker woken for jobs another one already ran"
    await executor.shutdown()
