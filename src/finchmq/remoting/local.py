"""``LocalChannel``: a peer inside the process, served by the same processors as a socket.

A front end for another protocol (RocketMQ 5.x's gRPC ``MessagingService``, which Java's proxy
serves in "local" mode by handing remoting commands to the broker's processors in-process)
builds ``RemotingCommand`` requests itself and ``call``s them through a dispatcher, as a TCP
connection's frames are: the same ``@handles`` routes, executors, flow control, ACL hook and
answers. A ``trusted`` channel skips the dispatcher's ``before_request`` hook (the broker's ACL):
Java's local proxy calls ``processRequest`` directly, having authenticated its gRPC callers itself.
What the server sends to the peer (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO...) goes to the front end's ``on_request``, which translates it for its
own client, as Java's proxy turns them into telemetry commands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from finchmq.protocol.command import FLAG_RESPONSE, RemotingCommand

from .channel import RemotingContext, next_opaque
from .connection import RequestSink
from .errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError

__all__ = ["LocalChannel", "PeerRequestHandler"]

log = logging.getLogger(__name__)

PeerRequestHandler = Callable[[RemotingCommand], Coroutine[Any, Any, RemotingCommand | None]]
"""What the server asks of the peer: the peer's answer (None for none, or for a oneway request)."""


class LocalChannel:
    """A ``Channel`` whose peer is code in this process (see the module docstring)."""

    def __init__(
        self,
        dispatcher: RequestSink,
        remote_addr: str,
        on_request: PeerRequestHandler | None = None,
        *,
        trusted: bool = False,
    ) -> None:
        self._dispatcher = dispatcher
        self._on_request = on_request
        self._ctx = RemotingContext(self, trusted=trusted)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._open = True
        self._peer_tasks: set[asyncio.Task[RemotingCommand | None]] = set()
        self._calls = 0
        self.remote_addr = remote_addr

    def __repr__(self) -> str:
        state = "open" if self._open else "closed"
        return f"<LocalChannel {self.remote_addr} {state} calls={self._calls}>"

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
        self._calls += 1
        try:
            async with asyncio.timeout(timeout):
                await self._wait_resumed()
                opaque = next_opaque()
                future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
                self._pending[opaque] = future
                try:
                    self._dispatcher.dispatch(self._ctx, request.with_opaque(opaque))
                    return await future
                finally:
                    self._pending.pop(opaque, None)
        except TimeoutError:
            raise RemotingTimeoutError(
                f"no answer to code {request.code} on {self.remote_addr} within {int(timeout * 1000)} ms",
                self.remote_addr,
            ) from None
        finally:
            self._calls -= 1

    @property
    def calls_in_flight(self) -> int:
        """Our calls not answered yet, those waiting out a pause included."""
        return self._calls

    async def call_oneway(self, request: RemotingCommand) -> None:
        """Dispatch ``request`` with the ONEWAY flag (after any pause): nothing is answered."""
        await self._wait_resumed()
        self._dispatcher.dispatch(self._ctx, request.with_opaque(next_opaque(), oneway=True))

    async def _wait_resumed(self) -> None:
        self._check_open()
        if not self._resumed.is_set():
            await self._resumed.wait()
            self._check_open()

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
        self._to_peer(cmd)

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """The server calls the peer: ``on_request``'s answer, within ``timeout`` s.

        Raises:
            RemotingTimeoutError: no answer in time.
            RemotingConnectError: the channel closed first.
            RemotingSendRequestError: the peer takes no requests, or gave no answer.
        """
        task = self._to_peer(request)
        if task is None:
            raise RemotingSendRequestError(
                f"local channel {self.remote_addr} takes no requests (code {request.code})", self.remote_addr
            )
        try:
            async with asyncio.timeout(timeout):
                response = await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            raise RemotingTimeoutError(
                f"wait response on the channel <{self.remote_addr}> timeout, {int(timeout * 1000)}(ms)",
                self.remote_addr,
            ) from None
        except asyncio.CancelledError:
            if task.cancelled() and not self._open:  # closed under the call, as a socket dropped
                raise self._closed_error() from None
            raise
        if response is None:
            raise RemotingSendRequestError(
                f"local channel {self.remote_addr} did not answer code {request.code}", self.remote_addr
            )
        return response

    async def send_oneway(self, request: RemotingCommand) -> None:
        """Hand ``request`` to the peer (ONEWAY); returns without waiting for the peer."""
        self._to_peer(request.with_opaque(next_opaque(), oneway=True))

    def _to_peer(self, request: RemotingCommand) -> asyncio.Task[RemotingCommand | None] | None:
        self._check_open()
        if self._on_request is None:
            return None
        task = asyncio.get_running_loop().create_task(self._on_request(request))
        self._peer_tasks.add(task)
        task.add_done_callback(self._peer_done)
        return task

    def _peer_done(self, task: asyncio.Task[RemotingCommand | None]) -> None:
        self._peer_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # invoke's caller sees it too
            log.warning("the peer of %s failed on a request: %r", self.remote_addr, task.exception())

    def pause_requests(self) -> None:
        self._resumed.clear()

    def resume_requests(self) -> None:
        self._resumed.set()

    def close(self) -> None:
        """Close (idempotent): our calls still waiting fail with ``RemotingConnectError``, and
        the server's calls to the peer still running are cancelled (and fail the same way)."""
        if not self._open:
            return
        self._open = False
        self._resumed.set()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(self._closed_error())
        for task in list(self._peer_tasks):
            task.cancel()

    def _closed_error(self) -> RemotingConnectError:
        return RemotingConnectError(f"local channel {self.remote_addr} closed", self.remote_addr)

    def _check_open(self) -> None:
        if not self._open:
            raise RemotingConnectError(f"local channel {self.remote_addr} is closed", self.remote_addr)
