"""The blocking API: every object works from plain threads through the portal, shares one client
instance, runs callbacks off the loop, and refuses to run inside an event loop."""

from __future__ import annotations

import threading

import pytest

from finchmq.client import (
    BlockingLitePullConsumer,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    PullStatus,
    SendResult,
    SendStatus,
)
from finchmq.client.sync import Portal
from finchmq.testing import EmbeddedServer
from tests.waiting import DEFAULT_TIMEOUT, wait_until


def test_blocking_producer_and_push_consumer(server: EmbeddedServer, name: str) -> None:
    ns = server.namesrv_addr
    got: list[str] = []
    threads: set[str] = set()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        threads.add(threading.current_thread().name)
        got.extend(m.body.decode() for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    callback_threads: list[str] = []
    done = threading.Event()

    def on_success(result: SendResult) -> None:
        callback_threads.append(threading.current_thread().name)
        done.set()

    with BlockingProducer("pg", namesrv_addr=ns) as producer:
        assert producer.send(Message(name, b"s0")).send_status is SendStatus.SEND_OK
        producer.send_oneway(Message(name, b"s1"))
        assert len(producer.send_batch([Message(name, b"s2"), Message(name, b"s3")])) == 1
        future = producer.send_async(Message(name, b"s4"), on_success)
        assert future.result(DEFAULT_TIMEOUT).send_status is SendStatus.SEND_OK
        assert done.wait(DEFAULT_TIMEOUT)
        consumer = BlockingPushConsumer(
            f"g_{name}", namesrv_addr=ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(name)
        consumer.register_message_listener(listener)
        with consumer:
            assert consumer.consumer.instance is producer.producer.instance, "one instance per process"
            wait_until(lambda: len(got) >= 5, what="5 messages")
            info = consumer.running_info()
    assert sorted(got) == ["s0", "s1", "s2", "s3", "s4"]
    assert all(t.startswith("ConsumeMessageThread_") for t in threads)
    assert callback_threads[0].startswith("finchmq-portal-callback"), "callbacks never run on the loop"
    assert info.properties["PROP_CONSUMEORDERLY"] == "false"


def test_blocking_pull_and_lite_pull(server: EmbeddedServer, name: str) -> None:
    ns = server.namesrv_addr
    with BlockingProducer("pg", namesrv_addr=ns) as producer:
        for i in range(8):
            producer.send(Message(name, f"p{i}".encode()), queue=MessageQueue(name, "broker-a", 0))
    mq = MessageQueue(name, "broker-a", 0)
    with BlockingPullConsumer("pull_g", namesrv_addr=ns) as pull:
        assert mq in pull.fetch_subscribe_message_queues(name)
        result = pull.pull(mq, "*", 0, 32)
        assert result.pull_status is PullStatus.FOUND and len(result.msg_found_list) == 8
        assert pull.max_offset(mq) == 8
        pull.update_consume_offset(mq, 8)
        pull.persist_consumer_offset()
        assert pull.fetch_consume_offset(mq, True) == 8
    lite = BlockingLitePullConsumer(
        "lite_g", namesrv_addr=ns, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    lite.assign([mq])
    with lite:
        bodies: list[str] = []

        def polled_8() -> bool:
            bodies.extend(m.body.decode() for m in lite.poll(500))
            return len(bodies) >= 8

        wait_until(polled_8, what="8 messages polled")
        lite.commit_sync()
        assert lite.committed(mq) == 8
    assert bodies == [f"p{i}" for i in range(8)]


async def test_blocking_objects_refuse_to_run_inside_an_event_loop(namesrv: str) -> None:
    producer = BlockingProducer("pg", namesrv_addr=namesrv)
    with pytest.raises(
        RuntimeError, match="BlockingProducer cannot be used inside the event loop; use Producer"
    ):
        producer.start()


def test_portal_is_shared_and_times_out() -> None:
    assert Portal.default() is Portal.default()

    async def forever() -> None:
        import asyncio  # noqa: PLC0415

        await asyncio.sleep(60)

    with pytest.raises(TimeoutError, match=r"no result within 0\.2s"):
        Portal.default().call(forever(), 0.2, "Test")
