"""PEEK_MESSAGE (Java 5.3.3 ``PeekMessageProcessor``): the messages a pop would return next,
without a check point, a lock or any change. One time in five (and when the answer is not full)
the group's pop retry topic is read too. PULL_NOT_FOUND when there is nothing."""

from __future__ import annotations

import random
from typing import Final

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import PeekMessageRequestHeader, PopMessageResponseHeader
from finchmq.protocol.pop import build_polling_key, build_pop_retry_topic
from finchmq.remoting import ExecutorName, RemotingContext, handles
from finchmq.store import GetMessageStatus

from ._base import BrokerProcessor
from ._pop_common import check_broker_readable, check_group, check_topic, min_offset, with_header

__all__ = ["PeekMessageProcessor"]

_ZERO_HEADER: Final = PopMessageResponseHeader(pop_time=0, invisible_time=0, revive_qid=0, rest_num=0)


class PeekMessageProcessor(BrokerProcessor):
    executor = ExecutorName.PULL

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._random = random.Random()

    @handles(RequestCode.PEEK_MESSAGE)
    def peek_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        answer = self._peek(ctx, request)
        return with_header(answer, _ZERO_HEADER.to_ext_fields())

    def _peek(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = PeekMessageRequestHeader.from_ext_fields(request.ext_fields)
        refused = check_broker_readable(c, request, "peeking")
        if refused is not None:
            return refused
        refused, topic_config = check_topic(c, request, header.topic, header.queue_id, ctx)
        if refused is not None:
            return refused
        assert topic_config is not None
        refused = check_group(c, request, header.consumer_group)
        if refused is not None:
            return refused
        random_q = self._random.randrange(100)
        need_retry = random_q % 5 == 0
        retry_topic = build_pop_retry_topic(
            header.topic, header.consumer_group, c.config.enable_retry_topic_v2
        )
        body: list[bytes] = []
        rest_num = 0
        if need_retry:
            rest_num = self._peek_topic(retry_topic, header, random_q, body, rest_num)
        if header.queue_id < 0:
            queues = topic_config.read_queue_nums
            for i in range(queues):
                rest_num = self._peek_queue(header.topic, header, (random_q + i) % queues, body, rest_num)
        else:
            rest_num = self._peek_queue(header.topic, header, header.queue_id, body, rest_num)
        if not need_retry and len(body) < header.max_msg_nums:
            rest_num = self._peek_topic(retry_topic, header, random_q, body, rest_num)
        response_header = PopMessageResponseHeader(
            pop_time=0, invisible_time=0, revive_qid=0, rest_num=rest_num
        )
        if body:
            return request.make_response(
                ResponseCode.SUCCESS,
                GetMessageStatus.FOUND.name,
                response_header.to_ext_fields(),
                b"".join(body),
            )
        return request.make_response(
            ResponseCode.PULL_NOT_FOUND,
            GetMessageStatus.NO_MESSAGE_IN_QUEUE.name,
            response_header.to_ext_fields(),
        )

    def _peek_topic(
        self, topic: str, header: PeekMessageRequestHeader, random_q: int, body: list[bytes], rest_num: int
    ) -> int:
        config = self.context.topic_config_manager.select_topic_config(topic)
        if config is None:
            return rest_num
        for i in range(config.read_queue_nums):
            rest_num = self._peek_queue(
                topic, header, (random_q + i) % config.read_queue_nums, body, rest_num
            )
        return rest_num

    def _peek_queue(
        self, topic: str, header: PeekMessageRequestHeader, queue_id: int, body: list[bytes], rest_num: int
    ) -> int:
        c = self.context
        store = c.store
        group = header.consumer_group
        offset = c.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = min_offset(store, topic, queue_id)
        buffered = c.pop.buffer_merge.get_latest_offset(build_polling_key(topic, group, queue_id))
        offset = max(offset, buffered)
        rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
        room = header.max_msg_nums - len(body)
        if room <= 0:
            return rest_num
        result = store.get_message(group, topic, queue_id, offset, room, None)
        if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
            result.release()
            result = store.get_message(group, topic, queue_id, result.next_begin_offset, room, None)
        try:
            records = [bytes(b) for b in result.buffers]
        finally:
            result.release()
        if records:
            c.stats.record_pull(group, topic, len(records), sum(map(len, records)))
        body.extend(records)
        return rest_num
