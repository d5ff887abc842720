"""ReceiveMessage, AckMessage and ChangeInvisibleDuration (Java ``ReceiveMessageActivity``,
``AckMessageActivity``, ``ChangeInvisibleDurationActivity``): 5.x consumption is POP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .context import CallContext
from .status import GrpcStatusError

if TYPE_CHECKING:
    from .service import MessagingService


async def receive_message(
    svc: MessagingService, ctx: CallContext, req: spb.ReceiveMessageRequest
) -> AsyncIterator[spb.ReceiveMessageResponse]:
    yield spb.ReceiveMessageResponse(status=pb.Status(code=pb.NOT_IMPLEMENTED, message="not yet"))


async def ack_message(
    svc: MessagingService, ctx: CallContext, req: spb.AckMessageRequest
) -> spb.AckMessageResponse:
    raise GrpcStatusError(pb.NOT_IMPLEMENTED, "AckMessage is not implemented yet")


async def change_invisible_duration(
    svc: MessagingService, ctx: CallContext, req: spb.ChangeInvisibleDurationRequest
) -> spb.ChangeInvisibleDurationResponse:
    raise GrpcStatusError(pb.NOT_IMPLEMENTED, "ChangeInvisibleDuration is not implemented yet")
