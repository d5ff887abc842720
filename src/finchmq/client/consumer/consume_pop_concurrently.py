"""Concurrent consumption of popped messages (Java 5.x ``ConsumeMessagePopConcurrentlyService``).

Owns: splitting a pop's messages into listener calls of ``consume_message_batch_max_size``,
running the listener (thread pool for a blocking one, worker coroutines for an async one) and
applying its answer: the first ``ack_index + 1`` messages of a CONSUME_SUCCESS are acked
(ACK_MESSAGE, in the background, as Java's ``ackAsync``); the others become visible again after
``pop_delay_level[delay_level]`` seconds (CHANGE_MESSAGE_INVISIBLETIME; ``delay_level`` is the
context's ``delay_level_when_next_consume``, or the message's reconsume times when 0), so the broker
delivers them again, one reconsume time more. A message that failed on its delivery number
``max_reconsume_times`` + 1 goes to ``%DLQ%group`` (and is acked) instead; so does one whose
context asked for delay level -1.

A call whose messages' invisible time is over before it starts (or before it ends) is dropped:
the broker delivers them again anyway.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from finchmq.client.errors import MQClientError
from finchmq.protocol.message import MessageExt, MessageQueue

from .consume_service import (
    ConcurrentlyConsumeRequest,
    ConcurrentlyServiceBase,
    ack_popped,
    forward_popped_to_dlq,
    reset_retry_topic,
)
from .executor import AsyncConsumeExecutor
from .listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeConcurrentlyStatus,
    ConsumeMessageContext,
    consume_return_type,
)
from .pop import receipt_handle

if TYPE_CHECKING:
    from collections.abc import Callable

    from .consume_service import PopServiceConsumer
    from .process_queue import PopProcessQueue


__all__ = ["ConsumeMessagePopConcurrentlyService", "pop_time_out"]

log = logging.getLogger(__name__)


def pop_time_out(msgs: list[MessageExt]) -> bool:
    """Java ``ConsumeRequest.isPopTimeout``: the first message's invisible time is over (or its
    receipt handle unreadable)."""
    if not msgs:
        return True
    try:
        _, extra = receipt_handle(msgs[0])
    except MQClientError:
        return True
    if extra.pop_time <= 0 or extra.invisible_time <= 0:
        return True
    return int(time.time() * 1000) - extra.pop_time >= extra.invisible_time


class _PopConsumeRequest(ConcurrentlyConsumeRequest["PopProcessQueue"]):
    """One listener call's worth of popped messages."""

    __slots__ = ()


