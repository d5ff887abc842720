"""``TopicRouteInfoManager`` (Java 5.x ``broker/topic/TopicRouteInfoManager``, the subscribe half):
the readable queues of a topic across the cluster, which QUERY_ASSIGNMENT divides among a group's
members. A topic is looked up on the name servers the first time it is asked for, then refreshed
every ``loadBalancePollNameServerInterval``; a topic the name servers no longer know is dropped.

A broker with no name server (a processor under test) answers from its own topic table.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from finchmq.protocol.bodies import PermName, TopicConfig, TopicRouteData
from finchmq.protocol.message import MessageQueue
from finchmq.remoting import RemotingError

__all__ = ["TopicRouteInfoManager", "route_subscribe_queues"]

log = logging.getLogger(__name__)

_LOCK_TIMEOUT = 3.0  # s, Java LOCK_TIMEOUT_MILLIS

RouteFetcher = Callable[[str], Awaitable[TopicRouteData | None]]
"""Fetch a topic's route from the name servers: None when they do not know the topic; raises
``RemotingError`` when none answers."""


def route_subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """Java ``MQClientInstance.topicRouteData2TopicSubscribeInfo``: every readable queue."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if PermName.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }


class TopicRouteInfoManager:
    """See the module docstring. ``fetch`` is set by the controller when there are name servers."""

    def __init__(self, local_topic: Callable[[str], TopicConfig | None], broker_name: str) -> None:
        self.fetch: RouteFetcher | None = None
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self._local_topic = local_topic
        self._broker_name = broker_name
        self._lock = asyncio.Lock()

    async def get_topic_subscribe_info(self, topic: str) -> set[MessageQueue] | None:
        """The readable queues of ``topic``; None when it has none anywhere."""
        if self.fetch is None:
            return self._local(topic)
        queues = self.topic_subscribe_info_table.get(topic)
        if not queues:
            await self.update_topic_route_info_from_name_server(topic)
            queues = self.topic_subscribe_info_table.get(topic)
        return queues

    def _local(self, topic: str) -> set[MessageQueue] | None:
        config = self._local_topic(topic)
        if config is None or not PermName.is_readable(config.perm):
            return None
        return {MessageQueue(topic, self._broker_name, i) for i in range(config.read_queue_nums)} or None

    async def update_topic_route_info_from_name_server(self, topic: str) -> None:
        """Fetch ``topic``'s route; failures are logged and the old queues kept (Java)."""
        fetch = self.fetch
        if fetch is None:
            return
        try:
            async with asyncio.timeout(_LOCK_TIMEOUT):
                await self._lock.acquire()
        except TimeoutError:
            log.warning("updateTopicRouteInfoFromNameServer %s: lock not acquired", topic)
            return
        try:
            route = await fetch(topic)
        except RemotingError as exc:
            log.warning("TopicRouteInfoManager: route of %s unavailable: %s", topic, exc)
            return
        finally:
            self._lock.release()
        if route is None:
            if self.topic_subscribe_info_table.pop(topic, None) is not None:
                log.info("the topic[%s] has no route any more, forgotten", topic)
            return
        queues = route_subscribe_queues(topic, route)
        old = self.topic_subscribe_info_table.get(topic)
        if queues != old:
            log.info("the topic[%s] subscribe message queue changed, old[%s] ,new[%s]", topic, old, queues)
            self.topic_subscribe_info_table[topic] = queues

    async def update_all(self) -> None:
        """Refresh every topic asked for so far (the periodic job)."""
        for topic in list(self.topic_subscribe_info_table):
            await self.update_topic_route_info_from_name_server(topic)
