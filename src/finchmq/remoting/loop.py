"""The event loop finchmq runs on: uvloop when it is installed, else asyncio's default."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any, TypeVar

__all__ = ["HAVE_UVLOOP", "loop_factory", "run"]

_T = TypeVar("_T")

_uvloop: ModuleType | None
try:
    import uvloop as _uvloop
except ImportError:  # pragma: no cover - Windows, or installed without uvloop
    _uvloop = None

HAVE_UVLOOP = _uvloop is not None


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory for new event loops (``asyncio.Runner(loop_factory=...)``)."""
    if _uvloop is not None:
        factory: Callable[[], asyncio.AbstractEventLoop] = _uvloop.new_event_loop
        return factory
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """``asyncio.run`` on the fastest available loop."""
    with asyncio.Runner(loop_factory=loop_factory(), debug=debug) as runner:
        return runner.run(main)
