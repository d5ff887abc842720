"""The console's JSON API over HTTP (no browser) against a live ``finchmq server``: what each
page reads and does, and that the cluster's errors come back as JSON with their response code."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import (
    AdminClient,
    BlockingAdminClient,
    BlockingProducer,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageRequestMode,
    Producer,
)
from finchmq.console import Sampler
from finchmq.protocol.bodies import SubscriptionGroupConfig
from finchmq.protocol.topics import retry_topic
from finchmq.testing import EmbeddedServer
from finchmq.testing.process import free_port
from tests.waiting import eventually, wait_until

from .conftest import Cluster, DeadLetter


def test_cluster_lists_the_broker_with_its_figures(cluster: Cluster) -> None:
    data = cluster.ok("GET", "/api/cluster")
    assert data["nameServers"] == [cluster.namesrv]
    [broker] = data["brokers"]
    assert broker["cluster"] == "DefaultCluster" and broker["brokerId"] == 0
    assert broker["addr"] == f"127.0.0.1:{cluster.server.broker_port}"
    assert broker["version"] == "V4_9_8"
    assert int(broker["stats"]["pid"]) == cluster.server.pid
    topics = {t["topic"]: t["kind"] for t in cluster.ok("GET", "/api/topics")}
    assert topics["TBW102"] == "SYSTEM" and topics[broker["brokerName"]] == "SYSTEM"
    assert topics["DefaultCluster_REPLY_TOPIC"] == "SYSTEM"


def test_cluster_shows_the_timer_backlog(cluster: Cluster, name: str) -> None:
    """Timer messages an hour ahead are counted in the broker's pending timers (5.x
    ``timerCongestNum``, clusterList's ``#Timer(Progress)``); the POP figures are there too."""
    [before] = cluster.ok("GET", "/api/cluster")["brokers"]
    assert set(before["timer"]) == {"pending", "readBehind", "offsetBehind", "enqueueTps", "dequeueTps"}
    assert before["pop"]["inflight"] >= 0 and before["pop"]["revivePendingCheckPoints"] >= 0
    cluster.create_topic(name, queues=1)
    an_hour_ahead = int(time.time() * 1000) + 3_600_000
    with BlockingProducer(f"PG_{name}", namesrv_addr=cluster.namesrv) as producer:
        for i in range(2):
            producer.send(Message.create(name, f"later{i}".encode()).with_deliver_time_ms(an_hour_ahead))
    pending = before["timer"]["pending"] + 2
    timer = wait_until(
        lambda: (t := cluster.ok("GET", "/api/cluster")["brokers"][0]["timer"])["pending"] == pending and t,
        what=f"{pending} pending timers in the cluster's figures",
    )
    assert timer["offsetBehind"] == 0 and timer["readBehind"] >= 0


def test_topic_create_update_route_status_delete(cluster: Cluster, name: str) -> None:
    cluster.create_topic(name, queues=3)
    info = cluster.ok("GET", f"/api/topics/{name}")
    assert [
        (q["readQueueNums"], q["writeQueueNums"], q["permName"]) for q in info["route"]["queueDatas"]
    ] == [(3, 3, "RW-")]
    cluster.send(name, ["a", "b", "c", "d"])
    status = cluster.ok("GET", f"/api/topics/{name}")["status"]
    assert [q["queueId"] for q in status] == [0, 1, 2]
    assert sum(q["maxOffset"] - q["minOffset"] for q in status) == 4

    updated = cluster.ok("POST", "/api/topics", {"topic": name, "cluster": "DefaultCluster",
                                                 "readQueueNums": 5, "writeQueueNums": 5, "perm": 4})  # fmt: skip
    assert updated["brokers"] == [f"127.0.0.1:{cluster.server.broker_port}"]
    route = wait_until(
        lambda: (
            (r := cluster.ok("GET", f"/api/topics/{name}")["route"]["queueDatas"])[0]["readQueueNums"] == 5
            and r
        ),
        what="the updated route",
    )
    assert route[0]["permName"] == "R--"

    assert cluster.ok("DELETE", f"/api/topics/{name}", {}) == {"topic": name, "deleted": True}
    status_code, error = cluster.call("GET", f"/api/topics/{name}")
    assert status_code == 404
    assert error["codeName"] == "TOPIC_NOT_EXIST" and name in error["error"]


