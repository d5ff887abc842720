"""AdminClient and the ``finchmq admin`` commands (mqadmin's names), tables and ``--json``."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from finchmq.cli.__main__ import main
from finchmq.cli.admin.cluster import timer_progress
from finchmq.client import (
    AdminClient,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    NoRouteError,
    Producer,
)
from finchmq.client.sync import BlockingAdminClient, BlockingProducer, BlockingPushConsumer
from finchmq.protocol.bodies import ExponentialRetryPolicy, GroupRetryPolicy, GroupRetryPolicyType
from finchmq.protocol.codes import ResponseCode
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

from .conftest import FAST_CLIENT, create_topic, produce


async def test_topics_routes_and_status(server: EmbeddedServer, namesrv: str, name: str) -> None:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        written = await admin.create_topic(name, read_queue_nums=3, write_queue_nums=3)
        assert written == [server.broker_addr]
        await create_topic(namesrv, name, 3)  # waits for the route
        route = await admin.topic_route(name)
        assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [("broker-a", 3, 6)]
        assert name in await admin.topic_list()
        await produce(namesrv, name, 6)
        status = await admin.topic_status(name)
        assert sum(o.max_offset for o in status.offset_table.values()) == 6
        assert sorted(mq.queue_id for mq in status.offset_table) == [0, 1, 2]
        await admin.delete_topic(name)
        with pytest.raises(NoRouteError):
            await admin.topic_route(name)
        info = await admin.cluster_info()
        assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
        stats = await admin.broker_runtime_stats(server.broker_addr)
        assert int(stats["msgPutTotalTodayNow"]) >= 6
        await admin.update_broker_config(server.broker_addr, {"longPollingEnable": "false"})
        assert (await admin.get_broker_config(server.broker_addr))["longPollingEnable"] == "false"


async def test_messages_by_key_and_id(namesrv: str, name: str) -> None:
    async with Producer("pg", namesrv_addr=namesrv, instance_name="admin-msg") as p:
        sent = await p.send(Message.create(name, b"findme", keys="order-42 k2", tags="T"))
        await p.send(Message.create(name, b"other", keys="order-43"))
    async with AdminClient(namesrv_addr=namesrv) as admin:
        by_key = await admin.query_message(name, "order-42")
        assert [m.body for m in by_key] == [b"findme"]
        by_offset_id = await admin.view_message(sent.offset_msg_id)
        assert by_offset_id.body == b"findme" and by_offset_id.unique_key == sent.msg_id
        by_client_id = await admin.view_message(sent.msg_id, topic=name)
        assert by_client_id.msg_id == sent.offset_msg_id


def admin_cli(namesrv: str, capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """``finchmq admin ARGS -n NAMESRV`` in-process; its stdout, after checking it exited 0."""

    def run(*args: str) -> str:
        code = main(["admin", *args, "-n", namesrv])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return captured.out

    return run


def test_cli_admin_commands(server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    ns = server.namesrv_addr
    group = f"g_{name}"

    run = admin_cli(ns, capsys)

    out = run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "2", "-w", "2")
    assert f"create topic to {server.broker_addr} success." in out
    wait_until(lambda: name in run("topicList"), what=f"{name} in topicList")
    route = json.loads(run("topicRoute", "-t", name, "--json"))
    assert route["queueDatas"][0]["readQueueNums"] == 2
    sent = json.loads(
        run("sendMessage", "-t", name, "-p", "hello cli", "-k", "cli-key", "-c", "TagX", "--json")
    )
    assert sent["sendStatus"] == "SEND_OK"
    assert "#Broker Name" in run("topicStatus", "-t", name)
    read = json.loads(run("consumeMessage", "-t", name, "-c", "5", "--json"))
    assert [m["body"] for m in read] == ["hello cli"] and read[0]["tags"] == "TagX"
    found = json.loads(run("queryMsgByKey", "-t", name, "-k", "cli-key", "--json"))
    assert found[0]["msgId"] == sent["msgId"]
    shown = run("queryMsgById", "-i", sent["offsetMsgId"]).splitlines()
    assert (
        shown[0].split() == ["OffsetID:", sent["offsetMsgId"]] and "Keys:                [cli-key]" in shown
    )
    body_path = next(line.split()[-1] for line in shown if line.startswith("Message Body Path:"))
    assert Path(body_path).read_bytes() == b"hello cli"  # mqadmin writes the body to a file
    assert shown[-1] == "WARN: No Consumer"
    assert "DefaultCluster" in run("clusterList")
    assert "brokerVersionDesc" in run("brokerStatus", "-b", server.broker_addr)
    assert "OK" in run(
        "updateBrokerConfig", "-b", server.broker_addr, "-k", "longPollingEnable", "-v", "true"
    )

    # a live group: connection, progress with lag, reset by time
    consumed: list[bytes] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        consumed.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS  # (None would mean RECONSUME_LATER)

    with BlockingProducer("pg", namesrv_addr=ns, instance_name="cli-producer") as producer:
        for i in range(6):
            producer.send(Message(name, f"p{i}".encode()))
        consumer = BlockingPushConsumer(
            group, namesrv_addr=ns, instance_name="cli-consumer", persist_consumer_offset_interval=300
        )
        consumer.subscribe(name)
        consumer.register_message_listener(listener)
        everything = sorted([b"hello cli"] + [f"p{i}".encode() for i in range(6)])
        with consumer:
            wait_until(lambda: len(consumed) >= 7, what="the consumer got the 7 messages")
            assert sorted(consumed) == everything
            conn = run("consumerConnection", "-g", group)
            assert "cli-consumer" in conn and "PYTHON" in conn and f"%RETRY%{group}" in conn

            def committed() -> dict[str, object] | None:
                progress = json.loads(run("consumerProgress", "-g", group, "--json"))
                offsets = sum(q["consumerOffset"] for q in progress["queues"] if q["topic"] == name)
                return progress if progress["diffTotal"] == 0 and offsets == 7 else None

            # the offsets reach the broker with the consumer's next persist (every 300 ms)
            progress = wait_until(committed, what="the group's 7 offsets committed on the broker")
            assert progress["diffTotal"] == 0
            table = json.loads(run("resetOffsetByTime", "-g", group, "-t", name, "-s", "0", "--json"))
            assert sum(q["offset"] for q in table) == 0
            wait_until(  # the reset made the consumer read everything again
                lambda: all(Counter(consumed)[body] >= 2 for body in everything),
                what="each of the 7 messages consumed again",
            )
    assert sorted(set(consumed)) == everything
    assert run("deleteTopic", "-t", name).startswith("delete topic")


def test_cli_errors_exit_nonzero(server: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admin", "topicRoute", "-t", "NoSuchTopic", "-n", server.namesrv_addr]) == 1
    assert "No route info of this topic: NoSuchTopic" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["admin", "topicRoute"])
    assert info.value.code == 2


async def test_consumer_progress_shows_lag(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    group = f"g_{name}"
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await produce(namesrv, name, 10)
        from finchmq.client import PullConsumer  # noqa: PLC0415

        async with PullConsumer(group, namesrv_addr=namesrv, instance_name="lag") as c:
            c.update_consume_offset(MessageQueue(name, "broker-a", 0), 1)
            c.update_consume_offset(MessageQueue(name, "broker-a", 1), 1)
        stats = await admin.consume_stats(group, name)
    assert stats.compute_total_diff() == 8


def test_cli_update_sub_group_5x_options(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """mqadmin 5.3.3's ``-o/--consumeMessageOrderly`` and ``-p/--groupRetryPolicy``."""
    ns, broker = server.namesrv_addr, server.broker_addr
    run = admin_cli(ns, capsys)
    policy = '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}'
    out = run("updateSubGroup", "-b", broker, "-g", f"g5_{name}", "-o", "true", "-p", policy)
    assert "consumeMessageOrderly=true" in out and '"type":"EXPONENTIAL"' in out
    run("updateSubGroup", "-b", broker, "-g", f"g4_{name}", "--consumeMessageOrderly", "false")
    run("updateSubGroup", "-b", broker, "-g", f"g3_{name}")
    with BlockingAdminClient(namesrv_addr=ns) as admin:
        groups = admin.subscription_groups()
    fifo = groups[f"g5_{name}"]
    assert fifo.consume_message_orderly is True
    assert fifo.group_retry_policy == GroupRetryPolicy(
        type=GroupRetryPolicyType.EXPONENTIAL,
        exponential_retry_policy=ExponentialRetryPolicy(initial=1000, max=60_000, multiplier=3),
    )
    assert groups[f"g4_{name}"].consume_message_orderly is False
    assert groups[f"g3_{name}"].consume_message_orderly is None  # not given: 4.9.8's form
    assert groups[f"g3_{name}"].group_retry_policy is None
    with pytest.raises(SystemExit):
        main(["admin", "updateSubGroup", "-b", broker, "-g", "x", "-p", "{bad", "-n", ns])
    assert "GroupRetryPolicy" in capsys.readouterr().err


