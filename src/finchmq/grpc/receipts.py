"""Receipt handles and the broker calls made on them: ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME and
the dead-letter forward (Java ``ConsumerProcessor``, ``ProducerProcessor``), shared by ReceiveMessage's
filter, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and the renewal of
PushConsumer handles."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Coroutine
from typing import Any

from finchmq.protocol import pop
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ConsumerSendMsgBackRequestHeader,
)
from finchmq.protocol.message_const import KEY_SEPARATOR

from ._pb import definition_pb2 as pb
from .context import CallContext
from .convert import now_ms
from .state import Service
from .status import GrpcStatusError

log = logging.getLogger(__name__)


def decode_handle(text: str) -> pop.ReceiptHandle:
    """A client's receipt handle; an unreadable one is INVALID_RECEIPT_HANDLE (Java answers
    INTERNAL_SERVER_ERROR for the IllegalArgumentException of ``ReceiptHandle.decode``)."""
    try:
        return pop.ReceiptHandle.decode(text)
    except (pop.ExtraInfoError, ValueError) as exc:
        raise GrpcStatusError(pb.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from exc


def check_not_expired(handle: pop.ReceiptHandle) -> None:
    """Java ``AbstractProcessor#validateReceiptHandle``: refused without asking the broker."""
    if handle.is_expired(now_ms()):
        raise GrpcStatusError(pb.INVALID_RECEIPT_HANDLE, "receipt handle is expired")


def create_handle(pop_ck: str, commit_log_offset: int) -> str:
    """Java ``ConsumerProcessor#createHandle``: ``POP_CK`` + " " + commit-log offset."""
    return f"{pop_ck}{KEY_SEPARATOR}{commit_log_offset}"


# -- broker calls (ConsumerProcessor / LocalMessageService) ---------------------------------------


async def ack(svc: Service, ctx: CallContext, handle_text: str, group: str, topic: str) -> RemotingCommand:
    """ACK_MESSAGE for one receipt handle (Java ``ConsumerProcessor#ackMessage``); raises
    INVALID_RECEIPT_HANDLE for an expired one."""
    handle = decode_handle(handle_text)
    check_not_expired(handle)
    header = AckMessageRequestHeader(
        consumer_group=group,
        topic=handle.real_topic(topic, group),
        queue_id=handle.queue_id,
        extra_info=handle_text,
        offset=handle.offset,
    )
    request = RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())
    return await svc.invoke(ctx, request, broker_name=handle.broker_name)


async def change_invisible_time(
    svc: Service, ctx: CallContext, handle_text: str, group: str, topic: str, invisible_ms: int
) -> str | None:
    """CHANGE_MESSAGE_INVISIBLETIME (Java ``ConsumerProcessor#changeInvisibleTime``): the new
    receipt handle, None when the broker refused (Java ``AckStatus.NO_EXIST``)."""
    handle = decode_handle(handle_text)
    check_not_expired(handle)
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=group,
        topic=handle.real_topic(topic, group),
        queue_id=handle.queue_id,
        extra_info=handle_text,
        offset=handle.offset,
        invisible_time=invisible_ms,
    )
    request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields())
    response = await svc.invoke(ctx, request, broker_name=handle.broker_name)
    if response.code != ResponseCode.SUCCESS:
        return None
    try:
        answer = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
    except ProtocolError as exc:
        raise GrpcStatusError(pb.INTERNAL_SERVER_ERROR, f"bad change-invisible-time answer: {exc}") from exc
    # Java's LocalMessageService rebuilds the handle with commitLogOffset 0 and
    # ConsumerProcessor appends the real one after it; the handle carries it once here.
    renewed = dataclasses.replace(
        handle,
        retrieve_time=answer.pop_time,
        invisible_time=answer.invisible_time,
        revive_queue_id=answer.revive_qid,
    )
    return renewed.encode()


async def forward_to_dead_letter_queue(
    svc: Service, ctx: CallContext, handle_text: str, message_id: str, group: str, topic: str
) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK with delay level -1 (the group's DLQ), then ACK_MESSAGE when the
    broker took it (Java ``ProducerProcessor#forwardMessageToDeadLetterQueue``)."""
    handle = decode_handle(handle_text)
    if handle.commit_log_offset < 0:
        raise GrpcStatusError(pb.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
    header = ConsumerSendMsgBackRequestHeader(
        offset=handle.commit_log_offset,
        group=group,
        delay_level=-1,
        origin_msg_id=message_id,
        origin_topic=handle.real_topic(topic, group),
        max_reconsume_times=0,
    )
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    response = await svc.invoke(ctx, request, broker_name=handle.broker_name)
    if response.code == ResponseCode.SUCCESS:  # Java ignores the ack's outcome
        await logged(ack(svc, ctx, handle_text, group, topic), "ack after the dead-letter forward")
    return response


async def logged(coro: Coroutine[Any, Any, Any], what: str) -> None:
    try:
        await coro
    except Exception as exc:
        log.warning("%s failed: %r", what, exc)


# -- ReceiveMessage --------------------------------------------------------------------------------