def test_bad_requests_and_cluster_errors_are_json(cluster: Cluster, name: str) -> None:
    status, error = cluster.call(
        "POST", "/api/topics", {"topic": name, "cluster": "DefaultCluster"}, json_type=False
    )
    assert status == 400 and "application/json" in error["error"]
    status, error = cluster.call("POST", "/api/topics", {"topic": "bad topic!", "cluster": "DefaultCluster"})
    assert status == 400 and "illegal characters" in error["error"]
    status, error = cluster.call("POST", "/api/topics", {"topic": name, "cluster": "NoSuchCluster"})
    assert status == 400 and "NoSuchCluster" in error["error"]
    status, error = cluster.call(
        "POST", "/api/topics", {"topic": name, "cluster": "DefaultCluster", "perm": 7}
    )
    assert status == 400 and "perm" in error["error"]
    status, error = cluster.call("DELETE", f"/api/topics/{name}", {})
    assert status == 404 and error["code"] == 17
    status, error = cluster.call("GET", f"/api/messages?topic={name}&key=k")
    assert status == 404 and error["codeName"] == "TOPIC_NOT_EXIST"
    status, error = cluster.call("GET", "/api/messages/NOT_AN_ID")
    assert status == 400 and "NOT_AN_ID" in error["error"]
    status, error = cluster.call("GET", "/api/nothing-here")
    assert status == 404 and "/api/nothing-here" in error["error"]


def test_send_then_find_by_key_time_and_id(cluster: Cluster, name: str) -> None:
    cluster.create_topic(name)
    before = int(time.time() * 1000) - 1000
    sent = cluster.ok("POST", "/api/messages", {"topic": name, "body": "héllo console", "tags": "TagA",
                                                "keys": "order-1 order-2"})  # fmt: skip
    assert sent["sendStatus"] == "SEND_OK"
    cluster.send(name, ["other"], keys="order-3")

    by_key = wait_until(
        lambda: cluster.ok("GET", f"/api/messages?topic={name}&key=order-2")["messages"], what="the key index"
    )
    assert [m["msgId"] for m in by_key] == [sent["msgId"]]
    assert "body" not in by_key[0], "lists leave bodies out"

    by_time = cluster.ok("GET", f"/api/messages?topic={name}&begin={before}")
    assert {m["keys"] for m in by_time["messages"]} == {"order-1 order-2", "order-3"}
    assert not by_time["truncated"]
    empty = cluster.ok("GET", f"/api/messages?topic={name}&begin=0&end={before}")
    assert empty["messages"] == []

    for msg_id, topic in ((sent["offsetMsgId"], ""), (sent["msgId"], name)):
        detail = cluster.ok("GET", f"/api/messages/{msg_id}?topic={topic}")
        message = detail["message"]
        assert message["body"] == "héllo console"
        assert message["properties"]["KEYS"] == "order-1 order-2"
        assert message["properties"]["TAGS"] == "TagA"
        assert message["offsetMsgId"] == sent["offsetMsgId"]


