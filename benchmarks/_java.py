"""Apache RocketMQ 4.9.8 (Java), the reference, as child processes for the benchmarks.

The build lives in ``../shared/java-rocketmq`` beside the checkout (or ``$FINCHMQ_JAVA_ROCKETMQ``,
as the Makefile and ``tests/java`` look for it); its ``run.sh`` starts a name server and a broker
(``autoCreateTopicEnable=true``, 64 MiB commit-log files). A benchmark that compares with Java
skips it, saying why, when that folder or ``java`` is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from benchmarks._server import ROOT, ChildServer, free_port

__all__ = ["JavaBroker", "JavaNamesrv", "java_broker", "java_home", "java_missing"]


def java_home() -> Path:
    """Where the Java build is looked for."""
    return Path(os.environ.get("FINCHMQ_JAVA_ROCKETMQ", ROOT.parent / "shared" / "java-rocketmq"))


def java_missing() -> str:
    """Why Java cannot run here ("" when it can)."""
    if not (java_home() / "run.sh").exists():
        return f"Apache RocketMQ 4.9.8 (Java) not found at {java_home()} (set FINCHMQ_JAVA_ROCKETMQ)"
    if shutil.which("java") is None:
        return "no java on the PATH"
    return ""


class JavaNamesrv(ChildServer):
    """Java's name server (``run.sh namesrv``) on a free loopback port."""

    name = "Java name server"
    ready_timeout_seconds = 120.0

    def __init__(self) -> None:
        super().__init__(None, "finchmq-java-ns-")
        self.port = free_port()

    def start(self) -> Self:
        args = [str(java_home() / "run.sh"), "namesrv", str(self.port), str(self.data_dir)]
        self._spawn(args, None, lambda: "boot success" in self.log_path.read_text(errors="replace"), "boot")
        return self


class JavaBroker(ChildServer):
    """Java's broker (``run.sh broker``) registered with ``namesrv_port``, on a free loopback port.
    ``run.sh`` execs the JVM, so ``pid`` is the java process: its /proc figures count every thread."""

    name = "Java broker"
    ready_timeout_seconds = 180.0

    def __init__(self, namesrv_port: int) -> None:
        super().__init__(None, "finchmq-java-broker-")
        self.namesrv_port = namesrv_port
        self.port = free_port()

    def start(self) -> Self:
        args = [
            str(java_home() / "run.sh"),
            "broker",
            str(self.namesrv_port),
            str(self.port),
            str(self.data_dir),
        ]
        self._spawn(args, None, lambda: "boot success" in self.log_path.read_text(errors="replace"), "boot")
        return self


@contextlib.contextmanager
def java_broker() -> Iterator[JavaBroker]:
    """A Java name server and broker, stopped on exit."""
    with JavaNamesrv() as namesrv, JavaBroker(namesrv.port) as broker:
        yield broker
