"""The transport on real loopback sockets: every way to call, limits, failures, shutdown."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

import finchmq.remoting.processor
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.codec import decode_frame, encode_command
from finchmq.remoting import (
    LATER,
    REMARK_OVERLOAD,
    REMARK_REJECT_REQUEST,
    CloseReason,
    Later,
    QueuedRequest,
    RemotingClient,
    RemotingClientConfig,
    RemotingConnectError,
    RemotingConnection,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    RequestExecutor,
)
from tests.waiting import DEFAULT_TIMEOUT, eventually

ECHO = 9001
SLOW = 9002
NEVER = 9003
HOLD = 9004
CALL_BACK = 9005
FAIL = 9006
QUEUED = 9007  # EchoNow leaves it to the queue, then answers it at once
STALL = 9008


class Echo:
    """Answers with the request's extFields and body; counts what it saw. A SLOW request sleeps
    (``sleep``, 0.05 s by default), after waiting for ``gate`` when it says ``hold``: a test holds
    the worker that way as long as it needs to, however fast the machine."""

    def __init__(self) -> None:
        self.seen: list[RemotingCommand] = []
        self.rejecting = False
        self.gate = asyncio.Event()

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        self.seen.append(request)
        if request.code == SLOW:
            if "hold" in request.ext_fields:
                await self.gate.wait()
            await asyncio.sleep(float(request.ext_fields.get("sleep", "0.05")))
        if request.code == NEVER:
            return None
        if request.code == FAIL:
            raise ValueError("processor exploded")
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields), body=request.body
        )

    def reject_request(self) -> bool:
        return self.rejecting


class Shuffler:
    """Holds requests and answers them in a random order (tests opaque matching)."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.held: list[tuple[RemotingContext, RemotingCommand]] = []

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        self.held.append((ctx, request))
        if len(self.held) >= self.batch:
            held, self.held = self.held, []
            random.shuffle(held)
            for held_ctx, held_request in held:
                held_ctx.write_response(
                    held_request.make_response(ResponseCode.SUCCESS, ext_fields=dict(held_request.ext_fields))
                )
        return None

    def reject_request(self) -> bool:
        return False


