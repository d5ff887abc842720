"""A local RocketMQ-style cluster of separate processes: name servers and broker groups (a master and
its slaves, same ``brokerName``), on loopback ports, each process with its own data directory;
optionally a ``finchmq proxy`` in front of them for RocketMQ 5.x (gRPC) clients.

``finchmq cluster`` runs one for trying things; the HA tests and ``benchmarks/replication.py``
start one and kill its processes with SIGKILL. Every broker gets a ``broker.conf`` written with
RocketMQ's keys, so what runs here is what a deployment would run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from .process import ChildServer, free_broker_ports, free_port

__all__ = ["BrokerProcess", "LocalCluster", "NamesrvProcess", "ProxyProcess", "free_port_pair"]


def free_port_pair() -> int:
    """A loopback port ``p`` with ``p - 2``, ``p - 1`` and ``p + 1`` also free: a broker, its VIP
    channel (``listenPort - 2``) and its HA port (``listenPort + 1``)."""
    return free_broker_ports(1)


def _metrics_conf() -> dict[str, str]:
    """broker.conf keys serving /metrics on a free loopback port."""
    return {
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": str(free_port()),
    }


class NamesrvProcess(ChildServer):
    """``finchmq namesrv`` on a loopback port."""

    name = "finchmq namesrv"

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        super().__init__(data_dir, "finchmq-namesrv-", data_dir / "namesrv.log")
        self.port = port or free_port()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Self:
        args = [
            sys.executable, "-m", "finchmq.cli", "namesrv", "--port", str(self.port),
            "--bind", "127.0.0.1", "--data-dir", str(self.data_dir),
        ]  # fmt: skip
        self._spawn(args, None, lambda: "listening on" in self.log_path.read_text(errors="replace"), "listen")
        return self


class ProxyProcess(ChildServer):
    """``finchmq proxy``: a gRPC endpoint for 5.x clients in front of the brokers of ``namesrv_addr``,
    on loopback ``port`` (a free one unless given)."""

    name = "finchmq proxy"

    def __init__(self, data_dir: Path, namesrv_addr: str, port: int | None = None) -> None:
        super().__init__(data_dir, "finchmq-proxy-", data_dir / "proxy.log")
        self.namesrv_addr = namesrv_addr
        self.port = port or free_port()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Self:
        args = [
            sys.executable, "-m", "finchmq.cli", "--log-level", "INFO", "proxy",
            "--namesrv", self.namesrv_addr, "--grpc-port", str(self.port), "--bind", "127.0.0.1",
        ]  # fmt: skip
        self._spawn(args, None, lambda: "in front of" in self.log_path.read_text(errors="replace"), "listen")
        return self


class BrokerProcess(ChildServer):
    """``finchmq broker -c broker.conf``; ``kill()`` is SIGKILL, ``start()`` again restarts it on
    the same store."""

    name = "finchmq broker"
    stop_grace_seconds = 60.0
    ready_timeout_seconds = 60.0

    def __init__(self, data_dir: Path, conf: dict[str, str]) -> None:
        super().__init__(data_dir, "finchmq-broker-", data_dir / "broker.log")
        self.conf = conf
        self._mark = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.conf['listenPort']}"

    @property
    def metrics_port(self) -> int | None:
        """Where this broker serves /metrics, if it does."""
        port = self.conf.get("metricsPromExporterPort")
        return int(port) if self.conf.get("metricsExporterType") == "PROM" and port else None

    @property
    def label(self) -> str:
        return f"{self.conf['brokerName']}#{self.conf['brokerId']}"

    @property
    def store_dir(self) -> Path:
        return Path(self.conf["storePathRootDir"])

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf_file = self.data_dir / "broker.conf"
        conf_file.write_text("".join(f"{k}={v}\n" for k, v in self.conf.items()))
        with open(self.log_path, "ab") as log:
            log.write(b"--- start ---\n")
        mark = self.log_path.stat().st_size
        self._mark = mark
        args = [sys.executable, "-m", "finchmq.cli", "--log-level", "INFO", "broker", "-c", str(conf_file)]

        def ready() -> bool:
            with open(self.log_path, "rb") as log:
                log.seek(mark)
                return b"ready in" in log.read()

        with open(self.log_path, "ab") as log:  # appended: a restart keeps the earlier runs' log
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready(ready)
        return self

    def _wait_ready(self, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.ready_timeout_seconds
        while time.monotonic() < deadline:
            if ready():
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}: {self.log_tail()}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.label} did not get ready: {self.log_tail()}")

    def log_since_start(self) -> str:
        """What this process wrote since its last start."""
        with open(self.log_path, "rb") as log:
            log.seek(self._mark)
            return log.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no flush, no unregister, as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LocalCluster:
    """``namesrvs`` name servers and ``groups`` broker groups (broker-a, broker-b, ...), each a
    master (``role``: SYNC_MASTER or ASYNC_MASTER) and ``slaves`` slaves, under ``root``;
    ``metrics`` has every broker serve /metrics on a free port of its own.

    ``conf`` adds broker.conf keys to every broker; ``grpc_port`` (0: a free one) adds a
    ``finchmq proxy`` for 5.x clients in front of the brokers (``proxy``). Start with ``start()``
    or ``with``; the processes are stopped with SIGTERM (a clean shutdown) at ``stop()``.
    """

    def __init__(
        self,
        root: Path,
        *,
        groups: int = 2,
        slaves: int = 1,
        namesrvs: int = 2,
        role: str = "SYNC_MASTER",
        cluster_name: str = "FinchCluster",
        conf: dict[str, str] | None = None,
        metrics: bool = False,
        grpc_port: int | None = None,
    ) -> None:
        if role not in ("SYNC_MASTER", "ASYNC_MASTER"):
            raise ValueError(f"role must be SYNC_MASTER or ASYNC_MASTER, got {role!r}")
        if not 1 <= groups <= 26 or slaves < 0 or namesrvs < 1:
            raise ValueError("groups must be in 1..26, slaves >= 0, namesrvs >= 1")
        self.root = root
        self.namesrvs = [NamesrvProcess(root / f"namesrv-{i}") for i in range(namesrvs)]
        self.brokers: dict[tuple[str, int], BrokerProcess] = {}
        self.proxy = (
            ProxyProcess(root / "proxy", self.namesrv_addr, grpc_port or None)
            if grpc_port is not None
            else None
        )
        for g in range(groups):
            name = f"broker-{chr(ord('a') + g)}"
            for broker_id in range(slaves + 1):
                port = free_port_pair()
                while any(
                    int(b.conf["listenPort"]) in (port - 1, port, port + 1) for b in self.brokers.values()
                ):
                    port = free_port_pair()
                data = root / f"{name}-{broker_id}"
                self.brokers[(name, broker_id)] = BrokerProcess(
                    data,
                    {
                        "brokerClusterName": cluster_name,
                        "brokerName": name,
                        "brokerId": str(broker_id),
                        "brokerRole": role if broker_id == 0 else "SLAVE",
                        "listenPort": str(port),
                        "brokerIP1": "127.0.0.1",
                        "bindAddress": "127.0.0.1",
                        "namesrvAddr": "",  # set at start, once the name servers have ports
                        "storePathRootDir": str(data / "store"),
                        **(_metrics_conf() if metrics else {}),
                        **(conf or {}),
                    },
                )

    @property
    def namesrv_addr(self) -> str:
        return ";".join(n.addr for n in self.namesrvs)

    def broker(self, name: str, broker_id: int = 0) -> BrokerProcess:
        return self.brokers[(name, broker_id)]

    def start(self) -> Self:
        try:
            for namesrv in self.namesrvs:
                namesrv.start()
            for broker in self.brokers.values():
                broker.conf["namesrvAddr"] = self.namesrv_addr
                broker.start()
            self.wait_slaves_connected()
            if self.proxy is not None:
                self.proxy.start()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_slaves_connected(self, timeout: float = 30.0) -> None:
        """Wait until every running master has accepted the HA connection of each running slave
        of its group (a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until then)."""
        deadline = time.monotonic() + timeout
        for (name, broker_id), master in self.brokers.items():
            if broker_id != 0 or not master.running:
                continue
            slaves = sum(1 for (n, i), b in self.brokers.items() if n == name and i != 0 and b.running)
            while master.log_since_start().count("requests the log from offset") < slaves:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{master.label}: its slaves did not connect: {master.log_tail()}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        for broker in reversed(list(self.brokers.values())):
            broker.stop()
        for namesrv in self.namesrvs:
            namesrv.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
