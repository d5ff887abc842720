"""The dispatcher and its executors (``processor.py``): what runs on the loop and what queues,
refusals (reject_request, the before_request hook, a full queue), pausing a refused channel,
shedding requests that would wait too long, and the drain estimate behind it.

The unit tests drive a ``RequestDispatcher`` with a ``RecordingChannel``: with the executors not
started, whatever is answered was answered on the loop, inside ``dispatch``. The others run
through a server on loopback sockets.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

import finchmq.remoting.processor
from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.protocol.codec import decode_frame, encode_command
from finchmq.remoting import (
    REMARK_OVERLOAD,
    REMARK_REJECT_REQUEST,
    Answer,
    ExecutorName,
    QueuedRequest,
    RemotingClient,
    RemotingContext,
    RemotingServer,
    RequestDispatcher,
    RequestExecutor,
    RequestProcessor,
    RequestRefused,
    handles,
)
from tests.remoting.conftest import (
    ECHO,
    FAIL,
    NEVER,
    QUEUED,
    SLOW,
    STALL,
    Echo,
    EchoNow,
    RecordingChannel,
    addr,
    by_name,
    server_config,
    settle,
)
from tests.waiting import DEFAULT_TIMEOUT, eventually

BOOM = 9101


def request(code: int, opaque: int, **ext_fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, ext_fields).with_opaque(opaque)


def oneway(code: int, opaque: int) -> RemotingCommand:
    return RemotingCommand.request(code).with_opaque(opaque, oneway=True)


class Steps(EchoNow):
    """EchoNow, plus BOOM, whose plain part raises."""

    @handles(BOOM)
    def boom(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request)
        raise ValueError("plain part exploded")


def dispatcher_of(
    processor: RequestProcessor, executor: RequestExecutor
) -> tuple[RequestDispatcher, RecordingChannel, RemotingContext]:
    dispatcher = RequestDispatcher()
    dispatcher.register_processor(processor, by_name(executor))
    channel = RecordingChannel()
    return dispatcher, channel, RemotingContext(channel)


# -- what runs on the loop, what queues --------------------------------------------------------


async def test_an_idle_executor_s_requests_are_answered_on_the_loop_and_only_later_parts_queue() -> None:
    steps = Steps()
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher, channel, ctx = dispatcher_of(steps, executor)  # not started: no worker runs
    try:
        dispatcher.dispatch(ctx, request(ECHO, 1))
        assert [r.opaque for r in channel.sent] == [1]  # answered inside dispatch
        dispatcher.dispatch(ctx, request(QUEUED, 2))  # its plain part ran, the rest waits for a worker
        assert [r.opaque for r in steps.seen] == [1, 2] and len(executor) == 1
        assert [r.opaque for r in channel.sent] == [1]
        # The queue is not empty: the next request waits its turn behind it, not begun
        dispatcher.dispatch(ctx, request(ECHO, 3))
        assert [r.opaque for r in steps.seen] == [1, 2] and len(executor) == 2
        dispatcher.start()
        await eventually(lambda: len(channel.sent) == 3, what="the workers answering the queue")
        assert [r.opaque for r in channel.sent] == [1, 2, 3]  # in order
        assert [r.opaque for r in steps.seen] == [1, 2, 3]  # each request begun once
        assert {r.code for r in channel.sent} == {ResponseCode.SUCCESS}
        # Idle again: answered on the loop once more
        dispatcher.dispatch(ctx, request(ECHO, 4))
        assert channel.sent[-1].opaque == 4
    finally:
        await dispatcher.close()


async def test_a_coroutine_handler_always_runs_on_a_worker() -> None:
    echo = Echo()
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher, channel, ctx = dispatcher_of(echo, executor)
    try:
        dispatcher.dispatch(ctx, request(ECHO, 1))
        assert channel.sent == [] and echo.seen == [] and len(executor) == 1
        dispatcher.start()
        await eventually(lambda: channel.sent, what="the worker answering")
        assert channel.sent[0].opaque == 1 and channel.sent[0].code == ResponseCode.SUCCESS
    finally:
        await dispatcher.close()


async def test_a_failing_handler_is_answered_system_error_on_the_loop_and_on_a_worker() -> None:
    steps = Steps()
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher, channel, ctx = dispatcher_of(steps, executor)
    try:
        dispatcher.dispatch(ctx, request(BOOM, 1))
        assert [(r.opaque, r.code, r.remark) for r in channel.sent] == [
            (1, ResponseCode.SYSTEM_ERROR, "ValueError: plain part exploded")
        ]
        dispatcher.start()
        dispatcher.dispatch(ctx, request(FAIL, 2))  # a coroutine handler: raised on the worker
        await eventually(lambda: len(channel.sent) == 2, what="the worker answering the failure")
        assert (channel.sent[1].code, channel.sent[1].remark) == (
            ResponseCode.SYSTEM_ERROR,
            "ValueError: processor exploded",
        )
        dispatcher.dispatch(ctx, request(ECHO, 3))  # the worker survived it
        await eventually(lambda: len(channel.sent) == 3, what="the next request answered")
        assert channel.sent[2].code == ResponseCode.SUCCESS
    finally:
        await dispatcher.close()


async def test_on_done_reports_requests_answered_on_the_loop_and_by_workers() -> None:
    steps = Steps()
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher, channel, ctx = dispatcher_of(steps, executor)
    done: list[tuple[int, int | None, str]] = []
    executor.on_done = lambda item, response, result: done.append(
        (item.request.opaque, None if response is None else response.code, result)
    )
    dispatcher.start()
    try:
        dispatcher.dispatch(ctx, request(ECHO, 1))  # on the loop
        dispatcher.dispatch(ctx, oneway(ECHO, 2))  # on the loop, not answered
        dispatcher.dispatch(ctx, request(QUEUED, 3))  # finished by the worker
        dispatcher.dispatch(ctx, request(NEVER, 4))  # two-way, answered by nobody: not reported
        dispatcher.dispatch(ctx, request(ECHO, 5))  # behind them in the queue
        await eventually(lambda: len(done) == 4, what="the worker's answers reported")
        channel.close()  # the peer left: its answer cannot be written
        dispatcher.dispatch(ctx, request(ECHO, 6))
        await eventually(lambda: len(done) == 5, what="the failed write reported")
    finally:
        await dispatcher.close()
    ok = ResponseCode.SUCCESS
    assert done == [
        (1, ok, "success"),
        (2, ok, "oneway"),
        (3, ok, "success"),
        (5, ok, "success"),
        (6, ok, "write_channel_failed"),
    ]
    assert [r.opaque for r in channel.sent] == [1, 3, 5]


# -- refusals ------------------------------------------------------------------------------------


async def test_before_request_refuses_requests_before_they_run() -> None:
    steps = Steps()
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher, channel, ctx = dispatcher_of(steps, executor)
    asked: list[tuple[str, int]] = []

    def hook(remote_addr: str, request: RemotingCommand) -> None:
        asked.append((remote_addr, request.opaque))
        if "deny" in request.ext_fields:
            raise RequestRefused("no permission for you", ResponseCode.NO_PERMISSION)
        if "refuse" in request.ext_fields:
            raise RequestRefused("refused")
        if "bug" in request.ext_fields:
            raise KeyError("oops")

    dispatcher.before_request = hook
    dispatcher.dispatch(ctx, request(ECHO, 1, deny=""))
    dispatcher.dispatch(ctx, request(ECHO, 2, refuse=""))
    dispatcher.dispatch(ctx, request(ECHO, 3, bug=""))
    dispatcher.dispatch(ctx, RemotingCommand.request(ECHO, {"deny": ""}).with_opaque(4, oneway=True))
    dispatcher.dispatch(ctx, request(ECHO, 5))
    assert asked == [(channel.remote_addr, opaque) for opaque in (1, 2, 3, 4, 5)]
    assert [(r.opaque, r.code, r.remark) for r in channel.sent] == [
        (1, ResponseCode.NO_PERMISSION, "no permission for you"),
        (2, ResponseCode.SYSTEM_ERROR, "refused"),
        (3, ResponseCode.SYSTEM_ERROR, "KeyError: 'oops'"),
        # a refused oneway request gets nothing
        (5, ResponseCode.SUCCESS, None),
    ]
    assert [r.opaque for r in steps.seen] == [5]  # refused requests never reached the processor
    # reject_request comes first: a rejected request is not even shown to the hook
    rejected: list[int] = []
    dispatcher.on_reject = lambda request: rejected.append(request.opaque)
    steps.rejecting = True
    dispatcher.dispatch(ctx, request(ECHO, 6))
    assert (channel.sent[-1].opaque, channel.sent[-1].code, channel.sent[-1].remark) == (
        6,
        ResponseCode.SYSTEM_BUSY,
        REMARK_REJECT_REQUEST,
    )
    assert rejected == [6] and asked[-1][1] == 5
    await dispatcher.close()


async def test_reject_request_answers_system_busy(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, echo = echo_server
    echo.rejecting = True
    async with RemotingClient() as client:
        response = await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
        assert (response.code, response.remark) == (ResponseCode.SYSTEM_BUSY, REMARK_REJECT_REQUEST)
        echo.rejecting = False
        assert (
            await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
        ).code == ResponseCode.SUCCESS
    assert len(echo.seen) == 1  # the rejected request never reached the processor


async def test_unknown_code_and_processor_failure(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, _ = echo_server
    async with RemotingClient() as client:
        unknown = await client.invoke(addr(server), RemotingCommand.request(777), 3000)
        failed = await client.invoke(addr(server), RemotingCommand.request(FAIL), 3000)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert unknown.remark == " request type 777 not supported"
    assert failed.code == ResponseCode.SYSTEM_ERROR and failed.remark == "ValueError: processor exploded"


async def test_full_queue_answers_overload_and_oneway_gets_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="finchmq.remoting.connection")
    echo = Echo()
    server = RemotingServer(server_config())
    server.register_processor(echo, by_name(RequestExecutor(ExecutorName.SEND, workers=1, capacity=2)))
    await server.start()
    held = RemotingCommand.request(SLOW, {"hold": "", "sleep": "0"})
    calls: list[asyncio.Future[RemotingCommand]] = []
    try:
        async with RemotingClient() as client:
            calls.append(asyncio.ensure_future(client.invoke(addr(server), held, 60_000)))
            await eventually(lambda: echo.seen, what="the worker holding the first request")
            # One runs (held until the test lets it go), two wait in the queue, the other three
            # are refused at once.
            calls += [asyncio.ensure_future(client.invoke(addr(server), held, 60_000)) for _ in range(5)]
            busy = await eventually(
                lambda: len(done := [c.result() for c in calls if c.done()]) >= 3 and done,
                what="the requests past the full queue refused",
            )
            assert {(r.code, r.remark) for r in busy} == {(ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)}
            # Oneway requests over capacity are dropped silently: nothing comes back for them.
            for _ in range(5):
                await client.invoke_oneway(addr(server), held, 3000)
            # A request sent after them is refused too (the queue is still full): they were refused
            # before it, and an answer to them would have come before its answer.
            after = await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
            assert (after.code, after.remark) == (ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)
            assert "unknown opaque" not in caplog.text
            echo.gate.set()
            responses = await asyncio.gather(*calls)
            assert [r.code for r in responses].count(ResponseCode.SUCCESS) == 3
            assert [r.code for r in echo.seen] == [SLOW] * 3  # the oneways never reached the processor
    finally:
        await settle(calls)
        await server.close()


# -- pausing a refused channel -----------------------------------------------------------------


async def test_a_refused_channel_is_paused_until_a_worker_made_room() -> None:
    echo = Echo()
    # the pause's upper bound out of reach: the channel waits for room, however long
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=1, pause_reading_ms=lambda: 60_000)
    dispatcher, channel, ctx = dispatcher_of(echo, executor)
    overloaded: list[tuple[ExecutorName, int]] = []
    dispatcher.on_overload = lambda executor, request: overloaded.append((executor.name, request.opaque))
    try:
        dispatcher.dispatch(ctx, request(SLOW, 1, hold="", sleep="0"))  # queued: no worker yet
        dispatcher.dispatch(ctx, request(ECHO, 2))  # the queue is full
        assert [(r.opaque, r.code, r.remark) for r in channel.sent] == [
            (2, ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)
        ]
        assert overloaded == [(ExecutorName.SEND, 2)]
        assert channel.paused and executor.paused_channels == 1
        dispatcher.start()
        await eventually(lambda: echo.seen, what="the worker taking the held request")
        # The worker holds it: the queue is empty, but nobody looked; the channel stays paused
        # until the worker is free to take another request.
        assert channel.paused and executor.paused_channels == 1
        echo.gate.set()
        await eventually(lambda: not channel.paused, what="the channel resumed by the worker")
        assert executor.paused_channels == 0
    finally:
        await dispatcher.close()


async def test_a_pause_lasts_pause_reading_ms_at_most_and_none_when_it_is_0() -> None:
    echo = Echo()
    limit_ms = [20]
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=1, pause_reading_ms=lambda: limit_ms[0])
    dispatcher, channel, ctx = dispatcher_of(echo, executor)  # never started: the queue stays full
    dispatcher.dispatch(ctx, request(ECHO, 1))
    dispatcher.dispatch(ctx, request(ECHO, 2))
    assert channel.paused and channel.sent[-1].remark == REMARK_OVERLOAD
    await eventually(lambda: not channel.paused, what="the pause's limit reached")
    assert executor.paused_channels == 0 and len(executor) == 1
    limit_ms[0] = 0  # turned off at run time
    dispatcher.dispatch(ctx, request(ECHO, 3))
    assert channel.sent[-1].remark == REMARK_OVERLOAD and not channel.paused
    assert executor.paused_channels == 0
    # closing the executor lets a paused channel go
    limit_ms[0] = 60_000
    dispatcher.dispatch(ctx, request(ECHO, 4))
    assert channel.paused
    await dispatcher.close()
    assert not channel.paused and executor.paused_channels == 0


class SplitEcho(Echo):
    """Echo whose SLOW runs on its own executor (PULL), apart from its other codes (SEND)."""

    @handles(SLOW, executor=ExecutorName.PULL)
    async def slow(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return await super().slow(ctx, request)


async def test_a_refused_connection_is_paused_until_the_queue_has_room() -> None:
    echo = SplitEcho()
    server = RemotingServer(server_config())
    # the pause's upper bound out of reach: the connection waits for room, however long
    executor = RequestExecutor(ExecutorName.PULL, workers=1, capacity=2, pause_reading_ms=lambda: 60_000)
    server.register_processor(
        echo, by_name(executor, RequestExecutor(ExecutorName.SEND, workers=1, capacity=10))
    )
    await server.start()
    calls: list[asyncio.Future[RemotingCommand]] = []
    try:
        async with RemotingClient() as flooder, RemotingClient() as other:
            first = RemotingCommand.request(SLOW, {"hold": "", "sleep": "0.05"})  # held until we let go
            slow = RemotingCommand.request(SLOW, {"sleep": "0.05"})
            calls.append(asyncio.ensure_future(flooder.invoke(addr(server), first, 60_000)))
            await eventually(lambda: echo.seen, what="the worker holding the first request")
            calls += [asyncio.ensure_future(flooder.invoke(addr(server), slow, 60_000)) for _ in range(11)]
            # The flood's first refusal paused its connection: the rest waits undecoded...
            await eventually(lambda: executor.paused_channels == 1, what="the flood's connection paused")
            # ...while other connections are served (the flood still paused: its queue cannot drain).
            answer = await other.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
            assert answer.code == ResponseCode.SUCCESS
            assert executor.paused_channels == 1
            echo.gate.set()
            responses = await asyncio.gather(*calls)
    finally:
        await settle(calls)
        await server.close()
    busy = [r for r in responses if r.code == ResponseCode.SYSTEM_BUSY]
    # Without the pause: one runs, two wait, nine are refused. With it, the connection is read
    # again whenever the queue is half empty: two admitted for each refusal.
    assert len(responses) == 12 and 1 <= len(busy) <= 5, [r.code for r in responses]
    assert {r.remark for r in busy} == {REMARK_OVERLOAD}
    assert executor.paused_channels == 0


# -- shedding and the drain estimate -----------------------------------------------------------


async def shedding_server(
    processor: Echo, shed_after_ms: Callable[[], int] = lambda: 100
) -> tuple[RemotingServer, RequestExecutor]:
    server = RemotingServer(server_config())
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=1000, shed_after_ms=shed_after_ms)
    server.register_processor(processor, by_name(executor))
    await server.start()
    return server, executor


def learn(executor: RequestExecutor, at: float, *intervals: float) -> float:
    """Give ``executor`` the intervals (s) between requests taken while busy, from ``at``, as
    its workers would measure them; the time of the last take."""
    executor._measure_take(at, more_waiting=True)
    for interval in intervals:
        at += interval
        executor._measure_take(at, more_waiting=True)
    return at


def test_executor_sheds_new_requests_only_while_a_backlog_lasts() -> None:
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=100, shed_after_ms=lambda: 50)
    ctx = RemotingContext(RecordingChannel())  # never started: nothing is taken but by the test
    request = RemotingCommand.request(ECHO)
    processor = Echo()
    t = learn(executor, 100.0, 0.010, 0.010, 0.010)  # it drains a request every 10 ms
    for i in range(8):  # 80 ms of work read at once: young, queued
        assert executor.submit(QueuedRequest(ctx, request, processor, created_at=t + i * 0.001))
    assert executor.submit(
        QueuedRequest(ctx, request, processor, created_at=t + 0.020)
    )  # oldest waited 20 ms
    assert not executor.submit(QueuedRequest(ctx, request, processor, created_at=t + 0.030))  # 30 ms: lasted
    assert len(executor) == 9
    for _ in range(5):  # taken: 4 left, 40 ms of work
        assert executor.poll_oldest() is not None
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=t + 0.040))


def test_a_young_backlog_is_not_refused_on_an_estimate_learnt_from_slow_first_sends() -> None:
    """The soak's false positive (issue 29, one SYSTEM_BUSY [OVERLOAD] at 15 % of capacity): a
    producer's first sends to a new topic queue behind the topic's check, and the first
    intervals are slow (the first append maps files, each new queue its first consume-queue
    file): 36.8, 3.4 and 2.2 ms, measured so, give an estimate of 3.4 ms a request. By it the
    124 sends read at once would wait 420 ms, while the oldest had waited 9 ms and the queue
    drained in a few ms. Only the same backlog having lasted is overload."""
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10_000, shed_after_ms=lambda: 200)
    ctx = RemotingContext(RecordingChannel())
    request = RemotingCommand.request(ECHO)
    processor = Echo()
    t = learn(executor, 100.0, 0.0368, 0.0034, 0.0022)
    assert executor._take_interval == pytest.approx(0.0034)
    for i in range(124):
        assert executor.submit(QueuedRequest(ctx, request, processor, created_at=t + i * 0.0001))
    # A stall after which no request was taken: the estimate is current, the backlog lasted.
    assert not executor.submit(QueuedRequest(ctx, request, processor, created_at=t + 0.110))


def test_without_a_drain_estimate_nothing_is_refused_at_arrival() -> None:
    """At light load no interval is measured. Requests queued before a stall of the process (a
    GC pause, SIGSTOP) have waited longer than shed_after_ms when it runs again; fast failure
    answers those (Java's TIMEOUT_CLEAN_QUEUE), but a new one is queued."""
    executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=100, shed_after_ms=lambda: 50)
    ctx = RemotingContext(RecordingChannel())
    request = RemotingCommand.request(ECHO)
    processor = Echo()
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=100.000))
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=100.001))
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=100.300))  # after a stall
    assert len(executor) == 3