class CallsBack:
    """Server processor that calls the client back before answering (server -> client request)."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        notify = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G"})
        answer = await self.server.invoke(ctx.connection, notify, 3000)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"client_said": answer.ext_fields["info"]}
        )

    def reject_request(self) -> bool:
        return False


class ClientInfo:
    def __init__(self) -> None:
        self.notified: list[RemotingCommand] = []

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        self.notified.append(request)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"info": "running:" + request.ext_fields["consumerGroup"]}
        )

    def reject_request(self) -> bool:
        return False


class Events:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def on_channel_connect(self, conn: RemotingConnection) -> None:
        self.log.append(("connect", conn.remote_addr))

    def on_channel_close(self, conn: RemotingConnection) -> None:
        self.log.append(("close", conn.remote_addr))

    def on_channel_exception(self, conn: RemotingConnection, exc: BaseException) -> None:
        self.log.append(("exception", conn.remote_addr))

    def on_channel_idle(self, conn: RemotingConnection) -> None:
        self.log.append(("idle", conn.remote_addr))


def server_config(**kwargs: object) -> RemotingServerConfig:
    kwargs.setdefault("listen_port", 0)
    return RemotingServerConfig(bind_address="127.0.0.1", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def echo_server() -> tuple[RemotingServer, Echo]:
    server = RemotingServer(server_config())
    echo = Echo()
    server.register_processor(
        [ECHO, SLOW, NEVER, FAIL], echo, RequestExecutor("echo", workers=8, capacity=1000)
    )
    await server.start()
    yield server, echo  # type: ignore[misc]
    await server.close()


def addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


async def test_sync_invoke_round_trip(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, echo = echo_server
    async with RemotingClient() as client:
        response = await client.invoke(
            addr(server), RemotingCommand.request(ECHO, {"k": "v"}, b"payload"), 3000
        )
    assert response.code == ResponseCode.SUCCESS and response.is_response
    assert response.ext_fields == {"k": "v"} and response.body == b"payload"
    assert echo.seen[0].opaque == response.opaque


async def test_async_invoke_calls_back_and_resolves(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, _ = echo_server
    results: list[tuple[RemotingCommand | None, BaseException | None]] = []
    async with RemotingClient() as client:
        future = await client.invoke_async(
            addr(server), RemotingCommand.request(ECHO, {"n": "1"}), 3000, lambda r, e: results.append((r, e))
        )
        response = await future
    assert response.ext_fields == {"n": "1"}
    assert results == [(response, None)]


async def test_oneway_is_processed_and_not_answered(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, echo = echo_server
    async with RemotingClient() as client:
        await client.invoke_oneway(addr(server), RemotingCommand.request(ECHO, {"one": "way"}), 3000)
        await eventually(lambda: echo.seen, what="the oneway request processed")
        conn = await client.get_connection(addr(server))
        assert conn.pending_count == 0
    assert echo.seen[0].is_oneway and echo.seen[0].ext_fields == {"one": "way"}


async def test_timeout_raises_and_late_answer_is_dropped(
    echo_server: tuple[RemotingServer, Echo], caplog: pytest.LogCaptureFixture
) -> None:
    server, echo = echo_server
    caplog.set_level(logging.DEBUG, logger="finchmq.remoting.connection")
    async with RemotingClient() as client:
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(RemotingTimeoutError, match=r"<127.0.0.1:\d+> timeout, \d+\(ms\)"):
            # held until the test lets it go: answered only after the caller gave up
            await client.invoke(addr(server), RemotingCommand.request(SLOW, {"hold": "", "sleep": "0"}), 100)
        assert loop.time() - began > 0.09  # raised at the deadline, not with the late answer (an error)
        # The late answer arrives after the caller gave up: ignored, and the connection still works.
        echo.gate.set()
        await eventually(lambda: "unknown opaque" in caplog.text, what="the late answer arrived and dropped")
        response = await client.invoke(
            addr(server), RemotingCommand.request(ECHO, {"after": "timeout"}), 3000
        )
        assert response.ext_fields == {"after": "timeout"}


async def test_each_call_times_out_at_its_own_deadline_on_one_connection(
    echo_server: tuple[RemotingServer, Echo],
) -> None:
    """Calls with different timeouts share a connection: a short timeout sent after a long one
    still expires first, answered calls never time out, and unanswered ones all do."""
    server, _ = echo_server
    async with RemotingClient() as client:
        loop = asyncio.get_running_loop()
        finished: dict[str, float] = {}

        async def call(name: str, code: int, timeout_ms: int) -> BaseException | None:
            try:
                await client.invoke(addr(server), RemotingCommand.request(code, {"n": name}), timeout_ms)
                return None
            except RemotingTimeoutError as exc:
                return exc
            finally:
                finished[name] = loop.time()

        conn = await client.get_connection(addr(server))
        # 5 s: far beyond the others (0.3 s at most), which must all expire before it
        long_call = asyncio.create_task(call("long", NEVER, 5000))
        await eventually(lambda: conn.pending_count == 1, what="the long call on the connection first")
        results = await asyncio.gather(
            call("short", NEVER, 200),
            call("answered", ECHO, 200),
            *(call(f"never{i}", NEVER, 300) for i in range(5)),
        )
        assert not long_call.done()  # the short ones expired before it
        assert results[1] is None  # answered in time: no timeout later
        assert all(isinstance(r, RemotingTimeoutError) for i, r in enumerate(results) if i != 1)
        assert "200(ms)" in str(results[0]) and "300(ms)" in str(results[2])
        assert finished["short"] <= finished["never0"]
        assert isinstance(await long_call, RemotingTimeoutError)
        assert finished["long"] > finished["never4"]
        assert conn.pending_count == 0


async def test_unanswered_async_call_times_out_through_its_callback(
    echo_server: tuple[RemotingServer, Echo],
) -> None:
    server, _ = echo_server
    errors: list[BaseException | None] = []
    async with RemotingClient() as client:
        future = await client.invoke_async(
            addr(server), RemotingCommand.request(NEVER), 100, lambda r, e: errors.append(e)
        )
        with pytest.raises(RemotingTimeoutError):
            await future
    assert isinstance(errors[0], RemotingTimeoutError)


async def test_ten_thousand_pipelined_requests_answered_out_of_order() -> None:
    shuffler = Shuffler(batch=100)
    server = RemotingServer(server_config())
    server.register_processor(ECHO, shuffler, RequestExecutor("shuffle", workers=1, capacity=20_000))
    await server.start()
    try:
        async with RemotingClient() as client:
            responses = await asyncio.gather(
                *(
                    client.invoke(addr(server), RemotingCommand.request(ECHO, {"i": str(i)}), 60_000)
                    for i in range(10_000)
                )
            )
            assert len(client.connected_addrs) == 1  # all on one connection
    finally:
        await server.close()
    assert [r.ext_fields["i"] for r in responses] == [str(i) for i in range(10_000)]


async def test_server_calls_the_client_back() -> None:
    server = RemotingServer(server_config())
    server.register_processor(CALL_BACK, CallsBack(server), RequestExecutor("cb", workers=2, capacity=10))
    await server.start()
    info = ClientInfo()
    client = RemotingClient()
    client.register_processor(
        RequestCode.GET_CONSUMER_RUNNING_INFO, info, RequestExecutor("client", workers=1, capacity=10)
    )
    try:
        async with client:
            response = await client.invoke(addr(server), RemotingCommand.request(CALL_BACK), 3000)
    finally:
        await server.close()
    assert response.ext_fields == {"client_said": "running:G"}
    assert info.notified[0].code == RequestCode.GET_CONSUMER_RUNNING_INFO and not info.notified[0].is_response


async def test_full_queue_answers_overload_and_oneway_gets_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="finchmq.remoting.connection")
    echo = Echo()
    server = RemotingServer(server_config())
    server.register_processor([SLOW, ECHO], echo, RequestExecutor("tiny", workers=1, capacity=2))
    await server.start()
    held = RemotingCommand.request(SLOW, {"hold": "", "sleep": "0"})
    try:
        async with RemotingClient() as client:
            calls = [asyncio.ensure_future(client.invoke(addr(server), held, 60_000)) for _ in range(6)]
            # One runs (held until the test lets it go), two wait in the queue, the other three
            # are refused at once.
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
        await server.close()


async def test_a_refused_connection_is_paused_until_the_queue_has_room() -> None:
    echo = Echo()
    server = RemotingServer(server_config())
    # the pause's upper bound out of reach: the connection waits for room, however long
    executor = RequestExecutor("paused", workers=1, capacity=2, pause_reading_ms=lambda: 60_000)
    server.register_processor(SLOW, echo, executor)
    server.register_processor(ECHO, echo, RequestExecutor("other", workers=1, capacity=10))
    await server.start()
    try:
        async with RemotingClient() as flooder, RemotingClient() as other:
            first = RemotingCommand.request(SLOW, {"hold": "", "sleep": "0.05"})  # held until we let go
            slow = RemotingCommand.request(SLOW, {"sleep": "0.05"})
            calls = [asyncio.ensure_future(flooder.invoke(addr(server), first, 60_000))]
            calls += [asyncio.ensure_future(flooder.invoke(addr(server), slow, 60_000)) for _ in range(11)]
            # The flood's first refusal paused its connection: the rest waits undecoded...
            await eventually(lambda: executor.paused_connections == 1, what="the flood's connection paused")
            # ...while other connections are served (the flood still paused: its queue cannot drain).
            answer = await other.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
            assert answer.code == ResponseCode.SUCCESS
            assert executor.paused_connections == 1
            echo.gate.set()
            responses = await asyncio.gather(*calls)
    finally:
        await server.close()
    busy = [r for r in responses if r.code == ResponseCode.SYSTEM_BUSY]
    # Without the pause: one runs, two wait, nine are refused. With it, the connection is read
    # again whenever the queue is half empty: two admitted for each refusal.
    assert len(responses) == 12 and 1 <= len(busy) <= 5, [r.code for r in responses]
    assert {r.remark for r in busy} == {REMARK_OVERLOAD}
    assert executor.paused_connections == 0


async def test_shedding_refuses_requests_that_would_wait_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    # the learnt drain rate stays current however long the machine takes between warm-up and burst
    monkeypatch.setattr(finchmq.remoting.processor, "_ESTIMATE_TTL", 3600.0)
    limit_ms = [100.0]
    server, executor = await shedding_server(Echo(), shed_after_ms=lambda: int(limit_ms[0]))
    try:
        async with RemotingClient() as client:
            slow = RemotingCommand.request(SLOW, {"sleep": "0.02"})
            # Warm up: the executor learns it takes a request every ~20 ms while busy (longer on a
            # loaded machine: the limit is set from what it learnt, 6.5 requests' worth).
            await asyncio.gather(*(client.invoke(addr(server), slow, 5000) for _ in range(5)))
            assert executor._take_interval > 0
            limit_ms[0] = executor._take_interval * 1000 * 6.5
            responses = await asyncio.gather(*(client.invoke(addr(server), slow, 60_000) for _ in range(30)))
    finally:
        await server.close()
    busy = [r for r in responses if r.code == ResponseCode.SYSTEM_BUSY]
    # All 30 arrive together, so none has waited yet; queued behind ~6 others a request would
    # wait over the limit, so the rest are refused at once instead of after waiting.
    assert len(busy) >= 15 and len(responses) - len(busy) >= 3, len(busy)
    assert {r.remark for r in busy} == {REMARK_OVERLOAD}


async def test_shedding_forgets_a_slow_spell() -> None:
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


class EchoNow(Echo):
    """Echo that answers ECHO at once through ``process_now`` (as the broker answers a send to a
    known topic) and leaves SLOW and QUEUED to the executor's queue."""

    def process_now(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | Later:
        if request.code != ECHO:
            return LATER
        self.seen.append(request)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=dict(request.ext_fields))


