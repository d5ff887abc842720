"""``LitePullConsumer``: ``poll()`` for messages, Kafka style (Java ``DefaultLitePullConsumer`` +
``DefaultLitePullConsumerImpl`` + ``RebalanceLitePullImpl``).

Imports: ``finchmq.protocol`` and the client's modules.

Strategy: either ``subscribe`` (the group's members share the queues through rebalancing) or
``assign`` (you name the queues). Every assigned queue gets a pull task: it long-polls the broker
(at most ``pull_thread_nums`` pulls in flight), stops while the queue is paused or the cache is
over ``pull_threshold_for_all`` / ``pull_threshold_for_queue`` / ``consume_max_span``, and appends
each batch to the cache ``poll`` takes from. ``poll`` marks the batch consumed (the consume
offset is the smallest offset still cached, as for push); ``commit_sync`` commits those offsets,
and with ``auto_commit`` ``poll`` does it every ``auto_commit_interval_millis``. ``seek``
moves a queue: the cache of that queue is dropped and its next pull starts at the new offset.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from finchmq.client.config import LitePullConsumerConfig, make_config
from finchmq.client.errors import ClientStateError, MQClientError, ValidationError
from finchmq.client.instance import MQClientInstance, ServiceState
from finchmq.client.results import PullStatus
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from finchmq.protocol.filter import MessageSelector, build_subscription_data
from finchmq.protocol.headers import PullSysFlag
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.topics import is_retry_topic

from .base import FLOW_CONTROL_LOG_EVERY, PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL, SubscribingConsumer
from .consume_concurrently import reset_retry_topic
from .offset_store import OffsetStore, ReadOffsetType
from .process_queue import ProcessQueue, PullRequest
from .pull import PullAPIWrapper
from .rebalance import RebalanceImpl

__all__ = ["LitePullConsumer", "MessageQueueListener"]

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MILLS_WHEN_PAUSE: Final = 1_000

MessageQueueListener = Callable[[str, set[MessageQueue], set[MessageQueue]], object]
"""``(topic, mq_all, mq_divided)``: called when rebalancing changes this member's queues."""


@dataclass(slots=True, eq=False)
class _QueueState:
    """Java ``AssignedMessageQueue.MessageQueueState``."""

    process_queue: ProcessQueue = field(default_factory=ProcessQueue)
    paused: bool = False
    pull_offset: int = -1
    consume_offset: int = -1
    seek_offset: int = -1
    version: int = 0  # bumped by seek: a pull started before it is discarded
    task: asyncio.Task[None] | None = None


@dataclass(slots=True, eq=False)
class _ConsumeRequest:
    msgs: list[MessageExt]
    mq: MessageQueue
    state: _QueueState
    version: int


class RebalanceLitePullImpl(RebalanceImpl["LitePullConsumer"]):
    """Java ``RebalanceLitePullImpl``: queues become pull tasks; no pull requests."""

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        self.consumer.update_assign_queue_and_start_pull_task(topic, mq_divided)
        listener = self.consumer.message_queue_listener
        if listener is not None:
            try:
                listener(topic, set(mq_all), set(mq_divided))
            except Exception:
                log.exception("messageQueueChanged listener of %s failed", self.consumer_group)

    async def compute_pull_from_where_with_exception(self, mq: MessageQueue) -> int:
        return await self.consumer.compute_pull_from_where(mq)

    def dispatch_pull_request(self, pull_requests: list[PullRequest]) -> None:
        for request in pull_requests:  # the pull tasks start there (message_queue_changed follows)
            self.consumer.initial_offsets[request.message_queue] = request.next_offset


