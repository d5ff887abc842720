"""Closing connections: those idle too long (Java's ``IdleStateHandler``, all-idle), and all of
them at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
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


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait for it to end."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


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
