"""What every broker processor shares: the broker context, the ``@handles`` table and dispatch.

A processor method answers one or more request codes when decorated with ``@handles(code, ...)``;
the decorator's ``executor`` names the request executor that runs it (the processor's
``executor`` by default). The controller registers each code from these tables, nowhere else.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from finchmq.broker.context import BrokerContext
from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.remoting import RemotingContext

__all__ = ["BrokerProcessor", "handles", "now_ms"]


_F = TypeVar("_F", bound=Callable[..., Any])
_MARK = "__finchmq_handles__"


def now_ms() -> int:
    return int(time.time() * 1000)


def handles(*codes: int, executor: str | None = None) -> Callable[[_F], _F]:
    """Declare that the decorated ``(self, ctx, request)`` method answers ``codes``.

    ``executor`` overrides the processor's executor for these codes (e.g. HEART_BEAT runs on the
    heartbeat executor while the rest of client management runs on its own).
    """

    def mark(method: _F) -> _F:
        value = (tuple(int(code) for code in codes), executor)
        try:
            setattr(method, _MARK, value)
        except AttributeError:  # a method compiled by mypyc (docs/compiled.md) takes no attributes
            _COMPILED_MARKS[method] = value
        return method

    return mark


_COMPILED_MARKS: dict[object, tuple[tuple[int, ...], str | None]] = {}


def _marked(member: object) -> tuple[tuple[int, ...], str | None] | None:
    marked: tuple[tuple[int, ...], str | None] | None = getattr(member, _MARK, None)
    return marked if marked is not None else _COMPILED_MARKS.get(member)


class BrokerProcessor:
    """Base of the broker's processors: dispatches a request to its ``@handles`` method."""

    executor: ClassVar[str]
    """The request executor (by name) that runs this processor's codes unless a handler says otherwise."""
    handlers: ClassVar[dict[int, tuple[str, str | None]]] = {}
    """code -> (method name, executor override), collected from ``@handles`` at class creation."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[int, tuple[str, str | None]] = {}
        for name, member in inspect.getmembers(cls, inspect.isroutine):  # compiled methods too
            marked = _marked(member)
            if marked is None:
                continue
            codes, executor = marked
            for code in codes:
                if code in table:
                    raise TypeError(
                        f"{cls.__name__}: request code {code} handled by {table[code][0]} and {name}"
                    )
                table[code] = (name, executor)
        cls.handlers = table

    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self._bound: dict[int, tuple[Callable[..., Any], bool]] = {
            code: (getattr(self, name), inspect.iscoroutinefunction(getattr(type(self), name)))
            for code, (name, _) in self.handlers.items()
        }

    @classmethod
    def routes(cls) -> dict[int, str]:
        """code -> executor name, for registration."""
        return {code: executor or cls.executor for code, (_, executor) in cls.handlers.items()}

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        bound = self._bound.get(request.code)
        if bound is None:
            return self.not_supported(request)
        handler, is_async = bound
        answer: RemotingCommand | None = await handler(ctx, request) if is_async else handler(ctx, request)
        if self.context.metadata_unwritten:  # this request created a topic or a group: on disk first
            await self.context.flush_metadata()
        return answer

    def reject_request(self) -> bool:
        return False

    @staticmethod
    def not_supported(request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
