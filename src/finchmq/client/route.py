"""Routes as producers and consumers see them (Java ``TopicPublishInfo`` and
``MQClientInstance.topicRouteData2Topic{Publish,Subscribe}Info``). Pure: no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import NamedTuple

from finchmq.protocol.bodies import MASTER_ID, PermName, TopicRouteData
from finchmq.protocol.message import MessageQueue

__all__ = [
    "FindBrokerResult",
    "TopicPublishInfo",
    "route_changed",
    "topic_route_data_to_publish_info",
    "topic_route_data_to_subscribe_info",
]


class FindBrokerResult(NamedTuple):
    broker_addr: str
    slave: bool


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of a topic and the round-robin cursor over them."""

    message_queue_list: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_topic_router_info: bool = False
    topic_route_data: TopicRouteData | None = None
    send_which_queue: int = field(default_factory=lambda: random.randrange(1 << 16))

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def next_index(self) -> int:
        self.send_which_queue = (self.send_which_queue + 1) & 0x7FFFFFFF
        return self.send_which_queue

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin; on a retry, a queue of another broker than ``last_broker_name`` if any."""
        queues = self.message_queue_list
        if last_broker_name is not None:
            for _ in range(len(queues)):
                mq = queues[self.next_index() % len(queues)]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[self.next_index() % len(queues)]

    def get_queue_id_by_broker(self, broker_name: str) -> int:
        """The write queue count of ``broker_name`` in this route, -1 if absent."""
        if self.topic_route_data is None:
            return -1
        for qd in self.topic_route_data.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def topic_route_data_to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """Writable queues of brokers that have a master; ``orderTopicConf`` wins when present."""
    info = TopicPublishInfo(topic_route_data=route)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.strip().isdigit():
                info.message_queue_list.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        info.order_topic = True
        return info
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if PermName.is_writeable(qd.perm) and qd.broker_name in masters:
            info.message_queue_list.extend(
                MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
            )
    return info


def topic_route_data_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """Readable queues of every broker in the route."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if PermName.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }


def route_changed(old: TopicRouteData | None, new: TopicRouteData | None) -> bool:
    """Java ``topicRouteDataIsChange``: queue and broker data compared order-insensitively."""
    if old is None or new is None:
        return True
    return (
        sorted(old.queue_datas, key=lambda q: q.broker_name)
        != sorted(new.queue_datas, key=lambda q: q.broker_name)
        or sorted(old.broker_datas, key=lambda b: b.broker_name)
        != sorted(new.broker_datas, key=lambda b: b.broker_name)
        or old.order_topic_conf != new.order_topic_conf
    )
