"""SIGKILL a ``finchmq server`` process while messages are popped and not acked, at a random
point, twice; restart it on the same data each time: every message sent is handed out again
until it is acked. Popped messages live in check points (the revive topic, or the buffer's
memory with ``enablePopBufferMerge``) and the pop offset; neither may let one slip."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.protocol import ResponseCode
from finchmq.protocol.pop import ConsumeInitMode
from finchmq.remoting import RemotingClient, RemotingError
from tests.broker.conftest import send_request
from tests.broker.pop_client import PopClient
from tests.broker.test_crash import Server, free_port
from tests.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC, GROUP = "T_pop_crash", "G_pop_crash"
CONF = (
    "reviveInterval=200\nreviveMaxSlow=1\nflushConsumerOffsetInterval=500\n"
    "mappedFileSizeCommitLog=16777216\nmappedFileSizeConsumeQueue=120000\n"
)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        if server.proc.poll() is None:
            server.kill()


async def send(addr: str, bodies: list[bytes]) -> None:
    async with RemotingClient() as client:
        for i, body in enumerate(bodies):
            r = await client.invoke(addr, send_request(TOPIC, body, queue_id=i % 4), 30_000)
            assert r.code == ResponseCode.SUCCESS, r.remark


async def pop_ack_some_then_kill(server: Server, acked: set[bytes], rng: random.Random, run: int) -> int:
    """Pop (acking about half, in pops that keep coming) until the kill, which lands at a random
    point after this run's first messages came (a restarted broker may have none to hand out
    until an invisible time ends); returns how many messages this run popped."""
    popped = 0
    delay = rng.uniform(0.3, 2.5)  # scenario: how long after the first messages the kill lands
    kill_at: float | None = None
    give_up = time.monotonic() + 120
    async with RemotingClient() as rc:
        client = PopClient(rc, server.addr, GROUP)
        while kill_at is None or time.monotonic() < kill_at:
            assert time.monotonic() < give_up, f"run {run}: nothing popped"
            try:
                answer = await client.pop(
                    TOPIC, max_nums=rng.randint(1, 8), invisible_ms=rng.choice([1500, 4000, 15_000]),
                    poll_ms=200, init_mode=ConsumeInitMode.MIN,
                )  # fmt: skip
            except RemotingError:
                break
            popped += len(answer.messages)
            if answer.messages and kill_at is None:
                kill_at = time.monotonic() + delay
            for message in answer.messages:
                if rng.random() < 0.5:
                    r = await client.ack(message)
                    if r.code == ResponseCode.SUCCESS:
                        acked.add(message.body)
    server.kill()
    assert popped, f"run {run}: nothing popped before the kill"
    return popped


async def drain(addr: str, sent: set[bytes], acked: set[bytes]) -> None:
    """Pop and ack until every message sent has been acked once."""
    async with RemotingClient() as rc:
        client = PopClient(rc, addr, GROUP)

        async def everything_acked() -> bool:
            answer = await client.pop(
                TOPIC, max_nums=16, invisible_ms=2000, poll_ms=500, init_mode=ConsumeInitMode.MIN
            )
            for message in answer.messages:
                if (await client.ack(message)).code == ResponseCode.SUCCESS:
                    acked.add(message.body)
            return sent <= acked

        try:
            await eventually(everything_acked, 240, "every message handed out again and acked", interval=0.05)
        except AssertionError as exc:
            missing = sorted(sent - acked)
            raise AssertionError(f"{exc}: {len(missing)} never came back, e.g. {missing[:5]}") from None


@pytest.mark.parametrize("merge", [False, True], ids=["revive-topic", "buffer-merge"])
def test_sigkill_with_popped_unacked_messages_loses_none(
    tmp_path: Path, servers: list[Server], merge: bool
) -> None:
    data = tmp_path / "data"
    namesrv_port, broker_port = free_port(), free_port()
    conf = CONF + ("enablePopBufferMerge=true\n" if merge else "")
    rng = random.Random(11 if merge else 5)
    sent = {f"m{i:03d}".encode() for i in range(60)}
    acked: set[bytes] = set()
    server = Server(data, namesrv_port, broker_port, conf)
    servers.append(server)
    asyncio.run(send(server.addr, sorted(sent)))
    for run in range(2):
        asyncio.run(pop_ack_some_then_kill(server, acked, rng, run))
        server = Server(data, namesrv_port, broker_port, conf)
        servers.append(server)
    assert sent - acked, "the kills must leave messages popped and not acked"
    asyncio.run(drain(server.addr, sent, acked))
