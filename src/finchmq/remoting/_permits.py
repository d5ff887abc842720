"""Bounding requests in flight (Java's ``semaphoreAsync``/``semaphoreOneway``)."""

from __future__ import annotations

import asyncio

from .errors import RemotingTooMuchRequestError

__all__ = ["acquire_permit"]


async def acquire_permit(semaphore: asyncio.Semaphore, timeout_millis: int, setting: str, addr: str) -> None:
    """Take a permit, waiting at most ``timeout_millis``; else ``RemotingTooMuchRequestError``."""
    if not semaphore.locked():
        await semaphore.acquire()
        return
    try:
        async with asyncio.timeout(timeout_millis / 1000):
            await semaphore.acquire()
    except TimeoutError:
        raise RemotingTooMuchRequestError(
            f"too many requests in flight to {addr}: {setting} reached and none finished within "
            f"{timeout_millis}ms; slow down or raise {setting}",
            addr,
        ) from None
