"""What every 5.x call carries besides its message (Java ``ContextInitPipeline``): the client's
id, language, version and namespace from the ``x-mq-*`` metadata, the peer, the deadline."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ._pb import definition_pb2 as pb
from .status import GrpcStatusError

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
DATE_TIME = "x-mq-date-time"
REQUEST_ID = "x-mq-request-id"
AUTHORIZATION = "authorization"


@dataclass(slots=True)
class CallContext:
    """One RPC's context. ``deadline`` is a ``time.monotonic()`` instant, None without one."""

    method: str
    metadata: Mapping[str, str]
    peer: str  # "host:port" of the HTTP/2 connection
    deadline: float | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def client_id(self) -> str:
        return self.metadata.get(CLIENT_ID, "")

    @property
    def language(self) -> str:
        return self.metadata.get(LANGUAGE, "")

    @property
    def client_version(self) -> str:
        return self.metadata.get(CLIENT_VERSION, "")

    @property
    def namespace(self) -> str:
        return self.metadata.get(NAMESPACE, "")

    @property
    def peer_host(self) -> str:
        host, _, _ = self.peer.rpartition(":")
        return host.strip("[]") or self.peer

    def remaining(self) -> float | None:
        """Seconds left before the client gives up (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def require_client_id(self) -> str:
        """Java ``GrpcMessagingApplication#validateContext``: every call names its client."""
        if not self.client_id:
            raise GrpcStatusError(pb.CLIENT_ID_REQUIRED, "client id cannot be empty")
        return self.client_id
