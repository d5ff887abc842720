"""Drives the official RocketMQ 5.x Python SDK (``rocketmq-python-client==5.1.2`` in ``.venv-v5``,
gRPC) against finchmq's gRPC server, as ``tests/integration`` drives the C++ client. ``make test``
creates ``.venv-v5``; these tests are never skipped: a missing venv fails them.

The server: ``grpc_server`` / ``grpc_server_factory`` start an embedded finchmq (name server +
broker) with its gRPC port on a free loopback port, assuming the issue-28 server's hook in
``finchmq.testing.EmbeddedServer``: a ``grpc_port`` keyword (0: any free port) and, once
started, the bound port as ``server.grpc_port``. Until ``EmbeddedServer`` has that keyword the
fixtures fail saying so (the end-to-end tests need the server; the driver's own test does not).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import AdminClient
from finchmq.client.producer import Producer
from finchmq.protocol.bodies import SubscriptionGroupConfig
from finchmq.protocol.message import Message, MessageExt
from finchmq.testing import EmbeddedServer
from finchmq.testing.audit import stored_messages
from finchmq.testing.cluster import free_port_pair
from finchmq.testing.process import free_port
from tests.client.conftest import TEST_BROKER, create_topic
from tests.drivers import DriverProcess, driver_starter, flags
from tests.waiting import eventually, wait_until

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("sdk_driver.py")
DESCRIPTORS = Path(__file__).with_name("sdk_descriptors.py")
V5_PYTHON = Path(os.environ.get("FINCHMQ_V5_PYTHON") or ROOT / ".venv-v5" / "bin" / "python")


def v5_python() -> Path:
    """The SDK venv's python; fails the test (never skips) when it is missing."""
    if not V5_PYTHON.exists():
        pytest.fail(
            f"{V5_PYTHON} is missing: run `make test` (it creates .venv-v5 with rocketmq-python-client==5.1.2)"
        )
    return V5_PYTHON


