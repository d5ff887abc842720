"""What the concurrent and the orderly consume service share (Java's ``ConsumeMessageService``):
the push consumer, its listener and settings, the listener's thread pool, and consuming one
message because an admin tool asked (CONSUME_MESSAGE_DIRECTLY).

Imports: ``finchmq.protocol`` and the client's modules.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from finchmq.protocol.bodies import CMResult, ConsumeMessageDirectlyResult

from .executor import ThreadConsumeExecutor

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from .push import PushConsumer

__all__ = ["ConsumeMessageService", "consume_directly"]


class ConsumeMessageService:
    """The base of ``ConsumeMessageConcurrentlyService`` and ``ConsumeMessageOrderlyService``.

    ``listener(msgs, context)`` is a plain function (it runs in a thread pool) or a coroutine
    function.
    """

    def __init__(self, consumer: PushConsumer, listener: Callable[..., Any]) -> None:
        self.consumer = consumer
        self.config = consumer.config
        self.group = consumer.config.consumer_group
        self.listener = listener

    def _thread_pool(self) -> ThreadConsumeExecutor:
        """Java's ``consumeExecutor``: ``consume_thread_min`` to ``consume_thread_max`` threads."""
        return ThreadConsumeExecutor(
            f"ConsumeMessageThread_{self.group}",
            self.config.consume_thread_min,
            self.config.consume_thread_max,
        )


async def consume_directly(
    call: Callable[[], Awaitable[object]],
    results: Sequence[tuple[object, CMResult]],
    *,
    order: bool,
    auto_commit: Callable[[], bool],
) -> ConsumeMessageDirectlyResult:
    """Java ``consumeMessageDirectly``: ``call()`` runs the listener once; its status is
    ``results``' ``CMResult`` for it (CR_LATER for another, CR_RETURN_NULL for None,
    CR_THROW_EXCEPTION if it raised). ``auto_commit()`` is read after the listener ran."""
    began = time.monotonic()
    remark = None
    try:
        status = await call()
    except Exception as exc:
        result = CMResult.CR_THROW_EXCEPTION
        remark = f"{type(exc).__name__}: {exc}"
    else:
        if status is None:
            result = CMResult.CR_RETURN_NULL
        else:
            result = next((r for s, r in results if s is status), CMResult.CR_LATER)
    return ConsumeMessageDirectlyResult(
        order=order,
        auto_commit=auto_commit(),
        consume_result=result,
        remark=remark,
        spent_time_mills=int((time.monotonic() - began) * 1000),
    )
