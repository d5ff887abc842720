"""The start/close life cycle shared by servers, controllers and clients."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self


class AsyncService(abc.ABC):
    """Something started with ``await start()`` and stopped with ``await close()``.

    It is also an async context manager: ``async with Service(...) as service:`` starts it and
    closes it on the way out, whatever happened inside.
    """

    @abc.abstractmethod
    async def start(self) -> None:
        """Start serving; raises if it cannot."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop and release what :meth:`start` took; safe to call twice."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
