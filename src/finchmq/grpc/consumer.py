"""ReceiveMessage, AckMessage and ChangeInvisibleDuration (Java ``ReceiveMessageActivity``,
``ReceiveMessageResponseStreamWriter``, ``PopMessageResultFilterImpl``, ``AckMessageActivity``,
``ChangeInvisibleDurationActivity`` over ``ConsumerProcessor`` and ``LocalMessageService``): 5.x
consumption is POP.

A received message's receipt handle is its ``POP_CK`` (the broker's check-point info) with its
commit-log offset appended (``protocol.pop.ReceiptHandle``); ack and change-invisible send it
back to the broker as the ``extraInfo``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
from collections.abc import AsyncGenerator, Coroutine
from typing import Any, Final

from finchmq.protocol import pop
from finchmq.protocol.bodies import SubscriptionData
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.headers import (
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .client import merged_settings, subscription_data
from .context import CallContext
from .convert import decode_messages, duration_millis, message_from_ext, now_ms, timestamp
from .receipts import (
    ack,
    change_invisible_time,
    create_handle,
    forward_to_dead_letter_queue,
    logged,
)
from .state import MessageReceiptHandle, Service
from .status import GrpcStatusError, code_of_remoting, ok, status
from .validate import check_invisible_time, valid_consumer_group, valid_topic

log = logging.getLogger(__name__)

MAX_MSG_NUMS_FOR_POP_REQUEST: Final = 32  # Java ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST
NACK_INVISIBLE_TIME_MILLIS: Final = 1000  # ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME
DEFAULT_MAX_ATTEMPTS: Final = 17  # a group's retryMaxTimes 16, + 1
POP_MARGIN_SECONDS: Final = 3.0  # a pop's call timeout: its poll time and this (the broker answers by then)


class _Filter(enum.Enum):
    MATCH = enum.auto()
    NO_MATCH = enum.auto()
    TO_DLQ = enum.auto()


def _filter(subscription: SubscriptionData, max_attempts: int, msg: MessageExt) -> _Filter:
    """Java ``PopMessageResultFilterImpl`` (``FilterUtils.isTagMatched``: no tags subscribed
    matches everything)."""
    if subscription.tags_set and msg.tags not in subscription.tags_set:
        return _Filter.NO_MATCH
    if msg.reconsume_times >= max_attempts:
        return _Filter.TO_DLQ
    return _Filter.MATCH


def polling_time_millis(
    svc: Service, ctx: CallContext, req: spb.ReceiveMessageRequest, request_timeout_ms: int
) -> int:
    """Java ``ReceiveMessageActivity``: the request's long-polling timeout, else what the
    deadline leaves after half a request timeout; clamped to the configured bounds, and to the
    deadline when it leaves at least the minimum (else ILLEGAL_POLLING_TIME)."""
    config = svc.config
    remaining = ctx.remaining()
    remaining_ms = None if remaining is None else int(remaining * 1000)
    if req.HasField("long_polling_timeout"):
        polling = duration_millis(req.long_polling_timeout)
    elif remaining_ms is not None:
        polling = remaining_ms - request_timeout_ms // 2
    else:
        polling = config.grpc_client_consumer_max_long_polling_timeout_millis
    polling = max(polling, config.grpc_client_consumer_min_long_polling_timeout_millis)
    polling = min(polling, config.grpc_client_consumer_max_long_polling_timeout_millis)
    if remaining_ms is not None and polling > remaining_ms:
        if remaining_ms >= config.grpc_client_consumer_min_long_polling_timeout_millis:
            polling = remaining_ms
        else:
            raise GrpcStatusError(
                _polling_time_code(ctx.client_version),
                "The deadline time remaining is not enough for polling, please check network condition",
            )
    return polling


def _polling_time_code(version: str) -> int:
    """ILLEGAL_POLLING_TIME for clients from 5.0.3 on, BAD_REQUEST for older ones (Java)."""
    try:
        parts = tuple(int(p) for p in version.split("-", maxsplit=1)[0].split(".")[:3])
    except ValueError:
        return pb.BAD_REQUEST
    return pb.ILLEGAL_POLLING_TIME if parts >= (5, 0, 3) else pb.BAD_REQUEST


async def _consumer_settings(svc: Service, ctx: CallContext, group: str) -> tuple[bool, int, int]:
    """(fifo, max attempts, request timeout ms) from the client's settings merged with its group's."""
    session = svc.session(ctx)
    if session.settings is not None and session.settings.HasField("subscription"):
        settings = await merged_settings(svc, session)
        return (
            settings.subscription.fifo,
            settings.backoff_policy.max_attempts or DEFAULT_MAX_ATTEMPTS,
            duration_millis(settings.request_timeout),
        )
    config = await svc.backend.group_config(group)
    fifo = bool(getattr(config, "consume_message_orderly", False))
    attempts = config.retry_max_times + 1 if config is not None else DEFAULT_MAX_ATTEMPTS
    return fifo, attempts, 0


async def receive_message(
    svc: Service, ctx: CallContext, req: spb.ReceiveMessageRequest
) -> AsyncGenerator[spb.ReceiveMessageResponse, None]:
    """Java ``ReceiveMessageActivity``: status first, one response per message, then
    ``delivery_timestamp`` (now); every failure is a status."""
    pending: list[tuple[MessageExt, str]] = []
    try:
        try:
            refused = await _receive(svc, ctx, req, pending)
        except Exception as exc:
            refused = svc.status_of(exc, "ReceiveMessage")
        if refused is not None:
            yield spb.ReceiveMessageResponse(status=refused)
        else:
            yield spb.ReceiveMessageResponse(status=ok())
            while pending:
                msg, handle = pending[0]
                yield spb.ReceiveMessageResponse(message=message_from_ext(msg, handle))
                pending.pop(0)
    finally:
        if pending:  # the stream broke while messages were left: make them visible again soon
            _nack_all(svc, ctx, req, pending)
            pending.clear()
    yield spb.ReceiveMessageResponse(delivery_timestamp=timestamp(now_ms()))


def _nack_all(
    svc: Service,
    ctx: CallContext,
    req: spb.ReceiveMessageRequest,
    left: list[tuple[MessageExt, str]],
) -> None:
    """Java ``processThrowableWhenWriteMessage``: invisible for 1 s more, so another receive
    gets them soon; on a context without the broken call's deadline."""
    free = dataclasses.replace(ctx, deadline=None)
    group = req.group.name
    topic = req.message_queue.topic.name
    for msg, handle in left:
        svc.receipt_handles.remove(ctx.client_id, group, msg.client_msg_id, handle)  # not renewed
        svc.tasks.spawn(
            logged(
                change_invisible_time(svc, free, handle, group, topic, NACK_INVISIBLE_TIME_MILLIS),
                "nack of an undelivered message",
            ),
            "nack",
        )