async def test_shedding_refuses_requests_while_a_backlog_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    # the learnt drain rate stays current however long the machine takes between warm-up and burst
    monkeypatch.setattr(finchmq.remoting.processor, "_ESTIMATE_TTL", 3600.0)
    limit_ms = [100.0]
    server, executor = await shedding_server(Echo(), shed_after_ms=lambda: int(limit_ms[0]))

    def lasted() -> bool:
        oldest = executor.oldest()
        return oldest is not None and (time.monotonic() - oldest.created_at) * 1000 >= limit_ms[0] / 2

    try:
        async with RemotingClient() as client:
            slow = RemotingCommand.request(SLOW, {"sleep": "0.02"})
            # Warm up: the executor learns it takes a request every ~20 ms while busy (longer on a
            # loaded machine: the limit is set from what it learnt, 6.5 requests' worth).
            await asyncio.gather(*(client.invoke(addr(server), slow, 5000) for _ in range(5)))
            assert executor._take_interval > 0
            limit_ms[0] = executor._take_interval * 1000 * 6.5
            # All 30 arrive together, so none has waited yet: a burst is queued, not refused.
            backlog = [asyncio.ensure_future(client.invoke(addr(server), slow, 60_000)) for _ in range(30)]
            # Once its oldest has waited half the limit the backlog has lasted (it drains a
            # request a take, ~3 of 30 by then): a request queued behind the rest would wait over
            # the limit, so it is refused at once instead of after waiting.
            await eventually(lasted, what="the backlog's oldest waiting half the limit")
            late = await asyncio.gather(*(client.invoke(addr(server), slow, 60_000) for _ in range(10)))
            responses = await asyncio.gather(*backlog)
    finally:
        await server.close()
    assert [r.code for r in responses] == [ResponseCode.SUCCESS] * 30
    assert [(r.code, r.remark) for r in late] == [(ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)] * 10


