"""What the consumers share: ``ConsumerService`` (push, lite pull and pull consumers) and
``SubscribingConsumer`` (push and lite pull: their queues come from rebalancing).

Java repeats these parts in ``DefaultMQPushConsumerImpl``, ``DefaultLitePullConsumerImpl`` and
``DefaultMQPullConsumerImpl``: the offset store chosen by the message model, registering the
group with the client instance, subscriptions, the ``MQConsumerInner`` answers that are read
off the config, and the flow-control delay of a pull. Imports: ``finchmq.protocol`` and the
client's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

from finchmq.client.config import ConsumerConfig, ProducerConfig, SubscribingConsumerConfig
from finchmq.client.errors import ClientStateError, ValidationError
from finchmq.client.instance import ClientService, MQClientInstance, MQConsumerInner, ServiceState
from finchmq.client.producer import Producer
from finchmq.protocol.bodies import ConsumeFromWhere, MessageModel, SubscriptionData
from finchmq.protocol.filter import MessageSelector, build_subscription_data, is_tag_type
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.topics import CLIENT_INNER_PRODUCER_GROUP

from .offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore

if TYPE_CHECKING:
    from finchmq.common.tasks import BackgroundTasks

    from .rebalance import RebalanceImpl

__all__ = [
    "FLOW_CONTROL_LOG_EVERY",
    "PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL",
    "ConsumerService",
    "SubscribingConsumer",
]

PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL: Final = 50  # ms: the next pull of a queue over its limits
FLOW_CONTROL_LOG_EVERY: Final = 1_000  # flow-controlled pulls per warning


def subscription_data(topic: str, selector: str | MessageSelector) -> SubscriptionData:
    """The ``SubscriptionData`` of a tag expression or a ``MessageSelector``. Raises
    ``ValueError`` (an ``SQLSyntaxError`` for SQL92, with the position) for a bad expression."""
    if isinstance(selector, MessageSelector):
        selector.check()  # refused here rather than by the broker later
        return build_subscription_data(topic, selector.expression, selector.expression_type)
    return build_subscription_data(topic, selector)


class ConsumerService(ClientService, MQConsumerInner):
    """A member of a consumer group in this process: its offset store and its registration with
    the process's ``MQClientInstance``. Subclasses set ``_offset_store`` (None until started)."""

    config: ConsumerConfig
    _offset_store: OffsetStore | None

    @property
    def offset_store(self) -> OffsetStore:
        if self._offset_store is None:
            raise ClientStateError(f"The {self._KIND} is not started")
        return self._offset_store

    async def _load_offset_store(self, instance: MQClientInstance) -> None:
        """``config.offset_store``, else the brokers' (clustering) or a local file's (broadcasting)."""
        config = self.config
        store: OffsetStore
        if config.offset_store is not None:
            store = config.offset_store
        elif config.message_model is MessageModel.BROADCASTING:
            store = LocalFileOffsetStore(instance, config.consumer_group, config.local_offset_store_dir)
        else:
            store = RemoteBrokerOffsetStore(instance, config.consumer_group)
        self._offset_store = store
        await store.load()

    async def _register_and_start(self, instance: MQClientInstance) -> None:
        """Register the group with ``instance`` and start it; a failure undoes both (and calls
        ``_undo_start``).

        Raises:
            ClientStateError: the group is registered in this instance already; ``start`` may be
                called again (with another ``instance_name``).
        """
        group = self.config.consumer_group
        if not instance.register_consumer(group, self):
            self._state = ServiceState.CREATE_JUST
            await self._undo_start()
            raise ClientStateError(
                f"The consumer group[{group}] has been created before, specify another name please."
            )
        try:
            await instance.start()
            await _ensure_inner_producer(instance)
        except BaseException:
            instance.consumer_table.pop(group, None)
            await self._undo_start()
            await instance.shutdown()
            raise

    async def _undo_start(self) -> None:
        """Release what ``start`` set up before registering; nothing here."""

    # -- MQConsumerInner ------------------------------------------------------------------------

    @property
    def group_name(self) -> str:
        return self.config.consumer_group

    @property
    def message_model(self) -> MessageModel:
        return self.config.message_model

    @property
    def unit_mode(self) -> bool:
        return self.config.unit_mode

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic)


