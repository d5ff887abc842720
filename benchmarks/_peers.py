"""The peers ``compare.py`` measures finchmq against: Debian's ``nats-server`` (JetStream, file
storage) and ``redis-server`` (Streams, AOF), each a subprocess on a free loopback port with its
own temporary data directory, installed with apt-get when missing.

Durability is set as close to finchmq's ASYNC_FLUSH (the page cache now, fsync by a background
flusher every ``flushIntervalCommitLog`` = 500 ms) as each allows; ``settings`` says what was set.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from typing import Self

from benchmarks._server import ChildServer, free_port

__all__ = ["NatsServer", "PeerServer", "RedisServer", "ensure_debian_package"]


def ensure_debian_package(binary: str, package: str) -> str:
    """The path of ``binary``, installing Debian's ``package`` with apt-get first when missing."""
    path = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if path:
        return path
    print(f"compare: {binary} not found; installing Debian's {package} (apt-get)", flush=True)
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, env=env)
    path = shutil.which(binary, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if not path:
        raise SystemExit(f"{package} installed, but {binary} is still not on the PATH")
    return path


class PeerServer(ChildServer):
    """A peer server subprocess: ``start()`` waits until its port accepts connections."""

    name = ""
    binary = ""
    package = ""
    settings = ""  # the durability and storage settings, for the report

    def __init__(self) -> None:
        self.path = ensure_debian_package(self.binary, self.package)
        super().__init__(None, f"finchmq-compare-{self.name}-")
        self.port = free_port()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    @classmethod
    def version(cls) -> str:
        """The server's ``--version`` line (installs it first when missing)."""
        path = ensure_debian_package(cls.binary, cls.package)
        out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
        text = (out.stdout or out.stderr).strip()
        return text.splitlines()[0] if text else "?"

    def start(self) -> Self:
        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False

        self._spawn(self.command(), self.data_dir, listening, "listen")
        return self


class NatsServer(PeerServer):
    """NATS with JetStream, file storage. The streams are R1 with file storage (created by the
    load generator). nats-server 2.9 (Debian 12) has no ``sync_interval`` setting (2.10 added
    it, and 2.9.10 refuses the key): its file store writes each stored message to the OS (the
    page cache) and fsyncs on its own fixed interval, 2 minutes per the NATS docs, so it is less
    durable than finchmq's 500 ms flush, never more."""

    name = "nats"
    binary = "nats-server"
    package = "nats-server"
    settings = (
        "JetStream file storage, R1 streams, limits retention; writes reach the page cache as they are "
        "stored, fsync on the 2.9 file store's fixed interval (sync_interval is not configurable before "
        "2.10: 2.9.10 refuses the key); publishers await each PubAck"
    )

    def command(self) -> list[str]:
        conf = self.data_dir / "nats.conf"
        conf.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            f'jetstream {{\n  store_dir: "{self.data_dir / "js"}"\n  max_memory_store: 256MB\n'
            "  max_file_store: 20GB\n}\n"
        )
        return [self.path, "-c", str(conf)]


class RedisServer(PeerServer):
    """Redis with AOF: ``appendonly yes``, ``appendfsync everysec`` (write(2) per event-loop turn,
    fsync once a second by a background thread), RDB snapshots off."""

    name = "redis"
    binary = "redis-server"
    package = "redis-server"
    settings = (
        "Streams (XADD, no trimming), appendonly yes, appendfsync everysec, RDB snapshots off (save ''); "
        "every message is also kept in memory"
    )

    def command(self) -> list[str]:
        return [
            self.path, "--port", str(self.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
            "--dir", str(self.data_dir), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", "--daemonize", "no", "--logfile", "",
        ]  # fmt: skip
