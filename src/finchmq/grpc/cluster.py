"""``ClusterBackend``: the brokers of a cluster behind the gRPC front end, over remoting (Java's
proxy "cluster" mode, ``ClusterServiceManager``).

Strategy:
    Routes come from the name servers (GET_ROUTEINFO_BY_TOPIC), the brokers' masters from their
    cluster info (GET_BROKER_CLUSTER_INFO); topic and subscription group configs from a master
    broker (GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG: finchmq's broker, like 4.9.8's,
    has no single-entry GET_TOPIC_CONFIG). All of it is cached for ``cache_seconds`` (Java's
    ``TopicRouteService``/``ClusterMetadataService`` caches; a miss is asked again, so a new topic
    is seen at once).

    Each 5.x client gets its own ``RemotingClient`` (its link), so every broker sees one
    connection per 5.x client, registered by the client's own HEART_BEAT: ``finchmq admin``
    connection listings show 5.x clients one by one, and what a broker asks of a client
    (CHECK_TRANSACTION_STATE, CONSUME_MESSAGE_DIRECTLY, GET_CONSUMER_RUNNING_INFO...) arrives on
    that client's connection and goes to its ``on_request`` without any lookup by group or client
    id, the broker's name added as ``bname`` (``BROKER_NAME_FIELD``) for the answer's way back.
    (Java's cluster proxy shares a few clients and picks a producer channel of the message's group
    for a transaction check; a connection per client gives the same answer more simply.)

    A request for a named broker goes to its master; a request for no broker in particular
    (HEART_BEAT, UNREGISTER_CLIENT: client-wide) goes to every master of every cluster the name
    servers know, and is answered SUCCESS only when all of them succeed (else the first
    failure, in broker name order), since every broker must know the client. Any other request
    without a broker name is refused (INTERNAL_SERVER_ERROR naming its code): a send, POP or ack
    sent to every broker, or to an arbitrary one, would be wrong, so the caller must say which
    (the message queue's broker; the receipt handle's).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from finchmq.protocol.acl import SessionCredentials, sign_request
from finchmq.protocol.bodies import (
    ClusterInfo,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.headers import GetRouteInfoRequestHeader
from finchmq.remoting import (
    ExecutorName,
    Later,
    RemotingClient,
    RemotingClientConfig,
    RemotingConnectError,
    RemotingContext,
    RemotingError,
    RequestExecutor,
    RequestProcessor,
    RpcHook,
)
from finchmq.remoting.client import parse_addr
from finchmq.remoting.local import PeerRequestHandler
from finchmq.remoting.routing import Answer

from ._pb import definition_pb2 as pb
from .backend import BROKER_NAME_FIELD, BrokerQueues, ClientLink
from .status import GrpcStatusError

__all__ = ["CLIENT_WIDE_CODES", "ClusterBackend"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

CLIENT_WIDE_CODES = frozenset({RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT})
"""Requests for every broker (``invoke`` with no broker name)."""

DEFAULT_CACHE_SECONDS = 5.0
"""How long routes, the cluster's masters and configs are reused (Java refreshes every 20 s)."""

_MISS_RELOAD_SECONDS = 1.0
"""A group or broker name missing from a cached table is asked again if the table is older than this
(a topic with a route always is)."""


