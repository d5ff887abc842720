"""``RouteInfoManager``: who serves which topic. Pure state, no I/O (Java ``RouteInfoManager``).

Tables, as in Java:
    topic_queue_table     topic -> {brokerName -> QueueData}  (built from masters' topic configs)
    broker_addr_table     brokerName -> (cluster, {brokerId -> addr})
    cluster_addr_table    cluster -> {brokerName}
    broker_live_table     brokerAddr -> BrokerLiveInfo (last registration, data version, channel)
    filter_server_table   brokerAddr -> [filter server addr]
A broker that closes its connection, unregisters, or is silent for ``broker_channel_expired_time``
loses its addresses, and its queues in every topic; a topic with no queue left disappears.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from finchmq.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    PermName,
    QueueData,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

if TYPE_CHECKING:
    from finchmq.remoting import Channel

__all__ = ["MASTER_ID", "BrokerLiveInfo", "RegisterBrokerResult", "RouteInfoManager"]

log = logging.getLogger(__name__)

MASTER_ID = 0


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: int  # ms
    data_version: DataVersion
    channel: Channel | None
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class _BrokerEntry:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def snapshot(self) -> BrokerData:
        return BrokerData(
            cluster=self.cluster, broker_name=self.broker_name, broker_addrs=dict(self.broker_addrs)
        )


class RouteInfoManager:
    """The name server's routing state; every method is a pure state transition."""

    def __init__(self) -> None:
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, _BrokerEntry] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration -----------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: Iterable[str],
        channel: Channel | None,
        now_ms: int,
    ) -> RegisterBrokerResult:
        """Record a broker's (re-)registration; masters also publish their topics' queues."""
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        entry = self.broker_addr_table.get(broker_name)
        register_first = entry is None
        if entry is None:
            entry = _BrokerEntry(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = entry
        # A slave promoted to master (or the reverse) keeps its address under a new id.
        for other_id in [i for i, a in entry.broker_addrs.items() if a == broker_addr and i != broker_id]:
            del entry.broker_addrs[other_id]
        old_addr = entry.broker_addrs.get(broker_id)
        entry.broker_addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        publish = topic_config_wrapper is not None and broker_id == MASTER_ID
        if (
            publish
            and topic_config_wrapper is not None
            and (
                register_first
                or self.is_broker_topic_config_changed(broker_addr, topic_config_wrapper.data_version)
            )
        ):
            for topic_config in topic_config_wrapper.topic_config_table.values():
                self.topic_queue_table.setdefault(topic_config.topic_name, {})[broker_name] = QueueData(
                    broker_name=broker_name,
                    read_queue_nums=topic_config.read_queue_nums,
                    write_queue_nums=topic_config.write_queue_nums,
                    perm=topic_config.perm,
                    topic_sys_flag=topic_config.topic_sys_flag,
                )

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            last_update_timestamp=now_ms,
            data_version=topic_config_wrapper.data_version if topic_config_wrapper else DataVersion(),
            channel=channel,
            ha_server_addr=ha_server_addr,
        )
        if previous is None:
            log.info(
                "new broker registered: %s %s (id %d) at %s",
                cluster_name,
                broker_name,
                broker_id,
                broker_addr,
            )

        filters = list(filter_server_list)
        if filters:
            self.filter_server_table[broker_addr] = filters
        else:
            self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = entry.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    return RegisterBrokerResult(
                        ha_server_addr=master_live.ha_server_addr, master_addr=master_addr
                    )
        return RegisterBrokerResult()

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def update_broker_info_update_timestamp(self, broker_addr: str, now_ms: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_timestamp = now_ms

    def unregister_broker(
        self, *, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        entry = self.broker_addr_table.get(broker_name)
        remove_broker_name = False
        if entry is not None:
            if entry.broker_addrs.get(broker_id) == broker_addr:
                del entry.broker_addrs[broker_id]
            if not entry.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_broker_name = True
        if remove_broker_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of(broker_name)
        log.info(
            "broker unregistered: %s %s (id %d) at %s", cluster_name, broker_name, broker_id, broker_addr
        )

    def change_write_perm(self, broker_name: str, *, writable: bool) -> int:
        """Remove (or give back) the WRITE permission of every queue of ``broker_name``, as
        mqadmin ``wipeWritePerm``/``addWritePerm`` do before taking a broker out of service;
        returns how many topics changed. The broker's next registration restores its own view."""
        changed = 0
        for queues in self.topic_queue_table.values():
            data = queues.get(broker_name)
            if data is None:
                continue
            perm = data.perm | PermName.WRITE if writable else data.perm & ~PermName.WRITE
            if perm != data.perm:
                queues[broker_name] = dataclasses.replace(data, perm=perm)
            changed += 1
        log.info(
            "%s write permission of broker %s on %d topics",
            "added" if writable else "wiped",
            broker_name,
            changed,
        )
        return changed

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            if queues.pop(broker_name, None) is not None and not queues:
                del self.topic_queue_table[topic]
                log.debug("topic %s removed: its last broker %s is gone", topic, broker_name)

    def on_channel_destroy(self, channel: Channel) -> str | None:
        """Forget the broker whose connection closed; returns its address if there was one."""
        for addr, live in self.broker_live_table.items():
            if live.channel is channel:
                self._remove_broker_addr(addr)
                return addr
        return None

    def scan_not_active_broker(self, now_ms: int, expired_ms: int) -> list[tuple[str, Channel | None]]:
        """Remove brokers silent for more than ``expired_ms``; returns (addr, channel) of each."""
        removed: list[tuple[str, Channel | None]] = []
        for addr, live in list(self.broker_live_table.items()):
            if live.last_update_timestamp + expired_ms < now_ms:
                log.warning(
                    "broker %s expired: no registration for %d ms", addr, now_ms - live.last_update_timestamp
                )
                removed.append((addr, live.channel))
                self._remove_broker_addr(addr)
        return removed

    def _remove_broker_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for name, entry in list(self.broker_addr_table.items()):
            for broker_id in [i for i, a in entry.broker_addrs.items() if a == broker_addr]:
                del entry.broker_addrs[broker_id]
            if not entry.broker_addrs:
                del self.broker_addr_table[name]
                for cluster, names in list(self.cluster_addr_table.items()):
                    names.discard(name)
                    if not names:
                        del self.cluster_addr_table[cluster]
                self._remove_topics_of(name)

    # -- queries ----------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None if no live broker serves it (answered TOPIC_NOT_EXIST)."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, tuple[str, ...]] = {}
        for broker_name in queues:
            entry = self.broker_addr_table.get(broker_name)
            if entry is None:
                continue
            broker_datas.append(entry.snapshot())
            for addr in entry.broker_addrs.values():
                if addr in self.filter_server_table:
                    filter_servers[addr] = tuple(self.filter_server_table[addr])
        if not broker_datas:
            return None
        return TopicRouteData(
            queue_datas=tuple(queues.values()),
            broker_datas=tuple(broker_datas),
            filter_server_table=filter_servers,
        )

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={name: e.snapshot() for name, e in self.broker_addr_table.items()},
            cluster_addr_table={c: tuple(sorted(names)) for c, names in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(topic_list=tuple(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        topics = [t for t, queues in self.topic_queue_table.items() if names & queues.keys()]
        return TopicList(topic_list=tuple(topics))

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names are topics too (Java ``getSystemTopicList``)."""
        topics: list[str] = []
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(names)
        broker_addr = None
        for entry in self.broker_addr_table.values():
            if entry.broker_addrs:
                broker_addr = next(iter(entry.broker_addrs.values()))
                break
        return TopicList(topic_list=tuple(topics), broker_addr=broker_addr)

    def delete_topic(self, topic: str) -> None:
        self.topic_queue_table.pop(topic, None)
