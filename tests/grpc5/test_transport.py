"""Bad bytes on the gRPC port, on both transports: a malformed request message and one over
``grpcMaxInboundMessageSize`` are refused with a gRPC status, and the same connection goes on
serving the next call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality, Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.exceptions import GRPCError

from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.testing import EmbeddedServer
from tests.client.conftest import create_topic

from .conftest import ServerFactory

PATH = "/apache.rocketmq.v2.MessagingService/QueryRoute"
METADATA = {"x-mq-client-id": "raw-client", "x-mq-language": "PYTHON"}


class RawCodec(ProtoCodec):
    """Sends ``bytes`` as they are (a malformed or huge message), messages as protobuf."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        return message if isinstance(message, bytes) else super().encode(message, message_type)


def route_request(topic: str) -> spb.QueryRouteRequest:
    return spb.QueryRouteRequest(topic=pb.Resource(name=topic))


async def call(channel: Channel, message: Any) -> spb.QueryRouteResponse:
    async with channel.request(
        PATH, Cardinality.UNARY_UNARY, spb.QueryRouteRequest, spb.QueryRouteResponse, metadata=METADATA
    ) as stream:
        await stream.send_message(message, end=True)
        reply = await stream.recv_message()
        assert reply is not None
        return reply


@pytest.mark.parametrize("impl", ["grpclib", "grpcio"])
def test_malformed_and_oversized_requests_are_refused_and_the_connection_serves_on(
    grpc_server_factory: ServerFactory, impl: str
) -> None:
    server: EmbeddedServer = grpc_server_factory(
        grpc_properties={"grpcServerImpl": impl, "grpcMaxInboundMessageSize": str(1024 * 1024)}
    )
    asyncio.run(create_topic(server.namesrv_addr, "T_raw"))

    async def scenario() -> None:
        channel = Channel("127.0.0.1", server.grpc_port, codec=RawCodec())
        try:
            with pytest.raises(GRPCError) as malformed:
                await call(channel, b"\x0a\xff\xff\xff\xff\x0f")  # field 1, a length past the end
            # grpclib's adapter answers INVALID_ARGUMENT; grpcio's C core UNKNOWN (its deserializer raised)
            expected = Status.INVALID_ARGUMENT if impl == "grpclib" else Status.UNKNOWN
            assert malformed.value.status is expected
            assert "corrupt" in (malformed.value.message or "")
            with pytest.raises(GRPCError) as oversized:
                await call(channel, b"\x0a" + b"\x80\x80\x80\x01" + b"x" * (2 * 1024 * 1024))
            assert oversized.value.status is Status.RESOURCE_EXHAUSTED
            reply = await call(channel, route_request("T_raw"))  # the same connection
            assert reply.status.code == pb.OK
            assert len(reply.message_queues) == 4
        finally:
            channel.close()

    asyncio.run(scenario())
