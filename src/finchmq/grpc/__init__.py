"""RocketMQ 5.x's gRPC ``MessagingService`` (Java's rocketmq-proxy) in front of finchmq's brokers.

Local mode serves one in-process broker, handing remoting commands to its processors
(``LocalBackend``); cluster mode (``finchmq proxy``) serves a cluster over remoting
(``ClusterBackend``). The service itself (``service.MessagingService``) knows no transport: the
HTTP/2 server is an adapter (``transport``). Imports: common, protocol and remoting only.
"""

from .server import GrpcServer

__all__ = ["GrpcServer"]
