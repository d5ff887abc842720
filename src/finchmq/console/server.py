"""``Console``: the web console served by uvicorn on the caller's event loop (``finchmq
console`` runs one alone; ``finchmq server`` runs one beside its name server and broker).

The listening socket is bound here, before uvicorn starts, so a busy port is an ``OSError``
the caller reports (uvicorn itself would exit the process) and port 0 takes a free port.
Signals stay with the host process: uvicorn's own handlers are not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Generator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from finchmq.common.tasks import BackgroundTasks

from .app import create_app
from .auth import DEFAULT_SESSION_TIMEOUT, Auth, is_loopback
from .history import SampleFile
from .sampler import Sampler
from .service import ConsoleService

__all__ = ["Console"]

log = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the host process owns SIGINT and SIGTERM


class Console:
    """The web console of the cluster whose name servers are ``namesrv_addr``, on
    ``host:port`` (port 0: a free one; ``url`` says which once started).

    With ``users_file`` (see ``auth``) every page needs a login and sessions end after
    ``session_timeout`` seconds without a request; without it the console has no login and
    listens on a loopback address only (``ValueError`` otherwise, as for a bad accounts file).
    With ``data_dir`` the charts' samples are kept there too (``history``), so a console
    restarted with the same directory shows the last ``sample_window`` seconds again."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        port: int,
        host: str = "127.0.0.1",
        sample_interval: float = 10.0,
        sample_window: float = 3600.0,
        client_options: Mapping[str, Any] | None = None,
        users_file: Path | None = None,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        data_dir: Path | None = None,
    ) -> None:
        if users_file is None and not is_loopback(host):
            raise ValueError(
                f"refusing to serve the console on {host}: without a login anyone who reaches it could "
                "change the cluster; give an accounts file (finchmq console-user add NAME --role admin "
                "--users FILE, then --users FILE) or listen on 127.0.0.1"
            )
        self.auth = None if users_file is None else Auth(users_file, timeout=session_timeout)
        self.namesrv_addr = namesrv_addr
        self.host = host
        self.port = port
        self.service = ConsoleService(
            namesrv_addr,
            instance_name=f"finchmq-console-{os.getpid()}-{id(self)}",
            client_options=client_options,  # e.g. use_tls/tls for a TLS cluster
        )
        self.data_dir = data_dir
        history = SampleFile(data_dir) if data_dir is not None else None
        self.sampler = Sampler(
            self.service.admin, interval=sample_interval, window=sample_window, history=history
        )
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._tasks = BackgroundTasks("console")
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """``http://host:port/`` to open (``localhost`` when listening on every address)."""
        host = "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}/"

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    async def start(self) -> None:
        """Bind the port (``OSError`` if taken), connect to the cluster, start sampling and
        serving."""
        sock = self._bind()
        self._socket = sock
        self.port = sock.getsockname()[1]
        try:
            await self.service.start()
            await self.sampler.restore()
            self.sampler.start()
            config = uvicorn.Config(
                create_app(self.service, self.sampler, self.auth),
                log_config=None,
                access_log=False,
                lifespan="off",
                ws="none",
                timeout_graceful_shutdown=2,
            )
            server = self._server = _Server(config)
            self._task = self._tasks.spawn(server.serve(sockets=[sock]), "http")
            while not server.started:  # uvicorn says when it serves; a failure ends the task
                if self._task.done():
                    self._task.result()
                    raise RuntimeError("the console's web server stopped during start-up")
                await asyncio.sleep(0.01)
        except BaseException:
            await self.close()
            raise
        log.info("finchmq console at %s for name servers %s", self.url, self.namesrv_addr)

    async def close(self) -> None:
        """Stop serving and sampling, disconnect; idempotent."""
        if self._server is not None:
            self._server.should_exit = True
        task, self._task = self._task, None
        if task is not None:  # uvicorn finishes the requests in flight, then returns
            await asyncio.wait([task])  # a failure is logged by the task supervisor
        await self._tasks.close()
        self._server = None
        await self.sampler.close()
        await self.service.close()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def __aenter__(self) -> Console:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
