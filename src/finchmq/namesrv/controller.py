"""``NamesrvController``: a name server process's parts, wired and run.

Owns the remoting server, the route table and the KV config. A broker's routes disappear when
its connection closes, goes idle, or it has not registered for ``broker_channel_expired_time``
(checked every ``scan_not_active_broker_interval``), as Java's BrokerHousekeepingService and
``scanNotActiveBroker`` do.
"""

from __future__ import annotations

import logging
import time

from finchmq.common.lifecycle import AsyncService
from finchmq.common.metrics import CONTENT_TYPE, Exposition, MetricsExporterType
from finchmq.common.tasks import BackgroundTasks
from finchmq.remoting import (
    Channel,
    ChannelGoneListener,
    ExecutorName,
    RemotingServer,
    RemotingServerConfig,
    RequestExecutor,
    TlsConfig,
)
from finchmq.remoting.http import MetricsHttpServer

from .config import NamesrvConfig
from .kvconfig import KVConfigManager
from .metrics import NamesrvMetrics
from .processor import DefaultRequestProcessor
from .route_info import RouteInfoManager

__all__ = ["NamesrvController"]

log = logging.getLogger(__name__)


class NamesrvController(AsyncService):
    """A running name server: ``await start()``, ``await close()``, or ``async with``."""

    def __init__(self, config: NamesrvConfig | None = None, *, tls: TlsConfig | None = None) -> None:
        """``tls``: the ``tls.*`` settings (Java's system properties); None = Java's defaults
        (permissive, test mode)."""
        self.config = config or NamesrvConfig()
        self.tls = tls or TlsConfig()
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(self.config.kv_config_path)
        self.processor = DefaultRequestProcessor(self.config, self.routes, self.kv)
        self.server = RemotingServer(
            RemotingServerConfig(
                bind_address=self.config.bind_address,
                listen_port=self.config.listen_port,
                server_channel_max_idle_time_seconds=self.config.server_channel_max_idle_time_seconds,
                tls=self.tls,
            ),
            listener=ChannelGoneListener(self._broker_channel_gone),  # Java BrokerHousekeepingService
            name="namesrv",
        )
        executor = RequestExecutor(
            ExecutorName.NAMESRV, workers=self.config.server_worker_threads, capacity=10_000
        )
        self.server.register_processor(self.processor, {ExecutorName.NAMESRV: executor})
        self._tasks = BackgroundTasks("namesrv")
        self.metrics: NamesrvMetrics | None = None
        self.metrics_server: MetricsHttpServer | None = None
        if self.config.metrics_exporter_type is MetricsExporterType.PROM:
            self.enable_metrics()

    def enable_metrics(self) -> NamesrvMetrics:
        """Time requests and keep figures (served on the configured port with PROM, or added
        by the caller to another endpoint, as ``finchmq server`` adds them to the broker's)."""
        if self.metrics is None:
            self.metrics = NamesrvMetrics(self.routes, self.server.dispatcher, lambda: self.address)
            self.metrics.install()
        return self.metrics

    def render_metrics(self) -> bytes:
        out = Exposition()
        if self.metrics is not None:
            self.metrics.write(out)
        return out.render()

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        host = self.config.bind_address
        return f"{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{self.port}"

    async def start(self) -> None:
        self.kv.load()
        await self.server.start()
        config = self.config
        if config.metrics_exporter_type is MetricsExporterType.PROM:
            self.metrics_server = MetricsHttpServer(
                config.metrics_prom_exporter_host or config.bind_address,
                config.metrics_prom_exporter_port,
                self.render_metrics,
                content_type=CONTENT_TYPE,
                name="name server metrics",
            )
            try:
                await self.metrics_server.start()
            except OSError:
                await self.server.close()
                raise
        self._tasks.every(
            self.config.scan_not_active_broker_interval,
            self._scan,
            "scan",
            self.config.scan_not_active_broker_interval,
        )
        log.info("name server started on %s", self.address)

    def _scan(self) -> None:
        for addr, channel in self.routes.scan_not_active_broker(
            int(time.time() * 1000), self.config.broker_channel_expired_time
        ):
            if channel is not None:
                channel.close()
            log.info("scan removed inactive broker %s", addr)

    def _broker_channel_gone(self, conn: Channel) -> None:
        addr = self.routes.on_channel_destroy(conn)
        if addr is not None:
            log.info("broker %s removed: its connection %s closed", addr, conn.remote_addr)

    async def close(self) -> None:
        await self._tasks.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        await self.server.close()
