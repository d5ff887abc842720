"""ACK_MESSAGE and BATCH_ACK_MESSAGE (Java 5.3.3 ``AckMessageProcessor``, revive-topic path).

An ack names a popped message by its queue offset and its check point by the extra info
(``ExtraInfo``: the check point's start offset, pop time, revive queue...). The buffer merges
it into a check point it still holds; otherwise it is written to the revive topic, where the
revive service matches it. An orderly ack (revive queue 999) marks the message in the order
info and moves the consumer offset to the first message not acked.

Answers, as Java's: TOPIC_NOT_EXIST, MESSAGE_ILLEGAL for a queue id out of range, NO_MESSAGE
for an offset outside the queue (or an empty BATCH_ACK body), SYSTEM_ERROR for extra info that
does not parse, MESSAGE_ILLEGAL for an orderly ack of a message not handed out. An ack after
the message was revived, or with extra info of a check point gone, is answered SUCCESS and does
nothing (the message comes back through the retry topic). finchmq also refuses (INVALID_PARAMETER)
extra info naming a revive queue this broker does not have, where Java writes the ack to a
queue nobody reads.
"""

from __future__ import annotations

import asyncio
import logging

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import BatchAck, BatchAckMessageRequestBody
from finchmq.protocol.headers import AckMessageRequestHeader
from finchmq.protocol.pop import (
    POP_ORDER_REVIVE_QUEUE,
    AckMsg,
    BatchAckMsg,
    build_polling_key,
    real_topic,
)
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor
from ._pop_common import ack_of, check_ack_queue, check_extra_info, min_offset, revive_qid_problem

__all__ = ["AckMessageProcessor"]

log = logging.getLogger(__name__)


class AckMessageProcessor(BrokerProcessor):
    executor = ExecutorName.ACK

    @handles(RequestCode.ACK_MESSAGE)
    async def ack_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = AckMessageRequestHeader.from_ext_fields(request.ext_fields)
        refusal, first, last = check_ack_queue(c, request, header.topic, header.queue_id, ctx)
        if refusal is not None:
            return refusal
        if not first <= header.offset <= last:
            return request.make_response(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{header.topic}@{header.queue_id}, commit:{header.offset}, "
                f"store:{first}~{last}",
            )
        extra = check_extra_info(c, request, header.extra_info)
        if isinstance(extra, RemotingCommand):
            return extra
        response = request.make_response(ResponseCode.SUCCESS)
        if extra.is_order:
            return await self.ack_orderly(
                ctx,
                request,
                header.topic,
                header.consumer_group,
                header.queue_id,
                header.offset,
                extra.pop_time,
                extra.invisible_time,
            )
        ack = ack_of(header, extra)
        await self._append_ack(ack, extra.revive_qid, extra.invisible_time, 1)
        return response

    @handles(RequestCode.BATCH_ACK_MESSAGE)
    async def batch_ack_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        body = BatchAckMessageRequestBody.from_json(request.body) if request.body else None
        response = request.make_response(ResponseCode.SUCCESS)
        if body is None or not body.acks:
            return request.make_response(ResponseCode.NO_MESSAGE)
        for batch in body.acks:
            answer = await self._batch_ack(ctx, request, batch, body.broker_name)
            if answer is not None and answer.code != ResponseCode.SUCCESS:
                response = answer  # Java leaves the last orderly ack's refusal in the response
        return response

    async def _batch_ack(
        self, ctx: RemotingContext, request: RemotingCommand, batch: BatchAck, broker_name: str | None
    ) -> RemotingCommand | None:
        c = self.context
        group = batch.consumer_group or ""
        topic = real_topic(batch.topic or "", group, batch.retry or "")
        problem = revive_qid_problem(c, batch.revive_queue_id)
        if problem is not None:
            return request.make_response(ResponseCode.INVALID_PARAMETER, problem)
        if c.store.get_consume_queue(topic, batch.queue_id) is None:
            log.error("illegal topic or queue found when batch ack %s", batch)
            return None
        first = min_offset(c.store, topic, batch.queue_id)
        last = c.store.get_max_offset_in_queue(topic, batch.queue_id)
        offsets = [
            batch.start_offset + i
            for i in sorted(batch.bit_set or ())
            if first <= batch.start_offset + i <= last
        ]
        if batch.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
            answer = None
            for offset in offsets:
                answer = await self.ack_orderly(
                    ctx, request, topic, group, batch.queue_id, offset, batch.pop_time, batch.invisible_time
                )
            return answer
        if not offsets:
            return None
        ack = BatchAckMsg(
            ack_offset=-1,
            ack_offset_list=tuple(offsets),
            start_offset=batch.start_offset,
            consumer_group=group,
            topic=topic,
            queue_id=batch.queue_id,
            pop_time=batch.pop_time,
            broker_name=broker_name,
        )
        await self._append_ack(ack, batch.revive_queue_id, batch.invisible_time, len(offsets))
        return None

    async def _append_ack(self, ack: AckMsg, revive_qid: int, invisible_time: int, count: int) -> None:
        """Java ``appendAck``: merged into a buffered check point, or written to the revive topic
        (a failed write is logged, not answered: the message then comes back, nothing is lost)."""
        c = self.context
        pop = c.pop
        pop.record_ack(ack.consumer_group or "", ack.topic or "", count)
        if not pop.buffer_merge.add_ak(revive_qid, ack):
            await pop.revive_log.put_ack(
                ack, revive_qid, ack.pop_time + invisible_time, batch_unique_id=False
            )
        pop.inflight.decrement(ack.topic or "", ack.consumer_group or "", ack.pop_time, ack.queue_id, count)

    async def ack_orderly(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        topic: str,
        group: str,
        queue_id: int,
        ack_offset: int,
        pop_time: int,
        invisible_time: int,
    ) -> RemotingCommand:
        """Java ``ackOrderly``: mark the message acked and commit the offset it allows."""
        c = self.context
        pop = c.pop
        response = request.make_response(ResponseCode.SUCCESS)
        offsets = c.consumer_offset_manager
        old_offset = offsets.query_offset(group, topic, queue_id)
        if ack_offset < old_offset:
            return response  # acked already
        lock_key = build_polling_key(topic, group, queue_id)
        while not pop.queue_lock.try_lock(lock_key):  # a pop of the queue is writing: wait for it
            await asyncio.sleep(0.001)
        try:
            old_offset = offsets.query_offset(group, topic, queue_id)
            if ack_offset < old_offset:
                return response
            next_offset = pop.order_info.commit_and_next(topic, group, queue_id, ack_offset, pop_time)
            if next_offset > -1:
                offsets.commit_offset(ctx.remote_addr, group, topic, queue_id, next_offset)
                if not pop.order_info.check_block(None, topic, group, queue_id, invisible_time):
                    pop.long_polling.notify_message_arriving(topic, queue_id, group)
            elif next_offset == -1:
                return request.make_response(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"offset is illegal, key:{lock_key}, old:{old_offset}, commit:{ack_offset}, "
                    f"next:{next_offset}, {ctx.remote_addr}",
                )
        finally:
            pop.queue_lock.unlock(lock_key)
        pop.inflight.decrement(topic, group, pop_time, queue_id, 1)
        return response
