"""NOTIFICATION (Java 5.3.3 ``NotificationProcessor``): does the group have something to pop?

Answers ``hasMsg`` at once when a queue (or, one time in five first, the pop retry topic) has
messages past the group's pop offset; otherwise the request is held in the notification
long-polling service and answered when a message arrives (``hasMsg=true``) or its time is up
(``hasMsg=false``); ``pollingFull`` when it could not be held. An orderly notification does not
count a queue whose messages are out with a consumer."""

from __future__ import annotations

import random
from typing import Final

from finchmq.broker.context import BrokerContext
from finchmq.broker.pop.long_polling import PollingResult
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import NotificationRequestHeader, NotificationResponseHeader
from finchmq.protocol.pop import build_polling_key, build_pop_retry_topic, build_pop_retry_topic_v1
from finchmq.remoting import Answer, ExecutorName, Later, RemotingContext, RequestExecutor, handles

from ._base import BrokerProcessor
from ._pop_common import (
    check_broker_readable,
    check_group,
    check_topic,
    min_offset,
    run_again_when_woken,
    with_born_time,
    with_header,
)

__all__ = ["NotificationProcessor"]

_ZERO_HEADER: Final = NotificationResponseHeader().to_ext_fields()


class NotificationProcessor(BrokerProcessor):
    executor = ExecutorName.PULL

    def __init__(self, context: BrokerContext, pull_executor: RequestExecutor) -> None:
        super().__init__(context)
        self.polling = context.pop.notification_polling
        self.polling.wakeup = run_again_when_woken(pull_executor, self, self._woken)
        self._random = random.Random()

    async def _woken(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        if not ctx.channel.is_open:
            return None
        answer = self.process(ctx, request)
        return await answer.resume() if isinstance(answer, Later) else answer

    @handles(RequestCode.NOTIFICATION)
    def notification(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        c = self.context
        request = with_born_time(request, c.pop.now())
        header = NotificationRequestHeader.from_ext_fields(request.ext_fields)
        queue_id = header.queue_id if header.queue_id >= 0 else -1
        refused = check_broker_readable(c, request, "peeking")
        if refused is None:
            refused = check_topic(c, request, header.topic, queue_id, ctx)[0]
        if refused is None:
            refused = check_group(c, request, header.consumer_group)
        if refused is not None:
            return with_header(refused, _ZERO_HEADER)
        config = c.config
        random_q = self._random.randrange(100)
        need_retry = random_q % 5 == 0
        retry_topic = build_pop_retry_topic(header.topic, header.consumer_group, config.enable_retry_topic_v2)
        retry_v1 = config.enable_retry_topic_v2 and config.retrieve_message_from_pop_retry_topic_v1
        has_msg = False
        if need_retry:
            has_msg = self._has_msg_from_topic(retry_topic, random_q, header) or (
                retry_v1
                and self._has_msg_from_topic(
                    build_pop_retry_topic_v1(header.topic, header.consumer_group), random_q, header
                )
            )
        if not has_msg:
            if queue_id < 0:
                has_msg = self._has_msg_from_topic(header.topic, random_q, header)
            else:
                has_msg = self._has_msg_from_queue(header.topic, header, queue_id)
            if not need_retry and not has_msg:
                has_msg = self._has_msg_from_topic(retry_topic, random_q, header) or (
                    retry_v1
                    and self._has_msg_from_topic(
                        build_pop_retry_topic_v1(header.topic, header.consumer_group), random_q, header
                    )
                )
        polling_full = False
        if not has_msg:
            polling = self.polling.polling(
                ctx,
                request,
                topic=header.topic,
                group=header.consumer_group,
                queue_id=queue_id,
                born_time=header.born_time,
                poll_time=header.poll_time,
            )
            if polling is PollingResult.POLLING_SUC:
                return None
            polling_full = polling is PollingResult.POLLING_FULL
        response_header = NotificationResponseHeader(has_msg=has_msg, polling_full=polling_full)
        return request.make_response(ResponseCode.SUCCESS, None, response_header.to_ext_fields())

    def _has_msg_from_topic(self, topic: str, random_q: int, header: NotificationRequestHeader) -> bool:
        config = self.context.topic_config_manager.select_topic_config(topic)
        if config is None:
            return False
        queues = config.read_queue_nums
        return any(self._has_msg_from_queue(topic, header, (random_q + i) % queues) for i in range(queues))

    def _has_msg_from_queue(self, topic: str, header: NotificationRequestHeader, queue_id: int) -> bool:
        c = self.context
        group = header.consumer_group
        if header.order and c.pop.order_info.check_block(header.attempt_id, header.topic, group, queue_id, 0):
            return False
        offset = c.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = min_offset(c.store, topic, queue_id)
        buffered = c.pop.buffer_merge.get_latest_offset(build_polling_key(topic, group, queue_id))
        offset = max(offset, buffered)
        return c.store.get_max_offset_in_queue(topic, queue_id) - offset > 0
