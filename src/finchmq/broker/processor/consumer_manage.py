"""GET_CONSUMER_LIST_BY_GROUP, UPDATE_CONSUMER_OFFSET, QUERY_CONSUMER_OFFSET (Java
``ConsumerManageProcessor``)."""

from __future__ import annotations

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import ConsumerListByGroupResponseBody
from finchmq.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor

__all__ = ["ConsumerManageProcessor"]


class ConsumerManageProcessor(BrokerProcessor):
    executor = ExecutorName.CONSUMER_MANAGE

    @handles(RequestCode.GET_CONSUMER_LIST_BY_GROUP)
    def get_consumer_list_by_group(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        group_info = self.context.consumer_manager.get(header.consumer_group)
        client_ids = group_info.client_ids() if group_info is not None else []
        if not client_ids:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        return request.make_response(
            ResponseCode.SUCCESS,
            body=ConsumerListByGroupResponseBody(consumer_id_list=tuple(client_ids)).to_json(),
        )

    @handles(RequestCode.UPDATE_CONSUMER_OFFSET)
    def update_consumer_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self.context.consumer_offset_manager.commit_offset(
            ctx.remote_addr, header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.QUERY_CONSUMER_OFFSET)
    def query_consumer_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        c = self.context
        offset = c.consumer_offset_manager.query_offset(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            return request.make_response(
                ResponseCode.SUCCESS,
                ext_fields=QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields(),
            )
        # Java: a group with no offset starts at 0 while the queue's first message is still
        # there (and in memory), so a new group sees messages sent before it existed.
        min_offset = c.store.get_min_offset_in_queue(header.topic, header.queue_id)
        if min_offset <= 0 and not c.store.check_in_disk_by_consume_offset(header.topic, header.queue_id, 0):
            return request.make_response(
                ResponseCode.SUCCESS, ext_fields=QueryConsumerOffsetResponseHeader(offset=0).to_ext_fields()
            )
        return request.make_response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )
