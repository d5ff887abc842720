"""``RemotingClient``: connecting on demand, async calls and their callbacks, the bound on calls in
flight, and the RPC hook."""

from __future__ import annotations

import asyncio
import socket

import pytest

from finchmq.protocol import RemotingCommand
from finchmq.remoting import (
    RemotingClient,
    RemotingClientConfig,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from tests.remoting.conftest import ECHO, NEVER, SLOW, Echo, addr
from tests.waiting import eventually


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


async def test_concurrent_first_calls_share_one_connection(echo_server: tuple[RemotingServer, Echo]) -> None:
    server, _ = echo_server
    async with RemotingClient() as client:
        responses = await asyncio.gather(
            *(
                client.invoke(addr(server), RemotingCommand.request(ECHO, {"i": str(i)}), 3000)
                for i in range(10)
            )
        )
        assert [r.ext_fields["i"] for r in responses] == [str(i) for i in range(10)]
        assert client.connected_addrs == [addr(server)]
        assert len(server.connections) == 1


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


async def test_rpc_hook_rewrites_every_request_before_it_is_sent(
    echo_server: tuple[RemotingServer, Echo],
) -> None:
    server, echo = echo_server
    hooked: list[str] = []

    def sign(to: str, request: RemotingCommand) -> RemotingCommand:
        hooked.append(to)
        return RemotingCommand.request(
            request.code, {**request.ext_fields, "signature": "s"}, request.body, oneway=request.is_oneway
        )

    async with RemotingClient(rpc_hook=sign) as client:
        sync = await client.invoke(addr(server), RemotingCommand.request(ECHO, {"n": "sync"}), 3000)
        later = await (
            await client.invoke_async(addr(server), RemotingCommand.request(ECHO, {"n": "a"}), 3000)
        )
        await client.invoke_oneway(addr(server), RemotingCommand.request(ECHO, {"n": "oneway"}), 3000)
        await eventually(lambda: len(echo.seen) == 3, what="the oneway request processed")
    assert sync.ext_fields == {"n": "sync", "signature": "s"}
    assert later.ext_fields == {"n": "a", "signature": "s"}
    assert [r.ext_fields for r in echo.seen] == [{"n": n, "signature": "s"} for n in ("sync", "a", "oneway")]
    assert hooked == [addr(server)] * 3
