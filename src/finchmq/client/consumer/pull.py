"""The low-level pull API: ``PullAPIWrapper`` (Java ``PullAPIWrapper``; seed 002) and
``PullConsumer`` (Java ``DefaultMQPullConsumer``): pull from a queue at an offset, you keep
track of offsets (optionally committing them to the broker). The Spark data source and
``LitePullConsumer`` build on it.

Imports: ``finchmq.protocol`` and the client's modules.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from finchmq.client.api import MQClientAPI, PullResultExt
from finchmq.client.config import PullConsumerConfig, make_config
from finchmq.client.errors import MQClientError, ValidationError
from finchmq.client.instance import MQClientInstance, ServiceState
from finchmq.client.results import PullResult, PullStatus
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from finchmq.protocol.filter import MessageSelector, build_subscription_data
from finchmq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from finchmq.protocol.message import Message, MessageExt, MessageQueue
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.namespace import wrap_namespace
from finchmq.protocol.topics import retry_topic

from .base import ConsumerService, subscription_data
from .offset_store import OffsetStore, ReadOffsetType

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["PullAPIWrapper", "PullConsumer", "send_message_back"]

log = logging.getLogger(__name__)

_MAX_PULL_NUMS: Final = 1024 * 32  # a broker caps maxMsgNums at its maxTransferCountOnMessageInMemory anyway


class PullAPIWrapper:
    """Build and send PULL_MESSAGE; decode, filter by tag and annotate the result."""

    def __init__(self, instance: MQClientInstance, consumer_group: str) -> None:
        self.instance = instance
        self.consumer_group = consumer_group
        self.pull_from_which_node_table: dict[MessageQueue, int] = {}

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        self.pull_from_which_node_table[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        return self.pull_from_which_node_table.get(mq, 0)

    @staticmethod
    def process_pull_result(
        ext: PullResultExt, broker_addr: str, subscription: SubscriptionData
    ) -> PullResult:
        """Java ``processPullResult``: decode the messages ``pull_kernel_raw`` got from
        ``broker_addr``, keep those whose tag ``subscription`` names, note the queue's offsets."""
        if ext.pull_status is not PullStatus.FOUND:
            return PullResult(
                pull_status=ext.pull_status,
                next_begin_offset=ext.next_begin_offset,
                min_offset=ext.min_offset,
                max_offset=ext.max_offset,
                suggest_which_broker_id=ext.suggest_which_broker_id,
            )
        msgs = MQClientAPI.decode_messages(ext.body, broker_addr)
        if subscription.tags_set and not subscription.class_filter_mode:
            tags = frozenset(subscription.tags_set)
            msgs = [m for m in msgs if m.tags is not None and m.tags in tags]
        min_text, max_text = str(ext.min_offset), str(ext.max_offset)
        for msg in msgs:
            # The decoder made these dicts for us alone; nobody has seen the messages yet.
            props = msg.properties
            if isinstance(props, dict):
                props[MessageConst.PROPERTY_MIN_OFFSET] = min_text
                props[MessageConst.PROPERTY_MAX_OFFSET] = max_text
        return PullResult(
            pull_status=PullStatus.FOUND,
            next_begin_offset=ext.next_begin_offset,
            min_offset=ext.min_offset,
            max_offset=ext.max_offset,
            msg_found_list=msgs,
            suggest_which_broker_id=ext.suggest_which_broker_id,
        )

    async def pull_kernel_raw(
        self,
        mq: MessageQueue,
        sub_expression: str | None,
        expression_type: str | None,
        sub_version: int,
        offset: int,
        max_nums: int,
        sys_flag: int,
        commit_offset: int,
        broker_suspend_max_time_millis: int,
        timeout_millis: int,
    ) -> tuple[PullResultExt, str]:
        """Pull ``mq`` from the broker the last answer suggested (the master at first), Java
        ``pullKernelImpl``: the undecoded answer and the broker's address.

        Raises:
            MQClientError: no broker of ``mq.broker_name`` is known; the broker's error answer.
        """
        instance = self.instance
        found = await instance.find_broker(
            mq,
            lambda name: instance.find_broker_address_in_subscribe(
                name, self.recalculate_pull_from_which_node(mq), False
            ),
        )
        if found.slave:
            sys_flag = PullSysFlag.clear_commit_offset_flag(sys_flag)
        header = PullMessageRequestHeader(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=broker_suspend_max_time_millis,
            sub_version=sub_version,
            subscription=sub_expression,
            expression_type=expression_type,
        )
        ext = await instance.api.pull_message(found.broker_addr, header, timeout_millis)
        self.update_pull_from_which_node(mq, ext.suggest_which_broker_id)
        return ext, found.broker_addr


