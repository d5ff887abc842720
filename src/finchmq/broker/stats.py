"""Broker statistics (Java ``BrokerStatsManager``, the parts operators read): messages and bytes
put and pulled, per topic and in total, and TPS over the last minute, for
GET_BROKER_RUNTIME_INFO and GET_TOPIC_STATS_INFO; and Java's ``StatsItem`` series (the last
minute, hour and day) per topic and per ``topic@group``, for VIEW_BROKER_STATS_DATA
(``mqadmin statsAll``)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from finchmq.common.metrics import HistogramSet
from finchmq.protocol._json import java_double

__all__ = ["BrokerStats", "StatsItem", "StatsSnapshot", "java_human_bytes"]

# Java BrokerStatsManager stats names
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"


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


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """Java ``StatsSnapshot``: the sum, rate and average per call over one series."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


_Sample = tuple[int, int, int]  # (epoch ms, times, value), Java CallSnapshot


class StatsItem:
    """Java ``StatsItem``: a running value and call count, sampled every 10 s (the minute series
    keeps 7 samples), every 10 min (the hour series, 7) and every hour (the day series, 25). A
    series starts with a synthetic zero one period before the item's first sample, as in Java."""

    _SERIES = ((10_000, 7), (600_000, 7), (3_600_000, 25))  # (period ms, samples kept)

    __slots__ = ("_due", "_series", "times", "value")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        self._series: tuple[deque[_Sample], ...] = tuple(deque(maxlen=keep) for _, keep in self._SERIES)
        self._due = [0, 0, 0]

    def add(self, value: int, times: int = 1) -> None:
        self.value += value
        self.times += times

    def sample(self, now_ms: int) -> None:
        """Take the samples that are due (Java schedules each series at a fixed rate from the
        item's creation; the first of each is taken at once)."""
        for i, (period, _) in enumerate(self._SERIES):
            if now_ms < self._due[i]:
                continue
            series = self._series[i]
            if not series:
                series.append((now_ms - period, 0, 0))
                self._due[i] = now_ms
            series.append((now_ms, self.times, self.value))
            while self._due[i] <= now_ms:
                self._due[i] += period

    def _snapshot(self, series: deque[_Sample]) -> StatsSnapshot:
        if not series:
            return StatsSnapshot()
        (first_ms, first_times, first_value), (last_ms, last_times, last_value) = series[0], series[-1]
        total = last_value - first_value
        elapsed = last_ms - first_ms
        calls = last_times - first_times
        return StatsSnapshot(
            sum=total,
            tps=total * 1000.0 / elapsed if elapsed > 0 else 0.0,
            avgpt=total / calls if calls > 0 else 0.0,
        )

    def minute(self) -> StatsSnapshot:
        return self._snapshot(self._series[0])

    def hour(self) -> StatsSnapshot:
        return self._snapshot(self._series[1])

    def day(self) -> StatsSnapshot:
        return self._snapshot(self._series[2])


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
    items: dict[tuple[str, str], StatsItem] = field(default_factory=dict)
    # per-message size by topic, kept only while metrics are on (rocketmq_message_size)
    message_sizes: HistogramSet | None = None
    # topic -> its put_by_topic counter and TOPIC_PUT_NUMS/TOPIC_PUT_SIZE items
    _put_counters: dict[str, tuple[_Counter, StatsItem, StatsItem]] = field(default_factory=dict)

    def _add(self, name: str, key: str, value: int) -> None:
        item = self.items.get((name, key))
        if item is None:
            item = self.items[name, key] = StatsItem()
            item.add(value)
            item.sample(int(time.time() * 1000))
            return
        item.add(value)

    def stats_item(self, name: str, key: str) -> StatsItem | None:
        """Java ``BrokerStatsManager.getStatsItem``: ``TOPIC_PUT_NUMS``/``TOPIC_PUT_SIZE`` by topic,
        ``GROUP_GET_NUMS``/``GROUP_GET_SIZE`` by ``topic@group``; None when never counted."""
        return self.items.get((name, key))

    def record_put(self, topic: str, messages: int, size: int) -> None:
        put = self.put
        put.times += messages
        put.total += size
        # every send comes here: the topic's three counters in one lookup
        counters = self._put_counters.get(topic)
        if counters is None:
            self._first_put(topic, messages, size)
        else:
            counter, nums, sizes_item = counters
            counter.times += messages
            counter.total += size
            nums.value += messages
            nums.times += 1
            sizes_item.value += size
            sizes_item.times += 1
        sizes = self.message_sizes
        if sizes is not None and messages:
            sizes.observe(topic, size / messages)  # Java: wrote bytes / messages, per put

    def _first_put(self, topic: str, messages: int, size: int) -> None:
        counter = self.put_by_topic.get(topic)
        if counter is None:
            counter = self.put_by_topic[topic] = _Counter()
        counter.add(messages, size)
        self._add(TOPIC_PUT_NUMS, topic, messages)
        self._add(TOPIC_PUT_SIZE, topic, size)
        self._put_counters[topic] = (
            counter,
            self.items[TOPIC_PUT_NUMS, topic],
            self.items[TOPIC_PUT_SIZE, topic],
        )

    def record_put_failed(self) -> None:
        self.put_failed += 1

    def record_pull(self, group: str, topic: str, messages: int, size: int) -> None:
        self.get.add(messages, size)
        key = f"{topic}@{group}"
        counter = self.get_by_group_topic.get(key)
        if counter is None:
            counter = self.get_by_group_topic[key] = _Counter()
        counter.add(messages, size)
        if messages:
            self._add(GROUP_GET_NUMS, key, messages)
            self._add(GROUP_GET_SIZE, key, size)

    def sample(self) -> None:
        """Take a rate snapshot, the stats items' due samples (and roll the day's counters at
        midnight); call about once a second."""
        self._snapshots.append((time.monotonic(), self.put.times, self.get.times))
        now_ms = int(time.time() * 1000)
        for item in self.items.values():
            item.sample(now_ms)
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
