"""HTTP/2 for the service: grpclib (pure Python, asyncio-native: it runs on the broker's own event
loop). Each RPC path gets a handler that decodes the request, builds the ``CallContext`` and
hands both to ``MessagingService``; only Telemetry errors and unimplemented RPCs become gRPC
statuses (INVALID_ARGUMENT for a 4xxxx code, INTERNAL otherwise, Java's ``processTelemetryException``)."""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from google.protobuf.message import DecodeError, Message
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ._pb import service_pb2 as spb
from .context import CallContext
from .service import METHODS, SERVICE_NAME, MessagingService, Method
from .status import GrpcStatusError

log = logging.getLogger(__name__)


def _context(method: Method, stream: Stream[Any, Any]) -> CallContext:
    metadata = {k: v for k, v in (stream.metadata or {}).items() if isinstance(v, str)}
    addr = stream.peer.addr()
    peer = f"{addr[0]}:{addr[1]}" if addr else "unknown:0"
    deadline = None
    if stream.deadline is not None:
        deadline = time.monotonic() + stream.deadline.time_remaining()
    return CallContext(method.name, metadata, peer, deadline)


async def _receive(stream: Stream[Any, Any], method: Method, limit: int) -> Message | None:
    """The next request message of ``stream`` (None at its end), as grpclib's ``recv_message``
    reads it, but refusing a message over ``limit`` bytes before reading it (grpclib has no limit;
    Java's ``grpcMaxInboundMessageSize``) and answering an undecodable one INVALID_ARGUMENT."""
    h2_stream = stream._stream  # grpclib's own recv_message reads the same way
    prefix = await h2_stream.recv_data(5)
    if not prefix:
        return None
    compressed, length = struct.unpack(">?I", prefix)
    if compressed:
        raise GRPCError(Status.UNIMPLEMENTED, "compressed gRPC messages are not supported")
    if length > limit:
        raise GRPCError(
            Status.RESOURCE_EXHAUSTED, f"a {length}-byte message is over the limit of {limit} bytes"
        )
    data = await h2_stream.recv_data(length)
    try:
        return method.request.FromString(data)
    except DecodeError as exc:
        raise GRPCError(Status.INVALID_ARGUMENT, f"malformed {method.request.__name__}: {exc}") from exc


def _handler(service: MessagingService, method: Method) -> Handler:
    limit = service.config.grpc_max_inbound_message_size

    async def unary(stream: Stream[Message, Message]) -> None:
        request = await _receive(stream, method, limit)
        if request is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "no request message")
        await stream.send_message(await service.unary(method, _context(method, stream), request))

    async def server_stream(stream: Stream[Message, Message]) -> None:
        request = await _receive(stream, method, limit)
        if request is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "no request message")
        responses = service.server_stream(method, _context(method, stream), request)
        async with contextlib.aclosing(responses):  # a failed send closes the handler's stream now
            async for response in responses:
                await stream.send_message(response)

    async def bidi(stream: Stream[spb.TelemetryCommand, spb.TelemetryCommand]) -> None:
        async def inbound() -> AsyncIterator[spb.TelemetryCommand]:
            while (command := await _receive(stream, method, limit)) is not None:
                assert isinstance(command, spb.TelemetryCommand)
                yield command

        try:
            await service.telemetry(_context(method, stream), inbound(), stream.send_message)
        except GrpcStatusError as exc:
            status = Status.INVALID_ARGUMENT if 40000 <= exc.code < 50000 else Status.INTERNAL
            raise GRPCError(status, exc.message) from exc

    async def unimplemented(stream: Stream[Message, Message]) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, f"Method {SERVICE_NAME}/{method.name} is unimplemented")

    func: Callable[[Stream[Any, Any]], Awaitable[None]]
    if method.bidi:
        func, cardinality = bidi, Cardinality.STREAM_STREAM
    elif method.stream is not None:
        func, cardinality = server_stream, Cardinality.UNARY_STREAM
    elif method.unary is not None:
        func, cardinality = unary, Cardinality.UNARY_UNARY
    else:
        func, cardinality = unimplemented, Cardinality.UNARY_UNARY
    return Handler(func, cardinality, method.request, method.response)


class GrpclibHandlers:
    """The ``IServable`` grpclib's ``Server`` takes: path → handler for every method."""

    def __init__(self, service: MessagingService) -> None:
        self._mapping = {f"/{SERVICE_NAME}/{m.name}": _handler(service, m) for m in METHODS.values()}

    def __mapping__(self) -> dict[str, Handler]:
        return self._mapping
