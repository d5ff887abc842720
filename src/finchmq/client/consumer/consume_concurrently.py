"""Concurrent consumption (Java ``ConsumeMessageConcurrentlyService``; seed 002, seed 004 §4.6-4.8).

Owns: splitting pulled messages into consume requests of ``consume_message_batch_max_size``,
running the listener (thread pool for a blocking listener, worker coroutines for an async one),
and applying its answer: ``ack_index`` says how many succeeded; the rest go back to the broker
(CONSUMER_SEND_MSG_BACK with ``delay_level_when_next_consume``), falling back to the inner
producer, and are consumed again locally after 5 s if both fail. Then the messages leave the
``ProcessQueue`` and the offset store gets the smallest offset still cached. Every
``consume_timeout`` minutes, messages whose listener call started longer ago than that are sent
back and dropped from the queue so the offset can move on. Broadcasting never sends back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from finchmq.client.errors import MQClientError
from finchmq.client.stats import ConsumeCounters
from finchmq.protocol.bodies import MessageModel
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.topics import retry_topic

from .consume_service import (
    ConcurrentlyConsumeRequest,
    ConcurrentlyServiceBase,
    ServiceConsumer,
    reset_retry_topic,
)
from .executor import ThreadConsumeExecutor
from .listener import (
    CONSUME_CONTEXT_TYPE,
    ConsumeConcurrentlyStatus,
    ConsumeMessageContext,
    consume_return_type,
)
from .process_queue import ProcessQueue

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["ConsumeMessageConcurrentlyService", "reset_retry_topic"]

log = logging.getLogger(__name__)

_CONSUME_LATER_DELAY_MS: Final = 5_000  # Java submitConsumeRequestLater
_EXPIRED_CLEAN_BATCH: Final = 16  # Java cleanExpiredMsg looks at the first 16 messages


class _ConsumeRequest(ConcurrentlyConsumeRequest[ProcessQueue]):
    """One listener call's worth of pulled messages of one queue."""

    __slots__ = ()


