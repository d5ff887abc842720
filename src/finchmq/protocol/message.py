"""Messages: ``MessageQueue`` (more to come: Message, MessageExt, stored layout, batches, ids)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MessageQueue"]


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; orders as Java's ``MessageQueue.compareTo``."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"
