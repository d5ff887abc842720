"""Where a request comes from, as processors see it: a ``Channel`` and the ``RemotingContext``.

A processor never sees a socket. It answers through the context, identifies the peer by its
channel (the client managers key producers and consumers by channel) and calls the peer back
through it (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE). ``RemotingConnection`` is the
channel of a TCP connection; ``LocalChannel`` (``remoting.local``) is one inside the process, the
way a front end for another protocol (RocketMQ 5.x's gRPC proxy in local mode) hands requests to
the same processors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from finchmq.protocol.command import RemotingCommand

__all__ = [
    "Channel",
    "ChannelEventListener",
    "ChannelGoneListener",
    "RemotingContext",
    "next_opaque",
]

_opaque = 0


def next_opaque() -> int:
    """Process-wide request ids (Java's static ``requestId``), kept within a Java int."""
    global _opaque  # noqa: PLW0603 - one counter per process, like RocketMQ's
    _opaque = (_opaque + 1) & 0x7FFFFFFF
    return _opaque


class Channel(Protocol):
    """One peer, reachable both ways (Java's Netty ``Channel`` as the processors use it)."""

    @property
    def remote_addr(self) -> str:
        """``host:port`` of the peer (what Java's ``RemotingHelper.parseChannelRemoteAddr`` gives)."""
        ...

    @property
    def is_open(self) -> bool:
        """False once the peer is gone: answers to it are dropped."""
        ...

    def send_command(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` (a response, or a request already carrying its opaque) to the peer.

        Raises:
            RemotingSendRequestError: the channel is closed.
        """
        ...

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Call the peer and wait up to ``timeout`` seconds for its answer."""
        ...

    async def send_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` to the peer with the ONEWAY flag; no answer comes."""
        ...

    def pause_requests(self) -> None:
        """Take no more requests from this peer until ``resume_requests`` (executor overload)."""
        ...

    def resume_requests(self) -> None:
        """Take this peer's requests again."""
        ...

    def close(self) -> None:
        """Drop the peer (idempotent); calls waiting on it fail."""
        ...


class RemotingContext:
    """Where a request came from; lets a processor answer later or call the peer back."""

    # Not a dataclass: compiled by mypyc, a dataclass resolves its fields' annotations at import.
    __slots__ = ("channel", "trusted")

    def __init__(self, channel: Channel, trusted: bool = False) -> None:
        self.channel = channel
        self.trusted = trusted
        """An in-process peer that authenticated its callers itself (RocketMQ 5.x's local proxy
        calls the processors directly): the dispatcher skips its ``before_request`` hook (ACL)."""

    def __repr__(self) -> str:
        trusted = ", trusted=True" if self.trusted else ""
        return f"RemotingContext(channel={self.channel!r}{trusted})"

    @property
    def remote_addr(self) -> str:
        return self.channel.remote_addr

    def write_response(self, response: RemotingCommand) -> None:
        """Send a response produced outside the handler's return (e.g. a held long poll)."""
        self.channel.send_command(response)


class ChannelEventListener(Protocol):
    """Channel events (Java ``ChannelEventListener``); called on the loop, must not block."""

    def on_channel_connect(self, channel: Channel) -> None: ...
    def on_channel_close(self, channel: Channel) -> None: ...
    def on_channel_exception(self, channel: Channel, exc: BaseException) -> None: ...
    def on_channel_idle(self, channel: Channel) -> None: ...


class ChannelGoneListener:
    """A ``ChannelEventListener`` for who only needs to know that a channel is gone: closed,
    failed or idle (Java's housekeeping services of the name server and the broker)."""

    def __init__(self, on_gone: Callable[[Channel], None]) -> None:
        self._on_gone = on_gone

    def on_channel_connect(self, channel: Channel) -> None:
        pass

    def on_channel_close(self, channel: Channel) -> None:
        self._on_gone(channel)

    def on_channel_exception(self, channel: Channel, exc: BaseException) -> None:
        self._on_gone(channel)

    def on_channel_idle(self, channel: Channel) -> None:
        self._on_gone(channel)
