"""QUERY_MESSAGE (by key) and VIEW_MESSAGE_BY_ID (by commit-log offset) (Java
``QueryMessageProcessor``). Bodies are the stored records, byte for byte."""

from __future__ import annotations

from typing import ClassVar

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from finchmq.remoting import RemotingContext

from ._base import BrokerProcessor

__all__ = ["QueryMessageProcessor"]


class QueryMessageProcessor(BrokerProcessor):
    codes: ClassVar[tuple[int, ...]] = (
        RequestCode.QUERY_MESSAGE,
        RequestCode.VIEW_MESSAGE_BY_ID,
    )

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.QUERY_MESSAGE:
            return self.query_message(request)
        if request.code == RequestCode.VIEW_MESSAGE_BY_ID:
            return self.view_message_by_id(request)
        return self.not_supported(request)

    def query_message(self, request: RemotingCommand) -> RemotingCommand:
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        store = self.controller.store
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

    def view_message_by_id(self, request: RemotingCommand) -> RemotingCommand:
        header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        view = self.controller.store.select_one_message_by_offset(header.offset)
        if view is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        with view:
            return request.make_response(ResponseCode.SUCCESS, body=bytes(view))