class SubscribingConsumer(ConsumerService):
    """A consumer whose queues come from rebalancing: topics subscribed with tag expressions.
    Subclasses set ``_subscription`` (topic -> expression), ``_rebalance`` (None until started)
    and ``tasks``."""

    _SUBSCRIBE_ERROR: ClassVar[str] = "subscription exception"  # Java's words differ per consumer
    config: SubscribingConsumerConfig
    tasks: BackgroundTasks
    _subscription: dict[str, str | MessageSelector]
    _rebalance: RebalanceImpl[Any] | None

    @property
    def instance(self) -> MQClientInstance:
        """The client instance, from ``start`` on (closing needs it too)."""
        if self._instance is None:
            raise ClientStateError(f"The {self._KIND} is not started")
        return self._instance

    @property
    def rebalance(self) -> RebalanceImpl[Any]:
        if self._rebalance is None:
            raise ClientStateError(f"The {self._KIND} is not started")
        return self._rebalance

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        """Consume ``topic``'s messages matching the tag expression (``*``, ``TagA || TagB``) or
        the selector (``MessageSelector.by_sql("a > 5")``: the broker filters on properties and
        needs ``enablePropertyFilter=true``).

        Raises ``ValidationError`` for a bad expression (for SQL92, naming where it goes wrong).
        After ``start`` the brokers hear of it with the next heartbeat (sent at once).
        """
        topic = self.config.with_namespace(topic)
        try:
            data = subscription_data(topic, sub_expression)
        except ValueError as exc:
            raise ValidationError(f"{self._SUBSCRIBE_ERROR}: {exc}") from exc
        self._subscription[topic] = sub_expression
        if self._rebalance is not None:
            self._rebalance.subscription_inner[topic] = data
            if self._state is ServiceState.RUNNING:
                self.tasks.spawn(self._after_subscription_change(topic), "subscription-changed")

    async def _after_subscription_change(self, topic: str) -> None:
        await self.instance.update_topic_route_info_from_name_server(topic)
        await self.instance.send_heartbeat_to_all_broker_with_lock()
        self.instance.rebalance_immediately()

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; the next rebalance drops its queues."""
        topic = self.config.with_namespace(topic)
        self._subscription.pop(topic, None)
        if self._rebalance is not None:
            self._rebalance.subscription_inner.pop(topic, None)

    def _parse_subscriptions(self) -> dict[str, SubscriptionData]:
        try:
            return {t: subscription_data(t, e) for t, e in self._subscription.items()}
        except ValueError as exc:
            raise ValidationError(f"subscription exception: {exc}") from exc

    async def _announce(self, instance: MQClientInstance) -> None:
        """Fetch the subscribed topics' routes, have a broker accept each SQL92 subscription
        (CHECK_CLIENT_CONFIG), heartbeat every broker (the end of ``start``).

        Raises:
            MQBrokerError: a broker refused an SQL92 subscription (no enablePropertyFilter, or
                an expression it cannot compile; the message says which).
        """
        for topic in list(self.rebalance.subscription_inner):
            await instance.update_topic_route_info_from_name_server(topic)
        for topic, data in list(self.rebalance.subscription_inner.items()):
            addr = None if is_tag_type(data.expression_type) else instance.find_broker_addr_by_topic(topic)
            if addr is not None:
                await instance.api.check_client_in_broker(
                    addr, self.config.consumer_group, instance.client_id, data
                )
        await instance.send_heartbeat_to_all_broker_with_lock()

    # -- MQConsumerInner ------------------------------------------------------------------------

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        return self.config.consume_from_where

    def subscriptions(self) -> list[SubscriptionData]:
        if self._rebalance is None:
            return []
        return list(self._rebalance.subscription_inner.values())

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        if self._rebalance is not None and topic in self._rebalance.subscription_inner:
            self._rebalance.topic_subscribe_info_table[topic] = info

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        if self._rebalance is None or topic not in self._rebalance.subscription_inner:
            return False
        return topic not in self._rebalance.topic_subscribe_info_table


async def _ensure_inner_producer(instance: MQClientInstance) -> None:
    """Start the instance's CLIENT_INNER_PRODUCER_GROUP producer (Java ``defaultMQProducer``), the
    consumers' send-back fallback, unless another consumer of the instance did."""
    if instance.default_producer is not None:
        return
    cfg = instance.config
    producer = Producer(
        ProducerConfig(
            producer_group=CLIENT_INNER_PRODUCER_GROUP,
            namesrv_addr=cfg.namesrv_addr,
            client_ip=cfg.client_ip,
            instance_name=cfg.instance_name,
            unit_name=cfg.unit_name,
        )
    )
    instance.default_producer = producer  # claimed before the await: one per instance
    await producer.start(instance=instance)
