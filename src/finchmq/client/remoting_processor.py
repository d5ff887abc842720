"""``ClientRemotingProcessor``: the requests a broker sends to a client (Java
``ClientRemotingProcessor``): NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY,
CHECK_TRANSACTION_STATE and PUSH_REPLY_MESSAGE_TO_CLIENT. It sees the client instance only
through ``ClientCallbacks``: what those requests need of it."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
    ResetOffsetBody,
)
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.compression import decompress_body
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ReplyMessageRequestHeader,
    ResetOffsetRequestHeader,
)
from finchmq.protocol.hosts import HostAddress
from finchmq.protocol.message import MessageExt, MessageQueue, string_to_properties
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.stored import decode_stored
from finchmq.remoting import ExecutorName, RemotingContext, RequestProcessor, handles

from .api import MAX_DECOMPRESSED_BODY

__all__ = ["ClientCallbacks", "ClientRemotingProcessor"]

log = logging.getLogger(__name__)


class _Consumer(Protocol):
    def offset_table(self, topic: str) -> dict[MessageQueue, int]: ...

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> ConsumeMessageDirectlyResult: ...


class _Producer(Protocol):
    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None: ...


class ClientCallbacks(Protocol):
    """What a broker's requests need of the client instance (``MQClientInstance``)."""

    @property
    def producer_table(self) -> Mapping[str, _Producer]:
        """Producers by group: a transaction check goes to its group's."""
        ...

    @property
    def reply_futures(self) -> dict[str, asyncio.Future[MessageExt]]:
        """Request-reply calls waiting for their reply, by correlation id."""
        ...

    @property
    def tasks(self) -> BackgroundTasks:
        """Where work that outlives the request runs."""
        ...

    def rebalance_immediately(self) -> None: ...

    def select_consumer(self, group: str) -> _Consumer | None: ...

    def consumer_running_info(self, group: str) -> ConsumerRunningInfo | None: ...

    async def reset_offset(self, topic: str, group: str, offsets: dict[MessageQueue, int]) -> None: ...


class ClientRemotingProcessor(RequestProcessor):
    """Requests a broker sends to this client (Java ``ClientRemotingProcessor``)."""

    executor = ExecutorName.CLIENT

    def __init__(self, instance: ClientCallbacks) -> None:
        super().__init__()
        self.instance = instance

    @handles(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    def _notify_consumer_ids_changed(self, ctx: RemotingContext, request: RemotingCommand) -> None:
        log.info(
            "receive broker's notification[%s], the consumer group changed, rebalance immediately",
            ctx.remote_addr,
        )
        self.instance.rebalance_immediately()

    @handles(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT)
    def _receive_reply_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Java ``receiveReplyMessage``: the reply to one of this client's requests; one that
        nobody waits for any more (timed out) is dropped."""
        received = int(time.time() * 1000)
        try:
            header = ReplyMessageRequestHeader.from_ext_fields(request.ext_fields)
            body = bytes(request.body)
            if header.sys_flag & MessageSysFlag.COMPRESSED_FLAG:
                body = decompress_body(body, MAX_DECOMPRESSED_BODY)
            properties = string_to_properties(header.properties or "")
            properties[MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(received)
            reply = MessageExt(
                topic=header.topic,
                body=body,
                flag=header.flag,
                properties=properties,
                queue_id=header.queue_id,
                born_timestamp=header.born_timestamp,
                store_timestamp=header.store_timestamp,
                reconsume_times=header.reconsume_times or 0,
            )
            if header.born_host:
                reply = replace(reply, born_host=HostAddress.parse(header.born_host))
            if header.store_host:
                reply = replace(reply, store_host=HostAddress.parse(header.store_host))
        except (ProtocolError, ValueError) as exc:
            log.warning("bad reply message: %s", exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = properties.get(MessageConst.PROPERTY_CORRELATION_ID, "")
        future = self.instance.reply_futures.pop(correlation_id, None)
        if future is None or future.done():
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s , reply from host: %s",
                correlation_id,
                header.born_host,
            )
        else:
            future.set_result(reply)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.CHECK_TRANSACTION_STATE)
    def _check_transaction_state(self, ctx: RemotingContext, request: RemotingCommand) -> None:
        """Java ``ClientRemotingProcessor.checkTransactionState``: hand the half message to the
        producer of its group (oneway: nothing is answered here)."""
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        if not request.body:
            return
        msg = decode_stored(bytes(request.body))
        group = msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP)
        producer = self.instance.producer_table.get(group) if group else None
        if producer is None:
            log.debug("transaction check for group %s, which has no producer here", group)
            return
        producer.check_transaction_state(ctx.remote_addr, msg, header)

    @handles(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
    def _reset_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offsets: dict[MessageQueue, int] = {}
        if request.body:
            offsets = dict(ResetOffsetBody.from_json(request.body).offset_table)
        log.info(
            "invoke reset offset operation from broker. brokerAddr=%s, topic=%s, group=%s, timestamp=%s",
            ctx.remote_addr,
            header.topic,
            header.group,
            header.timestamp,
        )
        # Answer at once (it may be a two-way call): the reset drains consumption first.
        self.instance.tasks.spawn(
            self.instance.reset_offset(header.topic, header.group, offsets), f"reset-offset-{header.group}"
        )
        return None if request.is_oneway else request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
    def _get_consume_status(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerStatusRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.instance.select_consumer(header.group)
        table = consumer.offset_table(header.topic) if consumer is not None else {}
        body = GetConsumerStatusBody(message_queue_table=table)
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
    def _get_consumer_running_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        info = self.instance.consumer_running_info(header.consumer_group)
        if info is None:
            return _no_such_group(request, header.consumer_group)
        if header.jstack_enable:
            info = _with_jstack(info)
        return request.make_response(ResponseCode.SUCCESS, body=info.to_json())

    @handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
    async def _consume_message_directly(
        self, ctx: RemotingContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.instance.select_consumer(header.consumer_group)
        if consumer is None:
            return _no_such_group(request, header.consumer_group)
        try:
            msg = decode_stored(request.body, decompress_max_size=MAX_DECOMPRESSED_BODY)
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad message body: {exc}")
        result = await consumer.consume_message_directly(msg, header.broker_name)
        return request.make_response(ResponseCode.SUCCESS, body=result.to_json())


def _no_such_group(request: RemotingCommand, group: str) -> RemotingCommand:
    return request.make_response(
        ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
    )


def _with_jstack(info: ConsumerRunningInfo) -> ConsumerRunningInfo:
    """Java puts a thread dump in ``jstack``; here, the asyncio tasks' stacks."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        print(f"--- {task.get_name()} (pid {os.getpid()})", file=out)
        task.print_stack(limit=8, file=out)
    return replace(info, jstack=out.getvalue())