async def _receive(
    svc: Service,
    ctx: CallContext,
    req: spb.ReceiveMessageRequest,
    out: list[tuple[MessageExt, str]],
) -> pb.Status | None:
    """The pop and its filter; the messages to send go to ``out`` with their handles; a status
    (an empty or refused pop) is returned instead."""
    config = svc.config
    group = req.group.name
    fifo, max_attempts, request_timeout_ms = await _consumer_settings(svc, ctx, group)
    polling_ms = polling_time_millis(svc, ctx, req, request_timeout_ms)
    topic = valid_topic(req.message_queue.topic)
    valid_consumer_group(req.group)
    auto_renew = config.enable_proxy_auto_renew and req.auto_renew
    if auto_renew:
        invisible_ms = config.default_invisible_time_mills
    else:
        invisible_ms = duration_millis(req.invisible_duration)
        check_invisible_time(
            invisible_ms, config.min_invisible_time_mills_for_recv, config.max_invisible_time_mills
        )
    if req.filter_expression.type == pb.SQL and not req.filter_expression.expression:  # FilterAPI.build
        raise GrpcStatusError(pb.ILLEGAL_FILTER_EXPRESSION, "Expression can't be null! SQL92")
    entry = pb.SubscriptionEntry(topic=req.message_queue.topic, expression=req.filter_expression)
    subscription = subscription_data(entry)  # ILLEGAL_FILTER_EXPRESSION
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=-1,  # the broker-acting queue (Java ReceiveMessageQueueSelector), FIFO too
        max_msg_nums=min(req.batch_size, MAX_MSG_NUMS_FOR_POP_REQUEST),
        invisible_time=invisible_ms,
        poll_time=polling_ms,
        born_time=now_ms(),
        init_mode=pop.ConsumeInitMode.MAX,
        exp_type=subscription.expression_type,
        exp=subscription.sub_string,
        order=fifo,
        attempt_id=req.attempt_id if req.HasField("attempt_id") else None,
    )
    broker_name = req.message_queue.broker.name or None
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    response = await svc.invoke(
        ctx, request, broker_name=broker_name, timeout=polling_ms / 1000 + POP_MARGIN_SECONDS
    )
    if response.code == ResponseCode.POLLING_FULL:
        return status(pb.TOO_MANY_REQUESTS, "polling full")
    if response.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
        return status(pb.MESSAGE_NOT_FOUND, "no new message")
    if response.code != ResponseCode.SUCCESS:
        return status(code_of_remoting(response.code), response.remark or f"pop failed: code {response.code}")
    answer = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
    msgs = decode_messages(bytes(response.body or b""))
    msgs = pop.with_pop_check_points(broker_name or _local_broker_name(svc), header, answer, msgs)
    side: list[Coroutine[Any, Any, Any]] = []
    inner = dataclasses.replace(ctx, deadline=None)  # acks and forwards outlive the call's deadline
    for msg in msgs:
        ck = msg.properties.get(MessageConst.PROPERTY_POP_CK)
        if ck is None:
            log.error("[BUG] pop message from broker but handle is empty: %s", msg.client_msg_id)
            continue
        handle = create_handle(ck, msg.commit_log_offset)
        verdict = _filter(subscription, max_attempts, msg)
        if verdict is _Filter.MATCH:
            out.append((msg, handle))
            if auto_renew:
                svc.receipt_handles.add(
                    ctx.client_id,
                    MessageReceiptHandle(
                        group, topic, msg.client_msg_id, handle, handle, msg.reconsume_times
                    ),
                )
        elif verdict is _Filter.NO_MATCH:
            side.append(logged(ack(svc, inner, handle, group, topic), "ack of an unmatched message"))
        else:
            side.append(
                logged(
                    forward_to_dead_letter_queue(svc, inner, handle, msg.client_msg_id, group, topic),
                    "dead-letter forward",
                )
            )
    for coro in side:
        svc.tasks.spawn(coro, "filtered-message")
    if not out:
        return status(pb.MESSAGE_NOT_FOUND, "no match message")
    return None


