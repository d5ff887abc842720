"""The official C++ client against a finchmq master/slave group: SIGKILL the SYNC_MASTER in the middle
of a stream of sends; every send acknowledged SEND_OK is still there, read back from the slave, and
a C++ push consumer started before the kill goes on consuming from the slave without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from finchmq.client.admin import AdminClient
from finchmq.testing.audit import stored_bodies
from finchmq.testing.cluster import LocalCluster
from tests.client.conftest import TEST_BROKER
from tests.waiting import wait_until

from .conftest import body, consume

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "CppHaTopic"


async def pulled_from(broker_addr: str) -> int:
    """Messages the broker has answered pulls with today (brokerStatus msgGetTotalTodayNow)."""
    async with AdminClient(namesrv_addr="127.0.0.1:1") as admin:
        return int((await admin.broker_runtime_stats(broker_addr))["msgGetTotalTodayNow"])


def test_sync_master_killed_mid_stream_loses_no_acknowledged_send(cpp: Any, tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "cluster",
        groups=1,
        slaves=1,
        namesrvs=1,
        role="SYNC_MASTER",
        conf={**TEST_BROKER, "mappedFileSizeCommitLog": str(1024 * 1024), "defaultTopicQueueNums": "4"},
    )
    with cluster:
        master, slave = cluster.broker("broker-a", 0), cluster.broker("broker-a", 1)
        namesrv = cluster.namesrv_addr

        async def create() -> None:
            async with AdminClient(namesrv_addr=namesrv) as admin:
                await admin.create_topic(TOPIC, cluster="FinchCluster", read_queue_nums=4, write_queue_nums=4)

        asyncio.run(create())
        # A stopped listener: the consumer pulls until its cache is full (the C++ client's
        # maxCacheMsgSizePerQueue, 1000 a queue, plus one pull batch of 32) and consumes nothing
        # until the gate opens after the kill. So whatever was acknowledged beyond what it could
        # cache can only come from the slave: the premise holds however fast each side runs.
        gate = tmp_path / "gate"
        consumer = consume(cpp, "push", namesrv, TOPIC, "cpp_ha_group", timeout=240, threads=1, gate=gate)
        assert consumer.wait_for(lambda rs: any(r.get("started") for r in rs), 60)

        producer = cpp(
            "produce", "--namesrv", namesrv, "--topic", TOPIC, "--count", "100000",
            "--body-prefix", "ha-", "--stop-after-errors", "3", "--timeout-ms", "3000",
        )  # fmt: skip
        most_cached = 4 * (1000 + 32)
        assert producer.wait_for(
            lambda rs: sum(1 for r in rs if r.get("status") == 0) >= 2 * most_cached, 180
        )
        assert not consumer.messages(), "the listener is stopped until the gate opens"

        async def on_slave() -> set[str]:
            return {b.decode() for b in await stored_bodies(slave.addr, TOPIC, queues=4)}

        # a steady cluster: the slave has synced the topic's config (every 10 s), so it can serve it
        wait_until(lambda: len(asyncio.run(on_slave())) >= 1000, 60, "the slave serves the topic")
        pulled_before = asyncio.run(pulled_from(slave.addr))
        master.kill()
        records = producer.finish(180)
        acked = {f"ha-{r['i']}" for r in records if r.get("status") == 0}
        failed = [r for r in records if "error" in r]
        assert failed, "the sends after the kill must fail and say so"
        assert len(acked) >= 2 * most_cached
        gate.touch()

        # the consumer started before the kill goes on, now pulling from the slave, and gets every one
        assert consumer.wait_for(lambda rs: acked <= {body(r) for r in rs if "body" in r}, 150), (
            f"consumed {len({body(r) for r in consumer.messages()} & acked)} of {len(acked)}"
        )
        assert asyncio.run(pulled_from(slave.addr)) > pulled_before, "nothing was pulled from the slave"
        consumer.kill()

        # every acknowledged send is on the slave
        stored = asyncio.run(on_slave())
        assert acked <= stored, f"{len(acked - stored)} acknowledged sends missing from the slave"
