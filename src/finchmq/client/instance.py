"""``MQClientInstance``: what the producers and consumers of one process share (Java
``MQClientInstance`` + ``MQClientManager`` + ``ClientRemotingProcessor``; seed 002).

Owns: the remoting client and its connections, the route and broker-address tables, heartbeats,
the periodic jobs, the single ``PullMessageService``, the ``RebalanceService`` loop, consumer
statistics, the inner producer used to send failed messages back, and the answers to the
broker's requests (NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY).
Imports: ``finchmq.protocol``, ``finchmq.remoting`` and the client's own modules.

Strategy:
    One instance per ``client_id`` (``ip@instanceName``) per event loop (asyncio objects belong
    to a loop), made by ``MQClientInstance.get_or_create`` and reference-counted: each
    producer/consumer registers on start and unregisters on close; the last one out shuts it
    down. Periodic jobs (seed 002 ``MQClientInstance.start``): route refresh every
    ``poll_name_server_interval`` (first after 10 ms), offline-broker clean-up + heartbeats every
    ``heartbeat_broker_interval`` (after 1 s), offset persistence every
    ``persist_consumer_offset_interval`` (after at most 10 s), thread-pool adjustment every
    minute. The rebalance loop runs every ``rebalance_wait_interval`` or at once when woken.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar, Final, Protocol, TypeVar

from finchmq._version import __version__
from finchmq.common.lifecycle import AsyncService
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.acl import SessionCredentials, sign_request
from finchmq.protocol.bodies import (
    MASTER_ID,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerRunningInfo,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    MessageQueueAssignment,
    ProducerData,
    SubscriptionData,
    TopicRouteData,
)
from finchmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
)
from finchmq.protocol.message import (
    Message,
    MessageExt,
    MessageQueue,
)
from finchmq.protocol.topics import CLIENT_INNER_PRODUCER_GROUP, is_retry_topic
from finchmq.remoting import ExecutorName, RemotingClient, RemotingClientConfig, RequestExecutor
from finchmq.remoting.tls import TlsConfig

from .api import MQClientAPI
from .config import ClientConfig, ProducerConfig
from .consumer.pull_service import PullMessageService
from .errors import ClientStateError, MQClientError, NoRouteError
from .remoting_processor import ClientRemotingProcessor
from .results import SendResult
from .route import (
    FindBrokerResult,
    TopicPublishInfo,
    route_changed,
    topic_route_data_to_publish_info,
    topic_route_data_to_subscribe_info,
)
from .stats import ConsumerStatsManager

if TYPE_CHECKING:
    from finchmq.protocol.bodies import ConsumeMessageDirectlyResult

__all__ = ["ClientService", "MQClientInstance", "MQConsumerInner", "MQProducerInner", "ServiceState"]

log = logging.getLogger(__name__)

LOCK_TIMEOUT: Final = 3.0  # s; Java lockNamesrv.tryLock(3000ms)
PROP_NAMESERVER_ADDR: Final = "PROP_NAMESERVER_ADDR"
PROP_CONSUME_TYPE: Final = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION: Final = "PROP_CLIENT_VERSION"
_ADJUST_THREAD_POOL_INTERVAL_MS: Final = 60_000

_T = TypeVar("_T")


class ServiceState(enum.Enum):
    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    START_FAILED = "START_FAILED"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"


class ClientService(AsyncService):
    """A producer, consumer or admin client: ``start``/``close`` with a ``ServiceState``, using
    the process's ``MQClientInstance`` while running. Subclasses set ``_KIND`` (error messages).

    Garbage-collected while still running, it warns (``ResourceWarning``, as an unclosed file):
    its client instance, connections and background tasks live on until ``close()``.
    """

    _KIND: ClassVar[str] = "client"
    config: ClientConfig
    _state: ServiceState
    _instance: MQClientInstance | None

    @property
    def instance(self) -> MQClientInstance:
        """The client instance; ``ClientStateError`` unless running."""
        if self._instance is None or self._state is not ServiceState.RUNNING:
            raise ClientStateError(f"The {self._KIND} service state not OK, {self._state.name}")
        return self._instance

    def _running_already(self) -> bool:
        """For ``start``: True if running; ``ClientStateError`` once closed (never reopened)."""
        if self._state is ServiceState.RUNNING:
            return True
        if self._state is not ServiceState.CREATE_JUST:
            article = "an" if self._KIND[0] in "aeiou" else "a"
            raise ClientStateError(f"Cannot reopen {article} {self._KIND}, once it has been closed.")
        return False

    def __del__(self) -> None:
        if getattr(self, "_state", None) is ServiceState.RUNNING:
            warnings.warn(
                f"Unclosed {type(self).__name__} {self.config}; call close()", ResourceWarning, stacklevel=1
            )


class MQConsumerInner(Protocol):
    """What the instance needs of a consumer (Java ``MQConsumerInner``)."""

    @property
    def group_name(self) -> str:
        """The consumer group."""
        ...

    @property
    def message_model(self) -> MessageModel:
        """CLUSTERING or BROADCASTING."""
        ...

    @property
    def consume_type(self) -> ConsumeType:
        """CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull), as heartbeats report it."""
        ...

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        """Where a group without a committed offset starts."""
        ...

    @property
    def unit_mode(self) -> bool:
        """Java's unit mode flag, reported in heartbeats."""
        ...

    def subscriptions(self) -> list[SubscriptionData]:
        """The subscriptions heartbeats carry (retry topic included for push consumers)."""
        ...

    async def do_rebalance(self) -> None:
        """Recompute this member's queues (Java ``doRebalance``)."""
        ...

    async def persist_consumer_offset(self) -> None:
        """Commit the offsets of the queues this member holds (to the broker or the local file)."""
        ...

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        """A route update: the readable queues of a subscribed topic."""
        ...

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """True when a subscribed topic has no queue information yet."""
        ...

    def consumer_running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO: settings, subscriptions, queues, statistics (``consumerStatus``)."""
        ...

    def adjust_thread_pool(self) -> None:
        """Grow or shrink the consume thread pool to the backlog (Java's periodic adjustment)."""
        ...

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """The offsets this member holds for ``topic``."""
        ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from the broker: restart those queues at those offsets."""
        ...

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY (mqadmin ``consumeMessage``): run the listener on one message."""
        ...


class InnerProducer(Protocol):
    """The instance's inner producer, as the instance and the consumers use it."""

    async def send(self, msg: Message) -> SendResult:
        """Send ``msg`` (sync), choosing its queue."""
        ...

    async def close(self, *, shutdown_instance: bool = True) -> None:
        """Stop it (without stopping the instance it runs on when ``shutdown_instance`` is False)."""
        ...


class MQProducerInner(Protocol):
    """What the instance needs of a producer (Java ``MQProducerInner``)."""

    def publish_topic_list(self) -> set[str]:
        """The topics this producer has sent to (their routes are kept fresh)."""
        ...

    def is_publish_topic_need_update(self, topic: str) -> bool:
        """True when ``topic`` has no usable route yet."""
        ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        """A route update for ``topic``."""
        ...

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """The broker at ``broker_addr`` asks about the transaction of half message ``msg``."""
        ...


# keyed by client id, credentials and TLS: clients signing with other keys, or with other TLS
# settings, never share connections (Java keys by client id only, so the first client's RPC hook
# and TLS settings serve all of them)
_InstanceKey = tuple[str, SessionCredentials | None, bool, TlsConfig]
_INSTANCES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_InstanceKey, MQClientInstance]] = (
    weakref.WeakKeyDictionary()
)


