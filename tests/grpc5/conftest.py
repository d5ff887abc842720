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

import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from finchmq.testing import EmbeddedServer
from tests.drivers import DriverProcess, driver_starter, flags

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
def grpc_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """Start embedded servers serving gRPC on a free port, with your ``broker.conf`` settings (and
    the gRPC endpoint's: ``grpc_properties``); all stop after the test. ``grpc_endpoints(server)`` is the SDK's ``--endpoints``."""
    if "grpc_port" not in inspect.signature(EmbeddedServer).parameters:
        pytest.fail(
            "finchmq.testing.EmbeddedServer has no grpc_port keyword yet: the gRPC server (issue 28) "
            "is not wired into the embedded server"
        )
    servers: list[EmbeddedServer] = []

    def start(
        broker_properties: Mapping[str, str] | None = None,
        grpc_properties: Mapping[str, str] | None = None,
    ) -> EmbeddedServer:
        server = EmbeddedServer(
            tmp_path_factory.mktemp("finchmq"),
            broker_properties,
            grpc_port=0,
            grpc_properties=grpc_properties,
        ).start()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def grpc_server(grpc_server_factory: ServerFactory) -> EmbeddedServer:
    """A running name server + broker with the gRPC port open, on loopback."""
    return grpc_server_factory()


def pytest_report_header() -> str:
    state = "present" if V5_PYTHON.exists() else "MISSING"
    return f"5.x SDK: {V5_PYTHON} ({state}); python {sys.version.split()[0]}"
