"""Drives the official C++ client (``rocketmq==0.4.4`` in ``.venv-cpp``) against an embedded
finchmq server. ``make test`` creates ``.venv-cpp``; these tests are never skipped."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import AdminClient, MQClientError
from finchmq.protocol.bodies import ProcessQueueInfo
from tests.drivers import DriverProcess, driver_starter, flags

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("cpp_driver.py")
CPP_PYTHON = ROOT / ".venv-cpp" / "bin" / "python"


def cpp_python() -> Path:
    if not CPP_PYTHON.exists():
        pytest.fail(f"{CPP_PYTHON} is missing: run `make test` (it creates .venv-cpp with rocketmq==0.4.4)")
    return CPP_PYTHON


class CppProcess(DriverProcess):
    """One C++ driver process (``cpp_driver.py`` under ``.venv-cpp``); closing its stdin
    (``stop()``) makes a push consumer shut down as it would at its end."""

    name = "C++"

    def __init__(self, args: list[str], cwd: Path) -> None:
        super().__init__(cpp_python(), DRIVER, args, cwd)

    def messages(self) -> list[dict[str, Any]]:
        with self._changed:
            return [r for r in self.records if "body" in r]


@pytest.fixture
def cpp(tmp_path: Path) -> Iterator[Any]:
    """Start C++ driver processes: ``cpp("produce", "--topic", ...)``; all killed afterwards."""
    yield from driver_starter(lambda *args: CppProcess(list(args), cwd=tmp_path))


def body(record: dict[str, Any]) -> str:
    """The text body of a message record the driver printed."""
    return base64.b64decode(record["body"]).decode()


def produce(cpp: Any, namesrv: str, topic: str, count: int, **options: Any) -> list[dict[str, Any]]:
    """Send ``count`` messages with the C++ producer (``options``: driver flags); all must succeed.
    Message ``i`` has body ``{body_prefix}{i}``, the ``i``-th of the comma-separated ``tags``
    (cycling), keys ``{keys_prefix}{i}`` and the user property ``prop`` (``KEY=VALUE``, ``{i}``
    replaced by ``i``). Returns one record per send."""
    records: list[dict[str, Any]] = cpp(
        "produce", "--namesrv", namesrv, "--topic", topic, "--count", str(count), *flags(options)
    ).finish()
    assert records[-1] == {"done": True, "errors": 0}, records[-3:]
    return records[:-1]


def consume(cpp: Any, kind: str, namesrv: str, topic: str, group: str, **options: Any) -> CppProcess:
    """A running C++ ``push`` or ``pull`` consumer process of ``group`` on ``topic``."""
    if kind == "push":
        options = {"stoppable": True, **options}  # CppProcess.stop() closes its stdin
    process: CppProcess = cpp(kind, "--namesrv", namesrv, "--topic", topic, "--group", group, *flags(options))
    return process


def consume_all(
    cpp: Any, kind: str, namesrv: str, topic: str, group: str, **options: Any
) -> list[dict[str, Any]]:
    """Run a C++ consumer until it is done; the message records it printed."""
    process = consume(cpp, kind, namesrv, topic, group, **options)
    process.finish()
    return process.messages()


async def cpp_consumer_queues(
    namesrv: str, group: str, consumer: CppProcess, topic: str
) -> dict[int, ProcessQueueInfo]:
    """The queues of ``topic`` that the C++ push consumer ``consumer`` holds now, by queue id, with
    its progress on each (``commit_offset``: every message below it is consumed), as the client
    reports them itself (GET_CONSUMER_RUNNING_INFO through the broker): its rebalance result.
    Empty while it holds none or has not registered yet."""
    async with AdminClient(namesrv_addr=namesrv) as admin:
        try:
            connections = (await admin.consumer_connection(group)).connection_set
            # librocketmq's client id is "PID-IP@INSTANCE"
            mine = [c.client_id for c in connections if c.client_id.startswith(f"{consumer.proc.pid}-")]
            if not mine:
                return {}
            info = await admin.consumer_running_info(group, mine[0])
        except MQClientError:  # the group or its retry topic not known yet, or no answer this time
            return {}
    return {mq.queue_id: progress for mq, progress in info.mq_table.items() if mq.topic == topic}


def check_fields(record: dict[str, Any], *, tags: str, keys_prefix: str, prop: str) -> None:
    """A received message carries what ``produce`` (with these options) gave message ``i``, the
    number its body ends with: tag, keys and user property."""
    i = int(body(record).rsplit("-", 1)[1])
    choices = tags.split(",")
    key, _, value = prop.partition("=")
    assert (record["tags"], record["keys"], record["props"][key]) == (
        choices[i % len(choices)],
        f"{keys_prefix}{i}",
        value.replace("{i}", str(i)),
    ), record


def pytest_report_header() -> str:
    state = "present" if CPP_PYTHON.exists() else "MISSING"
    return f"C++ client: {CPP_PYTHON} ({state}); python {sys.version.split()[0]}"
