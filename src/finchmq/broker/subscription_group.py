"""``SubscriptionGroupManager``: consumer groups' settings (retry queues, max retries, whether
they may consume), persisted to ``config/subscriptionGroup.json``; auto-created on first use
when ``autoCreateSubscriptionGroup`` is on, as Java does."""

from __future__ import annotations

import logging
from pathlib import Path

from finchmq.protocol.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper
from finchmq.protocol.topics import SYSTEM_GROUPS

from ._persist import JsonConfigManager
from .config import BrokerConfig

__all__ = ["SYSTEM_GROUPS", "SubscriptionGroupManager"]

log = logging.getLogger(__name__)


class SubscriptionGroupManager(JsonConfigManager):
    def __init__(self, path: Path, config: BrokerConfig) -> None:
        super().__init__(path)
        self.config = config
        self.data_version = DataVersion()
        self.table: dict[str, SubscriptionGroupConfig] = {
            group: SubscriptionGroupConfig(group_name=group) for group in SYSTEM_GROUPS
        }

    def encode(self) -> bytes:
        return SubscriptionGroupWrapper(
            subscription_group_table=dict(self.table), data_version=self.data_version
        ).to_json()

    def decode(self, data: bytes) -> None:
        wrapper = SubscriptionGroupWrapper.from_json(data)
        self.table.update(wrapper.subscription_group_table)
        self.data_version = wrapper.data_version

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings, auto-created when allowed; None if unknown and not creatable."""
        found = self.table.get(group)
        if found is None and (self.config.auto_create_subscription_group or group in SYSTEM_GROUPS):
            found = SubscriptionGroupConfig(group_name=group)
            self.table[group] = found
            log.info("auto-created subscription group %s", group)
            self._changed()
        return found

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        self.table[config.group_name] = config
        log.info("subscription group %s updated: %s", config.group_name, config)
        self._changed()

    def delete_subscription_group_config(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        log.info("subscription group %s deleted", group)
        self._changed()
        return True

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version()
        self.mark_dirty()
