"""Who is connected: producer groups and consumer groups with their subscriptions
(Java ``ProducerManager``, ``ConsumerManager``, ``ConsumerGroupInfo``).

Clients are keyed by their connection. A heartbeat (re)registers them; a group whose set of
connections or subscriptions changed is told through ``on_consumer_ids_changed`` (the broker
sends NOTIFY_CONSUMER_IDS_CHANGED to its members). Clients silent for ``channel_expired_timeout``
or whose connection closed are dropped (ClientHousekeepingService). Pure state plus a callback;
the connection object is opaque here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from finchmq.protocol.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from finchmq.protocol.codes import LanguageCode
from finchmq.remoting import Channel

__all__ = ["ClientChannelInfo", "ConsumerGroupInfo", "ConsumerManager", "ProducerManager"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Channel
    client_id: str
    language: LanguageCode
    version: int
    client_addr: str
    last_update_timestamp: int  # ms


@dataclass(slots=True)
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_timestamp: int = 0

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channels.values():
            if info.client_id == client_id:
                return info
        return None

    def update_channel(self, info: ClientChannelInfo) -> bool:
        """True when the channel is new to the group."""
        existing = self.channels.get(info.channel)
        self.channels[info.channel] = info
        if existing is None:
            log.info("new consumer connected, group %s %s", self.group_name, info.client_id)
            return True
        return existing.client_id != info.client_id

    def update_subscriptions(self, subscriptions: Iterable[SubscriptionData]) -> bool:
        """Replace the subscriptions; True when a topic was added or removed (Java semantics)."""
        new = {sub.topic: sub for sub in subscriptions}
        changed = new.keys() != self.subscriptions.keys()
        for topic, sub in new.items():
            old = self.subscriptions.get(topic)
            if old is not None and old.sub_version > sub.sub_version:
                new[topic] = old  # an older heartbeat must not roll a subscription back
        self.subscriptions = new
        return changed


class ConsumerManager:
    """Consumer groups, their members and subscriptions."""

    def __init__(self, on_consumer_ids_changed: Callable[[str, list[Channel]], None] | None = None) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.on_consumer_ids_changed = on_consumer_ids_changed

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: Iterable[SubscriptionData],
        *,
        notify: bool,
    ) -> bool:
        """Record a consumer heartbeat; True when the group's members or topics changed."""
        group_info = self.groups.get(group)
        if group_info is None:
            group_info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
            self.groups[group] = group_info
        group_info.consume_type = consume_type
        group_info.message_model = message_model
        group_info.consume_from_where = consume_from_where
        group_info.last_update_timestamp = info.last_update_timestamp
        channel_changed = group_info.update_channel(info)
        subscription_changed = group_info.update_subscriptions(subscriptions)
        changed = channel_changed or subscription_changed
        if changed and notify:
            self._notify(group_info)
        return changed

    def unregister_consumer(self, group: str, channel: Channel, *, notify: bool) -> None:
        group_info = self.groups.get(group)
        if group_info is None or group_info.channels.pop(channel, None) is None:
            return
        log.info("consumer unregistered from group %s", group)
        if not group_info.channels:
            del self.groups[group]
        elif notify:
            self._notify(group_info)

    def do_channel_close_event(self, channel: Channel) -> list[str]:
        """Drop ``channel`` from every group; returns the groups it left."""
        left: list[str] = []
        for group, group_info in list(self.groups.items()):
            if group_info.channels.pop(channel, None) is not None:
                left.append(group)
                if not group_info.channels:
                    del self.groups[group]
                    log.info("consumer group %s is empty now and removed", group)
                else:
                    self._notify(group_info)
        return left

    def scan_not_active_channel(self, now_ms: int, expired_ms: int) -> list[Channel]:
        """Drop members without a heartbeat for ``expired_ms``; returns their channels."""
        dropped: list[Channel] = []
        for group, group_info in list(self.groups.items()):
            for channel, info in list(group_info.channels.items()):
                if now_ms - info.last_update_timestamp > expired_ms:
                    log.warning("consumer %s of group %s expired (no heartbeat)", info.client_id, group)
                    del group_info.channels[channel]
                    dropped.append(channel)
            if not group_info.channels:
                del self.groups[group]
        return dropped

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        group_info = self.groups.get(group)
        return group_info.subscriptions.get(topic) if group_info is not None else None

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.groups.items() if topic in info.subscriptions}

    def _notify(self, group_info: ConsumerGroupInfo) -> None:
        if self.on_consumer_ids_changed is not None:
            self.on_consumer_ids_changed(group_info.group_name, list(group_info.channels))


class ProducerManager:
    """Producer groups and their members (for GET_PRODUCER_CONNECTION_LIST and transactions)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self._next = 0

    def find_channel(self, client_id: str) -> Channel | None:
        """The connection of the producer with ``client_id`` (Java ``findChannel``): where a
        reply to its request goes."""
        for members in self.groups.values():
            for channel, info in members.items():
                if info.client_id == client_id and getattr(channel, "is_open", True):
                    return channel
        return None

    def available_channel(self, group: str) -> Channel | None:
        """A live connection of ``group``, round robin (Java ``getAvailableChannel``): where a
        transaction check goes."""
        members = list(self.groups.get(group, {}))
        if not members:
            return None
        self._next += 1
        for i in range(len(members)):
            channel = members[(self._next + i) % len(members)]
            if getattr(channel, "is_open", True):
                return channel
        return None

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        self.groups.setdefault(group, {})[info.channel] = info

    def unregister_producer(self, group: str, channel: Channel) -> None:
        members = self.groups.get(group)
        if members is not None and members.pop(channel, None) is not None and not members:
            del self.groups[group]

    def do_channel_close_event(self, channel: Channel) -> None:
        for group, members in list(self.groups.items()):
            if members.pop(channel, None) is not None and not members:
                del self.groups[group]

    def scan_not_active_channel(self, now_ms: int, expired_ms: int) -> list[Channel]:
        dropped: list[Channel] = []
        for group, members in list(self.groups.items()):
            for channel, info in list(members.items()):
                if now_ms - info.last_update_timestamp > expired_ms:
                    del members[channel]
                    dropped.append(channel)
            if not members:
                del self.groups[group]
        return dropped
