"""What the remoting client and server share: the request dispatcher for calls from the peer,
the channel event listener, and the scan that closes idle connections."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from finchmq.common.lifecycle import AsyncService
from finchmq.common.tasks import BackgroundTasks

from ._idle import close_idle_connections, idle_scan_interval_ms
from .channel import ChannelEventListener
from .connection import RemotingConnection
from .processor import RequestDispatcher, RequestExecutor
from .routing import ExecutorName, RequestProcessor

log = logging.getLogger(__name__)


class RemotingEndpoint(AsyncService):
    """Base of ``RemotingClient`` and ``RemotingServer``."""

    def __init__(self, name: str, listener: ChannelEventListener | None) -> None:
        self.dispatcher = RequestDispatcher()
        self.name = name
        self._listener = listener
        self._tasks = BackgroundTasks(name)
        self._closed = False

    def register_processor(
        self, processor: RequestProcessor, executors: Mapping[ExecutorName, RequestExecutor]
    ) -> None:
        """Answer the peer's requests of every code in ``processor``'s ``@handles`` table."""
        self.dispatcher.register_processor(processor, executors)

    def _start_idle_scan(
        self, connections: Callable[[], Iterable[RemotingConnection]], max_idle_seconds: float
    ) -> None:
        """Close connections idle for ``max_idle_seconds`` (never when it is 0)."""
        if max_idle_seconds > 0:
            self._tasks.every(
                idle_scan_interval_ms(max_idle_seconds),
                lambda: close_idle_connections(connections(), max_idle_seconds, self._on_idle),
                "idle",
                idle_scan_interval_ms(max_idle_seconds),
            )

    def _on_idle(self, conn: RemotingConnection) -> None:
        if self._listener is not None:
            try:
                self._listener.on_channel_idle(conn)
            except Exception:
                log.exception("channel idle listener failed for %s", conn.remote_addr)
