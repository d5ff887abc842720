"""``LocalChannel`` (``local.py``): a peer inside the process, served through a real
``RequestDispatcher`` and its executors as a connection's peer is: answers on the loop or from a
worker, the server calling the peer back (two-way and oneway), deadlines, the pause of an
overloaded executor, and closing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.remoting import (
    REMARK_OVERLOAD,
    Answer,
    ExecutorName,
    Later,
    LocalChannel,
    RemotingConnectError,
    RemotingContext,
    RemotingSendRequestError,
    RemotingServer,
    RemotingTimeoutError,
    RequestDispatcher,
    RequestExecutor,
    RequestProcessor,
    handles,
)
from tests.remoting.conftest import ECHO, Echo, by_name, settle
from tests.waiting import DEFAULT_TIMEOUT, eventually

FAST = 9401
LATER = 9402
HELD = 9403
NEVER = 9404
ASK_PEER = 9405
TELL_PEER = 9406

UNANSWERED = 0.2  # s: the deadline of a call that can never be answered
ASK = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G"})


def answered(request: RemotingCommand) -> RemotingCommand:
    """SUCCESS, saying which task answered."""
    task = asyncio.current_task()
    return request.make_response(
        ResponseCode.SUCCESS,
        ext_fields={**request.ext_fields, "task": task.get_name() if task is not None else "-"},
    )


class Local(RequestProcessor):
    """FAST answers at once, on its own executor (QUERY); LATER gives the rest to its worker;
    HELD waits for ``gate`` on a worker; NEVER is not answered; ASK_PEER and TELL_PEER call the
    peer back through the request's channel."""

    executor = ExecutorName.SEND

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[RemotingCommand] = []
        self.gate = asyncio.Event()

    @handles(FAST, executor=ExecutorName.QUERY)
    def fast(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request)
        return answered(request)

    @handles(LATER)
    def later(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request)

        async def resume() -> RemotingCommand:
            return answered(request)

        return Later(resume)

    @handles(HELD)
    async def held(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request)
        await self.gate.wait()
        return answered(request)

    @handles(NEVER)
    def never(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request)
        return None

    @handles(ASK_PEER)
    async def ask_peer(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        answer = await ctx.channel.invoke(ASK, DEFAULT_TIMEOUT)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"peer_said": answer.ext_fields["info"]}
        )

    @handles(TELL_PEER)
    async def tell_peer(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        notify = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"})
        await ctx.channel.send_oneway(notify)
        return request.make_response(ResponseCode.SUCCESS)


class Peer:
    """The in-process client: answers what the server asks, or never when told to hang."""

    def __init__(self, *, hang: bool = False) -> None:
        self.hang = hang
        self.asked: list[RemotingCommand] = []

    async def on_request(self, request: RemotingCommand) -> RemotingCommand | None:
        self.asked.append(request)
        if self.hang:
            await asyncio.Event().wait()
        if request.is_oneway:
            return None
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"info": "running:" + request.ext_fields["consumerGroup"]}
        )


def request(code: int, **ext_fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, ext_fields)


def serving(send: RequestExecutor | None = None) -> tuple[RequestDispatcher, Local]:
    if send is None:  # not `send or ...`: an executor with an empty queue is falsy (it has a len)
        send = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher = RequestDispatcher()
    processor = Local()
    dispatcher.register_processor(
        processor, by_name(send, RequestExecutor(ExecutorName.QUERY, workers=1, capacity=10))
    )
    dispatcher.start()
    return dispatcher, processor


@pytest.fixture
async def local() -> AsyncIterator[tuple[LocalChannel, Local, Peer]]:
    dispatcher, processor = serving()
    peer = Peer()
    channel = LocalChannel(dispatcher, "10.0.0.7:50001", peer.on_request)
    yield channel, processor, peer
    channel.close()
    await dispatcher.close()


def pending(channel: LocalChannel) -> int:
    return channel.calls_in_flight


async def test_a_call_is_answered_on_the_loop_when_its_executor_is_idle(
    local: tuple[LocalChannel, Local, Peer],
) -> None:
    channel, processor, _ = local
    answer = await channel.call(request(FAST, n="1"), DEFAULT_TIMEOUT)
    assert answer.code == ResponseCode.SUCCESS and answer.is_response
    task = asyncio.current_task()
    assert task is not None
    assert answer.ext_fields == {"n": "1", "task": task.get_name()}  # answered in the caller's own task
    (seen,) = processor.seen
    assert seen.opaque == answer.opaque and not seen.is_oneway
    assert channel.remote_addr == "10.0.0.7:50001" and channel.is_open
    assert pending(channel) == 0


