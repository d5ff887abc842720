"""``finchmq server`` (or any server) as a child process: started on free loopback ports, ready
once its log says so, stopped with SIGTERM (a clean shutdown) and killed if it hangs.

Used by ``finchmq demo`` and by the benchmarks; CPU and memory are read from /proc (Linux).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = ["ChildServer", "ServerProcess", "cpu_seconds", "free_port", "rss_mib"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mib(pid: int) -> float:
    """A live process's resident memory in MiB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# the server's "ready in N ms" line (not "address already in use" in a warning before it)
_READY = re.compile(r"^ready in \d+ ms", re.MULTILINE)
_PORT_ATTEMPTS = 3  # a first start whose picked port was taken meanwhile tries new ones


def free_port() -> int:
    """A loopback port free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_broker_ports(brokers: int = 1) -> int:
    """A loopback port ``p`` for ``brokers`` brokers at ``p``, ``p + 10``, ... (``finchmq server
    --brokers N``), each with its VIP channel (``listenPort - 2``) and HA port (``listenPort + 1``)
    free too, so that a broker does not lose a race for one of its ports to another test."""
    for _ in range(500):
        port = free_port()
        if not 1026 <= port <= 65534 - 10 * brokers:
            continue
        if all(_free(port + 10 * i + d) for i in range(brokers) for d in (-2, -1, 0, 1)):
            return port
    raise RuntimeError(f"no free loopback ports for {brokers} broker(s)")


def _free(port: int) -> bool:
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


class ChildServer:
    """A server subprocess in its own data directory (a temporary one unless given), its output
    in a log file (``server.log`` in the data directory unless given).

    Subclasses say how to start it (``start`` calls ``_spawn`` with the command line and a
    readiness test); stopping, the log tail and /proc figures are shared.
    """

    name = "server"
    stop_grace_seconds = 30.0
    ready_timeout_seconds = 30.0

    def __init__(self, data_dir: Path | None, tmp_prefix: str, log_path: Path | None = None) -> None:
        # A directory of our own is removed by stop(), or when this object is collected (a test
        # that never started or stopped it): quietly, not as TemporaryDirectory's ResourceWarning
        # that pytest would pin on whichever later test the collection happens in.
        self._tmp: weakref.finalize[Any, Any] | None = None
        if data_dir is None:
            made = tempfile.mkdtemp(prefix=tmp_prefix)
            self._tmp = weakref.finalize(self, shutil.rmtree, made, ignore_errors=True)
            data_dir = Path(made)
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = log_path if log_path is not None else self.data_dir / "server.log"

    def start(self) -> Self:
        raise NotImplementedError

    def _spawn(
        self,
        args: list[str],
        cwd: Path | None,
        ready: Callable[[], bool],
        becoming: str,
        env: dict[str, str] | None = None,
    ) -> None:
        """Start ``args`` (with ``env`` added to the environment) and wait until ``ready()``;
        raises with the log's tail."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **env} if env else None
        with open(self.log_path, "wb") as log:  # a file, not a pipe nobody drains
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=environment)
        deadline = time.monotonic() + self.ready_timeout_seconds
        while time.monotonic() < deadline:
            if ready():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError(
            f"{self.name} did not {becoming} within {self.ready_timeout_seconds:.0f} s: {self.log_tail()}"
        )

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

    def kill(self) -> None:
        """SIGKILL, as a crash; ``start()`` again restarts it on the same data directory and ports."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after ``stop_grace_seconds``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_grace_seconds)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._tmp is not None:
            self._tmp()  # removes the directory once

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()  # a half-started process and its directory do not outlive the failure
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ServerProcess(ChildServer):
    """``finchmq server`` (name server + broker) on free loopback ports; ``conf`` becomes its
    ``broker.conf``. Metrics are served on a free port too (``metrics_port``), or off with
    ``metrics=False``; ``console_port`` is its web console's port (0, the default: no console);
    ``grpc=True`` serves RocketMQ 5.x clients on a free ``grpc_port`` (off by default).
    ``source`` runs finchmq from another source tree (its ``src``), e.g. an older revision that a
    benchmark compares with this one in the same run. ``brokers`` > 1 runs ``--brokers N``: N broker
    processes on ``broker_ports`` (``pids`` lists them all); ``env`` is added to its environment."""

    name = "finchmq server"
    stop_grace_seconds = 60.0
    ready_timeout_seconds = 60.0

    def __init__(
        self,
        *,
        conf: dict[str, str] | None = None,
        data_dir: Path | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
        metrics: bool = True,
        console_port: int = 0,
        source: Path | None = None,
        grpc: bool = False,
        brokers: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(data_dir, "finchmq-server-", log_path)
        self.grpc_port = free_port() if grpc else 0  # the 5.x endpoint, off unless asked for
        self.source = source
        self.namesrv_port = free_port()
        self.broker_port = free_broker_ports(brokers)
        self.metrics_port = free_port() if metrics else 0
        self.console_port = console_port
        self.conf = conf or {}
        self.cwd = cwd
        self.brokers = brokers
        self.env = env or {}
        self.child_pids: list[int] = []
        self._started = False

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.console_port}/"

    def _knows(self, option: str) -> bool:
        """Whether the finchmq that runs (``source``'s, if given) has the command-line ``option``."""
        if self.source is None:
            return True
        cli = self.source / "finchmq" / "cli"
        return any(f'"{option}"' in path.read_text() for path in cli.glob("*.py"))

    @property
    def broker_ports(self) -> list[int]:
        """Every broker's port: ``--brokers N`` puts the i-th at ``broker_port + 10 * i``."""
        return [self.broker_port + 10 * i for i in range(self.brokers)]

    @property
    def pids(self) -> list[int]:
        """This process's and its child brokers' (``--brokers N``) process ids."""
        return [self.pid, *self.child_pids]

    def cpu_seconds(self) -> float:
        """CPU seconds of the server and its child brokers."""
        return sum(cpu_seconds(pid) for pid in self.pids)

    def _pick_ports(self) -> None:
        self.grpc_port = free_port() if self.grpc_port else 0
        self.namesrv_port = free_port()
        self.broker_port = free_broker_ports(self.brokers)
        self.metrics_port = free_port() if self.metrics_port else 0

    def _args(self) -> list[str]:
        args = [
            sys.executable, "-m", "finchmq.cli", "server", "--data-dir", str(self.data_dir),
            "--namesrv-port", str(self.namesrv_port), "--broker-port", str(self.broker_port),
            "--broker-ip", "127.0.0.1", "--bind", "127.0.0.1", "--metrics-port", str(self.metrics_port),
            "--console-port", str(self.console_port),
        ]  # fmt: skip
        if self.grpc_port or self._knows("--grpc-port"):  # off, unless the revision predates it
            args += ["--grpc-port", str(self.grpc_port)]
        if self.brokers > 1:
            args += ["--brokers", str(self.brokers)]
        if self.conf:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            conf_file = self.data_dir / "broker.conf"
            conf_file.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
            args += ["-c", str(conf_file)]
        return args

    def start(self) -> Self:
        # A port picked free may be taken before the server binds it (another test, another run
        # beside this one): the first start picks new ports and tries again. A restart (after
        # kill() or stop()) keeps its ports, which the test relies on.
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._spawn(
                    self._args(),
                    self.cwd,
                    lambda: _READY.search(self.log_path.read_text(errors="replace")) is not None,
                    "get ready",
                    {**self.env, "PYTHONPATH": str(self.source)} if self.source is not None else self.env,
                )
                break
            except RuntimeError as exc:
                if self._started or attempt == _PORT_ATTEMPTS - 1 or "address already in use" not in str(exc):
                    raise
                self._pick_ports()
        self._started = True
        log = self.log_path.read_text(errors="replace")
        self.child_pids = [int(pid) for pid in re.findall(r"\(store .*, pid (\d+)\)", log)]
        return self
