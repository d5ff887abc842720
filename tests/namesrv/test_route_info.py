"""RouteInfoManager as pure state transitions."""

from __future__ import annotations

from finchmq.namesrv import RouteInfoManager
from finchmq.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper


def wrapper(*topics: tuple[str, int], counter: int = 1) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={
            name: TopicConfig(topic_name=name, read_queue_nums=n, write_queue_nums=n, perm=6)
            for name, n in topics
        },
        data_version=DataVersion(timestamp=1, counter=counter),
    )


def register(routes: RouteInfoManager, name: str, addr: str, broker_id: int = 0, **kw: object) -> object:
    return routes.register_broker(
        cluster_name=kw.get("cluster", "DefaultCluster"),  # type: ignore[arg-type]
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace("10911", "10912"),
        topic_config_wrapper=kw.get("wrapper", wrapper(("T", 4))),  # type: ignore[arg-type]
        filter_server_list=[],
        channel=kw.get("channel"),  # type: ignore[arg-type]
        now_ms=kw.get("now", 1000),  # type: ignore[arg-type]
    )


def test_master_registration_publishes_routes() -> None:
    routes = RouteInfoManager()
    register(routes, "broker-a", "10.0.0.1:10911")
    register(routes, "broker-b", "10.0.0.2:10911", wrapper=wrapper(("T", 8), ("U", 1)))
    route = routes.pickup_topic_route_data("T")
    assert route is not None
    assert sorted((q.broker_name, q.read_queue_nums) for q in route.queue_datas) == [
        ("broker-a", 4),
        ("broker-b", 8),
    ]
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == {
        "broker-a": {0: "10.0.0.1:10911"},
        "broker-b": {0: "10.0.0.2:10911"},
    }
    assert routes.pickup_topic_route_data("nope") is None
    assert set(routes.get_all_topic_list().topic_list) == {"T", "U"}
    assert routes.get_all_cluster_info().cluster_addr_table == {"DefaultCluster": ("broker-a", "broker-b")}


def test_slave_does_not_publish_queues_and_learns_its_master() -> None:
    routes = RouteInfoManager()
    register(routes, "broker-a", "10.0.0.1:10911")
    result = register(routes, "broker-a", "10.0.0.9:10911", broker_id=1, wrapper=wrapper(("SlaveOnly", 4)))
    assert result.master_addr == "10.0.0.1:10911" and result.ha_server_addr == "10.0.0.1:10912"  # type: ignore[attr-defined]
    assert routes.pickup_topic_route_data("SlaveOnly") is None
    route = routes.pickup_topic_route_data("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {
        0: "10.0.0.1:10911",
        1: "10.0.0.9:10911",
    }


def test_unchanged_data_version_does_not_rebuild_queues() -> None:
    routes = RouteInfoManager()
    register(routes, "broker-a", "10.0.0.1:10911", wrapper=wrapper(("T", 4), counter=1))
    routes.delete_topic("T")
    register(routes, "broker-a", "10.0.0.1:10911", wrapper=wrapper(("T", 4), counter=1))
    assert routes.pickup_topic_route_data("T") is None  # same version: no rebuild (as Java)
    register(routes, "broker-a", "10.0.0.1:10911", wrapper=wrapper(("T", 4), counter=2))
    assert routes.pickup_topic_route_data("T") is not None


def test_unregister_removes_broker_and_orphan_topics() -> None:
    routes = RouteInfoManager()
    register(routes, "broker-a", "10.0.0.1:10911", wrapper=wrapper(("T", 4), ("OnlyA", 2)))
    register(routes, "broker-b", "10.0.0.2:10911", wrapper=wrapper(("T", 4)))
    routes.unregister_broker(
        cluster_name="DefaultCluster", broker_addr="10.0.0.1:10911", broker_name="broker-a", broker_id=0
    )
    assert routes.pickup_topic_route_data("OnlyA") is None
    route = routes.pickup_topic_route_data("T")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert routes.get_all_cluster_info().cluster_addr_table == {"DefaultCluster": ("broker-b",)}


def test_channel_close_and_expiry_remove_brokers() -> None:
    routes = RouteInfoManager()
    channel_a, channel_b = object(), object()
    register(routes, "broker-a", "10.0.0.1:10911", channel=channel_a, now=1000)
    register(routes, "broker-b", "10.0.0.2:10911", channel=channel_b, now=50_000)
    assert routes.on_channel_destroy(channel_a) == "10.0.0.1:10911"
    assert routes.on_channel_destroy(object()) is None
    route = routes.pickup_topic_route_data("T")
    assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert routes.scan_not_active_broker(now_ms=50_000 + 119_000, expired_ms=120_000) == []
    assert routes.scan_not_active_broker(now_ms=50_000 + 121_000, expired_ms=120_000) == [
        ("10.0.0.2:10911", channel_b)
    ]
    assert routes.pickup_topic_route_data("T") is None
    assert routes.get_all_cluster_info().broker_addr_table == {}
