"""What the POP family of processors shares: the checks Java's pop, peek, notification and
polling-info processors make in the same words, ``bornTime`` filled in, the topic's filter, and
running a held request again on the pull executor."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from finchmq.broker.context import BrokerContext
from finchmq.broker.filter import filter_for_subscription
from finchmq.broker.pop.long_polling import PopRequest
from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.protocol.bodies import PermName, TopicConfig
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.headers import AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader
from finchmq.protocol.pop import POP_ORDER_REVIVE_QUEUE, AckMsg, ExtraInfo
from finchmq.protocol.sql92 import SQLSyntaxError
from finchmq.remoting import Later, QueuedRequest, RemotingContext, RequestExecutor, RequestProcessor
from finchmq.store import DefaultMessageStore, MessageFilter

__all__ = [
    "BORN_TIME",
    "FAQ_GROUP",
    "FAQ_TOPIC",
    "ack_of",
    "check_ack_queue",
    "check_broker_readable",
    "check_extra_info",
    "check_group",
    "check_topic",
    "message_filter",
    "min_offset",
    "revive_qid_problem",
    "run_again_when_woken",
    "with_born_time",
    "with_header",
]

BORN_TIME = "bornTime"
FAQ_TOPIC = "See http://rocketmq.apache.org/docs/faq/ for further details."
FAQ_GROUP = FAQ_TOPIC


def with_born_time(request: RemotingCommand, now_ms: int) -> RemotingCommand:
    """Java: a request without ``bornTime`` (or with 0) is stamped with the broker's time, so a
    held request keeps the same deadline when it runs again."""
    born = request.ext_fields.get(BORN_TIME)
    if born is not None and born != "0":
        return request
    return RemotingCommand(
        request.code,
        request.language,
        request.version,
        request.opaque,
        request.flag,
        request.remark,
        {**request.ext_fields, BORN_TIME: str(now_ms)},
        request.body,
        request.serialize_type,
    )


def with_header(response: RemotingCommand, fields: dict[str, str]) -> RemotingCommand:
    """``response`` carrying ``fields`` too: Java answers every POP-family request with its
    response header, zeros when it is refused, and Java's client decodes it (POLLING_TIMEOUT)."""
    return RemotingCommand(
        response.code,
        response.language,
        response.version,
        response.opaque,
        response.flag,
        response.remark,
        {**fields, **response.ext_fields},
        response.body,
        response.serialize_type,
    )


def min_offset(store: DefaultMessageStore, topic: str, queue_id: int) -> int:
    """The queue's first offset; 0 for a queue not written yet (Java creates its consume queue
    on the way, finchmq's store answers -1)."""
    return max(store.get_min_offset_in_queue(topic, queue_id), 0)


def check_broker_readable(
    context: BrokerContext, request: RemotingCommand, verb: str
) -> RemotingCommand | None:
    """The broker may be read; ``verb`` is Java's word in the remark (``pop``/``peeking``)."""
    if PermName.is_readable(context.broker_permission):
        return None
    forbidden = f"the broker[{context.config.broker_ip1}] {verb} message is forbidden"
    return request.make_response(ResponseCode.NO_PERMISSION, forbidden)


def check_topic(
    context: BrokerContext, request: RemotingCommand, topic: str, queue_id: int, ctx: RemotingContext
) -> tuple[RemotingCommand | None, TopicConfig | None]:
    """The topic exists and may be read, and the queue id is one of its queues (< 0: all).

    Returns ``(refusal, None)`` or ``(None, topic config)``."""
    topic_config = context.topic_config_manager.select_topic_config(topic)
    if topic_config is None:
        return (
            request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_TOPIC}"
            ),
            None,
        )
    if not PermName.is_readable(topic_config.perm):
        return (
            request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden"
            ),
            None,
        )
    if queue_id >= topic_config.read_queue_nums:
        return (
            request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{topic_config.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            ),
            None,
        )
    return None, topic_config


