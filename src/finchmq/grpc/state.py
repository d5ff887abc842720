"""What the RPC handlers use of the service (``service.MessagingService`` is it): a leaf module, so
that the handlers and the service that dispatches to them import in one direction."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from google.protobuf.message import Message

from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.command import RemotingCommand

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .backend import Backend
from .clients import ClientRegistry, ClientSession
from .config import GrpcConfig
from .context import CallContext
from .convert import now_ms
from .transactions import TransactionRegistry

Authorizer = Callable[[CallContext, str, Message], Awaitable[None]]
"""Checks a call's signature and permissions (``auth.py``); raises ``GrpcStatusError``."""


@dataclass(slots=True)
class MessageReceiptHandle:
    """One received message being kept invisible (Java ``MessageReceiptHandle``)."""

    group: str
    topic: str
    message_id: str
    original_handle: str  # the handle the client received
    handle: str  # the latest one (after renewals)
    reconsume_times: int
    consume_timestamp: int = field(default_factory=now_ms)
    renew_times: int = 0
    renew_retry_times: int = 0


class ReceiptHandles(Protocol):
    """The handles kept invisible for PushConsumers (``renew.ReceiptHandleManager``)."""

    def add(self, client_id: str, record: MessageReceiptHandle) -> None: ...

    def remove(
        self, client_id: str, group: str, message_id: str, handle: str
    ) -> MessageReceiptHandle | None: ...

    def latest_handle(self, client_id: str, group: str, message_id: str, handle: str) -> str: ...


class Service(Protocol):
    """The service's state and its broker calls, as the handlers see them."""

    @property
    def backend(self) -> Backend: ...

    @property
    def config(self) -> GrpcConfig: ...

    @property
    def authorizer(self) -> Authorizer | None: ...

    @property
    def clients(self) -> ClientRegistry: ...

    @property
    def tasks(self) -> BackgroundTasks: ...

    @property
    def port(self) -> int: ...

    @property
    def transactions(self) -> TransactionRegistry: ...

    @property
    def receipt_handles(self) -> ReceiptHandles: ...

    @property
    def pending_replies(self) -> dict[str, asyncio.Future[spb.TelemetryCommand]]: ...

    def session(self, ctx: CallContext) -> ClientSession: ...

    def status_of(self, exc: Exception, what: str) -> pb.Status: ...

    async def invoke(
        self,
        ctx: CallContext,
        request: RemotingCommand,
        *,
        broker_name: str | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand: ...

    async def invoke_ok(
        self,
        ctx: CallContext,
        request: RemotingCommand,
        what: str,
        *,
        broker_name: str | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand: ...
