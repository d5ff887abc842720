"""``StorePutService``: where the broker's appends run, on the event loop or a writer thread.

Measured (1 KiB sends, in-process): an append is ~23 us, and the whole send path ~56 us when
the append runs on the event loop, but ~200 us when every append crosses to a thread and back
(the GIL hand-off dominates). So appends run on the loop while they are fast. Three appends
within a second that hold the loop longer than ``putOffLoopThresholdMs`` (a slow disk, a busy
page cache), or the chaos knob ``injectPutDelayMillis``, move appends to the writer thread (for
at least 10 s), so
the loop keeps answering heartbeats and pulls and the flow-control mechanisms can see the busy
put lock. An append that was slow because the process waited for a CPU (a loaded machine, seen in
the loop thread's run-queue delay, Linux ``/proc/thread-self/schedstat``) does not count: a
writer thread would not help it, and its GIL hand-offs would make every send slower. Puts queued
while the thread is busy are taken together and their results handed back in one
``call_soon_threadsafe``. The service returns to the loop only once the thread's queue is
empty, so appends never overtake each other.

Two ways in, one result shape: ``try_append(message)`` appends now, on the loop, when appends
run there (None otherwise: then ``await append(message)``, which takes whichever route is current).
Both give the store's ``PutMessageResult``, which is final unless it carries ``pending``, the
future of the final result of a put that waits for a flush or a slave; a sender that must not
hold its worker for the flush answers when ``pending`` completes, as Java's asyncSendMessage
does, and one that wants the final result awaits ``settled(result)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from finchmq.store import PutMessageResult

__all__ = ["StorePutService", "settled"]

log = logging.getLogger(__name__)

_Put = Callable[[Any], PutMessageResult]
_THREADED_AT_LEAST = 10.0  # s
_SCHEDSTAT = "/proc/thread-self/schedstat"  # Linux: ns on a CPU, ns waiting for one, time slices
_SCHEDSTAT_EVERY = 0.1  # s between two readings of the loop thread's run-queue delay


def _run_queue_delay_ns() -> int | None:
    """Nanoseconds this thread has waited for a CPU, or None where the kernel does not say."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class StorePutService:
    """Runs store appends on the loop or on ``threads`` writer threads (see the module doc)."""

    def __init__(
        self,
        put: _Put,
        name: str = "finchmq-store-put",
        *,
        threads: int = 1,
        off_loop_threshold_ms: Callable[[], int] = lambda: 50,
        force_thread: Callable[[], bool] = lambda: False,
    ) -> None:
        self._put = put
        self._name = name
        self._off_loop_threshold_ms = off_loop_threshold_ms
        self._force_thread = force_thread
        self._threaded_until = 0.0
        self._slow_appends: deque[float] = deque(maxlen=3)
        # The loop thread's run-queue delay (ns) read at ``_sched_at`` (None: not available)
        self._sched_at = 0.0
        self._sched_delay: int | None = None
        self._in_flight = 0  # threaded appends not yet handed back to the loop
        self._queue: deque[tuple[Any, asyncio.Future[PutMessageResult]]] = deque()
        self._wakeup = threading.Condition(threading.Lock())
        if threads <= 0:
            raise ValueError(f"threads must be > 0, got {threads}")
        self._thread_count = threads
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # Several threads contend for the store's put lock as Java's send threads do, so a put
        # that arrives while another holds the lock too long is answered PC_SYNCHRONIZED.
        self._threads = [
            threading.Thread(target=self._run, name=f"{self._name}-{i}", daemon=True)
            for i in range(self._thread_count)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def backlog(self) -> int:
        return len(self._queue)

    @property
    def on_loop(self) -> bool:
        """True while appends run on the event loop."""
        return (
            self._in_flight == 0
            and not self._force_thread()
            and time.monotonic() >= self._threaded_until
            and self._off_loop_threshold_ms() > 0
        )

    async def append(self, message: Any) -> PutMessageResult:
        """Append ``message`` on the loop or the writer thread, whichever appends run on now."""
        result = self.try_append(message)
        if result is not None:
            return result
        return await self._append_threaded(message)

    def try_append(self, message: Any) -> PutMessageResult | None:
        """``append`` while appends run on the loop, without a coroutine; None when they run on
        the writer thread (then ``await append(message)``)."""
        if self._in_flight:
            return None
        threshold_ms = self._off_loop_threshold_ms()
        began = time.monotonic()
        if threshold_ms <= 0 or began < self._threaded_until or self._force_thread():
            return None
        if began - self._sched_at > _SCHEDSTAT_EVERY:
            self._sched_at = began
            self._sched_delay = _run_queue_delay_ns()
        result = self._put(message)
        now = time.monotonic()
        if (now - began) * 1000 > threshold_ms:
            self._slow_append(now, (now - began) * 1000, threshold_ms)
        return result

    def _slow_append(self, now: float, held_ms: float, threshold_ms: int) -> None:
        before = self._sched_delay
        if before is not None:
            delay = _run_queue_delay_ns()
            waited_ms = (delay - before) / 1e6 if delay is not None else 0.0
            if waited_ms >= held_ms / 2:  # descheduled, not a slow disk
                log.debug("an append held the loop %.0f ms, %.0f ms waiting for a CPU", held_ms, waited_ms)
                return
        self._slow_appends.append(now)
        # One slow append may be the process losing its CPU for a moment; several within a
        # second is a slow disk or a busy page cache.
        if len(self._slow_appends) == self._slow_appends.maxlen and now - self._slow_appends[0] < 1.0:
            self._threaded_until = now + _THREADED_AT_LEAST
            self._slow_appends.clear()
            log.warning(
                "appends held the event loop for more than putOffLoopThresholdMs=%d (last %.0f ms): "
                "they move to the writer thread for at least %.0f s",
                threshold_ms,
                held_ms,
                _THREADED_AT_LEAST,
            )

    def _append_threaded(self, message: Any) -> asyncio.Future[PutMessageResult]:
        assert self._loop is not None, "put service not started"
        future: asyncio.Future[PutMessageResult] = self._loop.create_future()
        if self._stopping:
            future.set_exception(RuntimeError("the broker is shutting down"))
            return future
        self._in_flight += 1
        future.add_done_callback(self._landed)
        with self._wakeup:
            self._queue.append((message, future))
            if len(self._queue) == 1:
                self._wakeup.notify()
        return future

    def _landed(self, _: asyncio.Future[PutMessageResult]) -> None:
        self._in_flight -= 1

    def _run(self) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            with self._wakeup:
                while not self._queue and not self._stopping:
                    self._wakeup.wait()
                if self._stopping and not self._queue:
                    return
                take = max(1, len(self._queue) // self._thread_count)
                batch = [self._queue.popleft() for _ in range(take)]
                if self._queue:
                    self._wakeup.notify()
            done: list[tuple[asyncio.Future[PutMessageResult], PutMessageResult | BaseException]] = []
            put = self._put
            for message, future in batch:
                try:
                    done.append((future, put(message)))
                except BaseException as exc:  # a store bug must fail the send, not the thread
                    log.exception("store put failed")
                    done.append((future, exc))
            if done:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                    loop.call_soon_threadsafe(_deliver, done)

    def close(self) -> None:
        """Finish the queued puts and stop the threads (blocking; call from a thread or at exit)."""
        with self._wakeup:
            self._stopping = True
            self._wakeup.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads = []


async def settled(result: PutMessageResult) -> PutMessageResult:
    """The final result of a put: ``result`` itself, or what its ``pending`` completes with."""
    if result.pending is None:
        return result
    return await asyncio.wrap_future(result.pending)


def _deliver(
    outcomes: list[tuple[asyncio.Future[PutMessageResult], PutMessageResult | BaseException]],
) -> None:
    for future, outcome in outcomes:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
