"""What the concurrent and the orderly consume service share (Java's ``ConsumeMessageService``):
their consumer (seen through ``ServiceConsumer``, the few things they need of it, so this package
has no import circle and a service can be driven by any object that provides them), its listener
and settings, the listener's thread pool, and consuming one message because an admin tool asked
(CONSUME_MESSAGE_DIRECTLY). ``ConcurrentlyServiceBase`` and ``OrderlyServiceBase`` hold what the
pull and the pop flavours of each share (executor, listener call and hooks, consuming directly).

Imports: ``finchmq.protocol``, ``finchmq.common`` and the client's modules below the push consumer.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar, cast

from finchmq.client.errors import MQClientError
from finchmq.protocol.bodies import CMResult, ConsumeMessageDirectlyResult
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.namespace import without_namespace
from finchmq.protocol.topics import retry_topic

from .executor import AsyncConsumeExecutor, ThreadConsumeExecutor
from .listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    consume_return_type,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from finchmq.client.config import PushConsumerConfig
    from finchmq.client.instance import MQClientInstance
    from finchmq.client.stats import ConsumerStatsManager
    from finchmq.common.tasks import BackgroundTasks
    from finchmq.protocol.message import MessageExt

    from .listener import ConsumeMessageContext, ConsumeMessageHook
    from .offset_store import OffsetStore
    from .pop import PopAPIWrapper
    from .process_queue import PopProcessQueue, ProcessQueue

__all__ = [
    "ConcurrentlyConsumeRequest",
    "ConcurrentlyServiceBase",
    "ConsumeMessageService",
    "OrderlyServiceBase",
    "PopServiceConsumer",
    "QueueOwnership",
    "ServiceConsumer",
    "ack_popped",
    "consume_directly",
    "forward_popped_to_dlq",
    "reset_retry_topic",
]

log = logging.getLogger(__name__)

_INT_MAX: Final = 2**31 - 1
_CONCURRENTLY_DIRECT_RESULTS: Final = ((ConsumeConcurrentlyStatus.CONSUME_SUCCESS, CMResult.CR_SUCCESS),)
_ORDERLY_DIRECT_RESULTS: Final = (
    (ConsumeOrderlyStatus.SUCCESS, CMResult.CR_SUCCESS),
    (ConsumeOrderlyStatus.COMMIT, CMResult.CR_COMMIT),
    (ConsumeOrderlyStatus.ROLLBACK, CMResult.CR_ROLLBACK),
)

PQ = TypeVar("PQ", bound="ProcessQueue | PopProcessQueue")


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

    def _thread_pool(self, prefix: str = "ConsumeMessageThread") -> ThreadConsumeExecutor:
        """Java's ``consumeExecutor``: ``consume_thread_min`` to ``consume_thread_max`` threads."""
        return ThreadConsumeExecutor(
            f"{prefix}_{self.group}",
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


def reset_retry_topic(msgs: list[MessageExt], group: str, namespace: str | None = None) -> list[MessageExt]:
    """Messages re-delivered through ``%RETRY%group`` show their original topic, and with a
    ``namespace`` every topic is the user's (Java ``resetRetryAndNamespace``)."""
    group_topic = retry_topic(group)
    out = msgs
    for i, msg in enumerate(msgs):
        topic = msg.topic
        if topic == group_topic:
            topic = msg.properties.get(MessageConst.PROPERTY_RETRY_TOPIC) or topic
        if namespace:
            topic = without_namespace(topic, namespace)
        if topic != msg.topic:
            if out is msgs:
                out = list(msgs)
            out[i] = replace(msg, topic=topic)
    return out


class ConcurrentlyConsumeRequest(Generic[PQ]):
    """One listener call's worth of messages of one queue (pulled or popped)."""

    __slots__ = ("begin", "context", "message_queue", "msgs", "process_queue", "rt_ms", "status")

    def __init__(self, msgs: list[MessageExt], pq: PQ, mq: MessageQueue) -> None:
        self.msgs = msgs
        self.process_queue = pq
        self.message_queue = mq
        self.context = ConsumeConcurrentlyContext(mq)
        self.status: ConsumeConcurrentlyStatus | None = None
        self.begin = 0.0
        self.rt_ms = 0.0


class ConcurrentlyServiceBase(ConsumeMessageService, Generic[PQ]):
    """What the concurrent services (pull and pop) share: the executor (a thread pool for a
    blocking listener, worker coroutines for an async one), one listener call per request between
    ``_before`` and ``_after``, and consuming directly."""

    def __init__(
        self,
        consumer: ServiceConsumer,
        listener: Callable[..., Any],
        is_async: bool,
        async_name: str,
        thread_prefix: str,
    ) -> None:
        super().__init__(consumer, listener)
        self.executor: ThreadConsumeExecutor | AsyncConsumeExecutor
        if is_async:
            self.executor = AsyncConsumeExecutor(f"{async_name}-{self.group}", self.config.consume_thread_max)
        else:
            self.executor = self._thread_pool(thread_prefix)
        self._stopped = False

    async def shutdown(self) -> None:
        self._stopped = True
        if isinstance(self.executor, AsyncConsumeExecutor):
            await self.executor.shutdown()
        else:
            self.executor.shutdown()

    @property
    def core_pool_size(self) -> int:
        return self.executor.core_pool_size

    def _skip(self, request: ConcurrentlyConsumeRequest[PQ]) -> bool:
        """True to not call the listener for ``request`` (its queue is dropped)."""
        return request.process_queue.dropped

    def _before(
        self, request: ConcurrentlyConsumeRequest[PQ]
    ) -> tuple[list[MessageExt], ConsumeMessageContext | None]:
        raise NotImplementedError

    def _after(
        self,
        request: ConcurrentlyConsumeRequest[PQ],
        status: object,
        hook_context: ConsumeMessageContext | None,
    ) -> None:
        raise NotImplementedError

    def _run_blocking(self, request: ConcurrentlyConsumeRequest[PQ]) -> None:
        if self._skip(request):
            return
        msgs, hook_context = self._before(request)
        status: object = None
        try:
            status = self.listener(msgs, request.context)
        except Exception:
            log.warning(
                "consumeMessage exception, Group: %s %s", self.group, request.message_queue, exc_info=True
            )
        self._after(request, status, hook_context)

    async def _run_async(self, request: ConcurrentlyConsumeRequest[PQ]) -> None:
        if self._skip(request):
            return
        msgs, hook_context = self._before(request)
        status: object = None
        try:
            status = await self.listener(msgs, request.context)
        except Exception:
            log.warning(
                "consumeMessage exception, Group: %s %s", self.group, request.message_queue, exc_info=True
            )
        self._after(request, status, hook_context)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        context = ConsumeConcurrentlyContext(MessageQueue(msg.topic, broker_name or "", msg.queue_id))
        msgs = reset_retry_topic([msg], self.group, self.config.namespace)
        executor = self.executor

        def call() -> Awaitable[object]:
            if isinstance(executor, AsyncConsumeExecutor):
                return cast("Awaitable[object]", self.listener(msgs, context))
            return executor.run(self.listener, msgs, context)

        return await consume_directly(
            call, _CONCURRENTLY_DIRECT_RESULTS, order=False, auto_commit=lambda: True
        )


class OrderlyServiceBase(ConsumeMessageService):
    """What the orderly services (pull and pop) share: the thread pool (none for an async
    listener), the retry limit, one listener call between the hooks, and consuming directly."""

    def __init__(
        self, consumer: ServiceConsumer, listener: Callable[..., Any], is_async: bool, thread_prefix: str
    ) -> None:
        super().__init__(consumer, listener)
        self.executor = None if is_async else self._thread_pool(thread_prefix)
        self._stopped = False

    async def shutdown(self) -> None:
        self._stopped = True
        if self.executor is not None:
            self.executor.shutdown()

    @property
    def core_pool_size(self) -> int:
        return self.executor.core_pool_size if self.executor is not None else self.config.consume_thread_max

    def max_reconsume_times(self) -> int:
        """-1 means unlimited, as Java's orderly consumption."""
        return _INT_MAX if self.config.max_reconsume_times == -1 else self.config.max_reconsume_times

    def _hook_success(self, status: object) -> bool:
        """What the after-hook reports as success."""
        return status is ConsumeOrderlyStatus.SUCCESS

    async def _call_listener(
        self,
        msgs: list[MessageExt],
        context: ConsumeOrderlyContext,
        hook_context: ConsumeMessageContext | None,
    ) -> object:
        consumer = self.consumer

        def finish(status: object) -> object:
            if hook_context is not None:
                hook_context.status = (
                    status.value
                    if isinstance(status, ConsumeOrderlyStatus)
                    else "SUSPEND_CURRENT_QUEUE_A_MOMENT"
                )
                hook_context.success = self._hook_success(status)
                hook_context.props[CONSUME_CONTEXT_TYPE] = consume_return_type(status, hook_context.success)
                consumer.execute_hook_after(hook_context)
            return status

        if self.executor is None:
            if hook_context is not None:
                consumer.execute_hook_before(hook_context)
            try:
                status = await self.listener(msgs, context)
            except Exception:
                finish(None)
                raise
            return finish(status)

        def blocking() -> object:
            if hook_context is not None:
                consumer.execute_hook_before(hook_context)
            try:
                status = self.listener(msgs, context)
            except Exception:
                finish(None)
                raise
            return finish(status)

        return await self.executor.run(blocking)

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult:
        context = ConsumeOrderlyContext(MessageQueue(msg.topic, broker_name or "", msg.queue_id))
        executor = self.executor

        def call() -> Awaitable[object]:
            if executor is None:
                return cast("Awaitable[object]", self.listener([msg], context))
            return executor.run(self.listener, [msg], context)

        return await consume_directly(
            call, _ORDERLY_DIRECT_RESULTS, order=True, auto_commit=lambda: context.auto_commit
        )


async def ack_popped(consumer: PopServiceConsumer, msg: MessageExt) -> None:
    """Ack a popped message; a failure is only logged (the broker delivers it again)."""
    try:
        await consumer.pop_api.ack(msg)
    except MQClientError as exc:
        log.warning("Ack message fail. msgId: %s: %s", msg.client_msg_id, exc)


async def forward_popped_to_dlq(
    consumer: PopServiceConsumer, msg: MessageExt, max_reconsume_times: int
) -> bool:
    """Send a popped message to ``%DLQ%group`` (and ack it); False (logged) if that failed."""
    try:
        await consumer.pop_api.forward_to_dead_letter_queue(msg, max_reconsume_times)
    except MQClientError as exc:
        log.error("forward %s to the dead letter queue failed: %s", msg.client_msg_id, exc)
        return False
    return True
