"""Cluster mode (Java's proxy "cluster" mode): ``finchmq proxy`` in front of ``finchmq server
--brokers 2`` (real processes), and the server's own gRPC port, which fronts all its brokers when
it runs more than one. A 5.x client sees one endpoint: routes list both brokers' queues behind it,
and what the client does reaches the broker each call is for."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from grpclib.client import Channel, UnaryUnaryMethod

from finchmq.client import AdminClient, NoRouteError
from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.testing.cluster import free_port_pair
from finchmq.testing.process import free_port
from tests.client.conftest import TEST_BROKER
from tests.waiting import eventually, wait_until

from .conftest import SdkProcess, produce, push, simple

BROKERS = {"broker-a", "broker-b"}


@dataclass
class Servers:
    namesrv: str
    server_grpc: str  # the server's own gRPC endpoint (cluster mode: it runs 2 brokers)
    proxy: str  # ``finchmq proxy``'s endpoint


class _Process:
    """A ``finchmq`` command as a child process, its output in a file."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "finchmq.cli", *args], stdout=out, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def seen() -> bool:
            match = re.search(pattern, self.output())
            if match is not None:
                found.append(match)
                return True
            assert self.proc.poll() is None, self.output()
            return False

        wait_until(seen, what=f"{pattern!r} in {self.log.name}")
        return found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """``finchmq server --brokers 2`` and a ``finchmq proxy`` in front of its name server."""
    data = tmp_path_factory.mktemp("cluster")
    conf = data / "small.conf"  # broker-b inherits it: small files, not 1.4 GiB per broker
    conf.write_text("".join(f"{k}={v}\n" for k, v in TEST_BROKER.items()))
    ns_port, grpc_port = free_port(), free_port()
    server = _Process(
        data / "server.out", "server", "--data-dir", str(data), "--bind", "127.0.0.1",
        "--broker-ip", "127.0.0.1", "--namesrv-port", str(ns_port), "--broker-port", str(free_port_pair()),
        "--brokers", "2", "--metrics-port", "0", "--console-port", "0", "--grpc-port", str(grpc_port),
        "-c", str(conf),
    )  # fmt: skip
    proxy: _Process | None = None
    try:
        server.wait_for("ready in")
        assert "(cluster mode: every broker behind it)" in server.output()
        namesrv = f"127.0.0.1:{ns_port}"
        proxy = _Process(
            data / "proxy.out", "proxy", "--namesrv", namesrv, "--grpc-port", "0", "--bind", "127.0.0.1"
        )
        endpoint = proxy.wait_for(r"at (127\.0\.0\.1:\d+) in front of").group(1)
        yield Servers(namesrv, f"127.0.0.1:{grpc_port}", endpoint)
    finally:
        if proxy is not None:
            proxy.stop()
            assert "finchmq proxy shutting down" in proxy.output()
        server.stop()


def create_topic(namesrv: str, topic: str, queues: int = 2) -> None:
    """``topic`` with ``queues`` queues on both brokers, once the name server routes it to both."""

    async def create() -> None:
        async with AdminClient(namesrv_addr=namesrv) as admin:
            await admin.create_topic(
                topic, cluster="DefaultCluster", read_queue_nums=queues, write_queue_nums=queues
            )

            async def on_both() -> bool:
                try:
                    return len((await admin.topic_route(topic)).queue_datas) == 2
                except NoRouteError:
                    return False

            await eventually(on_both, what=f"the route of {topic} to both brokers")

    asyncio.run(create())


def query_route(endpoint: str, topic: str) -> spb.QueryRouteResponse:
    """A QueryRoute call with grpclib, as a client of ``endpoint`` asks it."""
    host, port = endpoint.rsplit(":", 1)

    async def call() -> spb.QueryRouteResponse:
        channel = Channel(host, int(port))
        try:
            method = UnaryUnaryMethod(
                channel,
                "/apache.rocketmq.v2.MessagingService/QueryRoute",
                spb.QueryRouteRequest,
                spb.QueryRouteResponse,
            )
            request = spb.QueryRouteRequest(
                topic=pb.Resource(name=topic),
                endpoints=pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))]),
            )
            metadata = {"x-mq-client-id": "cluster-test", "x-mq-language": "PYTHON"}
            return await method(request, metadata=metadata, timeout=10)
        finally:
            channel.close()

    return asyncio.run(call())


