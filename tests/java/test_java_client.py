"""The official Java client (Apache RocketMQ 4.9.8) against ``finchmq server``: DefaultMQProducer
(sync, async, oneway, selector, batch), DefaultMQPushConsumer (concurrently with a retry,
orderly, broadcasting) and DefaultLitePullConsumer, each checked message by message."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from finchmq.client import AdminClient
from finchmq.testing.process import ServerProcess
from tests.client.conftest import create_topic
from tests.waiting import wait_until

from .conftest import NO_CHECK_YET_MS, ended_transactions, run_java, set_transaction_timeout

# JVMs and process restarts: generous on a loaded 2-core machine (the default is 120 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

COUNT = 10  # messages per send mode
MODES = ("sync", "async", "oneway", "selector", "batch")
ALL_KEYS = {f"{mode}-{i}" for mode in MODES for i in range(COUNT)}


@pytest.fixture(scope="module")
def produced(java_classes: str, finchmq_server: ServerProcess) -> tuple[str, list[dict[str, Any]]]:
    """Every send mode of the Java producer, once, to a topic it auto-creates (4 queues)."""
    topic = "JavaInterop"
    return topic, run_java(java_classes, "produce", finchmq_server.namesrv_addr, topic, str(COUNT))


def test_every_send_mode_is_acknowledged(produced: tuple[str, list[dict[str, Any]]]) -> None:
    _, sends = produced
    assert {s["key"] for s in sends} == ALL_KEYS
    errors = [s for s in sends if "error" in s]
    assert not errors
    for s in sends:
        assert s["status"] == ("ONEWAY" if s["mode"] == "oneway" else "SEND_OK"), s
    selector = [s for s in sends if s["mode"] == "selector"]
    assert all(s["queue"] == int(s["key"].split("-")[1]) % 4 for s in selector), selector


def test_the_broker_stored_what_java_sent(
    produced: tuple[str, list[dict[str, Any]]], finchmq_server: ServerProcess
) -> None:
    topic, sends = produced

    async def stored() -> int:
        async with AdminClient(namesrv_addr=finchmq_server.namesrv_addr) as admin:
            stats = await admin.topic_status(topic)
        return sum(o.max_offset - o.min_offset for o in stats.offset_table.values())

    # oneway sends are acknowledged by nobody: wait until they are stored
    wait_until(lambda: asyncio.run(stored()) >= len(ALL_KEYS), what="every send stored", interval=0.2)
    assert asyncio.run(stored()) == len(ALL_KEYS)
    acked = [s for s in sends if s["mode"] in ("sync", "async", "selector")]
    assert len({(s["queue"], s["offset"]) for s in acked}) == len(acked), "each send has its own queue offset"


def test_push_concurrently_consumes_everything_and_retries_a_failure(
    produced: tuple[str, list[dict[str, Any]]], java_classes: str, finchmq_server: ServerProcess
) -> None:
    topic, _ = produced
    got = run_java(
        java_classes,
        "push",
        finchmq_server.namesrv_addr,
        "java_push_g",
        topic,
        str(len(ALL_KEYS)),
        "concurrent",
        "sync-",
    )
    assert {m["key"] for m in got} == ALL_KEYS
    assert all(m["body"] == f"body-{m['key']}" and m["topic"] == topic for m in got)
    for i in range(COUNT):  # refused once, redelivered through the retry topic with reconsumeTimes 1
        deliveries = sorted(m["reconsume"] for m in got if m["key"] == f"sync-{i}")
        assert deliveries[:2] == [0, 1], (f"sync-{i}", deliveries)


def test_push_orderly_keeps_each_queue_in_order(
    produced: tuple[str, list[dict[str, Any]]], java_classes: str, finchmq_server: ServerProcess
) -> None:
    topic, _ = produced
    got = run_java(
        java_classes,
        "push",
        finchmq_server.namesrv_addr,
        "java_orderly_g",
        topic,
        str(len(ALL_KEYS)),
        "orderly",
    )
    assert {m["key"] for m in got} == ALL_KEYS
    by_queue: dict[int, list[int]] = defaultdict(list)
    for m in got:
        by_queue[m["queue"]].append(m["offset"])
    for queue, offsets in by_queue.items():
        assert offsets == sorted(offsets), f"queue {queue} out of order: {offsets}"


def test_push_broadcasting_gives_every_instance_everything(
    produced: tuple[str, list[dict[str, Any]]], java_classes: str, finchmq_server: ServerProcess
) -> None:
    topic, _ = produced
    got = run_java(
        java_classes,
        "push",
        finchmq_server.namesrv_addr,
        "java_broadcast_g",
        topic,
        str(len(ALL_KEYS)),
        "broadcast",
    )
    by_instance: dict[str, set[str]] = defaultdict(set)
    for m in got:
        by_instance[m["instance"]].add(m["key"])
    assert len(by_instance) == 2
    assert all(keys == ALL_KEYS for keys in by_instance.values())


def test_lite_pull_consumer_reads_everything(
    produced: tuple[str, list[dict[str, Any]]], java_classes: str, finchmq_server: ServerProcess
) -> None:
    topic, _ = produced
    got = run_java(
        java_classes, "litepull", finchmq_server.namesrv_addr, "java_lite_g", topic, str(len(ALL_KEYS))
    )
    assert {m["key"] for m in got} == ALL_KEYS


def test_java_transaction_producer_commits_rolls_back_and_answers_checks(java_classes: str) -> None:
    """Java's TransactionMQProducer: COMMIT and ROLLBACK from the local transaction, UNKNOW
    resolved by the broker's check (CHECK_TRANSACTION_STATE to the Java client, its
    END_TRANSACTION back); the topic holds exactly the committed messages."""
    topic, count = "JavaTx", 5
    with ServerProcess(
        conf={"transactionCheckInterval": "500", "transactionTimeOut": NO_CHECK_YET_MS}
    ) as server:
        ns, broker = server.namesrv_addr, f"127.0.0.1:{server.broker_port}"
        with ThreadPoolExecutor(1) as pool:
            java = pool.submit(run_java, java_classes, "transaction", ns, topic, str(count))
            wait_until(
                lambda: java.done() or asyncio.run(ended_transactions(ns, broker)) >= 2 * count,
                what="the broker recorded the commits and rollbacks",
                interval=0.2,
            )
            asyncio.run(set_transaction_timeout(ns, broker, "1000"))  # now the checks
            records = java.result()
        assert not [r for r in records if "error" in r], records
        sent = {r["key"]: r for r in records if r.get("mode") == "transaction"}
        assert all(r["status"] == "SEND_OK" for r in sent.values()) and len(sent) == 3 * count
        assert {k for k, r in sent.items() if r["state"] == "UNKNOW"} == {
            f"unknown-{i}" for i in range(count)
        }
        checked = [r for r in records if "checked" in r]
        assert {r["checked"] for r in checked} == {f"unknown-{i}" for i in range(count)}
        assert all(r["topic"] == topic for r in checked)  # the half message as its real topic's
        expected = {f"commit-{i}" for i in range(count)} | {f"unknown-{i}" for i in range(count)}

        async def keys() -> list[str]:
            from tests.client.conftest import pull_all  # noqa: PLC0415

            return sorted(m.keys or "" for m in await pull_all(server.namesrv_addr, topic, len(expected)))

        assert asyncio.run(keys()) == sorted(expected)


def test_java_request_reply_through_finchmq(java_classes: str, finchmq_server: ServerProcess) -> None:
    """Java's request(msg, timeout) and MessageUtil.createReplyMessage: the reply goes through
    finchmq's SEND_REPLY_MESSAGE_V2 and PUSH_REPLY_MESSAGE_TO_CLIENT back to the Java requester."""
    # the topic exists before the responder subscribes (else it learns the route 30 s later)
    asyncio.run(create_topic(finchmq_server.namesrv_addr, "JavaRequests"))
    records = run_java(java_classes, "requestreply", finchmq_server.namesrv_addr, "JavaRequests", "3")
    assert not [r for r in records if "error" in r], records
    assert [r["reply"] for r in records if "reply" in r] == ["re:q0", "re:q1", "re:q2"]


