"""What a push consumer calls: listeners, their contexts and statuses, and consumption hooks.

Owns: ``ConsumeConcurrentlyStatus``/``ConsumeOrderlyStatus``, ``ConsumeConcurrentlyContext``/
``ConsumeOrderlyContext``, the listener base classes (Java ``MessageListenerConcurrently`` /
``MessageListenerOrderly``), ``ConsumeMessageHook`` and ``ConsumeMessageContext``.
Imports: ``finchmq.protocol``.

A listener is either a plain callable ``(msgs, context) -> status`` or an object with a
``consume_message(msgs, context)`` method. A blocking one (a ``def``) runs in the consumer's
thread pool; a coroutine function (``async def``) runs on the event loop and must not block it.
Returning ``None`` or raising means RECONSUME_LATER (concurrently) or
SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly), as in Java.
"""

from __future__ import annotations

import abc
import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeAlias, runtime_checkable

from finchmq.protocol.message import MessageExt, MessageQueue

__all__ = [
    "AsyncMessageListenerConcurrently",
    "AsyncMessageListenerOrderly",
    "ConcurrentlyListener",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
    "OrderlyListener",
]

ACK_INDEX_ALL: Final = 2**31 - 1  # Java Integer.MAX_VALUE: every message acknowledged


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"  # deprecated in Java; treated as SUCCESS when auto-committing
    COMMIT = "COMMIT"  # deprecated in Java
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Per call: set ``ack_index`` to acknowledge only ``msgs[:ack_index + 1]`` of a
    CONSUME_SUCCESS, ``delay_level_when_next_consume`` to choose the retry delay (0: the
    broker's ``3 + reconsume_times``; -1: straight to the dead-letter queue)."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = ACK_INDEX_ALL


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Per call: ``suspend_current_queue_time_millis`` overrides the consumer's setting for a
    SUSPEND; ``auto_commit=False`` commits only on COMMIT (Java's deprecated mode)."""

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


class MessageListenerConcurrently(abc.ABC):
    """Blocking concurrent listener; runs in the consume thread pool."""

    @abc.abstractmethod
    def consume_message(
        self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus | None:
        """Consume a batch (up to ``consume_message_batch_max_size``): CONSUME_SUCCESS or RECONSUME_LATER."""


class MessageListenerOrderly(abc.ABC):
    """Blocking orderly listener; one call at a time per queue, in offset order."""

    @abc.abstractmethod
    def consume_message(
        self, msgs: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus | None:
        """Consume a batch of one queue, in order; SUSPEND_CURRENT_QUEUE_A_MOMENT retries it later."""


class AsyncMessageListenerConcurrently(abc.ABC):
    """Coroutine concurrent listener; runs on the event loop."""

    @abc.abstractmethod
    async def consume_message(
        self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus | None:
        """As ``MessageListenerConcurrently.consume_message``, on the client's event loop."""


class AsyncMessageListenerOrderly(abc.ABC):
    """Coroutine orderly listener."""

    @abc.abstractmethod
    async def consume_message(
        self, msgs: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus | None:
        """As ``MessageListenerOrderly.consume_message``, on the client's event loop."""


ConcurrentlyListener: TypeAlias = (
    Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus | None]
    | Callable[[list[MessageExt], ConsumeConcurrentlyContext], Awaitable[ConsumeConcurrentlyStatus | None]]
    | MessageListenerConcurrently
    | AsyncMessageListenerConcurrently
)
OrderlyListener: TypeAlias = (
    Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus | None]
    | Callable[[list[MessageExt], ConsumeOrderlyContext], Awaitable[ConsumeOrderlyStatus | None]]
    | MessageListenerOrderly
    | AsyncMessageListenerOrderly
)


def listener_function(listener: object) -> tuple[Callable[..., object], bool]:
    """The callable behind ``listener`` and whether it is a coroutine function."""
    fn = getattr(listener, "consume_message", listener)
    if not callable(fn):
        raise TypeError(f"a message listener must be callable or have consume_message(), got {listener!r}")
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
    return fn, is_async


@dataclass(slots=True)
class ConsumeMessageContext:
    """What a ``ConsumeMessageHook`` sees (Java ``ConsumeMessageContext``)."""

    consumer_group: str
    msg_list: list[MessageExt]
    mq: MessageQueue
    success: bool = False
    status: str = ""
    props: dict[str, str] = field(default_factory=dict)
    mq_trace_context: object = None  # a trace hook's state between before and after


CONSUME_CONTEXT_TYPE = "ConsumeContextType"  # Java MixAll.CONSUME_CONTEXT_TYPE: a props key


def consume_return_type(status: object, success: bool) -> str:
    """Java ``ConsumeReturnType`` of a listener call (kept in ``props[CONSUME_CONTEXT_TYPE]``):
    RETURNNULL when the listener gave no status (or raised), else SUCCESS or FAILED."""
    if status is None:
        return "RETURNNULL"
    return "SUCCESS" if success else "FAILED"


@runtime_checkable
class ConsumeMessageHook(Protocol):
    """Called around every listener call (in the thread that runs the listener); exceptions
    are logged and ignored (Java ``ConsumeMessageHook``)."""

    def hook_name(self) -> str:
        """The hook's name (Java ``ConsumeMessageHook.hookName``)."""
        ...

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        """Called before the listener with the batch about to be consumed."""
        ...

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        """Called after the listener with its status (and the exception, if it raised)."""
        ...
