"""Wire compatibility: the official C++ client (librocketmq 1.2.4, unmodified) against finchmq.

Every test checks bodies, tags, keys and user properties, read back both through the C++
consumer and straight from the broker's store.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import AdminClient
from finchmq.protocol.bodies import SubscriptionGroupConfig
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.stored import decode_stored_all
from finchmq.protocol.topics import SCHEDULE_TOPIC
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

from .conftest import CppProcess, body, check_fields, consume, consume_all, cpp_consumer_queues, produce

SHORT_DELAYS = {"messageDelayLevel": "1s 1s 1s 1s 1s 1s 1s 1s"}


def stored(server: EmbeddedServer, topic: str) -> list[MessageExt]:
    """Every message of ``topic`` as the broker stored it, queue by queue."""
    assert server.broker is not None
    store = server.broker.store
    out: list[MessageExt] = []
    for queue_id in range(16):
        offset = 0
        while offset < store.get_max_offset_in_queue(topic, queue_id):
            with store.get_message("test", topic, queue_id, offset, 32) as result:
                out.extend(decode_stored_all(result.body()))
                offset = result.next_begin_offset
    return out


def holds(namesrv: str, group: str, consumer: CppProcess, topic: str) -> set[int]:
    """The queue ids of ``topic`` the C++ consumer holds now (``cpp_consumer_queues``)."""
    return set(asyncio.run(cpp_consumer_queues(namesrv, group, consumer, topic)))


def all_committed(namesrv: str, group: str, topic: str) -> bool:
    """The broker holds ``group``'s offset at the end of every queue of ``topic``."""

    async def ask() -> bool:
        async with AdminClient(namesrv_addr=namesrv) as admin:
            table = (await admin.consume_stats(group, topic)).offset_table
        return bool(table) and all(o.consumer_offset == o.broker_offset for o in table.values())

    return asyncio.run(ask())


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "orderly", "batch"])
def test_every_send_mode_stores_messages_intact(finchmq_server: EmbeddedServer, cpp: Any, mode: str) -> None:
    topic = f"Cpp_{mode}"
    results = produce(
        cpp,
        finchmq_server.namesrv_addr,
        topic,
        12,
        mode=mode,
        tags="TagA,TagB",
        keys_prefix=f"{mode}-key-",
        prop="color=red{i}",
        body_prefix=f"{mode}-body-",
        shards=3,
        batch_size=4,
    )
    if mode in ("sync", "orderly"):
        assert [r["status"] for r in results] == [0] * 12
        assert all(len(r["msg_id"]) == 32 for r in results)
    if mode == "batch":
        assert [r["n"] for r in results] == [4, 4, 4]
    # oneway sends are not acknowledged: wait until they are stored
    wait_until(lambda: len(stored(finchmq_server, topic)) >= 12, what=f"the 12 {mode} sends stored")
    messages = stored(finchmq_server, topic)
    by_body = {m.body.decode(): m for m in messages}
    assert sorted(by_body) == sorted(f"{mode}-body-{i}" for i in range(12)), "each message stored once"
    for i in range(12):
        m = by_body[f"{mode}-body-{i}"]
        assert m.tags == ("TagA" if i % 2 == 0 else "TagB")
        assert m.keys == f"{mode}-key-{i}"
        assert m.properties["color"] == f"red{i}"
        assert m.properties["CLUSTER"] == "DefaultCluster"
        if mode != "batch":  # batch items keep their own properties verbatim, as in Java
            assert "WAIT" not in m.properties  # Java 4.9 strips it from single messages
        assert m.topic == topic and m.born_host.host == "127.0.0.1"
    if mode == "orderly":
        queues = defaultdict(set)
        for i in range(12):
            queues[i % 3].add(by_body[f"{mode}-body-{i}"].queue_id)
        assert all(len(q) == 1 for q in queues.values()), "a sharding key always maps to one queue"
    if mode == "batch":
        assert len({m.queue_id for m in messages}) <= 3 and all(
            m.properties.get("UNIQ_KEY") for m in messages
        )