@pytest.mark.parametrize("which", ["proxy", "server_grpc"])
def test_query_route_lists_both_brokers_behind_the_one_endpoint(servers: Servers, which: str) -> None:
    topic = f"ClusterRoute_{which}"
    create_topic(servers.namesrv, topic, queues=2)
    endpoint = getattr(servers, which)
    response = query_route(endpoint, topic)
    assert response.status.code == pb.OK, response.status
    queues = [(q.broker.name, q.id) for q in response.message_queues]
    assert sorted(queues) == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    for queue in response.message_queues:
        assert queue.permission == pb.READ_WRITE
        assert [f"{a.host}:{a.port}" for a in queue.broker.endpoints.addresses] == [endpoint]


def test_an_unknown_topic_is_topic_not_found(servers: Servers) -> None:
    response = query_route(servers.proxy, "NoSuchTopicHere")
    assert response.status.code == pb.TOPIC_NOT_FOUND, response.status


def test_the_sdk_route_driver_through_the_proxy(servers: Servers, sdk: Callable[..., SdkProcess]) -> None:
    topic = "ClusterSdkRoute"
    create_topic(servers.namesrv, topic, queues=2)
    process = sdk("route", "--endpoints", servers.proxy, "--topic", topic)
    records = process.finish(timeout=60)
    assert not process.errors(), records
    (route,) = process.of("route")
    assert {q["broker"] for q in route} == BROKERS
    assert {e for q in route for e in q["endpoints"]} == {servers.proxy}
    assert records[-1] == {"done": 1}


def test_a_consumer_heartbeats_every_broker_through_the_proxy(
    servers: Servers, sdk: Callable[..., SdkProcess]
) -> None:
    """The proxy registers a 5.x client with every master (each broker must know its consumers),
    each over a connection of its own (the brokers list 5.x clients one by one)."""
    topic, group = "ClusterHeartbeat", "cluster-heartbeat-group"
    create_topic(servers.namesrv, topic)
    consumer = push(sdk, servers.proxy, topic, group)  # runs until stopped
    try:
        consumer.wait_for(lambda records: any("started" in r for r in records))

        async def on_both_brokers() -> bool:
            async with AdminClient(namesrv_addr=servers.namesrv) as admin:
                masters = await admin.master_addrs()
                assert set(masters) == BROKERS
                for addr in masters.values():
                    try:
                        connection = await admin.consumer_connection(group, addr)
                    except Exception:
                        return False
                    if len(connection.connection_set) != 1:
                        return False
                return True

        asyncio.run(eventually(on_both_brokers, what=f"{group} online at both brokers"))
    finally:
        consumer.stop()


def test_produce_and_consume_through_the_proxy_use_both_brokers(
    servers: Servers, sdk: Callable[..., SdkProcess]
) -> None:
    """Needs the producer and consumer RPCs: N messages sent with the SDK through the proxy land on
    both brokers, and an SDK SimpleConsumer through the proxy receives every one."""
    topic, group, count = "ClusterProduceConsume", "cluster-simple-group", 40
    create_topic(servers.namesrv, topic, queues=2)
    sent = produce(sdk, servers.proxy, topic, count)
    assert len(sent) == count

    async def per_broker() -> dict[str, int]:
        async with AdminClient(namesrv_addr=servers.namesrv) as admin:
            table = (await admin.topic_status(topic)).offset_table
        totals: dict[str, int] = {}
        for queue, offsets in table.items():
            totals[queue.broker_name] = totals.get(queue.broker_name, 0) + offsets.max_offset
        return totals

    totals = asyncio.run(per_broker())
    assert set(totals) == BROKERS and all(totals.values()), totals
    assert sum(totals.values()) == count

    consumer = simple(sdk, servers.proxy, topic, group, expect=count, max_seconds=90)
    records = consumer.finish(timeout=120)
    assert not consumer.errors(), records[-5:]
    received = {r["message_id"] for r in consumer.of("received")}
    assert received == {r["message_id"] for r in sent}
