"""``PopServices``: what a broker keeps for POP, in one place its processors reach through
``BrokerContext.pop`` and its controller starts and stops.

Java spreads these over ``PopMessageProcessor`` (queue locks, the buffer, long polling),
``AckMessageProcessor`` (the revive services), ``NotificationProcessor`` (its own long polling)
and the ``BrokerController`` (order infos, in-flight counts). They are built once per broker
from its parts (store, put service, managers), never from the controller, so processors can be
run on a store in a temporary directory. ``clock`` is the one time source of pop (ms).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from finchmq.broker.config import BrokerConfig
from finchmq.broker.offset import ConsumerOffsetManager
from finchmq.broker.put_service import StorePutService
from finchmq.broker.stats import BrokerStats
from finchmq.broker.subscription_group import SubscriptionGroupManager
from finchmq.broker.topic_config import TopicConfigManager
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.pop import build_cluster_revive_topic, build_polling_key
from finchmq.remoting import Channel
from finchmq.store import DefaultMessageStore
from finchmq.store.config import BrokerRole

from .buffer_merge import PopBufferMergeService
from .inflight import PopInflightMessageCounter
from .long_polling import PopLongPollingService
from .order_info import ConsumerOrderInfoManager
from .queue_lock import QueueLockManager
from .revive import PopReviveService
from .revive_log import ReviveLog

__all__ = ["PopServices", "now_ms"]

log = logging.getLogger(__name__)

_CLEAN_LOCKS_EVERY = 60_000  # ms (Java QueueLockManager)


def now_ms() -> int:
    return int(time.time() * 1000)


class PopServices:
    """The POP state and services of one broker (see the module doc)."""

    def __init__(
        self,
        initial_config: BrokerConfig,
        *,
        config: Callable[[], BrokerConfig],
        store: DefaultMessageStore,
        put_service: StorePutService,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        stats: BrokerStats,
        store_host: Callable[[], bytes],
        config_dir: Path,
        on_dlq: Callable[[str, str], None] = lambda group, topic: None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        cfg = initial_config  # the cluster name and revive queues are fixed at start
        self.config = config  # the live settings
        self.store = store
        self.offsets = offsets
        self.topics = topics
        self.groups = groups
        self.clock = clock  # replaceable (tests): every part of pop reads the time through now()
        self.revive_topic = build_cluster_revive_topic(cfg.broker_cluster_name)
        self.revive_queue_num = cfg.revive_queue_num  # fixed at start, as Java's revive services
        self.queue_lock = QueueLockManager()
        self.inflight = PopInflightMessageCounter(should_start_time=clock())
        self.revive_log = ReviveLog(self.revive_topic, put_service, store_host)
        self.buffer_merge = PopBufferMergeService(
            config=config,
            offsets=offsets,
            queue_lock=self.queue_lock,
            revive_log=self.revive_log,
            clock=self.now,
            is_master=self.is_master,
            exists=lambda topic, group: topic in topics.topic_config_table and group in groups.table,
        )
        self.long_polling = PopLongPollingService("pop-polling", config=config, clock=self.now)
        self.notification_polling = PopLongPollingService(
            "notification-polling", config=config, clock=self.now, notify_last=True
        )
        self.order_info = ConsumerOrderInfoManager(
            config_dir / "consumerOrderInfo.json",
            clock=self.now,
            notify_enabled=lambda: config().enable_notify_after_pop_order_lock_release,
            queue_exists=self._queue_exists,
        )
        self.order_info.on_lock_free = self.notify_long_polling_request_if_need
        self.revive_services = [
            PopReviveService(
                queue_id,
                revive_log=self.revive_log,
                store=store,
                put_service=put_service,
                offsets=offsets,
                topics=topics,
                groups=groups,
                inflight=self.inflight,
                stats=stats,
                config=config,
                clock=self.now,
                store_host=store_host,
                on_dlq=on_dlq,
            )
            for queue_id in range(self.revive_queue_num)
        ]
        self._ck_message_number = itertools.count()
        self._tasks = BackgroundTasks("pop")
        # Java BrokerStatsManager CK_NUMS / ACK_NUMS: check points written and acks received, by
        # (group, topic)
        self.ck_nums: Counter[tuple[str, str]] = Counter()
        self.ack_nums: Counter[tuple[str, str]] = Counter()
        self._last_ck_time: dict[tuple[str, str, int], int] = {}  # (topic, group, queue) -> pop time

    def record_ck(self, group: str, topic: str) -> None:
        self.ck_nums[group, topic] += 1

    def note_check_point(self, topic: str, group: str, queue_id: int, pop_time: int) -> None:
        """A pop wrote (or buffered) a check point of the queue popped at ``pop_time``."""
        key = (topic, group, queue_id)
        if pop_time > self._last_ck_time.get(key, -1):
            self._last_ck_time[key] = pop_time

    def change_time(self, topic: str, group: str, queue_id: int) -> int:
        """The pop time of a check point made by CHANGE_MESSAGE_INVISIBLETIME: now, but later
        than every check point of the queue so far. A check point is known by its queue, start
        offset and pop time; Java takes the clock as it is, so a change in the same millisecond as
        the pop (or as another change) of the same message makes two check points one, and the
        ack of the first acks the second: the message is lost. finchmq moves the second on."""
        key = (topic, group, queue_id)
        at = max(self.now(), self._last_ck_time.get(key, -1) + 1)
        self._last_ck_time[key] = at
        return at

    def record_ack(self, group: str, topic: str, count: int) -> None:
        self.ack_nums[group, topic] += count

    def now(self) -> int:
        """The time of pop (ms)."""
        return self.clock()

    def _queue_exists(self, topic: str, group: str, queue_id: int) -> bool:
        config = self.topics.select_topic_config(topic)
        return config is not None and queue_id < config.read_queue_nums and group in self.groups.table

    def is_master(self) -> bool:
        return self.store.config.broker_role is not BrokerRole.SLAVE

    def next_revive_qid(self) -> int:
        """The revive queue of the next check point: round robin (Java ``ckMessageNumber``)."""
        return next(self._ck_message_number) % self.revive_queue_num

    # -- lifecycle --------------------------------------------------------------------------

    def load(self) -> None:
        """Read ``consumerOrderInfo.json`` (blocking; at start-up)."""
        self.order_info.load()

    def start(self) -> None:
        self.long_polling.start()
        self.notification_polling.start()
        self.buffer_merge.start()
        self.order_info.start()
        for service in self.revive_services:
            self._tasks.spawn(service.run(), f"revive-{service.queue_id}")
        self._tasks.every(
            _CLEAN_LOCKS_EVERY, self.queue_lock.clean_unused_lock, "queue-locks", _CLEAN_LOCKS_EVERY
        )
        self._tasks.every(
            self._persist_interval, self.order_info.persist_if_dirty, "order-info", self._persist_interval()
        )

    def _persist_interval(self) -> float:
        return float(self.config().flush_consumer_offset_interval)

    async def close(self) -> None:
        """Answer the held requests, stop reviving, write what the buffer holds, persist order
        infos. Call before the store's put service stops."""
        await self.long_polling.close()
        await self.notification_polling.close()
        await self._tasks.close()
        await self.buffer_merge.close()
        self.order_info.close()
        await self.order_info.persist()

    # -- arrivals and wake-ups --------------------------------------------------------------

    def arrival_listener(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: Mapping[str, str] | None,
    ) -> None:
        """The store's message-arrival hook (any thread): wakes held pops and notifications."""
        self.long_polling.arrival_listener(
            topic, queue_id, logic_offset, tags_code, store_timestamp, properties
        )
        self.notification_polling.arrival_listener(
            topic, queue_id, logic_offset, tags_code, store_timestamp, properties
        )

    def notify_long_polling_request_if_need(self, topic: str, group: str, queue_id: int) -> None:
        """Wake a held pop of the queue if it has messages past the group's offset (Java
        ``PopMessageProcessor.notifyLongPollingRequestIfNeed``)."""
        buffer_offset = self.buffer_merge.get_latest_offset(build_polling_key(topic, group, queue_id))
        consumer_offset = self.offsets.query_offset(group, topic, queue_id)
        if self.store.get_max_offset_in_queue(topic, queue_id) > max(buffer_offset, consumer_offset):
            if not self.long_polling.notify_message_arriving(topic, -1, group):
                self.long_polling.notify_message_arriving(topic, queue_id, group)
            self.notification_polling.notify_topic_arriving(topic, queue_id)

    def drop_channel(self, channel: Channel) -> int:
        """A client's connection closed: forget its held requests; returns how many."""
        return self.long_polling.drop_channel(channel) + self.notification_polling.drop_channel(channel)

    # -- figures ----------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """finchmq's pop figures for GET_BROKER_RUNTIME_INFO."""
        return {
            "popBufferedCheckPointNum": str(self.buffer_merge.buffered_ck_size),
            "popOffsetBufferSize": str(self.buffer_merge.offset_total_size()),
            "popPollingNum": str(self.long_polling.total_polling_num),
            "popNotificationPollingNum": str(self.notification_polling.total_polling_num),
            "popInflightMessageNum": str(self.inflight.total()),
            "popReviveBehindMessages": str(sum(s.behind_messages() for s in self.revive_services)),
            "popReviveBehindMillis": str(max((s.behind_millis() for s in self.revive_services), default=0)),
            "popRevivePendingCheckPoints": str(sum(len(s.pending) for s in self.revive_services)),
        }
