"""Rebalancing: which queues this member consumes (Java ``RebalanceImpl``; seed 002, seed 004 §6).

Owns: a consumer's subscriptions, the readable queues of each subscribed topic, its
``ProcessQueue`` table and the broker locks of orderly consumption. Imports: ``finchmq.protocol``
and the client's modules. ``RebalancePushImpl`` and ``RebalanceLitePullImpl`` (lite_pull.py)
fill in what differs.

Strategy (``rebalance_by_topic``): broadcasting takes every queue; clustering asks a broker for
the group's client ids, sorts ids and queues, and lets the allocation strategy pick this
member's share. ``update_process_queue_table_in_rebalance`` drops queues no longer ours (after
persisting their offset; orderly: after the current batch, then unlocking them on the broker)
and adds new ones at ``compute_pull_from_where`` (orderly: only once the broker lock is ours).
Rebalances of one consumer never overlap (a lock).

5.x (``get_rebalance_result_from_broker``): a consumer that does not rebalance on its own
(``client_rebalance`` false) asks a broker (QUERY_ASSIGNMENT) which queues to read and how.
``update_message_queue_assignment`` keeps a ``ProcessQueue`` per PULL queue as above and a
``PopProcessQueue`` per POP queue (queue id -1: every queue of a broker), each with its request
for the pull service. While a topic is popped its pop retry topic (``%RETRY%group_topic``, where
the broker revives what was not acked) is not pulled; once it is pulled again, so is that retry
topic, so nothing revived while popping is left behind.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from finchmq.client.errors import MQClientError
from finchmq.protocol.bodies import (
    MASTER_ID,
    ConsumeType,
    LockBatchRequestBody,
    MessageModel,
    MessageQueueAssignment,
    MessageRequestMode,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.pop import ConsumeInitMode, build_pop_retry_topic_v1
from finchmq.protocol.topics import is_retry_topic

from .process_queue import PopProcessQueue, PopRequest, ProcessQueue, PullRequest

if TYPE_CHECKING:
    from finchmq.client.config import SubscribingConsumerConfig
    from finchmq.client.instance import MQClientInstance

    from .offset_store import OffsetStore

__all__ = ["RebalanceImpl"]

log = logging.getLogger(__name__)

_LOCK_TIMEOUT_MS = 1_000  # Java lockBatchMQ(..., 1000)
QUERY_ASSIGNMENT_TIMEOUT = 3_000  # ms, Java RebalanceImpl.QUERY_ASSIGNMENT_TIMEOUT


class RebalancedConsumer(Protocol):
    """What rebalancing needs of its consumer (``SubscribingConsumer`` is one)."""

    @property
    def config(self) -> SubscribingConsumerConfig: ...

    @property
    def offset_store(self) -> OffsetStore: ...


_C = TypeVar("_C", bound=RebalancedConsumer)


class RebalanceImpl(abc.ABC, Generic[_C]):
    """The shared algorithm for ``consumer``; subclasses say how queues are added and pulled."""

    def __init__(self, consumer: _C, instance: MQClientInstance) -> None:
        config = consumer.config
        self.consumer = consumer
        self.consumer_group = config.consumer_group
        self.message_model = config.message_model
        self.allocate_message_queue_strategy = config.allocate_message_queue_strategy
        self.instance = instance
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.pop_process_queue_table: dict[MessageQueue, PopProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self._lock = asyncio.Lock()

    # -- subclass hooks -------------------------------------------------------------------------

    @abc.abstractmethod
    def consume_type(self) -> ConsumeType: ...

    @abc.abstractmethod
    def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """``mq`` is no longer ours: commit its offset and forget it; False to keep it for now."""
        store = self.consumer.offset_store
        await store.persist(mq)
        store.remove_offset(mq)
        return True

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.consumer.offset_store.remove_offset(mq)

    @abc.abstractmethod
    async def compute_pull_from_where_with_exception(self, mq: MessageQueue) -> int:
        """The offset to start ``mq`` at; -1 when unknown; raises ``MQClientError``."""

    @abc.abstractmethod
    def dispatch_pull_request(self, pull_requests: list[PullRequest]) -> None: ...

    def client_rebalance(self, topic: str) -> bool:
        """True to divide ``topic``'s queues here; False to ask a broker (QUERY_ASSIGNMENT)."""
        return True

    def consume_init_mode(self) -> ConsumeInitMode:
        """Where a popped queue the group never consumed starts."""
        return ConsumeInitMode.MAX

    def dispatch_pop_pull_request(self, pop_requests: list[PopRequest]) -> None:
        """Hand new pop requests to the pull service (consumers that pop override it)."""
        if pop_requests:
            raise NotImplementedError(f"{type(self).__name__} cannot pop")

    async def remove_unnecessary_pop_message_queue(self, mq: MessageQueue, pq: PopProcessQueue) -> bool:
        """``mq`` is no longer popped by us; nothing to commit (the broker tracks pops)."""
        return True

    # -- the algorithm --------------------------------------------------------------------------

    async def do_rebalance(self, is_order: bool) -> None:
        async with self._lock:
            for topic in list(self.subscription_inner):
                try:
                    if self.client_rebalance(topic):
                        await self._rebalance_by_topic(topic, is_order)
                    else:
                        await self._get_rebalance_result_from_broker(topic, is_order)
                except MQClientError as exc:
                    if not is_retry_topic(topic):
                        log.warning("rebalanceByTopic %s of %s failed: %s", topic, self.consumer_group, exc)
            self._truncate_message_queue_not_my_topic()

    async def _get_rebalance_result_from_broker(self, topic: str, is_order: bool) -> None:
        """Java ``getRebalanceResultFromBroker``: the broker's assignment, or nothing changes."""
        strategy_name = self.allocate_message_queue_strategy.get_name()
        try:
            assignments = await self.instance.query_assignment(
                topic, self.consumer_group, strategy_name, self.message_model, QUERY_ASSIGNMENT_TIMEOUT
            )
        except MQClientError as exc:
            log.error("allocate message queue exception. strategy name: %s, ex: %s", strategy_name, exc)
            return
        if assignments is None:  # the broker cannot tell: keep what we have
            return
        if await self.update_message_queue_assignment(topic, assignments, is_order):
            mq_set = {a.message_queue for a in assignments if a.message_queue is not None}
            log.info(
                "broker rebalanced result changed. allocateMessageQueueStrategyName=%s, group=%s, topic=%s, "
                "clientId=%s, assignmentSet=%s",
                strategy_name,
                self.consumer_group,
                topic,
                self.instance.client_id,
                sorted((a.message_queue, a.mode.name) for a in assignments if a.message_queue is not None),
            )
            self.message_queue_changed(topic, set(), mq_set)

    async def update_message_queue_assignment(
        self, topic: str, assignments: set[MessageQueueAssignment], is_order: bool
    ) -> bool:
        """Java ``updateMessageQueueAssignment``: pull the PULL queues, pop the POP ones."""
        pull_set = {
            a.message_queue
            for a in assignments
            if a.message_queue is not None and a.mode is MessageRequestMode.PULL
        }
        pop_set = {
            a.message_queue
            for a in assignments
            if a.message_queue is not None and a.mode is MessageRequestMode.POP
        }
        if not is_retry_topic(topic):
            pop_retry = build_pop_retry_topic_v1(topic, self.consumer_group)
            if pull_set and not pop_set:  # popped before, perhaps: read what was revived meanwhile
                if pop_retry not in self.subscription_inner:
                    self.subscription_inner[pop_retry] = build_subscription_data(pop_retry, "*")
            elif pop_set and not pull_set:  # popping: the broker pops the pop retry topic itself
                self.subscription_inner.pop(pop_retry, None)
        changed = await self.update_process_queue_table_in_rebalance(topic, pull_set, is_order)
        for mq, pop_pq in list(self.pop_process_queue_table.items()):
            if mq.topic != topic:
                continue
            expired = self.consume_type() is ConsumeType.CONSUME_PASSIVELY and pop_pq.is_pull_expired(
                self.pull_max_idle_time()
            )
            if mq in pop_set and not expired:
                continue
            pop_pq.dropped = True
            if expired and mq in pop_set:
                log.error(
                    "[BUG]doRebalance, %s, try remove unnecessary pop mq, %s, because pop is pause, "
                    "so try to fixed it",
                    self.consumer_group,
                    mq,
                )
            if await self.remove_unnecessary_pop_message_queue(mq, pop_pq):
                self.pop_process_queue_table.pop(mq, None)
                changed = True
                log.info("doRebalance, %s, remove unnecessary pop mq, %s", self.consumer_group, mq)
        pop_requests = []
        for mq in sorted(pop_set):
            if mq in self.pop_process_queue_table:
                continue
            pop_pq = PopProcessQueue()
            self.pop_process_queue_table[mq] = pop_pq
            log.info("doRebalance, %s, add a new pop mq, %s", self.consumer_group, mq)
            pop_requests.append(PopRequest(topic, self.consumer_group, mq, pop_pq, self.consume_init_mode()))
            changed = True
        self.dispatch_pop_pull_request(pop_requests)
        return changed

    async def _rebalance_by_topic(self, topic: str, is_order: bool) -> None:
        mq_set = self.topic_subscribe_info_table.get(topic)
        if self.message_model is MessageModel.BROADCASTING:
            if mq_set is None:
                if not is_retry_topic(topic):
                    log.warning("doRebalance, %s, but the topic[%s] not exist.", self.consumer_group, topic)
                return
            if await self.update_process_queue_table_in_rebalance(topic, set(mq_set), is_order):
                self.message_queue_changed(topic, mq_set, mq_set)
                log.info("messageQueueChanged %s %s %s", self.consumer_group, topic, sorted(mq_set))
            return
        cid_all = await self.instance.find_consumer_id_list(topic, self.consumer_group)
        if mq_set is None:
            if not is_retry_topic(topic):
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.consumer_group, topic)
            return
        if cid_all is None:
            log.warning("doRebalance, %s %s, get consumer id list failed", self.consumer_group, topic)
            return
        mq_all = sorted(mq_set)
        cid_all = sorted(cid_all)
        try:
            allocated = self.allocate_message_queue_strategy.allocate(
                self.consumer_group, self.instance.client_id, mq_all, cid_all
            )
        except Exception:
            log.exception(
                "AllocateMessageQueueStrategy.allocate %s failed",
                self.allocate_message_queue_strategy.get_name(),
            )
            return
        allocated_set = set(allocated)
        if await self.update_process_queue_table_in_rebalance(topic, allocated_set, is_order):
            log.info(
                "rebalanced result changed. allocateMessageQueueStrategyName=%s, group=%s, topic=%s, "
                "clientId=%s, mqAllSize=%d, cidAllSize=%d, rebalanceResultSize=%d, rebalanceResultSet=%s",
                self.allocate_message_queue_strategy.get_name(),
                self.consumer_group,
                topic,
                self.instance.client_id,
                len(mq_set),
                len(cid_all),
                len(allocated_set),
                sorted(allocated_set),
            )
            self.message_queue_changed(topic, mq_set, allocated_set)

    def _truncate_message_queue_not_my_topic(self) -> None:
        for mq in list(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                log.info(
                    "doRebalance, %s, truncateMessageQueueNotMyTopic remove unnecessary mq, %s",
                    self.consumer_group,
                    mq,
                )
        for mq in list(self.pop_process_queue_table):
            if mq.topic not in self.subscription_inner:
                self.pop_process_queue_table.pop(mq).dropped = True
                log.info(
                    "doRebalance, %s, truncateMessageQueueNotMyTopic remove unnecessary pop mq, %s",
                    self.consumer_group,
                    mq,
                )

    async def update_process_queue_table_in_rebalance(
        self, topic: str, mq_set: set[MessageQueue], is_order: bool
    ) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.info("doRebalance, %s, remove unnecessary mq, %s", self.consumer_group, mq)
            elif self.consume_type() is ConsumeType.CONSUME_PASSIVELY and pq.is_pull_expired(
                self.pull_max_idle_time()
            ):
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.error(
                        "[BUG]doRebalance, %s, remove unnecessary mq, %s, because pull is pause, "
                        "so try to fixed it",
                        self.consumer_group,
                        mq,
                    )
        pull_requests = []
        for mq in sorted(mq_set):
            if mq in self.process_queue_table:
                continue
            if is_order and not await self.lock(mq):
                log.warning(
                    "doRebalance, %s, add a new mq failed, %s, because lock failed", self.consumer_group, mq
                )
                continue
            self.remove_dirty_offset(mq)
            pq = ProcessQueue()
            pq.locked = True
            try:
                next_offset = await self.compute_pull_from_where_with_exception(mq)
            except MQClientError as exc:
                log.info("doRebalance, %s, compute offset failed, %s: %s", self.consumer_group, mq, exc)
                continue
            if next_offset < 0:
                log.warning("doRebalance, %s, add new mq failed, %s", self.consumer_group, mq)
                continue
            if mq in self.process_queue_table:
                log.info("doRebalance, %s, mq already exists, %s", self.consumer_group, mq)
                continue
            log.info("doRebalance, %s, add a new mq, %s", self.consumer_group, mq)
            self.process_queue_table[mq] = pq
            pull_requests.append(PullRequest(self.consumer_group, mq, pq, next_offset))
            changed = True
        self.dispatch_pull_request(pull_requests)
        return changed

    def pull_max_idle_time(self) -> int:
        return 120_000

    def remove_process_queue(self, mq: MessageQueue) -> ProcessQueue | None:
        """Drop ``mq`` now (OFFSET_ILLEGAL); the caller finishes with remove_unnecessary_message_queue."""
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
        return pq

    def destroy(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()
        for pop_pq in self.pop_process_queue_table.values():
            pop_pq.dropped = True
        self.pop_process_queue_table.clear()

    # -- orderly locks ------------------------------------------------------------------------

    def _broker_master(self, broker_name: str) -> str | None:
        found = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
        return found.broker_addr if found is not None else None

    async def lock(self, mq: MessageQueue) -> bool:
        """Take (or renew) the broker lock of ``mq``; marks its ProcessQueue locked."""
        addr = self._broker_master(mq.broker_name)
        if addr is None:
            return False
        body = LockBatchRequestBody(
            consumer_group=self.consumer_group, client_id=self.instance.client_id, mq_set=(mq,)
        )
        try:
            locked = await self.instance.api.lock_batch_mq(addr, body, _LOCK_TIMEOUT_MS)
        except MQClientError as exc:
            log.error("lockBatchMQ %s failed: %s", mq, exc)
            return False
        now = int(time.time() * 1000)
        for locked_mq in locked:
            pq = self.process_queue_table.get(locked_mq)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        ok = mq in locked
        log.info("the message queue lock %s, %s %s", "OK" if ok else "Failed", self.consumer_group, mq)
        return ok

    def _by_broker(self) -> dict[str, set[MessageQueue]]:
        result: dict[str, set[MessageQueue]] = {}
        for mq, pq in self.process_queue_table.items():
            if not pq.dropped:
                result.setdefault(mq.broker_name, set()).add(mq)
        return result

    async def lock_all(self) -> None:
        """Renew every lock we should hold; mark queues whose lock we lost (Java ``lockAll``)."""
        for broker_name, mqs in self._by_broker().items():
            addr = self._broker_master(broker_name)
            if addr is None:
                continue
            body = LockBatchRequestBody(
                consumer_group=self.consumer_group,
                client_id=self.instance.client_id,
                mq_set=tuple(sorted(mqs)),
            )
            try:
                locked = await self.instance.api.lock_batch_mq(addr, body, _LOCK_TIMEOUT_MS)
            except MQClientError as exc:
                log.error("lockBatchMQ of %s on %s failed: %s", self.consumer_group, broker_name, exc)
                continue
            now = int(time.time() * 1000)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    if not pq.locked:
                        log.info("the message queue locked OK, Group: %s %s", self.consumer_group, mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False
                    log.warning("the message queue locked Failed, Group: %s %s", self.consumer_group, mq)

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        addr = self._broker_master(mq.broker_name)
        if addr is None:
            return
        body = UnlockBatchRequestBody(
            consumer_group=self.consumer_group, client_id=self.instance.client_id, mq_set=(mq,)
        )
        try:
            await self.instance.api.unlock_batch_mq(addr, body, _LOCK_TIMEOUT_MS, oneway=oneway)
            log.warning(
                "unlock messageQueue. group:%s, clientId:%s, mq:%s",
                self.consumer_group,
                self.instance.client_id,
                mq,
            )
        except MQClientError as exc:
            log.error("unlockBatchMQ exception, %s: %s", mq, exc)

    async def unlock_all(self, oneway: bool) -> None:
        for broker_name, mqs in self._by_broker().items():
            addr = self._broker_master(broker_name)
            if addr is None:
                continue
            body = UnlockBatchRequestBody(
                consumer_group=self.consumer_group,
                client_id=self.instance.client_id,
                mq_set=tuple(sorted(mqs)),
            )
            try:
                await self.instance.api.unlock_batch_mq(addr, body, _LOCK_TIMEOUT_MS, oneway=oneway)
            except MQClientError as exc:
                log.error("unlockBatchMQ of %s on %s failed: %s", self.consumer_group, broker_name, exc)
                continue
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False
