"""metricsExporterType=OTLP_GRPC: the broker pushes its figures to a real OTLP/gRPC collector (a
grpcio server in the test, speaking opentelemetry-proto's MetricsService) on loopback; the names,
attributes, values and metadata are read from what the collector received."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from finchmq.broker.metrics import MESSAGE_SIZE_BUCKETS
from finchmq.common.otlp import INSTALL_HINT
from finchmq.protocol import ResponseCode
from finchmq.remoting import RemotingClient
from tests.cli.test_servers import Server
from tests.client.conftest import TEST_BROKER
from tests.waiting import eventually, wait_until

from .conftest import Broker

Point = Any  # NumberDataPoint or HistogramDataPoint


class Collector(metrics_service_pb2_grpc.MetricsServiceServicer):
    """An OTLP metrics receiver: keeps every request with its metadata."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[tuple[metrics_service_pb2.ExportMetricsServiceRequest, dict[str, str]]] = []

    def Export(
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        with self.lock:
            self.received.append((request, {k: str(v) for k, v in context.invocation_metadata()}))
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def latest(self) -> tuple[metrics_service_pb2.ExportMetricsServiceRequest, dict[str, str]] | None:
        with self.lock:
            return self.received[-1] if self.received else None


@pytest.fixture
def collector() -> Iterator[tuple[Collector, int]]:
    servicer = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(grace=None)


def attrs(attributes: Any) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in attributes:
        assert isinstance(kv, KeyValue)
        field = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, field) if field else None
    return out


def metrics_of(request: metrics_service_pb2.ExportMetricsServiceRequest) -> dict[str, metrics_pb2.Metric]:
    (resource_metrics,) = request.resource_metrics
    (scope_metrics,) = resource_metrics.scope_metrics
    assert scope_metrics.scope.name == "broker-meter"  # Java's OPEN_TELEMETRY_METER_NAME
    assert not resource_metrics.resource.attributes  # Java: Resource.empty()
    names = [m.name for m in scope_metrics.metrics]
    assert len(names) == len(set(names)), "a metric is sent twice"
    return {m.name: m for m in scope_metrics.metrics}


def points(metric: metrics_pb2.Metric) -> list[Point]:
    kind = metric.WhichOneof("data")
    assert kind is not None
    return list(getattr(metric, kind).data_points)


def point(metric: metrics_pb2.Metric, **wanted: object) -> Point | None:
    """The one data point whose attributes include ``wanted``."""
    found = [p for p in points(metric) if wanted.items() <= attrs(p.attributes).items()]
    assert len(found) <= 1, found
    return found[0] if found else None


