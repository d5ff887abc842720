"""Consumer statistics (Java ``ConsumerStatsManager``): pull and consume TPS, response times and
failures per ``topic@group``, as reported in GET_CONSUMER_RUNNING_INFO.

Strategy: one-second buckets per statistic, kept for an hour. TPS and RT are computed on demand
over the last minute (or since the first event, if sooner); ``consume_failed_msgs`` sums the last
hour, as Java's ``statsInHour``. Loop-thread only; no locks. The consume services record through
``consume_counters`` handles (no key lookup per message).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Final

from finchmq.protocol.bodies import ConsumeStatus

__all__ = ["ConsumeCounters", "ConsumerStatsManager"]

_MINUTE: Final = 60
_HOUR: Final = 3600


class _Series:
    """Per-second (sum, count) buckets."""

    __slots__ = ("buckets", "first")

    def __init__(self) -> None:
        self.buckets: deque[list[float]] = deque()
        self.first = time.monotonic()

    def add(self, value: float, count: int) -> None:
        """Record ``count`` events worth ``value`` in the current second."""
        now = int(time.monotonic())
        buckets = self.buckets
        if buckets and buckets[-1][0] == now:
            bucket = buckets[-1]
            bucket[1] += value
            bucket[2] += count
        else:
            buckets.append([now, value, count])
            while buckets and buckets[0][0] <= now - _HOUR:
                buckets.popleft()

    def window(self, seconds: int) -> tuple[float, float, float]:
        """(sum, count, elapsed seconds) over the last ``seconds``."""
        now = time.monotonic()
        since = int(now) - seconds
        total = 0.0
        count = 0.0
        for second, value, n in reversed(self.buckets):
            if second <= since:
                break
            total += value
            count += n
        elapsed = min(float(seconds), max(now - self.first, 1.0))
        return total, count, elapsed


class ConsumeCounters:
    """One group's consume statistics of one topic, recorded without a key lookup per call
    (the consume services keep one per topic). Same effect as the manager's ``inc_consume_*``:
    each series is created by its first event."""

    __slots__ = ("_failed", "_group", "_manager", "_ok", "_rt", "_topic")

    def __init__(self, manager: ConsumerStatsManager, group: str, topic: str) -> None:
        self._manager = manager
        self._group = group
        self._topic = topic
        self._rt: _Series | None = None
        self._ok: _Series | None = None
        self._failed: _Series | None = None

    def inc_rt(self, rt_ms: float, calls: int = 1) -> None:
        """``calls`` listener calls that took ``rt_ms`` in all."""
        series = self._rt
        if series is None:
            series = self._rt = self._manager._series_of("CONSUME_RT", self._topic, self._group)
        series.add(rt_ms, calls)

    def inc_ok(self, msgs: int, calls: int = 1) -> None:
        """``msgs`` messages consumed by ``calls`` listener calls."""
        if msgs:
            series = self._ok
            if series is None:
                series = self._ok = self._manager._series_of("CONSUME_OK_TPS", self._topic, self._group)
            series.add(msgs, calls)

    def inc_failed(self, msgs: int) -> None:
        if msgs:
            series = self._failed
            if series is None:
                series = self._failed = self._manager._series_of(
                    "CONSUME_FAILED_TPS", self._topic, self._group
                )
            series.add(msgs, 1)


class ConsumerStatsManager:
    """Counters keyed by statistic, topic and group (Java's ``topic@group`` keys)."""

    def __init__(self) -> None:
        self._series: dict[tuple[str, str, str], _Series] = {}

    def _series_of(self, kind: str, topic: str, group: str) -> _Series:
        key = (kind, topic, group)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series()
        return series

    def _add(self, kind: str, topic: str, group: str, value: float, count: int) -> None:
        self._series_of(kind, topic, group).add(value, count)

    def consume_counters(self, group: str, topic: str) -> ConsumeCounters:
        """A handle on the CONSUME_RT, CONSUME_OK_TPS and CONSUME_FAILED_TPS of ``topic@group``."""
        return ConsumeCounters(self, group, topic)

    def inc_pull_rt(self, group: str, topic: str, rt_ms: float) -> None:
        self._add("PULL_RT", topic, group, rt_ms, 1)

    def inc_pull_tps(self, group: str, topic: str, msgs: int) -> None:
        self._add("PULL_TPS", topic, group, msgs, 1)

    def inc_consume_rt(self, group: str, topic: str, rt_ms: float) -> None:
        self._add("CONSUME_RT", topic, group, rt_ms, 1)

    def inc_consume_ok_tps(self, group: str, topic: str, msgs: int) -> None:
        if msgs:
            self._add("CONSUME_OK_TPS", topic, group, msgs, 1)

    def inc_consume_failed_tps(self, group: str, topic: str, msgs: int) -> None:
        if msgs:
            self._add("CONSUME_FAILED_TPS", topic, group, msgs, 1)

    def _tps(self, kind: str, topic: str, group: str) -> float:
        series = self._series.get((kind, topic, group))
        if series is None:
            return 0.0
        total, _, elapsed = series.window(_MINUTE)
        return total / elapsed

    def _rt(self, kind: str, topic: str, group: str) -> float:
        series = self._series.get((kind, topic, group))
        if series is None:
            return 0.0
        total, count, _ = series.window(_MINUTE)
        return total / count if count else 0.0

    def consume_status(self, group: str, topic: str) -> ConsumeStatus:
        """Java ``ConsumerStatsManager.consumeStatus``."""
        key = (topic, group)
        failed = self._series.get(("CONSUME_FAILED_TPS", topic, group))
        failed_hour = int(failed.window(_HOUR)[0]) if failed is not None else 0
        return ConsumeStatus(
            pull_rt=self._rt("PULL_RT", *key),
            pull_tps=self._tps("PULL_TPS", *key),
            consume_rt=self._rt("CONSUME_RT", *key),
            consume_ok_tps=self._tps("CONSUME_OK_TPS", *key),
            consume_failed_tps=self._tps("CONSUME_FAILED_TPS", *key),
            consume_failed_msgs=failed_hour,
        )
