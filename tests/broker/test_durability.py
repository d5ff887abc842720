"""Broker metadata under crashes, with a real ``finchmq server`` process killed by SIGKILL:

- a request that creates state (a topic auto-created by a send, a group and its retry topic
  created by a heartbeat, UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) is
  answered only once that state is in its file: the file read right after the kill has it;
- a topic whose config is lost is rebuilt from its consume-queue directories at start-up;
- torn or corrupt state files never stop start-up (backup, else defaults + rebuild).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    SubscriptionGroupConfig,
)
from finchmq.protocol.headers import (
    CreateTopicRequestHeader,
)
from finchmq.remoting import RemotingClient
from finchmq.testing.audit import stored_bodies
from finchmq.testing.process import ServerProcess
from tests.client.conftest import TEST_BROKER
from tests.waiting import wait_until

from .conftest import heartbeat_request, send_request

pytestmark = pytest.mark.slow

CONF = {"flushDiskType": "ASYNC_FLUSH", **TEST_BROKER}  # 16 MiB segments, not 1 GiB


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def processes() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in started:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def start(data_dir: Path, processes: list[ServerProcess]) -> ServerProcess:
    server = ServerProcess(conf=CONF, data_dir=data_dir).start()
    processes.append(server)
    return server


def kill(server: ServerProcess) -> None:
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait()


def broker_addr(server: ServerProcess) -> str:
    return f"127.0.0.1:{server.broker_port}"


def config_file(data_dir: Path, name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((data_dir / "store" / "config" / name).read_text())
    return loaded


async def call(addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    async with RemotingClient() as client:
        return await client.invoke(addr, RemotingCommand.request(code, ext or {}, body), 10_000)


async def send(addr: str, topic: str, count: int) -> None:
    async with RemotingClient() as client:
        for i in range(count):
            reply = await client.invoke(addr, send_request(topic, b"m%d" % i, queue_id=i % 4), 10_000)
            assert reply.code == ResponseCode.SUCCESS, reply.remark


def routed(namesrv: str, topic: str) -> bool:
    """Whether the restarted broker has registered ``topic`` with the name server (it registers
    just after it says it is ready: wait for it, never read it once)."""

    async def has_route() -> bool:
        reply = await call(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return reply.code == ResponseCode.SUCCESS

    return bool(wait_until(lambda: asyncio.run(has_route()), what=f"a route for {topic}"))


def test_state_created_by_requests_is_on_disk_before_the_answer(
    data_dir: Path, processes: list[ServerProcess]
) -> None:
    server = start(data_dir, processes)
    addr = broker_addr(server)
    asyncio.run(send(addr, "T_auto_created", 40))  # auto-created through TBW102 by the first send
    heartbeat = heartbeat_request("127.0.0.1@durability", "G_by_heartbeat", {"T_auto_created": "*"})
    reply = asyncio.run(call(addr, RequestCode.HEART_BEAT, body=heartbeat.body))
    assert reply.code == ResponseCode.SUCCESS
    create = CreateTopicRequestHeader(topic="T_by_admin", default_topic="TBW102", read_queue_nums=2,
                                      write_queue_nums=2, perm=6, topic_filter_type="SINGLE_TAG")  # fmt: skip
    reply = asyncio.run(call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext_fields()))
    assert reply.code == ResponseCode.SUCCESS
    group = SubscriptionGroupConfig(group_name="G_by_admin", retry_max_times=3)
    reply = asyncio.run(call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json()))
    assert reply.code == ResponseCode.SUCCESS
    # At once. The broker also persists changed state every second: one that ran since the last
    # answer could only hide a missing write here (a slow machine makes that likelier), never fail it.
    kill(server)

    topics = config_file(data_dir, "topics.json")["topicConfigTable"]
    assert isinstance(topics, dict)
    assert {"T_auto_created", "%RETRY%G_by_heartbeat", "T_by_admin"} <= set(topics)
    groups = config_file(data_dir, "subscriptionGroup.json")["subscriptionGroupTable"]
    assert isinstance(groups, dict)
    assert {"G_by_heartbeat", "G_by_admin"} <= set(groups)

    server = start(data_dir, processes)
    assert routed(server.namesrv_addr, "T_auto_created")
    assert set(asyncio.run(stored_bodies(broker_addr(server), "T_auto_created"))) == {
        b"m%d" % i for i in range(40)
    }


def test_a_topic_without_config_is_rebuilt_from_its_consume_queues(
    data_dir: Path, processes: list[ServerProcess]
) -> None:
    server = start(data_dir, processes)
    asyncio.run(send(broker_addr(server), "T_lost_config", 12))
    server.stop()
    for name in ("topics.json", "topics.json.bak"):
        (data_dir / "store" / "config" / name).unlink(missing_ok=True)

    server = start(data_dir, processes)
    assert "T_lost_config had messages but no config" in server.log_path.read_text()
    assert routed(server.namesrv_addr, "T_lost_config")
    assert set(asyncio.run(stored_bodies(broker_addr(server), "T_lost_config"))) == {
        b"m%d" % i for i in range(12)
    }
    topics = config_file(data_dir, "topics.json")["topicConfigTable"]
    assert isinstance(topics, dict)
    assert topics["T_lost_config"]["writeQueueNums"] == 4  # type: ignore[index]


def test_torn_state_files_never_stop_start_up(data_dir: Path, processes: list[ServerProcess]) -> None:
    server = start(data_dir, processes)
    addr = broker_addr(server)
    asyncio.run(send(addr, "T_torn", 8))
    group = SubscriptionGroupConfig(group_name="G_torn", retry_max_times=5)
    asyncio.run(call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json()))
    asyncio.run(
        call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json())
    )  # .bak has it
    kill(server)

    config = data_dir / "store" / "config"
    whole = (config / "topics.json").read_bytes()
    (config / "topics.json").write_bytes(whole[: len(whole) // 2])  # torn mid-write...
    (config / "topics.json.bak").write_bytes(b"\x00" * 64)  # ...and a useless backup
    sub = (config / "subscriptionGroup.json").read_bytes()
    (config / "subscriptionGroup.json").write_bytes(sub[:10])  # torn; the backup is good
    (config / "consumerOffset.json").write_bytes(b'{"offsetTable":{"T_t')
    (data_dir / "store" / "checkpoint").write_bytes(b"\xff" * 4096)

    server = start(data_dir, processes)  # starts: nothing above may stop it
    log = server.log_path.read_text()
    assert "unreadable" in log
    assert list(config.glob("topics.json.*.corrupt"))
    assert routed(server.namesrv_addr, "T_torn")  # rebuilt from the consume queues
    assert set(asyncio.run(stored_bodies(broker_addr(server), "T_torn"))) == {b"m%d" % i for i in range(8)}
    groups = config_file(data_dir, "subscriptionGroup.json")["subscriptionGroupTable"]
    assert isinstance(groups, dict)
    assert groups["G_torn"]["retryMaxTimes"] == 5  # type: ignore[index]
