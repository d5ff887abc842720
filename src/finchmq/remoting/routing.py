"""How a request finds its handler: ``@handles``, the executors' names, and ``Later``.

Strategy:
    A processor is a class whose methods answer request codes, each declared once, next to its
    code, with ``@handles(code, ..., executor=ExecutorName.X)``; ``RequestProcessor`` collects
    them into the class's table when the class is created, and a ``RequestDispatcher`` registers a
    processor from that table, nowhere else. The broker, the name server and the client all
    register this way.

    A handler is a plain function or a coroutine function. A plain one answers at once (the
    response, or None for none) or returns ``Later(resume)``: the rest of the request, a
    coroutine function the request's executor awaits (a flush, a registration, an append on
    the writer thread). What the plain part decoded is shared with the rest through the closure,
    so a request is decoded once however it is answered. ``RequestProcessor.process`` is the one
    entrance: the dispatcher calls it on the loop when the executor is idle (the fast path, no
    queue and no coroutine), a worker calls it for a request that had to queue.

    Executors are named by ``ExecutorName`` everywhere: processors, the owner that builds the
    executors, metrics labels and the broker's fast failure.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Final, TypeVar

from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.command import RemotingCommand

from .channel import RemotingContext

__all__ = ["Answer", "ExecutorName", "Later", "RequestProcessor", "RequestRefused", "handles"]


class ExecutorName(enum.StrEnum):
    """Every request executor, by the name its tasks, metrics and flow-control counters carry
    (Java: the broker's ``sendMessageExecutor``, ``pullMessageExecutor``..., the name server's
    ``remotingExecutor``, the client's callback executor)."""

    SEND = "send"
    PULL = "pull"
    QUERY = "query"
    ADMIN = "admin"
    HEARTBEAT = "heartbeat"
    CLIENT_MANAGE = "client-manage"
    CONSUMER_MANAGE = "consumer-manage"
    END_TRANSACTION = "end-transaction"
    LOAD_BALANCE = "load-balance"  # 5.x: QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE
    ACK = "ack"  # 5.x: ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME (ackMessageExecutor)
    NAMESRV = "namesrv"
    CLIENT = "client"


class Later:
    """A handler's answer when the request needs waiting: ``resume()`` runs the rest of it on the
    request's executor and gives the response (None for none)."""

    __slots__ = ("resume",)

    def __init__(self, resume: Callable[[], Awaitable[RemotingCommand | None]]) -> None:
        self.resume = resume

    def __repr__(self) -> str:
        return f"Later({self.resume!r})"


Answer = RemotingCommand | Later | None
"""What a handler's plain part gives: the response, the rest of the request, or no response."""


class RequestRefused(Exception):
    """Raised by a ``RequestDispatcher.before_request`` hook: the request is answered with
    ``response_code`` and ``remark`` and never runs (Java: an exception from an RPC hook, which
    ``processRequestCommand`` answers SYSTEM_ERROR)."""

    def __init__(self, remark: str, response_code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(remark)
        self.remark = remark
        self.response_code = response_code


_F = TypeVar("_F", bound=Callable[..., Any])
_MARK: Final = "__finchmq_handles__"
_Mark = tuple[tuple[int, ...], "ExecutorName | None"]
# Methods compiled by mypyc (benchmarks/compiled_build.py) take no attributes: their marks live here.
_COMPILED_MARKS: dict[object, _Mark] = {}


def handles(*codes: int, executor: ExecutorName | None = None) -> Callable[[_F], _F]:
    """Declare that the decorated ``(self, ctx, request)`` method answers ``codes``.

    ``executor`` overrides the processor's executor for these codes (e.g. HEART_BEAT runs on the
    heartbeat executor while the rest of client management runs on its own).
    """
    if not codes:
        raise TypeError("@handles needs at least one request code")
    value: _Mark = (tuple(int(code) for code in codes), executor)

    def mark(method: _F) -> _F:
        try:
            setattr(method, _MARK, value)
        except AttributeError:
            _COMPILED_MARKS[method] = value
        return method

    return mark


def _marked(member: object) -> _Mark | None:
    marked: _Mark | None = getattr(member, _MARK, None)
    return marked if marked is not None else _COMPILED_MARKS.get(member)


Handler = Callable[[RemotingContext, RemotingCommand], Any]


class RequestProcessor:
    """Base of every processor: its ``@handles`` table and the one entrance, ``process``.

    Subclasses set ``executor`` (the executor of their codes unless a handler names another) and
    may override ``reject_request`` (True: every request is answered SYSTEM_BUSY
    ``[REJECTREQUEST]`` without running, Java ``NettyRequestProcessor.rejectRequest``).
    """

    executor: ClassVar[ExecutorName]
    handlers: ClassVar[dict[int, tuple[str, ExecutorName | None]]] = {}
    """code -> (method name, executor override), collected from ``@handles`` at class creation."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Walk the classes base first: a subclass may re-declare a method's codes, and a method it
        # overrides without ``@handles`` keeps the codes its base declared for it.
        by_method: dict[str, _Mark] = {}
        for klass in reversed(cls.__mro__):
            for name, member in vars(klass).items():
                if not callable(member):
                    continue
                marked = _marked(member)
                if marked is not None:
                    by_method[name] = marked
        table: dict[int, tuple[str, ExecutorName | None]] = {}
        for name, (codes, executor) in by_method.items():
            for code in codes:
                if code in table:
                    raise TypeError(
                        f"{cls.__name__}: request code {code} handled by {table[code][0]} and {name}"
                    )
                table[code] = (name, executor)
        cls.handlers = table

    def __init__(self) -> None:
        self._bound: dict[int, tuple[Handler, bool]] = {
            code: (getattr(self, name), inspect.iscoroutinefunction(getattr(type(self), name)))
            for code, (name, _) in self.handlers.items()
        }

    @classmethod
    def executors_by_code(cls) -> dict[int, ExecutorName]:
        """code -> the executor that runs it, for registration."""
        return {code: executor or cls.executor for code, (_, executor) in cls.handlers.items()}

    def process(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        """The one entrance: run ``request``'s handler as far as it goes without waiting."""
        bound = self._bound.get(request.code)
        if bound is None:
            return self.not_supported(request)
        handler, is_async = bound
        if is_async:
            return Later(lambda: handler(ctx, request))
        answer: Answer = handler(ctx, request)
        return answer

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        """``process`` to the end: the response (None for none)."""
        answer = self.process(ctx, request)
        if isinstance(answer, Later):
            return await answer.resume()
        return answer

    def reject_request(self) -> bool:
        return False

    @staticmethod
    def not_supported(request: RemotingCommand) -> RemotingCommand:
        """Java's answer to a code nobody handles."""
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
