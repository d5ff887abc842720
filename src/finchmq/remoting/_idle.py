"""Closing connections that have been idle too long (Java's ``IdleStateHandler``, all-idle)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from .connection import CloseReason, RemotingConnection

log = logging.getLogger(__name__)


async def close_idle_connections(
    connections: Callable[[], Iterable[RemotingConnection]],
    max_idle_seconds: float,
    on_idle: Callable[[RemotingConnection], None],
) -> None:
    """Forever: close connections with no traffic for ``max_idle_seconds``."""
    interval = min(max(max_idle_seconds / 4, 0.02), 10.0)
    while True:
        await asyncio.sleep(interval)
        deadline = time.monotonic() - max_idle_seconds
        for conn in list(connections()):
            if conn.is_open and conn.last_activity < deadline and conn.pending_count == 0:
                log.info("closing idle connection %s (idle > %ss)", conn.remote_addr, max_idle_seconds)
                on_idle(conn)
                conn.close(CloseReason.IDLE)
