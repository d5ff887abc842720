"""Namespaces in ``AdminClient``, ``finchmq admin --namespace`` and the low-level ``PullConsumer``:
the names given are ``ns%name`` on the broker, system topics stay as they are."""

from __future__ import annotations

import time

import pytest

from finchmq.cli.__main__ import main
from finchmq.client import AdminClient, Message, NoRouteError, Producer, PullConsumer
from finchmq.client.results import PullStatus
from finchmq.client.sync import BlockingProducer, BlockingPullConsumer
from finchmq.protocol.bodies import SubscriptionGroupConfig
from finchmq.protocol.topics import AUTO_CREATE_TOPIC_KEY_TOPIC
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually, wait_until

from .conftest import FAST_CLIENT, pull_all

NS = "t1"


def _instance() -> str:
    return f"ns-admin-{time.monotonic_ns()}"


def test_cli_namespace_creates_the_topic_a_namespaced_producer_and_pull_consumer_use(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    namesrv = server.namesrv_addr
    code = main(
        ["admin", "updateTopic", "-t", name, "-c", "DefaultCluster", "--namespace", NS, "-n", namesrv]
    )
    assert code == 0, capsys.readouterr().err

    with BlockingPullConsumer(
        f"cg_{name}", namesrv_addr=namesrv, instance_name=_instance(), namespace=NS
    ) as consumer:
        assert consumer.consumer.config.consumer_group == f"{NS}%cg_{name}"
        queues = wait_until(lambda: _queues(consumer, name), what=f"the name server routes {NS}%{name}")
        assert {q.topic for q in queues} == {name}
        capsys.readouterr()
        assert main(["admin", "topicList", "-n", namesrv]) == 0
        assert f"{NS}%{name}" in capsys.readouterr().out.split()  # the broker's name
        with BlockingProducer(
            f"pg_{name}", namesrv_addr=namesrv, instance_name=_instance(), namespace=NS
        ) as producer:
            sent = producer.send(Message.create(name, b"hello"))
        pulled = [m for mq in queues for m in consumer.pull(mq, "*", 0, 32).msg_found_list]
        assert [(m.topic, m.body, m.msg_id) for m in pulled] == [(name, b"hello", sent.offset_msg_id)]


def _queues(consumer: BlockingPullConsumer, topic: str) -> object:
    try:
        return consumer.fetch_subscribe_message_queues(topic)
    except NoRouteError:
        return None


async def test_admin_client_wraps_topics_and_groups_but_not_system_topics(
    server: EmbeddedServer, name: str
) -> None:
    namesrv = server.namesrv_addr
    async with (
        AdminClient(namesrv_addr=namesrv, instance_name=_instance(), namespace=NS) as admin,
        AdminClient(namesrv_addr=namesrv, instance_name=_instance()) as plain,
    ):
        await admin.create_topic(name, read_queue_nums=2, write_queue_nums=2)
        full = f"{NS}%{name}"
        route = await eventually(lambda: _route(plain, full), what=f"the name server routes {full}")
        assert [q.read_queue_nums for q in route.queue_datas] == [2]
        assert name not in await plain.topic_list()
        assert full in await admin.topic_list()  # results name what the broker stores
        assert (await admin.topic_route(name)).queue_datas == route.queue_datas
        assert (await admin.topic_route(full)).queue_datas == route.queue_datas  # already wrapped
        # a system topic is not wrapped: its route is found though no t1%TBW102 exists
        assert (await admin.topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC)).queue_datas

        group = f"g_{name}"
        await admin.create_subscription_group(
            SubscriptionGroupConfig(group_name=group), broker_addr=server.broker_addr
        )
        stored = await plain.examine_subscription_group_config(server.broker_addr, f"{NS}%{group}")
        assert stored is not None and stored.group_name == f"{NS}%{group}"
        assert await plain.examine_subscription_group_config(server.broker_addr, group) is None
        assert await admin.examine_subscription_group_config(server.broker_addr, group) == stored
        await admin.delete_subscription_group(group, broker_addr=server.broker_addr)
        assert await plain.examine_subscription_group_config(server.broker_addr, f"{NS}%{group}") is None

        await admin.delete_topic(name)
        with pytest.raises(NoRouteError):
            await plain.topic_route(full)


async def _route(admin: AdminClient, topic: str) -> object:
    try:
        return await admin.topic_route(topic)
    except NoRouteError:
        return None


async def test_pull_consumer_offsets_and_queues_in_a_namespace(server: EmbeddedServer, name: str) -> None:
    namesrv = server.namesrv_addr
    full = f"{NS}%{name}"
    async with AdminClient(namesrv_addr=namesrv, instance_name=_instance(), namespace=NS) as admin:
        await admin.create_topic(name, read_queue_nums=1, write_queue_nums=1)
        await eventually(lambda: _route(admin, name), what=f"the name server routes {full}")
    async with Producer(f"pg_{name}", namesrv_addr=namesrv, instance_name=_instance(), namespace=NS) as p:
        for i in range(3):
            await p.send(Message.create(name, f"m{i}".encode()))
    assert [m.body for m in await pull_all(namesrv, full, 3)] == [b"m0", b"m1", b"m2"]

    group = f"cg_{name}"
    async with PullConsumer(
        group, namesrv_addr=namesrv, instance_name=_instance(), namespace=NS, **FAST_CLIENT
    ) as consumer:
        [mq] = await consumer.fetch_subscribe_message_queues(name)
        assert mq.topic == name
        assert (await consumer.min_offset(mq), await consumer.max_offset(mq)) == (0, 3)
        result = await consumer.pull_block_if_not_found(mq, "*", 1, 32)
        assert result.pull_status is PullStatus.FOUND
        assert [(m.topic, m.body) for m in result.msg_found_list] == [(name, b"m1"), (name, b"m2")]
        consumer.update_consume_offset(mq, 2)
        await consumer.persist_consumer_offset()
        assert await consumer.fetch_consume_offset(mq, True) == 2
    # on the broker: group t1%cg_..., topic t1%...
    async with PullConsumer(f"{NS}%{group}", namesrv_addr=namesrv, instance_name=_instance()) as plain:
        [full_mq] = await plain.fetch_subscribe_message_queues(full)
        assert full_mq.topic == full
        assert await plain.fetch_consume_offset(full_mq, True) == 2
