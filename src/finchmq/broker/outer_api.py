"""``BrokerOuterAPI``: the broker's calls to name servers (register, unregister), to all of them
at once, as Java's ``BrokerOuterAPI.registerBrokerAll`` does with its thread pool; and (5.x) a
topic's route, from the first name server that answers."""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import KVTable, RegisterBrokerBody, TopicConfigSerializeWrapper, TopicRouteData
from finchmq.protocol.headers import (
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from finchmq.remoting import RemotingClient, RemotingError

__all__ = ["BrokerOuterAPI", "RegisterBrokerResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """A name server's answer to REGISTER_BROKER: the group's master and its HA address (for a
    slave), and the ORDER_TOPIC_CONFIG table."""

    kv_table: KVTable
    master_addr: str | None = None
    ha_server_addr: str | None = None


class BrokerOuterAPI:
    def __init__(self, client: RemotingClient) -> None:
        self.client = client

    async def register_broker_all(
        self,
        namesrv_addrs: list[str],
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper,
        timeout_millis: int,
        compressed: bool,
    ) -> dict[str, RegisterBrokerResult | None]:
        """Register with every name server concurrently; returns each one's answer (None where
        registration failed, which is logged and retried next period)."""
        body = RegisterBrokerBody(topic_config_serialize_wrapper=topic_config_wrapper).encode(
            compress=compressed
        )
        header = RegisterBrokerRequestHeader(
            broker_name=broker_name,
            broker_addr=broker_addr,
            cluster_name=cluster_name,
            ha_server_addr=ha_server_addr,
            broker_id=broker_id,
            compressed=compressed,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)

        async def one(addr: str) -> RegisterBrokerResult | None:
            try:
                response = await self.client.invoke(addr, request, timeout_millis)
            except RemotingError as exc:
                log.warning("register broker %s to name server %s failed: %s", broker_name, addr, exc)
                return None
            if response.code != ResponseCode.SUCCESS:
                log.warning(
                    "register broker %s to name server %s refused: code %d %s",
                    broker_name,
                    addr,
                    response.code,
                    response.remark,
                )
                return None
            log.debug("registered broker %s to name server %s", broker_name, addr)
            answer = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
            return RegisterBrokerResult(
                KVTable.from_json(response.body) if response.body else KVTable(),
                answer.master_addr or None,
                answer.ha_server_addr or None,
            )

        results = await asyncio.gather(*(one(addr) for addr in namesrv_addrs))
        return dict(zip(namesrv_addrs, results, strict=True))

    async def unregister_broker_all(
        self,
        namesrv_addrs: list[str],
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        timeout_millis: int = 3000,
    ) -> None:
        header = UnRegisterBrokerRequestHeader(
            broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster_name, broker_id=broker_id
        )
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields())

        async def one(addr: str) -> None:
            try:
                await self.client.invoke(addr, request, timeout_millis)
                log.info("unregistered broker %s from name server %s", broker_name, addr)
            except RemotingError as exc:
                log.warning("unregister broker %s from name server %s failed: %s", broker_name, addr, exc)

        await asyncio.gather(*(one(addr) for addr in namesrv_addrs))

    async def get_topic_route_info_from_name_server(
        self, namesrv_addrs: list[str], topic: str, timeout_millis: int = 3000
    ) -> TopicRouteData | None:
        """``topic``'s route from the first name server that answers; None when it does not know
        the topic (TOPIC_NOT_EXIST).

        Raises:
            RemotingError: no name server answered (the last one's error), or none is configured.
        """
        header = GetRouteInfoRequestHeader(topic=topic)
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        last: RemotingError = RemotingError(f"no name server to ask for the route of {topic}")
        for addr in namesrv_addrs:
            try:
                response = await self.client.invoke(addr, request, timeout_millis)
            except RemotingError as exc:
                log.warning("route of %s from name server %s failed: %s", topic, addr, exc)
                last = exc
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
            if response.code != ResponseCode.SUCCESS or not response.body:
                last = RemotingError(
                    f"name server {addr} answered the route of {topic} with code {response.code} "
                    f"{response.remark or ''}"
                )
                continue
            return TopicRouteData.from_json(response.body)
        raise last
