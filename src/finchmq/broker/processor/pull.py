"""PULL_MESSAGE (Java ``PullMessageProcessor``), with long polling (seed 003).

Checks, in Java's order: broker readable, subscription group exists and may consume, topic
exists and is readable, queue id in range, subscription (from the request when the SUBSCRIPTION
bit is set, else from the group's heartbeat). The store's status maps to the response code; a
PULL_NOT_FOUND that may be suspended is parked in the ``PullRequestHoldService`` and answered
later. The committed offset riding on the pull is stored when the COMMIT_OFFSET bit is set.
"""

from __future__ import annotations

import logging
import time

from finchmq.broker.context import BrokerContext
from finchmq.broker.filter import filter_for_subscription
from finchmq.broker.long_polling import PullRequest, PullRequestHoldService
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import MessageModel, PermName, SubscriptionData
from finchmq.protocol.filter import build_subscription_data, is_tag_type
from finchmq.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader, PullSysFlag
from finchmq.protocol.sql92 import SQLSyntaxError
from finchmq.remoting import ExecutorName, Later, QueuedRequest, RemotingContext, RequestExecutor, handles
from finchmq.store import GetMessageStatus
from finchmq.store.config import BrokerRole

from ._base import BrokerProcessor, now_ms

__all__ = ["PullMessageProcessor"]

log = logging.getLogger(__name__)

MASTER_ID = 0

