"""Latency fault tolerance (Java ``latency/MQFaultStrategy`` + ``LatencyFaultToleranceImpl``):
which queue a producer sends to next, avoiding brokers that answered slowly or failed.

Owns: the table of brokers to avoid and until when, and the mapping from a send's latency to how
long its broker is avoided. Pure: no I/O; the producer reports each send's latency and asks for
a queue. Imports: ``finchmq.protocol`` and the client's config and route modules.

Strategy: with ``send_latency_fault_enable`` a send that took ``latency`` ms avoids its broker
for ``not_available_duration[i]``, where ``latency_max[i]`` is the largest bound ``latency``
reached (a failure counts as 30 s). Queue selection goes round robin over the brokers not being
avoided; when every broker is, it picks one of the better half (available first, then faster).
Disabled, selection is ``TopicPublishInfo``'s plain round robin.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from finchmq.protocol.message import MessageQueue

from .config import ProducerConfig
from .route import TopicPublishInfo

__all__ = ["LatencyFaultTolerance", "MQFaultStrategy"]


@dataclass(slots=True)
class _FaultItem:
    name: str
    current_latency: float
    start_timestamp: float  # monotonic ms when the broker is usable again


class LatencyFaultTolerance:
    """Java ``LatencyFaultToleranceImpl``: brokers to avoid for a while."""

    def __init__(self) -> None:
        self._table: dict[str, _FaultItem] = {}
        self._which_item_worst = random.randrange(1 << 16)

    def update_fault_item(self, name: str, current_latency: float, not_available_duration: float) -> None:
        now = time.monotonic() * 1000
        item = self._table.get(name)
        if item is None:
            self._table[name] = _FaultItem(name, current_latency, now + not_available_duration)
        else:
            item.current_latency = current_latency
            item.start_timestamp = now + not_available_duration

    def is_available(self, name: str) -> bool:
        item = self._table.get(name)
        return item is None or time.monotonic() * 1000 >= item.start_timestamp

    def remove(self, name: str) -> None:
        self._table.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """The least bad broker: among the better half (available first, then by latency)."""
        if not self._table:
            return None
        now = time.monotonic() * 1000
        items = sorted(
            self._table.values(),
            key=lambda i: (now < i.start_timestamp, i.current_latency, i.start_timestamp),
        )
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        self._which_item_worst += 1
        return items[self._which_item_worst % half].name


class MQFaultStrategy:
    """Java ``MQFaultStrategy``: queue selection with optional latency fault tolerance."""

    def __init__(self, config: ProducerConfig) -> None:
        self.enabled = config.send_latency_fault_enable
        self.latency_max = config.latency_max
        self.not_available_duration = config.not_available_duration
        self.tolerance = LatencyFaultTolerance()

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        queues = info.message_queue_list
        index = info.next_index()
        for i in range(len(queues)):
            mq = queues[(index + i) % len(queues)]
            if self.tolerance.is_available(mq.broker_name):
                return mq
        not_best = self.tolerance.pick_one_at_least()
        if not_best is not None:
            write_queue_nums = info.get_queue_id_by_broker(not_best)
            if write_queue_nums > 0:
                return MessageQueue(queues[0].topic, not_best, info.next_index() % write_queue_nums)
            self.tolerance.remove(not_best)
        return info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency_ms: float, isolation: bool) -> None:
        if self.enabled:
            duration = self._not_available_duration(30_000 if isolation else current_latency_ms)
            self.tolerance.update_fault_item(broker_name, current_latency_ms, duration)

    def _not_available_duration(self, latency: float) -> float:
        for bound, duration in zip(
            reversed(self.latency_max), reversed(self.not_available_duration), strict=True
        ):
            if latency >= bound:
                return duration
        return 0
