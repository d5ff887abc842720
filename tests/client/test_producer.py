"""Producer against a real broker (send modes, batches, delays, compression, validation) and
against scripted brokers (retries, SYSTEM_BUSY, timeouts). Latency fault tolerance:
test_latency.py; selectors: test_selector.py."""

from __future__ import annotations

import asyncio
import socket
import time
from collections import deque
from collections.abc import Callable

import pytest

from finchmq.client import (
    BrokerBusyError,
    ClientStateError,
    Message,
    MessageQueue,
    MQBrokerError,
    MQTimeoutError,
    NoRouteError,
    Producer,
    SendResult,
    SendStatus,
    ValidationError,
    select_message_queue_by_hash,
)
from finchmq.client.producer import split_batch
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import FAST_BROKER, TEST_BROKER, create_topic, pull_all
from .fakes import Answer, FakeCluster


def producer(namesrv: str, **kwargs: object) -> Producer:
    return Producer("pg", namesrv_addr=namesrv, instance_name=f"p-{time.monotonic_ns()}", **kwargs)


async def test_send_returns_a_complete_result_and_stores_the_message_intact(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    msg = Message.create(name, b"hello", tags="TagA", keys=["k1", "k2"]).with_user_property("color", "red")
    async with producer(namesrv) as p:
        result = await p.send(msg)
    assert result.send_status is SendStatus.SEND_OK
    assert len(result.msg_id) == 32 and result.msg_id != result.offset_msg_id
    where = decode_offset_msg_id(result.offset_msg_id)
    assert f"{where.host}:{where.port}" == server.broker_addr
    assert result.message_queue.topic == name and result.message_queue.broker_name == "broker-a"
    assert result.queue_offset == 0
    [stored] = await pull_all(namesrv, name, 1)
    assert stored.body == b"hello" and stored.tags == "TagA" and stored.keys == "k1 k2"
    assert stored.properties["color"] == "red"
    assert stored.unique_key == result.msg_id
    assert stored.msg_id == result.offset_msg_id
    assert (stored.queue_id, stored.queue_offset) == (result.message_queue.queue_id, 0)


async def test_send_async_is_awaitable_and_calls_back(namesrv: str, name: str) -> None:
    results: list[SendResult] = []
    async with producer(namesrv) as p:
        futures = [p.send_async(Message(name, f"a{i}".encode()), results.append) for i in range(20)]
        awaited = await asyncio.gather(*futures)
    assert sorted(r.msg_id for r in awaited) == sorted(r.msg_id for r in results)
    assert all(r.send_status is SendStatus.SEND_OK for r in awaited)
    assert len(await pull_all(namesrv, name, 20)) == 20


async def test_send_async_reports_failure_through_the_exception_callback(namesrv: str) -> None:
    errors: list[BaseException] = []
    async with producer(namesrv, max_message_size=1000) as p:
        future = p.send_async(Message("T", b"x" * 5000), on_exception=errors.append)
        with pytest.raises(ValidationError):
            await future
    assert isinstance(errors[0], ValidationError)


async def test_oneway_messages_are_stored(namesrv: str, name: str) -> None:
    async with producer(namesrv) as p:
        await p.send(Message(name, b"route-warm-up"))
        for i in range(10):
            assert await p.send_oneway(Message(name, f"o{i}".encode())) is None
    assert len(await pull_all(namesrv, name, 11)) == 11


async def test_send_to_a_queue_and_by_sharding_key(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 4)
    async with producer(namesrv) as p:
        queues = await p.fetch_publish_message_queues(name)
        assert sorted(q.queue_id for q in queues) == [0, 1, 2, 3]
        result = await p.send(Message(name, b"q2"), queue=MessageQueue(name, "broker-a", 2))
        assert result.message_queue.queue_id == 2
        by_key: dict[str, set[int]] = {}
        for i in range(24):
            key = f"order-{i % 3}"
            r = await p.send(
                Message(name, f"{key}:{i}".encode()), selector=select_message_queue_by_hash, arg=key
            )
            by_key.setdefault(key, set()).add(r.message_queue.queue_id)
    assert all(len(q) == 1 for q in by_key.values()), "a sharding key always maps to one queue"
    # Java: Math.abs("order-0".hashCode() % 4); "order-0".hashCode() == -1207126487
    assert by_key["order-0"] == {abs(-1207126487 % -4)}


async def test_batch_is_split_to_the_size_limit_and_keeps_every_message(namesrv: str, name: str) -> None:
    msgs = [Message.create(name, bytes([65 + i % 26]) * 300, tags="B", keys=f"b{i}") for i in range(20)]
    assert len(split_batch(msgs, 2000)) > 3
    async with producer(namesrv, max_message_size=2000) as p:
        results = await p.send_batch(msgs)
    assert len(results) == len(split_batch(msgs, 2000))
    ids = [i for r in results for i in r.msg_id.split(",")]
    assert len(ids) == 20 and len(set(ids)) == 20
    stored = await pull_all(namesrv, name, 20)
    assert sorted(m.unique_key or "" for m in stored) == sorted(ids)
    assert sorted(m.keys or "" for m in stored) == sorted(f"b{i}" for i in range(20))


async def test_batch_validation(namesrv: str, name: str) -> None:
    async with producer(namesrv) as p:
        with pytest.raises(ValidationError, match="should be the same"):
            await p.send_batch([Message(name, b"a"), Message(name + "x", b"b")])
        with pytest.raises(ValidationError, match="TimeDelayLevel is not supported for batching"):
            await p.send_batch([Message(name, b"a").with_delay_time_level(2)])
        with pytest.raises(ValidationError, match="Retry Group is not supported"):
            await p.send_batch([Message("%RETRY%g", b"a")])


async def test_delay_level_holds_the_message_back(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    async with producer(namesrv) as p:
        await p.send(Message(name, b"later").with_delay_time_level(3))  # 1 s with FAST_BROKER
        [msg] = await pull_all(namesrv, name, 1)
    assert msg.body == b"later" and msg.properties.get("REAL_TOPIC") == name  # it went through the schedule
    # stored in its topic once the delay had passed since the schedule topic stored it (after it
    # was born): a lower bound, which a slow machine cannot break
    assert msg.store_timestamp - msg.born_timestamp >= 1000


async def test_large_bodies_are_compressed_on_the_wire_and_read_back_whole(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    body = b"0123456789" * 1000
    async with producer(namesrv) as p:
        result = await p.send(Message(name, body))
    [msg] = await pull_all(namesrv, name, 1)
    assert msg.body == body, "the client inflates"
    assert server.broker is not None
    offset = decode_offset_msg_id(result.offset_msg_id).commit_log_offset
    raw = server.broker.store.look_message_by_offset(offset)
    assert raw is not None and raw.sys_flag & MessageSysFlag.COMPRESSED_FLAG and len(raw.body) < 1000


@pytest.mark.parametrize(
    ("msg", "match"),
    [
        (Message("bad topic!", b"x"), "illegal characters"),
        (Message("t" * 128, b"x"), "longer than topic max length"),
        (Message("TBW102", b"x"), "conflict with AUTO_CREATE_TOPIC_KEY_TOPIC"),
        (
            Message("SCHEDULE_TOPIC_XXXX", b"x"),
            r"Sending message to topic\[SCHEDULE_TOPIC_XXXX\] is forbidden",
        ),
        (Message("T", b""), "the message body length is zero"),
        (Message("T", b"x" * 1025), "the message body size over max value, MAX: 1024"),
    ],
)
async def test_invalid_messages_are_refused_with_the_reason(namesrv: str, msg: Message, match: str) -> None:
    async with producer(namesrv, max_message_size=1024) as p:
        with pytest.raises(ValidationError, match=match) as info:
            await p.send(msg)
    assert info.value.response_code == ResponseCode.MESSAGE_ILLEGAL


async def test_no_route_without_auto_create(
    finchmq_server_factory: Callable[..., EmbeddedServer], name: str
) -> None:
    server = finchmq_server_factory({**FAST_BROKER, "autoCreateTopicEnable": "false"})
    async with producer(server.namesrv_addr) as p:
        with pytest.raises(NoRouteError, match=f"No route info of this topic: {name}.*does not exist"):
            await p.send(Message(name, b"x"))


async def test_no_route_names_an_unreachable_name_server(name: str) -> None:
    with socket.socket() as placeholder:  # a port nobody listens on
        placeholder.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{placeholder.getsockname()[1]}"
        async with producer(addr) as p:
            with pytest.raises(NoRouteError, match=f"{name}, no name server answered: .*{addr}"):
                await p.send(Message(name, b"x"), timeout_millis=2000)


async def test_lifecycle_states(namesrv: str) -> None:
    p = producer(namesrv)
    with pytest.raises(ClientStateError, match="not OK"):
        await p.send(Message("T", b"x"))
    await p.start()
    twin = Producer("pg", namesrv_addr=namesrv, instance_name=p.config.instance_name)
    with pytest.raises(ClientStateError, match=r"producer group\[pg\] has been created before"):
        await twin.start()
    await p.close()
    await p.close()  # idempotent
    with pytest.raises(ClientStateError, match="Cannot reopen"):
        await p.start()


# -- scripted brokers --------------------------------------------------------------------------


async def test_the_send_header_on_the_wire_is_the_typed_headers_encoding() -> None:
    """The producer fills a per-topic copy of the SEND_MESSAGE_V2 header instead of building
    ``SendMessageRequestHeaderV2`` per message: what reaches the broker must be exactly what the
    typed header writes (keys, order, values) for every kind of message."""
    async with FakeCluster("broker-a", queues=4) as cluster:
        broker = cluster.brokers["broker-a"]
        async with producer(
            cluster.namesrv_addr, compress_msg_body_over_howmuch=100, default_topic_queue_nums=3
        ) as p:
            before = int(time.time() * 1000)
            plain = await p.send(Message.create("T", b"plain", tags="A"))
            await p.send(Message("T", b"flagged", flag=7))
            await p.send(Message("T", b"z" * 500))  # compressed
            await p.send(Message("T", b"half", properties={"TRAN_MSG": "true"}))
            await p.send(Message("T", b"own id", properties={"UNIQ_KEY": "0A0000010000000000000000000000FF"}))
            retry_props = {"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "5", "a": "b"}
            await p.send(Message("%RETRY%g", b"again", properties=retry_props))
            await p.send(Message("T", b"to queue 2"), queue=MessageQueue("T", "broker-a", 2))
            [batch] = await p.send_batch([Message("T", b"1"), Message("T", b"2")])
            await p.send_oneway(Message("T", b"oneway"))
            await p.send_async(Message("U", b"other topic"))
        await eventually(lambda: len(broker.wire_headers) == 10, what="the 10 sends received")
    headers = broker.wire_headers
    for fields, typed in zip(headers, broker.sends, strict=True):
        assert list(fields.items()) == list(typed.to_ext_fields().items())
        assert (typed.producer_group, typed.default_topic, typed.default_topic_queue_nums) == (
            "pg",
            "TBW102",
            3,
        )
        assert before <= typed.born_timestamp <= int(time.time() * 1000)
    s = broker.sends
    assert (s[0].topic, s[0].queue_id, s[0].sys_flag, s[0].flag) == ("T", plain.message_queue.queue_id, 0, 0)
    assert s[0].properties == f"TAGS\x01A\x02WAIT\x01true\x02UNIQ_KEY\x01{plain.msg_id}"
    assert not s[0].batch and s[0].reconsume_times == 0 and s[0].max_reconsume_times is None
    assert s[1].flag == 7 and "h" in headers[1]
    assert s[2].sys_flag == MessageSysFlag.COMPRESSED_FLAG
    assert s[3].sys_flag == MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert s[4].properties == "UNIQ_KEY\x010A0000010000000000000000000000FF"
    assert (s[5].topic, s[5].reconsume_times, s[5].max_reconsume_times) == ("%RETRY%g", 3, 5)
    assert s[5].properties is not None and s[5].properties.startswith("a\x01b\x02UNIQ_KEY\x01")
    assert s[6].queue_id == 2
    assert s[7].batch and s[7].properties == "WAIT\x01true" and len(batch.msg_id.split(",")) == 2
    assert s[8].topic == "T" and s[9].topic == "U"


async def test_system_busy_is_a_typed_retriable_error_and_is_not_resent() -> None:
    async with FakeCluster("broker-a") as cluster:
        remark = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 205ms"
        cluster.brokers["broker-a"].answers.append(Answer(ResponseCode.SYSTEM_BUSY, remark))
        async with producer(cluster.namesrv_addr) as p:
            with pytest.raises(BrokerBusyError) as info:
                await p.send(Message("T", b"x"))
            assert info.value.retriable and info.value.remark == remark
            assert info.value.broker_addr == cluster.brokers["broker-a"].addr
            assert len(cluster.brokers["broker-a"].sends) == 1, "flow control is not retried (seed 000)"
            assert (await p.send(Message("T", b"y"))).send_status is SendStatus.SEND_OK


async def test_system_error_moves_to_another_broker() -> None:
    async with FakeCluster("broker-a", "broker-b") as cluster:
        for b in cluster.brokers.values():
            b.answers.extend([Answer(ResponseCode.SYSTEM_ERROR, "store error")])
        async with producer(cluster.namesrv_addr) as p:
            result = await p.send(Message("T", b"x"))
        sends = sorted(len(b.sends) for b in cluster.brokers.values())
        assert sends == [1, 2], "failed on one broker, failed on the other, then succeeded"
        assert result.send_status is SendStatus.SEND_OK


async def test_exhausted_retries_raise_the_last_error_with_the_attempts() -> None:
    async with FakeCluster("broker-a", "broker-b") as cluster:
        for b in cluster.brokers.values():
            b.answers.extend([Answer(ResponseCode.SYSTEM_ERROR, "no")] * 5)
        async with producer(cluster.namesrv_addr, retry_times_when_send_failed=2) as p:
            with pytest.raises(MQBrokerError) as info:
                await p.send(Message("T", b"x"))
        assert sum(len(b.sends) for b in cluster.brokers.values()) == 3
        assert any("Send [3] times, still failed" in note for note in info.value.__notes__)
        assert {h.topic for b in cluster.brokers.values() for h in b.sends} == {"T"}


async def test_one_timeout_budget_covers_every_attempt() -> None:
    async with FakeCluster("broker-a") as cluster:
        cluster.brokers["broker-a"].answers.extend([Answer(delay=3)] * 3)
        async with producer(cluster.namesrv_addr, send_msg_timeout=1000) as p:
            budgets: list[int] = []  # the time (ms) each attempt was given
            start_kernel = p._start_kernel

            def attempt(msg: Message, mq: MessageQueue, mode: object, timeout: int, *rest: object) -> object:
                budgets.append(timeout)
                return start_kernel(msg, mq, mode, timeout, *rest)  # type: ignore[arg-type]

            p._start_kernel = attempt  # type: ignore[assignment,method-assign]
            with pytest.raises(MQTimeoutError):
                await p.send(Message("T", b"x"))
    # One budget (1 s) for every attempt: each gets what the earlier ones left, so together they
    # got about 1 s (a second attempt at most a few ms); one budget per attempt would give 3 x 1 s.
    assert budgets and budgets[0] <= 1000 and sum(budgets) < 2000, budgets


async def test_not_store_ok_answer_is_returned_or_retried_elsewhere() -> None:
    async with FakeCluster("broker-a", "broker-b") as cluster:
        for b in cluster.brokers.values():
            b.answers = deque([Answer(ResponseCode.FLUSH_DISK_TIMEOUT, "slow disk")])
        async with producer(cluster.namesrv_addr) as p:
            result = await p.send(Message("T", b"x"))
            assert result.send_status is SendStatus.FLUSH_DISK_TIMEOUT, "stored: returned, not retried"
        assert sum(len(b.sends) for b in cluster.brokers.values()) == 1
        for b in cluster.brokers.values():
            b.answers = deque([Answer(ResponseCode.FLUSH_DISK_TIMEOUT, "slow disk")])
        async with producer(cluster.namesrv_addr, retry_another_broker_when_not_store_ok=True) as p:
            result = await p.send(Message("T", b"x"))
            assert result.send_status is SendStatus.SEND_OK
        assert sum(len(b.sends) for b in cluster.brokers.values()) == 4, "two stores not OK, then another try"


async def test_a_new_topic_gets_default_topic_queue_nums_queues(namesrv: str, name: str) -> None:
    async with producer(namesrv) as p:
        await p.send(Message(name, b"first"))  # created by the broker from TBW102's route
        queues = await p.fetch_publish_message_queues(name)
    assert sorted(q.queue_id for q in queues) == [0, 1, 2, 3], "defaultTopicQueueNums = 4"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_unreachable_broker_is_retried_on_another(mode: str) -> None:
    async with FakeCluster("broker-a", "broker-b") as cluster:
        down = cluster.brokers["broker-a"]
        assert down.server is not None
        await down.server.close()  # the route still names it: connection refused
        async with producer(cluster.namesrv_addr) as p:
            for i in range(4):
                msg = Message("T", f"{i}".encode())
                result = await (p.send(msg) if mode == "sync" else p.send_async(msg))
                assert result.message_queue.broker_name == "broker-b"
        assert len(cluster.brokers["broker-b"].sends) == 4


async def test_real_broker_flow_control_reaches_the_caller_as_broker_busy(
    finchmq_server_factory: Callable[..., EmbeddedServer], name: str
) -> None:
    """The broker's page cache is held busy (every append takes 400 ms, busy after 100 ms): it
    sheds sends with SYSTEM_BUSY; the producer raises them, typed and retriable, without resending."""
    server = finchmq_server_factory(
        {**TEST_BROKER, "injectPutDelayMillis": "400", "osPageCacheBusyTimeOutMills": "100"}
    )
    async with producer(server.namesrv_addr, send_msg_timeout=10_000) as p:
        await p.send(Message(name, b"warm-up"))
        outcomes = await asyncio.gather(
            *(p.send(Message(name, f"{i}".encode())) for i in range(20)), return_exceptions=True
        )
    busy = [o for o in outcomes if isinstance(o, BrokerBusyError)]
    sent = [o for o in outcomes if isinstance(o, SendResult)]
    assert busy and sent and len(busy) + len(sent) == 20, outcomes
    assert all(e.retriable and e.response_code == ResponseCode.SYSTEM_BUSY for e in busy)
    assert all(
        any(
            tag in e.remark
            for tag in ("[REJECTREQUEST]", "[PCBUSY_CLEAN_QUEUE]", "[TIMEOUT_CLEAN_QUEUE]", "[OVERLOAD]")
        )
        for e in busy
    ), [e.remark for e in busy]
    # every send was answered (a resend is part of its send() call), so the store is final
    stored = await pull_all(server.namesrv_addr, name, len(sent) + 1)
    assert len(stored) == len(sent) + 1, "what was refused was not resent behind the caller's back"
