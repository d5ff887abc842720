"""ACL 1.0 both ways with Apache RocketMQ 4.9.8 (Java):

* the Java client signing with ``AclClientRPCHook`` against ``finchmq server`` (``aclEnable`` and
  ``aclFilePath`` in its broker.conf): good keys send and consume, a wrong secret is refused;
* Java's mqadmin (keys from its ``conf/tools.yml``) editing finchmq's ACL file;
* finchmq's client against the Java broker with ``aclEnable=true``: its signature verifies there,
  and the Java broker's refusals (SYSTEM_ERROR, ``AclException: ...``) are what finchmq answers.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.client import (
    AclRefusedError,
    Message,
    MQBrokerError,
    Producer,
    PullConsumer,
    PullStatus,
    SessionCredentials,
)
from finchmq.protocol.acl import ACL_EXCEPTION
from finchmq.protocol.codes import ResponseCode
from finchmq.testing.process import ServerProcess
from tests.waiting import eventually

from .conftest import JavaCluster, java_rocketmq_home, run_java, run_java_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ACL_FILE = """\
globalWhiteRemoteAddresses: [10.250.250.*]
accounts:
  - accessKey: java_account
    secretKey: java_secret_1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [JavaAcl=PUB|SUB, JavaAclReadOnly=SUB]
    groupPerms: [java_acl_group=SUB]
  - accessKey: java_admin
    secretKey: java_admin_secret
    admin: true
"""
KEYS = SessionCredentials("java_account", "java_secret_1")
WRONG = SessionCredentials("java_account", "not_the_secret")


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("java-acl")
    acl_file = directory / "plain_acl.yml"
    acl_file.write_text(ACL_FILE, encoding="utf-8")
    with ServerProcess(conf={"aclEnable": "true", "aclFilePath": str(acl_file)}) as server:
        yield server


def test_the_java_client_signs_for_finchmq(java_classes: str, acl_server: ServerProcess) -> None:
    records = run_java(
        java_classes,
        "acl",
        acl_server.namesrv_addr,
        "JavaAcl",
        "java_acl_group",
        KEYS.access_key,
        KEYS.secret_key,
        "5",
    )
    sends = [r for r in records if r.get("mode") == "acl"]
    assert [s.get("status") for s in sends] == ["SEND_OK"] * 5, sends
    assert {r["key"] for r in records if r.get("instance") == "acl"} == {f"acl-{i}" for i in range(5)}


def test_the_java_client_with_a_wrong_secret_is_refused(java_classes: str, acl_server: ServerProcess) -> None:
    records = run_java(
        java_classes,
        "acl",
        acl_server.namesrv_addr,
        "JavaAcl",
        "java_acl_group",
        WRONG.access_key,
        WRONG.secret_key,
        "1",
    )
    [send] = records
    assert (
        "CODE: 1  DESC: org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=java_account"
        in send["error"]
    )


def java_mqadmin(
    java_classes: str, tmp_path: Path, keys: SessionCredentials, *commands: list[str]
) -> list[str]:
    """Java's mqadmin commands in one JVM, signing with ``keys`` from $ROCKETMQ_HOME/conf/tools.yml."""
    (tmp_path / "home" / "conf").mkdir(parents=True, exist_ok=True)
    for logback in (java_rocketmq_home() / "conf").glob("logback_*.xml"):
        shutil.copy(logback, tmp_path / "home" / "conf")
    (tmp_path / "home" / "conf" / "tools.yml").write_text(
        f"accessKey: {keys.access_key}\nsecretKey: {keys.secret_key}\n", encoding="utf-8"
    )
    script = tmp_path / "commands.txt"
    script.write_text("".join("\t".join(c) + "\n" for c in commands), encoding="utf-8")
    records = run_java(
        java_classes, "mqadmin", str(script), jvm_args=(f"-Drocketmq.home.dir={tmp_path / 'home'}",)
    )
    return [r["out"] for r in records]


