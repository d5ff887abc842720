"""Broker statistics (Java ``BrokerStatsManager``, the parts operators read): messages and bytes
put and pulled, per topic and in total, and TPS over the last minute, for
GET_BROKER_RUNTIME_INFO and GET_TOPIC_STATS_INFO."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

__all__ = ["BrokerStats"]


@dataclass(slots=True)
class _Counter:
    times: int = 0
    total: int = 0

    def add(self, times: int, total: int) -> None:
        self.times += times
        self.total += total


@dataclass(slots=True)
class BrokerStats:
    """Cumulative counters plus a minute of once-a-second snapshots for rates."""

    boot_timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    put: _Counter = field(default_factory=_Counter)
    get: _Counter = field(default_factory=_Counter)
    put_by_topic: dict[str, _Counter] = field(default_factory=dict)
    get_by_group_topic: dict[str, _Counter] = field(default_factory=dict)
    put_failed: int = 0
    _snapshots: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=61))

    def record_put(self, topic: str, messages: int, size: int) -> None:
        self.put.add(messages, size)
        counter = self.put_by_topic.get(topic)
        if counter is None:
            counter = self.put_by_topic[topic] = _Counter()
        counter.add(messages, size)

    def record_put_failed(self) -> None:
        self.put_failed += 1

    def record_pull(self, group: str, topic: str, messages: int, size: int) -> None:
        self.get.add(messages, size)
        key = f"{topic}@{group}"
        counter = self.get_by_group_topic.get(key)
        if counter is None:
            counter = self.get_by_group_topic[key] = _Counter()
        counter.add(messages, size)

    def sample(self) -> None:
        """Take a rate snapshot; call about once a second."""
        self._snapshots.append((time.monotonic(), self.put.times, self.get.times))

    def tps(self, seconds: int = 10) -> tuple[float, float]:
        """(put, get) messages per second over roughly the last ``seconds``."""
        if len(self._snapshots) < 2:
            return 0.0, 0.0
        newest = self._snapshots[-1]
        oldest = self._snapshots[max(0, len(self._snapshots) - 1 - seconds)]
        elapsed = newest[0] - oldest[0]
        if elapsed <= 0:
            return 0.0, 0.0
        return (newest[1] - oldest[1]) / elapsed, (newest[2] - oldest[2]) / elapsed