def check_ack_queue(
    context: BrokerContext, request: RemotingCommand, topic: str, queue_id: int, ctx: RemotingContext
) -> tuple[RemotingCommand | None, int, int]:
    """ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME: the topic exists and the queue id is one of
    its queues (MESSAGE_ILLEGAL otherwise, as Java).

    Returns ``(refusal, 0, 0)`` or ``(None, the queue's first offset, its max offset)``."""
    topic_config = context.topic_config_manager.select_topic_config(topic)
    if topic_config is None:
        return (
            request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_TOPIC}"
            ),
            0,
            0,
        )
    if not 0 <= queue_id < topic_config.read_queue_nums:
        return (
            request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{topic_config.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            ),
            0,
            0,
        )
    store = context.store
    return None, min_offset(store, topic, queue_id), store.get_max_offset_in_queue(topic, queue_id)


def revive_qid_problem(context: BrokerContext, revive_qid: int) -> str | None:
    """Why ``revive_qid`` names no revive queue of this broker, or None."""
    queues = context.pop.revive_queue_num
    if revive_qid == POP_ORDER_REVIVE_QUEUE or 0 <= revive_qid < queues:
        return None
    return f"reviveQid {revive_qid} in extraInfo is not a revive queue of this broker (0..{queues - 1}, 999)"


def check_extra_info(
    context: BrokerContext, request: RemotingCommand, extra_info: str
) -> ExtraInfo | RemotingCommand:
    """The extra info of an ack or a change of invisible time, parsed; or the refusal
    (INVALID_PARAMETER) when it names a revive queue this broker does not have.

    Raises:
        ExtraInfoError: the extra info does not parse.
    """
    extra = ExtraInfo.parse(extra_info)
    problem = revive_qid_problem(context, extra.revive_qid)
    if problem is not None:
        return request.make_response(ResponseCode.INVALID_PARAMETER, problem)
    return extra


def ack_of(header: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader, extra: ExtraInfo) -> AckMsg:
    """The ack of the message ``header`` names in the check point ``extra`` names."""
    return AckMsg(
        ack_offset=header.offset,
        start_offset=extra.ck_queue_offset,
        consumer_group=header.consumer_group,
        topic=header.topic,
        queue_id=header.queue_id,
        pop_time=extra.pop_time,
        broker_name=extra.broker_name,
    )


def check_group(context: BrokerContext, request: RemotingCommand, group: str) -> RemotingCommand | None:
    """The subscription group exists (auto-created when allowed) and may consume."""
    group_config = context.subscription_group_manager.find_subscription_group_config(group)
    if group_config is None:
        return request.make_response(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group [{group}] does not exist, {FAQ_GROUP}",
        )
    if not group_config.consume_enable:
        return request.make_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
    return None


def message_filter(topic: str, expression: str | None, expression_type: str | None) -> MessageFilter:
    """The filter of a pop's expression (everything when there is none).

    Raises:
        ValueError: the expression does not parse (SUBSCRIPTION_PARSE_FAILED).
    """
    if not expression:
        return filter_for_subscription(None)
    subscription = build_subscription_data(topic, expression, expression_type)
    try:
        return filter_for_subscription(subscription)
    except SQLSyntaxError as exc:
        raise ValueError(str(exc)) from exc


def run_again_when_woken(
    executor: RequestExecutor,
    processor: RequestProcessor,
    run: Callable[[RemotingContext, RemotingCommand], Awaitable[RemotingCommand | None]],
) -> Callable[[PopRequest], None]:
    """The long-polling service's ``wakeup``: run a held request again on ``executor`` (Java
    submits it to the pull executor), timed from when it was first held."""

    def wakeup(held: PopRequest) -> None:
        ctx, request = held.ctx, held.request
        item = QueuedRequest(
            ctx,
            request,
            processor,
            time.monotonic(),
            held_since=held.held_at,
            later=Later(lambda: run(ctx, request)),
        )
        if not executor.submit(item) and not request.is_oneway:
            ctx.write_response(request.make_response(ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy"))

    return wakeup
