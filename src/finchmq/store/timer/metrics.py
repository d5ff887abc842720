"""``TimerMetrics``: timers waiting per real topic (Java ``store/timer/TimerMetrics``).

Owns ``<root>/config/timermetrics`` (Java's JSON: ``{"dataVersion": {...}, "timingCount":
{topic: {"count": n, "timeStamp": ms}}}``, also GET_TIMER_METRICS's body) and the distribution
periods (5 s ... 24 h) of ``rocketmq_timer_message_snapshot``. Imports: stdlib, the protocol's
JSON and ``finchmq.common.files``.

Strategy: counts change on the timer's threads (+1 enqueued, -1 delivered or recalled) under
one lock; the flush thread writes the file when something changed (Java writes it at every
flush); a torn file falls back to its ``.bak`` as the broker's other JSON files do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from finchmq.common.files import read_config_file, write_atomically
from finchmq.protocol import _json

__all__ = ["TIMER_DIST", "TimerMetrics"]

log = logging.getLogger(__name__)

TIMER_DIST: Final = (5, 60, 300, 900, 3600, 14400, 28800, 86400)  # s; Java TimerMetrics.timerDist
_SYSTEM_PREFIXES: Final = ("rmq_sys_", "%LMQ%")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TimerMetrics:
    """Per-topic timer counts and their data version (Java's ``ConfigManager`` file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.timing_count: dict[str, list[int]] = {}  # topic -> [count, timestamp]
        self.state_version = 0
        self.timestamp = _now_ms()
        self.counter = 0
        self._persisted_counter = -1

    def add_and_get(self, topic: str, value: int) -> int:
        """Java ``addAndGet``: the topic's count changed by ``value``; returns the new count."""
        now = _now_ms()
        with self._lock:
            self.counter += 1
            self.timestamp = now
            pair = self.timing_count.get(topic)
            if pair is None:
                pair = self.timing_count[topic] = [0, now]
            pair[0] += value
            pair[1] = now
            return pair[0]

    def get_timing_count(self, topic: str) -> int:
        pair = self.timing_count.get(topic)
        return pair[0] if pair is not None else 0

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {topic: pair[0] for topic, pair in self.timing_count.items()}

    def remove_timing_count(self, topic: str) -> None:
        """A deleted topic's count goes (Java ``removeTimingCount``)."""
        with self._lock:
            self.timing_count.pop(topic, None)

    def clean_metrics(self, topics: Iterable[str]) -> None:
        """Drop the counts of topics that no longer exist, system topics aside (Java)."""
        keep = set(topics)
        with self._lock:
            for topic in [
                t for t in self.timing_count if t not in keep and not t.startswith(_SYSTEM_PREFIXES)
            ]:
                del self.timing_count[topic]
                log.info("clean timer metrics, because not in topic config, %s", topic)

    def encode(self) -> bytes:
        """Java ``TimerMetricsSerializeWrapper`` as JSON."""
        with self._lock:
            tree = {
                "dataVersion": {
                    "counter": self.counter,
                    "stateVersion": self.state_version,
                    "timestamp": self.timestamp,
                },
                "timingCount": {t: {"count": c, "timeStamp": ts} for t, (c, ts) in self.timing_count.items()},
            }
        return _json.dumps(tree)

    def decode(self, data: bytes) -> None:
        """Read Java's JSON. Raises ``ValueError`` for JSON of another shape."""
        tree = _json.loads_lenient(data)
        if not isinstance(tree, dict):
            raise ValueError(f"timer metrics must be a JSON object, got {type(tree).__name__}")
        counts = tree.get("timingCount") or {}
        version = tree.get("dataVersion") or {}
        if not isinstance(counts, dict) or not isinstance(version, dict):
            raise ValueError("timer metrics: timingCount and dataVersion must be objects")
        table = {str(t): [int(m.get("count", 0)), int(m.get("timeStamp", 0))] for t, m in counts.items()}
        with self._lock:
            self.timing_count.update(table)
            self.counter = int(version.get("counter", 0))
            self.state_version = int(version.get("stateVersion", 0))
            self.timestamp = int(version.get("timestamp", self.timestamp))
            self._persisted_counter = self.counter

    def load(self) -> bool:
        """Read the file (or its backup); True also when there is none (Java)."""
        try:
            read_config_file(self.path, self.decode)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("timer metrics %s unreadable (%s): counts start again from 0", self.path, exc)
        return True

    def persist(self) -> None:
        """Write the file if a count changed since the last write."""
        if self.counter == self._persisted_counter:
            return
        counter = self.counter
        write_atomically(self.path, self.encode())
        self._persisted_counter = counter
