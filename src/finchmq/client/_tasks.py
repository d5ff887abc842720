"""Background work of one client object: named tasks, periodic jobs and timers, all cancelled
and awaited by ``close()`` (house style §8).

A task that dies with an unexpected exception is logged with ``log.exception``; a periodic job
that raises is logged and runs again at its next tick (Java's scheduled executors swallow too).
"""

from __future__ import annotations

import asyncio
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
        """Run ``coro`` as a named task; its failure is logged, ``close()`` cancels it."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self.name} is closed; cannot start {name}")
        task = asyncio.get_running_loop().create_task(coro, name=f"finchmq-{self.name}-{name}")
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
        self, interval_ms: float, job: Callable[[], Awaitable[object]], name: str, initial_delay_ms: float = 0
    ) -> asyncio.Task[None]:
        """Run ``job`` after ``initial_delay_ms`` and then every ``interval_ms`` (fixed delay)."""

        async def loop() -> None:
            await asyncio.sleep(initial_delay_ms / 1000)
            while True:
                try:
                    await job()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s: periodic %s failed", self.name, name)
                await asyncio.sleep(interval_ms / 1000)

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
