"""END_TRANSACTION (Java ``EndTransactionProcessor``): a producer commits or rolls back a half
message, after its local transaction or when the broker's check asks. Producers send it oneway;
the answer matters only to a client that asks for one."""

from __future__ import annotations

import logging

from finchmq.broker.context import BrokerContext
from finchmq.broker.transaction import TransactionalMessageService
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import EndTransactionRequestHeader
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.remoting import ExecutorName, RemotingContext, handles
from finchmq.store.config import BrokerRole

from ._base import BrokerProcessor

__all__ = ["EndTransactionProcessor"]

log = logging.getLogger(__name__)

_ENDINGS = {
    MessageSysFlag.TRANSACTION_COMMIT_TYPE: "commit",
    MessageSysFlag.TRANSACTION_ROLLBACK_TYPE: "rollback",
}


class EndTransactionProcessor(BrokerProcessor):
    executor = ExecutorName.END_TRANSACTION

    def __init__(self, context: BrokerContext, service: TransactionalMessageService) -> None:
        super().__init__(context)
        self.service = service

    @handles(RequestCode.END_TRANSACTION)
    async def end_transaction(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        if self.context.store.config.broker_role is BrokerRole.SLAVE:
            return request.make_response(
                ResponseCode.SLAVE_NOT_AVAILABLE, "Can't commit or rollback a message on a slave."
            )
        ending = _ENDINGS.get(header.commit_or_rollback)
        if ending is None:  # TRANSACTION_NOT_TYPE (UNKNOW): the check will ask again
            log.debug(
                "producer %s left transaction %s unknown%s (remark: %s)",
                ctx.remote_addr,
                header.msg_id,
                " when checked" if header.from_transaction_check else "",
                request.remark,
            )
            return None
        if ending == "rollback" or header.from_transaction_check:
            log.info(
                "producer %s: %s of transaction %s%s",
                ctx.remote_addr,
                ending,
                header.msg_id,
                " (answering a check)" if header.from_transaction_check else "",
            )
        code, remark = await self.service.end_transaction(header)
        return request.make_response(code, remark)
