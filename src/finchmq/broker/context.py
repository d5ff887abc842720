"""``BrokerContext``: the part of a broker that its request processors may use.

Processors see the store, the managers, the put service, statistics, flow-control counters, a few
facts that change at run time (address, permission, configuration) and the callables that reach
the name servers and the clients. They never see the ``BrokerController``: a processor can be
built on a store in a temporary directory and called without a socket (see
``tests/broker/test_processors.py``). ``build_broker_context`` is the one place that wires the
parts; the controller and the unit tests both use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from finchmq.protocol.bodies import DataVersion
from finchmq.protocol.hosts import pack_host
from finchmq.remoting.metrics import RpcMetrics
from finchmq.store import DefaultMessageStore, MessageStoreConfig
from finchmq.store.timer import TimerMessageStore

from .broker2client import Broker2Client
from .client_manager import ConsumerManager, ProducerManager
from .config import BrokerConfig
from .flow_control import FlowControlCounters
from .message_request_mode import MessageRequestModeManager
from .offset import ConsumerOffsetManager
from .pop import PopServices
from .put_service import StorePutService
from .rebalance_lock import RebalanceLockManager
from .schedule import ScheduleMessageService
from .stats import BrokerStats
from .subscription_group import SubscriptionGroupManager
from .timer import TimerDeliveries
from .topic_config import TopicConfigManager
from .topic_route import TopicRouteInfoManager

if TYPE_CHECKING:
    from .acl import PlainAccessValidator
    from .auth import AuthMetadataManager


class MetricsHooks(Protocol):
    """What processors report to the metrics (``BrokerMetrics`` provides it)."""

    rpc: RpcMetrics

    def record_dlq(self, group: str, topic: str) -> None: ...


__all__ = ["BrokerContext", "build_broker_context"]


async def _nothing_to_wait_for() -> None:
    return None


async def _no_config_updates(properties: Mapping[str, str]) -> dict[str, str]:
    raise ValueError("this broker does not accept configuration updates")


@dataclass(slots=True, eq=False)
class BrokerContext:
    """What processors use of a broker. Fields that change at run time (``config``,
    ``broker_permission``, ``broker_addr``, ``store_host``, ``config_data_version``) live here
    only; the controller reads and writes them through this object."""

    config: BrokerConfig
    store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    subscription_group_manager: SubscriptionGroupManager
    consumer_offset_manager: ConsumerOffsetManager
    consumer_manager: ConsumerManager
    producer_manager: ProducerManager
    rebalance_lock_manager: RebalanceLockManager
    stats: BrokerStats
    flow_control: FlowControlCounters
    put_service: StorePutService
    broker2client: Broker2Client
    schedule_message_service: ScheduleMessageService
    # 5.x: queues assigned by the broker (QUERY_ASSIGNMENT)
    message_request_mode_manager: MessageRequestModeManager
    topic_route_info_manager: TopicRouteInfoManager
    pop: PopServices  # 5.x: POP's state and services (broker/pop/)
    broker_permission: int
    broker_addr: str
    store_host: bytes
    config_data_version: DataVersion = field(default_factory=DataVersion)
    # 5.x timer messages (timerWheelEnable): the store's timer and its put (broker/timer.py)
    timer_message_store: TimerMessageStore | None = None
    timer_deliveries: TimerDeliveries | None = None
    # Registration with the name servers and run-time configuration: the controller's, or inert.
    wait_registered: Callable[[], Awaitable[None]] = _nothing_to_wait_for
    update_config: Callable[[Mapping[str, str]], Awaitable[dict[str, str]]] = _no_config_updates
    runtime_info: Callable[[], dict[str, str]] = dict
    # the broker's metrics while metricsExporterType=PROM (processors report DLQ sends, late answers)
    metrics: MetricsHooks | None = None
    acl: PlainAccessValidator | None = None  # aclEnable=true: the accounts (ACL admin requests edit them)
    auth: AuthMetadataManager | None = None  # ACL 2.0: the users and ACLs (AUTH_* requests edit them)

    @property
    def metadata_unwritten(self) -> bool:
        """True while a topic, subscription-group or message-request-mode change is not yet on disk."""
        return (
            self.topic_config_manager.has_unwritten_changes
            or self.subscription_group_manager.has_unwritten_changes
            or self.message_request_mode_manager.has_unwritten_changes
        )

    async def flush_metadata(self) -> None:
        """Return once every topic and subscription-group change made so far is on disk (fsync'd):
        a request that created state is answered only then, as Java persists before answering."""
        await self.topic_config_manager.flush_changes()
        await self.subscription_group_manager.flush_changes()
        await self.message_request_mode_manager.flush_changes()


def build_broker_context(
    config: BrokerConfig,
    store_config: MessageStoreConfig,
    broker2client: Broker2Client,
    *,
    on_topics_changed: Callable[[], None] | None = None,
) -> BrokerContext:
    """Create a broker's store and managers (nothing is loaded or started) around ``broker2client``.

    ``on_topics_changed`` runs when the topic table changes (the controller re-registers).
    """
    config_dir = store_config.store_path_root_dir / "config"
    consumer_manager = ConsumerManager(on_consumer_ids_changed=broker2client.notify_consumer_ids_changed)
    store = DefaultMessageStore(store_config)
    stats = BrokerStats()
    put_service = StorePutService(
        store.put,
        threads=config.send_message_thread_pool_nums,
        off_loop_threshold_ms=lambda: context.config.put_off_loop_threshold_ms,
        force_thread=lambda: store.config.inject_put_delay_millis > 0,
    )
    schedule = ScheduleMessageService(
        config_dir / "delayOffset.json",
        store=store,
        put_service=put_service,
        stats=stats,
        store_host=lambda: context.store_host,
    )
    topic_config_manager = TopicConfigManager(
        config_dir / "topics.json",
        config,
        on_change=on_topics_changed,
        timer_wheel_enable=store_config.timer_wheel_enable,
    )
    subscription_group_manager = SubscriptionGroupManager(config_dir / "subscriptionGroup.json", config)
    consumer_offset_manager = ConsumerOffsetManager(config_dir / "consumerOffset.json")
    pop = PopServices(  # 5.x
        config,
        config=lambda: context.config,
        store=store,
        put_service=put_service,
        topics=topic_config_manager,
        groups=subscription_group_manager,
        offsets=consumer_offset_manager,
        stats=stats,
        store_host=lambda: context.store_host,
        config_dir=config_dir,
        on_dlq=lambda group, topic: context.metrics.record_dlq(group, topic) if context.metrics else None,
    )
    context = BrokerContext(
        config=config,
        store=store,
        topic_config_manager=topic_config_manager,
        subscription_group_manager=subscription_group_manager,
        consumer_offset_manager=consumer_offset_manager,
        consumer_manager=consumer_manager,
        producer_manager=ProducerManager(),
        rebalance_lock_manager=RebalanceLockManager(config.rebalance_lock_max_live_time),
        stats=stats,
        flow_control=FlowControlCounters(),
        put_service=put_service,
        broker2client=broker2client,
        schedule_message_service=schedule,
        message_request_mode_manager=MessageRequestModeManager(config_dir / "messageRequestMode.json"),
        topic_route_info_manager=TopicRouteInfoManager(
            topic_config_manager.select_topic_config, config.broker_name
        ),
        pop=pop,
        broker_permission=config.broker_permission,
        broker_addr=config.broker_addr,
        store_host=pack_host(config.broker_ip1, config.listen_port),
    )
    if store_config.timer_wheel_enable:
        context.timer_deliveries = TimerDeliveries(store)
        context.timer_message_store = TimerMessageStore(store, put=context.timer_deliveries.put)
    return context
