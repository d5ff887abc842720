"""``PopInflightMessageCounter``: messages popped and neither acked nor revived, per
(topic, group, queue). With ``enablePopMessageThreshold`` a queue with more than
``popInflightMessageThreshold`` of them is not popped (Java's back-pressure on a consumer that
takes without acking). Counts start at zero with the broker: a message popped before the
start is not subtracted when it is acked (``popTime`` before ``should_start_time``).
"""

from __future__ import annotations

from finchmq.protocol.pop import PopCheckPoint

__all__ = ["PopInflightMessageCounter"]


class PopInflightMessageCounter:
    def __init__(self, should_start_time: int) -> None:
        self.should_start_time = should_start_time  # ms: pops older than this were not counted
        self._counts: dict[tuple[str, str], dict[int, int]] = {}

    def increment(self, topic: str, group: str, queue_id: int, num: int) -> None:
        if num <= 0:
            return
        queues = self._counts.setdefault((topic, group), {})
        count = queues.get(queue_id, 0) + num
        if count <= 0:
            queues.pop(queue_id, None)
        else:
            queues[queue_id] = count

    def decrement(self, topic: str, group: str, pop_time: int, queue_id: int, delta: int) -> None:
        if pop_time < self.should_start_time:
            return
        queues = self._counts.get((topic, group))
        if queues is None or queue_id not in queues:
            return
        count = queues[queue_id] - delta
        if count <= 0:
            del queues[queue_id]
            if not queues:
                del self._counts[topic, group]
        else:
            queues[queue_id] = count

    def decrement_check_point(self, ck: PopCheckPoint) -> None:
        """One message of ``ck`` revived (Java counts one per revived message)."""
        self.decrement(ck.topic or "", ck.cid or "", ck.pop_time, ck.queue_id, 1)

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        queues = self._counts.get((topic, group))
        if queues is not None:
            queues.pop(queue_id, None)
            if not queues:
                del self._counts[topic, group]

    def clear_group(self, group: str) -> None:
        for key in [k for k in self._counts if k[1] == group]:
            del self._counts[key]

    def clear_topic(self, topic: str) -> None:
        for key in [k for k in self._counts if k[0] == topic]:
            del self._counts[key]

    def get(self, topic: str, group: str, queue_id: int) -> int:
        return max(0, self._counts.get((topic, group), {}).get(queue_id, 0))

    def total(self) -> int:
        return sum(sum(queues.values()) for queues in self._counts.values())
