"""``SimpleConsumer``: receive messages when you ask, ack each one (the 5.x SDKs' ``SimpleConsumer``,
over the remoting POP codes instead of gRPC).

Imports: ``finchmq.protocol`` and the client's modules.

Strategy (the 5.x proxy's ``ReceiveMessageActivity`` and ``ConsumerProcessor``, done in the client):
each ``receive`` takes the next subscribed topic and, of that topic's brokers (its route's readable
queues), the next one, round robin; it pops queue id -1 there (the broker picks among its
queues, retry queue included) with the subscription's filter, ``invisible_duration`` and, as
long polling, ``await_duration``. What comes back is filtered as the proxy does: a message whose
tag does not match (the broker filters by tag hash only) is acked, and one already delivered
``max_reconsume_times`` + 1 times is moved to ``%DLQ%group`` and acked, both in the background;
the rest is returned. A message not acked within its invisible time is delivered again, its
``reconsume_times`` one higher. With ``fifo`` the pops are orderly: a queue's messages come in
order and the next ones only after these are acked or their invisible time is over.

The consumer registers with the client instance like any other (heartbeats as a PULL-type,
clustering consumer of its topics, so ``consumerConnection`` lists it; routes kept fresh); it has
no offsets of its own: the broker keeps the group's progress.
"""

from __future__ import annotations

import logging
from typing import Final

from finchmq.client.config import SimpleConsumerConfig, make_config
from finchmq.client.errors import (
    ClientStateError,
    MQClientError,
    NoRouteError,
    PollingFullError,
    ValidationError,
)
from finchmq.client.instance import ClientService, MQClientInstance, MQConsumerInner, ServiceState
from finchmq.client.results import PopStatus
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol import pop
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.filter import MessageSelector
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.topics import is_retry_topic

from .base import subscription_data
from .pop import PopAPIWrapper, matches_tags

__all__ = ["MAX_INVISIBLE_DURATION", "MIN_INVISIBLE_DURATION", "SimpleConsumer"]

log = logging.getLogger(__name__)

MAX_MSG_NUMS_FOR_POP_REQUEST: Final = 32  # Java ProxyUtils; the broker refuses more
MIN_INVISIBLE_DURATION: Final = 1_000  # ms (the proxy's minInvisibleTimeMillsForRecv is 10 s)
MAX_INVISIBLE_DURATION: Final = 12 * 3600 * 1000  # ms, the proxy's maxInvisibleTimeMills