def test_cli_group_perm_and_name_server_commands(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mqadmin commands added for operators (issue 18), each against the live server."""
    ns, broker = server.namesrv_addr, server.broker_addr
    group = f"g_{name}"

    run = admin_cli(ns, capsys)

    out = run("updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "3", "-q", "2")
    assert f"create subscription group to {broker} success." in out
    assert f"groupName={group}" in out and "retryMaxTimes=3" in out and "consumeBroadcastEnable=false" in out
    assert run("getBrokerConfig", "-b", broker).startswith(f"============{broker}")
    config = json.loads(run("getBrokerConfig", "-c", "DefaultCluster", "--json"))
    assert config[broker]["brokerName"] == "broker-a"

    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "2", "-w", "2")
    wait_until(lambda: "DefaultCluster" in run("topicClusterList", "-t", name), what="the topic's cluster")
    assert run("topicClusterList", "-t", name).split() == ["DefaultCluster"]

    with BlockingProducer("pg_" + name, namesrv_addr=ns, heartbeat_broker_interval=500) as producer:
        for i in range(3):
            producer.send(Message(name, b"m%d" % i))
        wait_until(  # registered by its next heartbeat
            lambda: main(["admin", "producerConnection", "-g", "pg_" + name, "-t", name, "-n", ns]) == 0,
            what="the producer's heartbeat reached the broker",
        )
        capsys.readouterr()
        connections = run("producerConnection", "-g", "pg_" + name, "-t", name)
        assert connections.startswith("0001  ") and "PYTHON" in connections

        sent = producer.send(Message(name, b"unique"))
    described = run("queryMsgByUniqueKey", "-i", sent.msg_id, "-t", name).splitlines()
    assert described[0] == f"Topic:               {name}"  # no OffsetID line, as mqadmin
    assert f"Message Body Path:   /tmp/rocketmq/msgbodys/{sent.msg_id}" in described
    first = run("queryMsgByOffset", "-t", name, "-b", "broker-a", "-i", "0", "-o", "0").splitlines()
    assert "Queue Offset:        0" in first and "Queue ID:            0" in first
    assert first[-1] == "WARN: No Consumer"  # no group consumes the topic yet
    rt = run("checkMsgSendRT", "-t", name, "-a", "3", "-s", "16").splitlines()
    assert rt[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"] and len(rt) == 5
    assert all(line.split()[2] == "true" for line in rt[1:4]) and rt[4].startswith("Avg RT: ")
    skipped = run("skipAccumulatedMessage", "-g", group, "-t", name).splitlines()
    assert skipped[0].split() == ["#brokerName", "#queueId", "#offset"] and len(skipped) == 3
    cloned = run("cloneGroupOffset", "-s", group, "-d", group + "_copy", "-t", name, "-o", "true")
    assert (
        cloned.strip()
        == f"clone group offset success. srcGroup[{group}], destGroup=[{group}_copy], topic[{name}]"
    )
    progress = json.loads(run("consumerProgress", "-g", group + "_copy", "-t", name, "--json"))
    assert progress and all(row["consumerOffset"] == row["brokerOffset"] for row in progress["queues"]), (
        progress
    )

    stats = run("brokerConsumeStats", "-b", broker)
    assert stats.splitlines()[0].split() == [
        "#Topic", "#Group", "#Broker", "Name", "#QID", "#Broker", "Offset", "#Consumer", "Offset", "#Diff", "#LastTime",
    ]  # fmt: skip
    assert "Diff Total:" in stats

    wiped = run("wipeWritePerm", "-b", "broker-a")
    assert f"wipe write perm of broker[broker-a] in name server[{ns}] OK," in wiped
    route = json.loads(run("topicRoute", "-t", name, "--json"))
    assert route["queueDatas"][0]["perm"] & 2 == 0, "no new sends until the write permission is back"
    assert f"add write perm of broker[broker-a] in name server[{ns}] OK," in run(
        "addWritePerm", "-b", "broker-a"
    )
    assert json.loads(run("topicRoute", "-t", name, "--json"))["queueDatas"][0]["perm"] & 2

    settings = json.loads(run("getNamesrvConfig", "--json"))[ns]
    assert settings["orderMessageEnable"] == "false"
    assert "update name server config success!" in run(
        "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"
    )
    assert json.loads(run("getNamesrvConfig", "--json"))[ns]["orderMessageEnable"] == "true"
    run("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")

    assert run("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", name, "-v", "broker-a:2").strip() == (
        "create or update kv config to namespace success."
    )
    assert (
        run("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", name).strip()
        == "delete kv config from namespace success."
    )

    allocation = json.loads(run("allocateMQ", "-t", name, "-i", "a@1,b@2,c@3", "--json"))["result"]
    assert sorted(len(queues) for queues in allocation.values()) == [0, 1, 1]  # 2 queues, 3 clients
    assert "update orderConf success." in run("updateOrderConf", "-t", name, "-m", "put", "-v", "broker-a:2")
    assert "orderConf=[broker-a:2]" in run("updateOrderConf", "-t", name, "-m", "get")
    run("updateOrderConf", "-t", name, "-m", "delete")
    assert "orderConf=[None]" in run("updateOrderConf", "-t", name, "-m", "get")

    deleted = run("deleteSubGroup", "-c", "DefaultCluster", "-g", group)
    assert (
        f"delete subscription group [{group}] from broker [{broker}] in cluster [DefaultCluster] success."
        in deleted
    )
    assert f"delete topic [%RETRY%{group}] from NameServer success." in deleted


def test_cli_messages_stats_and_consumer_status(
    server: EmbeddedServer,
    name: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """printMsg, printMsgByQueue, statsAll, consumerStatus and clusterRT (issue 18) against the
    live server; tests/java compares their output with Java's mqadmin."""
    ns = server.namesrv_addr
    group = f"g_{name}"
    monkeypatch.chdir(tmp_path)  # consumerStatus writes <now>/<clientId> files, as mqadmin
    run = admin_cli(ns, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "1", "-w", "1")
    with BlockingProducer("pg_" + name, namesrv_addr=ns) as producer:
        for i, tag in enumerate(["TagA", "TagA", "TagB", "TagA"]):
            producer.send(Message.create(name, f"body-{i}".encode(), tags=tag))

    printed = run("printMsg", "-t", name).splitlines()
    assert (
        printed[0] == f"minOffset=0, maxOffset=4, MessageQueue [topic={name}, brokerName=broker-a, queueId=0]"
    )
    messages = [line for line in printed if line.startswith("MSGID: ")]
    assert [m.rsplit(" BODY: ", 1)[1] for m in messages] == [f"body-{i}" for i in range(4)]
    assert all("MessageExt [brokerName=broker-a, queueId=0," in m and "TAGS=Tag" in m for m in messages)
    assert "body=[98, 111, 100, 121, 45, 48]" in messages[0]  # Arrays.toString of b"body-0"
    assert printed[-1] == "-" * 56
    only_b = run("printMsg", "-t", name, "-s", "TagB", "-d", "false").splitlines()
    assert [line.rsplit(" BODY: ", 1)[1] for line in only_b if line.startswith("MSGID: ")] == [
        "NOT PRINT BODY"
    ]

    by_tag = run("printMsgByQueue", "-t", name, "-a", "broker-a", "-i", "0", "-f", "true").splitlines()
    assert [line.split() for line in by_tag] == [
        ["Tag:", "TagA", "Count:", "3"],
        ["Tag:", "TagB", "Count:", "1"],
    ]
    with_bodies = run("printMsgByQueue", "-t", name, "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true")
    assert [line.rsplit(" BODY: ", 1)[1] for line in with_bodies.splitlines()] == [
        f"body-{i}" for i in range(4)
    ]

    stats = run("statsAll", "-t", name).splitlines()
    assert stats[0].split()[:3] == ["#Topic", "#Consumer", "Group"]
    [row] = stats[1:]
    assert row.split()[0] == name and row.split()[-1] == "NO_CONSUMER" and int(row.split()[-2]) >= 1

    consumer = BlockingPushConsumer(group, namesrv_addr=ns, instance_name="status", **FAST_CLIENT)
    consumer.subscribe(name, "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        wait_until(
            lambda: main(["admin", "consumerConnection", "-g", group, "-n", ns]) == 0,
            what="the consumer's heartbeat reached the broker",
        )
        capsys.readouterr()
        status = run("consumerStatus", "-g", group).splitlines()
        assert status[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
        index, client_id, version, path = status[1].split()
        assert (index, version) == ("1", "V4_9_8") and client_id.endswith("@status")
        assert (tmp_path / path).read_text().startswith("#Consumer Properties#\n")
        assert "Same subscription in the same group of consumer" in status

        def with_queues() -> str | None:
            out = run("consumerStatus", "-g", group, "-i", client_id)
            return out if "ProcessQueueInfo [commitOffset=" in out else None

        # its queues are listed once its first rebalance (after its heartbeat) is done
        one = wait_until(with_queues, what="the consumer's queues in its running info")
        assert one.startswith("#Consumer Properties#\n")
        subscriptions = one.split("#Consumer Subscription#\n")[1].split("\n\n")[0].splitlines()
        assert subscriptions == [  # Java's TreeSet order: topic@expression
            f"001 Topic: {'%RETRY%' + group:<40} ClassFilter: false    SubExpression: *",
            f"002 Topic: {name:<40} ClassFilter: false    SubExpression: *",
        ]
        assert "#Consumer MQ Detail#" in one and "ProcessQueueInfo [commitOffset=" in one
        # A message sent now is consumed; its track turns CONSUMED once the group has committed
        # past it (waited for: when that happens depends on the machine).
        with BlockingProducer("pg2_" + name, namesrv_addr=ns) as producer:
            producer.send(Message.create(name, b"late", tags="TagA"))
        consumed = f"MessageTrack [consumerGroup={group}, trackType=CONSUMED, exceptionDesc=null]"
        wait_until(
            lambda: (
                run("queryMsgByOffset", "-t", name, "-b", "broker-a", "-i", "0", "-o", "4").splitlines()[-1]
                == consumed
            ),
            what="the group committed past the new message",
        )
        statsjson = json.loads(run("statsAll", "-t", name, "--json"))
        assert [(r["topic"], r["group"]) for r in statsjson] == [(name, group)]

    rt = run("clusterRT", "-a", "3", "--rounds", "1").splitlines()
    assert rt[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"]
    assert rt[1].split()[:2] == ["DefaultCluster", "broker-a"] and rt[1].split()[3:] == ["3", "0"]


async def test_view_broker_stats_data(server: EmbeddedServer, namesrv: str, name: str) -> None:
    """VIEW_BROKER_STATS_DATA as Java answers it: a new item is sampled when it is created, so the
    day's figure holds the first put until the hourly sample; an unknown item is SYSTEM_ERROR."""
    await create_topic(namesrv, name, 1)
    await produce(namesrv, name, 3)
    group = f"g_{name}"
    async with AdminClient(namesrv_addr=namesrv) as admin:
        put = await admin.view_broker_stats_data(server.broker_addr, "TOPIC_PUT_NUMS", name)
        assert put.stats_day is not None and put.stats_day.sum == 1
        assert put.stats_minute is not None and put.stats_minute.sum in (1, 3)  # 3 once sampled
        from finchmq.client import PullConsumer  # noqa: PLC0415

        async with PullConsumer(group, namesrv_addr=namesrv, instance_name="stats") as consumer:
            result = await consumer.pull(MessageQueue(name, "broker-a", 0), "*", 0, 32)
            assert len(result.msg_found_list) == 3
        got = await admin.view_broker_stats_data(server.broker_addr, "GROUP_GET_NUMS", f"{name}@{group}")
        assert got.stats_day is not None and got.stats_day.sum == 3
        # the pull counted in the runtime figures too (they read 0 before: counted after release)
        assert int((await admin.broker_runtime_stats(server.broker_addr))["msgGetTotalTodayNow"]) == 3
        with pytest.raises(MQBrokerError) as info:
            await admin.view_broker_stats_data(server.broker_addr, "GROUP_GET_NUMS", f"{name}@nobody")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert f"The stats <GROUP_GET_NUMS> <{name}@nobody> not exist" in str(info.value)


def test_timer_progress_is_5x_cluster_list_s_column() -> None:
    stats = {
        "timerReadBehind": "2",
        "timerOffsetBehind": "15",
        "timerCongestNum": "15000",
        "timerEnqueueTps": "1234.56",
        "timerDequeueTps": "0.0",
    }
    assert timer_progress(stats) == "2-15(1.5w, 1234.6, 0.0)"
    assert timer_progress({}) == "0-0(0.0w, 0.0, 0.0)"  # a 4.x broker: zeros, as Java's


def test_cli_cluster_list_and_broker_status_show_the_timer_backlog(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    an_hour_ahead = int(time.time() * 1000) + 3_600_000
    with BlockingProducer("pg", namesrv_addr=server.namesrv_addr, instance_name="cli-timer") as producer:
        for i in range(3):
            producer.send(Message(name, f"t{i}".encode()).with_deliver_time_ms(an_hour_ahead))

    def backlog() -> dict[str, str] | None:
        stats = json.loads(run("brokerStatus", "-b", server.broker_addr, "--json"))[server.broker_addr]
        return stats if stats["timerCongestNum"] == "3" else None

    stats = wait_until(
        backlog, what="brokerStatus shows the 3 pending timers (timerCongestNum)", interval=0.2
    )
    assert stats["timerOffsetBehind"] == "0"
    status = run("brokerStatus", "-b", server.broker_addr)
    assert re.search(r"^timerCongestNum\s+: 3$", status, re.M)
    for key in ("timerReadBehind", "timerOffsetBehind", "timerEnqueueTps", "timerDequeueTps"):
        assert re.search(rf"^{key}\s+: ", status, re.M)
    table = run("clusterList").splitlines()
    assert table[0].split()[-1] == "#Timer(Progress)"
    row = next(line for line in table if server.broker_addr in line)
    assert re.search(r"  \d+-0\(0\.0w, \d+\.\d, \d+\.\d\)$", row)
    listed = json.loads(run("clusterList", "--json"))
    assert [b["stats"]["timerCongestNum"] for b in listed] == ["3"]


def test_cli_update_topic_attributes(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """mqadmin 5.x ``updateTopic -a``: the modification reaches the broker, stored by real key."""
    run = admin_cli(server.namesrv_addr, capsys)

    async def stored() -> dict[str, str] | None:
        config = server.broker.topic_config_manager.select_topic_config(name)
        assert config is not None
        return config.attributes

    out = run("updateTopic", "-t", name, "-b", server.broker_addr, "-a", "+message.type=FIFO", "--json")
    assert json.loads(out)["attributes"] == "+message.type=FIFO"
    assert server.call(stored()) == {"message.type": "FIFO"}
    run("updateTopic", "-t", name, "-b", server.broker_addr, "-a=-message.type")
    assert server.call(stored()) is None
    assert main(["admin", "updateTopic", "-t", name, "-b", server.broker_addr, "-a", "message.type=FIFO",
                 "-n", server.namesrv_addr]) != 0  # fmt: skip
    assert "format is wrong" in capsys.readouterr().err
