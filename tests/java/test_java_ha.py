"""Master/slave replication across implementations: a Java 4.9.8 slave of a finchmq SYNC_MASTER,
and a finchmq slave of a Java 4.9.8 SYNC_MASTER. The HA stream, the slave's registration and its
metadata sync (through the master's VIP channel, listenPort - 2, for a Java slave) must all
interoperate for these to pass."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.client import AdminClient, Message, MQClientError, Producer, PushConsumer
from finchmq.client.results import SendStatus
from finchmq.protocol.bodies import ConsumeFromWhere
from finchmq.testing.audit import stored_bodies
from finchmq.testing.cluster import BrokerProcess, NamesrvProcess, free_port_pair
from tests.waiting import eventually

from .conftest import wait_for_java_broker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SEGMENT = str(64 * 1024 * 1024)  # run.sh gives Java brokers 64 MiB segments: a group must agree
# A SYNC_MASTER answers SEND_OK once its slave has the message: give the slave (a JVM, on a busy
# machine) and the send all the time they need; only a broken replication runs out of it.
REPLICATION_TIMEOUT_MS = 60_000


class JavaBroker:
    def __init__(self, java_home: Path, namesrv_port: int, root: Path, *conf: str) -> None:
        self.port = free_port_pair()
        self.root = root
        self.log = root / "java-broker.log"
        root.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(java_home / "run.sh"),
                    "broker",
                    str(namesrv_port),
                    str(self.port),
                    str(root / "b"),
                    f"slaveTimeout={REPLICATION_TIMEOUT_MS}",  # how long a SYNC_MASTER waits for its slave
                    "maxHashSlotNum=20000",
                    "maxIndexNum=80000",
                    *conf,
                ],
                stdout=log,
                stderr=log,
            )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[NamesrvProcess]:
    with NamesrvProcess(tmp_path / "ns") as ns:
        yield ns


def finch_broker(root: Path, namesrv: NamesrvProcess, name: str, broker_id: int, role: str) -> BrokerProcess:
    return BrokerProcess(
        root,
        {
            "brokerClusterName": "DefaultCluster",
            "brokerName": name,
            "brokerId": str(broker_id),
            "brokerRole": role,
            "listenPort": str(free_port_pair()),
            "brokerIP1": "127.0.0.1",
            "namesrvAddr": namesrv.addr,
            "storePathRootDir": str(root / "store"),
            "mappedFileSizeCommitLog": SEGMENT,
            "slaveTimeout": str(REPLICATION_TIMEOUT_MS),
            "maxHashSlotNum": "20000",  # a small index file, not Java's 420 MB
            "maxIndexNum": "80000",
        },
    ).start()


async def send(namesrv: str, topic: str, n: int) -> list[bytes]:
    bodies = [f"{topic}-{i}-".encode() + b"r" * 300 for i in range(n)]
    async with Producer(
        "ha_interop", namesrv_addr=namesrv, send_msg_timeout=REPLICATION_TIMEOUT_MS
    ) as producer:
        statuses = [(await producer.send(Message(topic, b))).send_status for b in bodies]
    assert statuses == [SendStatus.SEND_OK] * n  # a SYNC_MASTER says so only once the slave has it
    return bodies


def test_a_java_slave_replicates_a_finchmq_sync_master(
    java_home: Path, java_classpath: str, namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    master = finch_broker(tmp_path / "master", namesrv, "broker-a", 0, "SYNC_MASTER")
    slave = JavaBroker(java_home, namesrv.port, tmp_path / "slave", "brokerName=broker-a", "brokerId=1",
                       "brokerRole=SLAVE")  # fmt: skip
    try:

        async def scenario() -> None:
            async with AdminClient(namesrv_addr=namesrv.addr) as admin:

                async def slave_in_sync() -> bool:  # the Java slave reports its offset 5 s after connecting
                    return "requests the log from offset" in master.log_since_start()

                await eventually(slave_in_sync, 120, "the Java slave connected to the finchmq master", 0.5)
                await admin.create_topic(
                    "InteropHaA", broker_addr=master.addr, read_queue_nums=4, write_queue_nums=4
                )
            bodies = await send(namesrv.addr, "InteropHaA", 200)

            async def java_slave_serves_them() -> bool:  # after its SlaveSynchronize got the topic
                return sorted(await stored_bodies(slave.addr, "InteropHaA", queues=4)) == sorted(bodies)

            await eventually(java_slave_serves_them, 60, "the Java slave serves what the master stored", 0.5)

        asyncio.run(scenario())
    finally:
        slave.stop()
        master.stop()


def test_a_finchmq_slave_replicates_a_java_sync_master_and_serves_when_it_dies(
    java_home: Path, java_classpath: str, namesrv: NamesrvProcess, tmp_path: Path
) -> None:
    master = JavaBroker(java_home, namesrv.port, tmp_path / "master", "brokerName=broker-x",
                        "brokerRole=SYNC_MASTER")  # fmt: skip
    slave: BrokerProcess | None = None
    try:
        wait_for_java_broker(namesrv.addr, [master.proc], master.log)
        slave = finch_broker(tmp_path / "slave", namesrv, "broker-x", 1, "SLAVE")
        finch_slave = slave

        async def scenario() -> None:
            async with AdminClient(namesrv_addr=namesrv.addr) as admin:
                for topic in ("InteropHaX", "InteropHaProbe"):
                    await admin.create_topic(
                        topic, broker_addr=master.addr, read_queue_nums=4, write_queue_nums=4
                    )

            async def connected() -> bool:
                return "connected to master" in finch_slave.log_since_start()

            await eventually(connected, 60, "the finchmq slave connected to the Java master", 0.5)
            # The Java master counts the slave once its accept thread has taken the connection
            # (until then a send is SLAVE_NOT_AVAILABLE): it says SEND_OK to a probe from then on.
            async with Producer(
                "ha_probe", namesrv_addr=namesrv.addr, send_msg_timeout=REPLICATION_TIMEOUT_MS
            ) as probe:

                async def replicating() -> bool:
                    try:
                        result = await probe.send(Message("InteropHaProbe", b"probe"))
                    except MQClientError:  # the probe topic not routed yet
                        return False
                    return result.send_status is SendStatus.SEND_OK

                await eventually(replicating, 60, "the Java master acknowledges a replicated send", 0.5)
            bodies = await send(namesrv.addr, "InteropHaX", 200)

            async def slave_serves_them() -> bool:
                return sorted(await stored_bodies(finch_slave.addr, "InteropHaX", queues=4)) == sorted(bodies)

            await eventually(
                slave_serves_them, 60, "the finchmq slave serves what the Java master stored", 0.5
            )

            master.stop()  # SIGKILL: consumers go on from the finchmq slave
            received: set[bytes] = set()

            async def listener(msgs: list, _: object) -> None:  # type: ignore[type-arg]
                received.update(m.body for m in msgs)

            consumer = PushConsumer(
                "interop_ha_group",
                namesrv_addr=namesrv.addr,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                poll_name_server_interval=1000,
            )
            consumer.subscribe("InteropHaX", "*")
            consumer.register_message_listener(listener)
            async with consumer:

                async def all_received() -> bool:
                    return received == set(bodies)

                await eventually(all_received, 90, "consumed everything from the finchmq slave", 0.5)

        asyncio.run(scenario())
    finally:
        master.stop()
        if slave is not None:
            slave.stop()
