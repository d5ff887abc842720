"""Orderly consumption of popped messages: a push consumer in POP mode with an orderly listener.

Java 5.3.3 has the class (``ConsumeMessagePopOrderlyService``) but its consume request does
nothing, and its push consumer never pops orderly (it pops with ``order=false`` and forces client
rebalancing for orderly listeners). finchmq does what the 5.x proxy does for FIFO groups instead:
it pops with ``order=true``, so the broker hands out a queue's messages in order and none of that
queue's later messages (to anyone in the group) until these are acked or their invisible time is
over, and redelivers from the first one not acked.

Owns: one consumer of a queue at a time here too. A pop's messages are grouped by queue; each
queue's are consumed in offset order, ``consume_message_batch_max_size`` per listener call under
that queue's lock. SUCCESS acks the call's messages (awaited, in order). SUSPEND_CURRENT_QUEUE_A_MOMENT
(or None, or an exception) makes the call's messages and the queue's remaining ones of this pop
visible again after ``suspend_current_queue_time_millis`` (the context's, else the consumer's;
10 ms to 30 s as Java clamps it), and the broker redelivers them in order, each message's
reconsume times one higher. Messages of a failed call already consumed ``max_reconsume_times``
times (unlimited by default, as Java's orderly consumption) go to ``%DLQ%group``; if that leaves
nothing of the call, the queue goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from finchmq.client.errors import MQClientError
from finchmq.protocol.bodies import CMResult
from finchmq.protocol.message import MessageExt, MessageQueue

from .consume_pop_concurrently import pop_time_out
from .consume_service import OrderlyServiceBase, ack_popped, forward_popped_to_dlq, reset_retry_topic
from .listener import (
    ConsumeMessageContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from .pop import receipt_handle

if TYPE_CHECKING:
    from collections.abc import Callable

    from .consume_service import PopServiceConsumer
    from .process_queue import PopProcessQueue

__all__ = ["ConsumeMessagePopOrderlyService"]

log = logging.getLogger(__name__)

_MIN_SUSPEND_MS: Final = 10
_MAX_SUSPEND_MS: Final = 30_000  # Java clamps submitConsumeRequestLater to [10, 30000] ms
_INT_MAX: Final = 2**31 - 1
_DIRECT_RESULTS: Final = (
    (ConsumeOrderlyStatus.SUCCESS, CMResult.CR_SUCCESS),
    (ConsumeOrderlyStatus.COMMIT, CMResult.CR_COMMIT),
    (ConsumeOrderlyStatus.ROLLBACK, CMResult.CR_ROLLBACK),
)


def _queue_of(msg: MessageExt) -> tuple[str, str, int]:
    """(the queue's real topic mark, broker, queue id): a queue of the topic or of its retry topic."""
    _, extra = receipt_handle(msg)
    return extra.retry, extra.broker_name, msg.queue_id


class ConsumeMessagePopOrderlyService(OrderlyServiceBase):
    """See the module docstring."""

    def __init__(self, consumer: PopServiceConsumer, listener: Callable[..., Any], is_async: bool) -> None:
        super().__init__(consumer, listener, is_async, "ConsumeMessagePopThread")
        self.pop_consumer = consumer
        self._queue_locks: dict[tuple[str, str, int], asyncio.Lock] = {}

    def start(self) -> None:
        """Nothing periodic: the broker, not a lock, keeps a queue to one consumer."""

    # -- submission -----------------------------------------------------------------------------

    def submit_pop_consume_request(
        self, msgs: list[MessageExt], pq: PopProcessQueue, mq: MessageQueue
    ) -> None:
        """Consume one pop's messages, each queue's in order after what this queue had before."""
        if self._stopped:
            pq.dec_found_msg(len(msgs))
            return
        by_queue: dict[tuple[str, str, int], list[MessageExt]] = {}
        for msg in msgs:
            try:
                key = _queue_of(msg)
            except MQClientError as exc:
                log.error("popped message %s without a usable receipt handle: %s", msg.client_msg_id, exc)
                pq.ack()
                continue
            by_queue.setdefault(key, []).append(msg)
        for key, queue_msgs in by_queue.items():
            queue_msgs.sort(key=lambda m: m.queue_offset)
            self.consumer.tasks.spawn(self._consume(key, queue_msgs, pq), f"consume-pop-orderly-{key[2]}")

    # -- the consume request --------------------------------------------------------------------

    async def _consume(self, key: tuple[str, str, int], msgs: list[MessageExt], pq: PopProcessQueue) -> None:
        lock = self._queue_locks.setdefault(key, asyncio.Lock())
        async with lock:
            done = 0
            try:
                done = await self._consume_locked(key, msgs, pq)
            finally:
                if done < len(msgs):  # stopped, dropped or timed out: the broker delivers them again
                    pq.dec_found_msg(len(msgs) - done)

    async def _consume_locked(
        self, key: tuple[str, str, int], msgs: list[MessageExt], pq: PopProcessQueue
    ) -> int:
        """Consume ``msgs`` in order; how many were handled (acked, suspended or dead-lettered)."""
        batch_size = self.config.consume_message_batch_max_size
        stats = self.consumer.stats
        done = 0
        while done < len(msgs):
            rest = msgs[done:]
            if self._stopped or pq.dropped or pop_time_out(rest):
                log.info("stop consuming queue %s of %s: stopped, dropped or pop time out", key, self.group)
                return done
            taken = rest[:batch_size]
            mq = MessageQueue(taken[0].topic, key[1], key[2])
            context = ConsumeOrderlyContext(mq)
            hook_context = ConsumeMessageContext(self.group, taken, mq) if self.consumer.hooks else None
            begin = time.monotonic()
            status: object = None
            try:
                user_msgs = (
                    reset_retry_topic(taken, self.group, self.config.namespace)
                    if self.config.namespace
                    else taken
                )
                status = await self._call_listener(user_msgs, context, hook_context)
            except Exception:
                log.warning("consumeMessage exception, Group: %s %s", self.group, mq, exc_info=True)
            stats.inc_consume_rt(self.group, mq.topic, (time.monotonic() - begin) * 1000)
            if status is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT and isinstance(
                status, ConsumeOrderlyStatus
            ):
                stats.inc_consume_ok_tps(self.group, mq.topic, len(taken))
                for msg in taken:
                    await ack_popped(self.pop_consumer, msg)
                    pq.ack()
                done += len(taken)
                continue
            if status is not None and not isinstance(status, ConsumeOrderlyStatus):
                log.warning("consumeMessage returned %r, not a ConsumeOrderlyStatus", status)
            stats.inc_consume_failed_tps(self.group, mq.topic, len(taken))
            over = [m for m in taken if m.reconsume_times >= self.max_reconsume_times()]
            dead = {
                id(m)
                for m in over
                if await forward_popped_to_dlq(self.pop_consumer, m, self.max_reconsume_times())
            }
            for _ in dead:
                pq.ack()
            if len(dead) == len(taken):  # nothing of the call is left: go on with the queue
                done += len(taken)
                continue
            suspend = self._suspend_time(context)
            for msg in rest:
                if id(msg) in dead:
                    continue
                await self._change_invisible_time(msg, suspend)
                pq.ack()
            return len(msgs)
        return done

    def _hook_success(self, status: object) -> bool:
        return status is not ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT and isinstance(
            status, ConsumeOrderlyStatus
        )

    def _suspend_time(self, context: ConsumeOrderlyContext) -> int:
        wanted = context.suspend_current_queue_time_millis
        if wanted < 0:
            wanted = self.config.suspend_current_queue_time_millis
        return min(max(wanted, _MIN_SUSPEND_MS), _MAX_SUSPEND_MS)

    async def _change_invisible_time(self, msg: MessageExt, invisible_ms: int) -> None:
        try:
            await self.pop_consumer.pop_api.change_invisible_time(msg, invisible_ms)
        except MQClientError as exc:
            log.error("changePopInvisibleTime fail. msgId: %s error info: %s", msg.client_msg_id, exc)
