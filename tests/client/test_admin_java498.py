"""The mqadmin 4.9.8 commands ``finchmq admin`` gained last (issue 30), each against a live
server: updateTopicPerm, getConsumerConfig, producer, queryCq, sendMsgStatus, the clean
commands, the exports and startMonitoring. tests/java compares the output with Java's mqadmin."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from finchmq.cli.__main__ import main
from finchmq.client import ConsumeConcurrentlyStatus, Message
from finchmq.client.sync import BlockingProducer, BlockingPushConsumer
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.testing import EmbeddedServer
from tests.waiting import wait_until

from .conftest import FAST_CLIENT
from .test_admin import admin_cli


def test_update_topic_perm_by_broker_and_by_cluster(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ns, broker = server.namesrv_addr, server.broker_addr
    run = admin_cli(ns, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "2", "-w", "3")
    wait_until(lambda: name in run("topicList"), what=f"{name} routed")

    out = run("updateTopicPerm", "-t", name, "-b", broker, "-p", "4").splitlines()
    assert out == [
        f"update topic perm from 6 to 4 in {broker} success.",
        f"TopicConfig [topicName={name}, readQueueNums=2, writeQueueNums=3, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false].",
    ]
    perm = lambda: json.loads(run("topicRoute", "-t", name, "--json"))["queueDatas"][0]["perm"]  # noqa: E731
    wait_until(lambda: perm() == 4, what="the new perm in the route")
    assert (
        run("updateTopicPerm", "-t", name, "-b", broker, "-p", "4").strip()
        == "new perm equals to the old one!"
    )
    out = run("updateTopicPerm", "-t", name, "-c", "DefaultCluster", "-p", "6")
    assert out.strip() == f"update topic perm from 4 to 6 in {broker} success."
    wait_until(lambda: perm() == 6, what="the perm back in the route")
    out = run("updateTopicPerm", "-t", name, "-b", "127.0.0.1:1", "-p", "2")
    assert out.strip() == "updateTopicPerm error broker not exit or broker is not master!."


def test_get_consumer_config_prints_every_field_per_broker(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    group = f"g_{name}"
    run("updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "3", "-d", "false")
    lines = run("getConsumerConfig", "-g", group).splitlines()
    assert lines[0] == "=============================DefaultCluster:broker-a============================="
    fields = [(line[:40].rstrip(), line[40:]) for line in lines[1:]]
    assert fields == [
        ("groupName", f"=  {group}"),
        ("consumeEnable", "=  true"),
        ("consumeFromMinEnable", "=  false"),  # updateSubGroup -m false by default, as mqadmin
        ("consumeBroadcastEnable", "=  false"),
        ("retryQueueNums", "=  1"),
        ("retryMaxTimes", "=  3"),
        ("brokerId", "=  0"),
        ("whichBrokerWhenConsumeSlowly", "=  1"),
        ("notifyConsumerIdsChangedEnable", "=  true"),
    ]
    assert run("getConsumerConfig", "-g", f"nobody_{name}").strip() == ""


def test_producer_lists_each_group_s_instances(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    group = f"pg_{name}"
    with BlockingProducer(group, namesrv_addr=server.namesrv_addr, heartbeat_broker_interval=500) as producer:
        producer.send(Message("broker-a", b"x"))
        wait_until(lambda: f"producer group ({group})" in run("producer", "-b", server.broker_addr),
                   what="the producer's heartbeat")  # fmt: skip
        [line] = [x for x in run("producer", "-b", server.broker_addr).splitlines() if f"({group})" in x]
    assert re.fullmatch(
        rf"producer group \({group}\) instance : clientId=[^,]+@[^,]+,remoteIP=/127\.0\.0\.1:\d+, "
        r"language=PYTHON, version=\d+, lastUpdateTimestamp=\d+",
        line,
    ), line


def test_query_cq_prints_the_units_as_java(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "1", "-w", "1")
    wait_until(lambda: name in run("topicList"), what=f"{name} routed")
    with BlockingProducer(f"pg_{name}", namesrv_addr=server.namesrv_addr) as producer:
        sent = [producer.send(Message(name, b"m%d" % i)) for i in range(3)]
    out = run("queryCq", "-t", name, "-q", "0", "-i", "1", "-c", "5")
    rule = "======================================"
    units = [
        f"ConsumeQueueData{{physicOffset={decode_offset_msg_id(s.offset_msg_id).commit_log_offset}, "
        rf"physicSize=\d+, tagsCode=0, extendDataJson='null', bitMap='null', eval=false, msg='null'}}"
        for s in sent[1:]
    ]
    pattern = "\n".join(
        ["Queue data: ", "max: 3, min: 0", rule, "idx: 1", units[0], rule, "idx: 2", units[1], rule]
    )
    assert re.fullmatch(pattern, out.rstrip("\n")), out
    with_group = run("queryCq", "-t", name, "-q", "0", "-i", "0", "-c", "1", "-g", f"g_{name}").splitlines()
    assert with_group[:3] == ["Filter data: ", f"g_{name}@{name} is not online!", rule]
    assert main(["admin", "queryCq", "-t", name, "-q", "7", "-i", "0", "-n", server.namesrv_addr]) == 1
    assert f"7@{name} is not exist!" in capsys.readouterr().err


def test_query_cq_shows_an_online_group_s_subscription(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "1", "-w", "1")
    wait_until(lambda: name in run("topicList"), what=f"{name} routed")
    with BlockingProducer(f"pg_{name}", namesrv_addr=server.namesrv_addr) as producer:
        producer.send(Message(name, b"m"))
    group = f"g_{name}"
    consumer = BlockingPushConsumer(group, namesrv_addr=server.namesrv_addr, **FAST_CLIENT)
    consumer.subscribe(name, "TagA || TagB")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        wait_until(lambda: "Subscription data" in run("queryCq", "-t", name, "-q", "0", "-i", "0", "-g", group),
                   what="the consumer's heartbeat")  # fmt: skip
        out = run("queryCq", "-t", name, "-q", "0", "-i", "0", "-g", group)
    head = out.split("======================================")[0].splitlines()
    assert head[0] == "Subscription data: "
    assert head[1] == "{" and head[-1] == "}"
    assert '\t"subString":"TagA || TagB",' in head and f'\t"topic":"{name}"' in head
    assert "Filter data: \nnull\n" in out


def test_send_msg_status_prints_each_send(server: EmbeddedServer, capsys: pytest.CaptureFixture[str]) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    lines = run("sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "30").splitlines()
    assert len(lines) == 3
    for line in lines:
        assert re.fullmatch(
            r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]{32}, offsetMsgId=[0-9A-F]{32}, "
            r"messageQueue=MessageQueue \[topic=broker-a, brokerName=broker-a, queueId=0\], queueOffset=\d+\]",
            line,
        ), line


def test_clean_commands(server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """cleanUnusedTopic destroys the consume queues of a topic the broker no longer has;
    cleanExpiredCQ and deleteExpiredCommitLog answer success (what they remove: tests/store)."""
    run = admin_cli(server.namesrv_addr, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "1", "-w", "1")
    wait_until(lambda: name in run("topicList"), what=f"{name} routed")
    with BlockingProducer(f"pg_{name}", namesrv_addr=server.namesrv_addr) as producer:
        producer.send(Message(name, b"m"))
    controller = server.broker
    assert controller is not None

    async def forget_topic() -> None:  # the topic gone from the table, its queues left behind
        controller.topic_config_manager.delete_topic_config(name)

    server.call(forget_topic())
    assert controller.store.get_consume_queue(name, 0) is not None
    assert run("cleanUnusedTopic", "-b", server.broker_addr).strip() == "success"
    assert controller.store.get_consume_queue(name, 0) is None
    assert run("cleanUnusedTopic", "-c", "DefaultCluster").strip() == "success"
    assert run("cleanExpiredCQ", "-c", "DefaultCluster").strip() == "success"
    assert run("cleanExpiredCQ").strip() == "success"  # every cluster
    assert run("deleteExpiredCommitLog", "-b", server.broker_addr).strip() == "success"
    assert json.loads(run("deleteExpiredCommitLog", "--json")) == {server.broker_addr: True}


def test_exports_write_the_files(
    server: EmbeddedServer, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = admin_cli(server.namesrv_addr, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "2", "-w", "2")
    run("updateSubGroup", "-c", "DefaultCluster", "-g", f"g_{name}")
    d = str(tmp_path)

    assert run("exportConfigs", "-c", "DefaultCluster", "-f", d).strip() == f"export {d}/configs.json success"
    configs = json.loads((tmp_path / "configs.json").read_text())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    assert configs["brokerConfigs"]["broker-a"]["brokerRole"] == "ASYNC_MASTER"
    assert (tmp_path / "configs.json").read_text().startswith('{\n\t"clusterScale":{\n\t\t"namesrvSize":1,\n')

    assert (
        run("exportMetadata", "-c", "DefaultCluster", "-f", d).strip() == f"export {d}/metadata.json success"
    )
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["topicConfigTable"][name]["readQueueNums"] == 2
    assert f"g_{name}" in metadata["subscriptionGroupTable"]
    assert "TOOLS_CONSUMER" not in metadata["subscriptionGroupTable"]  # the broker's own groups left out
    assert (
        "TBW102" not in metadata["topicConfigTable"]
        and f"%RETRY%g_{name}" not in metadata["topicConfigTable"]
    )
    out = run("exportMetadata", "-b", server.broker_addr, "-t", "-s", "-f", d)
    assert out.strip() == f"export {d}/topic.json success"
    topics = json.loads((tmp_path / "topic.json").read_text())
    assert name in topics["topicConfigTable"] and "dataVersion" in topics
    run("exportMetadata", "-b", server.broker_addr, "-g", "-f", d)
    assert (
        f"g_{name}" in json.loads((tmp_path / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    )

    assert run("exportMetrics", "-c", "DefaultCluster", "-f", d).strip() == f"export {d}/metrics.json success"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    report = metrics["evaluateReport"]["broker-a"]
    assert (
        report["runtimeQuota"]["topicSize"] >= 1 and report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"
    )
    assert set(metrics["totalData"]["totalTps"]) == {
        "totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"
    }  # fmt: skip


def test_start_monitoring_reports_undone_messages(
    server: EmbeddedServer, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A round of mqadmin's monitor: the lag of an online group, per topic."""
    ns = server.namesrv_addr
    run = admin_cli(ns, capsys)
    run("updateTopic", "-t", name, "-c", "DefaultCluster", "-r", "1", "-w", "1")
    wait_until(lambda: name in run("topicList"), what=f"{name} routed")
    group = f"g_{name}"
    consumer = BlockingPushConsumer(group, namesrv_addr=ns, **FAST_CLIENT)
    consumer.subscribe(name, "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer, BlockingProducer(f"pg_{name}", namesrv_addr=ns) as producer:
        producer.send(Message(name, b"m"))
        wait_until(lambda: f"%RETRY%{group}" in run("topicList"), what="the group's retry topic")
        wait_until(lambda: [q["diff"] for q in json.loads(run("consumerProgress", "-g", group, "--json"))["queues"]
                            if q["topic"] == name] == [0], what="the message consumed and its offset stored")  # fmt: skip
        out = run("startMonitoring", "--firstDelay", "0", "--rounds", "1").splitlines()
    assert out[0] == "[MONITOR] =========================================beginRound"
    assert out[-1] == "[MONITOR] =========================================endRound"
    assert (
        f"[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={name}, undoneMsgsTotal=0, "
        "undoneMsgsSingleMQ=0, undoneMsgsDelayTimeMills=0]"
    ) in out
