"""Name server settings with RocketMQ's names (``NamesrvConfig``) and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from finchmq.common.metrics import MetricsExporterType

__all__ = ["NamesrvConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NamesrvConfig:
    listen_port: int = 9876
    bind_address: str = "0.0.0.0"
    kv_config_path: Path = Path.home() / "namesrv" / "kvConfig.json"
    order_message_enable: bool = False  # route answers carry ORDER_TOPIC_CONFIG when true
    cluster_test: bool = False
    scan_not_active_broker_interval: int = 10_000  # ms between liveness scans (Java: 10 s)
    broker_channel_expired_time: int = 120_000  # ms without a registration before removal
    server_channel_max_idle_time_seconds: float = 120  # s
    server_worker_threads: int = 8  # request executor coroutines
    # finchmq's own (Java's name server has no metrics): PROM serves GET /metrics on this port
    # (docs/metrics.md); 5558, beside the broker's 5557; an empty host means bind_address
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5558  # 0 = any free port

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port must be in 0..65535, got {self.listen_port!r}")
        if self.metrics_exporter_type not in (MetricsExporterType.DISABLE, MetricsExporterType.PROM):
            raise ValueError(
                f"metrics_exporter_type {self.metrics_exporter_type.name} is not supported: use PROM"
            )
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise ValueError(
                f"metrics_prom_exporter_port must be in 0..65535, got {self.metrics_prom_exporter_port!r}"
            )
        for name in (
            "scan_not_active_broker_interval",
            "broker_channel_expired_time",
            "server_worker_threads",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
