"""``apache.rocketmq.v2.MessagingService``, transport-free: decoded requests in, responses out.

One handler per RPC, grouped as Java's proxy groups its activities (``route``, ``client``,
``producer``, ``consumer``). Errors are answered in the response's ``status`` (gRPC OK), as Java's
``ResponseBuilder`` does; the transport adapters (``transport.py``) only move messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf.message import Message

from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.command import RemotingCommand
from finchmq.remoting.errors import RemotingError, RemotingTimeoutError

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .backend import Backend
from .client import heartbeat, notify_client_termination, relay_broker_request, telemetry
from .clients import ClientRegistry, ClientSession
from .config import GrpcConfig
from .consumer import ack_message, change_invisible_duration, receive_message
from .context import CallContext
from .producer import (
    end_transaction,
    forward_message_to_dead_letter_queue,
    recall_message,
    send_message,
)
from .renew import ReceiptHandleManager
from .route import query_assignment, query_route
from .state import Authorizer, Service
from .status import GrpcStatusError, remoting_error, status
from .transactions import TransactionRegistry

log = logging.getLogger(__name__)

SERVICE_NAME: Final = "apache.rocketmq.v2.MessagingService"

UnaryHandler = Callable[[Service, CallContext, Any], Awaitable[Message]]
StreamHandler = Callable[[Service, CallContext, Any], AsyncGenerator[Message, None]]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    request: type[Message]
    response: type[Message]
    unary: UnaryHandler | None = None
    stream: StreamHandler | None = None  # server streaming
    bidi: bool = False  # Telemetry


METHODS: Final[dict[str, Method]] = {
    m.name: m
    for m in (
        Method("QueryRoute", spb.QueryRouteRequest, spb.QueryRouteResponse, query_route),
        Method("Heartbeat", spb.HeartbeatRequest, spb.HeartbeatResponse, heartbeat),
        Method("SendMessage", spb.SendMessageRequest, spb.SendMessageResponse, send_message),
        Method("QueryAssignment", spb.QueryAssignmentRequest, spb.QueryAssignmentResponse, query_assignment),
        Method(
            "ReceiveMessage",
            spb.ReceiveMessageRequest,
            spb.ReceiveMessageResponse,
            stream=receive_message,
        ),
        Method("AckMessage", spb.AckMessageRequest, spb.AckMessageResponse, ack_message),
        Method(
            "ForwardMessageToDeadLetterQueue",
            spb.ForwardMessageToDeadLetterQueueRequest,
            spb.ForwardMessageToDeadLetterQueueResponse,
            forward_message_to_dead_letter_queue,
        ),
        Method("PullMessage", spb.PullMessageRequest, spb.PullMessageResponse),
        Method("UpdateOffset", spb.UpdateOffsetRequest, spb.UpdateOffsetResponse),
        Method("GetOffset", spb.GetOffsetRequest, spb.GetOffsetResponse),
        Method("QueryOffset", spb.QueryOffsetRequest, spb.QueryOffsetResponse),
        Method("EndTransaction", spb.EndTransactionRequest, spb.EndTransactionResponse, end_transaction),
        Method("Telemetry", spb.TelemetryCommand, spb.TelemetryCommand, bidi=True),
        Method(
            "NotifyClientTermination",
            spb.NotifyClientTerminationRequest,
            spb.NotifyClientTerminationResponse,
            notify_client_termination,
        ),
        Method(
            "ChangeInvisibleDuration",
            spb.ChangeInvisibleDurationRequest,
            spb.ChangeInvisibleDurationResponse,
            change_invisible_duration,
        ),
        Method("RecallMessage", spb.RecallMessageRequest, spb.RecallMessageResponse, recall_message),
        Method("SyncLiteSubscription", spb.SyncLiteSubscriptionRequest, spb.SyncLiteSubscriptionResponse),
    )
}
"""Every RPC of the contract. Those without a handler are answered gRPC UNIMPLEMENTED, as Java's
proxy 5.3.3 does (PullMessage, UpdateOffset, GetOffset, QueryOffset, SyncLiteSubscription)."""


class MessagingService:
    """The service's state: its config, the brokers behind it, the clients it knows."""

    def __init__(self, backend: Backend, config: GrpcConfig, authorizer: Authorizer | None = None) -> None:
        self.backend = backend
        self.config = config
        self.authorizer = authorizer
        self.clients = ClientRegistry(
            backend,
            lambda session, request: relay_broker_request(self, session, request),
            config.grpc_client_idle_time_mills / 1000,
        )
        self.tasks = BackgroundTasks("grpc")  # fire-and-forget acks, nacks, the client sweeper
        self.port = config.grpc_server_port  # the port actually listened on (set by the server)
        self.transactions = TransactionRegistry(
            config.transaction_data_expire_millis / 1000, config.transaction_data_max_num
        )
        self.receipt_handles = ReceiptHandleManager(self)
        self.pending_replies: dict[str, asyncio.Future[spb.TelemetryCommand]] = {}

    # -- dispatch (the transports call these) --------------------------------------------------

    async def unary(self, method: Method, ctx: CallContext, request: Message) -> Message:
        assert method.unary is not None
        try:
            await self._admit(method, ctx, request)
            return await method.unary(self, ctx, request)
        except Exception as exc:  # every failure is an answer in the body
            return method.response(status=self._status_of(exc, method.name))

    async def server_stream(
        self, method: Method, ctx: CallContext, request: Message
    ) -> AsyncGenerator[Message, None]:
        assert method.stream is not None
        try:
            await self._admit(method, ctx, request)
        except Exception as exc:
            yield method.response(status=self._status_of(exc, method.name))
            return
        async with contextlib.aclosing(method.stream(self, ctx, request)) as responses:
            async for response in responses:
                yield response

    async def telemetry(
        self,
        ctx: CallContext,
        inbound: AsyncIterator[spb.TelemetryCommand],
        send: Callable[[spb.TelemetryCommand], Awaitable[None]],
    ) -> None:
        """The bidirectional stream; raises ``GrpcStatusError`` to end it with a gRPC status."""
        await telemetry(self, ctx, inbound, send)

    async def _admit(self, method: Method, ctx: CallContext, request: Message) -> None:
        # Java's order: the auth pipeline, then GrpcMessagingApplication#validateContext
        if self.authorizer is not None:
            await self.authorizer(ctx, method.name, request)
        ctx.require_client_id()

    @staticmethod
    def _status_of(exc: Exception, what: str) -> pb.Status:
        if isinstance(exc, GrpcStatusError):
            return status(exc.code, exc.message)
        if isinstance(exc, RemotingTimeoutError | TimeoutError):
            return status(pb.PROXY_TIMEOUT, f"{what}: the broker did not answer in time")
        if isinstance(exc, RemotingError):
            return status(pb.INTERNAL_SERVER_ERROR, f"{what}: {exc}")
        log.exception("%s failed", what)
        return status(pb.INTERNAL_SERVER_ERROR, f"{what}: {exc!r}")

    def status_of(self, exc: Exception, what: str) -> pb.Status:
        """The status ``exc`` is answered with (Java ``ResponseBuilder#buildStatus``), for
        handlers that answer a failure inside a larger response (stream, ack entries)."""
        return self._status_of(exc, what)

    # -- helpers for the handlers ----------------------------------------------------------------

    def session(self, ctx: CallContext) -> ClientSession:
        return self.clients.session(ctx.require_client_id(), ctx.peer, ctx.language, ctx.client_version)

    async def invoke(
        self,
        ctx: CallContext,
        request: RemotingCommand,
        *,
        broker_name: str | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:
        """``request`` to the broker for the calling client; ``timeout`` defaults to the broker
        call timeout, cut to the client's deadline."""
        session = self.session(ctx)
        seconds = self.config.broker_call_timeout_mills / 1000 if timeout is None else timeout
        remaining = ctx.remaining()
        if remaining is not None:
            seconds = max(0.001, min(seconds, remaining))
        return await self.backend.invoke(self.clients.link(session), broker_name, request, seconds)

    async def invoke_ok(
        self,
        ctx: CallContext,
        request: RemotingCommand,
        what: str,
        *,
        broker_name: str | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:
        """``invoke``, a non-SUCCESS answer raised as the 5.x error it maps to."""
        response = await self.invoke(ctx, request, broker_name=broker_name, timeout=timeout)
        if response.code != 0:
            raise remoting_error(response.code, response.remark, what)
        return response

    async def close(self) -> None:
        for future in self.pending_replies.values():
            future.cancel()
        await self.tasks.close()
        await self.receipt_handles.close()
        await self.clients.close()
        await self.backend.close()
