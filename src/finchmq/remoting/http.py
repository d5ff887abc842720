"""``MetricsHttpServer``: a tiny HTTP/1.1 server on the running event loop, for ``GET /metrics``.

Serves one path (``/metrics`` by default) with GET and HEAD; anything else gets 404 (another
path) or 405 (another method), a malformed request 400. Keep-alive as HTTP/1.1 says (closed on
``Connection: close`` and for HTTP/1.0 unless it asks to keep the connection). The body comes
from a synchronous callable run on the loop between other work, once per scrape.

A client cannot hurt the server it lives in: at most ``max_connections`` at once (more are
closed at accept), a request head of at most 8 KiB read within ``read_timeout`` seconds, a
request body is never read (a request announcing one is answered 400 and closed), an idle
keep-alive connection closes after ``idle_timeout``, and a peer that does not read its answer
is dropped once the write has waited ``read_timeout``. A failing body callable answers 500 and
is logged, rate-limited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from finchmq.common.logs import RateLimitedLog
from finchmq.common.tasks import BackgroundTasks

__all__ = ["MetricsHttpServer"]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

_MAX_HEAD = 8192
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}


class MetricsHttpServer:
    """``await start()`` to listen on ``host:port`` (0 = a free port, see ``port``), ``await close()``."""

    def __init__(
        self,
        host: str,
        port: int,
        body: Callable[[], bytes],
        *,
        content_type: str,
        path: str = "/metrics",
        name: str = "metrics",
        max_connections: int = 64,
        read_timeout: float = 10.0,
        idle_timeout: float = 60.0,
    ) -> None:
        self.host = host
        self._port = port
        self.body = body
        self.content_type = content_type
        self.path = path
        self.name = name
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self._server: asyncio.Server | None = None
        self._connections = 0
        self._tasks = BackgroundTasks(f"{name}-http")

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one picked for port 0)."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    @property
    def url(self) -> str:
        host = self.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}{self.path}"

    async def start(self) -> None:
        """Listen; raises ``OSError`` (e.g. the port is in use) naming the address."""
        try:
            self._server = await asyncio.start_server(
                self._accept, self.host or None, self._port, reuse_address=True, limit=_MAX_HEAD
            )
        except OSError as exc:
            where = f"{self.host}:{self._port}"
            raise OSError(
                exc.errno, f"{self.name} endpoint cannot listen on {where}: {exc.strerror}"
            ) from None
        log.info("%s served at %s", self.name, self.url)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self._tasks.close()  # open connections are cancelled; each closes its socket
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._connections >= self.max_connections or self._server is None:
            writer.close()
            return
        self._connections += 1  # released when _serve ends
        self._tasks.spawn(self._serve(reader, writer), "connection")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = True
            while True:
                try:
                    head = await asyncio.wait_for(
                        reader.readuntil(b"\r\n\r\n"), self.read_timeout if first else self.idle_timeout
                    )
                except asyncio.LimitOverrunError:
                    await self._answer(writer, 400, b"request head too large\n", keep_alive=False)
                    return
                except (asyncio.IncompleteReadError, TimeoutError):
                    return
                first = False
                keep_alive = await self._handle(writer, head)
                if not keep_alive:
                    return
        except (ConnectionError, TimeoutError):
            return
        except Exception as exc:
            limited.log(logging.ERROR, "http", "%s HTTP connection failed", self.name, exc_info=exc)
        finally:
            self._connections -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _handle(self, writer: asyncio.StreamWriter, head: bytes) -> bool:
        """Answer one request; True to keep the connection open."""
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
        except ValueError:
            await self._answer(writer, 400, b"malformed request line\n", keep_alive=False)
            return False
        if not version.startswith("HTTP/1."):
            await self._answer(writer, 400, b"unsupported HTTP version\n", keep_alive=False)
            return False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                await self._answer(writer, 400, b"malformed header\n", keep_alive=False)
                return False
            headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        if headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers:
            await self._answer(writer, 400, b"a request body is not accepted\n", keep_alive=False)
            return False
        path = target.split("?", 1)[0]
        if path != self.path:
            await self._answer(writer, 404, f"not found; metrics are at {self.path}\n".encode(), keep_alive)
            return keep_alive
        if method not in ("GET", "HEAD"):
            await self._answer(writer, 405, b"use GET or HEAD\n", keep_alive, allow="GET, HEAD")
            return keep_alive
        try:
            body = self.body()
        except Exception as exc:
            limited.log(logging.ERROR, "body", "%s: collecting metrics failed", self.name, exc_info=exc)
            await self._answer(writer, 500, b"collecting metrics failed; see the server log\n", keep_alive)
            return keep_alive
        await self._answer(
            writer, 200, body, keep_alive, content_type=self.content_type, head=method == "HEAD"
        )
        return keep_alive

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        keep_alive: bool,
        *,
        content_type: str = "text/plain; charset=utf-8",
        head: bool = False,
        allow: str | None = None,
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {_REASONS[status]}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
        ]
        if allow is not None:
            lines.append(f"Allow: {allow}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head:
            writer.write(body)
        await asyncio.wait_for(writer.drain(), self.read_timeout)
