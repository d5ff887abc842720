"""Cluster mode (Java's proxy "cluster" mode): ``finchmq proxy`` in front of ``finchmq server
--brokers 2`` (real processes), and the server's own gRPC port, which fronts all its brokers when
it runs more than one. A 5.x client sees one endpoint: routes list both brokers' queues behind it,
and what the client does reaches the broker each call is for."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from grpclib.client import Channel, UnaryUnaryMethod

from finchmq.cli.__main__ import main
from finchmq.client import AdminClient, MQBrokerError
from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.grpc.backend import BROKER_NAME_FIELD, BrokerQueues
from finchmq.grpc.cluster import ClusterBackend
from finchmq.grpc.status import GrpcStatusError
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionGroupConfig,
    TopicStatsTable,
)
from finchmq.protocol.headers import GetTopicStatsInfoRequestHeader
from finchmq.testing.cluster import LocalCluster
from tests.client.conftest import TEST_BROKER
from tests.client.conftest import create_topic as client_create_topic
from tests.waiting import eventually, wait_until

from .conftest import SdkProcess, Servers, produce, push, simple

BROKERS = {"broker-a", "broker-b"}


def create_topic(
    namesrv: str, topic: str, queues: int = 2, cluster: str = "DefaultCluster", attributes: str | None = None
) -> None:
    """``topic`` with ``queues`` queues on both brokers, once the name server routes it to both."""
    asyncio.run(
        client_create_topic(namesrv, topic, queues, attributes=attributes, cluster=cluster, brokers=2)
    )


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
    each over a connection of its own (the brokers list 5.x clients one by one); what a broker
    asks of the client on that connection reaches the client's session in the proxy (here
    GET_CONSUMER_RUNNING_INFO, which a 5.x client answers with its refusal)."""
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

        async def running_info_remarks() -> list[str]:
            async with AdminClient(namesrv_addr=servers.namesrv) as admin:
                remarks = []
                for addr in (await admin.master_addrs()).values():
                    (client,) = (await admin.consumer_connection(group, addr)).connection_set
                    with pytest.raises(MQBrokerError) as refused:
                        await admin.instance.api.get_consumer_running_info(
                            addr, group, client.client_id, False, 10_000
                        )
                    remarks.append(str(refused.value))
                return remarks

        remarks = asyncio.run(running_info_remarks())
        assert len(remarks) == 2
        assert all("reports only its thread stacks" in r for r in remarks), remarks
    finally:
        consumer.stop()


def test_the_cluster_backend_routes_configs_and_brokers(servers: Servers) -> None:
    """``ClusterBackend`` itself, against the real processes: routes and configs from the name
    server and a master, requests to the named broker's master, client-wide ones to every master,
    anything else without a broker name refused."""
    topic, group = "ClusterBackendTopic", "cluster-backend-group"
    create_topic(servers.namesrv, topic, queues=3)

    async def scenario() -> None:
        async with AdminClient(namesrv_addr=servers.namesrv) as admin:
            await admin.create_subscription_group(
                SubscriptionGroupConfig(group_name=group, retry_max_times=3), cluster="DefaultCluster"
            )
            masters = await admin.master_addrs()
        relayed: list[RemotingCommand] = []

        async def on_request(request: RemotingCommand) -> RemotingCommand | None:
            relayed.append(request)
            bname = request.ext_fields.get(BROKER_NAME_FIELD)
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"relayed from {bname}")

        backend = ClusterBackend(f"127.0.0.1:1;{servers.namesrv}")  # a dead name server first
        link = backend.link("backend-client", "127.0.0.1:1", on_request)
        try:
            route = await backend.route(topic)
            assert route == [BrokerQueues(name, 3, 3, 6, "127.0.0.1") for name in sorted(BROKERS)], route
            assert await backend.route("NoSuchTopicForTheBackend") is None
            config = await backend.topic_config(topic)
            assert config is not None and config.write_queue_nums == 3
            assert await backend.topic_config("NoSuchTopicForTheBackend") is None
            group_config = await backend.group_config(group)
            assert group_config is not None and group_config.retry_max_times == 3
            assert await backend.group_config("no-such-group-anywhere") is None

            heartbeat = HeartbeatData(
                client_id="backend-client",
                producer_data_set=(ProducerData(group_name="backend-pg"),),
                consumer_data_set=(
                    ConsumerData(
                        group_name=group,
                        consume_type=ConsumeType.CONSUME_ACTIVELY,
                        message_model=MessageModel.CLUSTERING,
                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                    ),
                ),
            )
            request = RemotingCommand.request(RequestCode.HEART_BEAT, body=heartbeat.to_json())
            response = await backend.invoke(link, None, request, 10)
            assert response.code == ResponseCode.SUCCESS, response
            for addr in masters.values():  # one connection per link at every master
                listed = await admin_producers(servers.namesrv, "backend-pg", addr)
                assert listed == ["backend-client"]
                # what the broker asks of the client comes back on the link's connection to it
                with pytest.raises(MQBrokerError) as refused:
                    await admin_running_info(servers.namesrv, group, addr)
                assert "relayed from broker-" in str(refused.value)
            asked = [r for r in relayed if r.code == RequestCode.GET_CONSUMER_RUNNING_INFO]
            assert sorted(r.ext_fields[BROKER_NAME_FIELD] for r in asked) == sorted(BROKERS)
            bad = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"not json")
            assert (await backend.invoke(link, None, bad, 10)).code != ResponseCode.SUCCESS

            stats = RemotingCommand.request(
                RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic=topic).to_ext_fields()
            )
            for name in sorted(BROKERS):
                response = await backend.invoke(link, name, stats, 10)
                assert response.code == ResponseCode.SUCCESS
                table = TopicStatsTable.from_json(response.body).offset_table
                assert {q.broker_name for q in table} == {name}
            with pytest.raises(GrpcStatusError) as unknown:
                await backend.invoke(link, "broker-zz", stats, 10)
            assert unknown.value.code == pb.BAD_REQUEST
            with pytest.raises(GrpcStatusError) as nameless:
                await backend.invoke(link, None, stats, 10)
            assert "names no broker" in nameless.value.message
        finally:
            await link.close()
            await backend.close()

    asyncio.run(scenario())