class ConsumeMessagePopConcurrentlyService(ConcurrentlyServiceBase["PopProcessQueue"]):
    """See the module docstring."""

    def __init__(self, consumer: PopServiceConsumer, listener: Callable[..., Any], is_async: bool) -> None:
        super().__init__(consumer, listener, is_async, "consume-pop", "ConsumeMessagePopThread")
        self.pop_consumer = consumer

    def start(self) -> None:
        """Nothing periodic (Java's is empty too)."""

    # -- submission -----------------------------------------------------------------------------

    def submit_pop_consume_request(
        self, msgs: list[MessageExt], pq: PopProcessQueue, mq: MessageQueue
    ) -> None:
        """Consume ``msgs`` (one pop's) in calls of ``consume_message_batch_max_size``."""
        if self._stopped:
            return
        batch = self.config.consume_message_batch_max_size
        run = self._run_async if isinstance(self.executor, AsyncConsumeExecutor) else self._run_blocking
        for start in range(0, len(msgs), batch):
            request = _PopConsumeRequest(msgs[start : start + batch], pq, mq)
            self.executor.submit(run, request, self._finish)  # type: ignore[arg-type]

    # -- running the listener -------------------------------------------------------------------

    def _skip(self, request: ConcurrentlyConsumeRequest[PopProcessQueue]) -> bool:
        if request.process_queue.dropped:
            log.info(
                "the message queue not be able to consume, because it's dropped(pop). group=%s %s",
                self.group,
                request.message_queue,
            )
            return True
        if pop_time_out(request.msgs):
            log.info(
                "the pop message time out so abort consume. group=%s %s", self.group, request.message_queue
            )
            return True
        return False

    def _before(
        self, request: ConcurrentlyConsumeRequest[PopProcessQueue]
    ) -> tuple[list[MessageExt], ConsumeMessageContext | None]:
        msgs = reset_retry_topic(request.msgs, self.group, self.config.namespace)
        hook_context = None
        if self.consumer.hooks:
            hook_context = ConsumeMessageContext(self.group, msgs, request.message_queue)
            self.consumer.execute_hook_before(hook_context)
        request.begin = time.monotonic()
        return msgs, hook_context

    def _after(
        self,
        request: ConcurrentlyConsumeRequest[PopProcessQueue],
        status: object,
        hook_context: ConsumeMessageContext | None,
    ) -> None:
        if not isinstance(status, ConsumeConcurrentlyStatus):
            if status is not None:
                log.warning(
                    "consumeMessage returned %r, not a ConsumeConcurrentlyStatus; RECONSUME_LATER", status
                )
            status = None
        if hook_context is not None:
            ok = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            hook_context.props[CONSUME_CONTEXT_TYPE] = consume_return_type(status, ok)
            hook_context.status = (status or ConsumeConcurrentlyStatus.RECONSUME_LATER).value
            hook_context.success = ok
            self.consumer.execute_hook_after(hook_context)
        request.status = status or ConsumeConcurrentlyStatus.RECONSUME_LATER

    def _finish(self, request: _PopConsumeRequest, _result: object, exc: BaseException | None) -> None:
        pq = request.process_queue
        if exc is not None:
            log.error("consume request of %s failed", request.message_queue, exc_info=exc)
        if request.status is None or exc is not None:  # skipped, or the call itself broke
            pq.dec_found_msg(len(request.msgs))
            return
        topic = request.message_queue.topic
        self.consumer.stats.inc_consume_rt(self.group, topic, (time.monotonic() - request.begin) * 1000)
        if pq.dropped or pop_time_out(request.msgs):
            pq.dec_found_msg(len(request.msgs))
            log.warning(
                "processQueue invalid or popTimeout. isDropped=%s, messageQueue=%s",
                pq.dropped,
                request.message_queue,
            )
            return
        self.process_consume_result(request)

    # -- results ----------------------------------------------------------------------------------

    def process_consume_result(self, request: _PopConsumeRequest) -> None:
        """Java ``processConsumeResult``: ack what succeeded, retry or dead-letter the rest."""
        msgs = request.msgs
        if not msgs:
            return
        stats = self.consumer.stats
        topic = request.message_queue.topic
        if request.status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack_index = min(request.context.ack_index, len(msgs) - 1)
            stats.inc_consume_ok_tps(self.group, topic, ack_index + 1)
            stats.inc_consume_failed_tps(self.group, topic, len(msgs) - ack_index - 1)
        else:
            ack_index = -1
            stats.inc_consume_failed_tps(self.group, topic, len(msgs))
        pq = request.process_queue
        tasks = self.consumer.tasks
        for msg in msgs[: ack_index + 1]:
            tasks.spawn(ack_popped(self.pop_consumer, msg), "pop-ack")
            pq.ack()
        delay_level = request.context.delay_level_when_next_consume
        for msg in msgs[ack_index + 1 :]:
            pq.ack()
            max_times = self.pop_consumer.max_reconsume_times()
            if delay_level < 0 or msg.reconsume_times >= max_times:
                tasks.spawn(forward_popped_to_dlq(self.pop_consumer, msg, max_times), "pop-dlq")
            else:
                tasks.spawn(self._change_invisible_time(msg, delay_level), "pop-retry")

    async def _change_invisible_time(self, msg: MessageExt, delay_level: int) -> None:
        """Java ``changePopInvisibleTime``: visible again after the delay level's seconds."""
        if delay_level == 0:
            delay_level = msg.reconsume_times
        table = self.config.pop_delay_level
        delay_s = table[min(delay_level, len(table) - 1)]
        try:
            await self.pop_consumer.pop_api.change_invisible_time(msg, delay_s * 1000)
        except MQClientError as exc:
            log.error("changePopInvisibleTimeAsync fail. msgId: %s error info: %s", msg.client_msg_id, exc)
