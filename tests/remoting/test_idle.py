"""Idle connections (``_idle.py``): closed by whichever side has its idle time set, with the
listener told."""

from __future__ import annotations

from finchmq.protocol import RemotingCommand
from finchmq.remoting import (
    Channel,
    ExecutorName,
    RemotingClient,
    RemotingClientConfig,
    RemotingServer,
    RequestExecutor,
)
from tests.remoting.conftest import ECHO, Echo, addr, by_name, server_config
from tests.waiting import eventually


class Events:
    """A ``ChannelEventListener`` that logs what it is told."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def on_channel_connect(self, channel: Channel) -> None:
        self.log.append(("connect", channel.remote_addr))

    def on_channel_close(self, channel: Channel) -> None:
        self.log.append(("close", channel.remote_addr))

    def on_channel_exception(self, channel: Channel, exc: BaseException) -> None:
        self.log.append(("exception", channel.remote_addr))

    def on_channel_idle(self, channel: Channel) -> None:
        self.log.append(("idle", channel.remote_addr))


def echo_server(server: RemotingServer) -> RemotingServer:
    server.register_processor(Echo(), by_name(RequestExecutor(ExecutorName.SEND, workers=1, capacity=10)))
    return server


async def test_idle_connections_are_closed_on_both_sides() -> None:
    events = Events()
    server = echo_server(
        RemotingServer(server_config(server_channel_max_idle_time_seconds=0.3), listener=events)
    )
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
    server = echo_server(RemotingServer(server_config()))
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