async def shedding_server(
    processor: Echo, shed_after_ms: Callable[[], int] = lambda: 100
) -> tuple[RemotingServer, RequestExecutor]:
    server = RemotingServer(server_config())
    executor = RequestExecutor("shed", workers=1, capacity=1000, shed_after_ms=shed_after_ms)
    server.register_processor([SLOW, ECHO, QUEUED, STALL], processor, executor)
    await server.start()
    return server, executor


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


async def test_requests_answered_at_once_show_the_queue_keeps_up() -> None:
    """Requests answered by ``process_now`` (the queue empty) shrink the drain estimate as
    requests taken from an empty queue do: a burst after them is judged on the present."""
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
    synchronous call does) until ``written`` is set, then 0.15 s more."""

    def __init__(self) -> None:
        super().__init__()
        self.stalling = threading.Event()
        self.written = threading.Event()

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == STALL:
            self.stalling.set()
            self.written.wait(DEFAULT_TIMEOUT)
            time.sleep(0.15)  # blocking on purpose: the loop stands still
        return await super().process_request(ctx, request)


async def test_a_request_arriving_after_a_loop_stall_is_not_refused_on_the_stall_s_account() -> None:
    """The requests queued behind a stall have waited over ``shed_after_ms`` when the loop runs
    again, but the queue drains fast: one arriving then is queued, not refused."""
    stalls = Stalls()
    server, _ = await shedding_server(stalls)
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
                # Fast requests teach the drain rate; 150 wait behind the stall, so the
                # worker yields (and the late request is read) before it has taken them all.
                codes = [ECHO] * 10 + [STALL] + [ECHO] * 150
                await asyncio.gather(
                    *(client.invoke(addr(server), RemotingCommand.request(code), 10_000) for code in codes)
                )
            await asyncio.to_thread(sender.join, DEFAULT_TIMEOUT)
    finally:
        stalls.written.set()
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


async def test_garbage_closes_only_that_connection(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, _ = echo_server
    async with RemotingClient() as client:
        await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(struct.pack(">ii", 12, 99 << 24) + b"garbage!....")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), DEFAULT_TIMEOUT) == b""  # server closed it
        writer.close()
        await writer.wait_closed()
        response = await client.invoke(addr(server), RemotingCommand.request(ECHO, {"still": "ok"}), 3000)
        assert response.ext_fields == {"still": "ok"}


async def test_connection_loss_fails_pending_calls_and_reconnects_on_demand() -> None:
    echo = Echo()
    server = RemotingServer(server_config())
    server.register_processor([NEVER, ECHO], echo, RequestExecutor("e", workers=4, capacity=100))
    await server.start()
    port = server.port
    async with RemotingClient() as client:
        pending = asyncio.ensure_future(
            client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(NEVER), 60_000)
        )
        await eventually(lambda: echo.seen, what="the call reaching the server")
        await server.close()
        with pytest.raises(RemotingConnectError, match="closed"):
            await pending
        with pytest.raises(RemotingConnectError, match=r"connect to 127\.0\.0\.1"):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 3000)
        server2 = RemotingServer(server_config(listen_port=port))
        server2.register_processor(ECHO, Echo(), RequestExecutor("e2", workers=1, capacity=10))
        await server2.start()
        try:
            assert (await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 3000)).code == 0
        finally:
            await server2.close()


async def test_connect_refused_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with RemotingClient() as client:
        with pytest.raises(RemotingConnectError, match=rf"connect to 127\.0\.0\.1:{port} failed"):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 3000)


async def test_async_semaphore_bounds_requests_in_flight(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, echo = echo_server
    held = RemotingCommand.request(SLOW, {"hold": "", "sleep": "0"})  # answered when the test says
    async with RemotingClient(RemotingClientConfig(client_async_semaphore_value=2)) as client:
        futures = [await client.invoke_async(addr(server), held, 60_000) for _ in range(2)]
        with pytest.raises(RemotingTooMuchRequestError, match="client_async_semaphore_value"):
            await client.invoke_async(addr(server), RemotingCommand.request(ECHO), 50)
        echo.gate.set()
        for future in futures:
            assert (await future).code == 0
        # Permits come back when calls are answered...
        response = await (await client.invoke_async(addr(server), RemotingCommand.request(ECHO), 3000))
        assert response.code == 0
        # ...and when they time out.
        futures = [
            await client.invoke_async(addr(server), RemotingCommand.request(NEVER), 100) for _ in range(2)
        ]
        for future in futures:
            with pytest.raises(RemotingTimeoutError):
                await future
        response = await (await client.invoke_async(addr(server), RemotingCommand.request(ECHO), 3000))
        assert response.code == 0


async def test_idle_connections_are_closed_on_both_sides() -> None:
    events = Events()
    server = RemotingServer(server_config(server_channel_max_idle_time_seconds=0.3), listener=events)
    server.register_processor(ECHO, Echo(), RequestExecutor("e", workers=1, capacity=10))
    await server.start()
    try:
        async with RemotingClient() as client:
            await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
            await eventually(
                lambda: "close" in [kind for kind, _ in events.log] and not client.connected_addrs,
                what="the idle connection closed by the server",
            )
            assert [kind for kind, _ in events.log] == ["connect", "idle", "close"]
    finally:
        await server.close()
    # The client closes its own idle connections too: against a server that never would.
    server = RemotingServer(server_config())
    server.register_processor(ECHO, Echo(), RequestExecutor("e", workers=1, capacity=10))
    await server.start()
    try:
        client_events = Events()
        async with RemotingClient(
            RemotingClientConfig(client_channel_max_idle_time_seconds=0.2), listener=client_events
        ) as client:
            await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
            await eventually(
                lambda: not client.connected_addrs, what="the idle connection closed by the client"
            )
            assert ("idle", addr(server)) in client_events.log
    finally:
        await server.close()


async def test_close_is_idempotent_and_leaves_nothing_open(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, _ = echo_server
    client = RemotingClient()
    await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)
    conn = await client.get_connection(addr(server))
    await client.close()
    await client.close()
    assert conn.close_reason is CloseReason.SHUTDOWN and not conn.is_open
    await server.close()
    await server.close()
    assert server.connections == frozenset()
    with pytest.raises(RemotingConnectError):
        await client.invoke(addr(server), RemotingCommand.request(ECHO), 3000)


def test_executor_sheds_new_requests_once_its_oldest_has_waited_too_long() -> None:
    executor = RequestExecutor("shed", workers=1, capacity=100, shed_after_ms=lambda: 50)  # never started
    ctx = RemotingContext(connection=None)  # type: ignore[arg-type]
    request = RemotingCommand.request(ECHO)
    processor = Echo()
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=100.000))
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=100.040))  # oldest waited 40 ms
    assert not executor.submit(QueuedRequest(ctx, request, processor, created_at=100.060))  # 60 ms > 50
    assert len(executor) == 2
    assert executor.poll_oldest() is not None  # the old one leaves: the queue is young again
    assert executor.submit(QueuedRequest(ctx, request, processor, created_at=100.070))