async def test_a_later_is_answered_by_the_executor_s_worker(local: tuple[LocalChannel, Local, Peer]) -> None:
    channel, processor, _ = local
    processor.gate.set()
    later, held = await asyncio.gather(
        channel.call(request(LATER, n="later"), DEFAULT_TIMEOUT),
        channel.call(request(HELD, n="held"), DEFAULT_TIMEOUT),
    )
    assert later.code == held.code == ResponseCode.SUCCESS
    assert later.ext_fields["task"].startswith("finchmq-send-")
    assert held.ext_fields["task"].startswith("finchmq-send-")
    assert {r.ext_fields["n"] for r in (later, held)} == {"later", "held"}
    unknown = await channel.call(request(12345), DEFAULT_TIMEOUT)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_a_call_nobody_answers_times_out(local: tuple[LocalChannel, Local, Peer]) -> None:
    channel, processor, _ = local
    with pytest.raises(RemotingTimeoutError, match=r"no answer to code 9404 on 10\.0\.0\.7:50001"):
        await channel.call(request(NEVER), UNANSWERED)
    assert [r.code for r in processor.seen] == [NEVER] and pending(channel) == 0
    assert (await channel.call(request(FAST), DEFAULT_TIMEOUT)).code == ResponseCode.SUCCESS


async def test_the_server_side_calls_the_peer_and_gets_its_answer(
    local: tuple[LocalChannel, Local, Peer],
) -> None:
    channel, _, peer = local
    answer = await channel.call(request(ASK_PEER), DEFAULT_TIMEOUT)
    assert answer.code == ResponseCode.SUCCESS and answer.ext_fields == {"peer_said": "running:G"}
    (asked,) = peer.asked
    assert asked.code == RequestCode.GET_CONSUMER_RUNNING_INFO and not asked.is_oneway


async def test_invoke_times_out_when_the_peer_never_answers() -> None:
    dispatcher, _ = serving()
    peer = Peer(hang=True)
    channel = LocalChannel(dispatcher, "10.0.0.7:50001", peer.on_request)
    try:
        with pytest.raises(RemotingTimeoutError):
            await channel.invoke(ASK, UNANSWERED)
        assert len(peer.asked) == 1 and channel.is_open
    finally:
        channel.close()
        await dispatcher.close()


async def test_invoke_needs_a_peer_that_answers() -> None:
    dispatcher, _ = serving()

    async def says_nothing(request: RemotingCommand) -> RemotingCommand | None:
        return None

    deaf = LocalChannel(dispatcher, "10.0.0.7:1")
    silent = LocalChannel(dispatcher, "10.0.0.7:2", says_nothing)
    try:
        with pytest.raises(RemotingSendRequestError, match="takes no requests"):
            await deaf.invoke(ASK, DEFAULT_TIMEOUT)
        with pytest.raises(RemotingSendRequestError, match="did not answer"):
            await silent.invoke(ASK, DEFAULT_TIMEOUT)
        await deaf.send_oneway(ASK)  # nobody to tell: dropped
    finally:
        deaf.close()
        silent.close()
        await dispatcher.close()


async def test_oneway_requests_both_ways() -> None:
    dispatcher, processor = serving()
    results: list[tuple[int, str]] = []
    for executor in dispatcher.executors.values():
        executor.on_done = lambda item, response, result: results.append((item.request.code, result))
    peer = Peer()
    channel = LocalChannel(dispatcher, "10.0.0.7:50001", peer.on_request)
    try:
        await channel.call_oneway(request(FAST, n="oneway"))  # the peer's oneway: processed, not answered
        (seen,) = processor.seen
        assert seen.is_oneway and seen.ext_fields == {"n": "oneway"}
        assert results == [(FAST, "oneway")] and pending(channel) == 0
        # the server's oneway to the peer
        told = await channel.call(request(TELL_PEER), DEFAULT_TIMEOUT)
        assert told.code == ResponseCode.SUCCESS  # answered without waiting for the peer
        await eventually(lambda: peer.asked, what="the peer told")
        (notified,) = peer.asked
        assert notified.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and notified.is_oneway
    finally:
        channel.close()
        await dispatcher.close()


