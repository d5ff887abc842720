"""SIGKILL the broker process in the middle of sends, delayed deliveries and consumption, then
restart it on the same data directory: nothing answered SEND_OK is lost (SYNC_FLUSH), delayed
messages are delivered exactly once, and consumers resume from the last persisted offsets."""

from __future__ import annotations

import asyncio
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import ConsumerOffsetSerializeWrapper, KVTable
from finchmq.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from finchmq.protocol.message import properties_to_string
from finchmq.remoting import RemotingClient, RemotingError
from finchmq.testing.audit import stored_bodies
from tests.waiting import ConditionTimeout, eventually, wait_until

pytestmark = pytest.mark.slow

CONF = "flushDiskType=SYNC_FLUSH\nmessageDelayLevel=1s 1s 1s\nflushConsumerOffsetInterval=500\nmappedFileSizeCommitLog=16777216\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, data: Path, namesrv_port: int, broker_port: int, conf_text: str = CONF) -> None:
        conf = data / "broker.conf"
        data.mkdir(parents=True, exist_ok=True)
        conf.write_text(conf_text)
        self.addr = f"127.0.0.1:{broker_port}"
        self.offsets_file = data / "store" / "config" / "consumerOffset.json"
        self.log = data / f"server-{time.monotonic_ns()}.out"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "finchmq.cli", "server", "--data-dir", str(data), "--namesrv-port",
                 str(namesrv_port), "--broker-port", str(broker_port), "--broker-ip", "127.0.0.1",
                 "--bind", "127.0.0.1", "--console-port", "0", "-c", str(conf)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_until(self.ready, what="the server ready")

    def ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        return "ready in" in self.log.read_text()

    def persisted(self, group: str, offsets: dict[int, int]) -> bool:
        """Whether the offsets file holds ``offsets`` for ``group`` (a missing queue counts as 0)."""
        try:
            table = ConsumerOffsetSerializeWrapper.from_json(self.offsets_file.read_bytes()).offset_table
        except FileNotFoundError:
            table = {}
        stored = table.get(f"T_crash@{group}", {})
        return all(stored.get(q, 0) == offset for q, offset in offsets.items())

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0


def send_request(body: bytes, *, delay: bool, queue_id: int) -> RemotingCommand:
    props = {"UNIQ_KEY": body.decode().upper().replace("-", "F").ljust(32, "0")[:32]}
    if delay:
        props["DELAY"] = "1"
    header = SendMessageRequestHeaderV2(
        producer_group="pg", topic="T_crash", default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
        sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=properties_to_string(props),
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)


async def produce_until_killed(server: Server, run: int, acked: dict[bytes, bool]) -> None:
    async with RemotingClient() as client:
        i = 0
        while True:
            body = f"run{run}-m{i}".encode()
            delay = i % 5 == 0
            try:
                r = await client.invoke(server.addr, send_request(body, delay=delay, queue_id=i % 2), 30_000)
            except RemotingError:
                return  # the broker died
            if r.code == ResponseCode.SUCCESS:
                acked[body] = delay
            i += 1


async def consume(
    addr: str, group: str, upto: dict[int, int], commit: bool
) -> tuple[dict[int, int], dict[int, int]]:
    """Pull queues 0 and 1 from the group's committed offset (committing as we go if asked);
    returns the offsets it started from and the ones it reached."""
    started: dict[int, int] = {}
    reached: dict[int, int] = {}
    async with RemotingClient() as client:
        for queue_id in (0, 1):
            q = {"consumerGroup": group, "topic": "T_crash", "queueId": str(queue_id)}
            offset = int(
                (
                    await client.invoke(
                        addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, q), 30_000
                    )
                ).ext_fields.get("offset", "0")
            )
            started[queue_id] = offset
            target = upto.get(queue_id, 10**9)
            while offset < target:
                header = PullMessageRequestHeader(
                    consumer_group=group, topic="T_crash", queue_id=queue_id, queue_offset=offset, max_msg_nums=8,
                    sys_flag=4, commit_offset=0, suspend_timeout_millis=0, sub_version=0, subscription="*",
                )  # fmt: skip
                r = await client.invoke(
                    addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields()), 30_000
                )
                if r.code != ResponseCode.SUCCESS:
                    break
                offset = int(r.ext_fields["nextBeginOffset"])
                if commit:
                    await client.invoke(
                        addr,
                        RemotingCommand.request(
                            RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": str(offset)}
                        ),
                        30_000,
                    )
            reached[queue_id] = offset
    return started, reached