def test_java_mqadmin_edits_finchmqs_acl(
    java_classes: str, acl_server: ServerProcess, tmp_path: Path
) -> None:
    ns, broker = acl_server.namesrv_addr, f"127.0.0.1:{acl_server.broker_port}"
    admin = SessionCredentials("java_admin", "java_admin_secret")
    update = ["updateAclConfig", "-a", "mqadmin_made", "-s", "mqadmin_secret", "-t", "JavaAcl=PUB|SUB",
              "-g", "mqadmin_group=SUB", "-b", broker, "-n", ns]  # fmt: skip
    [created, versions] = java_mqadmin(
        java_classes, tmp_path, admin, update, ["clusterAclConfigVersion", "-b", broker, "-n", ns]
    )
    assert f"create or update plain access config to {broker} success." in created, created
    assert "plain_acl.yml" in versions and "get broker's plain access config version success." in versions, (
        versions
    )
    records = run_java(
        java_classes, "acl", ns, "JavaAcl", "mqadmin_group", "mqadmin_made", "mqadmin_secret", "2"
    )
    assert [r.get("status") for r in records if r.get("mode") == "acl"] == ["SEND_OK"] * 2, records
    # a non-admin account may not
    [refused] = java_mqadmin(java_classes, tmp_path, KEYS, update)
    assert "Need admin permission for request code=50, but accessKey=java_account is not" in refused, refused


@pytest.fixture(scope="module")
def java_acl_cluster(
    java_home: Path, java_classpath: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaCluster]:
    with run_java_cluster(
        java_home, tmp_path_factory.mktemp("java-rocketmq-acl"), "aclEnable=true", acl_file=ACL_FILE
    ) as cluster:
        yield cluster


async def test_finchmq_signs_for_the_java_broker(java_acl_cluster: JavaCluster) -> None:
    namesrv = java_acl_cluster.namesrv_addr
    async with Producer(
        "java_acl_pg",
        namesrv_addr=namesrv,
        session_credentials=KEYS,
        instance_name=f"p-{time.monotonic_ns()}",
    ) as producer:
        sent = [
            await producer.send(Message.create("JavaAcl", f"m{i}".encode(), keys=f"k{i}")) for i in range(3)
        ]
    assert {r.send_status.name for r in sent} == {"SEND_OK"}
    async with PullConsumer(
        "java_acl_group",
        namesrv_addr=namesrv,
        session_credentials=KEYS,
        instance_name=f"c-{time.monotonic_ns()}",
    ) as consumer:

        async def pulled() -> set[bytes]:
            bodies: set[bytes] = set()
            for mq in await consumer.fetch_subscribe_message_queues("JavaAcl"):
                result = await consumer.pull(mq, "*", 0, 32)
                if result.pull_status is PullStatus.FOUND:
                    bodies |= {m.body for m in result.msg_found_list}
            return bodies

        # Java's broker acknowledges a send once it is in the commit log; its consume queue (what a
        # pull reads) is built a moment later, by another thread
        expected = {b"m0", b"m1", b"m2"}

        async def all_pulled() -> set[bytes] | None:
            bodies = await pulled()
            return bodies if bodies >= expected else None

        bodies = await eventually(all_pulled, what="the 3 messages pullable", interval=0.2)
    assert bodies == expected


async def test_the_java_broker_refuses_as_finchmq_does(java_acl_cluster: JavaCluster) -> None:
    """Java answers an ACL refusal SYSTEM_ERROR, its remark the AclException (and a stack frame)."""
    namesrv = java_acl_cluster.namesrv_addr
    for credentials, topic, message in [
        (WRONG, "JavaAcl", "Check signature failed for accessKey=java_account"),
        (KEYS, "JavaAclReadOnly", "No default permission for topic:JavaAclReadOnly"),
    ]:
        async with Producer(
            "java_acl_pg", namesrv_addr=namesrv, session_credentials=credentials,
            instance_name=f"p-{time.monotonic_ns()}", retry_times_when_send_failed=0,
        ) as producer:  # fmt: skip
            with pytest.raises(MQBrokerError) as caught:
                await producer.send(Message.create(topic, b"x"))
        assert isinstance(caught.value, AclRefusedError)
        assert caught.value.response_code == ResponseCode.SYSTEM_ERROR
        assert caught.value.remark.startswith(f"{ACL_EXCEPTION}: {message}"), caught.value.remark