async def test_the_broker_pushes_java_named_metrics_to_a_collector(
    collector: tuple[Collector, int], finchmq_server_factory: Any
) -> None:
    receiver, port = collector
    server = finchmq_server_factory(
        {
            **TEST_BROKER,
            "metricsExporterType": "OTLP_GRPC",
            "metricsGrpcExporterTarget": f"http://127.0.0.1:{port}",
            "metricsGrpcExporterHeader": "authorization:Bearer t0k3n,X-Tenant:finch",
            "metricGrpcExporterIntervalInMills": "200",
            "metricsLabel": "region:eu",
        }
    )
    assert (
        server.broker is not None and server.broker.metrics_server is None
    )  # no Prometheus endpoint: the figures are pushed
    topic = "T_otlp"
    bodies = [b"y" * (200 + i) for i in range(5)]
    async with RemotingClient() as client:
        broker = Broker(server, client)
        for body in bodies:
            assert (await broker.send(topic, body, queue_id=0)).code == ResponseCode.SUCCESS

    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "region": "eu"}
    labels = {**common, "topic": topic, "message_type": "normal", "is_system": False}

    def sent_all() -> tuple[dict[str, metrics_pb2.Metric], dict[str, str]] | None:
        latest = receiver.latest()
        if latest is None:
            return None
        metrics = metrics_of(latest[0])
        messages_in = metrics.get("rocketmq_messages_in_total")
        got = messages_in and point(messages_in, **labels)
        return (metrics, latest[1]) if got and got.as_int == len(bodies) else None

    metrics, metadata = await eventually(sent_all, what="an export with the 5 sends")
    assert metadata["authorization"] == "Bearer t0k3n" and metadata["x-tenant"] == "finch"

    messages_in = metrics["rocketmq_messages_in_total"]
    assert messages_in.sum.is_monotonic
    assert messages_in.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    (p,) = [p for p in points(messages_in) if attrs(p.attributes).get("topic") == topic]
    assert attrs(p.attributes) == labels  # Java's attributes, is_system a boolean as in Java
    assert 0 < p.start_time_unix_nano <= p.time_unix_nano

    throughput = point(metrics["rocketmq_throughput_in_total"], **labels)
    assert throughput is not None and throughput.as_int >= sum(map(len, bodies))

    size = metrics["rocketmq_message_size"]
    assert size.histogram.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    h = point(size, **labels)
    assert h is not None and h.count == len(bodies) and h.sum == sum(map(len, bodies))
    assert list(h.explicit_bounds) == list(MESSAGE_SIZE_BUCKETS)
    assert list(h.bucket_counts) == [len(bodies), 0, 0, 0, 0, 0, 0]  # all <= 1 KiB

    rpc = metrics["rocketmq_rpc_latency"]
    assert rpc.unit == "milliseconds"  # Java's setUnit
    send = point(rpc, request_code="send_message_v2", response_code="success", is_long_polling=False)
    assert send is not None and send.count >= len(bodies)

    topics = point(metrics["rocketmq_topic_number"], **common)
    assert metrics["rocketmq_topic_number"].WhichOneof("data") == "gauge"
    assert topics is not None and topics.as_int >= 1
    assert metrics["rocketmq_messages_in_total"].description == "Total number of incoming messages"


async def test_close_pushes_a_last_export(
    collector: tuple[Collector, int], finchmq_server_factory: Any
) -> None:
    receiver, port = collector
    server = finchmq_server_factory(
        {
            **TEST_BROKER,
            "metricsExporterType": "OTLP_GRPC",
            "metricsGrpcExporterTarget": f"http://127.0.0.1:{port}",
            "metricGrpcExporterIntervalInMills": "3600000",  # never periodically within the test
        }
    )
    async with RemotingClient() as client:
        assert (await Broker(server, client).send("T_last", b"z", queue_id=0)).code == ResponseCode.SUCCESS
    assert receiver.latest() is None
    server.stop()
    latest = receiver.latest()
    assert latest is not None
    messages_in = metrics_of(latest[0])["rocketmq_messages_in_total"]
    last = point(messages_in, topic="T_last")
    assert last is not None and last.as_int == 1


def test_without_the_extra_start_up_says_what_to_install(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "metricsExporterType=OTLP_GRPC\nmetricsGrpcExporterTarget=127.0.0.1:4317\n"
        f"storePathRootDir={tmp_path / 'store'}\nlistenPort=0\n"
    )
    # the interpreter without the OpenTelemetry packages: importing them fails, as when not installed
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from finchmq.cli.__main__ import main\n"
        f"sys.exit(main(['broker', '-c', {str(conf)!r}]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert INSTALL_HINT in result.stderr, result.stderr
    assert "pip install 'finchmq[otlp]'" in result.stderr


def test_finchmq_server_pushes_both_servers_figures(collector: tuple[Collector, int], tmp_path: Path) -> None:
    receiver, port = collector
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "metricsExporterType=OTLP_GRPC\n"
        f"metricsGrpcExporterTarget=http://127.0.0.1:{port}\n"
        "metricGrpcExporterIntervalInMills=200\n"
    )
    server = Server(tmp_path / "data", "-c", str(conf))
    try:
        server.wait_ready()
        assert f"metrics pushed over OTLP to http://127.0.0.1:{port}" in server.output()
        assert "metrics at" not in server.output()  # no Prometheus endpoint (and no default port taken)

        def node_types() -> set[object] | None:
            latest = receiver.latest()
            if latest is None:
                return None
            found = {
                attrs(p.attributes).get("node_type")
                for metric in metrics_of(latest[0]).values()
                for p in points(metric)
            }
            return found if {"broker", "nameserver"} <= found else None

        wait_until(node_types, what="an export with the broker's and the name server's figures")
    finally:
        assert server.stop() == 0