class LitePullConsumer(SubscribingConsumer):
    """See the module docstring. ``LitePullConsumer("group", namesrv_addr=...)``, then
    ``subscribe(topic, expr)`` or ``assign(queues)``, ``await start()``, ``await poll()``."""

    _KIND = "lite pull consumer"
    _SUBSCRIBE_ERROR = "subscribe exception"

    def __init__(self, config: LitePullConsumerConfig | str, /, **overrides: object) -> None:
        self.config: LitePullConsumerConfig = make_config(
            LitePullConsumerConfig, config, "consumer_group", overrides
        ).with_namespaced_group()
        self._state = ServiceState.CREATE_JUST
        self._instance: MQClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        self._pull_api: PullAPIWrapper | None = None
        self._rebalance: RebalanceLitePullImpl | None = None
        self._subscription: dict[str, str | MessageSelector] = {}
        self._assigned: dict[MessageQueue, _QueueState] = {}
        self._assign_mode: bool | None = None  # None until subscribe() or assign()
        self._cache: deque[_ConsumeRequest] = deque()
        self._cache_changed = asyncio.Event()
        self._pull_slots: asyncio.Semaphore | None = None
        self.tasks = BackgroundTasks(f"lite-pull-{self.config.consumer_group}")
        self._next_auto_commit = 0.0
        self._flow_control_times = 0
        self.message_queue_listener: MessageQueueListener | None = None
        self.initial_offsets: dict[MessageQueue, int] = {}

    # -- subscription / assignment --------------------------------------------------------------

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        """Share ``topic``'s queues with the group (cannot be mixed with ``assign``); a tag
        expression or a ``MessageSelector``."""
        if self._assign_mode is True:
            raise ClientStateError("Subscribe and assign are mutually exclusive.")
        super().subscribe(topic, sub_expression)
        self._assign_mode = False

    def unsubscribe(self, topic: str) -> None:
        super().unsubscribe(topic)
        topic = self.config.with_namespace(topic)
        self._remove_queues([mq for mq in self._assigned if mq.topic == topic])

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (replaces the previous assignment)."""
        if self._assign_mode is False:
            raise ClientStateError("Subscribe and assign are mutually exclusive.")
        mqs = {self.config.queue_with_namespace(mq) for mq in queues}
        if not mqs:
            raise ValidationError("Message queues can not be null or empty.")
        self._assign_mode = True
        self._remove_queues([mq for mq in self._assigned if mq not in mqs])
        for mq in mqs:
            self._assigned.setdefault(mq, _QueueState())
        if self._state is ServiceState.RUNNING:
            self._start_pull_tasks()

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer pulls now."""
        return set(self._assigned)

    def _remove_queues(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            state = self._assigned.pop(mq, None)
            if state is not None:
                state.process_queue.dropped = True
                if state.task is not None:
                    state.task.cancel()
        self._drop_cached(lambda r: r.mq not in self._assigned)

    def _drop_cached(self, predicate: Callable[[_ConsumeRequest], bool]) -> None:
        kept = deque(r for r in self._cache if not predicate(r))
        self._cache = kept

    def update_assign_queue_and_start_pull_task(self, topic: str, mq_divided: set[MessageQueue]) -> None:
        """Rebalance result for ``topic``: stop the queues we lost, start the new ones."""
        self._remove_queues([mq for mq in self._assigned if mq.topic == topic and mq not in mq_divided])
        table = self.rebalance.process_queue_table
        for mq in mq_divided:
            if mq not in self._assigned:
                state = _QueueState()
                pq = table.get(mq)
                if pq is not None:
                    state.process_queue = pq
                state.pull_offset = self.initial_offsets.pop(mq, -1)
                self._assigned[mq] = state
        self._start_pull_tasks()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Register, start the client instance and the pull tasks.

        Raises:
            ClientStateError: closed before, or the group already registered in this instance.
        """
        if self._running_already():
            return
        self._state = ServiceState.START_FAILED
        config = self.config
        if config.message_model is MessageModel.CLUSTERING:
            config = self.config = config.with_instance_name_pid()
        group = config.consumer_group
        instance = MQClientInstance.get_or_create(config)
        self._instance = instance
        self._rebalance = RebalanceLitePullImpl(self, instance)
        self._rebalance.subscription_inner.update(self._parse_subscriptions())
        self._pull_api = PullAPIWrapper(instance, group)
        await self._load_offset_store(instance)
        self._pull_slots = asyncio.Semaphore(config.pull_thread_nums)
        await self._register_and_start(instance)
        self._state = ServiceState.RUNNING
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_millis / 1000
        await self._announce(instance)
        if self._assign_mode:
            self._start_pull_tasks()
        else:
            instance.rebalance_immediately()

    async def close(self) -> None:
        """Stop pulling, commit (auto-commit), unregister; idempotent."""
        if self._state is not ServiceState.RUNNING:
            self._state = ServiceState.SHUTDOWN_ALREADY
            return
        self._state = ServiceState.SHUTDOWN_ALREADY
        await self.tasks.close()
        if self.config.auto_commit:
            self._update_consume_offsets()
        await self.offset_store.persist_all(set(self._assigned))
        instance = self.instance
        await instance.unregister_consumer(self.config.consumer_group)
        await instance.shutdown()
        self.rebalance.destroy()
        for state in self._assigned.values():
            state.process_queue.dropped = True
        self._cache.clear()

    # -- polling --------------------------------------------------------------------------------

    async def poll(self, timeout_millis: int | None = None) -> list[MessageExt]:
        """The next pulled batch (one queue's), or ``[]`` after ``timeout_millis``
        (``poll_timeout_millis``). Marks the batch consumed; with ``auto_commit`` commits now
        and then."""
        if self._state is not ServiceState.RUNNING:
            raise ClientStateError(f"The lite pull consumer service state not OK, {self._state.name}")
        timeout = (self.config.poll_timeout_millis if timeout_millis is None else timeout_millis) / 1000
        deadline = time.monotonic() + timeout
        if self.config.auto_commit and time.monotonic() >= self._next_auto_commit:
            await self.commit_sync()
        while True:
            while self._cache:
                request = self._cache.popleft()
                state = self._assigned.get(request.mq)
                if (
                    state is not request.state
                    or state.version != request.version
                    or state.process_queue.dropped
                ):
                    continue
                offset = state.process_queue.remove_message(request.msgs)
                state.consume_offset = offset
                return reset_retry_topic(request.msgs, self.config.consumer_group, self.config.namespace)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._cache_changed.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._cache_changed.wait()
            except TimeoutError:
                return []

    def _update_consume_offsets(self) -> None:
        store = self.offset_store
        for mq, state in self._assigned.items():
            if state.consume_offset != -1 and not state.process_queue.dropped:
                store.update_offset(mq, state.consume_offset, False)

    async def commit_sync(self) -> None:
        """Commit the consume offsets of every assigned queue (to the broker, or the file)."""
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_millis / 1000
        self._update_consume_offsets()
        await self.offset_store.persist_all(set(self._assigned))

    async def commit(self, offsets: dict[MessageQueue, int], persist: bool = True) -> None:
        """Commit explicit offsets (the next offset to consume per queue)."""
        store = self.offset_store
        offsets = {self.config.queue_with_namespace(mq): offset for mq, offset in offsets.items()}
        for mq, offset in offsets.items():
            store.update_offset(mq, offset, False)
        if persist:
            await store.persist_all(set(offsets))

    async def committed(self, mq: MessageQueue) -> int:
        """The committed offset of ``mq`` on the broker (or in the file); -1 if none."""
        mq = self.config.queue_with_namespace(mq)
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Pull ``mq`` from ``offset`` next; it must be within the queue's [min, max] offsets."""
        mq = self.config.queue_with_namespace(mq)
        state = self._assigned.get(mq)
        if state is None:
            raise ValidationError(
                f"The message queue is not in assigned list, may be rebalancing, message queue: {mq}"
            )
        low = await self.instance.min_offset(mq)
        high = await self.instance.max_offset(mq)
        if not low <= offset <= high:
            raise ValidationError(
                f"Seek offset illegal, seek offset = {offset}, min offset = {low}, max offset = {high}"
            )
        self._restart_queue(mq, state, offset)

    def _restart_queue(self, mq: MessageQueue, state: _QueueState, offset: int) -> None:
        """Drop what was pulled for ``mq`` and pull it again from ``offset`` (a held long poll
        is abandoned, not waited for)."""
        state.version += 1
        state.process_queue.clear()
        state.seek_offset = offset
        state.consume_offset = offset
        self._drop_cached(lambda r: r.mq == mq)
        if state.task is not None:
            state.task.cancel()
            state.task = None
        self._start_pull_tasks()

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Consume ``mq`` from its first message (Java ``seekToBegin``)."""
        mq = self.config.queue_with_namespace(mq)
        await self.seek(mq, await self.instance.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Consume ``mq`` from its end: only messages arriving from now on (Java ``seekToEnd``)."""
        mq = self.config.queue_with_namespace(mq)
        await self.seek(mq, await self.instance.max_offset(mq))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp`` (ms)."""
        return await self.instance.search_offset(self.config.queue_with_namespace(mq), timestamp)

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues until ``resume`` (buffered messages stay)."""
        for mq in mqs:
            state = self._assigned.get(self.config.queue_with_namespace(mq))
            if state is not None:
                state.paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        """Pull these paused queues again."""
        for mq in mqs:
            state = self._assigned.get(self.config.queue_with_namespace(mq))
            if state is not None:
                state.paused = False

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (Java ``fetchMessageQueues``)."""
        queues = await self.instance.fetch_subscribe_message_queues(self.config.with_namespace(topic))
        return {self.config.queue_without_namespace(mq) for mq in queues}

    # -- pull tasks -----------------------------------------------------------------------------

    def _start_pull_tasks(self) -> None:
        if self._state is not ServiceState.RUNNING:
            return
        for mq, state in self._assigned.items():
            if state.task is None or state.task.done():
                state.task = self.tasks.spawn(self._pull_loop(mq, state), f"pull-{mq.topic}-{mq.queue_id}")

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The committed offset, else per ``consume_from_where`` (as the push consumer)."""
        config = self.config
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            raise MQClientError(f"cannot read the committed offset of {mq}")
        where = config.consume_from_where
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not is_retry_topic(mq.topic):
            return await self.instance.search_offset(mq, config.consume_timestamp_ms)
        if is_retry_topic(mq.topic):
            return 0
        return await self.instance.max_offset(mq)

    async def _next_pull_offset(self, mq: MessageQueue, state: _QueueState) -> int:
        if state.seek_offset != -1:
            offset = state.seek_offset
            state.seek_offset = -1
            state.pull_offset = offset
            return offset
        if state.pull_offset == -1:
            state.pull_offset = await self.compute_pull_from_where(mq)
        return state.pull_offset

    def _flow_controlled(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        config = self.config
        reason = None
        if len(self._cache) * config.pull_batch_size > config.pull_threshold_for_all:
            reason = f"the consume request count exceeds threshold {config.pull_threshold_for_all}"
        elif pq.msg_count > config.pull_threshold_for_queue:
            reason = f"the cached message count exceeds the threshold {config.pull_threshold_for_queue}"
        elif pq.msg_size_in_mib > config.pull_threshold_size_for_queue:
            reason = (
                f"the cached message size exceeds the threshold {config.pull_threshold_size_for_queue} MiB"
            )
        elif pq.get_max_span() > config.consume_max_span:
            reason = f"the queue's messages span too long, limit is {config.consume_max_span}"
        if reason is None:
            return False
        if self._flow_control_times % FLOW_CONTROL_LOG_EVERY == 0:
            log.warning(
                "%s, so do flow control, %s, flowControlTimes=%d", reason, mq, self._flow_control_times
            )
        self._flow_control_times += 1
        return True

    async def _pull_loop(self, mq: MessageQueue, state: _QueueState) -> None:
        config = self.config
        assert self._pull_api is not None and self._pull_slots is not None
        while self._state is ServiceState.RUNNING and self._assigned.get(mq) is state:
            pq = state.process_queue
            if pq.dropped:
                return
            if state.paused:
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_PAUSE / 1000)
                continue
            if self._flow_controlled(mq, pq):
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL / 1000)
                continue
            try:
                offset = await self._next_pull_offset(mq, state)
                subscription = self._subscription_of(mq.topic)
                version = state.version
                pq.last_pull_timestamp = int(time.time() * 1000)
                async with self._pull_slots:
                    ext, addr = await self._pull_api.pull_kernel_raw(
                        mq,
                        subscription.sub_string,
                        subscription.expression_type,
                        subscription.sub_version,
                        offset,
                        config.pull_batch_size,
                        PullSysFlag.build_sys_flag(False, True, True, False, True),
                        0,
                        config.broker_suspend_max_time_millis,
                        config.consumer_timeout_millis_when_suspend,
                    )
                result = self._pull_api.process_pull_result(ext, addr, subscription)
            except MQClientError as exc:
                log.warning("pull message of %s failed: %s", mq, exc)
                await asyncio.sleep(config.pull_time_delay_mills_when_exception / 1000)
                continue
            if state.version != version or pq.dropped or self._assigned.get(mq) is not state:
                continue  # seeked or reassigned while the pull was in flight
            if result.pull_status is PullStatus.FOUND and result.msg_found_list:
                pq.put_message(result.msg_found_list, result.max_offset)
                self._cache.append(_ConsumeRequest(result.msg_found_list, mq, state, version))
                self._cache_changed.set()
                self.instance.stats.inc_pull_tps(config.consumer_group, mq.topic, len(result.msg_found_list))
            elif result.pull_status is PullStatus.OFFSET_ILLEGAL:
                log.warning("The pull request offset illegal, %s: %s", mq, result)
            elif pq.msg_count == 0 and not any(r.state is state for r in self._cache):
                # nothing pending: skipped (filtered) messages count as consumed, as the push
                # consumer's correctTagsOffset does
                state.consume_offset = result.next_begin_offset
            state.pull_offset = result.next_begin_offset

    def _subscription_of(self, topic: str) -> SubscriptionData:
        if self._rebalance is not None:
            data = self._rebalance.subscription_inner.get(topic)
            if data is not None:
                return data
        return build_subscription_data(topic, "*")

    # -- MQConsumerInner ------------------------------------------------------------------------

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    def subscriptions(self) -> list[SubscriptionData]:
        if self._assign_mode:
            return [build_subscription_data(t, "*") for t in sorted({mq.topic for mq in self._assigned})]
        return super().subscriptions()

    async def do_rebalance(self) -> None:
        if not self._assign_mode and self._rebalance is not None and self._state is ServiceState.RUNNING:
            await self._rebalance.do_rebalance(False)

    async def persist_consumer_offset(self) -> None:
        if self._state is ServiceState.RUNNING and self._offset_store is not None:
            await self._offset_store.persist_all(set(self._assigned))

    def consumer_running_info(self) -> ConsumerRunningInfo:
        store = self.offset_store
        return ConsumerRunningInfo(
            properties={"PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.name},
            subscription_set=tuple(self.subscriptions()),
            mq_table={
                mq: s.process_queue.fill_process_queue_info(store.read_offset_from_memory(mq))
                for mq, s in self._assigned.items()
            },
            status_table={
                s.topic: self.instance.stats.consume_status(self.config.consumer_group, s.topic)
                for s in self.subscriptions()
            },
        )

    def adjust_thread_pool(self) -> None:
        return None

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            state = self._assigned.get(mq)
            if mq.topic == topic and state is not None:
                self.offset_store.update_offset(mq, offset, False)
                self._restart_queue(mq, state, offset)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        raise MQClientError("a lite pull consumer has no listener to consume a message directly")
