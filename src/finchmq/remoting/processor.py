"""The dispatcher and the bounded executors that run requests (Java ``NettyRemotingAbstract``'s
``processorTable`` + each processor's ``ExecutorService``).

Strategy:
    A request is routed by code to a ``(processor, executor)`` pair, registered from the
    processor's ``@handles`` table (``routing.py``). Before anything runs, the processor may
    refuse all work (``reject_request()`` → SYSTEM_BUSY ``[REJECTREQUEST]``) and the dispatcher's
    ``before_request`` hook (Java ``RPCHook.doBeforeRequest``, e.g. the broker's ACL check) may
    refuse the request (``RequestRefused``). The executor is a bounded FIFO of ``QueuedRequest``
    (each stamped with its creation time) drained by a fixed number of worker coroutines, the
    analogue of a thread pool; a full queue answers SYSTEM_BUSY ``[OVERLOAD]`` (nothing for
    oneway requests). The queue is exposed oldest-first so the broker's fast-failure service can
    answer requests that waited too long. An executor built with ``pause_reading_ms`` also pauses
    the channel it just refused, until its queue is half empty again (at most that long):
    decoding and refusing a flood of requests would otherwise take the CPU the accepted ones need.

    A request that a worker would take at once (its executor's queue is empty) is processed on
    the loop instead (``RequestExecutor.run_now``): the processor's ``process`` answers it there,
    or gives back ``Later``, the rest of it, which is queued for a worker. That skips the queue,
    the worker hand-off and a coroutine for every request that needs no waiting: on the broker's
    send path, 56 µs per 1 KiB send when the append runs on the loop against ~200 µs through a
    worker hand-off to a writer thread (``broker/put_service.py``), and ~4 µs less than through
    a worker coroutine on the loop. A channel is anything that implements ``Channel``: a TCP
    connection, or an in-process channel (``local.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import cast

from finchmq.common.logs import RateLimitedLog
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.command import FLAG_ONEWAY as _FLAG_ONEWAY
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.errors import ProtocolError

from .channel import Channel, RemotingContext
from .errors import RemotingError, RemotingSendRequestError
from .routing import ExecutorName, Later, RequestProcessor, RequestRefused

__all__ = [
    "REMARK_OVERLOAD",
    "REMARK_REJECT_REQUEST",
    "QueuedRequest",
    "RequestDispatcher",
    "RequestExecutor",
]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # per-request failures (a full disk): a few lines, with counts

_MAX_RUN_WITHOUT_YIELD = 0.002  # s a worker may go on taking queued requests without yielding
# The drain estimate (RequestExecutor): busy intervals needed before it may refuse a request, how
# long it stays valid without a new one, and below which it is forgotten (it shrinks by 0.8 each
# time the queue keeps up; without a floor it would reach 0.0 and the next interval, however
# unusual, would become the whole estimate again).
_MIN_SAMPLES = 3
_ESTIMATE_TTL = 1.0  # s
_FORGOTTEN = 1e-6  # s
# The share of shed_after_ms the oldest queued request must have waited before a new one may be
# refused at arrival: the backlog has lasted, it is not a burst read at once (RequestExecutor).
_SUSTAINED = 0.5

# Java NettyRemotingAbstract.processRequestCommand
REMARK_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
REMARK_REJECT_REQUEST = "[REJECTREQUEST]system busy, start flow control for a while"


class QueuedRequest:
    """A request waiting in an executor, with the monotonic time it arrived.

    ``later`` is the rest of a request its processor began on the loop (``Later``); None for a
    request not begun, which the worker hands to ``processor.process``. ``done`` is set once it
    is taken by a worker or answered early (e.g. by fast failure). ``held_since`` is, for a
    long-polling request run again after being held, the monotonic time it first arrived (0
    otherwise); metrics measure its latency from then.
    """

    __slots__ = ("created_at", "ctx", "done", "held_since", "later", "processor", "request")

    def __init__(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        processor: RequestProcessor,
        created_at: float,
        held_since: float = 0.0,
        later: Later | None = None,
    ) -> None:
        self.ctx = ctx
        self.request = request
        self.processor = processor
        self.created_at = created_at
        self.held_since = held_since
        self.later = later
        self.done = False

    def answer(self, code: ResponseCode, remark: str) -> None:
        """Answer now (unless oneway or the client has gone) and mark the request so no worker
        runs it. A client that left gets no answer; that is not an error (Java's write to a closed
        channel fails quietly)."""
        self.done = True
        if self.request.is_oneway or not self.ctx.channel.is_open:
            return
        try:
            self.ctx.write_response(self.request.make_response(code, remark))
        except RemotingError as exc:  # closed between the check and the write
            log.debug("early answer to %s dropped: %s", self.ctx.remote_addr, exc)


class RequestExecutor:
    """A bounded queue drained by ``workers`` coroutines (a thread pool's asyncio analogue).

    ``shed_after_ms`` (optional) also refuses a new request at arrival (OVERLOAD) under a
    sustained backlog, when it would wait longer than that. Such a request would only be
    answered busy later (Java's fast failure: TIMEOUT_CLEAN_QUEUE once it has waited that long),
    after costing memory and a scan. Both must hold:

    - the queue is longer than the executor drains in ``shed_after_ms`` (the drain estimate: a
      moving average of the interval between two requests taken while busy, which counts
      everything else the event loop does); and
    - the oldest queued request has already waited ``_SUSTAINED`` of ``shed_after_ms``: the
      backlog has lasted. A burst read at once (a producer's first sends to a new topic queued
      behind its check, the requests a stalled process finds in its sockets) is young however
      long it is, and the estimate behind it may be young too.

    Without a drain estimate nothing is refused at arrival: a request that waits too long is
    answered by fast failure, Java's rule. A whole-process stall (a GC pause, SIGSTOP, the
    machine busy) is not overload: the oldest request's wait spans it, but the estimate does
    not (an interval spanning it moves the average by 15 % at most) and no estimate appears from
    it, so once the queue has caught up nothing more is refused. The estimate is used only once
    ``_MIN_SAMPLES`` intervals back it (it starts from their median), it shrinks whenever the
    queue keeps up (a request taken or answered by ``run_now`` with nothing waiting) and is
    dropped once it has shrunk to nothing, and it expires ``_ESTIMATE_TTL`` s after its last
    busy interval. Under sustained overload shedding keeps the queue about ``shed_after_ms``
    deep, so its oldest request has waited about that long and both conditions hold.

    ``pause_reading_ms`` (optional; 0 turns it off at run time) makes a refusal also pause the
    refused channel's requests until the queue holds at most half its capacity and, with
    ``shed_after_ms``, its oldest request waited less than half that; or for that many ms at most.

    ``on_done`` (optional, e.g. metrics) is called after a worker answered a request, with the
    request, its response (None for oneway) and Java's result label: ``success``, ``oneway``
    or ``write_channel_failed``. A request whose answer comes later (None returned for a
    two-way request) is not reported here; whoever answers it may report it.
    """

    def __init__(
        self,
        name: ExecutorName,
        *,
        workers: int,
        capacity: int,
        shed_after_ms: Callable[[], int] | None = None,
        pause_reading_ms: Callable[[], int] | None = None,
    ) -> None:
        if workers <= 0:
            raise ValueError(f"executor {name}: workers must be > 0, got {workers}")
        if capacity <= 0:
            raise ValueError(f"executor {name}: capacity must be > 0, got {capacity}")
        self.name = name
        self.workers = workers
        self.capacity = capacity
        self.shed_after_ms = shed_after_ms
        self.pause_reading_ms = pause_reading_ms
        self._paused: dict[Channel, asyncio.TimerHandle] = {}
        self._take_interval = 0.0  # s between two requests taken while busy (moving average)
        self._first_samples: list[float] = []  # the first busy intervals, until _MIN_SAMPLES
        self._sampled_at = 0.0  # monotonic time of the last busy interval
        self._last_take = 0.0
        self._busy = False  # requests were waiting when the last one was taken
        self._queue: deque[QueuedRequest] = deque()
        self._idle_waiters: deque[asyncio.Future[None]] = deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self.on_done: Callable[[QueuedRequest, RemotingCommand | None, str], None] | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def __bool__(self) -> bool:  # an executor with an empty queue is still an executor
        return True

    def start(self) -> None:
        if self._tasks or self._closed:
            return
        self._tasks = [
            asyncio.get_running_loop().create_task(self._work(), name=f"finchmq-{self.name}-{i}")
            for i in range(self.workers)
        ]

    def submit(self, item: QueuedRequest) -> bool:
        """Queue ``item``; False when the queue is full (the caller answers OVERLOAD)."""
        queue = self._queue
        if len(queue) >= self.capacity or self._closed:
            return False
        shed_after_ms = self.shed_after_ms
        if shed_after_ms is not None and queue and self._sheds(item.created_at, shed_after_ms()):
            return False
        self._enqueue(item)
        return True

    def _enqueue(self, item: QueuedRequest) -> None:
        self._queue.append(item)
        waiters = self._idle_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    def oldest(self) -> QueuedRequest | None:
        """The request that has waited longest, without removing it."""
        queue = self._queue
        while queue and queue[0].done:
            queue.popleft()
        return queue[0] if queue else None

    def poll_oldest(self) -> QueuedRequest | None:
        """Remove and return the request that has waited longest."""
        queue = self._queue
        while queue:
            item = queue.popleft()
            if not item.done:
                return item
        return None

    def pending(self) -> Iterator[QueuedRequest]:
        """The queued requests, oldest first."""
        return (item for item in self._queue if not item.done)

    @property
    def paused_channels(self) -> int:
        """How many channels this executor holds paused now."""
        return len(self._paused)

    def pause_sender(self, channel: Channel) -> None:
        """Pause ``channel``'s requests after a refusal, until this queue has room again."""
        if self.pause_reading_ms is None or channel in self._paused or self._closed:
            return
        limit_ms = self.pause_reading_ms()
        if limit_ms <= 0:
            return
        channel.pause_requests()
        self._paused[channel] = asyncio.get_running_loop().call_later(limit_ms / 1000, self._resume, channel)

    def _resume(self, channel: Channel) -> None:
        handle = self._paused.pop(channel, None)
        if handle is not None:
            handle.cancel()
        channel.resume_requests()

    def _resume_all(self) -> None:
        for channel in list(self._paused):
            self._resume(channel)

    def _has_room(self) -> bool:
        if len(self._queue) > self.capacity // 2:
            return False
        return (
            self.shed_after_ms is None or self._expected_wait_ms(time.monotonic()) <= self.shed_after_ms() / 2
        )

    def _drain_interval(self, now: float) -> float:
        """The drain estimate (s per request taken while busy) if current at ``now``, else 0.0."""
        interval = self._take_interval
        return interval if interval and now - self._sampled_at <= _ESTIMATE_TTL else 0.0

    def _sheds(self, now: float, limit_ms: float) -> bool:
        """Whether a request arriving at ``now`` is refused at once (see the class doc)."""
        interval = self._drain_interval(now)
        if not interval or len(self._queue) * interval * 1000 <= limit_ms:
            return False
        oldest = self.oldest()
        return oldest is not None and (now - oldest.created_at) * 1000 >= limit_ms * _SUSTAINED

    def _expected_wait_ms(self, now: float) -> float:
        """How long a request arriving at ``now`` would wait: as long as the queue takes to drain
        while that is known, else as long as the oldest one has waited."""
        interval = self._drain_interval(now)
        if interval:
            # The oldest's wait may span a moment the loop stood still, which is over now.
            return len(self._queue) * interval * 1000
        oldest = self.oldest()
        return (now - oldest.created_at) * 1000 if oldest is not None else 0.0

    def _measure_take(self, now: float, more_waiting: bool) -> None:
        if self._busy:
            sample = now - self._last_take
            self._sampled_at = now
            average = self._take_interval
            if average:
                # One outlier (a new segment, the process descheduled) moves the average only a little.
                self._take_interval = average + (min(sample, 4 * average) - average) * 0.05
            else:
                first = self._first_samples
                first.append(sample)
                if len(first) == _MIN_SAMPLES:  # the median: an outlier among them does not count
                    self._take_interval = sorted(first)[_MIN_SAMPLES // 2]
                    first.clear()
        else:
            self._kept_up()
        self._last_take = now
        self._busy = more_waiting

    def _kept_up(self) -> None:
        """A request was taken (or answered at once) with none waiting: shrink the estimate."""
        self._first_samples.clear()
        average = self._take_interval * 0.8
        self._take_interval = average if average > _FORGOTTEN else 0.0

    async def _work(self) -> None:
        queue = self._queue
        loop = asyncio.get_running_loop()
        monotonic = time.monotonic
        yielded_at = monotonic()
        while True:
            if self._paused and self._has_room():
                self._resume_all()
            if not queue:
                self._busy = False  # what waited was taken or cleaned: no busy interval spans the idle time
                waiter: asyncio.Future[None] = loop.create_future()
                self._idle_waiters.append(waiter)
                await waiter
                yielded_at = monotonic()
                continue
            if monotonic() - yielded_at > _MAX_RUN_WITHOUT_YIELD:
                # Requests that finish without awaiting would otherwise keep the loop to
                # themselves: let I/O, other executors and the fast-failure scan run.
                await asyncio.sleep(0)
                yielded_at = monotonic()
                continue
            item = queue.popleft()
            if item.done:
                continue
            item.done = True
            if self.shed_after_ms is not None:
                self._measure_take(monotonic(), bool(queue))
            request = item.request
            try:
                later = item.later
                if later is None:
                    answer = item.processor.process(item.ctx, request)
                    response = await answer.resume() if isinstance(answer, Later) else answer
                else:
                    response = await later.resume()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                response = _error_response(item.ctx, request, exc)
            result = _answer(item.ctx, request, response)
            on_done = self.on_done
            if on_done is not None and (response is not None or request.is_oneway):
                on_done(item, response, result)

    def run_now(self, processor: RequestProcessor, ctx: RemotingContext, request: RemotingCommand) -> bool:
        """Process ``request`` on the loop if a worker would take it at once (the queue is empty):
        answer it, or queue the ``Later`` its processor gave back. False when the queue is not
        empty (the caller queues the request)."""
        if self._queue or self._closed:
            return False
        on_done = self.on_done
        began = time.monotonic() if on_done is not None else 0.0
        try:
            answer = processor.process(ctx, request)
        except BaseException as exc:
            answer = _error_response(ctx, request, exc)
        if type(answer) is Later:
            self._enqueue(QueuedRequest(ctx, request, processor, began or time.monotonic(), later=answer))
            return True
        response = cast("RemotingCommand | None", answer)
        if self._take_interval:  # answered with none waiting: the queue keeps up
            self._kept_up()
        result = _answer(ctx, request, response)
        if on_done is not None and (response is not None or request.is_oneway):
            on_done(QueuedRequest(ctx, request, processor, began), response, result)
        return True

    async def close(self) -> None:
        self._closed = True
        self._resume_all()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._queue.clear()


def _answer(ctx: RemotingContext, request: RemotingCommand, response: RemotingCommand | None) -> str:
    """Write ``response`` (unless None or the request is oneway); Java's result label."""
    if response is None or request.flag & _FLAG_ONEWAY:
        return "oneway"
    try:
        ctx.channel.send_command(response)  # ctx.write_response, one call less
    except RemotingSendRequestError as exc:  # the client left before its answer
        log.debug("cannot answer code=%d to %s: %s", request.code, ctx.remote_addr, exc)
        return "write_channel_failed"
    except Exception:
        log.exception("cannot answer code=%d to %s", request.code, ctx.remote_addr)
        return "write_channel_failed"
    return "success"


def _error_response(ctx: RemotingContext, request: RemotingCommand, exc: BaseException) -> RemotingCommand:
    if isinstance(exc, ProtocolError):
        return request.make_response(exc.response_code, str(exc))
    if not isinstance(exc, Exception):
        raise exc
    limited.log(
        logging.ERROR,
        f"code-{request.code}",
        "process request code=%d from %s failed",
        request.code,
        ctx.remote_addr,
        exc_info=exc,
    )
    return request.make_response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


class RequestDispatcher:
    """The processor table of a server or client: code -> (processor, executor)."""

    def __init__(self) -> None:
        self._routes: dict[int, tuple[RequestProcessor, RequestExecutor]] = {}
        self._default: tuple[RequestProcessor, RequestExecutor] | None = None
        self._executors: dict[ExecutorName, RequestExecutor] = {}
        self.on_overload: Callable[[RequestExecutor, RemotingCommand], None] | None = None
        self.on_reject: Callable[[RemotingCommand], None] | None = None
        # Called with (remote address, request) before a request runs; may raise RequestRefused.
        self.before_request: Callable[[str, RemotingCommand], None] | None = None

    def register_processor(
        self,
        processor: RequestProcessor,
        executors: Mapping[ExecutorName, RequestExecutor],
        *,
        skip: Collection[ExecutorName] = (),
    ) -> None:
        """Route every code of ``processor``'s ``@handles`` table to it, run by the executor the
        table names (``executors``: by name; shared between processors as Java's pools are),
        except the codes of executors in ``skip`` (the broker's VIP channel has no pull)."""
        routes: dict[int, RequestExecutor] = {}
        for code, name in processor.executors_by_code().items():
            if name in skip:
                continue
            executor = executors.get(name)
            if executor is None:
                raise ValueError(f"{type(processor).__name__} runs code {code} on {name}, which is not given")
            if executor.name != name:
                raise ValueError(f"the executor given as {name} is named {executor.name}")
            if code in self._routes:
                raise ValueError(
                    f"request code {code} is registered to both {type(self._routes[code][0]).__name__} "
                    f"and {type(processor).__name__}"
                )
            known = self._executors.get(name)
            if known is not None and known is not executor:
                raise ValueError(f"two executors named {name}")
            routes[code] = executor
        for code, executor in routes.items():  # all or nothing
            self._executors[executor.name] = executor
            self._routes[code] = (processor, executor)

    def register_default(self, processor: RequestProcessor, executor: RequestExecutor) -> None:
        """Handle every code without a registered processor."""
        self._add_executor(executor)
        self._default = (processor, executor)

    def _add_executor(self, executor: RequestExecutor) -> None:
        known = self._executors.setdefault(executor.name, executor)
        if known is not executor:
            raise ValueError(f"two executors named {executor.name}")

    @property
    def executors(self) -> dict[ExecutorName, RequestExecutor]:
        return self._executors

    @property
    def codes(self) -> frozenset[int]:
        """The request codes with a registered processor."""
        return frozenset(self._routes)

    def start(self) -> None:
        for executor in self._executors.values():
            executor.start()

    async def close(self) -> None:
        for executor in self._executors.values():
            await executor.close()

    def dispatch(self, ctx: RemotingContext, request: RemotingCommand) -> None:
        """Run ``request`` now, queue it, or answer it at once (unsupported, rejected, refused,
        overloaded). Whatever the channel: a socket's frames and in-process requests alike."""
        route = self._routes.get(request.code)
        if route is None:
            route = self._default
            if route is None:
                if not request.is_oneway:
                    ctx.write_response(RequestProcessor.not_supported(request))
                return
        processor, executor = route
        if processor.reject_request():
            if self.on_reject is not None:
                self.on_reject(request)
            if not request.is_oneway:
                ctx.write_response(request.make_response(ResponseCode.SYSTEM_BUSY, REMARK_REJECT_REQUEST))
            return
        if self.before_request is not None and not ctx.trusted and not self._run_before_request(ctx, request):
            return
        if executor.run_now(processor, ctx, request):
            return
        if not executor.submit(QueuedRequest(ctx, request, processor, time.monotonic())):
            if self.on_overload is not None:
                self.on_overload(executor, request)
            if not request.is_oneway:
                ctx.write_response(request.make_response(ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD))
            executor.pause_sender(ctx.channel)

    def _run_before_request(self, ctx: RemotingContext, request: RemotingCommand) -> bool:
        """Run the hook; False when it refused the request (then it has been answered)."""
        assert self.before_request is not None
        try:
            self.before_request(ctx.remote_addr, request)
            return True
        except RequestRefused as exc:
            code, remark = exc.response_code, exc.remark
        except Exception as exc:  # a bug in the hook: answer, keep the channel
            limited.log(
                logging.ERROR, "before-request", "request hook failed on code=%d", request.code, exc_info=exc
            )
            code, remark = ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
        if not request.is_oneway:
            ctx.write_response(request.make_response(code, remark))
        return False
