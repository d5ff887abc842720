"""``RemotingConnection`` on real loopback sockets: framing both ways, opaque matching, each
call's deadline, oneway requests, bad bytes, closing, and pausing a peer's requests."""

from __future__ import annotations

import asyncio
import logging
import random
import struct

import pytest

from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.protocol.codec import RemotingCodec, decode_frame, encode_command
from finchmq.remoting import (
    Answer,
    ExecutorName,
    RemotingClient,
    RemotingConnectError,
    RemotingConnection,
    RemotingContext,
    RemotingServer,
    RemotingTimeoutError,
    RequestExecutor,
    RequestProcessor,
    handles,
)
from tests.remoting.conftest import ECHO, NEVER, SLOW, Echo, addr, by_name, echoed, server_config
from tests.waiting import DEFAULT_TIMEOUT, eventually


async def test_sync_invoke_round_trip(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, echo = echo_server
    async with RemotingClient() as client:
        response = await client.invoke(
            addr(server), RemotingCommand.request(ECHO, {"k": "v"}, b"payload"), 3000
        )
    assert response.code == ResponseCode.SUCCESS and response.is_response
    assert response.ext_fields == {"k": "v"} and response.body == b"payload"
    assert echo.seen[0].opaque == response.opaque


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


class Shuffler(RequestProcessor):
    """Holds requests and answers them in a random order (tests opaque matching)."""

    executor = ExecutorName.SEND

    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch
        self.held: list[tuple[RemotingContext, RemotingCommand]] = []

    @handles(ECHO)
    async def hold(self, ctx: RemotingContext, request: RemotingCommand) -> None:
        self.held.append((ctx, request))
        if len(self.held) >= self.batch:
            held, self.held = self.held, []
            random.shuffle(held)
            for held_ctx, held_request in held:
                held_ctx.write_response(
                    held_request.make_response(ResponseCode.SUCCESS, ext_fields=dict(held_request.ext_fields))
                )


async def test_ten_thousand_pipelined_requests_answered_out_of_order() -> None:
    server = RemotingServer(server_config())
    server.register_processor(
        Shuffler(batch=100), by_name(RequestExecutor(ExecutorName.SEND, workers=1, capacity=20_000))
    )
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
    server.register_processor(echo, by_name(RequestExecutor(ExecutorName.SEND, workers=4, capacity=100)))
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
        server2.register_processor(
            Echo(), by_name(RequestExecutor(ExecutorName.SEND, workers=1, capacity=10))
        )
        await server2.start()
        try:
            assert (await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 3000)).code == 0
        finally:
            await server2.close()


class Pauser(RequestProcessor):
    """Answers ECHO at once on the loop; a request saying ``pause`` first pauses its channel."""

    executor = ExecutorName.SEND

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    @handles(ECHO)
    def echo(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        self.seen.append(request.ext_fields["n"])
        if "pause" in request.ext_fields:
            ctx.channel.pause_requests()
        return echoed(request)


async def read_frame(reader: asyncio.StreamReader) -> RemotingCommand:
    length = await asyncio.wait_for(reader.readexactly(4), DEFAULT_TIMEOUT)
    rest = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", length)[0]), DEFAULT_TIMEOUT)
    return decode_frame(length + rest)


async def test_paused_requests_wait_until_resumed_and_keep_their_order() -> None:
    """A paused connection's frames, read or not yet, are not decoded until it resumes; then they
    are taken in order. Other connections are served meanwhile."""
    pauser = Pauser()
    server = RemotingServer(server_config())
    server.register_processor(pauser, by_name(RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)))
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        frames = [encode_command(RemotingCommand.request(ECHO, {"n": "1", "pause": ""}), opaque=1)]
        frames += [encode_command(RemotingCommand.request(ECHO, {"n": str(i)}), opaque=i) for i in (2, 3)]
        writer.write(b"".join(frames))  # one write: the three arrive together, in one read as a rule
        await writer.drain()
        assert (await read_frame(reader)).opaque == 1  # the first is answered, then the pause holds
        async with RemotingClient() as other:
            answer = await other.invoke(addr(server), RemotingCommand.request(ECHO, {"n": "other"}), 3000)
        assert answer.code == ResponseCode.SUCCESS
        # Without the pause, 2 and 3 would have been taken with 1, before "other" was even sent.
        assert pauser.seen == ["1", "other"]
        host, port = writer.get_extra_info("sockname")[:2]
        (paused,) = [c for c in server.connections if c.remote_addr == f"{host}:{port}"]
        paused.resume_requests()
        assert [(await read_frame(reader)).opaque for _ in range(2)] == [2, 3]
        assert pauser.seen == ["1", "other", "2", "3"]
    finally:
        writer.close()
        await writer.wait_closed()
        await server.close()


class _RecordingTransport(asyncio.Transport):
    """A stand-in for asyncio's TCP transport that records each write call (the syscalls a real
    transport would make), so that the number of writes per read can be asserted exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: object) -> None:
        self.writes.append(b"".join(bytes(d) for d in list_of_data))  # type: ignore[attr-defined]

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _AnswerAtOnce:
    """A request sink that answers every request while it is dispatched (the broker's send path)."""

    def dispatch(self, ctx: RemotingContext, request: RemotingCommand) -> None:
        ctx.write_response(request.make_response(ResponseCode.SUCCESS, None, {"n": str(request.opaque)}))


@pytest.mark.parametrize("frames", [1, 5, 16, 40])
async def test_the_answers_to_one_read_go_out_in_one_write(frames: int) -> None:
    """A read holding N requests answered at once costs one write (one per 16 answers at most),
    as the floor server's; the answers are all there, in order."""
    transport = _RecordingTransport()
    connection = RemotingConnection(dispatcher=_AnswerAtOnce(), max_frame_size=1 << 20)
    connection.connection_made(transport)
    chunk = b"".join(encode_command(RemotingCommand(310, opaque=i)) for i in range(frames))
    connection.data_received(chunk)
    assert len(transport.writes) == -(-frames // 16)
    codec = RemotingCodec()
    codec.receive_data(b"".join(transport.writes))
    answered = []
    while isinstance(cmd := codec.next_command(), RemotingCommand):
        answered.append(int(cmd.ext_fields["n"]))
    assert answered == list(range(frames))
    await asyncio.sleep(0)  # the loop's own flush finds nothing left to write
    assert len(transport.writes) == -(-frames // 16)