async def test_shedding_forgets_a_slow_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    # the slow spell stays current however long the calls below take: only requests taken from an
    # empty queue may make it forgotten
    monkeypatch.setattr(finchmq.remoting.processor, "_ESTIMATE_TTL", 3600.0)
    server, executor = await shedding_server(Echo())
    try:
        async with RemotingClient() as client:
            slow = RemotingCommand.request(SLOW, {"sleep": "0.1"})
            await asyncio.gather(*(client.invoke(addr(server), slow, 5000) for _ in range(6)))
            assert executor._take_interval > 0  # the slow spell was learnt
            for _ in range(30):  # one at a time: the queue never holds two
                assert (await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)).code == 0
            burst = await asyncio.gather(
                *(client.invoke(addr(server), RemotingCommand.request(ECHO), 3000) for _ in range(20))
            )
    finally:
        await server.close()
    # Fast again: a burst queues without being refused on the slow spell's account.
    assert [r.code for r in burst] == [ResponseCode.SUCCESS] * 20


async def test_one_or_two_slow_requests_do_not_make_a_burst_refused() -> None:
    """A send that waited for a disk or a descheduled process is one long interval between two
    takes; it must not become the drain estimate and refuse fast requests that would be served
    at once (SYSTEM_BUSY [OVERLOAD] at 1,000 msg/s on a loaded machine)."""
    server, _ = await shedding_server(Echo())
    try:
        async with RemotingClient() as client:
            slow = RemotingCommand.request(SLOW, {"sleep": "0.15"})
            queued = [client.invoke(addr(server), slow, 5000) for _ in range(2)]
            queued.append(client.invoke(addr(server), RemotingCommand.request(ECHO), 5000))
            assert [r.code for r in await asyncio.gather(*queued)] == [ResponseCode.SUCCESS] * 3
            burst = await asyncio.gather(
                *(client.invoke(addr(server), RemotingCommand.request(ECHO), 3000) for _ in range(10))
            )
    finally:
        await server.close()
    assert [(r.code, r.remark) for r in burst] == [(ResponseCode.SUCCESS, None)] * 10