async def admin_running_info(namesrv: str, group: str, addr: str) -> object:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        return await admin.instance.api.get_consumer_running_info(
            addr, group, "backend-client", False, 10_000
        )


async def admin_producers(namesrv: str, group: str, addr: str) -> list[str]:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        connection = await admin.instance.api.get_producer_connection_list(addr, group, 10_000)
    return [c.client_id for c in connection.connection_set]


def stored_per_broker(namesrv: str, topic: str) -> dict[str, int]:
    """The messages stored in ``topic`` on each broker (the sum of its queues' max offsets)."""

    async def ask() -> dict[str, int]:
        async with AdminClient(namesrv_addr=namesrv) as admin:
            table = (await admin.topic_status(topic)).offset_table
        totals: dict[str, int] = {}
        for queue, offsets in table.items():
            totals[queue.broker_name] = totals.get(queue.broker_name, 0) + offsets.max_offset
        return totals

    return asyncio.run(ask())


def test_transaction_checks_through_the_proxy_reach_the_sdk_and_commit_on_their_broker(
    servers: Servers, sdk: Callable[..., SdkProcess]
) -> None:
    """Half messages on both brokers, left unknown: each broker's CHECK_TRANSACTION_STATE comes
    over the 5.x client's own connection, reaches the SDK's checker, and its commit goes back
    to the broker the check came from (``bname``)."""
    topic, count = "ClusterTransactions", 4
    create_topic(servers.namesrv, topic, queues=1, attributes="+message.type=TRANSACTION")
    checker = sdk(
        "produce", "--endpoints", servers.proxy, "--topic", topic, "--count", str(count), "--type", "tx",
        "--tx-resolution", "unknown", "--checker", "commit", "--stoppable",
    )  # fmt: skip
    try:
        checker.wait_for(lambda records: any("sending_done" in r for r in records))
        assert not checker.errors(), checker.records

        def committed() -> dict[str, int] | None:
            totals = stored_per_broker(servers.namesrv, topic)
            return totals if sum(totals.values()) == count else None

        totals = wait_until(committed, what=f"{count} checked transactions committed")
        assert set(totals) == BROKERS and all(totals.values()), totals
        assert set(checker.of("message_id")) <= set(checker.of("checked"))
    finally:
        checker.stop()


def test_a_simple_consumer_through_the_proxy_receives_from_both_brokers(
    servers: Servers, sdk: Callable[..., SdkProcess]
) -> None:
    """Needs ReceiveMessage/AckMessage: N messages sent through the proxy (on both brokers) are
    all received and acked by an SDK SimpleConsumer through the proxy (one POP per assignment,
    each to its broker)."""
    topic, group, count = "ClusterConsume", "cluster-simple-group", 30
    create_topic(servers.namesrv, topic, queues=2)
    sent = produce(sdk, servers.proxy, topic, count)
    assert set(stored_per_broker(servers.namesrv, topic)) == BROKERS
    consumer = simple(sdk, servers.proxy, topic, group, expect=count, max_seconds=90)
    records = consumer.finish(timeout=120)
    assert not consumer.errors(), records[-5:]
    received = {r["message_id"] for r in consumer.of("received")}
    assert received == {r["message_id"] for r in sent}
    assert len(consumer.of("acked")) == count


def test_finchmq_cluster_runs_a_proxy_in_front_of_its_brokers(tmp_path: Path) -> None:
    """``LocalCluster(grpc_port=)`` (``finchmq cluster --grpc-port``): a ``finchmq proxy`` given
    both name servers routes 5.x clients to both broker groups."""
    with LocalCluster(tmp_path, groups=2, slaves=0, namesrvs=2, conf=TEST_BROKER, grpc_port=0) as cluster:
        assert cluster.proxy is not None
        create_topic(cluster.namesrv_addr, "ClusterOfProcesses", queues=1, cluster="FinchCluster")
        response = query_route(cluster.proxy.addr, "ClusterOfProcesses")
        assert response.status.code == pb.OK, response.status
        assert sorted(q.broker.name for q in response.message_queues) == sorted(BROKERS)


def test_proxy_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["proxy", "--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--namesrv", "--grpc-port", "--bind", "NAMESRV_ADDR", "cluster mode", "5.x"):
        assert option in out


def test_proxy_refuses_a_missing_or_bad_name_server_address(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main(["proxy"]) == 2
    assert "--namesrv HOST:PORT" in capsys.readouterr().err
    assert main(["proxy", "--namesrv", "127.0.0.1:9876;nowhere"]) == 2
    assert "bad address 'nowhere'" in capsys.readouterr().err
