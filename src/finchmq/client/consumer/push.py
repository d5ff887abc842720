"""``PushConsumer``: a listener is called for every message (Java ``DefaultMQPushConsumer`` +
``DefaultMQPushConsumerImpl`` + ``RebalancePushImpl``; seed 002 class by class, seed 004, seed
000's consumer flow control).

Imports: ``finchmq.protocol`` and the client's modules.

Strategy: a push consumer is a pull loop. ``start`` subscribes ``%RETRY%group`` (clustering),
picks the offset store, starts the consume service, registers with the process's
``MQClientInstance``, refreshes routes, heartbeats and rebalances at once. Rebalancing creates a
``PullRequest`` + ``ProcessQueue`` per assigned queue; the instance's single
``PullMessageService`` hands each request to ``pull_message``, which applies flow control
(``pull_threshold_for_queue`` messages, ``pull_threshold_size_for_queue`` MiB,
``consume_concurrently_max_span`` offsets: retry in 50 ms, a warning every 1,000 times) and starts
an asynchronous long-polling pull (the broker holds it ``broker_suspend_max_time_millis``, the
call times out after ``consumer_timeout_millis_when_suspend``). The pull's outcome re-queues the
request: FOUND feeds the ``ProcessQueue`` and the consume service, NO_NEW_MSG/NO_MATCHED_MSG
move on, OFFSET_ILLEGAL drops the queue and fixes its offset 10 s later, a failure retries after
``pull_time_delay_mills_when_exception``.

POP mode (5.x): with ``client_rebalance=False`` (clustering) the broker assigns the queues
(QUERY_ASSIGNMENT) and, for a group/topic set to POP (mqadmin ``setConsumeMode``), the consumer
pops instead (``pop_message``): a ``PopRequest`` + ``PopProcessQueue`` per assigned broker queue
(-1: all of them), ``pop_batch_nums`` messages at a time, invisible for ``pop_invisible_time``,
paused while more than ``pop_threshold_for_queue`` wait for their ack, handed to the pop consume
service (``consume_pop_concurrently.py``, ``consume_pop_orderly.py``), which acks them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from finchmq.client.config import PushConsumerConfig, make_config
from finchmq.client.errors import ClientStateError, MQClientError
from finchmq.client.instance import MQClientInstance, ServiceState
from finchmq.client.producer import Producer
from finchmq.client.results import PopResult, PopStatus, PullResult, PullStatus
from finchmq.client.stats import ConsumerStatsManager
from finchmq.client.trace import ConsumeMessageTraceHook, TraceDispatcher
from finchmq.common.settings import config_to_properties
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.filter import MessageSelector, build_subscription_data
from finchmq.protocol.headers import PullSysFlag
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.pop import ConsumeInitMode
from finchmq.protocol.topics import is_retry_topic, retry_topic

from .base import FLOW_CONTROL_LOG_EVERY, PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL, SubscribingConsumer
from .consume_concurrently import ConsumeMessageConcurrentlyService
from .consume_orderly import ConsumeMessageOrderlyService
from .consume_pop_concurrently import ConsumeMessagePopConcurrentlyService
from .consume_pop_orderly import ConsumeMessagePopOrderlyService
from .listener import (
    AsyncMessageListenerOrderly,
    ConcurrentlyListener,
    ConsumeMessageContext,
    ConsumeMessageHook,
    MessageListenerOrderly,
    OrderlyListener,
    listener_function,
)
from .offset_store import OffsetStore, ReadOffsetType
from .pop import PopAPIWrapper, matches_tags
from .process_queue import PopRequest, ProcessQueue, PullRequest
from .pull import PullAPIWrapper, send_message_back
from .rebalance import RebalanceImpl

__all__ = ["PushConsumer", "RebalancePushImpl"]

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MILLS_WHEN_SUSPEND: Final = 1_000
PULL_TIME_DELAY_MILLS_WHEN_NO_SUBSCRIPTION: Final = 3_000
OFFSET_ILLEGAL_FIX_DELAY_MS: Final = 10_000
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL: Final = 20  # Java 5.x
UNLOCK_DELAY_TIME_MILLS: Final = 20_000
_RESET_DRAIN_MAX_S: Final = 10.0  # Java sleeps 10 s; here at most 10 s, until the queues are idle

PROP_CONSUMEORDERLY: Final = "PROP_CONSUMEORDERLY"
PROP_THREADPOOL_CORE_SIZE: Final = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUMER_START_TIMESTAMP: Final = "PROP_CONSUMER_START_TIMESTAMP"


class RebalancePushImpl(RebalanceImpl["PushConsumer"]):
    """The push consumer's rebalance (Java ``RebalancePushImpl``)."""

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    def pull_max_idle_time(self) -> int:
        return self.consumer.config.pull_max_idle_time

    def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        """Spread the topic-level thresholds over this member's queues; heartbeat at once."""
        config = self.consumer.config
        queues = len(self.process_queue_table)
        if config.pull_threshold_for_topic != -1 and queues:
            self.consumer.pull_threshold_for_queue = max(1, config.pull_threshold_for_topic // queues)
        if config.pull_threshold_size_for_topic != -1 and queues:
            self.consumer.pull_threshold_size_for_queue = max(
                1, config.pull_threshold_size_for_topic // queues
            )
        self.consumer.tasks.spawn(
            self.instance.send_heartbeat_to_all_broker_with_lock(), "heartbeat-after-rebalance"
        )

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        await super().remove_unnecessary_message_queue(mq, pq)
        if self.consumer.consume_orderly and self.message_model is MessageModel.CLUSTERING:
            try:
                async with asyncio.timeout(1.0):
                    await pq.consume_lock.acquire()
            except TimeoutError:
                pq.try_unlock_times += 1
                log.warning(
                    "[WRONG]mq is consuming, so can not unlock it, %s. maybe hanged for a while, %d",
                    mq,
                    pq.try_unlock_times,
                )
                return False
            try:
                self._unlock_delay(mq, pq)
            finally:
                pq.consume_lock.release()
        return True

    def _unlock_delay(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        if pq.has_temp_message():
            log.info("[%s]unlockDelay, begin %s", id(mq), mq)
            self.consumer.tasks.spawn_later(
                UNLOCK_DELAY_TIME_MILLS, lambda: self.unlock(mq, True), "unlock-delay"
            )
        else:
            self.consumer.tasks.spawn(self.unlock(mq, True), "unlock")

    async def compute_pull_from_where_with_exception(self, mq: MessageQueue) -> int:
        config = self.consumer.config
        store = self.consumer.offset_store
        where = config.consume_from_where
        last = await store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            if last >= 0:
                return last
            return 0 if last == -1 else -1
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            if last >= 0:
                return last
            if last != -1:
                return -1
            if is_retry_topic(mq.topic):
                return await self.instance.max_offset(mq)
            return await self.instance.search_offset(mq, config.consume_timestamp_ms)
        # CONSUME_FROM_LAST_OFFSET and the deprecated variants
        if last >= 0:
            return last
        if last != -1:
            return -1
        if is_retry_topic(mq.topic):
            return 0
        return await self.instance.max_offset(mq)

    def dispatch_pull_request(self, pull_requests: list[PullRequest]) -> None:
        for request in pull_requests:
            self.consumer.execute_pull_request_immediately(request)
            log.info("doRebalance, %s, add a new pull request %s", self.consumer_group, request)

    def client_rebalance(self, topic: str) -> bool:
        """Java 5.x: the client divides the queues itself unless told not to (``client_rebalance``),
        and always when broadcasting. (Java also forces it for orderly listeners, whose pop mode
        it never finished; finchmq pops orderly, see ``consume_pop_orderly.py``.)"""
        config = self.consumer.config
        return config.client_rebalance or config.message_model is MessageModel.BROADCASTING

    def consume_init_mode(self) -> ConsumeInitMode:
        """A popped queue the group never consumed starts at its first message with
        CONSUME_FROM_FIRST_OFFSET, else at its end (Java ``getConsumeInitMode``)."""
        if self.consumer.config.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return ConsumeInitMode.MIN
        return ConsumeInitMode.MAX

    def dispatch_pop_pull_request(self, pop_requests: list[PopRequest]) -> None:
        for request in pop_requests:
            self.consumer.execute_pop_pull_request_immediately(request)
            log.info("doRebalance, %s, add a new pop request %s", self.consumer_group, request)


class PushConsumer(SubscribingConsumer):
    """An asyncio push consumer (Java ``DefaultMQPushConsumer``).

    ``PushConsumer("group", namesrv_addr="127.0.0.1:9876")`` or ``PushConsumer(PushConsumerConfig(...))``;
    ``subscribe(topic, "TagA || TagB")``, ``register_message_listener(listener)`` (``orderly=True``
    or a ``MessageListenerOrderly`` for orderly consumption), then ``await start()`` and, at the
    end, ``await close()`` (or ``async with``).
    """

    _KIND = "push consumer"

    def __init__(self, config: PushConsumerConfig | str, /, **overrides: object) -> None:
        self.config: PushConsumerConfig = make_config(
            PushConsumerConfig, config, "consumer_group", overrides
        ).with_namespaced_group()
        self._state = ServiceState.CREATE_JUST
        self._instance: MQClientInstance | None = None
        self._rebalance: RebalancePushImpl | None = None
        self._offset_store: OffsetStore | None = None
        self._pull_api: PullAPIWrapper | None = None
        self.consume_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        # 5.x: popping (only when the broker may assign POP queues: client_rebalance off, clustering)
        self.consume_pop_service: (
            ConsumeMessagePopConcurrentlyService | ConsumeMessagePopOrderlyService | None
        ) = None
        self._pop_api: PopAPIWrapper | None = None
        self._pops: dict[MessageQueue, asyncio.Task[None]] = {}
        self._subscription: dict[str, str | MessageSelector] = {
            self.config.with_namespace(topic): expression
            for topic, expression in self.config.subscription.items()
        }
        self._trace: TraceDispatcher | None = None  # with enable_msg_trace
        self._listener: object = None
        self._orderly = False
        self.hooks: list[ConsumeMessageHook] = []
        self.tasks = BackgroundTasks(f"push-{self.config.consumer_group}")
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}
        self._pause = False
        self.pull_threshold_for_queue = self.config.pull_threshold_for_queue
        self.pull_threshold_size_for_queue = self.config.pull_threshold_size_for_queue
        self.queue_flow_control_times = 0
        self.queue_max_span_flow_control_times = 0
        self.consumer_start_timestamp = 0

    # -- configuration --------------------------------------------------------------------------

    def register_message_listener(
        self, listener: ConcurrentlyListener | OrderlyListener, *, orderly: bool | None = None
    ) -> None:
        """Set the listener; orderly when ``orderly=True`` or the listener is a
        ``MessageListenerOrderly``/``AsyncMessageListenerOrderly``."""
        if self._state is not ServiceState.CREATE_JUST:
            raise ClientStateError("register the message listener before start()")
        listener_function(listener)  # raises TypeError early
        self._listener = listener
        if orderly is None:
            orderly = isinstance(listener, MessageListenerOrderly | AsyncMessageListenerOrderly)
        self._orderly = orderly

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """Call ``hook`` before and after every listener call."""
        self.hooks.append(hook)

    @property
    def consume_orderly(self) -> bool:
        """True when the registered listener is orderly."""
        return self._orderly

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def stats(self) -> ConsumerStatsManager:
        """Consume statistics (TPS, RT, failures) per topic, as running info reports them."""
        return self.instance.stats

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instanceName``), as the broker knows it."""
        return self.instance.client_id

    async def start(self) -> None:
        """Start consuming (seed 002 ``DefaultMQPushConsumerImpl.start``).

        Raises:
            ClientStateError: no listener, already closed, or the group is registered in this
                process's client instance already (give each member its own ``instance_name``).
            ValidationError: a bad subscription.
        """
        if self._state is ServiceState.RUNNING:
            return
        if self._state is not ServiceState.CREATE_JUST:
            raise ClientStateError(
                f"The PushConsumer service state not OK, {self._state.name}; it cannot be reopened"
            )
        if self._listener is None:
            raise ClientStateError("messageListener is null: call register_message_listener() before start()")
        self._state = ServiceState.START_FAILED
        config = self.config
        group = config.consumer_group
        subscriptions = self._parse_subscriptions()
        if config.message_model is MessageModel.CLUSTERING:
            subscriptions[retry_topic(group)] = build_subscription_data(retry_topic(group), "*")
            config = self.config = config.with_instance_name_pid()
        instance = MQClientInstance.get_or_create(config)
        self._instance = instance
        self._rebalance = RebalancePushImpl(self, instance)
        self._rebalance.subscription_inner.update(subscriptions)
        self._pull_api = PullAPIWrapper(instance, group)
        await self._load_offset_store(instance)
        fn, is_async = listener_function(self._listener)
        if self._orderly:
            self.consume_service = ConsumeMessageOrderlyService(self, fn, is_async)
        else:
            self.consume_service = ConsumeMessageConcurrentlyService(self, fn, is_async)
        self.consume_service.start()
        if not config.client_rebalance and config.message_model is MessageModel.CLUSTERING:
            self._pop_api = PopAPIWrapper(instance, group)
            if self._orderly:
                self.consume_pop_service = ConsumeMessagePopOrderlyService(self, fn, is_async)
            else:
                self.consume_pop_service = ConsumeMessagePopConcurrentlyService(self, fn, is_async)
            self.consume_pop_service.start()
        await self._register_and_start(instance)
        self._state = ServiceState.RUNNING
        self.consumer_start_timestamp = int(time.time() * 1000)
        if config.enable_msg_trace:
            self._trace = TraceDispatcher(
                group,
                "CONSUME",
                config.namesrv_addr,
                config.customized_trace_topic,
                config.session_credentials,
                producer_factory=Producer,
            )
            self.register_consume_message_hook(ConsumeMessageTraceHook(self._trace))
            await self._trace.start()
        try:
            await self._announce(instance)
        except MQClientError:
            await self.close()
            raise
        instance.rebalance_immediately()
        log.info(
            "the consumer [%s] start OK. messageModel=%s, isUnitMode=%s",
            group,
            config.message_model.name,
            config.unit_mode,
        )

    async def _undo_start(self) -> None:
        if self.consume_service is not None:
            await self.consume_service.shutdown()
        if self.consume_pop_service is not None:
            await self.consume_pop_service.shutdown()
        await self.tasks.close()
        self.tasks = BackgroundTasks(f"push-{self.config.consumer_group}")

    async def close(self) -> None:
        """Stop pulling and consuming, persist offsets, unregister (seed 002 ``shutdown``); idempotent."""
        if self._state is not ServiceState.RUNNING:
            self._state = ServiceState.SHUTDOWN_ALREADY
            return
        self._state = ServiceState.SHUTDOWN_ALREADY
        instance = self.instance
        pulls = [*self._pulls.values(), *self._pops.values()]
        for task in pulls:
            task.cancel()
        if pulls:
            await asyncio.gather(*pulls, return_exceptions=True)
        if self.consume_service is not None:
            await self.consume_service.shutdown()
        if self.consume_pop_service is not None:
            await self.consume_pop_service.shutdown()
        if self._trace is not None:
            await self._trace.close()
        await self.tasks.close()
        await self.persist_consumer_offset(force=True)
        await instance.unregister_consumer(self.config.consumer_group)
        await instance.shutdown()
        self.rebalance.destroy()
        log.info("the consumer [%s] shutdown OK", self.config.consumer_group)

    def suspend(self) -> None:
        """Pause pulling (Java ``suspend``); cached messages are still consumed."""
        self._pause = True
        log.info("suspend this consumer, %s", self.config.consumer_group)

    def resume(self) -> None:
        """Pull again after ``suspend``."""
        self._pause = False
        log.info("resume this consumer, %s", self.config.consumer_group)

    @property
    def paused(self) -> bool:
        """True while suspended."""
        return self._pause

    async def persist_consumer_offset(self, *, force: bool = False) -> None:
        """Commit the offsets of the queues this member consumes."""
        if self._state is not ServiceState.RUNNING and not force:
            return
        if self._offset_store is None or self._rebalance is None:
            return
        await self._offset_store.persist_all(set(self._rebalance.process_queue_table))

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (Java ``fetchSubscribeMessageQueues``)."""
        queues = await self.instance.fetch_subscribe_message_queues(self.config.with_namespace(topic))
        return {self.config.queue_without_namespace(mq) for mq in queues}

    @property
    def pop_api(self) -> PopAPIWrapper:
        """The group's POP calls (pop mode only)."""
        if self._pop_api is None:
            raise ClientStateError(f"The {self._KIND} does not pop (client_rebalance is on, or not started)")
        return self._pop_api

    def max_reconsume_times(self) -> int:
        """-1 means 16 for concurrent consumption (Java ``getMaxReconsumeTimes``)."""
        return 16 if self.config.max_reconsume_times == -1 else self.config.max_reconsume_times

    async def send_message_back(
        self, msg: MessageExt, delay_level: int, broker_name: str | None = None
    ) -> None:
        """CONSUMER_SEND_MSG_BACK, falling back to the inner producer (seed 002 ``sendMessageBack``)."""
        await send_message_back(
            self.instance,
            self.config.consumer_group,
            msg,
            delay_level,
            broker_name,
            self.max_reconsume_times(),
            namespace=self.config.namespace,
        )

    def execute_hook_before(self, context: ConsumeMessageContext) -> None:
        """Run the registered hooks' ``consume_message_before``."""
        for hook in self.hooks:
            try:
                hook.consume_message_before(context)
            except Exception:
                log.warning(
                    "consumeMessageHook %s executeHookBefore exception", hook.hook_name(), exc_info=True
                )

    def execute_hook_after(self, context: ConsumeMessageContext) -> None:
        """Run the registered hooks' ``consume_message_after``."""
        for hook in self.hooks:
            try:
                hook.consume_message_after(context)
            except Exception:
                log.warning(
                    "consumeMessageHook %s executeHookAfter exception", hook.hook_name(), exc_info=True
                )

    # -- pulling --------------------------------------------------------------------------------

    def execute_pull_request_immediately(self, request: PullRequest) -> None:
        """Queue ``pull_request`` for the pull service now."""
        service = self.instance.pull_message_service
        if service is not None:
            service.execute_pull_request_immediately(request)

    def execute_pull_request_later(self, request: PullRequest, delay_ms: float) -> None:
        """Queue ``pull_request`` for the pull service after ``delay_ms``."""
        service = self.instance.pull_message_service
        if service is not None:
            service.execute_pull_request_later(request, delay_ms)

    def pull_message(self, pull_request: PullRequest) -> None:
        """Flow control, then an asynchronous pull (seed 002 ``pullMessage``, seed 000)."""
        pq = pull_request.process_queue
        if pq.dropped:
            log.info("the pull request[%s] is dropped.", pull_request)
            return
        pq.last_pull_timestamp = int(time.time() * 1000)
        config = self.config
        if self._state is not ServiceState.RUNNING:
            self.execute_pull_request_later(pull_request, config.pull_time_delay_mills_when_exception)
            return
        if self._pause:
            log.warning("consumer was paused, execute pull request later. group=%s", config.consumer_group)
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_SUSPEND)
            return
        cached_count = pq.msg_count
        cached_size_mib = pq.msg_size_in_mib
        too_much = None
        if cached_count > self.pull_threshold_for_queue:
            too_much = f"the cached message count exceeds the threshold {self.pull_threshold_for_queue}"
        elif cached_size_mib > self.pull_threshold_size_for_queue:
            too_much = (
                f"the cached message size exceeds the threshold {self.pull_threshold_size_for_queue} MiB"
            )
        if too_much is not None:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL)
            if self.queue_flow_control_times % FLOW_CONTROL_LOG_EVERY == 0:
                log.warning(
                    "%s, so do flow control, minOffset=%s, maxOffset=%s, count=%d, size=%d MiB, "
                    "pullRequest=%s, flowControlTimes=%d",
                    too_much,
                    next(iter(pq.msg_tree_map), None),
                    next(reversed(pq.msg_tree_map), None),
                    cached_count,
                    cached_size_mib,
                    pull_request,
                    self.queue_flow_control_times,
                )
            self.queue_flow_control_times += 1
            return
        if not self._orderly:
            span = pq.get_max_span()
            if span > config.consume_concurrently_max_span:
                self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL)
                if self.queue_max_span_flow_control_times % FLOW_CONTROL_LOG_EVERY == 0:
                    log.warning(
                        "the queue's messages, span too long, so do flow control, minOffset=%s, "
                        "maxOffset=%s, maxSpan=%d, pullRequest=%s, flowControlTimes=%d",
                        next(iter(pq.msg_tree_map), None),
                        next(reversed(pq.msg_tree_map), None),
                        span,
                        pull_request,
                        self.queue_max_span_flow_control_times,
                    )
                self.queue_max_span_flow_control_times += 1
                return
        elif not pq.locked:
            self.execute_pull_request_later(pull_request, config.pull_time_delay_mills_when_exception)
            log.info("pull message later because not locked in broker, %s", pull_request)
            return
        subscription = self.rebalance.subscription_inner.get(pull_request.message_queue.topic)
        if subscription is None:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_NO_SUBSCRIPTION)
            log.warning("find the consumer's subscription failed, %s", pull_request)
            return
        mq = pull_request.message_queue
        task = self.tasks.spawn(self._pull(pull_request, subscription), f"pull-{mq.topic}-{mq.queue_id}")
        self._pulls[mq] = task
        task.add_done_callback(lambda t: self._pulls.pop(mq, None) if self._pulls.get(mq) is t else None)

    async def _pull(self, pull_request: PullRequest, subscription: SubscriptionData) -> None:
        config = self.config
        mq = pull_request.message_queue
        pq = pull_request.process_queue
        assert self._pull_api is not None
        if self._orderly and not pull_request.locked_first:
            try:
                offset = await self.rebalance.compute_pull_from_where_with_exception(mq)
            except MQClientError as exc:
                log.warning("compute pull offset of %s failed: %s", mq, exc)
                self.execute_pull_request_later(pull_request, config.pull_time_delay_mills_when_exception)
                return
            if offset < 0:
                self.execute_pull_request_later(pull_request, config.pull_time_delay_mills_when_exception)
                return
            broker_busy = offset < pull_request.next_offset
            log.info(
                "the first time to pull message, so fix offset from broker. pullRequest: %s NewOffset: %d "
                "brokerBusy: %s",
                pull_request,
                offset,
                broker_busy,
            )
            pull_request.locked_first = True
            pull_request.next_offset = offset
        commit_offset_value = 0
        commit_offset_enable = False
        if config.message_model is MessageModel.CLUSTERING:
            commit_offset_value = self.offset_store.read_offset_from_memory(mq)
            commit_offset_enable = commit_offset_value > 0
        sub_expression = None
        if config.post_subscription_when_pull and not subscription.class_filter_mode:
            sub_expression = subscription.sub_string
        sys_flag = PullSysFlag.build_sys_flag(
            commit_offset_enable, True, sub_expression is not None, subscription.class_filter_mode
        )
        began = time.monotonic()
        try:
            ext, addr = await self._pull_api.pull_kernel_raw(
                mq,
                sub_expression,
                subscription.expression_type,
                subscription.sub_version,
                pull_request.next_offset,
                config.pull_batch_size,
                sys_flag,
                max(commit_offset_value, 0),
                config.broker_suspend_max_time_millis,
                config.consumer_timeout_millis_when_suspend,
            )
            result = self._pull_api.process_pull_result(ext, addr, subscription)
        except MQClientError as exc:
            if not is_retry_topic(mq.topic):
                log.warning("execute the pull request exception %s: %s", pull_request, exc)
            self.execute_pull_request_later(pull_request, config.pull_time_delay_mills_when_exception)
            return
        if pq.dropped:
            return
        self._on_pull_result(pull_request, result, began)

    def _on_pull_result(self, pull_request: PullRequest, result: PullResult, began: float) -> None:
        """Seed 002 ``PullCallback.onSuccess``."""
        config = self.config
        mq = pull_request.message_queue
        pq = pull_request.process_queue
        status = result.pull_status
        if status is PullStatus.FOUND:
            prev_offset = pull_request.next_offset
            pull_request.next_offset = result.next_begin_offset
            stats = self.stats
            stats.inc_pull_rt(config.consumer_group, mq.topic, (time.monotonic() - began) * 1000)
            msgs = result.msg_found_list
            if not msgs:
                self.execute_pull_request_immediately(pull_request)
            else:
                first_offset = msgs[0].queue_offset
                stats.inc_pull_tps(config.consumer_group, mq.topic, len(msgs))
                dispatch = pq.put_message(msgs, result.max_offset)
                assert self.consume_service is not None
                self.consume_service.submit_consume_request(msgs, pq, mq, dispatch)
                if config.pull_interval > 0:
                    self.execute_pull_request_later(pull_request, config.pull_interval)
                else:
                    self.execute_pull_request_immediately(pull_request)
                if result.next_begin_offset < prev_offset or first_offset < prev_offset:
                    log.warning(
                        "[BUG] pull message result maybe data wrong, nextBeginOffset: %d firstMsgOffset: %d "
                        "prevRequestOffset: %d",
                        result.next_begin_offset,
                        first_offset,
                        prev_offset,
                    )
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            pull_request.next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # correctTagsOffset
                self.offset_store.update_offset(mq, pull_request.next_offset, True)
            self.execute_pull_request_immediately(pull_request)
        elif status is PullStatus.OFFSET_ILLEGAL:
            log.warning("the pull request offset illegal, %s %s", pull_request, result)
            pull_request.next_offset = result.next_begin_offset
            pq.dropped = True
            self.tasks.spawn_later(
                OFFSET_ILLEGAL_FIX_DELAY_MS, lambda: self._fix_illegal_offset(pull_request), "fix-offset"
            )

    async def _fix_illegal_offset(self, pull_request: PullRequest) -> None:
        mq = pull_request.message_queue
        store = self.offset_store
        store.update_offset(mq, pull_request.next_offset, False)
        await store.persist(mq)
        pq = self.rebalance.remove_process_queue(mq)
        if pq is not None:
            await self.rebalance.remove_unnecessary_message_queue(mq, pq)
        log.warning("fix the pull request offset, %s", pull_request)

    # -- popping (5.x) ----------------------------------------------------------------------------

    def execute_pop_pull_request_immediately(self, request: PopRequest) -> None:
        """Queue ``request`` for the pull service now."""
        service = self.instance.pull_message_service
        if service is not None:
            service.execute_pop_pull_request_immediately(request)

    def execute_pop_pull_request_later(self, request: PopRequest, delay_ms: float) -> None:
        """Queue ``request`` for the pull service after ``delay_ms``."""
        service = self.instance.pull_message_service
        if service is not None:
            service.execute_pop_pull_request_later(request, delay_ms)

    def pop_message(self, request: PopRequest) -> None:
        """Flow control, then an asynchronous pop (Java 5.x ``popMessage``)."""
        pq = request.pop_process_queue
        if pq.dropped:
            log.info("the pop request[%s] is dropped.", request)
            return
        pq.last_pop_timestamp = int(time.time() * 1000)
        config = self.config
        if self._state is not ServiceState.RUNNING:
            self.execute_pop_pull_request_later(request, config.pull_time_delay_mills_when_exception)
            return
        if self._pause:
            log.warning("consumer was paused, execute pop request later. group=%s", config.consumer_group)
            self.execute_pop_pull_request_later(request, PULL_TIME_DELAY_MILLS_WHEN_SUSPEND)
            return
        if pq.wait_ack_msg_count > config.pop_threshold_for_queue:
            self.execute_pop_pull_request_later(request, PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL)
            if self.queue_flow_control_times % FLOW_CONTROL_LOG_EVERY == 0:
                log.warning(
                    "the messages waiting to ack exceeds the threshold %d, so do flow control, "
                    "popRequest=%s, flowControlTimes=%d, wait count=%d",
                    config.pop_threshold_for_queue,
                    request,
                    self.queue_flow_control_times,
                    pq.wait_ack_msg_count,
                )
            self.queue_flow_control_times += 1
            return
        subscription = self.rebalance.subscription_inner.get(request.message_queue.topic)
        if subscription is None:
            self.execute_pop_pull_request_later(request, config.pull_time_delay_mills_when_exception)
            log.warning("find the consumer's subscription failed, %s", request)
            return
        mq = request.message_queue
        task = self.tasks.spawn(
            self._pop(request, subscription), f"pop-{mq.topic}-{mq.broker_name}-{mq.queue_id}"
        )
        self._pops[mq] = task
        task.add_done_callback(lambda t: self._pops.pop(mq, None) if self._pops.get(mq) is t else None)

    async def _pop(self, request: PopRequest, subscription: SubscriptionData) -> None:
        config = self.config
        mq = request.message_queue
        pq = request.pop_process_queue
        began = time.monotonic()
        try:
            result = await self.pop_api.pop(
                mq,
                config.pop_invisible_time,
                config.pop_batch_nums,
                config.broker_suspend_max_time_millis,
                request.init_mode,
                self._orderly,
                subscription.expression_type,
                subscription.sub_string,
            )
        except MQClientError as exc:
            if not is_retry_topic(mq.topic):
                log.warning("execute the pop request %s exception: %s", request, exc)
            delay = (
                PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
                if exc.response_code == ResponseCode.FLOW_CONTROL
                else config.pull_time_delay_mills_when_exception
            )
            self.execute_pop_pull_request_later(request, delay)
            return
        if pq.dropped:
            return
        status = result.pop_status
        if status is PopStatus.FOUND:
            msgs = self._process_pop_result(result, subscription)
            self.stats.inc_pull_rt(config.consumer_group, mq.topic, (time.monotonic() - began) * 1000)
            if not msgs:
                self.execute_pop_pull_request_immediately(request)
                return
            self.stats.inc_pull_tps(config.consumer_group, mq.topic, len(msgs))
            pq.inc_found_msg(len(msgs))
            assert self.consume_pop_service is not None
            self.consume_pop_service.submit_pop_consume_request(msgs, pq, mq)
            if config.pull_interval > 0:
                self.execute_pop_pull_request_later(request, config.pull_interval)
            else:
                self.execute_pop_pull_request_immediately(request)
        elif status in (PopStatus.NO_NEW_MSG, PopStatus.POLLING_NOT_FOUND):
            self.execute_pop_pull_request_immediately(request)
        else:  # POLLING_FULL
            self.execute_pop_pull_request_later(request, config.pull_time_delay_mills_when_exception)

    def _process_pop_result(self, result: PopResult, subscription: SubscriptionData) -> list[MessageExt]:
        """Java ``processPopResult``: messages whose tag does not match are acked; one delivered
        more than ``max_reconsume_times`` times goes to the DLQ (Java acks it: drops it)."""
        kept = []
        limit = (
            self.consume_pop_service.max_reconsume_times()
            if isinstance(self.consume_pop_service, ConsumeMessagePopOrderlyService)
            else self.max_reconsume_times()
        )
        for msg in result.msg_found_list:
            if not matches_tags(subscription, msg):
                self.tasks.spawn(self._ack_quietly(msg), "pop-ack-filtered")
            elif msg.reconsume_times > limit:
                log.info(
                    "Reconsume times has reached %d, so move msg %s to the DLQ", limit, msg.client_msg_id
                )
                self.tasks.spawn(self._dead_letter_quietly(msg, limit), "pop-dlq")
            else:
                kept.append(msg)
        return kept

    async def _ack_quietly(self, msg: MessageExt) -> None:
        try:
            await self.pop_api.ack(msg)
        except MQClientError as exc:
            log.warning("Ack message fail. msgId: %s: %s", msg.client_msg_id, exc)

    async def _dead_letter_quietly(self, msg: MessageExt, limit: int) -> None:
        try:
            await self.pop_api.forward_to_dead_letter_queue(msg, limit)
        except MQClientError as exc:
            log.error("forward %s to the dead letter queue failed: %s", msg.client_msg_id, exc)

    # -- MQConsumerInner ------------------------------------------------------------------------

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    async def do_rebalance(self) -> None:
        if not self._pause and self._rebalance is not None and self._state is ServiceState.RUNNING:
            await self._rebalance.do_rebalance(self._orderly)

    def adjust_thread_pool(self) -> None:
        """More consume threads while much is left to consume, fewer when little (seed 002)."""
        if self.consume_service is None or self._rebalance is None:
            return
        total = sum(pq.msg_acc_cnt for pq in self._rebalance.process_queue_table.values())
        threshold = self.config.adjust_thread_pool_nums_threshold
        if total > threshold:
            self.consume_service.inc_core_pool_size()
        elif total < threshold * 0.8:
            self.consume_service.dec_core_pool_size()

    def consumer_running_info(self) -> ConsumerRunningInfo:
        """Configuration, subscriptions, every queue's ProcessQueue and the statistics (seed 002)."""
        props = _config_properties(self.config)
        props[PROP_CONSUMEORDERLY] = str(self._orderly).lower()
        props[PROP_THREADPOOL_CORE_SIZE] = str(
            self.consume_service.core_pool_size if self.consume_service else 0
        )
        props[PROP_CONSUMER_START_TIMESTAMP] = str(self.consumer_start_timestamp)
        subscriptions = self.subscriptions()
        store = self.offset_store
        mq_table = {
            mq: pq.fill_process_queue_info(store.read_offset_from_memory(mq))
            for mq, pq in self.rebalance.process_queue_table.items()
        }
        status = {
            s.topic: self.stats.consume_status(self.config.consumer_group, s.topic) for s in subscriptions
        }
        pops = self.rebalance.pop_process_queue_table
        return ConsumerRunningInfo(
            properties=props,
            subscription_set=tuple(subscriptions),
            mq_table=mq_table,
            status_table=status,
            mq_pop_table={mq: pq.fill_pop_process_queue_info() for mq, pq in pops.items()} or None,
        )

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the queues of ``topic`` and restart them at
        ``offsets`` (Java ``MQClientInstance.resetOffset``)."""
        rebalance = self.rebalance
        self.suspend()
        try:
            affected = {
                mq: pq
                for mq, pq in rebalance.process_queue_table.items()
                if mq.topic == topic and mq in offsets
            }
            for mq, pq in affected.items():
                pq.dropped = True
                pq.clear()
                task = self._pulls.get(mq)
                if task is not None:
                    task.cancel()
            deadline = time.monotonic() + _RESET_DRAIN_MAX_S
            while any(pq.in_flight for pq in affected.values()) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            for mq, pq in affected.items():
                self.offset_store.update_offset(mq, offsets[mq], False)
                await rebalance.remove_unnecessary_message_queue(mq, pq)
                if rebalance.process_queue_table.get(mq) is pq:
                    del rebalance.process_queue_table[mq]
                log.info(
                    "[reset-offset] group=%s mq=%s offset=%d", self.config.consumer_group, mq, offsets[mq]
                )
        finally:
            self.resume()
        self.instance.rebalance_immediately()

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        if self.consume_service is None:
            raise ClientStateError("The push consumer is not started")
        return await self.consume_service.consume_message_directly(msg, broker_name)


def _config_properties(config: PushConsumerConfig) -> dict[str, str]:
    """Java ``MixAll.object2Properties(defaultMQPushConsumer)``: camelCase names, text values."""
    props = {
        k: v
        for k, v in config_to_properties(config).items()
        if k not in ("offsetStore", "subscription", "sessionCredentials")  # Java's rpcHook is not a property
    }
    props["allocateMessageQueueStrategy"] = type(config.allocate_message_queue_strategy).__name__
    return props
