"""pytest plugin: embedded finchmq servers as fixtures (registered through the ``pytest11``
entry point, so ``pip install finchmq`` is all it takes).

    def test_orders(finchmq_namesrv):            # "127.0.0.1:PORT", a fresh server per test
        producer = Producer("pg", namesrv_addr=finchmq_namesrv) ...

    def test_retries(finchmq_server_factory):
        server = finchmq_server_factory({"messageDelayLevel": "1s 1s 1s"})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from .embedded import EmbeddedServer

__all__ = ["finchmq_namesrv", "finchmq_server", "finchmq_server_factory"]

ServerFactory = Callable[..., EmbeddedServer]


@pytest.fixture
def finchmq_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """Start embedded servers with your ``broker.conf`` settings (and ``EmbeddedServer``'s other
    options, e.g. ``grpc_port=0`` for a RocketMQ 5.x endpoint); all stop after the test."""
    servers: list[EmbeddedServer] = []

    def start(
        broker_properties: Mapping[str, str] | None = None, data_dir: Path | None = None, **options: Any
    ) -> EmbeddedServer:
        directory = data_dir or tmp_path_factory.mktemp("finchmq")
        server = EmbeddedServer(directory, broker_properties, **options).start()
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def finchmq_server(finchmq_server_factory: ServerFactory) -> EmbeddedServer:
    """A running name server + broker on loopback, in a temporary directory."""
    return finchmq_server_factory()


@pytest.fixture
def finchmq_namesrv(finchmq_server: EmbeddedServer) -> str:
    """The embedded name server's address, ``"127.0.0.1:PORT"``."""
    return finchmq_server.namesrv_addr