class SdkProcess(DriverProcess):
    """One ``sdk_driver.py`` process under ``.venv-v5``. Its ``HOME`` is the test's directory, so
    the SDK's log (``~/logs/rocketmq_python/rocketmq_client.log``) stays there and is quoted
    when the driver fails."""

    name = "5.x SDK"

    def __init__(self, args: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self.home = cwd
        super().__init__(v5_python(), DRIVER, args, cwd, env={"HOME": str(cwd), **(env or {})})

    def diagnostics(self) -> str:
        log = self.home / "logs" / "rocketmq_python" / "rocketmq_client.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        return super().diagnostics() + (f"; SDK log tail: {tail}" if tail else "")

    def of(self, key: str) -> list[Any]:
        """The values of every record with ``key`` (``"received"``, ``"sent"``, ``"error"`` ...)."""
        with self._changed:
            return [r[key] for r in self.records if key in r]

    def errors(self) -> list[dict[str, Any]]:
        with self._changed:
            return [r for r in self.records if "error" in r]


@pytest.fixture
def sdk(tmp_path: Path) -> Iterator[Callable[..., SdkProcess]]:
    """Start SDK driver processes: ``sdk("produce", "--endpoints", ep, ...)``; all killed afterwards."""
    yield from driver_starter(lambda *args: SdkProcess(list(args), cwd=tmp_path))


def produce(sdk: Any, endpoints: str, topic: str, count: int, **options: Any) -> list[dict[str, Any]]:
    """Send ``count`` messages with the SDK's Producer (``options``: driver flags, e.g.
    ``type="fifo", group="g1"``); all must succeed. Returns the ``{"sent": i, ...}`` records."""
    process: SdkProcess = sdk(
        "produce", "--endpoints", endpoints, "--topic", topic, "--count", str(count), *flags(options)
    )
    records = process.finish()
    assert not process.errors() and records[-1]["done"] == count, records[-3:]
    return [r for r in records if "sent" in r]


def simple(sdk: Any, endpoints: str, topic: str, group: str, **options: Any) -> SdkProcess:
    """A running SDK SimpleConsumer process of ``group`` on ``topic`` (``options``: driver flags)."""
    process: SdkProcess = sdk(
        "simple", "--endpoints", endpoints, "--topic", topic, "--group", group, *flags(options)
    )
    return process


def push(sdk: Any, endpoints: str, topic: str, group: str, **options: Any) -> SdkProcess:
    """A running SDK PushConsumer process; ``stop()`` shuts it down."""
    options = {"stoppable": True, **options}
    process: SdkProcess = sdk(
        "push", "--endpoints", endpoints, "--topic", topic, "--group", group, *flags(options)
    )
    return process


ServerFactory = Callable[..., EmbeddedServer]


def grpc_endpoints(server: EmbeddedServer) -> str:
    """``"127.0.0.1:PORT"`` of the server's gRPC port."""
    return f"127.0.0.1:{server.grpc_port}"


@pytest.fixture
def grpc_server_factory(finchmq_server_factory: ServerFactory) -> ServerFactory:
    """Start embedded servers serving gRPC on a free port, with your ``broker.conf`` settings (and
    the gRPC endpoint's: ``grpc_properties``); all stop after the test. ``grpc_endpoints(server)``
    is the SDK's ``--endpoints``."""

    def start(
        broker_properties: Mapping[str, str] | None = None,
        grpc_properties: Mapping[str, str] | None = None,
    ) -> EmbeddedServer:
        return finchmq_server_factory(broker_properties, grpc_port=0, grpc_properties=grpc_properties)

    return start


@pytest.fixture
def grpc_server(grpc_server_factory: ServerFactory) -> EmbeddedServer:
    """A running name server + broker with the gRPC port open, on loopback."""
    return grpc_server_factory()


def pytest_report_header() -> str:
    state = "present" if V5_PYTHON.exists() else "MISSING"
    return f"5.x SDK: {V5_PYTHON} ({state}); python {sys.version.split()[0]}"


# -- the SDK scenarios, local and through the proxy ------------------------------------------------

# What the SDK scenarios need of a broker: retries come back after 1 s instead of 10 s, POP
# revives quickly, transactions are checked soon, messages can be recalled.
SCENARIO_CONF = {
    "messageDelayLevel": "1s 1s 1s 1s 1s",
    "reviveInterval": "200",
    "reviveMaxSlow": "1",
    "transactionCheckInterval": "500",
    "transactionTimeOut": "1000",
    "recallMessageEnable": "true",
}


@dataclass
class Servers:
    namesrv: str
    server_grpc: str  # the server's own gRPC endpoint (cluster mode: it runs 2 brokers)
    proxy: str  # ``finchmq proxy``'s endpoint


class _Process:
    """A ``finchmq`` command as a child process, its output in a file."""

    def __init__(self, log: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "finchmq.cli", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=None if env is None else {**os.environ, **env},
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def seen() -> bool:
            match = re.search(pattern, self.output())
            if match is not None:
                found.append(match)
                return True
            assert self.proc.poll() is None, self.output()
            return False

        wait_until(seen, what=f"{pattern!r} in {self.log.name}")
        return found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """``finchmq server --brokers 2`` and a ``finchmq proxy`` in front of its name server: one
    for the whole run (each start costs seconds), shared by every test through the proxy; tests
    keep to their own topics and groups."""
    data = tmp_path_factory.mktemp("cluster")
    conf = data / "small.conf"  # broker-b inherits it: small files, not 1.4 GiB per broker
    broker_conf = {**TEST_BROKER, **SCENARIO_CONF}
    conf.write_text("".join(f"{k}={v}\n" for k, v in broker_conf.items()))
    ns_port, grpc_port = free_port(), free_port()
    server = _Process(
        data / "server.out", "server", "--data-dir", str(data), "--bind", "127.0.0.1",
        "--broker-ip", "127.0.0.1", "--namesrv-port", str(ns_port), "--broker-port", str(free_port_pair()),
        "--brokers", "2", "--metrics-port", "0", "--console-port", "0", "--grpc-port", str(grpc_port),
        "-c", str(conf),
    )  # fmt: skip
    proxy: _Process | None = None
    try:
        server.wait_for("ready in")
        assert "(cluster mode: every broker behind it)" in server.output()
        namesrv = f"127.0.0.1:{ns_port}"
        proxy = _Process(
            data / "proxy.out", "proxy", "--namesrv", namesrv, "--grpc-port", "0", "--bind", "127.0.0.1"
        )
        endpoint = proxy.wait_for(r"at (127\.0\.0\.1:\d+) in front of").group(1)
        yield Servers(namesrv, f"127.0.0.1:{grpc_port}", endpoint)
    finally:
        if proxy is not None:
            proxy.stop()
            assert "finchmq proxy shutting down" in proxy.output()
        server.stop()


@dataclass
class Target:
    """Where an SDK scenario runs: ``local`` (an embedded name server + broker serving gRPC
    itself) or ``proxy`` (``finchmq proxy`` in front of ``finchmq server --brokers 2``). The
    admin side goes through the name server, to every master."""

    kind: str
    endpoints: str  # the SDK's --endpoints
    namesrv: str

    def admin(self, work: Callable[[AdminClient], Awaitable[Any]]) -> Any:
        async def run() -> Any:
            async with AdminClient(namesrv_addr=self.namesrv) as admin:
                return await work(admin)

        return asyncio.run(run())

    def masters(self) -> dict[str, str]:
        """``broker name -> master address``."""
        result: dict[str, str] = self.admin(lambda admin: admin.master_addrs())
        return result

    def create_topic(self, topic: str, queues: int = 2, attributes: str | None = None) -> None:
        """``topic`` with ``queues`` queues on every master, once the name server routes it to all."""
        brokers = len(self.masters())
        asyncio.run(create_topic(self.namesrv, topic, queues, attributes=attributes, brokers=brokers))

    def create_group(self, group: str, **options: Any) -> None:
        """The consumer group's settings (``SubscriptionGroupConfig`` fields) on every master."""
        config = SubscriptionGroupConfig(group_name=group, **options)
        self.admin(lambda admin: admin.create_subscription_group(config))

    def send(self, messages: Iterable[Message]) -> list[str]:
        """Send with finchmq's own (remoting) producer; returns the message ids (UNIQ_KEY)."""

        async def run() -> list[str]:
            async with Producer("remoting-pg", namesrv_addr=self.namesrv) as producer:
                return [(await producer.send(m)).msg_id for m in messages]

        return asyncio.run(run())

    def stored(self, topic: str, count: int, queues: int = 8) -> dict[str, list[MessageExt]]:
        """Every message of ``topic``, by broker name, once there are ``count`` in all."""
        masters = self.masters()
        found: dict[str, list[MessageExt]] = {}

        async def enough() -> bool:
            for name, addr in masters.items():
                found[name] = await stored_messages(addr, topic, queues=queues)
            return sum(map(len, found.values())) >= count

        asyncio.run(eventually(enough, what=f"{count} messages stored in {topic}"))
        return found


@pytest.fixture(params=["local", "proxy"])
def target(request: pytest.FixtureRequest, grpc_server_factory: ServerFactory) -> Target:
    """An SDK scenario's server: an embedded one (``local``), or the shared cluster's proxy."""
    if request.param == "local":
        server = grpc_server_factory(SCENARIO_CONF)
        return Target("local", grpc_endpoints(server), server.namesrv_addr)
    cluster: Servers = request.getfixturevalue("servers")
    return Target("proxy", cluster.proxy, cluster.namesrv)
