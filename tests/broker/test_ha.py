"""Master/slave replication with real processes (``LocalCluster``) and real kills.

Each test starts name servers and brokers as separate ``finchmq`` processes, as a deployment runs
them, sends with finchmq's client, and reads back what each broker stored over the wire.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from finchmq.client.admin import AdminClient
from finchmq.client.errors import MQClientError, NoRouteError
from finchmq.client.results import SendStatus
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import ConsumeFromWhere
from finchmq.protocol.headers import QueryConsumerOffsetRequestHeader
from finchmq.remoting import RemotingClient
from finchmq.testing.audit import stored_bodies
from finchmq.testing.cluster import LocalCluster
from tests.client.conftest import TEST_BROKER
from tests.scrape import scrape
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "HaTopic"
SEGMENT = 256 * 1024  # small commit-log segments, so replication crosses segment boundaries
SMALL = {**TEST_BROKER, "mappedFileSizeCommitLog": str(SEGMENT)}  # a few MiB of disk per broker, not 1.4 GiB
POLL = 0.2  # s between two looks at a cluster of processes


@pytest.fixture
def sync_group(tmp_path: Path) -> Iterator[LocalCluster]:
    """One name server, one broker group: a SYNC_MASTER and its slave."""
    cluster = LocalCluster(
        tmp_path,
        groups=1,
        slaves=1,
        namesrvs=1,
        role="SYNC_MASTER",
        conf={**SMALL, "defaultTopicQueueNums": "4"},
        metrics=True,
    )
    with cluster:
        yield cluster


async def create_topic(namesrv: str, groups: int = 1) -> None:
    """Create the topic on every master and wait until the name server routes it to all of them
    (each broker registers it in the background): producers then know every group from the start."""
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.create_topic(TOPIC, cluster="FinchCluster", read_queue_nums=4, write_queue_nums=4)

        async def routed() -> bool:
            try:
                return len((await admin.topic_route(TOPIC)).queue_datas) == groups
            except NoRouteError:
                return False

        await eventually(routed, what=f"the route of {TOPIC} to {groups} broker group(s)")


async def send_all(producer: Producer, bodies: list[bytes]) -> list[SendStatus]:
    return [(await producer.send(Message(TOPIC, body))).send_status for body in bodies]


async def committed_offset(broker_addr: str, group: str, queue_id: int) -> int:
    header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=TOPIC, queue_id=queue_id)
    async with RemotingClient() as client:
        reply = await client.invoke(
            broker_addr,
            RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields()),
            30_000,
        )
    return int(reply.ext_fields["offset"]) if reply.code == ResponseCode.SUCCESS else -1


async def test_sync_master_acks_once_the_slave_has_it_and_a_restarted_slave_catches_up(
    sync_group: LocalCluster,
) -> None:
    master, slave = sync_group.broker("broker-a", 0), sync_group.broker("broker-a", 1)
    await create_topic(sync_group.namesrv_addr)
    first = [f"first-{i}-".encode() + b"x" * 1000 for i in range(600)]  # ~630 KiB: three segments
    async with Producer("ha_producer", namesrv_addr=sync_group.namesrv_addr) as producer:
        assert await send_all(producer, first) == [SendStatus.SEND_OK] * len(first)

        # SEND_OK means the slave has it; it is readable there through the slave's own consume
        # queues once the slave has synced the topic's config from the master (every 10 s)
        on_master = await stored_bodies(master.addr, TOPIC, queues=4)
        assert sorted(on_master) == sorted(first)

        async def slave_serves_the_same() -> bool:
            return await stored_bodies(slave.addr, TOPIC, queues=4) == on_master

        await eventually(slave_serves_the_same, 30, "the slave serves what the master stored", interval=POLL)

        # /metrics shows the replication on both sides
        assert master.metrics_port and slave.metrics_port
        on_master, on_slave_side = await scrape(master.metrics_port), await scrape(slave.metrics_port)
        assert [v for _, v in on_master["finchmq_ha_slave_connections"]] == [1]
        assert [v for _, v in on_master["finchmq_ha_replication_lag_bytes"]] == [0]
        assert [v for _, v in on_master["finchmq_ha_slave_acked_offset"]] == [
            v for _, v in on_slave_side["finchmq_ha_commit_log_max_offset"]
        ]
        assert [v for _, v in on_slave_side["finchmq_ha_connected_to_master"]] == [1]

        # no slave in sync: the master stores the message but says SLAVE_NOT_AVAILABLE
        slave.kill()
        statuses: list[SendStatus] = []

        async def refused() -> bool:
            # until the master sees the connection gone, a send waits slaveTimeout (3 s) and is
            # answered FLUSH_SLAVE_TIMEOUT: give it longer than that so the answer arrives
            body = f"alone-{len(statuses)}".encode()
            statuses.append((await producer.send(Message(TOPIC, body), timeout_millis=10_000)).send_status)
            return statuses[-1] is SendStatus.SLAVE_NOT_AVAILABLE

        await eventually(
            refused, 30, "a send answered SLAVE_NOT_AVAILABLE after the slave was killed", interval=POLL
        )
        alone = [f"alone-{i}".encode() for i in range(len(statuses))]

        # the slave restarts from its own offset, not from the start, and catches up
        requests = "requests the log from offset"
        before = master.log_since_start().count(requests)
        slave.start()

        async def slave_reconnected() -> bool:
            return master.log_since_start().count(requests) > before

        await eventually(slave_reconnected, 30, "the restarted slave connected to the master", interval=POLL)
        log = slave.log_path.read_text()
        reported = [int(x) for x in re.findall(r"connected to master \S+, reporting offset (\d+)", log)]
        assert len(reported) >= 2 and reported[-1] >= reported[0] and reported[-1] > 600 * 1000, reported
        assert f"{requests} {reported[-1]}" in master.log_since_start()

        later = [f"later-{i}".encode() for i in range(50)]
        assert await send_all(producer, later) == [SendStatus.SEND_OK] * len(later)
    everything = sorted(first + alone + later)
    assert sorted(await stored_bodies(master.addr, TOPIC, queues=4)) == everything

    async def slave_has_everything() -> bool:
        return sorted(await stored_bodies(slave.addr, TOPIC, queues=4)) == everything

    await eventually(slave_has_everything, 30, "the restarted slave caught up", interval=POLL)


async def test_consumers_read_from_the_slave_when_the_master_is_killed_and_offsets_return_to_it(
    sync_group: LocalCluster,
) -> None:
    master, slave = sync_group.broker("broker-a", 0), sync_group.broker("broker-a", 1)
    namesrv = sync_group.namesrv_addr
    await create_topic(namesrv)
    bodies = [f"m-{i}".encode() for i in range(300)]
    async with Producer("ha_producer", namesrv_addr=namesrv) as producer:
        assert await send_all(producer, bodies) == [SendStatus.SEND_OK] * len(bodies)

    async def slave_synced() -> bool:  # the topic's config reaches the slave within 10 s
        return sorted(await stored_bodies(slave.addr, TOPIC, queues=4)) == sorted(bodies)

    await eventually(slave_synced, 30, "the slave synced the topic", interval=POLL)
    master.kill()

    received: set[bytes] = set()

    async def listener(msgs: list[MessageExt], _: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        received.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    group = "ha_consumers"
    consumer = PushConsumer(
        group,
        namesrv_addr=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        persist_consumer_offset_interval=500,
        poll_name_server_interval=1000,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    async with consumer:

        async def all_received() -> bool:
            return received == set(bodies)

        await eventually(all_received, 60, "every message consumed from the slave", interval=POLL)

        async def slave_holds_offsets() -> bool:
            offsets = [await committed_offset(slave.addr, group, q) for q in range(4)]
            return sum(offsets) == len(bodies)

        await eventually(
            slave_holds_offsets, 30, "the consumer committed its offsets to the slave", interval=POLL
        )

        # the master returns: the consumer's next commits go to it, and the slave then syncs from it
        master.start()

        async def master_took_offsets_back() -> bool:
            offsets = [await committed_offset(master.addr, group, q) for q in range(4)]
            return sum(offsets) == len(bodies)

        await eventually(
            master_took_offsets_back, 60, "the master holds the offsets committed on the slave", interval=POLL
        )


async def test_a_killed_group_makes_producers_move_to_the_other_group(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, groups=2, slaves=0, namesrvs=1, role="ASYNC_MASTER", conf=SMALL) as cluster:
        await create_topic_on_all(cluster)
        ok: list[bytes] = []
        failed: list[tuple[int, str]] = []
        async with Producer(
            "ha_failover",
            namesrv_addr=cluster.namesrv_addr,
            send_latency_fault_enable=True,
            # only a failed send makes a broker unavailable, never a slow one: by default a send
            # slower than 550 ms (a loaded machine) puts broker-b aside for 30 s, and the least bad
            # broker is then the dead one, whose failures were fast
            not_available_duration=(0, 0, 0, 0, 0, 0, 600_000),
            retry_times_when_send_failed=0,  # so that every send that met the dead broker says so
        ) as producer:
            for i in range(400):
                if i == 100:
                    cluster.broker("broker-a").kill()
                body = f"f-{i}".encode()
                try:
                    result = await producer.send(Message(TOPIC, body))
                except MQClientError as exc:  # the failure reaches the caller
                    failed.append((i, str(exc)))
                    continue
                assert result.send_status is SendStatus.SEND_OK
                ok.append(body)
        # round robin alone would send every other message to the dead broker; the latency fault
        # tolerance avoids it after its first failure
        assert 1 <= len(failed) <= 3, failed
        assert all(i >= 100 for i, _ in failed)
        cluster.broker("broker-a").start()
        stored = await stored_bodies(cluster.broker("broker-a").addr, TOPIC, queues=4)
        stored += await stored_bodies(cluster.broker("broker-b").addr, TOPIC, queues=4)
        assert len(ok) == 400 - len(failed)
        missing = set(ok) - set(stored)
        assert not missing, f"{len(missing)} acknowledged sends are lost"


async def create_topic_on_all(cluster: LocalCluster) -> None:
    await create_topic(cluster.namesrv_addr, groups=2)


async def test_a_lagging_consumer_is_sent_to_the_slave_when_slave_reads_are_enabled(tmp_path: Path) -> None:
    # accessMessageInMemoryMaxRatio=0: any backlog counts as "more than fits in memory"
    conf = {
        **SMALL,
        "slaveReadEnable": "true",
        "accessMessageInMemoryMaxRatio": "0",
        "defaultTopicQueueNums": "4",
    }
    with LocalCluster(tmp_path, groups=1, slaves=1, namesrvs=1, role="SYNC_MASTER", conf=conf) as cluster:
        master, slave = cluster.broker("broker-a", 0), cluster.broker("broker-a", 1)
        await create_topic(cluster.namesrv_addr)
        bodies = [f"lag-{i}".encode() for i in range(200)]
        async with Producer("ha_producer", namesrv_addr=cluster.namesrv_addr) as producer:
            assert await send_all(producer, bodies) == [SendStatus.SEND_OK] * len(bodies)

        async def slave_synced() -> bool:
            return len(await stored_bodies(slave.addr, TOPIC, queues=4)) == len(bodies)

        await eventually(slave_synced, 30, "the slave synced the topic", interval=POLL)

        async def pulled(addr: str) -> int:
            async with AdminClient(namesrv_addr=cluster.namesrv_addr) as admin:
                return int((await admin.broker_runtime_stats(addr))["msgGetTotalTodayNow"])

        before = await pulled(slave.addr)
        received: set[bytes] = set()

        async def listener(
            msgs: list[MessageExt], _: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            received.update(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "ha_lagging",
            namesrv_addr=cluster.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=8,
        )
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(listener)
        async with consumer:

            async def all_received() -> bool:
                return received == set(bodies)

            await eventually(all_received, 60, "every message consumed", interval=POLL)
            # the master answered the first pulls with suggestWhichBrokerId=1, the rest came from the slave
            assert await pulled(slave.addr) > before

            # offsets are committed to the master only (a slave ignores commits riding on pulls);
            # the slave gets them from the master through SlaveSynchronize (every 10 s)
            async def offsets_everywhere() -> bool:
                on_master = [await committed_offset(master.addr, "ha_lagging", q) for q in range(4)]
                on_slave = [await committed_offset(slave.addr, "ha_lagging", q) for q in range(4)]
                return sum(on_master) == len(bodies) and on_slave == on_master

            await eventually(
                offsets_everywhere, 40, "the slave synced the group's offsets from the master", interval=POLL
            )