def test_java_sql92_consumer_on_finchmq(java_classes: str) -> None:
    """MessageSelector.bySql from Java's push consumer: CHECK_CLIENT_CONFIG, the heartbeat's
    SQL92 subscription and the broker's filtering, with and without enablePropertyFilter."""
    with ServerProcess(conf={"enablePropertyFilter": "true"}) as server:
        run_java(java_classes, "produce", server.namesrv_addr, "JavaSql", "10")  # keys sync-0..9 ...
        # sqlpush then puts an end marker (key "the-end") in every queue, and ends once it has
        # consumed up to each: what did not match had its chance to come
        sql = "TAGS = 'TagA' AND (KEYS IN ('sync-1', 'async-2', 'oneway-3') OR KEYS = 'the-end')"
        records = run_java(java_classes, "sqlpush", server.namesrv_addr, "java_sql_g", "JavaSql", sql)
        assert {r["key"] for r in records if "key" in r} == {"sync-1", "async-2", "oneway-3", "the-end"}
    with ServerProcess() as server:  # enablePropertyFilter=false (the default): refused at start
        run_java(java_classes, "produce", server.namesrv_addr, "JavaSql", "1")  # Java checks routed topics
        records = run_java(java_classes, "sqlpush", server.namesrv_addr, "java_sql_g", "JavaSql", "a > 1")
        [error] = [r["startError"] for r in records if "startError" in r]
        assert "The broker does not support consumer to filter message by SQL92" in error
