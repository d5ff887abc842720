"""The broker's Prometheus endpoint (metricsExporterType=PROM): scraped over a real socket while a
client sends and consumes; the exposition parsed strictly (prometheus_client's text parser)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from pathlib import Path

import pytest

from finchmq.broker import BrokerConfig
from finchmq.common import SettingsError, config_from_properties
from finchmq.protocol import RequestCode, ResponseCode
from finchmq.protocol.headers import UpdateConsumerOffsetRequestHeader
from finchmq.testing import EmbeddedServer
from tests.scrape import Samples, eventually, http, read_answer, scrape, value
from tests.waiting import DEFAULT_TIMEOUT

from .conftest import Broker

PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}


async def commit(broker: Broker, group: str, topic: str, queue_id: int, offset: int) -> None:
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
    )
    response = await broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
    assert response.code == ResponseCode.SUCCESS, response.remark


def metrics_port(broker: Broker) -> int:
    controller = broker.server.broker
    assert controller is not None and controller.metrics_server is not None
    return controller.metrics_server.port


@pytest.mark.broker_conf(PROM)
async def test_counters_and_lag_move_while_sending_and_consuming(broker: Broker) -> None:
    port = metrics_port(broker)
    topic, group = "T_metrics", "G_metrics"
    bodies = [b"x" * (100 + i) for i in range(10)]
    for body in bodies:
        assert (await broker.send(topic, body, queue_id=0)).code == ResponseCode.SUCCESS
    assert (await broker.heartbeat("c1@host", group, {topic: "*"})).code == ResponseCode.SUCCESS
    await commit(broker, group, topic, 0, 0)  # the group has consumed nothing yet

    samples = await scrape(port)
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    labels = {**common, "topic": topic, "message_type": "normal", "is_system": "false"}
    assert value(samples, "rocketmq_messages_in_total", **labels) == 10
    assert value(samples, "rocketmq_throughput_in_total", **labels) >= sum(map(len, bodies))
    assert value(samples, "rocketmq_message_size_count", **labels) == 10
    assert value(samples, "rocketmq_message_size_bucket", **labels, le="1024") == 10
    send_latency = {"request_code": "send_message_v2", "response_code": "success", "result": "success"}
    assert value(samples, "rocketmq_rpc_latency_count", **send_latency) >= 10
    assert value(samples, "rocketmq_rpc_latency_bucket", **send_latency, le="+Inf") >= 10
    lag = {"consumer_group": group, "topic": topic, "is_retry": "false"}
    assert value(samples, "rocketmq_consumer_lag_messages", **lag) == 10  # nothing consumed yet
    assert value(samples, "rocketmq_consumer_lag_latency", **lag) >= 0
    assert value(samples, "rocketmq_consumer_connections", consumer_group=group, consume_mode="push") == 1
    assert value(samples, "finchmq_store_put_latency_seconds_count", **common) >= 10
    assert value(samples, "rocketmq_producer_offset", topic=topic) == 10

    response, messages = await broker.pull(topic, 0, 0, group=group)  # pulled, not yet committed
    assert response.code == ResponseCode.SUCCESS and len(messages) == 10
    samples = await scrape(port)
    assert value(samples, "rocketmq_consumer_inflight_messages", **lag) == 10
    assert value(samples, "rocketmq_consumer_ready_messages", **lag) == 0
    out = {"topic": topic, "consumer_group": group}
    assert value(samples, "rocketmq_messages_out_total", **out) == 10
    assert value(samples, "rocketmq_throughput_out_total", **out) > sum(map(len, bodies))

    await commit(broker, group, topic, 0, 10)
    samples = await eventually(lambda s: value(s, "rocketmq_consumer_lag_messages", **lag) == 0, port)
    assert value(samples, "rocketmq_consumer_inflight_messages", **lag) == 0
    diff = {"group": group, "topic": topic, "msgModel": "1", "countOfOnlineConsumers": "1"}
    assert value(samples, "rocketmq_group_diff", **diff) == 0
    assert value(samples, "rocketmq_consumer_offset", group=group, topic=topic) == 10

    # the broker's own TPS figures catch up within their sampling period
    samples = await eventually(lambda s: value(s, "rocketmq_producer_tps", topic=topic) > 0, port)
    assert value(samples, "rocketmq_brokeruntime_msg_put_total_today_now") >= 10


@pytest.mark.broker_conf({**PROM, "longPollingEnable": "true"})
async def test_long_polling_holds_are_counted_and_timed(broker: Broker) -> None:
    port = metrics_port(broker)
    topic = "T_hold"
    assert (await broker.send(topic, b"first", queue_id=0)).code == ResponseCode.SUCCESS
    held = asyncio.ensure_future(broker.pull(topic, 0, 1, suspend_ms=20_000, timeout=30_000))
    await eventually(lambda s: value(s, "finchmq_pull_held_requests") == 1, port)
    assert (await broker.send(topic, b"second", queue_id=0)).code == ResponseCode.SUCCESS
    response, messages = await held
    assert response.code == ResponseCode.SUCCESS and [m.body for m in messages] == [b"second"]
    samples = await eventually(lambda s: value(s, "finchmq_pull_held_requests") == 0, port)
    assert value(samples, "finchmq_pull_holds_total") == 1
    assert value(samples, "finchmq_pull_hold_wakeups_total", reason="arrival") == 1
    long_poll = {"request_code": "pull_message", "is_long_polling": "true", "response_code": "success"}
    assert value(samples, "rocketmq_rpc_latency_count", **long_poll) == 1


@pytest.mark.broker_conf(
    {
        **PROM,
        "injectPutDelayMillis": "50",
        "sendThreadPoolQueueCapacity": "10",
        "brokerFastFailureEnable": "false",
        "osPageCacheBusyTimeOutMills": "60000",  # a put slowed by a loaded machine: no REJECTREQUEST
    }
)
async def test_flow_control_is_counted_by_kind(broker: Broker) -> None:
    port = metrics_port(broker)
    before = await scrape(port)
    assert (
        value(before, "finchmq_flow_control_total", kind="OVERLOAD", queue="send") == 0
    )  # shown before it happens
    responses = await asyncio.gather(*(broker.send("T_flood", b"x", queue_id=0) for _ in range(60)))
    refused = sum(1 for r in responses if r.code == ResponseCode.SYSTEM_BUSY)
    assert refused > 0
    samples = await scrape(port)
    assert value(samples, "finchmq_flow_control_total", kind="OVERLOAD", queue="send") == refused


@pytest.mark.broker_conf({**PROM, "metricsLabel": "region:eu,env:test"})
async def test_the_endpoint_speaks_http_and_survives_bad_clients(broker: Broker) -> None:
    port = metrics_port(broker)
    status, _, body = await http(port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 404 and b"/metrics" in body
    status, headers, _ = await http(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    status, _, _ = await http(port, b"garbage\r\n\r\n")
    assert status == 400
    status, _, _ = await http(port, b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
    assert status == 400

    # A silent client and a half-sent request hold no one up.
    _, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    idle_writer.write(b"GET /metr")
    await idle_writer.drain()

    # HEAD answers the length without the body; keep-alive serves several requests on one connection.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    status, headers, _ = await read_answer(reader, head_only=True)
    assert status == 200 and int(headers["content-length"]) > 0 and headers["connection"] == "keep-alive"
    for _ in range(2):
        writer.write(b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, body = await read_answer(reader)
        assert status == 200 and b'region="eu",env="test"' in body
    writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")  # HTTP/1.0 without keep-alive: answered, then closed
    status, headers, _ = await read_answer(reader)
    assert status == 200 and headers["connection"] == "close"
    assert await asyncio.wait_for(reader.read(), DEFAULT_TIMEOUT) == b""
    writer.close()

    assert (await broker.send("T_http", b"still serving")).code == ResponseCode.SUCCESS
    samples = await scrape(port)
    assert value(samples, "rocketmq_messages_in_total", topic="T_http", region="eu") == 1
    idle_writer.close()


def test_metrics_settings_are_validated_with_the_key_in_the_message() -> None:
    base = BrokerConfig()
    assert base.metrics_exporter_type.name == "DISABLE" and base.metrics_prom_exporter_port == 5557  # Java's
    for props, words in (
        ({"metricsPromExporterPort": "70000"}, "metricsPromExporterPort"),
        ({"metricsPromExporterPort": "x"}, "metricsPromExporterPort"),
        ({"metricsExporterType": "LOG"}, "use PROM"),
        ({"metricsExporterType": "OTLP_GRPC"}, "metricsGrpcExporterTarget"),
        ({"metricsExporterType": "GRAPHITE"}, "metricsExporterType"),
        ({"metricsLabel": "no-colon"}, "metricsLabel"),
    ):
        with pytest.raises(SettingsError, match=words):
            config_from_properties(base, props)
    config, unknown = config_from_properties(base, {"metricsExporterType": "prom", "metricsLabel": "a:1,b:2"})
    assert (
        not unknown
        and config.metrics_exporter_type.name == "PROM"
        and config.metrics_labels == {"a": "1", "b": "2"}
    )


def test_a_taken_port_stops_start_up_with_the_address_in_the_message(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = EmbeddedServer(
            tmp_path, {**PROM, "metricsPromExporterPort": str(port), "metricsPromExporterHost": "127.0.0.1"}
        )
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            server.start()
        server.stop()


def test_metrics_are_off_by_default(finchmq_server: EmbeddedServer) -> None:
    assert finchmq_server.broker is not None and finchmq_server.broker.metrics_server is None
    assert finchmq_server.broker.store.latency is None  # nothing measured per put


def labels_of(samples: Samples, name: str) -> list[Mapping[str, str]]:
    return [labels for labels, _ in samples.get(name, [])]


@pytest.mark.broker_conf(PROM)
async def test_java_and_exporter_label_names(broker: Broker) -> None:
    port = metrics_port(broker)
    assert (await broker.send("T_labels", b"x", queue_id=0)).code == ResponseCode.SUCCESS
    assert (await broker.heartbeat("c1@host", "G_labels", {"T_labels": "*"})).code == ResponseCode.SUCCESS
    await commit(broker, "G_labels", "T_labels", 0, 0)
    samples = await eventually(lambda s: labels_of(s, "rocketmq_producer_tps"), port)
    java = ("cluster", "node_type", "node_id")
    assert set(labels_of(samples, "rocketmq_messages_in_total")[0]) == {
        *java,
        "topic",
        "message_type",
        "is_system",
    }
    assert set(labels_of(samples, "rocketmq_consumer_lag_messages")[0]) == {
        *java,
        "topic",
        "consumer_group",
        "is_retry",
        "is_system",
    }
    assert set(labels_of(samples, "rocketmq_rpc_latency_count")[0]) == {
        *java,
        "protocol_type",
        "request_code",
        "response_code",
        "is_long_polling",
        "result",
    }
    assert set(labels_of(samples, "rocketmq_processor_watermark")[0]) == {*java, "processor"}
    assert set(labels_of(samples, "rocketmq_producer_tps")[0]) == {"cluster", "broker", "topic"}
    assert set(labels_of(samples, "rocketmq_group_diff")[0]) == {
        "group",
        "topic",
        "countOfOnlineConsumers",
        "msgModel",
    }
    assert set(labels_of(samples, "rocketmq_broker_tps")[0]) == {"cluster", "brokerIP", "broker"}
    assert set(labels_of(samples, "rocketmq_brokeruntime_msg_put_total_today_now")[0]) == {
        "cluster",
        "brokerIP",
        "brokerHost",
        "des",
        "boottime",
        "broker_version",
    }
    assert value(samples, "finchmq_store_disk_max_used_ratio") == 0.75
