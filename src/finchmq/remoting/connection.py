"""``RemotingConnection``: one TCP stream carrying many requests at once, in both directions.

Strategy:
    An ``asyncio.Protocol`` (no streams: one callback per chunk, no reader task) around a
    ``RemotingCodec``. Incoming responses complete the future registered under their opaque
    (RocketMQ's ``responseTable``: answers may come in any order); incoming requests go to the
    owner's ``RequestDispatcher`` (a ``RequestSink``). The answers given while the frames of one
    read are processed go out in one write at its end (every 16 frames at most); other outgoing
    frames are gathered and written once per loop iteration with ``writelines``. When the peer
    stops reading, the transport's high-water mark pauses our reading (servers stop taking
    requests from a client that does not take answers) and ``drain()`` waits. An executor whose
    queue is full may also pause the requests of a connection (``pause_requests``): frames already
    read wait undecoded in the codec and TCP pushes back on the peer, so an overloaded server
    spends its CPU on the requests it can serve instead of decoding and refusing the rest. Bad
    bytes close this connection only. ``close()`` is idempotent and fails every pending call with
    ``RemotingConnectError`` naming the address and the reason.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import socket
import time
from collections import deque
from typing import Protocol

from finchmq.protocol.codec import RemotingCodec, encode_parts
from finchmq.protocol.command import FLAG_RESPONSE, Body, RemotingCommand
from finchmq.protocol.errors import RemoteProtocolError

from .channel import ChannelEventListener, RemotingContext, next_opaque
from .errors import RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError

__all__ = ["CloseReason", "RemotingConnection", "RequestSink"]

log = logging.getLogger(__name__)

# Frames gathered before a write even within one loop iteration: large enough to save syscalls,
# small enough that the peer starts on the first answers while later ones are still produced.
_FLUSH_FRAMES = 16


class CloseReason(enum.Enum):
    PEER_CLOSED = "peer closed the connection"
    CONNECTION_BROKEN = "connection broken"
    PROTOCOL_ERROR = "protocol error"
    IDLE = "idle"
    SHUTDOWN = "shutdown"


class RequestSink(Protocol):
    """Where a connection hands the peer's requests: a ``RequestDispatcher``."""

    def dispatch(self, ctx: RemotingContext, request: RemotingCommand) -> None: ...


