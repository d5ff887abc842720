"""finchmq.remoting: the asyncio transport of the RocketMQ remoting protocol, and the routing of
requests to processors that every server and client of finchmq shares.

Imports: ``finchmq.protocol`` and ``finchmq.common`` only. Owns sockets, framing I/O, deadlines,
in-flight bounds, the ``@handles`` routing contract, the executors and the dispatcher.
"""

from __future__ import annotations

from .channel import Channel, ChannelEventListener, ChannelGoneListener, RemotingContext
from .client import InvokeCallback, RemotingClient, RpcHook, parse_addr
from .config import RemotingClientConfig, RemotingServerConfig
from .connection import CloseReason, RemotingConnection
from .errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from .local import LocalChannel
from .loop import HAVE_UVLOOP, loop_factory, run
from .processor import (
    REMARK_OVERLOAD,
    REMARK_REJECT_REQUEST,
    QueuedRequest,
    RequestDispatcher,
    RequestExecutor,
)
from .routing import Answer, ExecutorName, Later, RequestProcessor, RequestRefused, handles
from .server import RemotingServer
from .tls import TlsConfig, TlsConfigError, TlsMode

__all__ = [
    "HAVE_UVLOOP",
    "REMARK_OVERLOAD",
    "REMARK_REJECT_REQUEST",
    "Answer",
    "Channel",
    "ChannelEventListener",
    "ChannelGoneListener",
    "CloseReason",
    "ExecutorName",
    "InvokeCallback",
    "Later",
    "LocalChannel",
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
    "TlsConfig",
    "TlsConfigError",
    "TlsMode",
    "handles",
    "loop_factory",
    "parse_addr",
    "run",
]