class MQClientInstance:
    """See the module docstring. Obtain with ``get_or_create``; never construct directly."""

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        credentials = config.session_credentials
        self.remoting = RemotingClient(
            RemotingClientConfig(
                connect_timeout_millis=config.connect_timeout_millis,
                client_channel_max_idle_time_seconds=config.client_channel_max_idle_time_seconds,
                use_tls=config.use_tls,
                tls=config.tls,
            ),
            name=f"client-{client_id}",
            # Java AclClientRPCHook: every request is signed for the broker's ACL
            rpc_hook=None
            if credentials is None
            else lambda addr, request: sign_request(request, credentials),
        )
        self.api = MQClientAPI(self.remoting, config.namesrv_addr_list())
        self.state = ServiceState.CREATE_JUST
        self.topic_route_table: dict[str, TopicRouteData] = {}
        # The last failure to reach the name servers for a route (None once one answers): says
        # why a topic has no route when the cause is the network, not the topic.
        self.namesrv_error: MQClientError | None = None
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.producer_table: dict[str, MQProducerInner] = {}
        # requests waiting for their reply, by CORRELATION_ID (Java RequestFutureHolder)
        self.reply_futures: dict[str, asyncio.Future[MessageExt]] = {}
        self.consumer_table: dict[str, MQConsumerInner] = {}
        self.admin_count = 0
        self.stats = ConsumerStatsManager()
        self.tasks = BackgroundTasks(f"instance-{client_id}")
        self.pull_message_service: PullMessageService | None = None
        # CLIENT_INNER_PRODUCER_GROUP's producer (Java ``defaultMQProducer``): the consumers'
        # send-back fallback. The first consumer creates it (consumer/base.py); the instance only
        # closes it, so it does not depend on the producer module.
        self.default_producer: InnerProducer | None = None
        self._rebalance_wakeup = asyncio.Event()
        self._lock_namesrv = asyncio.Lock()
        self._lock_heartbeat = asyncio.Lock()
        self._start_lock = asyncio.Lock()
        self._reset_lock = asyncio.Lock()
        self.boot_timestamp = int(time.time() * 1000)

    # -- registry -------------------------------------------------------------------------------

    @classmethod
    def get_or_create(cls, config: ClientConfig) -> MQClientInstance:
        """The running loop's instance for ``config.build_mq_client_id()`` (Java ``MQClientManager``)."""
        loop = asyncio.get_running_loop()
        table = _INSTANCES.setdefault(loop, {})
        client_id = config.build_mq_client_id()
        key = (client_id, config.session_credentials, config.use_tls, config.tls)
        instance = table.get(key)
        if instance is None or instance.state is ServiceState.SHUTDOWN_ALREADY:
            instance = cls(config, client_id)
            table[key] = instance
            log.info("created MQClientInstance %s", client_id)
        return instance

    def _forget(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        table = _INSTANCES.get(loop)
        key = (self.client_id, self.config.session_credentials, self.config.use_tls, self.config.tls)
        if table is not None and table.get(key) is self:
            del table[key]

    def register_consumer(self, group: str, consumer: MQConsumerInner) -> bool:
        if group in self.consumer_table:
            return False
        self.consumer_table[group] = consumer
        return True

    def register_producer(self, group: str, producer: MQProducerInner) -> bool:
        if group in self.producer_table:
            return False
        self.producer_table[group] = producer
        return True

    def select_consumer(self, group: str) -> MQConsumerInner | None:
        return self.consumer_table.get(group)

    async def unregister_consumer(self, group: str) -> None:
        """Forget ``group`` here and tell every broker (UNREGISTER_CLIENT)."""
        self.consumer_table.pop(group, None)
        await self._unregister_client(None, group)

    async def unregister_producer(self, group: str) -> None:
        self.producer_table.pop(group, None)
        await self._unregister_client(group, None)

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        calls = [
            self.api.unregister_client(addr, self.client_id, producer_group, consumer_group, 3000)
            for addrs in list(self.broker_addr_table.values())
            for addr in addrs.values()
        ]
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, BaseException) and not isinstance(result, MQClientError):
                raise result
            if isinstance(result, MQClientError):
                log.warning(
                    "unregister client %s (%s/%s) failed: %s",
                    self.client_id,
                    producer_group,
                    consumer_group,
                    result,
                )

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start once (later calls return at once); raises ``ClientStateError`` after shutdown."""
        async with self._start_lock:
            if self.state is ServiceState.RUNNING:
                return
            if self.state is not ServiceState.CREATE_JUST:
                raise ClientStateError(
                    f"The Factory object[{self.client_id}] has been created before, and failed "
                    f"(state {self.state.name})"
                )
            if not self.api.name_server_address_list:
                raise ClientStateError(
                    f"{self.client_id}: no name server address; set namesrv_addr ('host:port;host:port')"
                )
            self.state = ServiceState.START_FAILED
            executor = RequestExecutor(ExecutorName.CLIENT, workers=4, capacity=1024)
            self.remoting.register_processor(ClientRemotingProcessor(self), {ExecutorName.CLIENT: executor})
            await self.remoting.start()
            cfg = self.config
            self.tasks.every(cfg.poll_name_server_interval, self.update_all_topic_route_info, "route", 10)
            self.tasks.every(cfg.heartbeat_broker_interval, self._heartbeat_job, "heartbeat", 1000)
            self.tasks.every(
                cfg.persist_consumer_offset_interval,
                self.persist_all_consumer_offset,
                "persist-offsets",
                min(10_000, cfg.persist_consumer_offset_interval),
            )
            self.tasks.every(
                _ADJUST_THREAD_POOL_INTERVAL_MS,
                self._adjust_thread_pool,
                "adjust-thread-pool",
                _ADJUST_THREAD_POOL_INTERVAL_MS,
            )
            self.pull_message_service = PullMessageService(self)
            self.pull_message_service.start()
            self.tasks.spawn(self._rebalance_service(), "rebalance")
            self.state = ServiceState.RUNNING
            log.info("MQClientInstance %s started (namesrv %s)", self.client_id, cfg.namesrv_addr)

    async def shutdown(self) -> None:
        """Stop when no producer, consumer or admin uses the instance any more."""
        if self.consumer_table or self.admin_count:
            return
        if set(self.producer_table) - {CLIENT_INNER_PRODUCER_GROUP}:
            return
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self.state = ServiceState.SHUTDOWN_ALREADY
                self._forget()
            return
        self.state = ServiceState.SHUTDOWN_ALREADY
        self._forget()
        if self.default_producer is not None:
            await self.default_producer.close(shutdown_instance=False)
        if self.pull_message_service is not None:
            await self.pull_message_service.close()
        await self.tasks.close()
        await self.remoting.close()
        log.info("MQClientInstance %s shut down", self.client_id)

    # -- routes -------------------------------------------------------------------------------

    async def update_all_topic_route_info(self) -> None:
        """Refresh the route of every topic a consumer subscribes or a producer publishes."""
        topics: set[str] = set()
        for consumer in list(self.consumer_table.values()):
            topics.update(s.topic for s in consumer.subscriptions())
        for producer in list(self.producer_table.values()):
            topics.update(producer.publish_topic_list())
        for topic in sorted(topics):
            await self.update_topic_route_info_from_name_server(topic)

    async def update_topic_route_info_from_name_server(
        self, topic: str, *, is_default: bool = False, producer_config: ProducerConfig | None = None
    ) -> bool:
        """Fetch ``topic``'s route and publish it to producers and consumers; True if it changed.

        With ``is_default``, the route of ``producer_config.create_topic_key`` (TBW102) stands in
        for a topic that does not exist yet (the broker creates it on the first send). Failures
        are logged, not raised (Java).
        """
        try:
            async with asyncio.timeout(LOCK_TIMEOUT):
                await self._lock_namesrv.acquire()
        except TimeoutError:
            log.warning("updateTopicRouteInfoFromNameServer: lock not acquired in %.0fs", LOCK_TIMEOUT)
            return False
        try:
            timeout = self.config.mq_client_api_timeout
            if is_default and producer_config is not None:
                route = await self.api.get_topic_route_info_from_name_server(
                    producer_config.create_topic_key, timeout
                )
                if route is not None:
                    route = _with_queue_nums(route, producer_config.default_topic_queue_nums)
            else:
                route = await self.api.get_topic_route_info_from_name_server(topic, timeout)
            self.namesrv_error = None
            if route is None:
                if not is_retry_topic(topic):
                    log.debug("no route for topic %s on the name server", topic)
                return False
            old = self.topic_route_table.get(topic)
            changed = route_changed(old, route) or self._is_need_update_topic_route_info(topic)
            if not changed:
                return False
            if old is not None:
                log.info("the topic[%s] route changed, old %s, new %s", topic, old, route)
            for bd in route.broker_datas:
                self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
            publish = topic_route_data_to_publish_info(topic, route)
            publish.have_topic_router_info = True
            for producer in list(self.producer_table.values()):
                producer.update_topic_publish_info(topic, publish)
            subscribe = topic_route_data_to_subscribe_info(topic, route)
            for consumer in list(self.consumer_table.values()):
                consumer.update_topic_subscribe_info(topic, subscribe)
            self.topic_route_table[topic] = route
            return True
        except MQClientError as exc:
            log.warning("updateTopicRouteInfoFromNameServer %s failed: %s", topic, exc)
            self.namesrv_error = exc
            return False
        finally:
            self._lock_namesrv.release()

    def _is_need_update_topic_route_info(self, topic: str) -> bool:
        return any(p.is_publish_topic_need_update(topic) for p in self.producer_table.values()) or any(
            c.is_subscribe_topic_need_update(topic) for c in self.consumer_table.values()
        )

    def _is_broker_addr_in_routes(self, addr: str) -> bool:
        return any(
            addr in bd.broker_addrs.values() for r in self.topic_route_table.values() for bd in r.broker_datas
        )

    def clean_offline_broker(self) -> None:
        """Drop broker addresses no route mentions any more (Java ``cleanOfflineBroker``)."""
        for name in list(self.broker_addr_table):
            addrs = {
                bid: a for bid, a in self.broker_addr_table[name].items() if self._is_broker_addr_in_routes(a)
            }
            if addrs:
                self.broker_addr_table[name] = addrs
            else:
                del self.broker_addr_table[name]
                log.info("the broker[%s] name's host is offline, remove it", name)

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master of ``broker_name``."""
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int, only_this_broker: bool
    ) -> FindBrokerResult | None:
        """``broker_id`` of ``broker_name``, else (unless ``only_this_broker``) any of its brokers."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        if addr is None and slave:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            first_id, addr = next(iter(addrs.items()))
            slave = first_id != MASTER_ID
        if addr is None:
            return None
        return FindBrokerResult(addr, slave)

    def find_broker_address_in_admin(self, broker_name: str) -> FindBrokerResult | None:
        """The master if known, else a slave."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        if MASTER_ID in addrs:
            return FindBrokerResult(addrs[MASTER_ID], False)
        broker_id, addr = next(iter(addrs.items()))
        return FindBrokerResult(addr, broker_id != MASTER_ID)

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        return route.broker_datas[0].select_broker_addr()

    async def query_assignment(
        self, topic: str, group: str, strategy_name: str, message_model: MessageModel, timeout_millis: int
    ) -> set[MessageQueueAssignment] | None:
        """The queues of ``topic`` a broker of it assigns this client, each PULL or POP (5.x
        QUERY_ASSIGNMENT); None when no broker is known or it cannot tell.

        Raises:
            MQClientError: the broker refused or did not answer.
        """
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route_info_from_name_server(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return None
        return await self.api.query_assignment(
            addr, topic, group, self.client_id, strategy_name, message_model, timeout_millis
        )

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        """Every client id of ``group`` as one broker of ``topic`` knows them; None on failure."""
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route_info_from_name_server(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return None
        try:
            return await self.api.get_consumer_id_list_by_group(
                addr, group, self.config.mq_client_api_timeout
            )
        except MQClientError as exc:
            log.warning("getConsumerIdListByGroup %s from %s failed: %s", group, addr, exc)
            return None

    # -- queue queries (Java MQAdminImpl) -----------------------------------------------------

    async def find_broker(self, mq: MessageQueue, find: Callable[[str], _T | None]) -> _T:
        """``find(mq.broker_name)`` (a ``find_broker_address_in_*``), asked again after refreshing
        the route of ``mq.topic`` if it found nothing.

        Raises:
            MQClientError: the broker is still unknown.
        """
        found = find(mq.broker_name)
        if found is None:
            await self.update_topic_route_info_from_name_server(mq.topic)
            found = find(mq.broker_name)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return found

    async def _master_addr(self, mq: MessageQueue) -> str:
        return await self.find_broker(mq, self.find_broker_address_in_publish)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset after the last message of ``mq``."""
        return await self.api.get_max_offset(
            await self._master_addr(mq), mq, self.config.mq_client_api_timeout
        )

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.api.get_min_offset(
            await self._master_addr(mq), mq, self.config.mq_client_api_timeout
        )

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        """The offset of the first message stored at or after ``timestamp`` (epoch ms)."""
        addr = await self._master_addr(mq)
        return await self.api.search_offset(addr, mq, timestamp, self.config.mq_client_api_timeout)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        addr = await self._master_addr(mq)
        return await self.api.get_earliest_msg_storetime(addr, mq, self.config.mq_client_api_timeout)

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (Java ``MQAdminImpl.fetchSubscribeMessageQueues``).

        Raises:
            NoRouteError: the name server has no route for the topic.
        """
        route = await self.api.get_topic_route_info_from_name_server(topic, self.config.mq_client_api_timeout)
        if route is None:
            raise NoRouteError(topic)
        for bd in route.broker_datas:
            self.broker_addr_table.setdefault(bd.broker_name, {}).update(bd.broker_addrs)
        queues = topic_route_data_to_subscribe_info(topic, route)
        if not queues:
            raise NoRouteError(topic, "no readable queue")
        return queues

    # -- heartbeats ---------------------------------------------------------------------------

    async def _heartbeat_job(self) -> None:
        self.clean_offline_broker()
        await self.send_heartbeat_to_all_broker_with_lock()

    def _heartbeat_data(self) -> HeartbeatData:
        consumers = tuple(
            ConsumerData(
                group_name=c.group_name,
                consume_type=c.consume_type,
                message_model=c.message_model,
                consume_from_where=c.consume_from_where,
                subscription_data_set=tuple(c.subscriptions()),
                unit_mode=c.unit_mode,
            )
            for c in self.consumer_table.values()
        )
        producers = tuple(ProducerData(group_name=g) for g in self.producer_table)
        return HeartbeatData(
            client_id=self.client_id, producer_data_set=producers, consumer_data_set=consumers
        )

    async def send_heartbeat_to_all_broker_with_lock(self) -> None:
        """HEART_BEAT to every known broker (masters only when there is no consumer)."""
        async with self._lock_heartbeat:
            data = self._heartbeat_data()
            if not data.producer_data_set and not data.consumer_data_set:
                return
            targets = [
                (name, broker_id, addr)
                for name, addrs in list(self.broker_addr_table.items())
                for broker_id, addr in addrs.items()
                if data.consumer_data_set or broker_id == MASTER_ID
            ]
            results = await asyncio.gather(
                *(self.api.send_heartbeat(addr, data, 3000) for _, _, addr in targets), return_exceptions=True
            )
            for (name, _, addr), result in zip(targets, results, strict=True):
                if isinstance(result, MQClientError):
                    log.warning("send heart beat to broker[%s %s] failed: %s", name, addr, result)
                elif isinstance(result, BaseException):
                    raise result

    # -- consumers ------------------------------------------------------------------------------

    def rebalance_immediately(self) -> None:
        """Wake the rebalance loop (NOTIFY_CONSUMER_IDS_CHANGED, a consumer starting)."""
        self._rebalance_wakeup.set()

    async def _rebalance_service(self) -> None:
        """Java ``RebalanceService``: rebalance every consumer every ``rebalance_wait_interval``,
        or at once when woken."""
        while True:
            try:
                async with asyncio.timeout(self.config.rebalance_wait_interval / 1000):
                    await self._rebalance_wakeup.wait()
            except TimeoutError:
                pass
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    async def do_rebalance(self) -> None:
        for consumer in list(self.consumer_table.values()):
            try:
                await consumer.do_rebalance()
            except MQClientError as exc:
                log.warning("rebalance of %s failed: %s", consumer.group_name, exc)

    async def persist_all_consumer_offset(self) -> None:
        for consumer in list(self.consumer_table.values()):
            await consumer.persist_consumer_offset()

    async def _adjust_thread_pool(self) -> None:
        for consumer in list(self.consumer_table.values()):
            consumer.adjust_thread_pool()

    async def reset_offset(self, topic: str, group: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: restart the group's queues of ``topic`` at ``offsets``."""
        consumer = self.consumer_table.get(group)
        if consumer is None:
            log.info("[reset-offset] consumer does not exist. group=%s", group)
            return
        async with self._reset_lock:
            await consumer.reset_offset(topic, offsets)

    def consumer_running_info(self, group: str) -> ConsumerRunningInfo | None:
        consumer = self.consumer_table.get(group)
        if consumer is None:
            return None
        info = consumer.consumer_running_info()
        ns = "".join(f"{a};" for a in self.api.name_server_address_list)
        props = dict(info.properties)
        props[PROP_NAMESERVER_ADDR] = ns
        props[PROP_CONSUME_TYPE] = consumer.consume_type.name
        props[PROP_CLIENT_VERSION] = f"finchmq-{__version__} (V4_9_8)"
        return replace(info, properties=props)  # the rest as the consumer gave it (5.x: mq_pop_table)


def _with_queue_nums(route: TopicRouteData, nums: int) -> TopicRouteData:
    """The default route with each broker's queue count capped at ``defaultTopicQueueNums``."""
    queues = tuple(
        replace(
            qd,
            read_queue_nums=min(nums, qd.read_queue_nums),
            write_queue_nums=min(nums, qd.read_queue_nums),
        )
        for qd in route.queue_datas
    )
    return replace(route, queue_datas=queues)
