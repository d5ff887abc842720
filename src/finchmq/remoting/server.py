"""``RemotingServer``: accepts connections and routes their requests to processors.

Strategy:
    ``loop.create_server`` with one ``RemotingConnection`` per client. Requests go through the
    server's ``RequestDispatcher`` (bounded executors, SYSTEM_BUSY on overload). The server can
    call a connected client (``invoke``/``invoke_oneway``, bounded by
    ``server_async_semaphore_value``/``server_oneway_semaphore_value``), e.g.
    NOTIFY_CONSUMER_IDS_CHANGED. ``close()`` is idempotent: it stops accepting, closes every
    connection (failing their pending calls), stops the executors and waits for all of it.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from finchmq.protocol.command import RemotingCommand

from ._endpoint import RemotingEndpoint
from ._idle import close_all
from ._permits import acquire_permit
from .channel import Channel, ChannelEventListener
from .config import RemotingServerConfig
from .connection import RemotingConnection

__all__ = ["RemotingServer"]

log = logging.getLogger(__name__)


class RemotingServer(RemotingEndpoint):
    """A RocketMQ remoting server on ``bind_address:listen_port`` (port 0 picks a free one)."""

    def __init__(
        self,
        config: RemotingServerConfig | None = None,
        *,
        listener: ChannelEventListener | None = None,
        name: str = "remoting-server",
    ) -> None:
        super().__init__(name, listener)
        self.config = config or RemotingServerConfig()
        self._server: asyncio.Server | None = None
        self._connections: set[RemotingConnection] = set()
        self._async_semaphore: asyncio.Semaphore | None = None
        self._oneway_semaphore: asyncio.Semaphore | None = None
        self.port = 0

    @property
    def connections(self) -> frozenset[RemotingConnection]:
        return frozenset(self._connections)

    async def start(self) -> None:
        if self._server is not None:
            return
        if self._closed:
            raise RuntimeError(f"{self.name} is closed and cannot be restarted")
        loop = asyncio.get_running_loop()
        self._async_semaphore = asyncio.Semaphore(self.config.server_async_semaphore_value)
        self._oneway_semaphore = asyncio.Semaphore(self.config.server_oneway_semaphore_value)
        self.dispatcher.start()
        self._server = await loop.create_server(
            self._make_connection,
            host=self.config.bind_address,
            port=self.config.listen_port,
            family=socket.AF_INET if ":" not in self.config.bind_address else socket.AF_UNSPEC,
            reuse_address=True,
            backlog=self.config.server_socket_backlog,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._start_idle_scan(lambda: self._connections, self.config.server_channel_max_idle_time_seconds)
        log.info("%s listening on %s:%d", self.name, self.config.bind_address, self.port)

    def _make_connection(self) -> RemotingConnection:
        conn = RemotingConnection(
            dispatcher=self.dispatcher,
            listener=self._listener,
            max_frame_size=self.config.max_frame_size,
            on_lost=self._connections.discard,
        )
        self._connections.add(conn)
        return conn

    async def invoke(self, conn: Channel, request: RemotingCommand, timeout_millis: int) -> RemotingCommand:
        """Call a client (any ``Channel`` of this server's) and wait for its answer."""
        assert self._async_semaphore is not None, "server not started"
        await acquire_permit(
            self._async_semaphore, timeout_millis, "server_async_semaphore_value", conn.remote_addr
        )
        try:
            return await conn.invoke(request, timeout_millis / 1000)
        finally:
            self._async_semaphore.release()

    async def invoke_oneway(self, conn: Channel, request: RemotingCommand, timeout_millis: int) -> None:
        """Send a oneway request to a connected client (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        assert self._oneway_semaphore is not None, "server not started"
        await acquire_permit(
            self._oneway_semaphore, timeout_millis, "server_oneway_semaphore_value", conn.remote_addr
        )
        try:
            await conn.send_oneway(request)
        finally:
            self._oneway_semaphore.release()

    async def close(self) -> None:
        """Stop accepting, close every connection and stop the executors (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._tasks.close()
        if self._server is not None:
            self._server.close()
        await close_all(self._connections)
        if self._server is not None:
            await self._server.wait_closed()
        await self.dispatcher.close()
        log.info("%s on port %d closed", self.name, self.port)
