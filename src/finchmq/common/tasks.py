"""Background work of one component (a broker, a name server, a client object): named tasks,
periodic jobs and timers, all cancelled and awaited by ``close()`` (house style §8). Every
background task of finchmq runs under one of these, so no failure passes silently.

A task that dies with an unexpected exception is logged with ``log.exception``; a periodic job
that raises is logged and runs again at its next tick (Java's scheduled executors swallow too).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundTasks"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class BackgroundTasks:
    """Owns tasks and timers for one component (``name`` prefixes every task name)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def spawn(self, coro: Coroutine[Any, Any, _T], name: str) -> asyncio.Task[_T]:
        """Run ``coro`` as a named task; its failure is logged, ``close()`` cancels it.

        Once closed (work racing a close, e.g. a rebalance finishing as its consumer shuts down),
        the task is cancelled before it starts: the work is dropped quietly.
        """
        task = asyncio.get_running_loop().create_task(coro, name=f"finchmq-{self.name}-{name}")
        if self._closed:
            task.cancel()
            log.debug("%s is closed: %s not started", self.name, name)
            return task
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("%s crashed", task.get_name(), exc_info=exc)

    def every(
        self,
        interval_ms: float | Callable[[], float],
        job: Callable[[], Awaitable[object] | object],
        name: str,
        initial_delay_ms: float = 0,
    ) -> asyncio.Task[None]:
        """Run ``job`` (a function or a coroutine function) after ``initial_delay_ms`` and then
        every ``interval_ms`` (fixed delay; a callable is read before each wait)."""
        interval = interval_ms if callable(interval_ms) else (lambda: interval_ms)

        async def loop() -> None:
            await asyncio.sleep(initial_delay_ms / 1000)
            while True:
                try:
                    result = job()
                    if inspect.isawaitable(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s: periodic %s failed", self.name, name)
                await asyncio.sleep(interval() / 1000)

        return self.spawn(loop(), name)

    def call_later(self, delay_ms: float, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the loop after ``delay_ms`` unless closed first."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            if not self._closed:
                try:
                    callback()
                except Exception:
                    log.exception("%s: timer callback failed", self.name)

        handle = loop.call_later(max(delay_ms, 0) / 1000, fire)
        self._timers.add(handle)

    def spawn_later(
        self, delay_ms: float, factory: Callable[[], Coroutine[Any, Any, object]], name: str
    ) -> None:
        """Start ``factory()`` as a task after ``delay_ms``."""
        self.call_later(delay_ms, lambda: self.spawn(factory(), name))

    async def close(self) -> None:
        """Cancel every timer and task and wait for the tasks to finish; idempotent."""
        self._closed = True
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
