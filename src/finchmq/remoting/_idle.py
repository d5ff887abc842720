"""Closing connections: those idle too long (Java's ``IdleStateHandler``, all-idle), and all of
them at shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from .connection import CloseReason, RemotingConnection

log = logging.getLogger(__name__)


_CLOSE_GRACE = 5.0  # s to flush and close before a connection is aborted


async def close_all(connections: Iterable[RemotingConnection]) -> None:
    """Close ``connections`` (failing their pending calls) and wait; abort any that hang."""
    closing = list(connections)
    for conn in closing:
        conn.close(CloseReason.SHUTDOWN)
    for conn in closing:
        try:
            async with asyncio.timeout(_CLOSE_GRACE):
                await conn.wait_closed()
        except TimeoutError:
            conn.abort()


def idle_scan_interval_ms(max_idle_seconds: float) -> float:
    """How often to look for idle connections: a quarter of the limit, within 20 ms..10 s."""
    return min(max(max_idle_seconds / 4, 0.02), 10.0) * 1000


def close_idle_connections(
    connections: Iterable[RemotingConnection],
    max_idle_seconds: float,
    on_idle: Callable[[RemotingConnection], None],
) -> None:
    """Close the connections with no traffic (and no call pending) for ``max_idle_seconds``."""
    deadline = time.monotonic() - max_idle_seconds
    for conn in list(connections):
        if conn.is_open and conn.last_activity < deadline and conn.pending_count == 0:
            log.info("closing idle connection %s (idle > %ss)", conn.remote_addr, max_idle_seconds)
            on_idle(conn)
            conn.close(CloseReason.IDLE)