class _Cache(Generic[_T]):
    """Values by key, each kept ``ttl`` seconds; concurrent loads of one key share one call."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._values: dict[str, tuple[float, _T]] = {}
        self._loading: dict[str, asyncio.Future[_T]] = {}

    def fresh(self, key: str, ttl: float | None = None) -> _T | None:
        """The value if loaded less than ``ttl`` (default: the cache's) seconds ago."""
        entry = self._values.get(key)
        if entry is None or time.monotonic() - entry[0] > (self.ttl if ttl is None else ttl):
            return None
        return entry[1]

    async def get(self, key: str, load: Callable[[], Awaitable[_T]], *, ttl: float | None = None) -> _T:
        """The value of ``key``, loaded unless loaded less than ``ttl`` seconds ago."""
        value = self.fresh(key, ttl)
        if value is not None:
            return value
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.ensure_future(load())
            self._loading[key] = pending
            try:
                value = await asyncio.shield(pending)
            finally:
                if self._loading.get(key) is pending:
                    del self._loading[key]
            self._values[key] = (time.monotonic(), value)
            return value
        return await asyncio.shield(pending)

    def forget(self, key: str) -> None:
        self._values.pop(key, None)


class _RelayToClient(RequestProcessor):
    """Every request a broker sends on a 5.x client's connection, to that client's handler, with
    the broker's name in ``bname`` (``BROKER_NAME_FIELD``) when the broker did not set it."""

    executor = ExecutorName.CLIENT

    def __init__(self, on_request: PeerRequestHandler, broker_names: dict[str, str]) -> None:
        super().__init__()
        self._on_request = on_request
        self._broker_names = broker_names

    def process(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        name = self._broker_names.get(ctx.remote_addr)
        if name is not None and not request.ext_fields.get(BROKER_NAME_FIELD):
            request.ext_fields[BROKER_NAME_FIELD] = name
        return Later(lambda: self._on_request(request))


class _ClusterLink:
    """One 5.x client's connections to the brokers."""

    def __init__(
        self,
        client_id: str,
        on_request: PeerRequestHandler,
        config: RemotingClientConfig,
        rpc_hook: RpcHook | None,
    ) -> None:
        self.client_id = client_id
        self.remoting = RemotingClient(config, name=f"proxy-client-{client_id}", rpc_hook=rpc_hook)
        self.broker_names: dict[str, str] = {}  # a connection's peer address -> its broker's name
        self._named: set[str] = set()  # the addresses whose connection is in broker_names
        executor = RequestExecutor(ExecutorName.CLIENT, workers=2, capacity=256)
        self.remoting.dispatcher.register_default(_RelayToClient(on_request, self.broker_names), executor)

    async def name_connection(self, broker_name: str, addr: str) -> None:
        """Remember which broker the connection to ``addr`` reaches (once per address)."""
        if addr in self._named:
            return
        connection = await self.remoting.get_connection(addr)
        self.broker_names[connection.remote_addr] = broker_name
        self._named.add(addr)

    async def close(self) -> None:
        await self.remoting.close()


class ClusterBackend:
    """The brokers registered with the name servers ``namesrv_addr`` (see the module docstring).

    ``namesrv_addr`` is RocketMQ's ``namesrvAddr``: ``"host:port;host:port"``; each call tries
    them in turn from the last that answered. With ``credentials`` every remoting request (to the
    name servers and the brokers, for every 5.x client) is signed with them, as Java's cluster
    proxy signs with ``innerClientAuthenticationCredentials`` (``enableAclRpcHookForClusterMode``):
    brokers with ACL 1.0 or 2.0 then accept the proxy as that account or user.
    """

    local = False

    def __init__(
        self,
        namesrv_addr: str,
        *,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        call_timeout_millis: int = 3_000,
        remoting_config: RemotingClientConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ValueError("a cluster backend needs a name server address ('host:port;host:port')")
        for addr in self.namesrv_addrs:
            parse_addr(addr)  # ValueError naming a bad one
        self.call_timeout_millis = call_timeout_millis
        self._remoting_config = remoting_config or RemotingClientConfig()
        self.credentials = credentials
        self._rpc_hook: RpcHook | None = None
        if credentials is not None:
            self._rpc_hook = lambda addr, request: sign_request(request, credentials)
        self._operations = RemotingClient(
            self._remoting_config, name="proxy-operation", rpc_hook=self._rpc_hook
        )
        self._namesrv_index = 0
        self._routes: _Cache[TopicRouteData | None] = _Cache(cache_seconds)
        self._clusters: _Cache[ClusterInfo] = _Cache(cache_seconds)
        self._topic_tables: _Cache[dict[str, TopicConfig]] = _Cache(cache_seconds)
        self._group_tables: _Cache[dict[str, SubscriptionGroupConfig]] = _Cache(cache_seconds)
        self._masters: dict[str, str] = {}  # broker name -> master address, from routes and cluster info

    # -- the name servers ------------------------------------------------------------------------

    async def _ask_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        last: RemotingError | None = None
        count = len(self.namesrv_addrs)
        for i in range(count):
            index = (self._namesrv_index + i) % count
            addr = self.namesrv_addrs[index]
            try:
                response = await self._operations.invoke(addr, request, self.call_timeout_millis)
            except RemotingError as exc:
                log.warning("name server %s: %s", addr, exc)
                last = exc
                continue
            self._namesrv_index = index
            return response
        assert last is not None
        raise last

    async def _load_route(self, topic: str) -> TopicRouteData | None:
        header = GetRouteInfoRequestHeader(topic=topic)
        response = await self._ask_namesrv(
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS or not response.body:
            raise GrpcStatusError(
                pb.INTERNAL_SERVER_ERROR,
                f"the name server answered the route of {topic} with code {response.code}: {response.remark}",
            )
        route = TopicRouteData.from_json(response.body)
        for broker in route.broker_datas:
            if broker.master_addr is not None:
                self._masters[broker.broker_name] = broker.master_addr
        return route

    async def _route_data(self, topic: str) -> TopicRouteData | None:
        route = await self._routes.get(topic, lambda: self._load_route(topic))
        if route is None:
            self._routes.forget(topic)  # not cached: a topic created now is seen at once
        return route

    async def _load_cluster_info(self) -> ClusterInfo:
        response = await self._ask_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        if response.code != ResponseCode.SUCCESS:
            raise GrpcStatusError(
                pb.INTERNAL_SERVER_ERROR,
                f"the name server answered its cluster info with code {response.code}: {response.remark}",
            )
        info = ClusterInfo.from_json(response.body)
        for name, broker in info.broker_addr_table.items():
            if broker.master_addr is not None:
                self._masters[name] = broker.master_addr
        return info

    async def master_addrs(self, *, ttl: float | None = None) -> dict[str, str]:
        """Broker name → master address of every broker with a master, by name (the cluster info
        loaded less than ``ttl`` seconds ago, by default the cache's)."""
        info = await self._clusters.get("", self._load_cluster_info, ttl=ttl)
        masters = {n: b.master_addr for n, b in info.broker_addr_table.items() if b.master_addr is not None}
        return dict(sorted(masters.items()))

    async def master_addr(self, broker_name: str) -> str:
        """The master of ``broker_name``; BAD_REQUEST (Java ``INVALID_BROKER_NAME``) if none."""
        addr = self._masters.get(broker_name)
        if addr is None:
            addr = (await self.master_addrs(ttl=_MISS_RELOAD_SECONDS)).get(broker_name)
        if addr is None:
            raise GrpcStatusError(pb.BAD_REQUEST, f"cannot find broker {broker_name}")
        return addr

    # -- Backend -----------------------------------------------------------------------------------

    def link(self, client_id: str, peer: str, on_request: PeerRequestHandler) -> ClientLink:
        return _ClusterLink(client_id, on_request, self._remoting_config, self._rpc_hook)

    async def invoke(
        self, link: ClientLink, broker_name: str | None, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        assert isinstance(link, _ClusterLink)
        millis = max(1, int(timeout * 1000))
        if broker_name is not None:
            return await self._invoke_one(
                link, broker_name, await self.master_addr(broker_name), request, millis
            )
        if request.code not in CLIENT_WIDE_CODES:
            raise GrpcStatusError(
                pb.INTERNAL_SERVER_ERROR,
                f"request code {request.code} names no broker: in cluster mode only "
                f"{sorted(c.name for c in CLIENT_WIDE_CODES)} go to every broker",
            )
        masters = await self.master_addrs()
        if not masters:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"no master broker is registered with the name servers {';'.join(self.namesrv_addrs)}",
            )
        results = await asyncio.gather(
            *(self._invoke_one(link, name, addr, request, millis) for name, addr in masters.items()),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
            if result.code != ResponseCode.SUCCESS:
                return result
        first = results[0]
        assert isinstance(first, RemotingCommand)
        return first

    async def _invoke_one(
        self, link: _ClusterLink, broker_name: str, addr: str, request: RemotingCommand, millis: int
    ) -> RemotingCommand:
        try:
            await link.name_connection(broker_name, addr)
            return await link.remoting.invoke(addr, request, millis)
        except RemotingConnectError:
            if self._masters.get(broker_name) == addr:  # maybe moved: ask the name server next time
                del self._masters[broker_name]
                self._clusters.forget("")
            raise

    async def route(self, topic: str) -> list[BrokerQueues] | None:
        route = await self._route_data(topic)
        if route is None:
            return None
        masters = {b.broker_name: b.master_addr for b in route.broker_datas if b.master_addr is not None}
        queues = [
            BrokerQueues(
                q.broker_name,
                q.read_queue_nums,
                q.write_queue_nums,
                q.perm,
                parse_addr(masters[q.broker_name])[0],
            )
            for q in route.queue_datas
            if q.broker_name in masters
        ]
        return sorted(queues, key=lambda q: q.broker_name) or None

    async def _broker_table(
        self,
        cache: _Cache[dict[str, _T]],
        code: RequestCode,
        decode: Callable[[bytes], dict[str, _T]],
        addr: str,
        key: str,
        miss_ttl: float,
    ) -> _T | None:
        """One entry of a master's table (GET_ALL_*), asked again when it is missing and the
        table is older than ``miss_ttl`` seconds."""

        async def load() -> dict[str, _T]:
            response = await self._operations.invoke(
                addr, RemotingCommand.request(code), self.call_timeout_millis
            )
            if response.code != ResponseCode.SUCCESS:
                raise GrpcStatusError(
                    pb.INTERNAL_SERVER_ERROR,
                    f"broker {addr} answered {code.name} with code {response.code}: {response.remark}",
                )
            return decode(bytes(response.body or b""))

        table = await cache.get(addr, load)
        if key not in table:  # maybe new: asked again
            table = await cache.get(addr, load, ttl=miss_ttl)
        return table.get(key)

    async def topic_config(self, topic: str) -> TopicConfig | None:
        """The topic's config from a master broker serving it (Java ``findOneBroker(topic)``)."""
        route = await self._route_data(topic)
        if route is None:
            return None
        addrs = sorted(
            (b.broker_name, b.master_addr) for b in route.broker_datas if b.master_addr is not None
        )
        if not addrs:
            return None
        return await self._broker_table(
            # the name server routes it, so the broker has it: a table without it is stale
            self._topic_tables,
            RequestCode.GET_ALL_TOPIC_CONFIG,
            _topic_table,
            addrs[0][1],
            topic,
            0,
        )

    async def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config from one master of the cluster (the first by broker name)."""
        masters = await self.master_addrs()
        if not masters:
            return None
        addr = next(iter(masters.values()))
        return await self._broker_table(
            self._group_tables,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            _group_table,
            addr,
            group,
            _MISS_RELOAD_SECONDS,
        )

    async def close(self) -> None:
        await self._operations.close()


def _topic_table(body: bytes) -> dict[str, TopicConfig]:
    return dict(TopicConfigSerializeWrapper.from_json(body).topic_config_table) if body else {}


def _group_table(body: bytes) -> dict[str, SubscriptionGroupConfig]:
    return dict(SubscriptionGroupWrapper.from_json(body).subscription_group_table) if body else {}
