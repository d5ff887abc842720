"""MQClientInstance: one per client id per loop, shared by producers and consumers; heartbeats,
route refresh, offline-broker clean-up, the inner producer; shut down by the last user."""

from __future__ import annotations

import pytest

from finchmq.client import (
    AdminClient,
    ClientStateError,
    ConsumeConcurrentlyStatus,
    Message,
    MessageModel,
    Producer,
    PushConsumer,
)
from finchmq.client.instance import MQClientInstance, ServiceState
from finchmq.protocol.bodies import ConsumeType
from finchmq.protocol.topics import CLIENT_INNER_PRODUCER_GROUP
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_CLIENT, create_topic


async def test_producers_and_consumers_of_a_process_share_one_instance(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    producer = Producer("pg_shared", namesrv_addr=namesrv, **FAST_CLIENT)
    consumer = PushConsumer("cg_shared", namesrv_addr=namesrv, **FAST_CLIENT)
    consumer.subscribe(name)
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    async with producer, consumer:
        instance = producer.instance
        assert consumer.instance is instance, "same ip@pid"
        assert instance.client_id.endswith(f"@{producer.config.instance_name}")
        assert set(instance.producer_table) == {"pg_shared", CLIENT_INNER_PRODUCER_GROUP}
        assert set(instance.consumer_table) == {"cg_shared"}
        await producer.send(Message(name, b"x"))
        assert server.broker is not None
        broker = server.broker
        await eventually(lambda: broker.consumer_manager.get("cg_shared") is not None)
        group = broker.consumer_manager.get("cg_shared")
        assert group is not None and group.consume_type is ConsumeType.CONSUME_PASSIVELY
        assert group.message_model is MessageModel.CLUSTERING
        assert group.find_channel(instance.client_id) is not None
        await eventually(lambda: "pg_shared" in broker.producer_manager.groups)
    assert instance.state is ServiceState.SHUTDOWN_ALREADY, "the last user shut it down"
    await eventually(lambda: broker.consumer_manager.get("cg_shared") is None)


async def test_instances_per_name_and_loop(namesrv: str) -> None:
    a = Producer("pg1", namesrv_addr=namesrv, instance_name="one")
    b = Producer("pg2", namesrv_addr=namesrv, instance_name="two")
    async with a, b:
        assert a.instance is not b.instance
        assert a.instance.client_id != b.instance.client_id
        c = Producer("pg3", namesrv_addr=namesrv, instance_name="one")
        async with c:
            assert c.instance is a.instance
            assert a.instance.state is ServiceState.RUNNING


async def test_routes_refresh_and_offline_brokers_are_forgotten(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    async with Producer("pg", namesrv_addr=namesrv, instance_name="routes", **FAST_CLIENT) as p:
        instance = p.instance
        await p.send(Message(name, b"x"))
        assert name in instance.topic_route_table
        assert "broker-a" in instance.broker_addr_table
        # a broker that no route mentions any more is dropped by the periodic clean-up
        instance.broker_addr_table["ghost"] = {0: "127.0.0.1:1"}
        await eventually(lambda: "ghost" not in instance.broker_addr_table)
        # the route is refreshed periodically: a queue count change is picked up
        await create_topic(namesrv, name, 4)
        await eventually(lambda: len(p._publish_info[name].message_queue_list) == 4)


async def test_find_broker_helpers(namesrv: str, name: str) -> None:
    async with Producer("pg", namesrv_addr=namesrv, instance_name="find") as p:
        sent = await p.send(Message(name, b"x"))
        instance: MQClientInstance = p.instance
        master = instance.find_broker_address_in_publish("broker-a")
        assert master is not None
        found = instance.find_broker_address_in_subscribe("broker-a", 1, only_this_broker=False)
        assert found is not None and found.broker_addr == master and not found.slave
        assert instance.find_broker_address_in_subscribe("broker-a", 1, only_this_broker=True) is None
        admin = instance.find_broker_address_in_admin("broker-a")
        assert admin is not None and admin.broker_addr == master
        assert await instance.max_offset(sent.message_queue) == sent.queue_offset + 1


async def test_an_unreachable_name_server_is_skipped(namesrv: str, name: str) -> None:
    dead = "127.0.0.1:1"
    async with Producer("pg", namesrv_addr=f"{dead};{namesrv}", instance_name="failover") as p:
        for _ in range(3):  # whichever the shuffled list tries first, the live one answers
            assert (await p.send(Message(name, b"x"))).send_status.name == "SEND_OK"
            await p.instance.update_topic_route_info_from_name_server(name)
        assert set(p.instance.api.name_server_address_list) == {dead, namesrv}


async def test_running_info_with_its_jstack(namesrv: str, name: str) -> None:
    consumer = PushConsumer("cg_info", namesrv_addr=namesrv, instance_name="info", **FAST_CLIENT)
    consumer.subscribe(name, "TagA")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    async with consumer:
        info = consumer.instance.consumer_running_info("cg_info")
        assert consumer.instance.consumer_running_info("no-such-group") is None
        await eventually(lambda: len(consumer.rebalance.process_queue_table) > 0)
        async with AdminClient(namesrv_addr=namesrv) as admin:
            dumped = await admin.consumer_running_info("cg_info", consumer.client_id, jstack=True)
    assert dumped.jstack is not None and "finchmq-instance" in dumped.jstack, "asyncio tasks, Java's jstack"
    assert info is not None
    assert info.properties["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    assert info.properties["PROP_CLIENT_VERSION"].startswith("finchmq-")
    assert {(s.topic, s.sub_string) for s in info.subscription_set} >= {(name, "TagA")}


async def test_starting_without_a_name_server_says_so() -> None:
    p = Producer("pg", instance_name="no-namesrv")
    with pytest.raises(ClientStateError, match="no name server address; set namesrv_addr"):
        await p.start()
    async with Producer("pg", namesrv_addr="127.0.0.1:1", instance_name="no-namesrv") as again:
        assert again.instance.state is ServiceState.RUNNING, "a failed start leaves nothing behind"