def test_group_progress_and_reset_offset_by_time(cluster: Cluster, name: str) -> None:
    group = f"G_{name}"
    cluster.create_topic(name, queues=2)
    cluster.send(name, [f"m{i}" for i in range(6)])
    seen: list[str] = []
    consumer = cluster.consumer(group, name, lambda msgs, ctx: seen.extend(m.body.decode() for m in msgs))
    try:
        wait_until(lambda: len(seen) >= 6, what="the consumer to read the 6 messages")
        online = wait_until(
            lambda: (
                (g := cluster.ok("GET", f"/api/groups/{group}"))["progress"]
                and g["progress"]["diffTotal"] == 0
                and g
            ),
            what="the group's offsets to reach the end",
        )
        assert [c["clientId"] for c in online["connection"]["connectionSet"]] == [consumer.consumer.client_id]
        assert online["connection"]["consumeType"] == "CONSUME_PASSIVELY"
        assert name in online["connection"]["subscriptionTable"]
        assert online["config"]["groupName"] == group
        assert online["requestModes"] == [] and online["pop"] == [], "it pulls: no mode set, nothing popped"
        listed = {g["group"]: g for g in cluster.ok("GET", "/api/groups")}
        assert listed[group]["clients"] == 1 and listed[group]["diffTotal"] == 0
        assert listed["TOOLS_CONSUMER"]["system"] and not listed[group]["system"]
    finally:
        consumer.shutdown()

    gone = cluster.ok("GET", f"/api/groups/{group}")
    assert gone["connection"] is None and "not online" in gone["connectionError"]
    reset = cluster.ok("POST", f"/api/groups/{group}/reset-offset", {"topic": name, "timestamp": 0})
    assert sorted((o["queueId"], o["offset"]) for o in reset["offsets"]) == [(0, 0), (1, 0)]
    progress = cluster.ok("GET", f"/api/groups/{group}")["progress"]
    assert progress["diffTotal"] == 6
    assert sum(q["diff"] for q in progress["queues"] if q["topic"] == name) == 6

    status, error = cluster.call("POST", f"/api/groups/{group}/reset-offset", {"topic": name})
    assert status == 400 and "timestamp" in error["error"]