async def test_an_overloaded_executor_pauses_the_channel_and_the_next_call_waits_for_room() -> None:
    # the pause's upper bound out of reach: the channel waits for room, however long
    send = RequestExecutor(ExecutorName.SEND, workers=1, capacity=1, pause_reading_ms=lambda: 60_000)
    dispatcher, processor = serving(send)
    channel = LocalChannel(dispatcher, "10.0.0.7:50001")
    other = LocalChannel(dispatcher, "10.0.0.8:50001")
    calls: list[asyncio.Task[RemotingCommand]] = []
    try:
        first = asyncio.create_task(channel.call(request(HELD, n="1"), DEFAULT_TIMEOUT))
        calls.append(first)
        await eventually(lambda: processor.seen, what="the worker holding the first request")
        second = asyncio.create_task(channel.call(request(HELD, n="2"), DEFAULT_TIMEOUT))
        calls.append(second)
        await eventually(lambda: len(send) == 1, what="the second request queued: the queue is full")
        refused = await channel.call(request(HELD, n="3"), DEFAULT_TIMEOUT)
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)
        assert send.paused_channels == 1
        # Paused: the next call waits before it is dispatched, even for a code whose executor is
        # idle (without the pause it would be answered at once, in its first step)...
        waiting = asyncio.create_task(channel.call(request(FAST, n="4"), DEFAULT_TIMEOUT))
        calls.append(waiting)
        await eventually(
            lambda: waiting.done() or pending(channel) == 3, what="the call waiting with the two held"
        )
        # ...while another channel is served.
        assert (await other.call(request(FAST, n="other"), DEFAULT_TIMEOUT)).code == ResponseCode.SUCCESS
        assert not waiting.done()
        assert [r.ext_fields["n"] for r in processor.seen] == ["1", "other"]
        processor.gate.set()
        answers = await asyncio.gather(first, second, waiting)
        assert [(r.code, r.ext_fields["n"]) for r in answers] == [
            (ResponseCode.SUCCESS, "1"),
            (ResponseCode.SUCCESS, "2"),
            (ResponseCode.SUCCESS, "4"),
        ]
        # the call that waited went on once the worker had made room
        assert [r.ext_fields["n"] for r in processor.seen] == ["1", "other", "2", "4"]
        assert send.paused_channels == 0
    finally:
        await settle(calls)
        channel.close()
        other.close()
        await dispatcher.close()


async def test_close_fails_the_calls_still_waiting() -> None:
    send = RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)
    dispatcher, processor = serving(send)
    results: list[str] = []
    send.on_done = lambda item, response, result: results.append(result)
    channel = LocalChannel(dispatcher, "10.0.0.7:50001", Peer().on_request)
    calls: list[asyncio.Task[RemotingCommand]] = []
    try:
        held = asyncio.create_task(channel.call(request(HELD), DEFAULT_TIMEOUT))  # dispatched, held
        calls.append(held)
        await eventually(lambda: processor.seen, what="the worker holding the request")
        channel.pause_requests()
        paused = asyncio.create_task(channel.call(request(FAST), DEFAULT_TIMEOUT))  # not dispatched
        calls.append(paused)
        await eventually(lambda: paused.done() or pending(channel) == 2, what="both calls waiting")
        channel.close()
        channel.close()  # idempotent
        for call in (held, paused):
            with pytest.raises(RemotingConnectError, match=r"local channel 10\.0\.0\.7:50001 (is )?closed"):
                await call
        assert not channel.is_open and pending(channel) == 0
        with pytest.raises(RemotingConnectError, match="is closed"):
            await channel.call(request(FAST), DEFAULT_TIMEOUT)
        with pytest.raises(RemotingConnectError, match="is closed"):
            await channel.call_oneway(request(FAST))
        with pytest.raises(RemotingConnectError, match="is closed"):
            await channel.invoke(ASK, DEFAULT_TIMEOUT)
        with pytest.raises(RemotingConnectError, match="is closed"):
            await channel.send_oneway(ASK)
        # The held request's answer finds the channel gone: dropped, reported as such.
        processor.gate.set()
        await eventually(lambda: results, what="the held request answered")
        assert results == ["write_channel_failed"]
        assert [r.code for r in processor.seen] == [HELD]  # the paused call never reached it
    finally:
        await settle(calls)
        channel.close()
        await dispatcher.close()


async def test_a_server_serves_a_local_channel_as_it_serves_a_connection(
    echo_server: tuple[RemotingServer, Echo],
) -> None:
    server, echo = echo_server
    peer = Peer()
    channel = LocalChannel(server.dispatcher, "10.0.0.9:50001", peer.on_request)
    try:
        answer = await channel.call(request(ECHO, k="v"), DEFAULT_TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS and answer.ext_fields == {"k": "v"}
        assert echo.seen[0].opaque == answer.opaque
        asked = await server.invoke(channel, ASK, 3000)  # as Broker2Client calls a client
        assert asked.ext_fields == {"info": "running:G"}
        await server.invoke_oneway(channel, ASK, 3000)
        await eventually(lambda: len(peer.asked) == 2, what="the oneway handed to the peer")
        assert [r.is_oneway for r in peer.asked] == [False, True]
    finally:
        channel.close()