def test_push_consumer_clustering_receives_every_message_intact(
    finchmq_server: EmbeddedServer, cpp: Any
) -> None:
    addr = finchmq_server.namesrv_addr
    sent = {"tags": "TagA,TagB", "keys_prefix": "key-", "prop": "color=blue{i}"}
    produce(cpp, addr, "CppPush", 20, **sent)
    # A group that did not exist when the messages were sent still gets them (QUERY_CONSUMER_OFFSET quirk).
    got = consume_all(cpp, "push", addr, "CppPush", "cg_push", expect=20, prop_key="color", timeout=60)
    assert sorted(body(r) for r in got) == sorted(f"body-{i}" for i in range(20))
    for r in got:
        check_fields(r, **sent)
        assert r["topic"] == "CppPush" and r["reconsume_times"] == 0
    # Offsets were committed (the last ones oneway, at shutdown): the broker gets to know the
    # group's progress on every queue.
    broker = finchmq_server.broker
    assert broker is not None

    def committed() -> int:
        return sum(broker.consumer_offset_manager.query_offsets("cg_push", "CppPush").values())

    wait_until(lambda: committed() >= 20, what="the broker has cg_push's offsets of all 20 messages")
    assert committed() == 20


def test_tag_expression_filters_on_the_broker(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    addr = finchmq_server.namesrv_addr
    produce(cpp, addr, "CppTags", 30, tags="TagA,TagB,TagC")
    # then a TagA end marker in every queue (shard i: queue i): once the consumer has consumed up
    # to the marker of every queue, it has been handed whatever it would ever get of the 30
    produce(cpp, addr, "CppTags", 4, mode="orderly", shards=4, tags="TagA", body_prefix="end-")
    markers = {
        m.queue_id: m.queue_offset for m in stored(finchmq_server, "CppTags") if m.body.startswith(b"end-")
    }
    assert sorted(markers) == [0, 1, 2, 3]
    consumer = consume(cpp, "push", addr, "CppTags", "cg_tags", expression="TagA || TagB", timeout=300)

    def past_the_markers() -> bool:
        progress = asyncio.run(cpp_consumer_queues(addr, "cg_tags", consumer, "CppTags"))
        return sorted(progress) == sorted(markers) and all(
            progress[q].commit_offset > offset for q, offset in markers.items()
        )

    wait_until(
        past_the_markers, what="the consumer consumed up to the end marker of every queue", interval=0.25
    )
    consumer.stop()
    got = consumer.messages()
    assert sorted(body(r) for r in got) == sorted(
        [f"body-{i}" for i in range(30) if i % 3 != 2] + [f"end-{i}" for i in range(4)]
    )
    assert {r["tags"] for r in got} == {"TagA", "TagB"}


def test_orderly_consumer_keeps_queue_order_and_locks(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    addr = finchmq_server.namesrv_addr
    produce(cpp, addr, "CppOrder", 24, mode="orderly", shards=4, body_prefix="ord-")
    # runs until stopped: at its end it unlocks its queues, and the locks are checked before that
    consumer = consume(cpp, "push", addr, "CppOrder", "cg_order", orderly=True, timeout=300)
    consumer.wait_for(lambda rs: len([r for r in rs if "body" in r]) >= 24, what="24 messages consumed")
    broker = finchmq_server.broker
    assert broker is not None
    holders = {
        broker.rebalance_lock_manager.holder("cg_order", MessageQueue("CppOrder", "broker-a", q))
        for q in range(4)
    }
    holders.discard(None)
    assert len(holders) == 1, "the orderly consumer holds the broker-side locks of its queues"
    consumer.stop()
    per_queue: dict[int, list[int]] = defaultdict(list)
    for r in consumer.messages():
        per_queue[r["queue_id"]].append(r["queue_offset"])
    assert sum(len(v) for v in per_queue.values()) == 24
    for offsets in per_queue.values():
        assert offsets == sorted(offsets), "one queue is consumed in offset order"


def test_broadcasting_delivers_every_message_to_every_consumer(
    finchmq_server: EmbeddedServer, cpp: Any
) -> None:
    addr = finchmq_server.namesrv_addr
    produce(cpp, addr, "CppBcast", 1, body_prefix="warmup-")  # the topic must exist for its route
    consumers = [
        consume(
            cpp,
            "push",
            addr,
            "CppBcast",
            "cg_bcast",
            broadcast=True,
            expect=10,
            expect_prefix="body-",
            timeout=60,
            instance=f"i{n}",
        )
        for n in range(2)
    ]
    # A broadcast consumer starts each queue at its end, as it was when the consumer took the
    # queue: it must hold all 4 (its start offsets fixed) before the messages are sent.
    wait_until(
        lambda: all(holds(addr, "cg_bcast", c, "CppBcast") == {0, 1, 2, 3} for c in consumers),
        what="both broadcast consumers hold all 4 queues",
        interval=0.25,
    )
    produce(cpp, addr, "CppBcast", 10, prop="n={i}")
    for c in consumers:
        c.finish()
        got = [r for r in c.messages() if body(r).startswith("body-")]
        assert sorted(body(r) for r in got) == sorted(f"body-{i}" for i in range(10))


def test_reconsume_later_redelivers_through_the_retry_topic(finchmq_server_factory: Any, cpp: Any) -> None:
    server = finchmq_server_factory(SHORT_DELAYS)
    addr = server.namesrv_addr
    sent = {"tags": "TagR", "keys_prefix": "rk", "prop": "color=green{i}"}
    produce(cpp, addr, "CppRetry", 4, **sent)
    got = consume_all(
        cpp, "push", addr, "CppRetry", "cg_retry", expect=4, fail_times=1, prop_key="color", timeout=60
    )
    attempts = Counter(body(r) for r in got)
    assert attempts == {f"body-{i}": 2 for i in range(4)}, "each message: once failed, once redelivered"
    retried = [r for r in got if r["attempt"] == 2]
    for r in retried:
        assert r["topic"] == "CppRetry", "the C++ client restores the original topic from RETRY_TOPIC"
        assert r["reconsume_times"] == 1
        check_fields(r, **sent)
    first = {body(r): r["t"] for r in got if r["attempt"] == 1}
    assert all(r["t"] - first[body(r)] >= 0.9 for r in retried), "redelivery waits for the delay level"
    retry_stored = stored(server, "%RETRY%cg_retry")
    assert len(retry_stored) == 4 and all(m.properties.get("ORIGIN_MESSAGE_ID") for m in retry_stored)


def test_two_consumers_share_the_queues_and_one_takes_over(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    addr = finchmq_server.namesrv_addr
    produce(cpp, addr, "CppShare", 1, body_prefix="warmup-")  # creates the topic (4 queues)
    a = consume(cpp, "push", addr, "CppShare", "cg_share", timeout=300, instance="a")
    b = consume(cpp, "push", addr, "CppShare", "cg_share", timeout=300, instance="b")

    def split() -> bool:  # both joined; the broker told the group, and they rebalanced 2 + 2
        held_a, held_b = holds(addr, "cg_share", a, "CppShare"), holds(addr, "cg_share", b, "CppShare")
        return len(held_a) == len(held_b) == 2 and held_a | held_b == {0, 1, 2, 3}

    wait_until(split, what="a and b hold 2 queues each", interval=0.25)
    produce(cpp, addr, "CppShare", 40, body_prefix="shared-")

    def shared() -> set[str]:
        return {body(r) for r in a.messages() + b.messages() if body(r).startswith("shared-")}

    wait_until(lambda: len(shared()) == 40, what="a and b consumed the 40 shared- messages")
    # b's offsets reach the broker (every 5 s): whoever takes its queues goes on after them
    wait_until(
        lambda: all_committed(addr, "cg_share", "CppShare"), what="every offset committed", interval=0.25
    )
    b.stop()  # b leaves (unregisters)
    wait_until(
        lambda: holds(addr, "cg_share", a, "CppShare") == {0, 1, 2, 3},
        what="a took over all 4 queues",
        interval=0.25,
    )
    produce(cpp, addr, "CppShare", 20, body_prefix="after-")
    a.wait_for(
        lambda rs: len({body(r) for r in rs if "body" in r and body(r).startswith("after-")}) >= 20,
        what="a consumed the 20 after- messages",
    )
    a_msgs = [r for r in a.messages() if not body(r).startswith("warmup")]
    b_msgs = [r for r in b.messages() if not body(r).startswith("warmup")]
    shared_a = {r["queue_id"] for r in a_msgs if body(r).startswith("shared-")}
    shared_b = {r["queue_id"] for r in b_msgs if body(r).startswith("shared-")}
    assert shared_a and shared_b and not (shared_a & shared_b), "while both run, no queue is consumed twice"
    every = {body(r) for r in a_msgs + b_msgs}
    assert every >= {f"shared-{i}" for i in range(40)} | {f"after-{i}" for i in range(20)}
    assert {body(r) for r in a_msgs if body(r).startswith("after-")} == {f"after-{i}" for i in range(20)}


def test_pull_consumer_reads_everything(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    addr = finchmq_server.namesrv_addr
    sent = {"tags": "TagP", "keys_prefix": "pk", "prop": "color=c{i}"}
    produce(cpp, addr, "CppPull", 15, **sent)
    got = consume_all(cpp, "pull", addr, "CppPull", "cg_pull", expect=15, prop_key="color", timeout=60)
    assert sorted(body(r) for r in got) == sorted(f"body-{i}" for i in range(15))
    for r in got:
        check_fields(r, **sent)


def test_large_bodies_compressed_by_the_client_round_trip(finchmq_server: EmbeddedServer, cpp: Any) -> None:
    """The C++ client zlib-compresses bodies over 4 KiB, and whole batches over 4 KiB."""
    addr = finchmq_server.namesrv_addr
    produce(cpp, addr, "CppBig", 3, body_size=20000, body_prefix="big-")
    produce(cpp, addr, "CppBig", 16, mode="batch", batch_size=8, body_size=1500, body_prefix="bat-")
    messages = stored(finchmq_server, "CppBig")
    singles = [m for m in messages if m.sys_flag & 1]
    assert len(singles) == 3, "single bodies are stored as the client compressed them"
    assert all(zlib.decompress(m.body).startswith(b"big-") for m in singles)
    batch_items = [m for m in messages if not m.sys_flag & 1]
    assert sorted(m.body.rstrip(b"x").decode() for m in batch_items) == sorted(f"bat-{i}" for i in range(16))
    assert all(len(m.body) == 1500 for m in batch_items), "batch items are stored separately, uncompressed"
    received = consume_all(cpp, "push", addr, "CppBig", "cg_big", expect=19, timeout=60)
    got = sorted(base64.b64decode(r["body"]) for r in received)
    assert len(got) == 19
    assert sum(1 for b in got if len(b) == 20000 and b.startswith(b"big-")) == 3
    assert sum(1 for b in got if len(b) == 1500 and b.startswith(b"bat-")) == 16


def test_cpp_client_sees_system_busy_with_the_broker_remark(finchmq_server_factory: Any, cpp: Any) -> None:
    """Flow control reaches the C++ client as RocketMQ's does: code 2 (SYSTEM_BUSY) and the
    broker's remark, which librocketmq logs (the wheel's async error text is empty).

    Deterministic on a loaded machine: the first put holds the commit log for 1.5 s, the page
    cache counts as busy after 100 ms, and the C++ client issues its 30 async sends in a loop
    right after the first one (its route is then cached). Every later send either waits in the
    send queue, which fast failure clears with PCBUSY_CLEAN_QUEUE, or arrives while the store is
    busy and is refused with REJECTREQUEST; neither depends on how fast the machine is."""
    server = finchmq_server_factory({"injectPutDelayMillis": "1500", "osPageCacheBusyTimeOutMills": "100"})
    process = cpp(
        "produce",
        "--namesrv",
        server.namesrv_addr,
        "--topic",
        "CppBusy",
        "--count",
        "30",
        "--mode",
        "async",
        "--timeout-ms",
        "15000",  # every accepted send is answered, however slow the machine
    )
    records = process.finish()
    failed = [r for r in records if "error" in r]
    succeeded = [r for r in records if r.get("status") == 0]
    assert failed and succeeded and len(failed) + len(succeeded) == 30, records
    log = Path.home() / "logs" / "rocketmq-cpp" / f"{process.proc.pid}_rocketmq-cpp.log.0"
    busy = [line for line in log.read_text(errors="replace").splitlines() if "error code:2[" in line]
    assert busy, f"the C++ client logged no SYSTEM_BUSY answer; its errors: {[r['error'] for r in failed]}"
    assert all(
        re.search(
            r"remark:\[(REJECTREQUEST|OVERLOAD|PCBUSY_CLEAN_QUEUE|TIMEOUT_CLEAN_QUEUE|PC_SYNCHRONIZED)\]",
            line,
        )
        for line in busy
    ), busy[:3]
    # What the broker acknowledged is stored, and what it refused is not.
    assert {m.unique_key for m in stored(server, "CppBusy")} == {r["msg_id"] for r in succeeded}


async def _create_retry_topic(server: EmbeddedServer, group: str) -> None:
    assert server.broker is not None
    server.broker.topic_config_manager.create_topic_in_send_message_back_method(f"%RETRY%{group}", 1, 6)
    await server.broker.register_broker_all()


def test_always_failing_consumer_gets_growing_delays_then_the_dlq(
    finchmq_server_factory: Any, cpp: Any
) -> None:
    """retryMaxTimes=3: the message is seen 1 + 3 times, the retries at delay levels 3, 4, 5
    (1 s, 2 s, 3 s here: each waits at least that), then it is a dead letter with its original
    properties."""
    server = finchmq_server_factory({"messageDelayLevel": "1s 1s 1s 2s 3s 5s"})
    assert server.broker is not None
    server.broker.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig(group_name="cg_dlq", retry_max_times=3)
    )
    # An existing group: its retry topic is routable before the consumer starts (a brand-new
    # group's first retry waits for the C++ client's next route refresh, as with Apache RocketMQ).
    server.call(_create_retry_topic(server, "cg_dlq"))
    addr = server.namesrv_addr
    produce(cpp, addr, "CppDlq", 1, tags="TagX", keys_prefix="dk", prop="color=violet")
    consumer = consume(cpp, "push", addr, "CppDlq", "cg_dlq", fail_times=99, prop_key="color", timeout=300)
    consumer.wait_for(lambda rs: sum(1 for r in rs if "body" in r) >= 4, what="4 deliveries")
    # the 4th failure makes it a dead letter, not a 4th retry: nothing more can come after that
    wait_until(lambda: stored(server, "%DLQ%cg_dlq"), what="the dead letter stored")
    consumer.kill()
    seen = consumer.messages()
    assert len(seen) == 4, "seen maxReconsumeTimes + 1 times"
    assert [r["reconsume_times"] for r in seen] == [0, 1, 2, 3]
    # each retry went through the delay level of its attempt (queue level - 1 of the schedule topic) ...
    scheduled = sorted(stored(server, SCHEDULE_TOPIC), key=lambda m: m.reconsume_times)
    assert [(m.queue_id + 1, m.reconsume_times) for m in scheduled] == [(3, 1), (4, 2), (5, 3)]
    # ... and waited at least its delay (a loaded machine only makes it longer)
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(seen)]
    for gap, level_seconds in zip(gaps, [1, 2, 3], strict=True):
        assert gap >= level_seconds - 0.2, f"retry gaps {gaps}"
    for r in seen:
        assert (r["topic"], r["tags"], r["keys"], r["props"]["color"]) == ("CppDlq", "TagX", "dk0", "violet")
    [dead] = stored(server, "%DLQ%cg_dlq")
    assert (
        dead.body == b"body-0"
        and dead.properties["color"] == "violet"
        and dead.properties["RETRY_TOPIC"] == "CppDlq"
    )
    assert dead.tags == "TagX" and dead.keys == "dk0" and dead.reconsume_times == 4
