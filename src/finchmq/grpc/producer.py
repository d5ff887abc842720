"""SendMessage, EndTransaction, RecallMessage and ForwardMessageToDeadLetterQueue (Java's
``SendMessageActivity``, ``EndTransactionActivity``, ``RecallMessageActivity``,
``ForwardMessageToDLQActivity``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from finchmq.protocol.command import RemotingCommand

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .clients import ClientSession
from .context import CallContext
from .status import GrpcStatusError

if TYPE_CHECKING:
    from .service import MessagingService


class TransactionRegistry:
    """Transactions the server may be asked to end (Java ``TransactionDataManager``)."""


async def send_message(
    svc: MessagingService, ctx: CallContext, req: spb.SendMessageRequest
) -> spb.SendMessageResponse:
    raise GrpcStatusError(pb.NOT_IMPLEMENTED, "SendMessage is not implemented yet")


async def end_transaction(
    svc: MessagingService, ctx: CallContext, req: spb.EndTransactionRequest
) -> spb.EndTransactionResponse:
    raise GrpcStatusError(pb.NOT_IMPLEMENTED, "EndTransaction is not implemented yet")


async def recall_message(
    svc: MessagingService, ctx: CallContext, req: spb.RecallMessageRequest
) -> spb.RecallMessageResponse:
    raise GrpcStatusError(pb.NOT_IMPLEMENTED, "RecallMessage is not implemented yet")


async def forward_message_to_dead_letter_queue(
    svc: MessagingService, ctx: CallContext, req: spb.ForwardMessageToDeadLetterQueueRequest
) -> spb.ForwardMessageToDeadLetterQueueResponse:
    raise GrpcStatusError(pb.NOT_IMPLEMENTED, "ForwardMessageToDeadLetterQueue is not implemented yet")


async def relay_transaction_check(
    svc: MessagingService, session: ClientSession, request: RemotingCommand
) -> None:
    """CHECK_TRANSACTION_STATE from the broker → RecoverOrphanedTransactionCommand to the client."""
