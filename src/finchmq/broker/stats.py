"""Broker statistics (Java ``BrokerStatsManager``, the parts operators read): messages and bytes
put and pulled, per topic and in total, and TPS over the last minute, for
GET_BROKER_RUNTIME_INFO and GET_TOPIC_STATS_INFO."""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from decimal import Decimal

__all__ = ["BrokerStats", "java_double", "java_human_bytes"]


def java_double(value: float) -> str:
    """Java ``Double.toString``: shortest round-trip digits, scientific below 1e-3 and from 1e7."""
    value = float(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7 or not math.isfinite(value):
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    scientific = len(text) + exponent - 1
    text = text.rstrip("0") or "0"
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{scientific}"


def java_human_bytes(count: int) -> str:
    """RocketMQ ``MixAll.humanReadableByteCount(bytes, false)``: ``512 B``, ``1.5 KiB``..."""
    if count < 1024:
        return f"{count} B"
    exponent = 0
    value = float(count)
    while value >= 1024 and exponent < 6:
        value /= 1024
        exponent += 1
    return f"{value:.1f} {'KMGTPE'[exponent - 1]}iB"


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
    # Java BrokerStats: the totals at this morning's and yesterday morning's midnight (local time)
    put_today_morning: int = 0
    put_yesterday_morning: int = 0
    get_today_morning: int = 0
    get_yesterday_morning: int = 0
    _day: int = field(default_factory=lambda: time.localtime().tm_yday)
    _snapshots: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=601))

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
        """Take a rate snapshot (and roll the day's counters at midnight); call about once a second."""
        self._snapshots.append((time.monotonic(), self.put.times, self.get.times))
        day = time.localtime().tm_yday
        if day != self._day:
            self._day = day
            self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, self.put.times
            self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, self.get.times

    def java_tps(self, index: int) -> str:
        """Java StoreStatsService's form: TPS over the last 10, 60 and 600 s, space separated, each
        empty until that much history exists; ``index`` 1 is puts, 2 is messages pulled."""
        parts = []
        snapshots = self._snapshots
        for seconds in (10, 60, 600):
            if len(snapshots) <= seconds:
                parts.append("")
                continue
            newest, oldest = snapshots[-1], snapshots[-1 - seconds]
            elapsed = newest[0] - oldest[0]
            parts.append(java_double((newest[index] - oldest[index]) / elapsed if elapsed > 0 else 0.0))
        return " ".join(parts)

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
