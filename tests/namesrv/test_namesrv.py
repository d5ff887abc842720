"""The name server over real sockets, driven by a RemotingClient as a broker and a client would."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from finchmq.namesrv import NamesrvConfig, NamesrvController
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from finchmq.remoting import RemotingClient
from tests.waiting import eventually


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    controller = NamesrvController(
        NamesrvConfig(listen_port=0, bind_address="127.0.0.1", kv_config_path=tmp_path / "kvConfig.json")
    )
    await controller.start()
    yield controller
    await controller.close()


def register_request(
    *, compressed: bool = False, crc: bool = True, topics: tuple[str, ...] = ("TopicTest",)
) -> RemotingCommand:
    body = RegisterBrokerBody(
        topic_config_serialize_wrapper=TopicConfigSerializeWrapper(
            topic_config_table={
                t: TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4, perm=6) for t in topics
            },
            data_version=DataVersion(timestamp=1, counter=1),
        )
    ).encode(compress=compressed)
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": "127.0.0.1:10911",
        "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912",
        "brokerId": "0",
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF) if crc else "0",
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


async def test_unknown_topic_is_topic_not_exist(namesrv: NamesrvController) -> None:
    async with RemotingClient() as client:
        response = await client.invoke(
            namesrv.address,
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}),
            3000,
        )
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark is not None and response.remark.startswith(
        "No topic route info in name server for the topic: Nope"
    )
    assert response.body == b""


@pytest.mark.parametrize("compressed", [False, True])
async def test_register_then_route(namesrv: NamesrvController, compressed: bool) -> None:
    async with RemotingClient() as client:
        registered = await client.invoke(namesrv.address, register_request(compressed=compressed), 3000)
        assert registered.code == ResponseCode.SUCCESS
        response = await client.invoke(
            namesrv.address,
            RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}),
            3000,
        )
        route = TopicRouteData.from_json(response.body)
        assert response.code == ResponseCode.SUCCESS
        assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [("broker-a", 4, 6)]
        assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
        assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in response.body  # standard JSON for every client
        cluster = ClusterInfo.from_json(
            (
                await client.invoke(
                    namesrv.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000
                )
            ).body
        )
        assert cluster.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
        topics = TopicList.from_json(
            (
                await client.invoke(
                    namesrv.address,
                    RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
                    3000,
                )
            ).body
        )
        assert topics.topic_list == ("TopicTest",)


async def test_bad_crc_is_refused(namesrv: NamesrvController) -> None:
    request = register_request()
    request.ext_fields["bodyCrc32"] = "12345"
    async with RemotingClient() as client:
        response = await client.invoke(namesrv.address, request, 3000)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert namesrv.routes.pickup_topic_route_data("TopicTest") is None


async def test_broker_connection_close_removes_its_routes(namesrv: NamesrvController) -> None:
    broker = RemotingClient()
    await broker.invoke(namesrv.address, register_request(), 3000)
    assert namesrv.routes.pickup_topic_route_data("TopicTest") is not None
    await broker.close()
    await eventually(
        lambda: namesrv.routes.pickup_topic_route_data("TopicTest") is None,
        what="the closed broker's routes removed",
    )


async def test_unregister_and_delete_topic(namesrv: NamesrvController) -> None:
    async with RemotingClient() as client:
        await client.invoke(namesrv.address, register_request(topics=("A", "B")), 3000)
        await client.invoke(
            namesrv.address,
            RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "A"}),
            3000,
        )
        assert namesrv.routes.pickup_topic_route_data("A") is None
        assert namesrv.routes.pickup_topic_route_data("B") is not None
        unregister = {
            "brokerName": "broker-a",
            "brokerAddr": "127.0.0.1:10911",
            "clusterName": "DefaultCluster",
            "brokerId": "0",
        }
        response = await client.invoke(
            namesrv.address, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, unregister), 3000
        )
        assert response.code == ResponseCode.SUCCESS
        assert namesrv.routes.pickup_topic_route_data("B") is None


async def test_kv_config_round_trip_and_persistence(tmp_path: Path) -> None:
    path = tmp_path / "kv" / "kvConfig.json"
    config = NamesrvConfig(
        listen_port=0, bind_address="127.0.0.1", kv_config_path=path, order_message_enable=True
    )
    async with NamesrvController(config) as namesrv, RemotingClient() as client:
        put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"}
        assert (
            await client.invoke(
                namesrv.address, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, put), 3000
            )
        ).code == 0
        get = await client.invoke(
            namesrv.address,
            RemotingCommand.request(
                RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest"}
            ),
            3000,
        )
        assert get.ext_fields == {"value": "broker-a:4"}
        missing = await client.invoke(
            namesrv.address,
            RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "X", "key": "Y"}),
            3000,
        )
        assert missing.code == ResponseCode.QUERY_NOT_FOUND
        # The broker learns the order config on registration; routes carry it (orderMessageEnable).
        registered = await client.invoke(namesrv.address, register_request(), 3000)
        assert KVTable.from_json(registered.body).table == {"TopicTest": "broker-a:4"}
        route = TopicRouteData.from_json(
            (
                await client.invoke(
                    namesrv.address,
                    RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}),
                    3000,
                )
            ).body
        )
        assert route.order_topic_conf == "broker-a:4"
    assert path.exists()
    async with NamesrvController(config) as restarted:
        assert restarted.kv.get("ORDER_TOPIC_CONFIG", "TopicTest") == "broker-a:4"


async def test_missing_required_header_field_is_a_clear_error(namesrv: NamesrvController) -> None:
    async with RemotingClient() as client:
        response = await client.invoke(
            namesrv.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 3000
        )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "topic" in response.remark
