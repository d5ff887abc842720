"""``SlaveSynchronize``: a slave copies its master's metadata every 10 s (Java 4.9.8).

The commit log arrives through HA replication; the rest a slave needs to serve consumers (and
to take over reads when the master is gone) comes from four admin requests to the master:
topic configs and subscription groups (replaced when the master's data version differs),
consumer offsets (merged in) and the delay-level offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
)
from finchmq.remoting import RemotingClient, RemotingError

from ._persist import JsonConfigManager
from .context import BrokerContext

__all__ = ["SlaveSynchronize"]

log = logging.getLogger(__name__)
_V = TypeVar("_V")

_TIMEOUT_MS = 3000


class SlaveSynchronize:
    """Pulls the master's metadata into this slave's managers; ``sync_all`` is run periodically."""

    def __init__(self, context: BrokerContext, client: RemotingClient, own_addr: Callable[[], str]) -> None:
        self.context = context
        self.client = client
        self._own_addr = own_addr
        self.master_addr: str | None = None

    async def _fetch(self, code: RequestCode) -> bytes | None:
        addr = self.master_addr
        if not addr or addr == self._own_addr():
            return None
        try:
            response = await self.client.invoke(addr, RemotingCommand.request(code), _TIMEOUT_MS)
        except RemotingError as exc:
            log.warning("slave sync: %s from master %s failed: %s", code.name, addr, exc)
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("slave sync: master %s refused %s: %s", addr, code.name, response.remark)
            return None
        return bytes(response.body or b"")

    async def sync_all(self) -> None:
        await self.sync_topic_config()
        await self.sync_consumer_offset()
        await self.sync_delay_offset()
        await self.sync_subscription_group_config()

    async def sync_topic_config(self) -> None:
        body = await self._fetch(RequestCode.GET_ALL_TOPIC_CONFIG)
        if body is None:
            return
        wrapper = TopicConfigSerializeWrapper.from_json(body)
        manager = self.context.topic_config_manager
        if manager.data_version != wrapper.data_version:
            _replace(manager.topic_config_table, wrapper.topic_config_table)
            manager.data_version = wrapper.data_version
            await _save(manager)
            log.info("slave sync: %d topic configs from the master", len(wrapper.topic_config_table))

    async def sync_consumer_offset(self) -> None:
        body = await self._fetch(RequestCode.GET_ALL_CONSUMER_OFFSET)
        if body is None:
            return
        wrapper = ConsumerOffsetSerializeWrapper.from_json(body)
        manager = self.context.consumer_offset_manager
        for key, offsets in wrapper.offset_table.items():
            manager.offset_table[key] = dict(offsets)
        await _save(manager)

    async def sync_delay_offset(self) -> None:
        body = await self._fetch(RequestCode.GET_ALL_DELAY_OFFSET)
        if not body:
            return
        offsets = self.context.schedule_message_service.offsets
        offsets.decode(body)
        await _save(offsets)

    async def sync_subscription_group_config(self) -> None:
        body = await self._fetch(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        if body is None:
            return
        wrapper = SubscriptionGroupWrapper.from_json(body)
        manager = self.context.subscription_group_manager
        if manager.data_version != wrapper.data_version:
            _replace(manager.table, wrapper.subscription_group_table)
            manager.data_version = wrapper.data_version
            await _save(manager)


def _replace(table: dict[str, _V], new: Mapping[str, _V]) -> None:
    """The master's table in place of this slave's (Java clears, then putAll)."""
    table.clear()
    table.update(new)


async def _save(manager: JsonConfigManager) -> None:
    """Persist what the sync changed now, as Java's persist() after each sync."""
    manager.mark_dirty()
    await manager.persist()
