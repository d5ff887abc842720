"""A ``finchmq server`` subprocess for benchmarks, with its CPU and memory read from /proc."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["ChildServer", "ServerProcess", "cpu_seconds", "free_port", "rss_mib"]

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def rss_mib(pid: int) -> float:
    """A live process's resident memory in MiB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChildServer:
    """A server subprocess in its own data directory, its output in ``server.log`` there.

    Subclasses say how to start it (``start`` calls ``_spawn`` with the command line and a
    readiness test); stopping, the log tail and /proc figures are shared.
    """

    name = "server"
    stop_grace_seconds = 30.0

    def __init__(self, data_dir: Path | None, tmp_prefix: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=tmp_prefix) if data_dir is None else None
        self.data_dir = data_dir if data_dir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "server.log"

    def start(self) -> Self:
        raise NotImplementedError

    def _spawn(self, args: list[str], cwd: Path, ready: Callable[[], bool], becoming: str) -> None:
        """Start ``args`` and wait up to 30 s until ``ready()``; raises with the log's tail."""
        with open(self.log_path, "wb") as log:  # a file, not a pipe nobody drains
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ready():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not {becoming} within 30 s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mib(self) -> float:
        return rss_mib(self.pid)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_grace_seconds)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ServerProcess(ChildServer):
    """``finchmq server`` on free loopback ports in a fresh directory."""

    name = "finchmq server"
    stop_grace_seconds = 60.0

    def __init__(self, *, conf: dict[str, str] | None = None, data_dir: Path | None = None) -> None:
        super().__init__(data_dir, "finchmq-bench-")
        self.namesrv_port = free_port()
        self.broker_port = free_port()
        self.conf = conf or {}

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self) -> Self:
        args = [
            sys.executable, "-m", "finchmq.cli", "server", "--data-dir", str(self.data_dir),
            "--namesrv-port", str(self.namesrv_port), "--broker-port", str(self.broker_port),
            "--broker-ip", "127.0.0.1", "--bind", "127.0.0.1",
        ]  # fmt: skip
        if self.conf:
            conf_file = self.data_dir / "broker.conf"
            conf_file.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
            args += ["-c", str(conf_file)]
        self._spawn(args, ROOT, lambda: "ready in" in self.log_path.read_text(errors="replace"), "get ready")
        return self
