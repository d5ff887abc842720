"""QUERY_MESSAGE (by key) and VIEW_MESSAGE_BY_ID (by commit-log offset) (Java
``QueryMessageProcessor``). Bodies are the stored records, byte for byte."""

from __future__ import annotations

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor

__all__ = ["QueryMessageProcessor"]


class QueryMessageProcessor(BrokerProcessor):
    executor = ExecutorName.QUERY

    @handles(RequestCode.QUERY_MESSAGE)
    def query_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        store = self.context.store
        # Java: "_UNIQUE_KEY_QUERY" asks for one message only.
        max_num = 1 if request.ext_fields.get("_UNIQUE_KEY_QUERY") == "true" else header.max_num
        with store.query_message(
            header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
        ) as result:
            response_header = QueryMessageResponseHeader(
                index_last_update_timestamp=result.index_last_update_timestamp,
                index_last_update_phyoffset=result.index_last_update_phyoffset,
            ).to_ext_fields()
            if not result.buffers:
                return request.make_response(
                    ResponseCode.QUERY_NOT_FOUND,
                    "can not find message, maybe time range not correct",
                    response_header,
                )
            return request.make_response(ResponseCode.SUCCESS, None, response_header, result.body())

    @handles(RequestCode.VIEW_MESSAGE_BY_ID)
    def view_message_by_id(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        view = self.context.store.select_one_message_by_offset(header.offset)
        if view is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        with view:
            return request.make_response(ResponseCode.SUCCESS, body=bytes(view))
