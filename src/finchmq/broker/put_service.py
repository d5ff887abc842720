"""``StorePutService``: the broker's writer thread in front of the store.

Why a thread: an append holds the store's put lock (and may be slowed on purpose with
``injectPutDelayMillis``, or by a slow disk); the event loop must keep answering heartbeats and
pulls meanwhile. Why one service and not ``run_in_executor`` per message: puts queued while the
thread is busy are taken together and their results handed back to the loop in one
``call_soon_threadsafe``, so under load the cost of crossing threads is paid per batch, not per
message.

``append(put, message)`` resolves once the message is appended, with the store's future (done,
or completed later by the group-commit thread for SYNC_FLUSH); a sender that must not block on
the flush takes that route, as Java's asyncSendMessage does. ``submit`` resolves with the final
result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from finchmq.store import PutMessageResult

__all__ = ["StorePutService"]

log = logging.getLogger(__name__)

_Put = Callable[[Any], "Future[PutMessageResult]"]


class StorePutService:
    """Runs store puts on one thread; ``await submit(put, message)`` for the result."""

    def __init__(self, name: str = "finchmq-store-put") -> None:
        self._name = name
        self._queue: deque[tuple[_Put, Any, asyncio.Future[Future[PutMessageResult]]]] = deque()
        self._wakeup = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def append(self, put: _Put, message: Any) -> asyncio.Future[Future[PutMessageResult]]:
        """Queue ``put(message)``; resolves on the loop once appended, with the store's future."""
        assert self._loop is not None, "put service not started"
        future: asyncio.Future[Future[PutMessageResult]] = self._loop.create_future()
        if self._stopping:
            future.set_exception(RuntimeError("the broker is shutting down"))
            return future
        with self._wakeup:
            self._queue.append((put, message, future))
            if len(self._queue) == 1:
                self._wakeup.notify()
        return future

    async def submit(self, put: _Put, message: Any) -> PutMessageResult:
        """Queue ``put(message)`` and wait for its final result (flush included)."""
        store_future = await self.append(put, message)
        if store_future.done():
            return store_future.result()
        return await asyncio.wrap_future(store_future)

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            with self._wakeup:
                while not self._queue and not self._stopping:
                    self._wakeup.wait()
                if self._stopping and not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
            done: list[
                tuple[asyncio.Future[Future[PutMessageResult]], Future[PutMessageResult] | BaseException]
            ] = []
            for put, message, future in batch:
                try:
                    done.append((future, put(message)))
                except BaseException as exc:  # a store bug must fail the send, not the thread
                    log.exception("store put failed")
                    done.append((future, exc))
            if done:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                    loop.call_soon_threadsafe(_deliver, done)

    def close(self) -> None:
        """Finish the queued puts and stop the thread (blocking; call from a thread or at exit)."""
        with self._wakeup:
            self._stopping = True
            self._wakeup.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _deliver(
    outcomes: list[tuple[asyncio.Future[Future[PutMessageResult]], Future[PutMessageResult] | BaseException]],
) -> None:
    for future, outcome in outcomes:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
