"""The same service on grpcio's asyncio server (C-core HTTP/2), for ``grpcServerImpl=grpcio``.

grpcio is an optional install (``pip install finchmq[grpc-fast]``); grpclib (``transport.py``) is
the default. Both hand decoded requests to ``MessagingService``; ``benchmarks/grpc_transport.py``
compares them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import Message

from .context import CallContext
from .service import METHODS, SERVICE_NAME, MessagingService, Method
from .status import GrpcStatusError


def _context(method: Method, context: Any) -> CallContext:
    metadata = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    peer = str(context.peer())  # "ipv4:127.0.0.1:5555"
    if peer.startswith(("ipv4:", "ipv6:")):
        peer = peer[5:]
    remaining = context.time_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    return CallContext(method.name, metadata, peer, deadline)


def _rpc_handler(service: MessagingService, method: Method) -> Any:
    deserialize = method.request.FromString
    serialize = method.response.SerializeToString

    async def unary(request: Message, context: Any) -> Message:
        return await service.unary(method, _context(method, context), request)

    async def server_stream(request: Message, context: Any) -> AsyncIterator[Message]:
        async for response in service.server_stream(method, _context(method, context), request):
            yield response

    async def bidi(requests: AsyncIterator[Message], context: Any) -> None:
        try:
            await service.telemetry(_context(method, context), requests, context.write)  # type: ignore[arg-type]
        except GrpcStatusError as exc:
            code = grpc.StatusCode.INVALID_ARGUMENT if 40000 <= exc.code < 50000 else grpc.StatusCode.INTERNAL
            await context.abort(code, exc.message)

    async def unimplemented(request: Message, context: Any) -> Message:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED, f"Method {SERVICE_NAME}/{method.name} is unimplemented"
        )
        raise AssertionError("unreachable")

    if method.bidi:
        return grpc.stream_stream_rpc_method_handler(bidi, deserialize, serialize)
    if method.stream is not None:
        return grpc.unary_stream_rpc_method_handler(server_stream, deserialize, serialize)
    return grpc.unary_unary_rpc_method_handler(
        unary if method.unary is not None else unimplemented, deserialize, serialize
    )


class GrpcioServer:
    """grpcio's aio server running ``service`` on the current event loop."""

    def __init__(self, service: MessagingService, max_message_bytes: int) -> None:
        options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        self._server = grpc.aio.server(options=options)
        handlers = {m.name: _rpc_handler(service, m) for m in METHODS.values()}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))

    async def start(self, host: str, port: int, certificate: bytes | None, private_key: bytes | None) -> int:
        address = f"{host}:{port}"
        if certificate is not None and private_key is not None:
            credentials = grpc.ssl_server_credentials([(private_key, certificate)])
            bound = self._server.add_secure_port(address, credentials)
        else:
            bound = self._server.add_insecure_port(address)
        await self._server.start()
        return int(bound)

    async def close(self) -> None:
        await self._server.stop(grace=1)
