"""POLLING_INFO (Java 5.3.3 ``PollingInfoProcessor``): how many POP requests are held for a
``topic@group@queueId``."""

from __future__ import annotations

from typing import Final

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import PollingInfoRequestHeader, PollingInfoResponseHeader
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor
from ._pop_common import check_broker_readable, check_group, check_topic, with_header

__all__ = ["PollingInfoProcessor"]

_ZERO_HEADER: Final = PollingInfoResponseHeader(polling_num=0).to_ext_fields()


class PollingInfoProcessor(BrokerProcessor):
    executor = ExecutorName.PULL

    @handles(RequestCode.POLLING_INFO)
    def polling_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = PollingInfoRequestHeader.from_ext_fields(request.ext_fields)
        refused = check_broker_readable(c, request, "peeking")
        if refused is None:
            refused = check_topic(c, request, header.topic, header.queue_id, ctx)[0]
        if refused is None:
            refused = check_group(c, request, header.consumer_group)
        if refused is not None:
            return with_header(refused, _ZERO_HEADER)
        queue_id = header.queue_id if header.queue_id >= 0 else -1
        held = c.pop.long_polling.polling_num(header.topic, header.consumer_group, queue_id)
        response_header = PollingInfoResponseHeader(polling_num=held)
        return request.make_response(ResponseCode.SUCCESS, None, response_header.to_ext_fields())
