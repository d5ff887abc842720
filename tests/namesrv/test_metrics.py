"""The name server's Prometheus endpoint: request latency by code and the route table's figures,
scraped over a real socket after a broker registered and a client asked for a route."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from finchmq.common.metrics import MetricsExporterType
from finchmq.namesrv import NamesrvConfig, NamesrvController
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.remoting import RemotingClient
from tests.scrape import http, scrape, value

from .test_namesrv import register_request


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    controller = NamesrvController(
        NamesrvConfig(
            listen_port=0,
            bind_address="127.0.0.1",
            kv_config_path=tmp_path / "kvConfig.json",
            metrics_exporter_type=MetricsExporterType.PROM,
            metrics_prom_exporter_port=0,
        )
    )
    await controller.start()
    yield controller
    await controller.close()


async def test_requests_and_routes_are_counted(namesrv: NamesrvController) -> None:
    assert namesrv.metrics_server is not None
    port = namesrv.metrics_server.port
    before = await scrape(port)
    assert value(before, "finchmq_namesrv_live_brokers") == 0
    async with RemotingClient() as client:
        registered = await client.invoke(namesrv.address, register_request(topics=("T1", "T2")), 5000)
        assert registered.code == ResponseCode.SUCCESS
        for _ in range(3):
            route = await client.invoke(
                namesrv.address,
                RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}),
                5000,
            )
            assert route.code == ResponseCode.SUCCESS
        missing = await client.invoke(
            namesrv.address,
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "nope"}),
            5000,
        )
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        samples = await scrape(port)  # while the broker's connection is open
        node = {"node_type": "nameserver", "node_id": namesrv.address}
        assert value(samples, "finchmq_namesrv_live_brokers", **node) == 1
        assert value(samples, "finchmq_namesrv_clusters") == 1
        assert value(samples, "finchmq_namesrv_brokers", cluster="DefaultCluster") == 1
        assert value(samples, "finchmq_namesrv_topics") == 2
        assert (
            value(samples, "finchmq_namesrv_broker_last_update_age_seconds", broker_addr="127.0.0.1:10911")
            >= 0
        )
        route_ok = {"request_code": "get_routeinfo_by_topic", "response_code": "success", **node}
        assert value(samples, "rocketmq_rpc_latency_count", **route_ok) == 3
        assert value(samples, "rocketmq_rpc_latency_bucket", **route_ok, le="3000") == 3
        not_found = {"request_code": "get_routeinfo_by_topic", "response_code": "topic_not_exist"}
        assert value(samples, "rocketmq_rpc_latency_count", **not_found) == 1
        assert value(samples, "rocketmq_rpc_latency_count", request_code="register_broker") == 1
    status, _, _ = await http(port, b"GET / HTTP/1.1\r\n\r\n")
    assert status == 404


async def test_metrics_are_off_unless_asked(tmp_path: Path) -> None:
    controller = NamesrvController(NamesrvConfig(listen_port=0, kv_config_path=tmp_path / "kv.json"))
    assert controller.config.metrics_prom_exporter_port == 5558
    async with controller:
        assert controller.metrics_server is None and controller.metrics is None


def test_a_bad_port_is_refused() -> None:
    with pytest.raises(ValueError, match="metrics_prom_exporter_port"):
        NamesrvConfig(metrics_prom_exporter_port=-1)