async def send_message_back(
    instance: MQClientInstance,
    consumer_group: str,
    msg: MessageExt,
    delay_level: int,
    broker_name: str | None,
    max_reconsume_times: int,
    *,
    namespace: str | None = None,
) -> None:
    """Java ``DefaultMQPushConsumerImpl.sendMessageBack``: CONSUMER_SEND_MSG_BACK to the broker
    that stored ``msg``; if that fails, the inner producer sends a copy to ``%RETRY%group``.

    Raises:
        MQClientError: both ways failed.
    """
    if namespace:  # the listener saw the user's topic (Java ConsumeMessageConcurrentlyService)
        msg = replace(msg, topic=wrap_namespace(namespace, msg.topic))
    addr = instance.find_broker_address_in_publish(broker_name) if broker_name else None
    if addr is None:
        addr = str(msg.store_host)
    try:
        await instance.api.consumer_send_message_back(
            addr, msg, consumer_group, delay_level, 5000, max_reconsume_times
        )
        return
    except MQClientError as exc:
        log.error("sendMessageBack to %s failed, send through the inner producer: %s", addr, exc)
    producer = instance.default_producer
    if producer is None:
        raise MQClientError("no inner producer to send the message back")
    props = dict(msg.properties)
    props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.client_msg_id)
    props[MessageConst.PROPERTY_RETRY_TOPIC] = msg.topic
    props[MessageConst.PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
    props[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    props.pop(MessageConst.PROPERTY_TRANSACTION_PREPARED, None)
    props.pop(MessageConst.PROPERTY_MIN_OFFSET, None)
    props.pop(MessageConst.PROPERTY_MAX_OFFSET, None)
    props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
    await producer.send(Message(retry_topic(consumer_group), msg.body, flag=msg.flag, properties=props))


class PullConsumer(ConsumerService):
    """Pull messages from queues you choose, at offsets you choose (Java ``DefaultMQPullConsumer``).

    ``await pull(mq, "TagA || TagB", offset, 32)`` returns a ``PullResult``; continue from its
    ``next_begin_offset``. ``pull_block_if_not_found`` long-polls. Offsets you pass to
    ``update_consume_offset`` are committed with the periodic persistence and on ``close()``
    (clustering: on the broker; broadcasting: in a local file).

    With ``namespace="X"`` (Java ``ClientConfig.namespace``) the group is ``X%group`` on the
    broker, and topics and queues given (``pull``, offsets, ``fetch_subscribe_message_queues``,
    ``register_topics``) are wrapped ``X%topic``; the queues and pulled messages handed back
    carry the plain topic. ``pull_raw`` returns the records as stored, with ``X%topic``.
    """

    _KIND = "pull consumer"

    def __init__(self, config: PullConsumerConfig | str, /, **overrides: object) -> None:
        self.config: PullConsumerConfig = make_config(PullConsumerConfig, config, "consumer_group", overrides)
        self._state = ServiceState.CREATE_JUST
        self._instance: MQClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        self._pull_api: PullAPIWrapper | None = None
        self._registered_topics: set[str] = set()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._running_already():
            return
        config = self.config
        config = self.config = config.with_namespaced_group()
        if config.message_model is MessageModel.CLUSTERING:
            config = self.config = config.with_instance_name_pid()
        instance = MQClientInstance.get_or_create(config)
        await self._load_offset_store(instance)
        self._pull_api = PullAPIWrapper(instance, config.consumer_group)
        await self._register_and_start(instance)
        self._instance = instance
        self._state = ServiceState.RUNNING

    async def close(self) -> None:
        """Persist offsets, unregister, release the client instance; idempotent."""
        if self._state is not ServiceState.RUNNING or self._instance is None:
            self._state = ServiceState.SHUTDOWN_ALREADY
            return
        instance = self._instance
        await self.persist_consumer_offset()
        self._state = ServiceState.SHUTDOWN_ALREADY
        await instance.unregister_consumer(self.config.consumer_group)
        await instance.shutdown()

    # -- pulling ----------------------------------------------------------------------------------

    def register_topics(self, topics: Iterable[str]) -> None:
        """Topics named in heartbeats (Java ``registerTopics``), so admin tools see the group."""
        self._registered_topics.update(self.config.with_namespace(t) for t in topics)

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """Every readable queue of ``topic``."""
        queues = await self.instance.fetch_subscribe_message_queues(self.config.with_namespace(topic))
        return {self.config.queue_without_namespace(mq) for mq in queues}

    async def pull(
        self,
        mq: MessageQueue,
        sub_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int,
        *,
        timeout_millis: int | None = None,
    ) -> PullResult:
        """Pull at most ``max_nums`` messages of ``mq`` from ``offset``, filtered by the tag
        expression (``*`` or ``TagA || TagB``) or a ``MessageSelector`` (SQL92 needs the broker's
        ``enablePropertyFilter``); answers at once (no long polling)."""
        ext, addr, subscription = await self._pull(
            mq, sub_expression, offset, max_nums, False, timeout_millis
        )
        return self._without_namespace(PullAPIWrapper.process_pull_result(ext, addr, subscription))

    async def pull_raw(
        self,
        mq: MessageQueue,
        sub_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int,
        *,
        timeout_millis: int | None = None,
    ) -> PullResultExt:
        """``pull`` without decoding: ``body`` holds the stored records as the broker sent them
        (``finchmq.protocol.stored.iter_stored`` reads them), for readers that decode in bulk
        into a layout of their own (the Spark source). The broker filters by tag hash only, so
        a reader whose expression names tags must check each record's TAGS (``pull`` does)."""
        ext, _, _ = await self._pull(mq, sub_expression, offset, max_nums, False, timeout_millis)
        return ext

    async def pull_block_if_not_found(
        self, mq: MessageQueue, sub_expression: str | MessageSelector | None, offset: int, max_nums: int
    ) -> PullResult:
        """As ``pull``, but the broker holds the request up to ``broker_suspend_max_time_millis``
        until a message arrives."""
        ext, addr, subscription = await self._pull(mq, sub_expression, offset, max_nums, True, None)
        return self._without_namespace(PullAPIWrapper.process_pull_result(ext, addr, subscription))

    def _without_namespace(self, result: PullResult) -> PullResult:
        """``result`` with its messages' topics as the user names them (Java
        ``DefaultMQPullConsumerImpl.resetTopic``)."""
        if not self.config.namespace or not result.msg_found_list:
            return result
        msgs = [replace(m, topic=self.config.without_namespace(m.topic)) for m in result.msg_found_list]
        return replace(result, msg_found_list=msgs)

    async def _pull(
        self,
        mq: MessageQueue,
        sub_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int,
        block: bool,
        timeout_millis: int | None,
    ) -> tuple[PullResultExt, str, SubscriptionData]:
        """Validate and send a pull: the undecoded answer, the broker's address, the subscription."""
        instance = self.instance
        mq = self.config.queue_with_namespace(mq)
        if offset < 0:
            raise ValidationError(f"offset < 0: {offset}")
        if max_nums <= 0 or max_nums > _MAX_PULL_NUMS:
            raise ValidationError(f"maxNums {max_nums} out of range [1, {_MAX_PULL_NUMS}]")
        try:
            subscription = subscription_data(mq.topic, sub_expression if sub_expression is not None else "*")
        except ValueError as exc:
            raise ValidationError(f"parse subscription error: {exc}") from exc
        assert self._pull_api is not None and instance is not None
        timeout = (
            self.config.consumer_timeout_millis_when_suspend
            if block
            else (timeout_millis if timeout_millis is not None else self.config.consumer_pull_timeout_millis)
        )
        ext, addr = await self._pull_api.pull_kernel_raw(
            mq,
            subscription.sub_string,
            subscription.expression_type,
            0,
            offset,
            max_nums,
            PullSysFlag.build_sys_flag(False, block, True, False),
            0,
            self.config.broker_suspend_max_time_millis,
            timeout,
        )
        return ext, addr, subscription

    # -- offsets and queues -----------------------------------------------------------------------

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Remember ``offset`` as consumed; committed by the next persistence."""
        self.offset_store.update_offset(self.config.queue_with_namespace(mq), offset, False)

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool) -> int:
        """The committed offset (-1: none)."""
        read = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return await self.offset_store.read_offset(self.config.queue_with_namespace(mq), read)

    async def persist_consumer_offset(self) -> None:
        store = self.offset_store
        await store.persist_all(set(store.clone_offset_table()))

    async def min_offset(self, mq: MessageQueue) -> int:
        """The first offset still stored in ``mq``."""
        return await self.instance.min_offset(self.config.queue_with_namespace(mq))

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset after the last message of ``mq``."""
        return await self.instance.max_offset(self.config.queue_with_namespace(mq))

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp`` (ms)."""
        return await self.instance.search_offset(self.config.queue_with_namespace(mq), timestamp)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """The store time (ms) of the first message still in ``mq``."""
        return await self.instance.earliest_msg_store_time(self.config.queue_with_namespace(mq))

    async def send_message_back(
        self, msg: MessageExt, delay_level: int, broker_name: str | None = None
    ) -> None:
        """Give ``msg`` back for a later retry through ``%RETRY%group`` (or the DLQ)."""
        await send_message_back(
            self.instance,
            self.config.consumer_group,
            msg,
            delay_level,
            broker_name,
            self.config.max_reconsume_times,
            namespace=self.config.namespace,
        )

    # -- MQConsumerInner ------------------------------------------------------------------------

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET

    def subscriptions(self) -> list[SubscriptionData]:
        return [build_subscription_data(t, "*") for t in sorted(self._registered_topics)]

    async def do_rebalance(self) -> None:
        return None

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        return None

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return False

    def consumer_running_info(self) -> ConsumerRunningInfo:
        return ConsumerRunningInfo(properties={"PROP_CONSUME_TYPE": "CONSUME_ACTIVELY"})

    def adjust_thread_pool(self) -> None:
        return None

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            if mq.topic == topic:
                self.offset_store.update_offset(mq, offset, False)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        raise MQClientError("a pull consumer has no listener to consume a message directly")
