"""What the concurrent and the orderly consume service share (Java's ``ConsumeMessageService``):
their consumer (seen through ``ServiceConsumer``, the few things they need of it, so this package
has no import circle and a service can be driven by any object that provides them), its listener
and settings, the listener's thread pool, and consuming one message because an admin tool asked
(CONSUME_MESSAGE_DIRECTLY).

Imports: ``finchmq.protocol``, ``finchmq.common`` and the client's modules below the push consumer.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from finchmq.protocol.bodies import CMResult, ConsumeMessageDirectlyResult

from .executor import ThreadConsumeExecutor

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from finchmq.client.config import PushConsumerConfig
    from finchmq.client.instance import MQClientInstance
    from finchmq.client.stats import ConsumerStatsManager
    from finchmq.common.tasks import BackgroundTasks
    from finchmq.protocol.message import MessageExt, MessageQueue

    from .listener import ConsumeMessageContext, ConsumeMessageHook
    from .offset_store import OffsetStore
    from .pop import PopAPIWrapper
    from .process_queue import ProcessQueue

__all__ = [
    "ConsumeMessageService",
    "PopServiceConsumer",
    "QueueOwnership",
    "ServiceConsumer",
    "consume_directly",
]


class QueueOwnership(Protocol):
    """The rebalance side the services use: the queues held, and their broker locks (orderly)."""

    @property
    def process_queue_table(self) -> dict[MessageQueue, ProcessQueue]: ...
    async def lock(self, mq: MessageQueue) -> bool: ...
    async def lock_all(self) -> None: ...
    async def unlock_all(self, oneway: bool) -> None: ...


class ServiceConsumer(Protocol):
    """What a consume service needs of its push consumer (``PushConsumer`` provides it)."""

    @property
    def config(self) -> PushConsumerConfig: ...
    @property
    def hooks(self) -> list[ConsumeMessageHook]: ...
    @property
    def stats(self) -> ConsumerStatsManager: ...
    @property
    def tasks(self) -> BackgroundTasks: ...
    @property
    def offset_store(self) -> OffsetStore: ...
    @property
    def rebalance(self) -> QueueOwnership: ...
    @property
    def instance(self) -> MQClientInstance: ...
    def execute_hook_before(self, context: ConsumeMessageContext) -> None: ...
    def execute_hook_after(self, context: ConsumeMessageContext) -> None: ...
    async def send_message_back(
        self, msg: MessageExt, delay_level: int, broker_name: str | None = None
    ) -> None: ...


class PopServiceConsumer(ServiceConsumer, Protocol):
    """What the pop consume services need besides: the group's POP calls and its retry limit."""

    @property
    def pop_api(self) -> PopAPIWrapper: ...
    def max_reconsume_times(self) -> int: ...


class ConsumeMessageService:
    """The base of ``ConsumeMessageConcurrentlyService`` and ``ConsumeMessageOrderlyService``.

    ``listener(msgs, context)`` is a plain function (it runs in a thread pool) or a coroutine
    function.
    """

    def __init__(self, consumer: ServiceConsumer, listener: Callable[..., Any]) -> None:
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
