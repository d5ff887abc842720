"""``EmbeddedServer``: name server + broker in a background thread, for tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from finchmq.broker import BrokerConfig, BrokerController
from finchmq.cli.grpc import local_grpc_server
from finchmq.common import config_from_properties
from finchmq.grpc import GrpcServer
from finchmq.grpc.config import GrpcConfig
from finchmq.namesrv import NamesrvConfig, NamesrvController
from finchmq.remoting import TlsConfig, loop_factory
from finchmq.remoting.tls import is_tls_key
from finchmq.store import MessageStoreConfig

__all__ = ["EmbeddedServer"]

_TEST_SEGMENT = 64 * 1024 * 1024  # smaller than RocketMQ's 1 GiB: tests create many stores
_TEST_DEFAULTS = {
    # Test machines are often busy with the tests themselves; a send that waits 200 ms in the
    # queue there is not overload. Flow-control tests set this back to what they study.
    "waitTimeMillsInSendQueue": "3000",
    # RocketMQ's index file (5M slots, 20M entries) is ~420 MB allocated up front; a test's is 8 MB.
    "maxHashSlotNum": "100000",
    "maxIndexNum": "400000",
}


class EmbeddedServer:
    """A running name server and broker on 127.0.0.1; use as a context manager or start/stop.

    ``broker_properties`` are ``broker.conf`` keys (e.g. ``{"messageDelayLevel": "1s 2s"}``);
    they override the test-friendly defaults (64 MiB commit-log segments, an 8 MB index file,
    ASYNC_FLUSH, ``waitTimeMillsInSendQueue=3000`` so a busy test machine is not mistaken for
    overload).
    """

    def __init__(
        self,
        data_dir: Path,
        broker_properties: Mapping[str, str] | None = None,
        *,
        grpc_port: int | None = None,
        grpc_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self._grpc_wanted = grpc_port
        self._grpc_properties = dict(grpc_properties or {})
        self.grpc: GrpcServer | None = None
        self.grpc_port = 0  # the 5.x endpoint's port once started with grpc_port (0: any free port)
        self.broker_properties = {**_TEST_DEFAULTS, **(broker_properties or {})}
        self.namesrv_addr = ""
        self.broker_addr = ""
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._stop_requested: asyncio.Event | None = None

    def start(self, timeout: float = 30.0) -> EmbeddedServer:
        """Start both servers; returns once they serve. Raises what start-up raised."""
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="finchmq-embedded", daemon=True)
        self._thread.start()
        ready.result(timeout)
        return self

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(self._main(ready))
        self._stopped.set()

    async def _main(self, ready: concurrent.futures.Future[None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_requested = asyncio.Event()
        try:
            tls_props = {k: v for k, v in self.broker_properties.items() if is_tls_key(k)}
            tls = TlsConfig.from_properties(tls_props)  # tls.* keys serve both servers, as in finchmq server
            namesrv = NamesrvController(
                NamesrvConfig(
                    listen_port=0,
                    bind_address="127.0.0.1",
                    kv_config_path=self.data_dir / "namesrv" / "kvConfig.json",
                ),
                tls=tls,
            )
            await namesrv.start()
            self.namesrv = namesrv
            broker_config, rest = config_from_properties(
                BrokerConfig(listen_port=0, bind_address="127.0.0.1", broker_ip1="127.0.0.1"),
                {k: v for k, v in self.broker_properties.items() if k not in tls_props},
            )
            broker_config = replace(broker_config, namesrv_addr=namesrv.address)
            store_config, unknown = MessageStoreConfig(
                store_path_root_dir=self.data_dir / "store", mapped_file_size_commit_log=_TEST_SEGMENT
            ).with_properties(rest)
            if unknown:
                raise ValueError(f"unknown broker.conf keys: {sorted(unknown)}")
            broker = BrokerController(broker_config, store_config, tls=tls)
            self.broker = broker
            await broker.start()
            self.namesrv_addr = namesrv.address
            self.broker_addr = broker.broker_addr
            if self._grpc_wanted is not None:
                base = GrpcConfig(
                    grpc_server_port=self._grpc_wanted,
                    bind_address="127.0.0.1",
                    max_message_size=store_config.max_message_size,
                )
                grpc_config, unknown = config_from_properties(base, self._grpc_properties)
                if unknown:
                    raise ValueError(f"unknown gRPC keys: {sorted(unknown)}")
                self.grpc = local_grpc_server(broker, grpc_config)
                await self.grpc.start()
                self.grpc_port = self.grpc.port
        except BaseException as exc:
            await self._close_servers()
            ready.set_exception(exc)
            return
        ready.set_result(None)
        await self._stop_requested.wait()
        await self._close_servers()

    async def _close_servers(self) -> None:
        if self.grpc is not None:
            await self.grpc.close()
        if self.broker is not None:
            await self.broker.close()
        if self.namesrv is not None:
            await self.namesrv.close()

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine on the server's loop (e.g. to inspect the broker) and return its result."""
        assert self._loop is not None, "server not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Shut down cleanly (flush, persist offsets, unregister); idempotent."""
        loop, stop = self._loop, self._stop_requested
        if loop is not None and stop is not None and not self._stopped.is_set():
            loop.call_soon_threadsafe(stop.set)
            self._stopped.wait(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
