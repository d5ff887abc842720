"""``RemotingServer``: accepts connections and routes their requests to processors.

Strategy:
    ``loop.create_server`` with one ``RemotingConnection`` per client. Requests go through the
    server's ``RequestDispatcher`` (bounded executors, SYSTEM_BUSY on overload). The server can
    call a connected client (``invoke``/``invoke_oneway``, bounded by
    ``server_async_semaphore_value``/``server_oneway_semaphore_value``), e.g.
    NOTIFY_CONSUMER_IDS_CHANGED. A connection's first bytes are sniffed (Java's
    ``HandshakeHandler``): a TLS handshake (``0x16``) or a remoting frame, served or refused by
    ``tls.server.mode`` (``tls.py``); a TLS connection's transport is replaced by the TLS one.
    ``close()`` is idempotent: it stops accepting, closes every connection (failing their
    pending calls), stops the executors and waits for all of it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from finchmq.protocol.command import RemotingCommand

from ._endpoint import RemotingEndpoint
from ._idle import close_all
from ._permits import acquire_permit
from .channel import Channel, ChannelEventListener
from .config import RemotingServerConfig
from .connection import CloseReason, RemotingConnection
from .tls import TLS_HANDSHAKE_BYTE, TlsConfigError, TlsMode, self_signed_server_context, start_server_tls

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
        self._ssl_context: ssl.SSLContext | None = None
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
        tls = self.config.tls
        if tls.server_mode is not TlsMode.DISABLED and not tls.test_mode_enable:
            self._ssl_context = tls.server_context()  # raises TlsConfigError naming the setting
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
        log.info(
            "%s listening on %s:%d (TLS %s)",
            self.name,
            self.config.bind_address,
            self.port,
            tls.server_mode.value,
        )

    def _sniff(self, conn: RemotingConnection, transport: asyncio.Transport, data: bytes) -> bool:
        """A connection's first bytes: true if TLS took them or the connection is refused."""
        mode = self.config.tls.server_mode
        if data[0] != TLS_HANDSHAKE_BYTE:
            if mode is not TlsMode.ENFORCING:
                return False
            self._refuse(
                conn, "a plain (non-TLS) client connected but this server has tls.server.mode=enforcing"
            )
            return True
        if mode is TlsMode.DISABLED:
            self._refuse(conn, "a client began a TLS handshake but this server has tls.server.mode=disabled")
            return True
        if self._ssl_context is not None:
            self._start_tls(conn, transport, self._ssl_context, data)
        else:  # test mode: the self-signed certificate is made once, off the loop
            transport.pause_reading()
            self._tasks.spawn(self._start_test_tls(conn, transport, data), f"tls-{conn.remote_addr}")
        return True

    async def _start_test_tls(
        self, conn: RemotingConnection, transport: asyncio.Transport, data: bytes
    ) -> None:
        try:
            self._ssl_context = await asyncio.to_thread(self_signed_server_context)
        except TlsConfigError as exc:
            self._refuse(conn, f"cannot serve a TLS client: {exc}")
            return
        if not transport.is_closing():
            transport.resume_reading()
            self._start_tls(conn, transport, self._ssl_context, data)

    def _start_tls(
        self, conn: RemotingConnection, transport: asyncio.Transport, context: ssl.SSLContext, data: bytes
    ) -> None:
        def done(exc: BaseException | None) -> None:
            if exc is None:
                return
            if not self._closed and conn.close_reason is None:
                log.warning(
                    "%s: TLS handshake with %s failed: %s", self.name, conn.remote_addr, _describe(exc)
                )
            if conn.close_reason is None:
                conn.close(CloseReason.PROTOCOL_ERROR)
            conn.connection_lost(exc if isinstance(exc, Exception) else None)  # TLS never made it

        start_server_tls(
            transport,
            conn,
            context,
            data,
            handshake_timeout=self.config.tls_handshake_timeout_seconds,
            on_done=done,
        )

    def _refuse(self, conn: RemotingConnection, why: str) -> None:
        log.warning("%s: closing the connection from %s: %s", self.name, conn.remote_addr, why)
        conn.close(CloseReason.PROTOCOL_ERROR)

    def _make_connection(self) -> RemotingConnection:
        conn = RemotingConnection(
            dispatcher=self.dispatcher,
            listener=self._listener,
            max_frame_size=self.config.max_frame_size,
            on_lost=self._connections.discard,
            first_bytes=self._sniff,
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


def _describe(exc: BaseException) -> str:
    """A failed handshake in words, with the setting to look at."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"the client's certificate is not trusted ({exc.verify_message}); "
            "tls.server.trustCertPath must hold the CA that signed it"
        )
    if isinstance(exc, ssl.SSLError):
        if exc.reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client sent no certificate (tls.server.need.client.auth=require; tls.client.certPath)"
        return f"{exc.reason or exc}"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return (
            "the client closed the connection during the handshake "
            "(does it trust this server's certificate? tls.client.trustCertPath)"
        )
    if isinstance(exc, TimeoutError):
        return "no handshake within tls_handshake_timeout_seconds"
    return str(exc) or type(exc).__name__
