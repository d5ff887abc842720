"""The real Apache RocketMQ 4.9.8 (Java client, name server, broker, mqadmin) from
``../shared/java-rocketmq`` (or ``$FINCHMQ_JAVA_ROCKETMQ``), for interop tests both ways.

Every test here skips, saying why, when that folder or a JDK is absent (a user's fresh clone).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import AdminClient
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import ClusterInfo
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.topics import RMQ_SYS_TRANS_OP_HALF_TOPIC
from finchmq.remoting import RemotingClient, RemotingError
from finchmq.remoting.loop import run
from finchmq.testing.process import ServerProcess, free_port
from tests.client.conftest import TEST_BROKER
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).resolve().parent / "src"
FAST_RETRIES = {"messageDelayLevel": " ".join(["1s"] * 18), **TEST_BROKER}
# A broker checks a half message once it is transactionTimeOut old and still undecided, and a
# producer's commit or rollback (END_TRANSACTION) is oneway. Transaction tests start with no check
# at all (a day), and shorten it once the broker has recorded what the producer decided: then
# only the undecided ones can be checked, however slow the machine.
NO_CHECK_YET_MS = str(24 * 3600 * 1000)


async def ended_transactions(namesrv: str, broker_addr: str) -> int:
    """How many transactions the broker has ended (committed or rolled back): the messages of its
    op half topic (queue 0; not routed, so asked of the broker)."""
    async with AdminClient(namesrv_addr=namesrv) as admin:
        mq = MessageQueue(RMQ_SYS_TRANS_OP_HALF_TOPIC, "", 0)
        return await admin.instance.api.get_max_offset(broker_addr, mq, 5000)


async def set_transaction_timeout(namesrv: str, broker_addr: str, millis: str) -> None:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.update_broker_config(broker_addr, {"transactionTimeOut": millis})


def java_rocketmq_home() -> Path:
    return Path(os.environ.get("FINCHMQ_JAVA_ROCKETMQ", REPO.parent / "shared" / "java-rocketmq"))


@pytest.fixture(scope="session")
def java_home() -> Path:
    home = java_rocketmq_home()
    if not (home / "run.sh").exists():
        pytest.skip(
            f"Apache RocketMQ 4.9.8 (Java) not found at {home}; set FINCHMQ_JAVA_ROCKETMQ to run these"
        )
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("no JDK (java and javac) on the PATH")
    return home


@pytest.fixture(scope="session")
def java_classpath(java_home: Path) -> str:
    classpath_file = Path(os.environ.get("TMPDIR", "/tmp")) / "rocketmq-java.classpath"
    if not classpath_file.exists():
        subprocess.run([str(java_home / "setup.sh")], check=True, capture_output=True, timeout=900)
    return classpath_file.read_text().strip()


@pytest.fixture(scope="session")
def java_classes(java_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """tests/java/src/*.java compiled against the Java client; returns the full classpath."""
    out = tmp_path_factory.mktemp("java-classes")
    sources = [str(p) for p in sorted(SOURCES.glob("*.java"))]
    subprocess.run(
        ["javac", "-nowarn", "-cp", java_classpath, "-d", str(out), *sources], check=True, timeout=300
    )
    return f"{java_classpath}:{out}"


def run_java(
    classpath: str, *args: str, timeout: float = 300, jvm_args: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Run ``Interop ARGS`` and return the JSON objects it printed (Java's own log lines skipped).
    ``timeout`` only guards against a hang: Interop's own waits (at most 150 s) end first.

    The client's home (logs, broadcasting offsets) is a fresh directory: nothing carries over
    from an earlier run."""
    with tempfile.TemporaryDirectory(prefix="finchmq-java-client-") as home:
        done = subprocess.run(
            ["java", "-Xmx256m", f"-Duser.home={home}", f"-Drocketmq.client.localOffsetStoreDir={home}/offsets",
             *jvm_args, "-cp", classpath, "Interop", *args],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, f"Interop {args} exited {done.returncode}: {done.stderr[-2000:]}"
    assert lines and lines[-1].get("done") is True, f"Interop {args} did not finish: {lines[-3:]}"
    return lines[:-1]


@pytest.fixture(scope="session")
def finchmq_server() -> Iterator[ServerProcess]:
    """One ``finchmq server`` for the Java client tests; retries come back after 1 s."""
    with ServerProcess(conf=FAST_RETRIES) as server:
        yield server


@dataclass
class JavaCluster:
    namesrv_addr: str
    broker_addr: str


def _broker_registered(namesrv: str) -> bool:
    async def ask() -> bool:
        async with RemotingClient() as client:
            try:
                reply = await client.invoke(
                    namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 3000
                )
            except RemotingError:
                return False
        return reply.code == ResponseCode.SUCCESS and bool(
            ClusterInfo.from_json(reply.body).broker_addr_table
        )

    return run(ask())


def wait_for_java_broker(namesrv: str, procs: list[subprocess.Popen[bytes]], log: Path) -> None:
    """Until a (Java) broker has registered with ``namesrv``; fails at once if one of ``procs`` exits."""

    def registered() -> bool:
        for proc in procs:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        return _broker_registered(namesrv)

    wait_until(registered, 180, f"the Java broker registered with {namesrv}", interval=0.5)


@contextlib.contextmanager
def run_java_cluster(
    java_home: Path, base: Path, *broker_settings: str, acl_file: str | None = None
) -> Iterator[JavaCluster]:
    """A Java name server and broker (brokerName broker-a, autoCreateTopicEnable, the extra
    ``KEY=VALUE`` settings) on free ports under ``base``; ``acl_file`` becomes the broker's
    ``$ROCKETMQ_HOME/conf/plain_acl.yml``."""
    ns_port, broker_port = free_port(), free_port()
    run_sh = str(java_home / "run.sh")
    env = dict(os.environ)
    if acl_file is not None:
        (base / "broker" / "home" / "conf").mkdir(parents=True, exist_ok=True)
        (base / "broker" / "home" / "conf" / "plain_acl.yml").write_text(acl_file, encoding="utf-8")
        # The shared build has no resources: without broker's META-INF/service file the Java broker
        # logs "The broker dose not load the AccessValidator" and checks nothing.
        service = base / "acl-service" / "META-INF" / "service"
        service.mkdir(parents=True, exist_ok=True)
        (service / "org.apache.rocketmq.acl.AccessValidator").write_text(
            "org.apache.rocketmq.acl.plain.PlainAccessValidator\n"
        )
        env["EXTRA_CLASSPATH"] = str(base / "acl-service")
    procs = []
    try:
        with open(base / "namesrv.log", "wb") as log:
            procs.append(
                subprocess.Popen([run_sh, "namesrv", str(ns_port), str(base / "ns")], stdout=log, stderr=log)
            )
        with open(base / "broker.log", "wb") as log:
            broker_args = [
                run_sh, "broker", str(ns_port), str(broker_port), str(base / "broker"), "brokerName=broker-a",
                *broker_settings,
            ]  # fmt: skip
            procs.append(subprocess.Popen(broker_args, stdout=log, stderr=log, env=env))
        namesrv = f"127.0.0.1:{ns_port}"
        wait_for_java_broker(namesrv, procs, base / "broker.log")
        yield JavaCluster(namesrv_addr=namesrv, broker_addr=f"127.0.0.1:{broker_port}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="session")
def java_cluster(
    java_home: Path, java_classpath: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JavaCluster]:
    """A Java name server and broker (brokerName broker-a, autoCreateTopicEnable) on free ports."""
    with run_java_cluster(
        java_home,
        tmp_path_factory.mktemp("java-rocketmq"),
        "transactionCheckInterval=1000",  # the transaction test waits for checks ...
        f"transactionTimeOut={NO_CHECK_YET_MS}",  # ... once it lets them happen
    ) as cluster:
        yield cluster
