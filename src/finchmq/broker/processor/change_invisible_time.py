"""CHANGE_MESSAGE_INVISIBLETIME (Java 5.3.3 ``ChangeInvisibleTimeProcessor``, revive-topic path).

A popped message gets a check point of its own, popped *now* for ``invisibleTime`` ms, and its
place in the old check point is acked: it is revived at the new time unless acked with the new
extra info before. The answer carries the new ``popTime`` (and ``invisibleTime``, ``reviveQid``);
the client's next extra info for the message is
``offset popTime invisibleTime reviveQid retry brokerName queueId offset`` (the new check point
starts at the message). An orderly message just gets a later next-visible time.

Answers, as Java's: TOPIC_NOT_EXIST, MESSAGE_ILLEGAL (queue id), NO_MESSAGE (offset not in the
queue), SYSTEM_ERROR when the check point cannot be written (or the extra info does not parse).
finchmq refuses an ``invisibleTime`` outside 0 .. 3 days with INVALID_PARAMETER (Java's timer
refuses the check point, which Java answers SYSTEM_ERROR), and extra info naming a revive queue
this broker does not have.
"""

from __future__ import annotations

import asyncio
import logging

from finchmq.broker.pop.revive_log import STORED_STATUSES
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader
from finchmq.protocol.pop import ExtraInfo, PopCheckPoint, build_polling_key
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor
from ._pop_common import ack_of, check_ack_queue, check_extra_info, with_header
from .pop import invisible_time_problem

__all__ = ["ChangeInvisibleTimeProcessor"]

log = logging.getLogger(__name__)

_ZERO_HEADER = ChangeInvisibleTimeResponseHeader(pop_time=0, invisible_time=0, revive_qid=0).to_ext_fields()


class ChangeInvisibleTimeProcessor(BrokerProcessor):
    executor = ExecutorName.ACK

    @handles(RequestCode.CHANGE_MESSAGE_INVISIBLETIME)
    async def change_invisible_time(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        response = await self._change(ctx, request)
        if "popTime" in response.ext_fields:
            return response
        return with_header(response, _ZERO_HEADER)

    async def _change(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        pop = c.pop
        header = ChangeInvisibleTimeRequestHeader.from_ext_fields(request.ext_fields)
        refusal, first, last = check_ack_queue(c, request, header.topic, header.queue_id, ctx)
        if refusal is not None:
            return refusal
        if not first <= header.offset < last:
            return request.make_response(ResponseCode.NO_MESSAGE)
        problem = invisible_time_problem(header.invisible_time)
        if problem is not None:
            return request.make_response(ResponseCode.INVALID_PARAMETER, problem)
        extra = check_extra_info(c, request, header.extra_info)
        if isinstance(extra, RemotingCommand):
            return extra
        if extra.is_order:
            return await self._change_orderly(request, header, extra)
        now = pop.change_time(header.topic, header.consumer_group, header.queue_id)
        ck = PopCheckPoint(
            bit_map=0,
            num=1,
            pop_time=now,
            invisible_time=header.invisible_time,
            start_offset=header.offset,
            cid=header.consumer_group,
            topic=header.topic,
            queue_id=header.queue_id,
            queue_offset_diff=(0,),
            broker_name=extra.broker_name,
        )
        result = await pop.revive_log.put_ck(ck, extra.revive_qid)
        if result.status not in STORED_STATUSES:
            log.error("change invisible time of %s@%d:%d: new check point not written: %s", header.topic,
                      header.queue_id, header.offset, result.status.name)  # fmt: skip
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"put new ck failed: {result.status.name}"
            )
        pop.record_ck(header.consumer_group, header.topic)
        await self._ack_origin(header, extra)
        response_header = ChangeInvisibleTimeResponseHeader(
            pop_time=now, invisible_time=header.invisible_time, revive_qid=extra.revive_qid
        )
        return request.make_response(ResponseCode.SUCCESS, None, response_header.to_ext_fields())

    async def _ack_origin(self, header: ChangeInvisibleTimeRequestHeader, extra: ExtraInfo) -> None:
        pop = self.context.pop
        ack = ack_of(header, extra)
        pop.record_ack(header.consumer_group, header.topic, 1)
        if pop.buffer_merge.add_ak(extra.revive_qid, ack):
            return
        await pop.revive_log.put_ack(ack, extra.revive_qid, extra.revive_time)

    async def _change_orderly(
        self, request: RemotingCommand, header: ChangeInvisibleTimeRequestHeader, extra: ExtraInfo
    ) -> RemotingCommand:
        """Java ``processChangeInvisibleTimeForOrder``."""
        c = self.context
        pop = c.pop
        response = request.make_response(ResponseCode.SUCCESS)
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        if header.offset < c.consumer_offset_manager.query_offset(group, topic, queue_id):
            return response  # acked already
        lock_key = build_polling_key(topic, group, queue_id)
        while not pop.queue_lock.try_lock(lock_key):
            await asyncio.sleep(0.001)
        try:
            if header.offset < c.consumer_offset_manager.query_offset(group, topic, queue_id):
                return response
            next_visible = pop.now() + header.invisible_time
            pop.order_info.update_next_visible_time(
                topic, group, queue_id, header.offset, extra.pop_time, next_visible
            )
            response_header = ChangeInvisibleTimeResponseHeader(
                pop_time=extra.pop_time,
                invisible_time=next_visible - extra.pop_time,
                revive_qid=extra.revive_qid,
            )
            return request.make_response(ResponseCode.SUCCESS, None, response_header.to_ext_fields())
        finally:
            pop.queue_lock.unlock(lock_key)
