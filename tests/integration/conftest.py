"""Drives the official C++ client (``rocketmq==0.4.4`` in ``.venv-cpp``) against an embedded
finchmq server. ``make test`` creates ``.venv-cpp``; these tests are never skipped."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from finchmq.client import AdminClient, MQClientError
from finchmq.protocol.bodies import ProcessQueueInfo
from tests.waiting import DEFAULT_TIMEOUT, ConditionTimeout

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("cpp_driver.py")
CPP_PYTHON = ROOT / ".venv-cpp" / "bin" / "python"


def cpp_python() -> Path:
    if not CPP_PYTHON.exists():
        pytest.fail(f"{CPP_PYTHON} is missing: run `make test` (it creates .venv-cpp with rocketmq==0.4.4)")
    return CPP_PYTHON


class CppProcess:
    """One driver process; its JSON lines are collected as they arrive. Closing its stdin
    (``stop()``) makes a push consumer shut down as it would at its end."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [str(cpp_python()), str(DRIVER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        self.records: list[dict[str, Any]] = []
        self._ended = False  # its stdout is closed: no more records
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.strip()
            if not line.startswith("{"):
                continue
            with self._changed:
                self.records.append(json.loads(line))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(
        self,
        predicate: Callable[[list[dict[str, Any]]], T],
        timeout: float = DEFAULT_TIMEOUT,
        what: str = "the condition on the driver's records",
    ) -> T:
        """``tests.waiting.wait_until`` on this driver's records: wait until ``predicate(records)``
        is truthy (checked as each record arrives) and return it. Fails after ``timeout`` s, or
        as soon as the driver has exited without it holding."""
        with self._changed:
            self._changed.wait_for(lambda: predicate(self.records) or self._ended, timeout)
            value = predicate(self.records)
            if value:
                return value
            ended = " (the driver has exited)" if self._ended else ""
            raise ConditionTimeout(
                f"not within {timeout:g} s{ended}: {what}; the driver's last records: {self.records[-3:]}"
            )

    def messages(self) -> list[dict[str, Any]]:
        with self._changed:
            return [r for r in self.records if "body" in r]

    def stop(self, timeout: float = 90) -> list[dict[str, Any]]:
        """Ask a push consumer to shut down now (closes its stdin): what it consumed is committed
        and it unregisters, as at the end of its run. Returns its records, as ``finish``."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.finish(timeout)

    def finish(self, timeout: float = 90) -> list[dict[str, Any]]:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"C++ driver {self.args[:1]} timed out; records so far: {self.records[-3:]}")
        self._reader.join(DEFAULT_TIMEOUT)  # it reads to the end of the output of the exited driver
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        if self.proc.returncode != 0:
            pytest.fail(
                f"C++ driver {self.args} failed ({self.proc.returncode}): {stderr[-2000:]}; records: {self.records}"
            )
        if not self.records or not self.records[-1].get("done"):
            pytest.fail(f"C++ driver {self.args} did not finish: {self.records[-3:]} {stderr[-2000:]}")
        return self.records

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def cpp(tmp_path: Path) -> Iterator[Any]:
    """Start C++ driver processes: ``cpp("produce", "--topic", ...)``; all killed afterwards."""
    started: list[CppProcess] = []

    def start(*args: str) -> CppProcess:
        process = CppProcess(list(args), cwd=tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
        for stream in (process.proc.stdin, process.proc.stdout, process.proc.stderr):
            if stream is not None:
                stream.close()


def body(record: dict[str, Any]) -> str:
    """The text body of a message record the driver printed."""
    return base64.b64decode(record["body"]).decode()


def flags(options: dict[str, Any]) -> list[str]:
    """Driver flags from keyword options: ``prop_key="color"`` -> ``--prop-key color``, ``True`` -> a bare flag."""
    out: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        out.extend([flag] if value is True else [flag, str(value)])
    return out


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
