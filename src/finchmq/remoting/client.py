"""``RemotingClient``: a connection per address, created on demand, and the three ways to call.

Strategy:
    ``invoke`` awaits the answer (Java invokeSync); ``invoke_async`` returns at once with a future
    and an optional callback (Java invokeAsync) and ``invoke_oneway`` expects no answer; those two
    are bounded by ``client_async_semaphore_value``/``client_oneway_semaphore_value`` and raise
    ``RemotingTooMuchRequestError`` when no permit frees up within the timeout. Connections are
    created on first use (concurrent callers share one connect), replaced when they close, and
    closed after ``client_channel_max_idle_time_seconds`` without traffic. Servers may call the
    client: register processors on ``dispatcher`` (e.g. NOTIFY_CONSUMER_IDS_CHANGED). An
    ``rpc_hook`` (Java ``RPCHook.doBeforeRequest``) rewrites every request before it is sent, e.g.
    to sign it for the broker's ACL. With ``use_tls`` (Java ``useTLS``/``tls.enable``) every
    connection runs TLS with the ``tls.client.*`` settings (``tls.py``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable

from finchmq.protocol.command import RemotingCommand

from ._endpoint import RemotingEndpoint
from ._idle import close_all
from ._permits import acquire_permit
from .channel import ChannelEventListener
from .config import RemotingClientConfig
from .connection import CloseReason, RemotingConnection
from .errors import RemotingConnectError, RemotingError, RemotingTimeoutError

__all__ = ["InvokeCallback", "RemotingClient", "RpcHook", "parse_addr"]

log = logging.getLogger(__name__)

# Why a server may close a plain connection without a word: Java's and finchmq's servers do so to
# a plain client when tls.server.mode=enforcing (HandshakeHandler).
_PLAIN_REFUSED = (
    "a server with tls.server.mode=enforcing closes plain (non-TLS) connections; if it is one, "
    "connect with TLS (tls.enable=true, finchmq's use_tls=True)"
)

InvokeCallback = Callable[["RemotingCommand | None", "BaseException | None"], None]
"""Called with ``(response, None)`` or ``(None, error)`` when an async call finishes."""

RpcHook = Callable[[str, RemotingCommand], RemotingCommand]
"""Called with ``(address, request)`` before a request is sent; returns the request to send."""


def parse_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) to a tuple; ``ValueError`` naming the address."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)


class RemotingClient(RemotingEndpoint):
    """Client side of the remoting protocol; one connection per server address."""

    def __init__(
        self,
        config: RemotingClientConfig | None = None,
        *,
        listener: ChannelEventListener | None = None,
        name: str = "remoting-client",
        rpc_hook: RpcHook | None = None,
    ) -> None:
        super().__init__(name, listener)
        self.config = config or RemotingClientConfig()
        self.rpc_hook = rpc_hook
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._async_semaphore = asyncio.Semaphore(self.config.client_async_semaphore_value)
        self._oneway_semaphore = asyncio.Semaphore(self.config.client_oneway_semaphore_value)
        self._started = False
        # raises TlsConfigError (naming the setting) for a certificate that cannot be loaded
        self._ssl_context = self.config.tls.client_context() if self.config.use_tls else None

    async def start(self) -> None:
        """Start the executors and the idle scan (also done by the first call)."""
        if self._started:
            return
        if self._closed:
            raise RuntimeError(f"{self.name} is closed and cannot be restarted")
        self._started = True
        self.dispatcher.start()
        self._start_idle_scan(self._connections.values, self.config.client_channel_max_idle_time_seconds)

    # -- connections ------------------------------------------------------------------------

    async def get_connection(self, addr: str) -> RemotingConnection:
        """The open connection to ``addr``, connecting if needed.

        Raises:
            RemotingConnectError: the address is unreachable within ``connect_timeout_millis``.
        """
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn
        if self._closed:
            raise RemotingConnectError(f"{self.name} is closed", addr)
        if not self._started:
            await self.start()
        pending = self._connecting.get(addr)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._connecting[addr] = pending
            self._tasks.spawn(self._connect(addr, pending), f"connect-{addr}")
        return await asyncio.shield(pending)

    async def _connect(self, addr: str, result: asyncio.Future[RemotingConnection]) -> None:
        loop = asyncio.get_running_loop()
        try:
            host, port = parse_addr(addr)
            async with asyncio.timeout(self.config.connect_timeout_millis / 1000):
                _, conn = await loop.create_connection(
                    lambda: RemotingConnection(
                        dispatcher=self.dispatcher,
                        listener=self._listener,
                        max_frame_size=self.config.max_frame_size,
                        on_lost=lambda c: self._forget(addr, c),
                        silent_close_hint=None if self._ssl_context is not None else _PLAIN_REFUSED,
                    ),
                    host,
                    port,
                    ssl=self._ssl_context,
                )
        except (OSError, TimeoutError, ValueError) as exc:
            detail = "timed out" if isinstance(exc, TimeoutError) else str(exc)
            if self._ssl_context is not None and isinstance(exc, (ssl.SSLError, ConnectionResetError)):
                detail = (
                    f"TLS handshake failed: {detail} (does the server serve TLS, see tls.server.mode; "
                    "does it trust this client, see tls.client.certPath/keyPath?)"
                )
            error = RemotingConnectError(f"connect to {addr} failed: {detail}", addr)
            error.__cause__ = exc
            if not result.done():
                result.set_exception(error)
            result.exception()  # mark retrieved: a caller may have given up waiting
        except BaseException as exc:
            if not result.done():
                result.set_exception(RemotingConnectError(f"connect to {addr} cancelled", addr))
                result.exception()
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            if self._closed:
                conn.close(CloseReason.SHUTDOWN)
                result.set_exception(RemotingConnectError(f"{self.name} closed while connecting", addr))
                result.exception()
            else:
                self._connections[addr] = conn
                result.set_result(conn)
        finally:
            if self._connecting.get(addr) is result:
                del self._connecting[addr]

    def _forget(self, addr: str, conn: RemotingConnection) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr`` if there is one (its pending calls fail)."""
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close(CloseReason.SHUTDOWN)

    @property
    def connected_addrs(self) -> list[str]:
        return [addr for addr, conn in self._connections.items() if conn.is_open]

    # -- calls ------------------------------------------------------------------------------

    def invoke(self, addr: str, request: RemotingCommand, timeout_millis: int) -> Awaitable[RemotingCommand]:
        """Send ``request`` to ``addr``; await the result for the response.

        The timeout covers connecting and waiting, as Java's invokeSync does.

        Raises:
            RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError.
        """
        if self.rpc_hook is not None:
            request = self.rpc_hook(addr, request)
        conn = self._connections.get(addr)
        if conn is not None and conn.is_open:
            return conn.invoke(request, timeout_millis / 1000)  # no extra coroutine on the hot path
        return self._connect_and_invoke(addr, request, timeout_millis)

    async def _connect_and_invoke(
        self, addr: str, request: RemotingCommand, timeout_millis: int
    ) -> RemotingCommand:
        began = time.monotonic()
        conn = await self.get_connection(addr)
        remaining = timeout_millis / 1000 - (time.monotonic() - began)
        if remaining <= 0:
            raise RemotingTimeoutError(
                f"invoke to {addr} timed out while connecting ({timeout_millis}ms)", addr
            )
        return await conn.invoke(request, remaining)

    async def invoke_async(
        self,
        addr: str,
        request: RemotingCommand,
        timeout_millis: int,
        callback: InvokeCallback | None = None,
    ) -> asyncio.Future[RemotingCommand]:
        """Send ``request`` and return a future of its response without waiting for it.

        Raises (at once):
            RemotingTooMuchRequestError: no permit within ``timeout_millis``.
        """
        began = time.monotonic()
        await acquire_permit(self._async_semaphore, timeout_millis, "client_async_semaphore_value", addr)
        remaining = max(timeout_millis - int((time.monotonic() - began) * 1000), 1)
        task = asyncio.ensure_future(self.invoke(addr, request, remaining))

        def done(t: asyncio.Task[RemotingCommand]) -> None:
            self._async_semaphore.release()
            if t.cancelled():
                error: BaseException | None = RemotingError(f"async invoke to {addr} cancelled", addr)
            else:
                error = t.exception()
            if callback is not None:
                try:
                    callback(None if error else t.result(), error)
                except Exception:
                    log.exception("invoke callback for %s failed", addr)

        task.add_done_callback(done)
        return task

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout_millis: int) -> None:
        """Send ``request`` with the ONEWAY flag; returns once it is written.

        Raises:
            RemotingTooMuchRequestError, RemotingConnectError, RemotingSendRequestError.
        """
        await acquire_permit(self._oneway_semaphore, timeout_millis, "client_oneway_semaphore_value", addr)
        try:
            if self.rpc_hook is not None:
                request = self.rpc_hook(addr, request)
            conn = await self.get_connection(addr)
            await conn.send_oneway(request)
        finally:
            self._oneway_semaphore.release()

    # -- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every connection (failing pending calls) and stop background work; idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._tasks.close()
        connections = list(self._connections.values())
        self._connections.clear()
        await close_all(connections)
        await self.dispatcher.close()