_STATUS_TO_CODE = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullMessageProcessor(BrokerProcessor):
    executor = ExecutorName.PULL

    def __init__(
        self, context: BrokerContext, hold_service: PullRequestHoldService, pull_executor: RequestExecutor
    ) -> None:
        super().__init__(context)
        self.hold_service = hold_service
        self.pull_executor = pull_executor

    @handles(RequestCode.PULL_MESSAGE)
    def pull_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        return self.pull(ctx, request, broker_allow_suspend=True)

    def execute_request_when_wakeup(
        self, ctx: RemotingContext, request: RemotingCommand, held_ms: int
    ) -> None:
        """Re-run a held pull through the pull executor, suspension disallowed (seed 003);
        ``held_ms`` is how long it was held (metrics time it from its arrival)."""
        executor = self.pull_executor
        now = time.monotonic()
        item = QueuedRequest(
            ctx,
            request,
            self,
            now,
            held_since=now - held_ms / 1000,
            later=Later(lambda: self._woken(ctx, request)),
        )
        if not executor.submit(item) and not request.is_oneway:
            ctx.write_response(request.make_response(ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy"))

    async def _woken(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        """A held pull, run again from the pull executor (Java ``executeRequestWhenWakeup``)."""
        if not ctx.channel.is_open:
            return None
        return self.pull(ctx, request, broker_allow_suspend=False)

    def pull(
        self, ctx: RemotingContext, request: RemotingCommand, *, broker_allow_suspend: bool
    ) -> RemotingCommand | None:
        c = self.context
        header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=MASTER_ID, next_begin_offset=0, min_offset=0, max_offset=0
        )

        if not PermName.is_readable(c.broker_permission):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{c.broker_addr}] pulling message is forbidden"
            )
        group_config = c.subscription_group_manager.find_subscription_group_config(header.consumer_group)
        if group_config is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist, "
                "see http://rocketmq.apache.org/docs/faq/",
            )
        if not group_config.consume_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
            )
        sys_flag = header.sys_flag
        has_suspend = PullSysFlag.has_suspend_flag(sys_flag)
        has_commit_offset = PullSysFlag.has_commit_offset_flag(sys_flag)
        has_subscription = PullSysFlag.has_subscription_flag(sys_flag)
        suspend_timeout = header.suspend_timeout_millis if has_suspend else 0

        topic_config = c.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            log.debug("pull from %s: topic %s does not exist", ctx.remote_addr, header.topic)
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please! see http://rocketmq.apache.org/docs/faq/",
            )
        if not PermName.is_readable(topic_config.perm):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        if header.queue_id < 0 or header.queue_id >= topic_config.read_queue_nums:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            )

        subscription: SubscriptionData | None
        if has_subscription:
            try:
                subscription = build_subscription_data(
                    header.topic, header.subscription, header.expression_type, header.sub_version
                )
            except ValueError as exc:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
                )
        else:
            group_info = c.consumer_manager.get(header.consumer_group)
            if group_info is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    "the consumer's group info not exist, see http://rocketmq.apache.org/docs/faq/",
                )
            if (
                not group_config.consume_broadcast_enable
                and group_info.message_model is MessageModel.BROADCASTING
            ):
                return request.make_response(
                    ResponseCode.NO_PERMISSION,
                    f"the consumer group[{header.consumer_group}] can not consume by broadcast way",
                )
            subscription = group_info.subscriptions.get(header.topic)
            if subscription is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    "the consumer's subscription not exist, see http://rocketmq.apache.org/docs/faq/",
                )
            if subscription.sub_version < header.sub_version:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
                )

        if not is_tag_type(subscription.expression_type) and not c.config.enable_property_filter:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {subscription.expression_type}",
            )
        try:
            message_filter = filter_for_subscription(subscription)
        except SQLSyntaxError as exc:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
            )
        result = c.store.get_message(
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.queue_offset,
            header.max_msg_nums,
            message_filter,
        )

        status = result.status
        if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            code = ResponseCode.PULL_OFFSET_MOVED if header.queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _STATUS_TO_CODE.get(status, ResponseCode.PULL_RETRY_IMMEDIATELY)
        suggest = (
            group_config.which_broker_when_consume_slowly
            if result.suggest_pulling_from_slave
            else group_config.broker_id
        )
        if not c.config.slave_read_enable:
            suggest = MASTER_ID
        on_slave = c.store.config.broker_role is BrokerRole.SLAVE
        if code == ResponseCode.PULL_OFFSET_MOVED and on_slave and not c.store.config.offset_check_in_slave:
            # Java: a slave does not correct offsets (it may only lag); the consumer retries
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            suggest = group_config.broker_id
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=suggest,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
        )

        response: RemotingCommand | None
        if code == ResponseCode.SUCCESS:
            count = result.message_count  # before release() empties the result
            try:
                body = result.body()
            finally:
                result.release()
            c.stats.record_pull(header.consumer_group, header.topic, count, len(body))
            c.consumer_offset_manager.commit_pull_offset(
                header.consumer_group, header.topic, header.queue_id, result.next_begin_offset
            )
            response = request.make_response(code, status.name, response_header.to_ext_fields(), body)
        else:
            result.release()
            if code == ResponseCode.PULL_NOT_FOUND and broker_allow_suspend and has_suspend:
                polling = (
                    suspend_timeout if c.config.long_polling_enable else c.config.short_polling_time_mills
                )
                self.hold_service.suspend_pull_request(
                    header.topic,
                    header.queue_id,
                    PullRequest(
                        ctx=ctx,
                        request=request,
                        suspend_timestamp=now_ms(),
                        timeout_millis=polling,
                        pull_from_this_offset=header.queue_offset,
                        message_filter=message_filter,
                    ),
                )
                response = None
            else:
                if code == ResponseCode.PULL_OFFSET_MOVED:
                    log.info(
                        "pull offset moved: group %s topic %s queue %d requested %d, next %d (min %d max %d)",
                        header.consumer_group,
                        header.topic,
                        header.queue_id,
                        header.queue_offset,
                        result.next_begin_offset,
                        result.min_offset,
                        result.max_offset,
                    )
                response = request.make_response(code, status.name, response_header.to_ext_fields())

        if broker_allow_suspend and has_commit_offset and not on_slave:
            c.consumer_offset_manager.commit_offset(
                ctx.remote_addr, header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )
        return response
