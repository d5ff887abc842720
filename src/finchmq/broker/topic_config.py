"""``TopicConfigManager``: the topics this broker serves, persisted to ``config/topics.json``.

Creates RocketMQ's system topics at start (TBW102 when auto-creation is on, SCHEDULE_TOPIC_XXXX
with 18 queues, the cluster and broker-name topics...), creates topics on first send through
the inheritable default topic (spec §5.3), and retry/DLQ topics on demand. Every change bumps
the data version so the name servers rebuild this broker's routes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from finchmq.protocol.bodies import (
    DataVersion,
    PermName,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
)
from finchmq.protocol.pop import build_cluster_revive_topic
from finchmq.protocol.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    RMQ_SYS_TRACE_TOPIC,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TIMER_TOPIC,
    reply_topic,
)

from ._persist import JsonConfigManager
from .config import BrokerConfig

__all__ = ["SCHEDULE_QUEUE_NUMS", "TopicConfigManager"]

log = logging.getLogger(__name__)

SCHEDULE_QUEUE_NUMS = 18  # one queue per delay level
_RW = PermName.READ | PermName.WRITE


class TopicConfigManager(JsonConfigManager):
    def __init__(
        self,
        path: Path,
        config: BrokerConfig,
        on_change: Callable[[], None] | None = None,
        *,
        timer_wheel_enable: bool = False,
    ) -> None:
        super().__init__(path)
        self.config = config
        self.timer_wheel_enable = timer_wheel_enable  # 5.x: the timer topic is a system topic
        self.data_version = DataVersion()
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.on_change = on_change  # e.g. re-register with the name servers now
        self._create_system_topics()

    def _put_system(self, name: str, queues: int, perm: int) -> None:
        self.topic_config_table[name] = TopicConfig(
            topic_name=name, read_queue_nums=queues, write_queue_nums=queues, perm=perm
        )

    def _create_system_topics(self) -> None:
        cfg = self.config
        self._put_system(SELF_TEST_TOPIC, 1, _RW)
        if cfg.auto_create_topic_enable:
            self._put_system(
                AUTO_CREATE_TOPIC_KEY_TOPIC, cfg.default_topic_queue_nums, _RW | PermName.INHERIT
            )
        self._put_system(BENCHMARK_TOPIC, 1024, _RW)
        self._put_system(
            cfg.broker_cluster_name, 16, PermName.INHERIT | (_RW if cfg.cluster_topic_enable else 0)
        )
        self._put_system(cfg.broker_name, 1, PermName.INHERIT | (_RW if cfg.broker_topic_enable else 0))
        self._put_system(OFFSET_MOVED_EVENT, 1, _RW)
        self._put_system(SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS, _RW)
        self._put_system(reply_topic(cfg.broker_cluster_name), 1, _RW)
        if cfg.trace_topic_enable:
            self._put_system(RMQ_SYS_TRACE_TOPIC, 1, _RW)
        if self.timer_wheel_enable:
            self._put_system(TIMER_TOPIC, 1, _RW)
        # 5.x: POP's check points and acks (Java TopicConfigManager: perm RW, reviveQueueNum queues)
        self._put_system(build_cluster_revive_topic(cfg.broker_cluster_name), cfg.revive_queue_num, _RW)

    # -- persistence ------------------------------------------------------------------------

    def encode(self) -> bytes:
        return self.wrapper().to_json()

    def decode(self, data: bytes) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(data)
        self.topic_config_table.update(wrapper.topic_config_table)
        self.data_version = wrapper.data_version
        if not self.config.auto_create_topic_enable:
            self.topic_config_table.pop(AUTO_CREATE_TOPIC_KEY_TOPIC, None)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(
            topic_config_table=dict(self.topic_config_table), data_version=self.data_version
        )

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version()
        self.mark_dirty()
        if self.on_change is not None:
            self.on_change()

    # -- queries and changes ----------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return tc is not None and tc.order

    def update_topic_config(self, topic_config: TopicConfig) -> None:
        old = self.topic_config_table.get(topic_config.topic_name)
        self.topic_config_table[topic_config.topic_name] = topic_config
        log.info("topic %s %s: %s", topic_config.topic_name, "updated" if old else "created", topic_config)
        self._changed()

    def delete_topic_config(self, topic: str) -> bool:
        if self.topic_config_table.pop(topic, None) is None:
            return False
        log.info("topic %s deleted", topic)
        self._changed()
        return True

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str, client_default_topic_queue_nums: int, topic_sys_flag: int
    ) -> TopicConfig | None:
        """Auto-create ``topic`` from an inheritable default topic (Java behaviour, spec §5.3)."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        default = self.topic_config_table.get(default_topic)
        if default is None:
            log.warning("create topic %s: default topic %s does not exist", topic, default_topic)
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.auto_create_topic_enable:
            return None
        if not PermName.is_inherited(default.perm):
            log.warning(
                "create topic %s: default topic %s is not inheritable (perm %d)",
                topic,
                default_topic,
                default.perm,
            )
            return None
        queue_nums = max(1, min(client_default_topic_queue_nums, default.write_queue_nums))
        created = TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=default.perm & ~PermName.INHERIT,
            topic_filter_type=default.topic_filter_type,
            topic_sys_flag=topic_sys_flag,
        )
        self.update_topic_config(created)
        return created

    def create_topic_in_send_message_back_method(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """Retry and DLQ topics: created on demand with the given queues and permission."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=perm,
            topic_filter_type=TopicFilterType.SINGLE_TAG,
            topic_sys_flag=topic_sys_flag,
        )
        self.update_topic_config(created)
        return created

    def rebuild_from_consume_queues(self, consume_queue_dir: Path) -> list[str]:
        """Add a config for every ``consumequeue/<topic>`` without one (queues = highest queue id
        + 1, perm RW), so that messages whose topic config was lost stay reachable. Blocking."""
        rebuilt: list[str] = []
        try:
            topic_dirs = sorted(p for p in consume_queue_dir.iterdir() if p.is_dir())
        except FileNotFoundError:
            return rebuilt
        for topic_dir in topic_dirs:
            topic = topic_dir.name
            queue_ids = [int(q.name) for q in topic_dir.iterdir() if q.is_dir() and q.name.isdigit()]
            if topic in self.topic_config_table or not queue_ids:
                continue
            queues = max(queue_ids) + 1
            self.topic_config_table[topic] = TopicConfig(
                topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=_RW
            )
            log.warning(
                "topic %s had messages but no config (lost in a crash?): rebuilt with %d queue(s), perm RW",
                topic,
                queues,
            )
            rebuilt.append(topic)
        if rebuilt:  # at start-up, before the first registration: no re-registration needed
            self.data_version = self.data_version.next_version()
            self.mark_dirty()
        return rebuilt

    def topic_names(self) -> list[str]:
        return list(self.topic_config_table)

    def __repr__(self) -> str:
        topics = len(self.topic_config_table)
        return f"<TopicConfigManager {topics} topics, version {self.data_version.counter}>"
