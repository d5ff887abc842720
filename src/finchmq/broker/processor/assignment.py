"""QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE, GET_ALL_MESSAGE_REQUEST_MODE (Java 5.x
``QueryAssignmentProcessor``, and ``AdminBrokerProcessor.getAllMessageRequestMode``).

A 5.x push consumer that does not rebalance on its own asks the broker which queues of a topic it
should read, and how: PULL (queues divided among the group's members by the strategy the client
names, as client-side rebalancing would) or POP (set per group and topic with mqadmin
``setConsumeMode``, else ``defaultMessageRequestMode``). In POP mode a member gets queue id -1 of
each broker (pop every queue there) unless ``popShareQueueNum`` limits it to its own share plus
the shares of the next N members; retry topics are always PULL.
"""

from __future__ import annotations

import logging

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueStrategy,
)
from finchmq.protocol.bodies import (
    MessageModel,
    MessageQueueAssignment,
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.topics import is_retry_topic
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor

__all__ = ["QueryAssignmentProcessor", "allocate_for_pop"]

log = logging.getLogger(__name__)

# Java registers these two with the processor (name -> strategy)
_STRATEGIES: dict[str, AllocateMessageQueueStrategy] = {
    s.get_name(): s for s in (AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle())
}


def allocate_for_pop(
    strategy: AllocateMessageQueueStrategy,
    group: str,
    client_id: str,
    mq_all: list[MessageQueue],
    cid_all: list[str],
    pop_share_queue_num: int,
) -> list[MessageQueue]:
    """Java ``allocate4Pop``: with ``pop_share_queue_num`` <= 0 or >= members - 1, queue -1 of
    every broker (each member pops everything); else this member's share and those of the next
    ``pop_share_queue_num`` members; with more members than queues, one queue each (round robin)."""
    if pop_share_queue_num <= 0 or pop_share_queue_num >= len(cid_all) - 1:
        return [MessageQueue(mq.topic, mq.broker_name, -1) for mq in mq_all]
    if len(cid_all) <= len(mq_all):
        result = strategy.allocate(group, client_id, mq_all, cid_all)
        if client_id in cid_all:
            index = cid_all.index(client_id)
            for _ in range(pop_share_queue_num):
                index = (index + 1) % len(cid_all)
                result.extend(strategy.allocate(group, cid_all[index], mq_all, cid_all))
        return result
    if client_id not in cid_all:
        log.info("[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s", group, client_id, cid_all)
        return []
    return [mq_all[cid_all.index(client_id) % len(mq_all)]]


class QueryAssignmentProcessor(BrokerProcessor):
    """See the module docstring."""

    executor = ExecutorName.LOAD_BALANCE

    @handles(RequestCode.QUERY_ASSIGNMENT)
    async def query_assignment(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """The queues of the request's topic this client should read, each with its mode; a
        body without assignments (null) when the broker cannot tell (the client keeps its queues)."""
        body = QueryAssignmentRequestBody.from_json(request.body)
        c = self.context
        mode = c.message_request_mode_manager.get_message_request_mode(body.topic, body.consumer_group)
        if mode is None:
            default = (
                MessageRequestMode.PULL
                if is_retry_topic(body.topic)
                else c.config.default_message_request_mode
            )
            mode = SetMessageRequestModeRequestBody(
                topic=body.topic,
                consumer_group=body.consumer_group,
                mode=default,
                pop_share_queue_num=c.config.default_pop_share_queue_num
                if default is MessageRequestMode.POP
                else 0,
            )
        queues = await self._do_load_balance(body, mode, ctx)
        assignments = None
        if queues is not None:
            assignments = tuple(
                MessageQueueAssignment(message_queue=mq, mode=mode.mode) for mq in sorted(set(queues))
            )
        answer = QueryAssignmentResponseBody(message_queue_assignments=assignments)
        return request.make_response(ResponseCode.SUCCESS, body=answer.to_json())

    async def _do_load_balance(
        self, body: QueryAssignmentRequestBody, mode: SetMessageRequestModeRequestBody, ctx: RemotingContext
    ) -> list[MessageQueue] | None:
        """Java ``doLoadBalance``: an empty list clears the client's queues, None skips the update."""
        c = self.context
        topic, group = body.topic, body.consumer_group
        if body.message_model is MessageModel.BROADCASTING:
            every = await c.topic_route_info_manager.get_topic_subscribe_info(topic)
            if every is None:
                log.warning(
                    "QueryLoad: no assignment for group[%s], the topic[%s] does not exist.", group, topic
                )
                return None
            return list(every)
        if body.message_model is not MessageModel.CLUSTERING:
            log.warning("QueryLoad: group[%s] topic[%s] has no message model", group, topic)
            return None
        mq_set = await c.topic_route_info_manager.get_topic_subscribe_info(topic)
        if mq_set is None:
            if not is_retry_topic(topic):
                log.warning(
                    "QueryLoad: no assignment for group[%s], the topic[%s] does not exist.", group, topic
                )
            return None
        if not c.config.server_load_balancer_enable:
            return list(mq_set)
        group_info = c.consumer_manager.get(group)
        cid_all = group_info.client_ids() if group_info is not None else None
        if not cid_all:
            log.warning(
                "QueryLoad: no assignment for group[%s] topic[%s], get consumer id list failed", group, topic
            )
            return None
        strategy = _STRATEGIES.get(body.strategy_name)
        if strategy is None:
            log.warning("QueryLoad: unsupported strategy [%s], %s", body.strategy_name, ctx.remote_addr)
            return None
        mq_all = sorted(mq_set)
        cid_all = sorted(cid_all)
        try:
            if mode.mode is MessageRequestMode.POP:
                return allocate_for_pop(
                    strategy, group, body.client_id, mq_all, cid_all, mode.pop_share_queue_num
                )
            return strategy.allocate(group, body.client_id, mq_all, cid_all)
        except ValueError as exc:
            log.error(
                "QueryLoad: no assignment for group[%s] topic[%s], allocate message queue exception. "
                "strategy name: %s, ex: %s",
                group,
                topic,
                body.strategy_name,
                exc,
            )
            return None

    @handles(RequestCode.SET_MESSAGE_REQUEST_MODE)
    def set_message_request_mode(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Record how a group reads a topic (mqadmin ``setConsumeMode``); written before the answer."""
        body = SetMessageRequestModeRequestBody.from_json(request.body)
        c = self.context
        if is_retry_topic(body.topic):
            return request.make_response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if c.topic_config_manager.select_topic_config(body.topic) is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if c.subscription_group_manager.find_subscription_group_config(body.consumer_group) is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist"
            )
        c.message_request_mode_manager.set_message_request_mode(body.topic, body.consumer_group, body)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, executor=ExecutorName.ADMIN)
    def get_all_message_request_mode(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Every mode set on this broker, as ``messageRequestMode.json`` holds them (5.x slaves
        copy it from their master)."""
        content = self.context.message_request_mode_manager.encode()
        return request.make_response(ResponseCode.SUCCESS, body=content)