def test_a_popping_group_shows_its_mode_and_popped_queues(cluster: Cluster, name: str) -> None:
    """A push consumer the broker has told to pop (5.x ``setConsumeMode``): the group's page
    shows the mode and the client's popped queue (``consumerStatus``'s pop detail), with the
    message it holds waiting for its ack, and the broker's inflight count has it."""
    group = f"G_{name}"
    cluster.create_topic(name, queues=2)
    with BlockingAdminClient(namesrv_addr=cluster.namesrv) as admin:
        admin.set_message_request_mode(name, group, MessageRequestMode.POP, cluster="DefaultCluster")
    release = threading.Event()
    seen: list[str] = []

    def hold(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body.decode() for m in msgs)
        release.wait(60)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = cluster.consumer(
        group,
        name,
        hold,
        client_rebalance=False,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    try:
        cluster.send(name, ["held"])
        wait_until(lambda: seen == ["held"], what="the consumer to pop the message")

        def popped(waiting: int) -> dict[str, Any] | None:
            info = cluster.ok("GET", f"/api/groups/{group}")
            return info if [q["waitAckCount"] for q in info["pop"]] == [waiting] else None

        info = wait_until(lambda: popped(1), what="the popped queue with the message waiting for its ack")
        assert info["requestModes"] == [{"topic": name, "mode": "POP", "popShareQueueNum": 0}]
        [queue] = info["pop"]
        assert queue["clientId"] == consumer.consumer.client_id
        assert (queue["topic"], queue["brokerName"], queue["queueId"]) == (name, "broker-a", -1)
        assert not queue["droped"] and queue["lastPopTimestamp"] > 0
        assert cluster.ok("GET", "/api/cluster")["brokers"][0]["pop"]["inflight"] >= 1
        release.set()
        wait_until(lambda: popped(0), what="the ack")
    finally:
        release.set()
        consumer.shutdown()


def test_dead_letter_listed_and_resent_to_an_online_consumer(cluster: Cluster, name: str) -> None:
    status, data = cluster.call("GET", f"/api/groups/G_{name}/dlq?begin=0")
    assert status == 200 and data["messages"] == [], "no DLQ topic yet: nothing, not an error"
    dead = DeadLetter(cluster, name)
    try:
        letter = dead.letter
        assert letter["topic"] == f"%DLQ%{dead.group}"
        assert letter["properties"]["RETRY_TOPIC"] == name
        dead.healed.set()
        dead.calls.clear()
        result = cluster.ok("POST", f"/api/groups/{dead.group}/dlq/resend", {"msgId": letter["offsetMsgId"]})
        assert result["consumeResult"] == "CR_SUCCESS", result
        assert result["clientId"] == dead.consumer.consumer.client_id
        # as in Java, only %RETRY% topics are reset to the original: the listener sees the DLQ's
        assert dead.calls == [(f"%DLQ%{dead.group}", "poison")], "the listener consumed the dead letter again"
    finally:
        dead.consumer.shutdown()
    status, error = cluster.call(
        "POST", f"/api/groups/{dead.group}/dlq/resend", {"msgId": letter["offsetMsgId"]}
    )
    assert status == 502 and error["codeName"] == "CONSUMER_NOT_ONLINE"


def test_the_ring_holds_an_hour_of_samples() -> None:
    admin = AdminClient(namesrv_addr="127.0.0.1:9876")
    assert Sampler(admin).samples.maxlen == 360
    assert Sampler(admin, interval=0.5, window=60).samples.maxlen == 120
    with pytest.raises(ValueError, match="interval"):
        Sampler(admin, interval=0)


async def test_sampler_measures_broker_tps_and_group_lag(finchmq_server: EmbeddedServer) -> None:
    ns = finchmq_server.namesrv_addr
    async with AdminClient(namesrv_addr=ns) as admin, Producer("PG_sampler", namesrv_addr=ns) as producer:
        await admin.create_topic("T_sampler", read_queue_nums=2, write_queue_nums=2, cluster="DefaultCluster")
        sampler = Sampler(admin, interval=0.2)
        first = await sampler.sample_once()
        assert list(first.brokers.values()) == [(None, None)], "no rate before a second sample"
        for i in range(20):
            await producer.send(Message.create("T_sampler", f"m{i}".encode()))
        # a group 20 messages behind, as a consumer that came and went leaves it
        await admin.create_subscription_group(
            SubscriptionGroupConfig(group_name="G_sampler"), cluster="DefaultCluster"
        )
        await admin.create_topic(
            retry_topic("G_sampler"), read_queue_nums=1, write_queue_nums=1, cluster="DefaultCluster"
        )
        await admin.update_consume_offsets(
            "G_sampler", dict.fromkeys((await admin.topic_status("T_sampler")).offset_table, 0)
        )
        second = await sampler.sample_once()
        [(put_tps, _)] = second.brokers.values()
        assert put_tps is not None and put_tps > 0
        series = sampler.broker_series()
        assert len(series["time"]) == 2 and series["series"]["broker-a in"][1] == put_tps
        sampler.start()
        await eventually(lambda: len(sampler.samples) >= 4, what="the sampler sampling on its own")
        await sampler.close()
        assert sampler.last_error is None
        lag = sampler.group_series("G_sampler")["series"]["lag"]
        assert lag[-1] == 20, lag


def test_finchmq_console_command_serves_and_stops(cluster: Cluster, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "console.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "finchmq.cli",
                "console",
                "--namesrv",
                cluster.namesrv,
                "--port",
                str(port),
                "--data-dir",
                str(tmp_path / "console"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "finchmq console at" in log.read_text() or proc.poll() is not None, what="start-up"
        )
        assert (
            f"finchmq console at http://127.0.0.1:{port}/ for name servers {cluster.namesrv}"
            in log.read_text()
        )
        other = Cluster(cluster.server)
        other.url = f"http://127.0.0.1:{port}/"
        assert other.ok("GET", "/api/cluster")["brokers"][0]["brokerName"] == "broker-a"
        again = subprocess.run(
            [sys.executable, "-m", "finchmq.cli", "console", "--namesrv", cluster.namesrv, "--port", str(port),
             "--data-dir", str(tmp_path / "other")],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert again.returncode == 1 and "cannot start" in again.stderr, again
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert "shutting down" in log.read_text()


def test_server_with_a_taken_console_port_says_so(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "finchmq.cli", "server", "--data-dir", str(tmp_path), "--namesrv-port",
             str(free_port()), "--broker-port", str(free_port()), "--bind", "127.0.0.1", "--console-port", str(port)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert result.returncode == 1, result
    assert f"web console port {port}" in result.stderr and "in use" in result.stderr, result.stderr
