"""External clients as separate processes: a driver script run under the client's own venv
(``.venv-cpp``: the C++ client, ``.venv-v5``: the 5.x gRPC SDK) prints one JSON object per line;
``DriverProcess`` collects them as they arrive, so a test waits on what the client did.

The driver's last line is ``{"done": ...}``; an error the client reported is a record like any
other (the test asserts on it), a driver that crashes or hangs fails the test with its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.waiting import DEFAULT_TIMEOUT, ConditionTimeout

T = TypeVar("T")
P = TypeVar("P", bound="DriverProcess")


class DriverProcess:
    """One driver process (``python driver args...``); its JSON lines are collected as they
    arrive. Closing its stdin (``stop()``) asks a long-running driver (a push consumer, a
    producer waiting for transaction checks) to shut down as it would at its end."""

    name = "driver"

    def __init__(
        self,
        python: Path,
        driver: Path,
        args: list[str],
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [str(python), str(driver), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
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
                f"not within {timeout:g} s{ended}: {what}; the {self.name} driver's last records: "
                f"{self.records[-3:]}{self.diagnostics()}"
            )

    def stop(self, timeout: float = 90) -> list[dict[str, Any]]:
        """Ask the driver to shut down now (closes its stdin); returns its records, as ``finish``."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.finish(timeout)

    def finish(self, timeout: float = 90) -> list[dict[str, Any]]:
        """Wait for the driver to end; its records, the last one ``{"done": ...}``. Fails if it
        does not end within ``timeout`` s (then it is killed), exits non-zero or ends early."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(
                f"{self.name} driver {self.args[:1]} timed out; records so far: {self.records[-3:]}"
                f"{self.diagnostics()}"
            )
        self._reader.join(DEFAULT_TIMEOUT)  # it reads to the end of the output of the exited driver
        if self.proc.returncode != 0:
            pytest.fail(
                f"{self.name} driver {self.args} failed ({self.proc.returncode}); records: {self.records}"
                f"{self.diagnostics()}"
            )
        if not self.records or "done" not in self.records[-1]:
            pytest.fail(
                f"{self.name} driver {self.args} did not finish: {self.records[-3:]}{self.diagnostics()}"
            )
        return self.records

    def diagnostics(self) -> str:
        """What an exited driver wrote on stderr (a running one's stderr is not read: it could block)."""
        if self.proc.poll() is None or self.proc.stderr is None or self.proc.stderr.closed:
            return ""
        stderr = self.proc.stderr.read()
        return f"; stderr: {stderr[-2000:]}" if stderr else ""

    def kill(self) -> None:
        """Kill this driver (its own pid only) if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def driver_starter(start: Callable[..., P]) -> Iterator[Callable[..., P]]:
    """The body of a fixture that starts driver processes with ``start(*args)``; every one is
    killed (if still running) and its pipes closed after the test."""
    started: list[P] = []

    def start_one(*args: str) -> P:
        process = start(*args)
        started.append(process)
        return process

    yield start_one
    for process in started:
        process.close()


def flags(options: dict[str, Any]) -> list[str]:
    """Driver flags from keyword options: ``prop_key="color"`` -> ``--prop-key color``, ``True`` -> a
    bare flag, a list or tuple -> the flag once per item (``prop=["a=1", "b=2"]``)."""
    out: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, list | tuple):
            for item in value:
                out.extend([flag, str(item)])
        else:
            out.extend([flag, str(value)])
    return out