async def delivered_everything(addr: str, topic: str, acked: set[bytes]) -> Counter[bytes]:
    """Wait until every delay level has delivered its whole queue (runtime info
    ``scheduleMessageOffset_N`` = delivered,max) and every acknowledged body is there."""
    state: list[object] = []

    async def delivered() -> Counter[bytes] | None:
        async with RemotingClient() as client:
            reply = await client.invoke(
                addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 30_000
            )
        table = KVTable.from_json(reply.body).table
        levels = [v.split(",") for k, v in table.items() if k.startswith("scheduleMessageOffset_")]
        bodies = Counter(await stored_bodies(addr, topic))
        state[:] = [levels, len(acked - set(bodies))]
        return (
            bodies if levels and all(done == end for done, end in levels) and acked <= set(bodies) else None
        )

    try:
        return await eventually(delivered, 120, "every delay delivered", interval=0.2)
    except ConditionTimeout as exc:
        raise ConditionTimeout(f"{exc}: levels {state[0]}, {state[1]} missing") from None


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Every server a test starts; any still running at the end is killed."""
    started: list[Server] = []
    yield started
    for server in started:
        if server.proc.poll() is None:
            server.kill()


def test_sigkill_loses_nothing_acknowledged_and_replays_no_delayed_delivery(
    tmp_path: Path, servers: list[Server]
) -> None:
    data = tmp_path / "data"
    namesrv_port, broker_port = free_port(), free_port()
    acked: dict[bytes, bool] = {}
    rng = random.Random(7)
    committed: dict[int, int] = {}

    async def produce_then_kill(server: Server, run: int) -> None:
        task = asyncio.ensure_future(produce_until_killed(server, run, acked))
        # some sends acknowledged in this run (the first is delayed), then a kill at a random point
        await eventually(
            lambda: sum(body.startswith(b"run%d-" % run) for body in acked) >= 20 or task.done(),
            what="sends acknowledged before the kill",
        )
        assert not task.done(), "the producer stopped before the kill"
        await asyncio.sleep(rng.uniform(0, 1.0))  # scenario: where the kill lands among the sends
        server.kill()
        await task

    for run in range(3):
        server = Server(data, namesrv_port, broker_port)
        servers.append(server)
        started, reached = asyncio.run(consume(server.addr, "G_crash", {}, commit=True))  # catch up
        if run:
            assert started == committed, "the group resumed from what it persisted before the kill"
        committed = reached
        # the kill must come after the periodic persist of these offsets (flushConsumerOffsetInterval)
        wait_until(partial(server.persisted, "G_crash", committed), what="the committed offsets persisted")
        asyncio.run(produce_then_kill(server, run))
    server = Server(data, namesrv_port, broker_port)
    servers.append(server)
    try:
        bodies = asyncio.run(delivered_everything(server.addr, "T_crash", set(acked)))
        missing = [b for b in acked if b not in bodies]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
        delayed = [b for b, d in acked.items() if d]
        assert delayed, "the run must include delayed messages"
        duplicated = {b: bodies[b] for b in delayed if bodies[b] != 1}
        assert not duplicated, f"delayed messages delivered more than once: {list(duplicated.items())[:3]}"
        # The group resumes from its last persisted offsets (on disk before the kill).
        resumed, _ = asyncio.run(consume(server.addr, "G_crash", {0: 0, 1: 0}, commit=False))
        assert resumed == committed
    finally:
        server.stop()
