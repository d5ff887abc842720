"""Where listeners run: a thread pool for blocking listeners, worker coroutines for async ones.

Owns: ``ThreadConsumeExecutor`` (Java's ``consumeExecutor``: ``core_pool_size`` threads between
``consume_thread_min`` and ``consume_thread_max``, adjustable at run time) and
``AsyncConsumeExecutor``. Imports: stdlib only.

Strategy:
    A thread runs a job and hands the result back to the loop with ``on_done(result, exc)``.
    Results are queued in a deque and one ``call_soon_threadsafe`` drains all that piled up, so
    the loop is woken once per burst, not once per message. The job queue is unbounded, as
    Java's ``LinkedBlockingQueue``; flow control bounds it (a queue's cached messages).
    The async executor runs up to ``concurrency`` coroutines from a FIFO on worker tasks, waking
    another worker only while jobs wait and the running workers have yielded.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["AsyncConsumeExecutor", "ThreadConsumeExecutor"]

log = logging.getLogger(__name__)

_R = TypeVar("_R")
_A = TypeVar("_A")
OnDone = Callable[[Any, Any, BaseException | None], None]
"""``on_done(arg, result, exception)``, called on the loop."""


class ThreadConsumeExecutor:
    """A resizable pool of daemon threads whose results come back on the event loop."""

    def __init__(self, name: str, core_pool_size: int, max_pool_size: int) -> None:
        self.name = name
        self.min_pool_size = core_pool_size
        self.max_pool_size = max_pool_size
        self.core_pool_size = 0
        self._loop = asyncio.get_running_loop()
        self._jobs: queue.SimpleQueue[tuple[Callable[[Any], object], object, OnDone] | None] = (
            queue.SimpleQueue()
        )
        self._results: deque[tuple[OnDone, object, object, BaseException | None]] = deque()
        self._wake_pending = False
        self._threads: list[threading.Thread] = []
        self._counter = 0
        self._shutdown = False
        for _ in range(core_pool_size):
            self._add_thread()

    def _add_thread(self) -> None:
        self._counter += 1
        thread = threading.Thread(target=self._work, name=f"{self.name}_{self._counter}", daemon=True)
        self.core_pool_size += 1
        self._threads.append(thread)
        thread.start()

    def submit(self, job: Callable[[_A], object], arg: _A, on_done: OnDone) -> None:
        """Run ``job(arg)`` in a thread; ``on_done(arg, result, exception)`` follows on the loop."""
        if self._shutdown:
            raise RuntimeError(f"{self.name} is shut down")
        self._jobs.put((job, arg, on_done))

    async def run(self, job: Callable[..., _R], *args: object) -> _R:
        """Run ``job(*args)`` in a thread and await its result."""
        future: asyncio.Future[_R] = self._loop.create_future()

        def done(_: object, result: Any, exc: BaseException | None) -> None:
            if future.done():
                return
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(result)

        self.submit(lambda a: job(*a), args, done)
        return await future

    def _work(self) -> None:
        jobs, results = self._jobs, self._results
        while True:
            item = jobs.get()
            if item is None:
                return
            job, arg, on_done = item
            exc: BaseException | None = None
            result: object = None
            try:
                result = job(arg)
            except BaseException as error:
                exc = error
            results.append((on_done, arg, result, exc))
            if not self._wake_pending:
                self._wake_pending = True
                try:
                    self._loop.call_soon_threadsafe(self._drain)
                except RuntimeError:  # the loop is closed: nobody waits for results any more
                    return

    def _drain(self) -> None:
        self._wake_pending = False  # before popping: a result appended after this schedules again
        results = self._results
        while results:
            on_done, arg, result, exc = results.popleft()
            try:
                on_done(arg, result, exc)
            except Exception:
                log.exception("%s: result handler failed", self.name)

    def inc_core_pool_size(self) -> None:
        if not self._shutdown and self.core_pool_size < self.max_pool_size:
            self._add_thread()

    def dec_core_pool_size(self) -> None:
        if not self._shutdown and self.core_pool_size > self.min_pool_size:
            self.core_pool_size -= 1
            self._jobs.put(None)

    def shutdown(self) -> None:
        """Stop taking jobs; threads exit after the job they run (never waited for on the loop)."""
        if self._shutdown:
            return
        self._shutdown = True
        while True:  # drop queued jobs
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._jobs.put(None)


_AsyncJob = tuple[Callable[[Any], Coroutine[Any, Any, object]], object, OnDone]


class AsyncConsumeExecutor:
    """Up to ``concurrency`` coroutines at a time, each on a long-lived worker task.

    A submitted job wakes a worker at once unless one is already woken and about to run. A
    worker runs queued jobs one after another; it has another worker woken only when jobs are
    still waiting after its job yielded (a listener that awaits something). Listeners that
    finish without suspending are thus all run by one worker in one task step, instead of one
    worker woken per job.
    """

    def __init__(self, name: str, concurrency: int) -> None:
        self.name = name
        self.concurrency = concurrency
        self._jobs: deque[_AsyncJob] = deque()
        self._idle: deque[asyncio.Future[None]] = deque()
        self._workers: list[asyncio.Task[None]] = []
        self._woken = False  # a worker was woken (or started) and has not run yet
        self._wake_scheduled = False
        self._shutdown = False

    @property
    def core_pool_size(self) -> int:
        return self.concurrency

    def submit(self, factory: Callable[[_A], Coroutine[Any, Any, object]], arg: _A, on_done: OnDone) -> None:
        """Run ``await factory(arg)`` on a worker; then ``on_done(arg, result, exception)``."""
        if self._shutdown:
            raise RuntimeError(f"{self.name} is shut down")
        self._jobs.append((factory, arg, on_done))
        if not self._woken:
            self._wake_one()

    def _wake_one(self) -> None:
        idle = self._idle
        while idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._woken = True
                return
        if len(self._workers) < self.concurrency:
            loop = asyncio.get_running_loop()
            self._workers.append(
                loop.create_task(self._work(), name=f"finchmq-{self.name}-{len(self._workers)}")
            )
            self._woken = True

    def _wake_if_waiting(self) -> None:
        """Scheduled by a worker that left jobs waiting: if they still wait, its job yielded."""
        self._wake_scheduled = False
        if self._jobs and not self._woken and not self._shutdown:
            self._wake_one()

    async def _work(self) -> None:
        jobs = self._jobs
        loop = asyncio.get_running_loop()
        self._woken = False
        while True:
            if not jobs:
                waiter: asyncio.Future[None] = loop.create_future()
                self._idle.append(waiter)
                await waiter
                self._woken = False
                continue
            factory, arg, on_done = jobs.popleft()
            if jobs and not self._wake_scheduled:  # should this job suspend, another worker goes on
                self._wake_scheduled = True
                loop.call_soon(self._wake_if_waiting)
            exc: BaseException | None = None
            result: object = None
            try:
                result = await factory(arg)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                exc = error
            try:
                on_done(arg, result, exc)
            except Exception:
                log.exception("%s: result handler failed", self.name)

    async def shutdown(self) -> None:
        self._shutdown = True
        self._jobs.clear()
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
