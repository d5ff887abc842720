"""Waiting for a condition: the one way tests let time pass.

A test never sleeps a fixed time and then asserts on state: a loaded machine (two suites on two
cores, CI's shared runners) stretches any duration past what "should be enough". It waits for the
condition it needs, with a generous deadline that only a real failure reaches, and then asserts.

- ``wait_until(predicate, ...)`` polls a synchronous predicate from blocking code;
- ``await eventually(predicate, ...)`` polls a predicate (sync or async) from a coroutine.

Both return the predicate's first truthy value, so a test can wait for a result and use it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0


class ConditionTimeout(AssertionError):
    """The condition a test waited for did not hold before its deadline."""


def wait_until(
    predicate: Callable[[], T],
    timeout: float = DEFAULT_TIMEOUT,
    what: str = "the condition",
    interval: float = 0.05,
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ConditionTimeout(f"not within {timeout:g} s: {what}")
        time.sleep(interval)


async def eventually(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = DEFAULT_TIMEOUT,
    what: str = "the condition",
    interval: float = 0.05,
) -> T:
    """Poll ``predicate`` (a function or a coroutine function) until it gives something truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() > deadline:
            raise ConditionTimeout(f"not within {timeout:g} s: {what}")
        await asyncio.sleep(interval)
