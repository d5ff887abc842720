"""``ConsumerOffsetManager``: each group's committed offset per (topic, queue), persisted to
``config/consumerOffset.json`` every ``flushConsumerOffsetInterval`` and at shutdown.

The key is Java's ``topic@group``; a stored -1 means "no offset" (spec §3.2.3).
"""

from __future__ import annotations

import logging
from pathlib import Path

from finchmq.protocol.bodies import ConsumerOffsetSerializeWrapper

from ._persist import JsonConfigManager

__all__ = ["TOPIC_GROUP_SEPARATOR", "ConsumerOffsetManager"]

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(JsonConfigManager):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.offset_table: dict[str, dict[int, int]] = {}
        # (topic, group, queue) -> the next offset the group will pull (Java 5.x pullOffsetTable;
        # in memory only): what the metrics count as in flight between pulled and committed
        self.pull_offset_table: dict[tuple[str, str, int], int] = {}

    def encode(self) -> bytes:
        return ConsumerOffsetSerializeWrapper(
            offset_table={key: dict(offsets) for key, offsets in self.offset_table.items()}
        ).to_json()

    def decode(self, data: bytes) -> None:
        wrapper = ConsumerOffsetSerializeWrapper.from_json(data)
        self.offset_table = {key: dict(offsets) for key, offsets in wrapper.offset_table.items()}

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        offsets = self.offset_table.setdefault(self.key(topic, group), {})
        previous = offsets.get(queue_id)
        offsets[queue_id] = offset
        self.mark_dirty()
        if previous is not None and offset < previous:
            log.debug(
                "offset of %s@%s queue %d moved back from %d to %d by %s",
                topic,
                group,
                queue_id,
                previous,
                offset,
                client_host,
            )

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """Copy ``src_group``'s offsets of ``topic`` to ``dest_group`` (Java ``cloneOffset``)."""
        offsets = self.offset_table.get(self.key(topic, src_group))
        if offsets is None:
            return False
        self.offset_table[self.key(topic, dest_group)] = dict(offsets)
        self.mark_dirty()
        return True

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when there is none."""
        offsets = self.offset_table.get(self.key(topic, group))
        if offsets is None:
            return -1
        return offsets.get(queue_id, -1)

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.pull_offset_table[topic, group, queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The next offset ``group`` will pull, or -1 when it has not pulled since start-up."""
        return self.pull_offset_table.get((topic, group, queue_id), -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(self.key(topic, group), {}))

    def which_topics_by_consumer(self, group: str) -> set[str]:
        return {
            key.rsplit(TOPIC_GROUP_SEPARATOR, 1)[0]
            for key in self.offset_table
            if key.endswith(TOPIC_GROUP_SEPARATOR + group)
        }

    def which_groups_by_topic(self, topic: str) -> set[str]:
        return {
            key.split(TOPIC_GROUP_SEPARATOR, 1)[1]
            for key in self.offset_table
            if key.startswith(topic + TOPIC_GROUP_SEPARATOR)
        }

    def remove_offsets(self, group: str) -> None:
        for key in [k for k in self.offset_table if k.endswith(TOPIC_GROUP_SEPARATOR + group)]:
            del self.offset_table[key]
        for pulled in [k for k in self.pull_offset_table if k[1] == group]:
            del self.pull_offset_table[pulled]
        self.mark_dirty()

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.offset_table if k.startswith(topic + TOPIC_GROUP_SEPARATOR)]:
            del self.offset_table[key]
        for pulled in [k for k in self.pull_offset_table if k[0] == topic]:
            del self.pull_offset_table[pulled]
        self.mark_dirty()