async def test_requests_answered_on_the_loop_show_the_queue_keeps_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests answered at once on the loop (``run_now``, the queue empty) shrink the drain
    estimate as requests taken from an empty queue do: a burst after them is judged on the
    present."""
    monkeypatch.setattr(finchmq.remoting.processor, "_ESTIMATE_TTL", 3600.0)  # as above
    server, executor = await shedding_server(EchoNow())
    try:
        async with RemotingClient() as client:
            slow = RemotingCommand.request(SLOW, {"sleep": "0.05"})
            await asyncio.gather(*(client.invoke(addr(server), slow, 5000) for _ in range(6)))
            assert executor._take_interval > 0  # the slow spell was learnt
            for _ in range(30):  # one at a time, each answered at once, none through the queue
                assert (await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)).code == 0
            burst = await asyncio.gather(
                *(client.invoke(addr(server), RemotingCommand.request(QUEUED), 3000) for _ in range(20))
            )
    finally:
        await server.close()
    assert [r.code for r in burst] == [ResponseCode.SUCCESS] * 20


class Stalls(Echo):
    """Echo whose STALL request blocks the event loop (as a descheduled process or a long
    synchronous call does) until ``written`` is set, then 0.15 s more; with ``behind``, only
    once that many requests are queued behind it in ``executor``."""

    def __init__(self, behind: int = 0) -> None:
        super().__init__()
        self.stalling = threading.Event()
        self.written = threading.Event()
        self.behind = behind
        self.executor: RequestExecutor | None = None

    @handles(STALL)
    async def stall(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        if self.behind:
            executor = self.executor
            assert executor is not None
            await eventually(lambda: len(executor) >= self.behind, what="requests queued behind the stall")
        self.stalling.set()
        self.written.wait(DEFAULT_TIMEOUT)
        time.sleep(0.15)  # blocking on purpose: the loop stands still
        return await self.echo(ctx, request)


async def answer_to_a_request_written_during_the_stall(
    server: RemotingServer, stalls: Stalls, codes: list[int]
) -> list[RemotingCommand]:
    """Send ``codes`` (one STALL among them) and, from another connection while the loop stands
    still, one ECHO; every answer to ``codes`` must be SUCCESS. The ECHO's answer."""
    answer: list[RemotingCommand] = []

    def late_sender(sock: socket.socket) -> None:  # writes while the loop stands still
        stalls.stalling.wait(DEFAULT_TIMEOUT)
        sock.sendall(encode_command(RemotingCommand.request(ECHO), opaque=1))
        stalls.written.set()
        frame = b""
        while len(frame) < 4 or len(frame) < 4 + struct.unpack(">i", frame[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            frame += chunk
        answer.append(decode_frame(frame))

    try:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            await eventually(lambda: server.connections, what="the server accepting the connection")
            sender = threading.Thread(target=late_sender, args=(sock,))
            sender.start()
            async with RemotingClient() as client:
                responses = await asyncio.gather(
                    *(client.invoke(addr(server), RemotingCommand.request(code), 10_000) for code in codes)
                )
            await asyncio.to_thread(sender.join, DEFAULT_TIMEOUT)
    finally:
        stalls.written.set()
    assert [r.code for r in responses] == [ResponseCode.SUCCESS] * len(codes)
    return answer


async def test_a_request_arriving_after_a_loop_stall_is_not_refused_on_the_stall_s_account() -> None:
    """The requests queued behind a stall have waited over ``shed_after_ms`` when the loop runs
    again, but the queue drains fast: one arriving then is queued, not refused."""
    stalls = Stalls()
    server, _ = await shedding_server(stalls)
    try:
        # Fast requests teach the drain rate; 150 wait behind the stall, so the
        # worker yields (and the late request is read) before it has taken them all.
        answer = await answer_to_a_request_written_during_the_stall(
            server, stalls, [ECHO] * 10 + [STALL] + [ECHO] * 150
        )
    finally:
        await server.close()
    assert [(r.code, r.remark) for r in answer] == [(ResponseCode.SUCCESS, None)]


async def test_a_stall_at_light_load_does_not_make_requests_refused_afterwards() -> None:
    """A stall of the whole process is not overload (issue 29). At light load nothing tells how
    fast the queue drains; the two requests queued behind the stall have waited longer than
    ``shed_after_ms`` when the loop runs again, yet one arriving then is queued and answered."""
    stalls = Stalls(behind=2)
    server, stalls.executor = await shedding_server(stalls)
    try:
        answer = await answer_to_a_request_written_during_the_stall(server, stalls, [STALL, ECHO, ECHO])
    finally:
        await server.close()
    assert [(r.code, r.remark) for r in answer] == [(ResponseCode.SUCCESS, None)]


async def test_shedding_forgets_a_slow_spell_after_an_idle_gap() -> None:
    server, executor = await shedding_server(Echo())
    try:
        async with RemotingClient() as client:
            slow = RemotingCommand.request(SLOW, {"sleep": "0.05"})
            await asyncio.gather(*(client.invoke(addr(server), slow, 5000) for _ in range(6)))
            assert executor._take_interval > 0  # the slow spell was learnt
            await asyncio.sleep(1.2)  # idle: nothing tells how fast the queue drains now
            burst = await asyncio.gather(
                *(client.invoke(addr(server), RemotingCommand.request(ECHO), 3000) for _ in range(20))
            )
    finally:
        await server.close()
    assert [r.code for r in burst] == [ResponseCode.SUCCESS] * 20
