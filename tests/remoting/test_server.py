"""``RemotingServer``: calling a connected client back (two-way and oneway), and closing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.remoting import (
    CloseReason,
    ExecutorName,
    RemotingClient,
    RemotingConnectError,
    RemotingContext,
    RemotingServer,
    RequestExecutor,
    RequestProcessor,
    handles,
)
from tests.remoting.conftest import CALL_BACK, ECHO, Echo, addr, by_name, server_config
from tests.waiting import eventually


class CallsBack(RequestProcessor):
    """Server processor that calls the client back before answering (server -> client request)."""

    executor = ExecutorName.ADMIN

    def __init__(self, server: RemotingServer) -> None:
        super().__init__()
        self.server = server

    @handles(CALL_BACK)
    async def call_back(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        notify = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G"})
        answer = await self.server.invoke(ctx.channel, notify, 3000)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"client_said": answer.ext_fields["info"]}
        )


class ClientInfo(RequestProcessor):
    """The client's side: answers what the server asks."""

    executor = ExecutorName.CLIENT

    def __init__(self) -> None:
        super().__init__()
        self.notified: list[RemotingCommand] = []

    @handles(RequestCode.GET_CONSUMER_RUNNING_INFO, RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    async def info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        self.notified.append(request)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"info": "running:" + request.ext_fields["consumerGroup"]}
        )


@contextlib.asynccontextmanager
async def calling_back() -> AsyncIterator[tuple[RemotingServer, RemotingClient, ClientInfo]]:
    server = RemotingServer(server_config())
    server.register_processor(
        CallsBack(server), by_name(RequestExecutor(ExecutorName.ADMIN, workers=2, capacity=10))
    )
    await server.start()
    info = ClientInfo()
    client = RemotingClient()
    client.register_processor(info, by_name(RequestExecutor(ExecutorName.CLIENT, workers=1, capacity=10)))
    try:
        async with client:
            yield server, client, info
    finally:
        await server.close()


async def test_server_calls_the_client_back() -> None:
    async with calling_back() as (server, client, info):
        response = await client.invoke(addr(server), RemotingCommand.request(CALL_BACK), 3000)
    assert response.ext_fields == {"client_said": "running:G"}
    assert info.notified[0].code == RequestCode.GET_CONSUMER_RUNNING_INFO and not info.notified[0].is_response


async def test_server_sends_the_client_a_oneway_request() -> None:
    async with calling_back() as (server, client, info):
        await client.invoke(addr(server), RemotingCommand.request(CALL_BACK), 3000)
        (conn,) = server.connections
        notify = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"})
        await server.invoke_oneway(conn, notify, 3000)
        await eventually(lambda: len(info.notified) == 2, what="the oneway request reaching the client")
        assert conn.pending_count == 0  # nothing waits for an answer
    assert info.notified[1].code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and info.notified[1].is_oneway


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