def _format_addr(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        if host.startswith("::ffff:"):
            host = host[7:]
        return f"{host}:{peer[1]}"
    return str(peer)


class RemotingConnection(asyncio.Protocol):
    """Both ends of the protocol on one transport, a ``Channel``; see the module docstring."""

    def __init__(
        self,
        *,
        dispatcher: RequestSink,
        listener: ChannelEventListener | None = None,
        max_frame_size: int,
        on_lost: _LostCallback | None = None,
        first_bytes: _FirstBytesHook | None = None,
        silent_close_hint: str | None = None,
    ) -> None:
        self._first_bytes = first_bytes
        # added to the error of pending calls when the peer closes the connection without ever
        # sending a byte (a client's hint at why, e.g. a TLS-only server refusing plain clients)
        self._silent_close_hint = silent_close_hint
        self._heard = False
        self._codec = RemotingCodec(max_frame_size=max_frame_size)
        self._dispatcher = dispatcher
        self._listener = listener
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        # Each timeout's (deadline, opaque) in sending order, hence in deadline order, and one
        # timer for the earliest: a call_later per request cost more than the rest of invoke's
        # bookkeeping. Answered requests leave their entries behind, dropped as they reach the head.
        self._deadlines: dict[float, deque[tuple[float, int]]] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at = 0.0
        self._wbuf: list[Body] = []
        self._flush_scheduled = False
        self._gathering = False  # inside data_received: answers wait for its one write
        self._write_paused = False
        self._requests_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._closed = self._loop.create_future()
        self._close_reason: CloseReason | None = None
        self._close_exc: BaseException | None = None
        self._ctx = RemotingContext(self)
        self.remote_addr = "?"
        self.local_addr = "?"
        self.last_activity = time.monotonic()

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._transport is not None:  # TLS started on our connection: its transport takes over
            self._transport = transport  # type: ignore[assignment]
            return
        self._transport = transport  # type: ignore[assignment]  # a TCP transport (uvloop's is not a subclass)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.remote_addr = _format_addr(transport.get_extra_info("peername"))
        self.local_addr = _format_addr(transport.get_extra_info("sockname"))
        log.debug("connection %s <- %s open", self.local_addr, self.remote_addr)
        if self._listener is not None:
            self._notify("on_channel_connect")

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        self._heard = True
        if self._first_bytes is not None:
            hook, self._first_bytes = self._first_bytes, None
            if self._transport is not None and hook(self, self._transport, data):
                return
        self._codec.receive_data(data)
        if not self._requests_paused:
            # The answers given while this read's frames are processed go out in one write at
            # the end (or every _FLUSH_FRAMES): one write per read, as the floor does.
            self._gathering = True
            try:
                self._process_frames()
            finally:
                self._gathering = False
                self._write_out()

    def _process_frames(self) -> None:
        codec = self._codec
        pending = self._pending
        dispatch = self._dispatcher.dispatch
        ctx = self._ctx
        while not self._requests_paused:
            try:
                cmd = codec.next_command()
            except RemoteProtocolError as exc:
                log.warning("closing connection from %s: %s", self.remote_addr, exc)
                self._close_exc = exc
                if self._listener is not None:
                    self._notify("on_channel_exception", exc)
                self.close(CloseReason.PROTOCOL_ERROR)
                return
            if type(cmd) is not RemotingCommand:
                return  # NEED_DATA (or CLOSED)
            if cmd.flag & FLAG_RESPONSE:
                future = pending.pop(cmd.opaque, None)
                if future is None:
                    log.debug(
                        "response from %s for unknown opaque %d (timed out?)", self.remote_addr, cmd.opaque
                    )
                elif not future.done():
                    future.set_result(cmd)
            else:
                dispatch(ctx, cmd)

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        reason = self._close_reason or (CloseReason.CONNECTION_BROKEN if exc else CloseReason.PEER_CLOSED)
        self._close_reason = reason
        if exc is not None and self._close_exc is None:
            self._close_exc = exc
        why = reason.value
        if reason is CloseReason.PEER_CLOSED and not self._heard and self._silent_close_hint:
            why = f"{why} without answering: {self._silent_close_hint}"
        error = RemotingConnectError(f"connection {self.remote_addr} closed ({why})", self.remote_addr)
        if self._close_exc is not None:
            error.__cause__ = self._close_exc
        pending, self._pending = self._pending, {}
        self._deadlines.clear()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._drain_waiters.clear()
        self._wbuf.clear()
        if not self._closed.done():
            self._closed.set_result(None)
        log.debug("connection %s closed: %s", self.remote_addr, reason.value)
        if self._listener is not None:
            self._notify("on_channel_close")
        if self._on_lost is not None:
            self._on_lost(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._write_paused or self._requests_paused:
            transport.pause_reading()
        else:
            transport.resume_reading()

    def pause_requests(self) -> None:
        """Stop reading and decoding this peer's frames until ``resume_requests()``."""
        if not self._requests_paused:
            self._requests_paused = True
            self._update_reading()

    def resume_requests(self) -> None:
        """Take this peer's frames again, first those read before the pause."""
        if not self._requests_paused:
            return
        self._requests_paused = False
        if self.is_open:
            self._loop.call_soon(self._resume_frames)
        self._update_reading()

    def _resume_frames(self) -> None:
        if not self._requests_paused and self.is_open:
            self._process_frames()

    # -- sending ----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._transport is not None and self._close_reason is None and not self._transport.is_closing()

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def send_command(self, cmd: RemotingCommand, opaque: int | None = None) -> None:
        """Queue one frame (with ``opaque`` if given) for writing at the end of this iteration.

        Raises:
            RemotingSendRequestError: the connection is closed.
            LocalProtocolError: the command cannot be encoded (too large, bad extFields).
        """
        transport = self._transport
        if transport is None or self._close_reason is not None or transport.is_closing():
            raise RemotingSendRequestError(f"connection {self.remote_addr} is closed", self.remote_addr)
        head, body = encode_parts(cmd, self._codec.max_frame_size, opaque)
        if self._gathering or self._flush_scheduled:
            wbuf = self._wbuf
            wbuf.append(head)
            if body:
                wbuf.append(body)
            if len(wbuf) >= _FLUSH_FRAMES:
                self._write_out()
            return
        # The first frame of a loop iteration goes out at once (latency); later ones are
        # gathered and written together at the start of the next iteration (fewer syscalls).
        self._flush_scheduled = True
        self._loop.call_soon(self._flush)
        if body:
            transport.writelines((head, body))
        else:
            transport.write(head)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._write_out()

    def _write_out(self) -> None:
        wbuf = self._wbuf
        if not wbuf:
            return
        self._wbuf = []
        if self._transport is None or self._transport.is_closing():
            return
        self.last_activity = time.monotonic()
        self._transport.writelines(wbuf)

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark."""
        if not self._write_paused:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` and wait for its response.

        Raises:
            RemotingTimeoutError: no response within ``timeout`` seconds.
            RemotingConnectError: the connection closed first.
            RemotingSendRequestError: the connection was already closed.
        """
        opaque = next_opaque()
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._pending[opaque] = future
        try:
            self.send_command(request, opaque)
        except BaseException:
            self._pending.pop(opaque, None)
            raise
        self._track_deadline(opaque, timeout)
        try:
            if self._write_paused:
                await self.drain()
            return await future
        finally:
            self._pending.pop(opaque, None)

    def _track_deadline(self, opaque: int, timeout: float) -> None:
        deadline = self._loop.time() + timeout
        queue = self._deadlines.get(timeout)
        if queue is None:
            queue = self._deadlines[timeout] = deque()
        queue.append((deadline, opaque))
        pending = self._pending
        while queue[0][1] not in pending:  # stops at the entry just added at the latest
            queue.popleft()
        if self._expiry is None or deadline < self._expiry_at:
            self._arm_expiry(deadline)

    def _arm_expiry(self, when: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry_at = when
        self._expiry = self._loop.call_at(when, self._expire_due)

    def _expire_due(self) -> None:
        self._expiry = None
        # Timers fire up to a clock tick early: what is due within a millisecond is due now.
        now = self._loop.time() + 0.001
        pending = self._pending
        earliest: float | None = None
        for timeout, queue in list(self._deadlines.items()):
            while queue:
                deadline, opaque = queue[0]
                future = pending.get(opaque)
                if future is not None and deadline > now:
                    if earliest is None or deadline < earliest:
                        earliest = deadline
                    break
                queue.popleft()
                if future is not None:
                    del pending[opaque]
                    if not future.done():
                        future.set_exception(
                            RemotingTimeoutError(
                                f"wait response on the channel <{self.remote_addr}> timeout, "
                                f"{int(timeout * 1000)}(ms)",
                                self.remote_addr,
                            )
                        )
            if not queue:
                del self._deadlines[timeout]
        if earliest is not None:
            self._arm_expiry(earliest)

    async def send_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the ONEWAY flag; returns once it is handed to the socket."""
        self.send_command(request.with_opaque(next_opaque(), oneway=True))
        if self._write_paused:
            await self.drain()

    # -- closing ----------------------------------------------------------------------------

    def close(self, reason: CloseReason = CloseReason.SHUTDOWN) -> None:
        """Close the connection (idempotent); pending calls fail with ``RemotingConnectError``."""
        if self._close_reason is None:
            self._close_reason = reason
        if self._transport is not None and not self._transport.is_closing():
            self._flush()
            self._transport.close()
        elif self._transport is None and not self._closed.done():
            self._closed.set_result(None)

    def abort(self) -> None:
        """Close at once, dropping unsent data."""
        if self._close_reason is None:
            self._close_reason = CloseReason.SHUTDOWN
        if self._transport is not None:
            self._transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    @property
    def close_reason(self) -> CloseReason | None:
        return self._close_reason

    def _notify(self, event: str, *args: object) -> None:
        try:
            getattr(self._listener, event)(self, *args)
        except Exception:
            log.exception("channel event listener %s(%s) failed", event, self.remote_addr)

    def __repr__(self) -> str:
        state = "open" if self.is_open else f"closed:{self._close_reason}"
        return (
            f"<RemotingConnection {self.local_addr}->{self.remote_addr} {state} pending={len(self._pending)}>"
        )


class _LostCallback(Protocol):
    def __call__(self, conn: RemotingConnection, /) -> None: ...


class _FirstBytesHook(Protocol):
    """Sees a connection's first bytes; true if it took them (a server's TLS sniffing)."""

    def __call__(self, conn: RemotingConnection, transport: asyncio.Transport, data: bytes, /) -> bool: ...