class SimpleConsumer(ClientService, MQConsumerInner):
    """An asyncio simple consumer (the 5.x ``SimpleConsumer``).

    ``SimpleConsumer("group", namesrv_addr="127.0.0.1:9876", subscription={"Orders": "*"})`` or
    ``SimpleConsumer(SimpleConsumerConfig(...))``; ``subscribe(topic, expression)``, ``await
    start()``, then ``await receive(max_message_num, invisible_duration)`` and ``await
    ack(message)`` for each message handled (``change_invisible_duration`` for more time), and
    ``await close()`` (or ``async with``).
    """

    _KIND = "simple consumer"

    def __init__(self, config: SimpleConsumerConfig | str, /, **overrides: object) -> None:
        self.config: SimpleConsumerConfig = make_config(
            SimpleConsumerConfig, config, "consumer_group", overrides
        )
        self._state = ServiceState.CREATE_JUST
        self._instance: MQClientInstance | None = None
        self._pop_api: PopAPIWrapper | None = None
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._queues: dict[str, list[MessageQueue]] = {}  # topic -> queue -1 of each broker
        self._topic_index = 0
        self._queue_index: dict[str, int] = {}
        self.tasks = BackgroundTasks(f"simple-{self.config.consumer_group}")
        for topic, expression in self.config.subscription.items():
            self.subscribe(topic, expression)

    # -- subscriptions ----------------------------------------------------------------------------

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        """Receive ``topic``'s messages matching the tag expression (``*``, ``TagA || TagB``) or
        the ``MessageSelector`` (SQL92: the broker needs ``enablePropertyFilter=true``).

        Raises ``ValidationError`` for a bad expression (for SQL92, where it goes wrong).
        """
        try:
            data = subscription_data(topic, sub_expression)
        except ValueError as exc:
            raise ValidationError(f"subscription exception: {exc}") from exc
        self._subscriptions[topic] = data
        if self._state is ServiceState.RUNNING:
            self.tasks.spawn(self._after_subscription_change(topic), "subscription-changed")

    async def _after_subscription_change(self, topic: str) -> None:
        await self.instance.update_topic_route_info_from_name_server(topic)
        await self.instance.send_heartbeat_to_all_broker_with_lock()

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic``'s messages."""
        self._subscriptions.pop(topic, None)
        self._queues.pop(topic, None)

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instanceName``), as the broker knows it."""
        return self.instance.client_id

    async def start(self) -> None:
        """Register with the client instance, fetch the subscribed topics' routes, heartbeat.

        Raises:
            ClientStateError: closed already, or this group is registered in this process's
                client instance (give each member its own ``instance_name``).
        """
        if self._running_already():
            return
        self._state = ServiceState.START_FAILED
        config = self.config = self.config.with_instance_name_pid()
        instance = MQClientInstance.get_or_create(config)
        group = config.consumer_group
        if not instance.register_consumer(group, self):
            self._state = ServiceState.CREATE_JUST
            raise ClientStateError(
                f"The consumer group[{group}] has been created before, specify another name please."
            )
        try:
            await instance.start()
        except BaseException:
            instance.consumer_table.pop(group, None)
            await instance.shutdown()
            raise
        self._instance = instance
        self._pop_api = PopAPIWrapper(instance, group)
        self._state = ServiceState.RUNNING
        for topic in list(self._subscriptions):
            await instance.update_topic_route_info_from_name_server(topic)
        await instance.send_heartbeat_to_all_broker_with_lock()
        log.info("the simple consumer [%s] start OK", group)

    async def close(self) -> None:
        """Stop, unregister (UNREGISTER_CLIENT) and release the client instance; idempotent.
        Messages received and not acked come back after their invisible time."""
        if self._state is not ServiceState.RUNNING or self._instance is None:
            self._state = ServiceState.SHUTDOWN_ALREADY
            return
        self._state = ServiceState.SHUTDOWN_ALREADY
        instance = self._instance
        await self.tasks.close()
        await instance.unregister_consumer(self.config.consumer_group)
        await instance.shutdown()
        log.info("the simple consumer [%s] shutdown OK", self.config.consumer_group)

    @property
    def pop_api(self) -> PopAPIWrapper:
        """The group's POP calls (receive, ack, change invisible time, DLQ), while running."""
        if self._pop_api is None or self._state is not ServiceState.RUNNING:
            raise ClientStateError(f"The {self._KIND} service state not OK, {self._state.name}")
        return self._pop_api

    # -- receive, ack, change invisible duration --------------------------------------------------

    async def receive(self, max_message_num: int, invisible_duration: int) -> list[MessageExt]:
        """Pop up to ``max_message_num`` (1..32) messages of the next subscribed topic, waiting up
        to ``await_duration`` ms for some to arrive; [] if none did. They stay invisible to the
        group for ``invisible_duration`` ms (1 s to 12 h): ack each one before then, or it is
        delivered again. Each carries its receipt handle (property ``POP_CK``).

        Raises:
            ValidationError: a bad argument (``response_code`` INVALID_PARAMETER, what the broker
                answers a bad pop parameter; the 5.x proxy's gRPC code is ILLEGAL_INVISIBLE_TIME),
                or nothing subscribed.
            NoRouteError: no broker serves the topic (yet).
            PollingFullError: the broker holds as many waiting pops as it may; back off.
            MQBrokerError: the broker refused the pop (its code and remark say why).
            MQNetworkError: no answer in time.
        """
        api = self.pop_api
        if max_message_num <= 0:
            raise ValidationError(
                f"max_message_num must be greater than 0, got {max_message_num}",
                response_code=ResponseCode.INVALID_PARAMETER,
            )
        if not MIN_INVISIBLE_DURATION <= invisible_duration <= MAX_INVISIBLE_DURATION:
            raise ValidationError(
                f"invisible_duration={invisible_duration} ms is out of range [{MIN_INVISIBLE_DURATION}, "
                f"{MAX_INVISIBLE_DURATION}] (it is in milliseconds)",
                response_code=ResponseCode.INVALID_PARAMETER,
            )
        if not self._subscriptions:
            raise ValidationError("There is no topic to receive message: subscribe() first")
        if max_message_num > MAX_MSG_NUMS_FOR_POP_REQUEST:
            log.debug(
                "receive %d messages: at most %d per pop", max_message_num, MAX_MSG_NUMS_FOR_POP_REQUEST
            )
            max_message_num = MAX_MSG_NUMS_FOR_POP_REQUEST
        topics = list(self._subscriptions)
        topic = topics[self._topic_index % len(topics)]
        self._topic_index += 1
        subscription = self._subscriptions[topic]
        mq = await self._next_queue(topic)
        config = self.config
        result = await api.pop(
            mq,
            invisible_duration,
            max_message_num,
            config.await_duration,
            pop.ConsumeInitMode.MAX,
            config.fifo,
            subscription.expression_type,
            subscription.sub_string,
        )
        if result.pop_status is PopStatus.POLLING_FULL:
            raise PollingFullError(
                ResponseCode.POLLING_FULL,
                f"the broker {mq.broker_name} holds as many pops as it may; receive again later",
            )
        if result.pop_status is not PopStatus.FOUND:
            return []
        return self._filter(subscription, result.msg_found_list)

    def _filter(self, subscription: SubscriptionData, msgs: list[MessageExt]) -> list[MessageExt]:
        """The proxy's ``PopMessageResultFilterImpl``: NO_MATCH is acked, TO_DLQ forwarded."""
        kept = []
        limit = self.config.max_reconsume_times
        for msg in msgs:
            if not matches_tags(subscription, msg):
                self.tasks.spawn(self._quietly(self.pop_api.ack(msg), msg, "ack a filtered message"), "ack")
            elif msg.reconsume_times > limit:
                forward = self.pop_api.forward_to_dead_letter_queue(msg, limit)
                self.tasks.spawn(self._quietly(forward, msg, "forward to the DLQ"), "to-dlq")
            else:
                kept.append(msg)
        return kept

    async def _quietly(self, work: object, msg: MessageExt, what: str) -> None:
        try:
            await work  # type: ignore[misc]
        except MQClientError as exc:
            log.warning("%s: %s %s failed: %s", self.config.consumer_group, what, msg.client_msg_id, exc)

    async def _next_queue(self, topic: str) -> MessageQueue:
        queues = self._queues.get(topic)
        if not queues:
            instance = self.instance
            await instance.update_topic_route_info_from_name_server(topic)
            queues = self._queues.get(topic)
            if not queues:
                raise NoRouteError(topic, "no readable queue to pop")
        index = self._queue_index.get(topic, 0)
        self._queue_index[topic] = index + 1
        return queues[index % len(queues)]

    async def ack(self, message: MessageExt) -> None:
        """Acknowledge a received message: it is consumed and not delivered again.

        Raises:
            InvalidReceiptHandleError: its invisible time is over (it is delivered again: ack
                that delivery), the broker no longer has it, or it was not received by popping.
            MQBrokerError: the broker refused the ack (code and remark say why).
            MQNetworkError: no answer in time.
        """
        await self.pop_api.ack(message)

    async def change_invisible_duration(self, message: MessageExt, invisible_duration: int) -> MessageExt:
        """Keep a received message invisible for ``invisible_duration`` ms from now (more time to
        handle it, or less to have it delivered again sooner). Returns the message with its new
        receipt handle: ack that one, the old one no longer works.

        Raises:
            ValidationError: ``invisible_duration`` out of range (``response_code``
                INVALID_PARAMETER).
            InvalidReceiptHandleError: as for ``ack``.
            MQBrokerError, MQNetworkError: as for ``ack``.
        """
        if not 0 <= invisible_duration <= MAX_INVISIBLE_DURATION:
            raise ValidationError(
                f"invisible_duration={invisible_duration} ms is out of range [0, {MAX_INVISIBLE_DURATION}]",
                response_code=ResponseCode.INVALID_PARAMETER,
            )
        return await self.pop_api.change_invisible_time(message, invisible_duration)

    # -- MQConsumerInner ----------------------------------------------------------------------------

    @property
    def group_name(self) -> str:
        return self.config.consumer_group

    @property
    def message_model(self) -> MessageModel:
        return MessageModel.CLUSTERING

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET  # a new group pops from the end (MAX)

    @property
    def unit_mode(self) -> bool:
        return self.config.unit_mode

    def subscriptions(self) -> list[SubscriptionData]:
        return list(self._subscriptions.values())

    async def do_rebalance(self) -> None:
        """Nothing to rebalance: the broker hands out messages, not queues."""

    async def persist_consumer_offset(self) -> None:
        """No offsets of its own: the broker keeps the group's progress."""

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        if topic in self._subscriptions and not is_retry_topic(topic):
            brokers = sorted({mq.broker_name for mq in info})
            self._queues[topic] = [MessageQueue(topic, broker, -1) for broker in brokers]

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic in self._subscriptions and topic not in self._queues

    def consumer_running_info(self) -> ConsumerRunningInfo:
        props = {
            "consumerGroup": self.config.consumer_group,
            "awaitDuration": str(self.config.await_duration),
            "fifo": str(self.config.fifo).lower(),
            "maxReconsumeTimes": str(self.config.max_reconsume_times),
        }
        return ConsumerRunningInfo(properties=props, subscription_set=tuple(self.subscriptions()))

    def adjust_thread_pool(self) -> None:
        return None

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return {}

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        log.warning(
            "[reset-offset] %s pops; the broker resets the group's progress itself, nothing to do here",
            self.config.consumer_group,
        )

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        raise MQClientError("a simple consumer has no listener to consume a message directly")