def _local_broker_name(svc: Service) -> str:
    name = getattr(svc.backend, "broker_name", None)
    return name if isinstance(name, str) else ""


# -- AckMessage / ChangeInvisibleDuration --------------------------------------------------------


async def _ack_entry(
    svc: Service, ctx: CallContext, group: str, topic: str, entry: spb.AckMessageEntry
) -> spb.AckMessageResultEntry:
    result = spb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
    try:
        handle = svc.receipt_handles.latest_handle(
            ctx.client_id, group, entry.message_id, entry.receipt_handle
        )
        response = await ack(svc, ctx, handle, group, topic)
    except Exception as exc:
        result.status.CopyFrom(svc.status_of(exc, "AckMessage"))
        return result
    if response.code == ResponseCode.SUCCESS:
        result.status.CopyFrom(status(pb.OK, "OK"))
    else:
        result.status.CopyFrom(status(pb.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal"))
    return result


async def ack_message(svc: Service, ctx: CallContext, req: spb.AckMessageRequest) -> spb.AckMessageResponse:
    """Java ``AckMessageActivity#ackMessageOneByOne``: one ACK_MESSAGE per entry; the top status
    is the entries' one code, or MULTIPLE_RESULTS."""
    valid_topic(req.topic)
    valid_consumer_group(req.group)
    entries = await asyncio.gather(
        *(_ack_entry(svc, ctx, req.group.name, req.topic.name, e) for e in req.entries)
    )
    codes = {e.status.code for e in entries}
    response = spb.AckMessageResponse(entries=entries)
    if len(codes) > 1:
        response.status.CopyFrom(status(pb.MULTIPLE_RESULTS, "MULTIPLE_RESULTS"))
    elif codes:
        code = codes.pop()
        response.status.CopyFrom(status(code, pb.Code.Name(code)))
    else:
        response.status.CopyFrom(status(pb.INTERNAL_SERVER_ERROR, "ack message result is empty"))
    return response


async def change_invisible_duration(
    svc: Service, ctx: CallContext, req: spb.ChangeInvisibleDurationRequest
) -> spb.ChangeInvisibleDurationResponse:
    """Java ``ChangeInvisibleDurationActivity``: the new receipt handle of the message."""
    valid_topic(req.topic)
    valid_consumer_group(req.group)
    invisible_ms = duration_millis(req.invisible_duration)
    check_invisible_time(invisible_ms, 0, svc.config.max_invisible_time_mills)
    current = svc.receipt_handles.latest_handle(
        ctx.client_id, req.group.name, req.message_id, req.receipt_handle
    )
    handle = await change_invisible_time(svc, ctx, current, req.group.name, req.topic.name, invisible_ms)
    if handle is None:
        return spb.ChangeInvisibleDurationResponse(
            status=status(pb.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal")
        )
    return spb.ChangeInvisibleDurationResponse(status=status(pb.OK, "OK"), receipt_handle=handle)
