"""finchmq.remoting: the asyncio transport of the RocketMQ remoting protocol.

Imports: ``finchmq.protocol`` only. Owns sockets, framing I/O, deadlines and in-flight bounds.
"""

from __future__ import annotations

from .client import InvokeCallback, RemotingClient, RpcHook, parse_addr
from .config import RemotingClientConfig, RemotingServerConfig
from .connection import ChannelEventListener, ChannelGoneListener, CloseReason, RemotingConnection
from .errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from .loop import HAVE_UVLOOP, loop_factory, run
from .processor import (
    LATER,
    REMARK_OVERLOAD,
    REMARK_REJECT_REQUEST,
    Later,
    QueuedRequest,
    RemotingContext,
    RequestDispatcher,
    RequestExecutor,
    RequestProcessor,
    RequestRefused,
)
from .server import RemotingServer

__all__ = [
    "HAVE_UVLOOP",
    "LATER",
    "REMARK_OVERLOAD",
    "REMARK_REJECT_REQUEST",
    "ChannelEventListener",
    "ChannelGoneListener",
    "CloseReason",
    "InvokeCallback",
    "Later",
    "QueuedRequest",
    "RemotingClient",
    "RemotingClientConfig",
    "RemotingConnectError",
    "RemotingConnection",
    "RemotingContext",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingServerConfig",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "RequestDispatcher",
    "RequestExecutor",
    "RequestProcessor",
    "RequestRefused",
    "RpcHook",
    "loop_factory",
    "parse_addr",
    "run",
]
