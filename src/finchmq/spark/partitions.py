"""Input partitions and offsets of the ``rocketmq`` source: picklable values, pure functions.

Owns: ``QueuePartition`` (one Spark input partition: a queue and a half-open offset range), the
streaming offset format (``{"topic": {"brokerName": {"queueId": offset}}}``, a dict of primitives
as Spark's checkpoint needs it), partition planning (``plan_partitions``, splitting large ranges
by ``maxRecordsPerPartition``) and admission control (``rate_limit``, ``maxOffsetsPerTrigger``
split across queues in proportion to their backlog). Imports: pyspark's ``InputPartition`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .options import QueueKey

__all__ = [
    "QueuePartition",
    "from_offset_json",
    "plan_partitions",
    "rate_limit",
    "to_offset_json",
]

OffsetJson = dict[str, dict[str, dict[str, int]]]


@dataclass(frozen=True, slots=True)
class QueuePartition(InputPartition):
    """Read ``topic``/``broker_name``/``queue_id`` from ``start`` (inclusive) to ``end`` (exclusive)."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return f"QueuePartition({self.topic}@{self.broker_name}:{self.queue_id} [{self.start}, {self.end}))"


def to_offset_json(offsets: Mapping[QueueKey, int]) -> OffsetJson:
    """``{(topic, broker, qid): offset}`` -> ``{topic: {broker: {"qid": offset}}}``, sorted."""
    out: OffsetJson = {}
    for (topic, broker, queue_id), offset in sorted(offsets.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(queue_id)] = int(offset)
    return out


def from_offset_json(data: Mapping[str, Mapping[str, Mapping[str, int]]]) -> dict[QueueKey, int]:
    """The inverse of ``to_offset_json`` (what Spark hands back from the checkpoint)."""
    return {
        (topic, broker, int(queue_id)): int(offset)
        for topic, brokers in data.items()
        for broker, queues in brokers.items()
        for queue_id, offset in queues.items()
    }


def plan_partitions(
    start: Mapping[QueueKey, int], end: Mapping[QueueKey, int], max_records: int | None
) -> list[QueuePartition]:
    """One partition per queue with ``end > start`` (a queue missing from ``start`` starts at 0:
    a queue that appeared since is read from its beginning), split into ranges of at most
    ``max_records`` offsets. Ordered by queue, then offset."""
    partitions: list[QueuePartition] = []
    for key in sorted(end):
        begin, stop = start.get(key, 0), end[key]
        step = max_records if max_records else max(stop - begin, 1)
        for lo in range(begin, stop, step):
            partitions.append(QueuePartition(key[0], key[1], key[2], lo, min(lo + step, stop)))
    return partitions


def rate_limit(
    start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], max_offsets: int
) -> dict[QueueKey, int]:
    """End offsets that admit at most ``max_offsets`` new offsets in total.

    Each queue gets a share of ``max_offsets`` in proportion to its backlog (Spark's Kafka
    source does the same), rounded down, and the remainder goes to the largest fractional
    shares, so the total is exactly ``min(max_offsets, backlog)``. Queues missing from ``start``
    start at 0.
    """
    backlog = {key: max(latest[key] - start.get(key, 0), 0) for key in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return {key: start.get(key, 0) + n for key, n in backlog.items()}
    shares = {key: max_offsets * n // total for key, n in backlog.items()}
    remainder = max_offsets - sum(shares.values())
    by_fraction = sorted(backlog, key=lambda k: (-((max_offsets * backlog[k]) % total), k))
    for key in by_fraction[:remainder]:
        shares[key] += 1
    return {key: start.get(key, 0) + shares[key] for key in latest}
