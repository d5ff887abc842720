"""SIGKILL a ``finchmq server`` process holding 10,000 pending timer messages, again in the middle
of their delivery, and once more while it replays after a restart: in the end every timer message
is in its real topic exactly once, and none was stored before its TIMER_DELIVER_MS."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import KVTable
from finchmq.protocol.headers import SendMessageRequestHeaderV2
from finchmq.protocol.message import MessageExt, properties_to_string
from finchmq.remoting import RemotingClient
from finchmq.testing.audit import stored_messages
from finchmq.testing.process import ServerProcess
from tests.client.conftest import TEST_BROKER
from tests.waiting import eventually

pytestmark = pytest.mark.slow

TOPIC = "T_timer_crash"
QUEUES = 4
COUNT = 10_000
CONF = {
    **TEST_BROKER,
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),  # several segments
    "mappedFileSizeTimerLog": str(52 * 4000),  # the timer log rolls too
    "timerFlushIntervalMs": "500",
}


def start(data: Path) -> ServerProcess:
    log = data.parent / f"server-{time.monotonic_ns()}.log"  # one per run, kept for a failure's reader
    return ServerProcess(conf=CONF, data_dir=data, log_path=log, metrics=False).start()


def kill(server: ServerProcess) -> None:
    assert server.proc is not None
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait()


def send_request(i: int, deliver_ms: int) -> RemotingCommand:
    props = {"TIMER_DELIVER_MS": str(deliver_ms), "UNIQ_KEY": f"{i:032X}"}
    header = SendMessageRequestHeaderV2(
        producer_group="pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=QUEUES,
        queue_id=i % QUEUES, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string(props),
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), b"m%d" % i)


async def send_all(addr: str, deliver_at: dict[int, int]) -> None:
    async with RemotingClient() as client:
        pending = sorted(deliver_at)

        async def sender() -> None:
            while pending:
                i = pending.pop()
                reply = await client.invoke(addr, send_request(i, deliver_at[i]), 60_000)
                assert reply.code == ResponseCode.SUCCESS, reply.remark

        await asyncio.gather(*(sender() for _ in range(32)))


async def delivered(addr: str) -> list[MessageExt]:
    return await stored_messages(addr, TOPIC, queues=QUEUES)


async def delivered_count(addr: str) -> int:
    total = 0
    async with RemotingClient() as client:
        for queue_id in range(QUEUES):
            reply = await client.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(queue_id)}
                ),
                30_000,
            )
            total += int(reply.ext_fields.get("offset", "0"))
    return total


async def timer_idle(addr: str) -> bool:
    async with RemotingClient() as client:
        reply = await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 30_000
        )
    info = KVTable.from_json(reply.body).table
    return info["timerCongestNum"] == "0" and info["timerOffsetBehind"] == "0"


def test_sigkill_with_pending_timers_delivers_each_once_and_none_early(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(27)
    first = int(time.time() * 1000) + 12_000
    deliver_at = {i: first + rng.randrange(6000) for i in range(COUNT)}
    servers: list[ServerProcess] = []
    try:
        server = start(data)
        servers.append(server)
        asyncio.run(send_all(f"127.0.0.1:{server.broker_port}", deliver_at))
        kill(server)  # every acknowledged timer pending, some not in the wheel yet

        server = start(data)
        servers.append(server)
        addr = f"127.0.0.1:{server.broker_port}"
        target = rng.randrange(COUNT // 5, COUNT * 3 // 5)
        asyncio.run(
            eventually(lambda: _at_least(addr, target), 120, f"{target} delivered before the second kill")
        )
        kill(server)  # in the middle of the deliveries

        server = start(data)
        servers.append(server)
        # start() returns once the broker serves, with the replay of the checkpoint's range under way
        # (its state stays in the checkpoint until the replay is over): the kill lands in it
        kill(server)

        server = start(data)
        servers.append(server)
        addr = f"127.0.0.1:{server.broker_port}"
        asyncio.run(eventually(lambda: _at_least(addr, COUNT), 180, "every timer delivered"))
        asyncio.run(eventually(lambda: timer_idle(addr), 60, "the timer idle"))
        found = asyncio.run(delivered(addr))
    finally:
        for s in servers:
            if s.proc is not None and s.proc.poll() is None:
                kill(s)
    counts = Counter(m.body for m in found)
    twice = {body: n for body, n in counts.items() if n > 1}
    assert not twice, f"{len(twice)} delivered more than once, e.g. {list(twice.items())[:3]}"
    missing = [i for i in deliver_at if counts[b"m%d" % i] == 0]
    assert not missing, f"{len(missing)} never delivered, e.g. {missing[:3]}"
    early = [m for m in found if m.store_timestamp < int(m.properties["TIMER_DELIVER_MS"])]
    assert not early, f"{len(early)} delivered early, e.g. {early[:1]}"


async def _at_least(addr: str, count: int) -> bool:
    return await delivered_count(addr) >= count
