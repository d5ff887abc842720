"""``metricsExporterType=OTLP_GRPC``: the figures of ``/metrics`` pushed to an OpenTelemetry
collector over OTLP/gRPC, as Java 5.x's ``BrokerMetricsManager`` does with its
``OtlpGrpcMetricExporter`` and ``PeriodicMetricReader``.

Strategy:
    One source of truth: every ``metricGrpcExporterIntervalInMills`` the same collectors that
    write the Prometheus page write an ``Exposition`` (on the event loop, where the broker's state
    lives), and each family becomes one OTLP metric: a counter a cumulative monotonic sum, a gauge
    a gauge, a histogram an explicit-bucket histogram with the same bounds. Names are the
    exposition's (Java 5.x's ``rocketmq_*`` where Java has one), attributes are the labels, with
    Java's boolean and integer attributes (``is_system``, ``is_retry``, ``is_long_polling``,
    ``queue_id``) sent typed, and Java's units. The resource is empty and the scope is named
    ``broker-meter``, as in Java. The blocking gRPC export runs on a worker thread.

    The OpenTelemetry SDK and its OTLP gRPC exporter are an optional extra
    (``pip install 'finchmq[otlp]'``); they are imported only when an exporter is made, which
    fails with what to install when they are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .metrics import Exposition, Histogram
from .tasks import BackgroundTasks

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricsData

__all__ = [
    "INSTALL_HINT",
    "OtlpMetricsExporter",
    "OtlpUnavailableError",
    "otlp_endpoint",
    "parse_otlp_headers",
]

log = logging.getLogger("finchmq.metrics.otlp")

INSTALL_HINT = (
    "metricsExporterType=OTLP_GRPC needs the OpenTelemetry SDK and its OTLP gRPC exporter, "
    "which finchmq does not install by default: pip install 'finchmq[otlp]' "
    "(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-grpc)"
)

# Java 5.x attributes that are not strings (AttributesBuilder.put with a boolean or an int)
_BOOL_ATTRIBUTES = frozenset({"is_system", "is_retry", "is_long_polling"})
_INT_ATTRIBUTES = frozenset({"queue_id"})
# Java 5.x instruments' setUnit(...)
_JAVA_UNITS = {
    "rocketmq_rpc_latency": "milliseconds",
    "rocketmq_consumer_lag_latency": "milliseconds",
    "rocketmq_consumer_queueing_latency": "milliseconds",
    "rocketmq_pop_buffer_scan_time_consume": "milliseconds",
    "rocketmq_pop_revive_lag": "milliseconds",
    "rocketmq_pop_revive_latency": "milliseconds",
    "rocketmq_storage_size": "bytes",
    "rocketmq_storage_flush_behind_bytes": "bytes",
    "rocketmq_storage_dispatch_behind_bytes": "bytes",
    "rocketmq_storage_message_reserve_time": "milliseconds",
    "rocketmq_timer_enqueue_latency": "milliseconds",
    "rocketmq_timer_dequeue_latency": "milliseconds",
    "rocketmq_delay_message_latency": "seconds",
}


class OtlpUnavailableError(RuntimeError):
    """The ``otlp`` extra is not installed."""


def parse_otlp_headers(text: str) -> dict[str, str]:
    """``metricsGrpcExporterHeader``: ``key:value,key2:value2`` (Java's form) as gRPC metadata
    (keys in lower case, as gRPC requires). Raises ``ValueError`` on an item that is not one
    ``key:value`` pair (Java skips it with a warning)."""
    headers: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        if len(parts) != 2 or not parts[0].strip():
            raise ValueError(f"metricsGrpcExporterHeader must be 'key:value,key2:value2', got {text!r}")
        headers[parts[0].strip().lower()] = parts[1].strip()
    return headers


def otlp_endpoint(target: str) -> str:
    """``metricsGrpcExporterTarget`` as Java reads it: without a scheme, ``https://`` (TLS)."""
    return target if target.startswith("http") else "https://" + target


def _attribute(key: str, value: str) -> str | bool | int:
    if key in _BOOL_ATTRIBUTES and value in ("true", "false"):
        return value == "true"
    if key in _INT_ATTRIBUTES:
        with contextlib.suppress(ValueError):
            return int(value)
    return value


def _attributes(labels: Mapping[str, str]) -> dict[str, str | bool | int]:
    return {key: _attribute(key, str(value)) for key, value in labels.items()}


def _unit(name: str) -> str:
    unit = _JAVA_UNITS.get(name)
    if unit is not None:
        return unit
    if name.endswith(("_seconds", "_seconds_total")):
        return "seconds"
    return ""


class OtlpMetricsExporter:
    """Pushes what ``collect`` writes to an OTLP/gRPC collector every ``interval_ms``.

    ``start()`` begins the periodic export on the running loop; ``close()`` stops it, exports one
    last time (as Java's ``PeriodicMetricReader.shutdown`` does) and closes the channel. Raises
    ``OtlpUnavailableError`` at construction when the ``otlp`` extra is missing."""

    def __init__(
        self,
        collect: Callable[[Exposition], None],
        *,
        target: str,
        headers: str = "",
        timeout_ms: int = 3000,
        interval_ms: int = 60_000,
        scope: str = "broker-meter",
    ) -> None:
        try:
            # the optional extra, loaded only when OTLP_GRPC is configured
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # noqa: PLC0415
                OTLPMetricExporter,
            )
            from opentelemetry.sdk.metrics import export as sdk_export  # noqa: PLC0415
            from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: PLC0415
        except ImportError as e:
            raise OtlpUnavailableError(f"{INSTALL_HINT}; import failed: {e}") from None
        if not target:
            raise ValueError("metricsExporterType=OTLP_GRPC needs metricsGrpcExporterTarget (host:port)")
        self.collect = collect
        self.endpoint = otlp_endpoint(target)
        self.timeout_ms = timeout_ms
        self.interval_ms = interval_ms
        self._sdk: Any = sdk_export
        self._resource = Resource.get_empty()
        self._scope = InstrumentationScope(scope)
        self._exporter = OTLPMetricExporter(
            endpoint=self.endpoint,
            headers=parse_otlp_headers(headers) or None,
            timeout=timeout_ms / 1000,
        )
        self._start_ns = time.time_ns()
        self._tasks = BackgroundTasks("otlp-metrics")
        self._started = False
        self._failing = False
        self.exports = 0  # successful exports, for status and tests

    def snapshot(self) -> MetricsData:
        """Collect now and convert to the SDK's ``MetricsData`` (call on the collectors' loop)."""
        out = Exposition()
        self.collect(out)
        sdk = self._sdk
        now = time.time_ns()
        start = self._start_ns
        metrics = []
        for family in out.families():
            if not family.samples:
                continue
            data: Any
            if family.kind == "histogram":
                points = []
                for labels, value in family.samples:
                    assert isinstance(value, Histogram)
                    counts = list(value.counts)
                    points.append(
                        sdk.HistogramDataPoint(
                            attributes=_attributes(labels),
                            start_time_unix_nano=start,
                            time_unix_nano=now,
                            count=sum(counts),
                            sum=value.sum,
                            bucket_counts=counts,
                            explicit_bounds=list(value.bounds),
                            min=None,  # not kept: optional in OTLP
                            max=None,
                        )
                    )
                data = sdk.Histogram(
                    data_points=points, aggregation_temporality=sdk.AggregationTemporality.CUMULATIVE
                )
            else:
                points = [
                    sdk.NumberDataPoint(
                        attributes=_attributes(labels),
                        start_time_unix_nano=start,
                        time_unix_nano=now,
                        value=int(value) if isinstance(value, bool) else value,
                    )
                    for labels, value in family.samples
                    if not isinstance(value, Histogram)
                ]
                if family.kind == "counter":
                    data = sdk.Sum(
                        data_points=points,
                        aggregation_temporality=sdk.AggregationTemporality.CUMULATIVE,
                        is_monotonic=True,
                    )
                else:
                    data = sdk.Gauge(data_points=points)
            metrics.append(
                sdk.Metric(name=family.name, description=family.help, unit=_unit(family.name), data=data)
            )
        scope_metrics = sdk.ScopeMetrics(scope=self._scope, metrics=metrics, schema_url="")
        resource_metrics = sdk.ResourceMetrics(
            resource=self._resource, scope_metrics=[scope_metrics], schema_url=""
        )
        result: MetricsData = sdk.MetricsData(resource_metrics=[resource_metrics])
        return result

    async def export_once(self) -> bool:
        """Collect and export now; ``True`` when the collector accepted the batch."""
        data = self.snapshot()
        result = await asyncio.to_thread(self._exporter.export, data, timeout_millis=self.timeout_ms)
        ok = bool(result is self._sdk.MetricExportResult.SUCCESS)
        if ok:
            self.exports += 1
            if self._failing:
                log.info("metrics export to %s works again", self.endpoint)
        elif not self._failing:
            log.warning(
                "metrics export to %s failed (metricsGrpcExporterTarget); retrying every %d ms",
                self.endpoint,
                self.interval_ms,
            )
        self._failing = not ok
        return ok

    def start(self) -> None:
        """Export every ``interval_ms`` from now on (on the running loop); a failed export is
        logged and the next one runs at its time."""
        if not self._started:
            self._started = True
            self._tasks.every(self.interval_ms, self.export_once, "export", initial_delay_ms=self.interval_ms)

    async def close(self) -> None:
        """Stop, export one last time, and close the gRPC channel."""
        if not self._started or self._tasks.closed:
            return
        await self._tasks.close()
        try:
            await self.export_once()
        except Exception:
            log.exception("last metrics export to %s failed", self.endpoint)
        await asyncio.to_thread(self._exporter.shutdown, timeout_millis=self.timeout_ms)
