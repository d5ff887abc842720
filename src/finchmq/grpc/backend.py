"""The brokers behind the gRPC front end: where a 5.x call's remoting commands go.

``LocalBackend`` (Java's proxy "local" mode) serves the broker in this process: commands are
handed to its dispatcher through one ``LocalChannel`` per 5.x client, so the same processors,
executors, flow control and client bookkeeping serve both protocols, and what the broker asks of
a client (CHECK_TRANSACTION_STATE...) reaches that client's ``on_request``. ``ClusterBackend``
(``cluster.py``) does the same over remoting for a cluster's brokers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from finchmq.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from finchmq.protocol.command import RemotingCommand
from finchmq.remoting.connection import RequestSink
from finchmq.remoting.local import LocalChannel, PeerRequestHandler

__all__ = ["BROKER_NAME_FIELD", "Backend", "BrokerQueues", "ClientLink", "LocalBackend"]

BROKER_NAME_FIELD = "bname"
"""The ext field naming the broker a request concerns (5.x ``RpcRequestHeader.bname``). A backend
fronting several brokers sets it on what a broker asks of a client (``on_request``), so the
client's answer (END_TRANSACTION after a transaction check) goes back to that broker (Java's
cluster proxy adds the broker's address instead, ``ProxyUtils.BROKER_ADDR``)."""


@dataclass(frozen=True, slots=True)
class BrokerQueues:
    """One broker's queues of a topic (Java ``QueueData``) and the host its gRPC endpoint is on."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    host: str


class ClientLink(Protocol):
    """A 5.x client's connection to the brokers (closed when the client goes)."""

    async def close(self) -> None: ...


class Backend(Protocol):
    """What the service needs of the brokers it fronts."""

    local: bool
    """True: the endpoints in routes are the brokers' hosts at this server's gRPC port (local
    mode); False: the endpoints the client used (cluster mode, one proxy in front)."""

    def link(self, client_id: str, peer: str, on_request: PeerRequestHandler) -> ClientLink:
        """A new link for one client; broker requests to that client go to ``on_request``."""
        ...

    async def invoke(
        self, link: ClientLink, broker_name: str | None, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        """``request`` to ``broker_name`` (None: any master serving the client) for the client
        of ``link``; raises ``RemotingError`` subclasses as the remoting client does."""
        ...

    async def route(self, topic: str) -> list[BrokerQueues] | None:
        """The topic's queues per broker; None when no broker has the topic."""
        ...

    async def topic_config(self, topic: str) -> TopicConfig | None: ...

    async def group_config(self, group: str) -> SubscriptionGroupConfig | None: ...

    async def close(self) -> None: ...


class _LocalLink:
    def __init__(self, channel: LocalChannel) -> None:
        self.channel = channel

    async def close(self) -> None:
        self.channel.close()


class LocalBackend:
    """One broker, in this process (see the module docstring)."""

    local = True

    def __init__(
        self,
        dispatcher: RequestSink,
        *,
        broker_name: str,
        host: str,
        topic_config: Callable[[str], TopicConfig | None],
        group_config: Callable[[str], SubscriptionGroupConfig | None],
    ) -> None:
        self._dispatcher = dispatcher
        self.broker_name = broker_name
        self.host = host
        self._topic_config = topic_config
        self._group_config = group_config

    def link(self, client_id: str, peer: str, on_request: PeerRequestHandler) -> ClientLink:
        async def from_this_broker(request: RemotingCommand) -> RemotingCommand | None:
            request.ext_fields.setdefault(BROKER_NAME_FIELD, self.broker_name)  # as cluster mode tags it
            return await on_request(request)

        return _LocalLink(LocalChannel(self._dispatcher, peer, from_this_broker, trusted=True))

    async def invoke(
        self, link: ClientLink, broker_name: str | None, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        assert isinstance(link, _LocalLink)
        return await link.channel.call(request, timeout)

    async def route(self, topic: str) -> list[BrokerQueues] | None:
        config = self._topic_config(topic)
        if config is None:
            return None
        return [
            BrokerQueues(
                self.broker_name, config.read_queue_nums, config.write_queue_nums, config.perm, self.host
            )
        ]

    async def topic_config(self, topic: str) -> TopicConfig | None:
        return self._topic_config(topic)

    async def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        return self._group_config(group)

    async def close(self) -> None:
        return None
