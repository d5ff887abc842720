"""Latency fault tolerance (``client/latency.py``): which brokers are avoided and for how long, the
queues chosen around them, and a producer sending past a slow broker of a scripted cluster."""

from __future__ import annotations

import time

from finchmq.client import Message, Producer
from finchmq.client.config import ProducerConfig
from finchmq.client.latency import LatencyFaultTolerance, MQFaultStrategy
from finchmq.client.route import TopicPublishInfo, topic_route_data_to_publish_info
from finchmq.protocol.bodies import BrokerData, QueueData, TopicRouteData
from finchmq.protocol.message import MessageQueue

from .fakes import Answer, FakeCluster

HOUR = 3_600_000  # ms: "avoided" for longer than any test runs


def publish_info(*brokers: str, queues: int = 2) -> TopicPublishInfo:
    route = TopicRouteData(
        queue_datas=tuple(
            QueueData(broker_name=b, read_queue_nums=queues, write_queue_nums=queues, perm=6) for b in brokers
        ),
        broker_datas=tuple(BrokerData(broker_name=b, broker_addrs={0: f"{b}:10911"}) for b in brokers),
    )
    return topic_route_data_to_publish_info("T", route)


def test_a_broker_is_avoided_for_its_duration_then_usable_again() -> None:
    tolerance = LatencyFaultTolerance()
    assert tolerance.is_available("a") and tolerance.pick_one_at_least() is None
    tolerance.update_fault_item("a", 600, HOUR)
    tolerance.update_fault_item("b", 600, 0)  # avoided until now: usable at once
    assert not tolerance.is_available("a") and tolerance.is_available("b")
    tolerance.update_fault_item("a", 20, 0)  # a later, fast answer clears it
    assert tolerance.is_available("a")
    tolerance.update_fault_item("a", 600, HOUR)
    tolerance.remove("a")
    assert tolerance.is_available("a")


def test_the_least_bad_broker_comes_from_the_better_half() -> None:
    tolerance = LatencyFaultTolerance()
    tolerance.update_fault_item("fast", 10, 0)
    tolerance.update_fault_item("slower", 20, 0)
    tolerance.update_fault_item("avoided", 5, HOUR)
    tolerance.update_fault_item("avoided-too", 1, HOUR)
    picks = {tolerance.pick_one_at_least() for _ in range(4)}
    assert picks == {"fast", "slower"}, "usable first, then by latency; it takes turns in the better half"
    alone = LatencyFaultTolerance()
    alone.update_fault_item("only", 10, HOUR)
    assert alone.pick_one_at_least() == "only"


def test_latency_maps_to_the_duration_of_the_largest_bound_it_reached() -> None:
    strategy = MQFaultStrategy(ProducerConfig(producer_group="pg", send_latency_fault_enable=True))
    assert strategy._not_available_duration(40) == 0  # under latency_max[0] = 50 ms
    assert strategy._not_available_duration(549) == 0
    assert strategy._not_available_duration(550) == 30_000
    assert strategy._not_available_duration(2_500) == 120_000
    assert strategy._not_available_duration(30_000) == 600_000  # a failure (isolation) counts as 30 s
    strategy.update_fault_item("a", 40, isolation=False)
    assert strategy.tolerance.is_available("a")
    strategy.update_fault_item("a", 40, isolation=True)
    assert not strategy.tolerance.is_available("a")


def test_queues_go_round_the_brokers_not_avoided() -> None:
    strategy = MQFaultStrategy(ProducerConfig(producer_group="pg", send_latency_fault_enable=True))
    info = publish_info("a", "b")
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"a", "b"}
    strategy.update_fault_item("a", 600, isolation=False)
    chosen = [strategy.select_one_message_queue(info, None) for _ in range(8)]
    assert {mq.broker_name for mq in chosen} == {"b"}
    assert {mq.queue_id for mq in chosen} == {0, 1}


def test_when_every_broker_is_avoided_a_queue_of_the_least_bad_one_is_chosen() -> None:
    strategy = MQFaultStrategy(ProducerConfig(producer_group="pg", send_latency_fault_enable=True))
    info = publish_info("a", "b", queues=3)
    strategy.update_fault_item("a", 600, isolation=False)
    strategy.update_fault_item("b", 600, isolation=True)
    mq = strategy.select_one_message_queue(info, None)
    assert mq.topic == "T" and mq.broker_name in {"a", "b"} and 0 <= mq.queue_id < 3
    # the least bad broker is not in the route any more: it is forgotten, and round robin answers
    gone = MQFaultStrategy(ProducerConfig(producer_group="pg", send_latency_fault_enable=True))
    gone.update_fault_item("a", 600, isolation=True)
    gone.update_fault_item("old", 60, isolation=True)
    assert gone.select_one_message_queue(publish_info("a", queues=1), None) == MessageQueue("T", "a", 0)
    assert gone.tolerance.is_available("old") and not gone.tolerance.is_available("a")


def test_disabled_it_records_nothing_and_retries_on_another_broker() -> None:
    strategy = MQFaultStrategy(ProducerConfig(producer_group="pg"))
    assert not strategy.enabled
    strategy.update_fault_item("a", 600, isolation=True)
    assert strategy.tolerance.is_available("a")
    info = publish_info("a", "b")
    assert {strategy.select_one_message_queue(info, "a").broker_name for _ in range(8)} == {"b"}


async def test_a_producer_avoids_a_slow_broker() -> None:
    async with FakeCluster("broker-a", "broker-b") as cluster:
        # 1.5 s: only a broker-b answer slower than that (not merely over the 550 ms that isolates
        # it too) could make the producer prefer broker-a again
        cluster.brokers["broker-a"].answers.extend([Answer(delay=1.5)] * 20)
        async with Producer(
            "pg",
            namesrv_addr=cluster.namesrv_addr,
            instance_name=f"p-{time.monotonic_ns()}",
            send_latency_fault_enable=True,
        ) as p:
            for i in range(12):
                await p.send(Message("T", f"{i}".encode()))
        slow = len(cluster.brokers["broker-a"].sends)
        assert slow == 1, f"after one 1.5 s answer broker-a is avoided for 60 s, got {slow} sends"
        assert len(cluster.brokers["broker-b"].sends) == 11
