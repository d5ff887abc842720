"""``LocalChannel``: a peer inside the process, served by the same processors as a socket.

A front end for another protocol (RocketMQ 5.x's gRPC ``MessagingService``, which Java's proxy
serves in "local" mode by handing remoting commands to the broker's processors in-process)
builds ``RemotingCommand`` requests itself and ``call``s them through a dispatcher, as a TCP
connection's frames are: the same ``@handles`` routes, executors, flow control, ACL hook and
answers. What the server sends to the peer (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO...) goes to the front end's ``on_request``, which translates it for its
own client, as Java's proxy turns them into telemetry commands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from finchmq.protocol.command import FLAG_RESPONSE, RemotingCommand

from .channel import RemotingContext, next_opaque
from .connection import RequestSink
from .errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError

__all__ = ["LocalChannel", "PeerRequestHandler"]

PeerRequestHandler = Callable[[RemotingCommand], Coroutine[Any, Any, RemotingCommand | None]]
"""What the server asks of the peer: the peer's answer (None for none, or for a oneway request)."""


class LocalChannel:
    """A ``Channel`` whose peer is code in this process (see the module docstring)."""

    def __init__(
        self,
        dispatcher: RequestSink,
        remote_addr: str,
        on_request: PeerRequestHandler | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._on_request = on_request
        self._ctx = RemotingContext(self)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._open = True
        self._peer_tasks: set[asyncio.Task[RemotingCommand | None]] = set()
        self.remote_addr = remote_addr

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return f"<LocalChannel {self.remote_addr} {state} pending={len(self._pending)}>"

    @property
    def is_open(self) -> bool:
        return self._open

    async def call(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Dispatch ``request`` (given a fresh opaque) and wait up to ``timeout`` s for its answer.

        Waits first while an executor holds this channel paused (its queue was full), as a
        socket's peer waits on TCP.

        Raises:
            RemotingTimeoutError: no answer in time.
            RemotingConnectError: the channel was closed first.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        opaque = next_opaque()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = future
        try:
            async with asyncio.timeout(timeout):
                if not self._resumed.is_set():
                    await self._resumed.wait()
                self._check_open()
                self._dispatcher.dispatch(self._ctx, request.with_opaque(opaque))
                return await future
        except TimeoutError:
            raise RemotingTimeoutError(
                f"no answer to code {request.code} on {self.remote_addr} within {int(timeout * 1000)} ms",
                self.remote_addr,
            ) from None
        finally:
            self._pending.pop(opaque, None)

    def call_oneway(self, request: RemotingCommand) -> None:
        """Dispatch ``request`` with the ONEWAY flag: nothing is answered."""
        self._check_open()
        self._dispatcher.dispatch(self._ctx, request.with_opaque(next_opaque(), oneway=True))

    # -- Channel: what the server's side does ------------------------------------------------

    def send_command(self, cmd: RemotingCommand) -> None:
        """A response to one of our calls completes it; a request goes to ``on_request``."""
        if not self._open:
            raise RemotingSendRequestError(f"local channel {self.remote_addr} is closed", self.remote_addr)
        if cmd.flag & FLAG_RESPONSE:
            future = self._pending.pop(cmd.opaque, None)
            if future is not None and not future.done():
                future.set_result(cmd)
            return
        if self._on_request is not None:
            task = asyncio.get_running_loop().create_task(self._on_request(cmd))
            self._peer_tasks.add(task)
            task.add_done_callback(self._peer_tasks.discard)

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """The server calls the peer: ``on_request``'s answer, within ``timeout`` s."""
        self._check_open()
        if self._on_request is None:
            raise RemotingSendRequestError(
                f"local channel {self.remote_addr} takes no requests (code {request.code})", self.remote_addr
            )
        try:
            async with asyncio.timeout(timeout):
                response = await self._on_request(request)
        except TimeoutError:
            raise RemotingTimeoutError(
                f"wait response on the channel <{self.remote_addr}> timeout, {int(timeout * 1000)}(ms)",
                self.remote_addr,
            ) from None
        if response is None:
            raise RemotingSendRequestError(
                f"local channel {self.remote_addr} did not answer code {request.code}", self.remote_addr
            )
        return response

    async def send_oneway(self, request: RemotingCommand) -> None:
        self._check_open()
        if self._on_request is not None:
            await self._on_request(request.with_opaque(next_opaque(), oneway=True))

    def pause_requests(self) -> None:
        self._resumed.clear()

    def resume_requests(self) -> None:
        self._resumed.set()

    def close(self) -> None:
        """Close (idempotent): calls still waiting fail with ``RemotingConnectError``."""
        if not self._open:
            return
        self._open = False
        self._resumed.set()
        error = RemotingConnectError(f"local channel {self.remote_addr} closed", self.remote_addr)
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        for task in self._peer_tasks:
            task.cancel()

    def _check_open(self) -> None:
        if not self._open:
            raise RemotingConnectError(f"local channel {self.remote_addr} is closed", self.remote_addr)
