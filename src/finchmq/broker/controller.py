"""``BrokerController``: a broker process's parts, wired and run (Java ``BrokerController``).

Start: load the JSON state and recover the store (in a thread), start the store's services and
the writer thread, listen, register with every name server and keep registering every
``registerNameServerPeriod``; persist consumer offsets every ``flushConsumerOffsetInterval`` and
other state when it changes; drop clients silent for two minutes. Close, in order: stop the
periodic work, unregister, stop listening (clients' connections close), finish queued puts,
shut the store down (flush), persist every state file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from finchmq.common import config_from_properties, config_to_properties, format_properties, write_atomically
from finchmq.common.lifecycle import AsyncService
from finchmq.common.metrics import CONTENT_TYPE, Exposition, MetricsExporterType
from finchmq.common.otlp import OtlpMetricsExporter
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol._json import java_double
from finchmq.protocol.bodies import DataVersion, PermName, TopicConfigSerializeWrapper
from finchmq.protocol.codes import MQVersion
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.topics import SCHEDULE_TOPIC
from finchmq.remoting import (
    Channel,
    ChannelGoneListener,
    ExecutorName,
    RemotingClient,
    RemotingClientConfig,
    RemotingServer,
    RemotingServerConfig,
    RequestExecutor,
    TlsConfig,
)
from finchmq.remoting.http import MetricsHttpServer
from finchmq.remoting.tls import is_tls_key
from finchmq.store import MessageStoreConfig
from finchmq.store.config import BrokerRole

from .acl import WATCH_INTERVAL_MS, PlainAccessValidator
from .auth import AuthChecker, AuthMetadataManager, build_auth, load_auth
from .broker2client import Broker2Client
from .config import BrokerConfig
from .context import build_broker_context
from .flow_control import BrokerFastFailure, overload_kind
from .ha import HAService
from .long_polling import PullRequestHoldService
from .metrics import BrokerMetrics
from .outer_api import BrokerOuterAPI
from .processor import (
    AckMessageProcessor,
    AdminBrokerProcessor,
    AuthAdminProcessor,
    ChangeInvisibleTimeProcessor,
    ClientManageProcessor,
    ConsumerManageProcessor,
    EndTransactionProcessor,
    NotificationProcessor,
    PeekMessageProcessor,
    PollingInfoProcessor,
    PopMessageProcessor,
    PullMessageProcessor,
    QueryAssignmentProcessor,
    QueryMessageProcessor,
    RecallMessageProcessor,
    SendMessageProcessor,
)
from .slave_sync import SlaveSynchronize
from .stats import java_human_bytes
from .timer import timer_runtime_info
from .transaction import TransactionalMessageService

__all__ = ["VERSION_DESC", "BrokerController"]

log = logging.getLogger(__name__)

VERSION_DESC = "V4_9_8"
_CLIENT_SCAN_INTERVAL = 10.0  # s, Java ClientHousekeepingService


class BrokerController(AsyncService):
    """A running broker: ``await start()``, ``await close()``, or ``async with``."""

    def __init__(
        self,
        config: BrokerConfig,
        store_config: MessageStoreConfig,
        *,
        config_file: Path | None = None,
        extra_properties: Mapping[str, str] | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.config_file = config_file
        self._extra_properties = dict(extra_properties or {})
        # TLS on the broker's two remoting ports (Java: -Dtls.* / tls.config.file; here also the
        # tls.* keys of broker.conf); HA stays plain, as Java 4.9.8's HAService is plain NIO
        if tls is None:
            tls = TlsConfig.from_properties(
                {k: v for k, v in self._extra_properties.items() if is_tls_key(k)}
            )
        self.tls = tls
        self._config_write_lock = asyncio.Lock()
        self.server = RemotingServer(
            RemotingServerConfig(
                bind_address=config.bind_address,
                listen_port=config.listen_port,
                server_channel_max_idle_time_seconds=config.server_channel_max_idle_time_seconds,
                tls=tls,
            ),
            listener=ChannelGoneListener(self.forget_channel),  # Java ClientHousekeepingService
            name="broker",
        )
        # Java's "VIP channel": the same broker on listenPort - 2, without pulls; Java's slaves sync
        # metadata through it and Java clients with vipChannelEnabled send through it
        self.fast_server = RemotingServer(
            RemotingServerConfig(
                bind_address=config.bind_address,
                listen_port=config.listen_port - 2 if config.listen_port >= 3 else 0,
                server_channel_max_idle_time_seconds=config.server_channel_max_idle_time_seconds,
                tls=tls,
            ),
            listener=ChannelGoneListener(self.forget_channel),
            name="broker-fast",
        )
        self.broker2client = Broker2Client(self.server, self.spawn)
        self.context = context = build_broker_context(
            config, store_config, self.broker2client, on_topics_changed=self.schedule_register
        )
        context.wait_registered = self.wait_registered
        context.update_config = self.update_config
        context.runtime_info = self.runtime_info
        self.store = context.store
        self.topic_config_manager = context.topic_config_manager
        self.subscription_group_manager = context.subscription_group_manager
        self.consumer_offset_manager = context.consumer_offset_manager
        self.consumer_manager = context.consumer_manager
        self.producer_manager = context.producer_manager
        self.rebalance_lock_manager = context.rebalance_lock_manager
        self.stats = context.stats
        self.flow_control = context.flow_control
        self.put_service = context.put_service
        self.schedule_message_service = context.schedule_message_service
        self.message_request_mode_manager = context.message_request_mode_manager
        self.topic_route_info_manager = context.topic_route_info_manager
        self.namesrv_client = RemotingClient(
            RemotingClientConfig(use_tls=tls.broker_client_uses_tls, tls=tls), name="broker-outer"
        )
        self.outer_api = BrokerOuterAPI(self.namesrv_client)
        if config.namesrv_addrs:  # QUERY_ASSIGNMENT divides the cluster's queues, as routed
            self.topic_route_info_manager.fetch = lambda topic: (
                self.outer_api.get_topic_route_info_from_name_server(self.config.namesrv_addrs, topic)
            )

        self.send_executor = RequestExecutor(
            ExecutorName.SEND,
            workers=config.send_message_thread_pool_nums,
            capacity=config.send_thread_pool_queue_capacity,
            # Under sustained overload the queue fills to waitTimeMillsInSendQueue, every send
            # waits that long and most are cleaned anyway: refuse at arrival ([OVERLOAD]) a send
            # that would wait longer than that, which Java would answer TIMEOUT_CLEAN_QUEUE later.
            shed_after_ms=self._send_shed_after_ms,
            pause_reading_ms=lambda: self.config.overload_pause_read_mills,
        )
        self.pull_executor = RequestExecutor(
            ExecutorName.PULL,
            workers=config.pull_message_thread_pool_nums,
            capacity=config.pull_thread_pool_queue_capacity,
        )
        self.query_executor = RequestExecutor(
            ExecutorName.QUERY,
            workers=config.query_message_thread_pool_nums,
            capacity=config.query_thread_pool_queue_capacity,
        )
        self.admin_executor = RequestExecutor(
            ExecutorName.ADMIN, workers=config.admin_broker_thread_pool_nums, capacity=10_000
        )
        self.heartbeat_executor = RequestExecutor(
            ExecutorName.HEARTBEAT,
            workers=config.heartbeat_thread_pool_nums,
            capacity=config.heartbeat_thread_pool_queue_capacity,
        )
        self.client_manage_executor = RequestExecutor(
            ExecutorName.CLIENT_MANAGE,
            workers=config.client_manage_thread_pool_nums,
            capacity=config.client_manager_thread_pool_queue_capacity,
        )
        self.consumer_manage_executor = RequestExecutor(
            ExecutorName.CONSUMER_MANAGE,
            workers=config.consumer_manage_thread_pool_nums,
            capacity=config.consumer_manager_thread_pool_queue_capacity,
        )
        self.end_transaction_executor = RequestExecutor(
            ExecutorName.END_TRANSACTION,
            workers=config.end_transaction_thread_pool_nums,
            capacity=config.end_transaction_pool_queue_capacity,
        )
        self.load_balance_executor = RequestExecutor(
            ExecutorName.LOAD_BALANCE,
            workers=config.load_balance_processor_thread_pool_nums,
            capacity=config.load_balance_thread_pool_queue_capacity,
        )
        # 5.x: POP's ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (Java ackMessageExecutor)
        self.ack_executor = RequestExecutor(
            ExecutorName.ACK,
            workers=config.ack_message_thread_pool_nums,
            capacity=config.ack_thread_pool_queue_capacity,
        )
        self.transactions = TransactionalMessageService(context)
        self.ha_service = HAService(self.store, bind_address=config.bind_address, port=0)
        self.slave_synchronize = SlaveSynchronize(context, self.namesrv_client, lambda: self.broker_addr)

        self.pull_hold_service = PullRequestHoldService(
            max_offset=self.store.get_max_offset_in_queue,
            # late-bound: the pull processor is built next, around this service
            wakeup=lambda ctx, request, held_ms: self.pull_processor.execute_request_when_wakeup(  # noqa: PLW0108
                ctx, request, held_ms
            ),
            long_polling_enable=config.long_polling_enable,
            short_polling_time_mills=config.short_polling_time_mills,
        )
        self.send_processor = SendMessageProcessor(context)
        self.pull_processor = PullMessageProcessor(context, self.pull_hold_service, self.pull_executor)
        self.query_processor = QueryMessageProcessor(context)
        self.client_manage_processor = ClientManageProcessor(context)
        self.consumer_manage_processor = ConsumerManageProcessor(context)
        self.admin_processor = AdminBrokerProcessor(context)
        self.end_transaction_processor = EndTransactionProcessor(context, self.transactions)
        self.recall_processor = RecallMessageProcessor(context)
        # 5.3: ACL 2.0 (broker/auth.py): the users and ACLs, and the AUTH_* requests editing them
        auth = build_auth(config, store_config.store_path_root_dir / "config")
        self.auth_manager: AuthMetadataManager | None = auth[0] if auth is not None else None
        self.auth_checker: AuthChecker | None = auth[1] if auth is not None else None
        context.auth = self.auth_manager
        self.auth_processor = AuthAdminProcessor(context)
        self.query_assignment_processor = QueryAssignmentProcessor(context)
        # 5.x: POP (pop, peek, notification and polling info on the pull executor, as Java)
        self.pop_processors = (
            PopMessageProcessor(context, self.pull_executor),
            AckMessageProcessor(context),
            ChangeInvisibleTimeProcessor(context),
            PeekMessageProcessor(context),
            NotificationProcessor(context, self.pull_executor),
            PollingInfoProcessor(context),
        )
        executors = {
            executor.name: executor
            for executor in (
                self.send_executor,
                self.pull_executor,
                self.query_executor,
                self.admin_executor,
                self.heartbeat_executor,
                self.client_manage_executor,
                self.consumer_manage_executor,
                self.end_transaction_executor,
                self.load_balance_executor,
                self.ack_executor,
            )
        }
        for processor in (
            self.send_processor,
            self.pull_processor,
            self.query_processor,
            self.client_manage_processor,
            self.consumer_manage_processor,
            self.admin_processor,
            self.end_transaction_processor,
            self.recall_processor,
            self.auth_processor,
            self.query_assignment_processor,
            *self.pop_processors,
        ):
            self.server.dispatcher.register_processor(processor, executors)
            # Java's VIP channel serves every processor but the pull processor's
            self.fast_server.dispatcher.register_processor(processor, executors, skip={ExecutorName.PULL})
        # Java initialAcl: the ACL check is an RPC hook run before every request, on both servers
        self.acl = context.acl = PlainAccessValidator.from_config(config) if config.acl_enable else None
        for server in (self.server, self.fast_server):
            # Java: codes without a processor go to the admin processor, which answers "not supported".
            server.dispatcher.register_default(self.admin_processor, self.admin_executor)
            server.dispatcher.on_overload = lambda executor, request: self.flow_control.record(
                overload_kind(executor.name)
            )
            server.dispatcher.on_reject = lambda request: self.flow_control.record("REJECTREQUEST")
            if self.acl is not None:
                server.dispatcher.before_request = self.acl.check
            elif self.auth_checker is not None and self.auth_checker.enabled:
                server.dispatcher.before_request = self.auth_checker.check

        self.fast_failure = BrokerFastFailure(
            counters=self.flow_control,
            is_page_cache_busy=self.store.is_os_page_cache_busy,
            enabled=lambda: self.config.broker_fast_failure_enable,
            send_executor=self.send_executor,
            watched=[
                (self.send_executor, lambda: self.config.wait_time_mills_in_send_queue),
                (self.pull_executor, lambda: self.config.wait_time_mills_in_pull_queue),
                (self.heartbeat_executor, lambda: self.config.wait_time_mills_in_heartbeat_queue),
                (self.end_transaction_executor, lambda: self.config.wait_time_mills_in_transaction_queue),
                (self.ack_executor, lambda: self.config.wait_time_mills_in_ack_queue),  # 5.x
            ],
        )

        # metricsExporterType=PROM: GET /metrics; OTLP_GRPC: the same figures pushed to a
        # collector (docs/metrics.md); ``metrics_collectors`` add figures of others in the
        # process (the embedded name server's) to the same endpoint or export
        self.metrics: BrokerMetrics | None = None
        self.metrics_server: MetricsHttpServer | None = None
        self.metrics_exporter: OtlpMetricsExporter | None = None
        self.metrics_collectors: list[Callable[[Exposition], None]] = []
        if config.metrics_exporter_type in (MetricsExporterType.PROM, MetricsExporterType.OTLP_GRPC):
            self.metrics = BrokerMetrics(self)
        if config.metrics_exporter_type is MetricsExporterType.OTLP_GRPC:
            # raises OtlpUnavailableError, saying what to install, without the otlp extra
            self.metrics_exporter = OtlpMetricsExporter(
                self.collect_metrics,
                target=config.metrics_grpc_exporter_target,
                headers=config.metrics_grpc_exporter_header,
                timeout_ms=config.metric_grpc_exporter_time_out_in_mills,
                interval_ms=config.metric_grpc_exporter_interval_in_mills,
            )

        self._tasks = BackgroundTasks("broker")  # one-off work (registrations, notifications)
        self._periodic = BackgroundTasks("broker-periodic")  # stopped first at close
        self._register_pending = False
        self._register_task: asyncio.Task[Any] | None = None
        self._started = False
        self._closed = False

    # -- facts that change at run time: kept once, in the processors' context -----------------

    @property
    def config(self) -> BrokerConfig:
        return self.context.config

    @property
    def broker_permission(self) -> int:
        return self.context.broker_permission

    @property
    def broker_addr(self) -> str:
        return self.context.broker_addr

    @property
    def store_host(self) -> bytes:
        return self.context.store_host

    @property
    def config_data_version(self) -> DataVersion:
        return self.context.config_data_version

    def _send_shed_after_ms(self) -> int:
        if not self.config.broker_fast_failure_enable:
            return 1 << 30
        return self.config.wait_time_mills_in_send_queue

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        began = time.monotonic()
        await asyncio.to_thread(self._load)
        pull_arrival, pop_arrival = self.pull_hold_service.arrival_listener, self.context.pop.arrival_listener

        def arriving(*args: Any) -> None:  # Java NotifyMessageArrivingListener: pulls, then pops (5.x)
            pull_arrival(*args)
            pop_arrival(*args)

        self.store.register_message_arriving_listener(arriving)
        self.store.start()
        timer = self.context.timer_message_store
        if timer is not None and self.store.config.broker_role is not BrokerRole.SLAVE:
            timer.start(should_running_dequeue=True)  # a slave's timer is not run (docs/timer.md)
        self.put_service.start()
        await self.server.start()
        try:
            await self.fast_server.start()
        except OSError as exc:  # Java would not start; the VIP channel is a side door, so warn
            log.warning(
                "VIP channel port %d (listenPort - 2) unavailable, Java slaves cannot sync from this "
                "broker and Java clients with vipChannelEnabled cannot reach it: %s",
                self.fast_server.config.listen_port,
                exc,
            )
        port = self.server.port
        self.context.broker_addr = f"{self.config.broker_ip1}:{port}"
        self.context.store_host = pack_host(self.config.broker_ip1, port)
        # Java: haListenPort is listenPort + 1 (an ephemeral port when the broker's is)
        self.ha_service.port = port + 1 if self.config.listen_port else 0
        await self.ha_service.start()
        self.pull_hold_service.start()
        self.context.pop.start()  # 5.x
        is_slave = self.store.config.broker_role is BrokerRole.SLAVE
        if not is_slave:  # Java: a slave's delay levels are the master's to deliver
            self.schedule_message_service.start()
        self.fast_failure.start()
        await self._start_metrics()
        every = self._periodic.every
        every(
            lambda: self.config.register_period_ms,
            self.register_broker_all,
            "register",
            self.config.register_period_ms,
        )
        interval = self.config.flush_consumer_offset_interval
        every(interval, self.consumer_offset_manager.persist, "offsets", interval)
        every(1000, self._persist_dirty_state, "persist", 1000)
        interval = self.config.load_balance_poll_name_server_interval
        every(interval, self.topic_route_info_manager.update_all, "assignment-routes", 1000)
        every(_CLIENT_SCAN_INTERVAL * 1000, self._scan_clients, "client-scan", _CLIENT_SCAN_INTERVAL * 1000)
        every(1000, self._sample_stats, "stats", 1000)
        if self.acl is not None:
            every(WATCH_INTERVAL_MS, self.acl.watch, "acl-watch", WATCH_INTERVAL_MS)
        if is_slave:
            every(10_000, self.slave_synchronize.sync_all, "slave-sync", 3000)
        else:  # Java: the master checks transactions
            every(
                lambda: self.config.transaction_check_interval,
                self.transactions.check,
                "transaction-check",
                self.config.transaction_check_interval,
            )
        await self.register_broker_all()
        log.info(
            "broker %s (%s) started at %s in %.0f ms, name servers %s",
            self.config.broker_name,
            self.config.broker_cluster_name,
            self.broker_addr,
            (time.monotonic() - began) * 1000,
            self.config.namesrv_addrs or "none",
        )

    async def _start_metrics(self) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        metrics.install()
        if self.metrics_exporter is not None:
            self.metrics_exporter.start()
            return
        config = self.config
        self.metrics_server = MetricsHttpServer(
            config.metrics_prom_exporter_host or config.bind_address,
            config.metrics_prom_exporter_port,
            self.render_metrics,
            content_type=CONTENT_TYPE,
            name="broker metrics",
        )
        await self.metrics_server.start()

    def collect_metrics(self, out: Exposition) -> None:
        """Write the broker's figures and those of ``metrics_collectors`` to ``out``."""
        if self.metrics is not None:
            self.metrics.write(out)
        for collect in self.metrics_collectors:
            collect(out)

    def render_metrics(self) -> bytes:
        """The ``/metrics`` body: the broker's figures and those of ``metrics_collectors``."""
        out = Exposition()
        self.collect_metrics(out)
        return out.render()

    def _load(self) -> None:
        if self.acl is not None:
            self.acl.load()
        if self.auth_manager is not None:
            load_auth(self.auth_manager, self.config)
        self.topic_config_manager.load()
        self.subscription_group_manager.load()
        self.consumer_offset_manager.load()
        self.message_request_mode_manager.load()
        self.schedule_message_service.load()
        self.context.pop.load()  # 5.x: consumerOrderInfo.json
        self.store.load()
        if self.context.timer_message_store is not None:
            self.context.timer_message_store.load()
        self.topic_config_manager.rebuild_from_consume_queues(self.store.config.consume_queue_dir)
        managers = (self.topic_config_manager, self.subscription_group_manager, self.consumer_offset_manager)
        for manager in managers:
            if manager.has_unwritten_changes:  # rebuilt topics, or defaults after a corrupt file
                manager.persist_blocking()
        for problem in self.store.recovery_report:
            log.warning("store recovery: %s", problem)
        self.schedule_message_service.note_recovered_queues()

    async def close(self) -> None:
        """Stop serving and persist everything (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._periodic.close()
        if self._started and self.config.namesrv_addrs:
            await self.outer_api.unregister_broker_all(
                self.config.namesrv_addrs,
                cluster_name=self.config.broker_cluster_name,
                broker_addr=self.broker_addr,
                broker_name=self.config.broker_name,
                broker_id=self.config.broker_id,
            )
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self.metrics_exporter is not None:
            await self.metrics_exporter.close()  # a last export, as Java's PeriodicMetricReader
        await self.fast_server.close()
        await self.server.close()
        await self.ha_service.close()
        await self.pull_hold_service.close()
        if self._started:
            await self.context.pop.close()  # 5.x: writes the check points it buffers
        await self.schedule_message_service.close()
        await self.fast_failure.close()
        await self._tasks.close()
        await asyncio.to_thread(self._shutdown_blocking)
        await self.namesrv_client.close()
        log.info("broker %s stopped", self.config.broker_name)

    def _shutdown_blocking(self) -> None:
        self.put_service.close()
        if self.context.timer_message_store is not None:
            self.context.timer_message_store.shutdown()
        if self._started:
            self.store.shutdown()
            for manager in (
                self.consumer_offset_manager,
                self.topic_config_manager,
                self.subscription_group_manager,
                self.message_request_mode_manager,
                self.schedule_message_service.offsets,
            ):
                manager.persist_blocking()

    # -- background work --------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run a fire-and-forget coroutine that ``close()`` will cancel; failures are logged
        (once the broker is closing, ``BackgroundTasks`` drops it before it starts)."""
        return self._tasks.spawn(coro, name)

    async def _persist_dirty_state(self) -> None:
        await self.topic_config_manager.persist_if_dirty()
        await self.subscription_group_manager.persist_if_dirty()
        await self.message_request_mode_manager.persist_if_dirty()
        await self.schedule_message_service.offsets.persist_if_dirty()

    def _scan_clients(self) -> None:
        now = int(time.time() * 1000)
        expired = self.config.channel_expired_timeout
        for channel in self.consumer_manager.scan_not_active_channel(
            now, expired
        ) + self.producer_manager.scan_not_active_channel(now, expired):
            if channel.is_open:
                log.info("closing %s: no heartbeat for %d ms", channel.remote_addr, expired)
                channel.close()

    def _sample_stats(self) -> None:
        if self.context.timer_deliveries is not None:
            self.context.timer_deliveries.drain_into(self.stats)
        self.stats.sample()

    def forget_channel(self, conn: Channel) -> None:
        """A client's connection is gone: drop it from groups and its held pulls."""
        groups = self.consumer_manager.do_channel_close_event(conn)
        self.producer_manager.do_channel_close_event(conn)
        held = self.pull_hold_service.drop_channel(conn) + self.context.pop.drop_channel(conn)
        if groups or held:
            log.info("client %s left (groups %s, %d held pulls dropped)", conn.remote_addr, groups, held)

    # -- name servers -----------------------------------------------------------------------

    def schedule_register(self) -> None:
        """Re-register soon (topics changed); several changes in a row cost one registration."""
        if self._register_pending or not self._started or self._closed:
            return
        self._register_pending = True

        async def register_soon() -> None:
            await asyncio.sleep(0)
            self._register_pending = False
            await self.register_broker_all()

        self._register_task = self.spawn(register_soon(), "register-now")

    async def wait_registered(self) -> None:
        """Wait until the name servers know the topics as they are now (Java registers before
        answering the request that created a topic, so a route query right after finds it)."""
        task = self._register_task
        if task is not None and not task.done():
            await asyncio.shield(task)

    async def register_broker_all(self) -> None:
        addrs = self.config.namesrv_addrs
        if not addrs:
            return
        wrapper = self.topic_config_manager.wrapper()
        if not (
            PermName.is_writeable(self.broker_permission) and PermName.is_readable(self.broker_permission)
        ):
            wrapper = TopicConfigSerializeWrapper(
                topic_config_table={
                    name: replace(tc, perm=tc.perm & self.broker_permission)
                    for name, tc in wrapper.topic_config_table.items()
                },
                data_version=wrapper.data_version,
            )
        results = await self.outer_api.register_broker_all(
            addrs,
            cluster_name=self.config.broker_cluster_name,
            broker_addr=self.broker_addr,
            broker_name=self.config.broker_name,
            broker_id=self.config.broker_id,
            ha_server_addr=self.ha_server_addr,
            topic_config_wrapper=wrapper,
            timeout_millis=self.config.register_broker_timeout_mills,
            compressed=self.config.compressed_register,
        )
        answer = next((r for r in results.values() if r is not None), None)
        if answer is not None and self.store.config.broker_role is BrokerRole.SLAVE:
            if not self.store.config.ha_master_address:  # Java: updateMasterHAServerAddrPeriodically
                self.ha_service.update_master_address(answer.ha_server_addr)
            self.slave_synchronize.master_addr = answer.master_addr

    @property
    def ha_server_addr(self) -> str:
        """Where slaves reach this broker's HA port (brokerIP2, listenPort + 1)."""
        return f"{self.config.broker_ip2 or self.config.broker_ip1}:{self.ha_service.port}"

    # -- configuration ----------------------------------------------------------------------

    async def update_config(self, properties: Mapping[str, str]) -> dict[str, str]:
        """UPDATE_BROKER_CONFIG: apply broker and store settings now; returns unknown keys.

        Raises ``ValueError`` (naming the key and value) for a bad value; nothing changes then.
        """
        broker_config, rest = config_from_properties(self.config, properties)
        store_config, unknown = config_from_properties(self.store.config, rest)
        self.context.config = broker_config
        self.context.broker_permission = broker_config.broker_permission
        self.store.update_runtime_config(store_config)
        self.pull_hold_service.long_polling_enable = broker_config.long_polling_enable
        self.pull_hold_service.short_polling_time_mills = broker_config.short_polling_time_mills
        self.rebalance_lock_manager.lock_max_live_time = broker_config.rebalance_lock_max_live_time / 1000
        self.context.config_data_version = self.config_data_version.next_version()
        log.info("broker config updated: %s", dict(properties))
        if self.config_file is not None:
            async with self._config_write_lock:  # one write at a time, each of the latest settings
                merged = {
                    **self._extra_properties,
                    **config_to_properties(self.store.config),
                    **config_to_properties(self.config),
                }
                data = format_properties(merged).encode()
                await asyncio.to_thread(write_atomically, self.config_file, data)
        if "brokerPermission" in properties:
            self.schedule_register()
        return unknown

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: Java's keys (AdminBrokerProcessor.prepareRuntimeInfo and the
        store's runtime info, in Java's value formats) plus finchmq's flow-control counters."""
        store = self.store
        stats = self.stats
        now = time.monotonic()
        config = store.config

        def head_wait_ms(executor: RequestExecutor) -> str:
            oldest = executor.oldest()
            return str(int((now - oldest.created_at) * 1000) if oldest is not None else 0)

        uptime = int(time.time() - stats.boot_timestamp / 1000)
        days, rest = divmod(uptime, 86_400)
        hours, rest = divmod(rest, 3_600)
        minutes, seconds = divmod(rest, 60)
        commit_log_ratio = store.disk_used_ratio(config.commit_log_dir)
        disk = shutil.disk_usage(config.store_path_root_dir)
        puts = max(stats.put.times, 1)
        info = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(int(MQVersion.V4_9_8)),
            "bootTimestamp": str(stats.boot_timestamp),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.put_today_morning),
            "msgPutTotalTodayNow": str(stats.put.times),
            "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.get_today_morning),
            "msgGetTotalTodayNow": str(stats.get.times),
            "putTps": stats.java_tps(1),
            "getTransferedTps": stats.java_tps(2),
            "putMessageTimesTotal": str(stats.put.times),
            "putMessageSizeTotal": str(stats.put.total),
            "putMessageAverageSize": java_double(stats.put.total / puts),
            "sendThreadPoolQueueSize": str(len(self.send_executor)),
            "sendThreadPoolQueueCapacity": str(self.send_executor.capacity),
            "sendThreadPoolQueueHeadWaitTimeMills": head_wait_ms(self.send_executor),
            "pullThreadPoolQueueSize": str(len(self.pull_executor)),
            "pullThreadPoolQueueCapacity": str(self.pull_executor.capacity),
            "pullThreadPoolQueueHeadWaitTimeMills": head_wait_ms(self.pull_executor),
            "queryThreadPoolQueueSize": str(len(self.query_executor)),
            "queryThreadPoolQueueCapacity": str(self.query_executor.capacity),
            "queryThreadPoolQueueHeadWaitTimeMills": head_wait_ms(self.query_executor),
            "ackThreadPoolQueueSize": str(len(self.ack_executor)),  # 5.x
            "ackThreadPoolQueueCapacity": str(self.ack_executor.capacity),
            "ackThreadPoolQueueHeadWaitTimeMills": head_wait_ms(self.ack_executor),
            "EndTransactionQueueSize": "0",  # no transactions yet: nothing ever waits there
            "EndTransactionThreadPoolQueueCapacity": "100000",
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": str(store.lock_time_mills()),
            "earliestMessageTimeStamp": str(max(store.get_earliest_message_time(), 0)),
            "startAcceptSendRequestTimeStamp": str(self.config.start_accept_send_request_time_stamp),
            "remainTransientStoreBufferNumbs": str(store.remain_transient_store_buffer_numbs()),
            "remainHowManyDataToFlush": java_human_bytes(store.remain_how_many_data_to_flush()),
            "commitLogDiskRatio": java_double(commit_log_ratio),
            f"commitLogDiskRatio_{config.commit_log_dir}": java_double(commit_log_ratio),
            "consumeQueueDiskRatio": java_double(store.disk_used_ratio(config.consume_queue_dir)),
            "commitLogDirCapacity": (
                f"Total : {java_human_bytes(disk.total)}, Free : {java_human_bytes(disk.free)}."
            ),
            "commitLogMinOffset": str(store.get_min_phy_offset()),
            "commitLogMaxOffset": str(store.get_max_phy_offset()),
            "putMessageFailedTimes": str(stats.put_failed),
            "heldPullRequests": str(self.pull_hold_service.held_count),
            "pid": str(os.getpid()),
        }
        for level, delivered in self.schedule_message_service.offset_table().items():  # levels in use
            max_offset = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            info[f"scheduleMessageOffset_{level}"] = f"{delivered},{max_offset}"
        for kind, count in sorted(self.flow_control.snapshot().items()):
            info[f"flowControl.{kind}"] = str(count)
        info.update(self.context.pop.runtime_info())  # 5.x: finchmq's pop figures
        # half messages given up after transactionCheckMax checks (moved to TRANS_CHECK_MAX_TIME_TOPIC)
        info["transactionCheckMaxDiscarded"] = str(self.transactions.discarded)
        info.update(timer_runtime_info(self.context.timer_message_store))
        return info
