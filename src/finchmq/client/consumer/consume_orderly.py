"""Orderly consumption (Java ``ConsumeMessageOrderlyService``; seed 002).

Owns: one consumer of a queue at a time, in offset order. In clustering a queue is consumed only
while this client holds its broker lock (taken at rebalance, renewed every
``rebalance_lock_interval``, considered lost after ``rebalance_lock_max_live_time``); a
``ConsumeRequest`` takes ``consume_message_batch_max_size`` messages at a time, calls the
listener under the queue's consume lock, commits on SUCCESS, and on
SUSPEND_CURRENT_QUEUE_A_MOMENT puts the messages back and tries again after
``suspend_current_queue_time_millis`` (messages over ``max_reconsume_times`` go to the dead
letter queue instead). A request yields after ``max_time_consume_continuously`` so other queues
get their turn.

Strategy: a consume request is a coroutine on the event loop (one per queue, serialised by the
queue's ``asyncio.Lock``, Java's ``MessageQueueLock``); a blocking listener runs in the thread
pool, so at most ``consume_thread_max`` queues are in a listener at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from finchmq.client.errors import MQClientError
from finchmq.protocol.bodies import CMResult, MessageModel
from finchmq.protocol.message import Message, MessageExt, MessageQueue
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.topics import retry_topic

from .consume_service import OrderlyServiceBase, ServiceConsumer, reset_retry_topic
from .listener import (
    ConsumeMessageContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from .process_queue import ProcessQueue

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["ConsumeMessageOrderlyService"]

log = logging.getLogger(__name__)

_MAX_SUSPEND_MS: Final = 30_000  # Java clamps submitConsumeRequestLater to [10, 30000] ms
_INT_MAX: Final = 2**31 - 1
_DIRECT_RESULTS: Final = (
    (ConsumeOrderlyStatus.SUCCESS, CMResult.CR_SUCCESS),
    (ConsumeOrderlyStatus.COMMIT, CMResult.CR_COMMIT),
    (ConsumeOrderlyStatus.ROLLBACK, CMResult.CR_ROLLBACK),
)


def _dropped(pq: ProcessQueue) -> bool:
    return pq.dropped  # a call, so type checkers do not keep a narrowing across awaits


class ConsumeMessageOrderlyService(OrderlyServiceBase):
    """See the module docstring."""

    def __init__(self, consumer: ServiceConsumer, listener: Callable[..., Any], is_async: bool) -> None:
        super().__init__(consumer, listener, is_async, "ConsumeMessageThread")
        self._mq_locks: dict[MessageQueue, asyncio.Lock] = {}

    @property
    def clustering(self) -> bool:
        return self.config.message_model is MessageModel.CLUSTERING

    def start(self) -> None:
        if self.clustering:
            self.consumer.tasks.every(
                self.config.rebalance_lock_interval, self._lock_mq_periodically, "lock-mq", 1000
            )

    async def shutdown(self) -> None:
        await super().shutdown()
        if self.clustering:
            await self.consumer.rebalance.unlock_all(False)

    async def _lock_mq_periodically(self) -> None:
        if not self._stopped:
            await self.consumer.rebalance.lock_all()

    def inc_core_pool_size(self) -> None:
        """No-op, as Java's orderly service."""

    def dec_core_pool_size(self) -> None:
        """No-op, as Java's orderly service."""

    # -- submission -----------------------------------------------------------------------------

    def submit_consume_request(
        self, msgs: list[MessageExt] | None, pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        if dispatch_to_consume and not self._stopped:
            self.consumer.tasks.spawn(self._consume(pq, mq), f"consume-orderly-{mq.topic}-{mq.queue_id}")

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        delay = min(max(delay_ms, 10), _MAX_SUSPEND_MS)
        self.consumer.tasks.call_later(delay, lambda: self.submit_consume_request(None, pq, mq, True))

    def _try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay_ms: int) -> None:
        async def relock() -> None:
            ok = await self._lock_one_mq(mq)
            self._submit_later(pq, mq, 10 if ok else 3000)

        self.consumer.tasks.spawn_later(delay_ms, relock, f"relock-{mq.topic}-{mq.queue_id}")

    async def _lock_one_mq(self, mq: MessageQueue) -> bool:
        if self._stopped:
            return False
        return await self.consumer.rebalance.lock(mq)

    # -- the consume request --------------------------------------------------------------------

    async def _consume(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            log.warning("run, the message queue not be able to consume, because it's dropped. %s", mq)
            return
        lock = self._mq_locks.setdefault(mq, asyncio.Lock())
        async with lock:
            pq.in_flight += 1
            try:
                await self._consume_locked(pq, mq)
            finally:
                pq.in_flight -= 1

    async def _consume_locked(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        config = self.config
        live = config.rebalance_lock_max_live_time
        if self.clustering and (not pq.locked or pq.is_lock_expired(live)):
            if pq.dropped:
                return
            self._try_lock_later_and_reconsume(mq, pq, 100)
            return
        began = time.monotonic()
        while not self._stopped:
            if pq.dropped:
                log.warning("the message queue not be able to consume, because it's dropped. %s", mq)
                return
            if self.clustering and not pq.locked:
                log.warning("the message queue not locked, so consume later, %s", mq)
                self._try_lock_later_and_reconsume(mq, pq, 10)
                return
            if self.clustering and pq.is_lock_expired(live):
                log.warning("the message queue lock expired, so consume later, %s", mq)
                self._try_lock_later_and_reconsume(mq, pq, 10)
                return
            if (time.monotonic() - began) * 1000 > config.max_time_consume_continuously:
                self._submit_later(pq, mq, 10)
                return
            taken = pq.take_messages(config.consume_message_batch_max_size)
            if not taken:
                return
            msgs = reset_retry_topic(taken, self.group, self.config.namespace)
            context = ConsumeOrderlyContext(mq)
            hook_context = None
            if self.consumer.hooks:
                hook_context = ConsumeMessageContext(self.group, msgs, mq)
            begin = time.monotonic()
            status: object = None
            async with pq.consume_lock:
                if _dropped(pq):
                    log.warning("the message queue not be able to consume, because it's dropped. %s", mq)
                    return
                try:
                    status = await self._call_listener(msgs, context, hook_context)
                except Exception:
                    log.warning("consumeMessage exception, Group: %s %s", self.group, mq, exc_info=True)
            if not isinstance(status, ConsumeOrderlyStatus):
                if status is not None:
                    log.warning("consumeMessage returned %r, not a ConsumeOrderlyStatus", status)
                status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            self.consumer.stats.inc_consume_rt(self.group, mq.topic, (time.monotonic() - begin) * 1000)
            if not await self.process_consume_result(taken, status, context, pq, mq):
                return

    async def process_consume_result(
        self,
        msgs: list[MessageExt],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Commit or retry; True to keep consuming this queue now."""
        stats = self.consumer.stats
        continue_consume = True
        commit_offset = -1
        if context.auto_commit:
            if status in (ConsumeOrderlyStatus.COMMIT, ConsumeOrderlyStatus.ROLLBACK):
                log.warning(
                    "the message queue consume result is illegal, we think you want to ack these message %s",
                    mq,
                )
            if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                stats.inc_consume_failed_tps(self.group, mq.topic, len(msgs))
                if await self._check_reconsume_times(msgs, pq):
                    self._suspend(msgs, pq, mq, context)
                    continue_consume = False
                else:
                    commit_offset = pq.commit()
            else:
                commit_offset = pq.commit()
                stats.inc_consume_ok_tps(self.group, mq.topic, len(msgs))
        elif status is ConsumeOrderlyStatus.SUCCESS:
            stats.inc_consume_ok_tps(self.group, mq.topic, len(msgs))
        elif status is ConsumeOrderlyStatus.COMMIT:
            commit_offset = pq.commit()
        elif status is ConsumeOrderlyStatus.ROLLBACK:
            pq.rollback()
            self._submit_later(pq, mq, self._suspend_time(context))
            continue_consume = False
        else:
            stats.inc_consume_failed_tps(self.group, mq.topic, len(msgs))
            if await self._check_reconsume_times(msgs, pq):
                self._suspend(msgs, pq, mq, context)
                continue_consume = False
        if commit_offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return continue_consume

    def _suspend_time(self, context: ConsumeOrderlyContext) -> int:
        if context.suspend_current_queue_time_millis > 0:
            return context.suspend_current_queue_time_millis
        return self.config.suspend_current_queue_time_millis

    def _suspend(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, context: ConsumeOrderlyContext
    ) -> None:
        again = [replace(m, reconsume_times=m.reconsume_times + 1) for m in msgs]
        pq.make_message_to_consume_again(again)
        self._submit_later(pq, mq, self._suspend_time(context))

    async def _check_reconsume_times(self, msgs: list[MessageExt], pq: ProcessQueue) -> bool:
        """True to suspend (consume again later); messages over the limit go to the DLQ."""
        suspend = False
        limit = self.max_reconsume_times()
        for msg in msgs:
            if msg.reconsume_times >= limit:
                if not await self._send_to_dlq(msg):
                    suspend = True
            else:
                suspend = True
        return suspend

    async def _send_to_dlq(self, msg: MessageExt) -> bool:
        """Java orderly ``sendMessageBack``: a retry-topic message over the limit lands in the DLQ."""
        instance = self.consumer.instance
        producer = instance.default_producer
        if producer is None:
            return False
        props = dict(msg.properties)
        props.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.client_msg_id)
        props[MessageConst.PROPERTY_RETRY_TOPIC] = msg.topic
        props[MessageConst.PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times)
        props[MessageConst.PROPERTY_MAX_RECONSUME_TIMES] = str(self.max_reconsume_times())
        props.pop(MessageConst.PROPERTY_TRANSACTION_PREPARED, None)
        props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        new_msg = Message(retry_topic(self.group), msg.body, flag=msg.flag, properties=props)
        try:
            await producer.send(new_msg)
        except MQClientError as exc:
            log.error("sendMessageBack exception, group: %s msg: %s: %s", self.group, msg.client_msg_id, exc)
            return False
        return True