class ConsumeMessageConcurrentlyService(ConcurrentlyServiceBase[ProcessQueue]):
    """See the module docstring."""

    def __init__(self, consumer: ServiceConsumer, listener: Callable[..., Any], is_async: bool) -> None:
        super().__init__(consumer, listener, is_async, "consume", "ConsumeMessageThread")
        self._retry_topic = retry_topic(self.group)
        self._counters: dict[str, ConsumeCounters] = {}  # by topic
        # bound once: submitted with every consume request
        self._run: Callable[[_ConsumeRequest], object] = self._run_async if is_async else self._run_blocking
        self._done = self._finish
        # listener calls that finished since the last _process_finished (on the next loop iteration)
        self._finished: list[_ConsumeRequest] = []

    def start(self) -> None:
        interval = self.config.consume_timeout * 60_000
        self.consumer.tasks.every(interval, self._clean_expire_msg, "clean-expired-msg", interval)

    def inc_core_pool_size(self) -> None:
        if isinstance(self.executor, ThreadConsumeExecutor):
            self.executor.inc_core_pool_size()

    def dec_core_pool_size(self) -> None:
        if isinstance(self.executor, ThreadConsumeExecutor):
            self.executor.dec_core_pool_size()

    # -- submission -----------------------------------------------------------------------------

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        batch = self.config.consume_message_batch_max_size
        if len(msgs) <= batch:
            self._submit(_ConsumeRequest(msgs, pq, mq))
            return
        if self._stopped:
            return
        submit, run, done = self.executor.submit, self._run, self._done
        for start in range(0, len(msgs), batch):
            pq.in_flight += 1
            submit(run, _ConsumeRequest(msgs[start : start + batch], pq, mq), done)  # type: ignore[arg-type]

    def _submit(self, request: _ConsumeRequest) -> None:
        if self._stopped:
            return
        request.process_queue.in_flight += 1
        self.executor.submit(self._run, request, self._done)  # type: ignore[arg-type]

    def _submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        self.consumer.tasks.call_later(
            _CONSUME_LATER_DELAY_MS, lambda: self.submit_consume_request(msgs, pq, mq, True)
        )

    # -- running the listener -------------------------------------------------------------------

    def _before(
        self, request: ConcurrentlyConsumeRequest[ProcessQueue]
    ) -> tuple[list[MessageExt], ConsumeMessageContext | None]:
        msgs = request.msgs
        starts = request.process_queue.consume_start
        now = time.time()
        retry = self._retry_topic
        reset = False
        for msg in msgs:
            starts[msg.queue_offset] = now
            if msg.topic == retry:
                reset = True
        if reset or self.config.namespace:
            msgs = reset_retry_topic(msgs, self.group, self.config.namespace)
        hook_context = None
        if self.consumer.hooks:
            hook_context = ConsumeMessageContext(self.group, msgs, request.message_queue)
            self.consumer.execute_hook_before(hook_context)
        request.begin = time.monotonic()
        return msgs, hook_context

    def _after(
        self,
        request: ConcurrentlyConsumeRequest[ProcessQueue],
        status: object,
        hook_context: ConsumeMessageContext | None,
    ) -> None:
        if hook_context is not None:
            ok = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            hook_context.props[CONSUME_CONTEXT_TYPE] = consume_return_type(status, ok)
        if not isinstance(status, ConsumeConcurrentlyStatus):
            if status is not None:
                log.warning(
                    "consumeMessage returned %r, not a ConsumeConcurrentlyStatus; RECONSUME_LATER", status
                )
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        request.status = status
        if hook_context is not None:
            hook_context.status = status.value
            hook_context.success = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            self.consumer.execute_hook_after(hook_context)

    def _finish(self, request: _ConsumeRequest, _result: object, exc: BaseException | None) -> None:
        if exc is None and request.status is not None:
            request.rt_ms = (time.monotonic() - request.begin) * 1000
            # The calls finished in one loop iteration are accounted for together (one offset
            # update per queue, one statistics update per topic) in the next one.
            finished = self._finished
            finished.append(request)
            if len(finished) == 1:
                asyncio.get_running_loop().call_soon(self._process_finished)
            return
        request.process_queue.in_flight -= 1
        if exc is not None:
            log.error("consume request of %s failed", request.message_queue, exc_info=exc)
        # else skipped: the queue was dropped first

    def _process_finished(self) -> None:
        requests, self._finished = self._finished, []
        # per process queue: its message queue and the messages all consumed
        consumed: dict[ProcessQueue, tuple[MessageQueue, list[MessageExt]]] = {}
        totals: dict[str, list[float]] = {}  # per topic: rt sum, calls, messages all consumed
        for request in requests:
            pq = request.process_queue
            pq.in_flight -= 1
            if self._stopped:
                continue
            mq = request.message_queue
            if pq.dropped:
                log.warning("processQueue is dropped without process consume result. mq=%s", mq)
                continue
            msgs = request.msgs
            if (
                request.status is not ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                or request.context.ack_index < len(msgs) - 1
                or not msgs
            ):
                self._counters_of(mq.topic).inc_rt(request.rt_ms)
                self.process_consume_result(request)
                continue
            total = totals.get(mq.topic)
            if total is None:
                totals[mq.topic] = [request.rt_ms, 1, len(msgs)]
            else:
                total[0] += request.rt_ms
                total[1] += 1
                total[2] += len(msgs)
            entry = consumed.get(pq)
            if entry is None:
                consumed[pq] = (mq, list(msgs))
            else:
                entry[1].extend(msgs)
        for topic, (rt_ms, calls, count) in totals.items():
            counters = self._counters_of(topic)
            counters.inc_rt(rt_ms, int(calls))
            counters.inc_ok(int(count), int(calls))
        for pq, (mq, msgs) in consumed.items():
            self._commit(pq, mq, msgs)

    # -- results ----------------------------------------------------------------------------------

    def _counters_of(self, topic: str) -> ConsumeCounters:
        counters = self._counters.get(topic)
        if counters is None:
            counters = self._counters[topic] = self.consumer.stats.consume_counters(self.group, topic)
        return counters

    def process_consume_result(self, request: _ConsumeRequest) -> None:
        msgs = request.msgs
        if not msgs:
            return
        counters = self._counters_of(request.message_queue.topic)
        ack_index = request.context.ack_index
        count = len(msgs)
        if request.status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack_index = min(ack_index, count - 1)
            ok = ack_index + 1
            counters.inc_ok(ok)
            if ok == count:  # all consumed: the usual case
                self._commit(request.process_queue, request.message_queue, msgs)
                return
            counters.inc_failed(count - ok)
        else:
            ack_index = -1
            counters.inc_failed(count)
        failed = msgs[ack_index + 1 :]
        if failed and self.config.message_model is MessageModel.CLUSTERING:
            self.consumer.tasks.spawn(self._send_back_and_commit(request, failed), "send-back")
            return
        if failed:
            for msg in failed:
                log.warning("BROADCASTING, the message consume failed, drop it, %s", msg.client_msg_id)
        self._commit(request.process_queue, request.message_queue, msgs)

    async def _send_back_and_commit(self, request: _ConsumeRequest, failed: list[MessageExt]) -> None:
        back_failed: list[MessageExt] = []
        delay_level = request.context.delay_level_when_next_consume
        for msg in failed:
            if not await self.send_message_back(msg, delay_level, request.message_queue.broker_name):
                back_failed.append(replace(msg, reconsume_times=msg.reconsume_times + 1))
        remaining = request.msgs
        if back_failed:
            failed_offsets = {m.queue_offset for m in back_failed}
            remaining = [m for m in request.msgs if m.queue_offset not in failed_offsets]
            self._submit_later(back_failed, request.process_queue, request.message_queue)
        self._commit(request.process_queue, request.message_queue, remaining)

    def _commit(self, pq: ProcessQueue, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        offset = pq.remove_message(msgs)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, offset, True)

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> bool:
        """Java ``sendMessageBack(msg, context)``: False when both the broker and the inner
        producer failed."""
        try:
            await self.consumer.send_message_back(msg, delay_level, broker_name)
        except MQClientError as exc:
            log.error("sendMessageBack exception, group: %s msg: %s: %s", self.group, msg.client_msg_id, exc)
            return False
        return True

    async def _clean_expire_msg(self) -> None:
        """Java ``cleanExpireMsg``: give back messages whose listener call took over ``consume_timeout``."""
        limit = self.config.consume_timeout * 60
        for mq, pq in list(self.consumer.rebalance.process_queue_table.items()):
            now = time.time()
            expired = []
            for msg in pq.first_messages(_EXPIRED_CLEAN_BATCH):
                started = pq.consume_start.get(msg.queue_offset)
                if started is None or now - started <= limit:
                    break
                expired.append(msg)
            for msg in expired:
                try:
                    await self.consumer.send_message_back(msg, 3, mq.broker_name)
                except MQClientError as exc:
                    log.error("send expired msg back failed, %s: %s", msg.client_msg_id, exc)
                    continue
                log.info(
                    "send expire msg back. topic=%s, msgId=%s, storeHost=%s, queueId=%s, queueOffset=%s",
                    msg.topic,
                    msg.client_msg_id,
                    msg.store_host,
                    msg.queue_id,
                    msg.queue_offset,
                )
                if pq.msg_tree_map and next(iter(pq.msg_tree_map)) == msg.queue_offset:
                    self._commit(pq, mq, [msg])
