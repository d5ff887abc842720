"""The server's commands on a 5.x client's Telemetry stream, answered by a client written here
over real gRPC (grpclib), since the official SDK 5.1.2 answers neither: a thread-stack request
(``finchmq admin`` consumerStatus with jstack) and a message verification (consumeMessageDirectly)
reach the right client and its answers come back to the admin as Java's proxy relays them."""

from __future__ import annotations

import asyncio

import pytest
from grpclib.client import Channel
from grpclib.const import Cardinality

from finchmq.client import Message, Producer
from finchmq.client.admin import AdminClient
from finchmq.client.errors import MQBrokerError
from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.protocol.bodies import CMResult
from finchmq.testing import EmbeddedServer
from tests.client.conftest import create_topic

TOPIC, GROUP, CLIENT = "T_telemetry", "G_telemetry", "fake-5x-client@1"
PATH = "/apache.rocketmq.v2.MessagingService/Telemetry"
METADATA = {"x-mq-client-id": CLIENT, "x-mq-language": "PYTHON", "x-mq-client-version": "5.1.2"}


def settings() -> spb.TelemetryCommand:
    subscription = pb.Subscription(
        group=pb.Resource(name=GROUP),
        subscriptions=[
            pb.SubscriptionEntry(
                topic=pb.Resource(name=TOPIC), expression=pb.FilterExpression(type=pb.TAG, expression="*")
            )
        ],
    )
    return spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PUSH_CONSUMER, subscription=subscription))


def test_thread_stacks_and_message_verification_reach_the_client_and_come_back(
    grpc_server: EmbeddedServer,
) -> None:
    asyncio.run(create_topic(grpc_server.namesrv_addr, TOPIC))
    verified: list[pb.Message] = []

    async def scenario() -> None:
        channel = Channel("127.0.0.1", grpc_server.grpc_port)
        try:
            async with channel.request(
                PATH, Cardinality.STREAM_STREAM, spb.TelemetryCommand, spb.TelemetryCommand, metadata=METADATA
            ) as stream:
                await stream.send_message(settings())
                answer = await stream.recv_message()
                assert answer is not None and answer.status.code == pb.OK, answer
                assert answer.settings.subscription.receive_batch_size == 32  # the server's merged settings

                async def client_side() -> None:  # what a 5.x client does with the server's commands
                    async for command in stream:
                        kind = command.WhichOneof("command")
                        if kind == "print_thread_stack_trace_command":
                            nonce = command.print_thread_stack_trace_command.nonce
                            await stream.send_message(
                                spb.TelemetryCommand(
                                    status=pb.Status(code=pb.OK),
                                    thread_stack_trace=spb.ThreadStackTrace(
                                        nonce=nonce, thread_stack_trace="main: idle"
                                    ),
                                )
                            )
                        elif kind == "verify_message_command":
                            verified.append(command.verify_message_command.message)
                            nonce = command.verify_message_command.nonce
                            await stream.send_message(
                                spb.TelemetryCommand(
                                    status=pb.Status(code=pb.OK),
                                    verify_message_result=spb.VerifyMessageResult(nonce=nonce),
                                )
                            )

                client_task = asyncio.ensure_future(client_side())
                try:
                    async with AdminClient(namesrv_addr=grpc_server.namesrv_addr) as admin:
                        info = await admin.consumer_running_info(GROUP, CLIENT, jstack=True)
                        assert info.jstack == "main: idle"
                        with pytest.raises(MQBrokerError, match="thread stacks"):
                            await admin.consumer_running_info(GROUP, CLIENT)
                        async with Producer(
                            "PG_telemetry", namesrv_addr=grpc_server.namesrv_addr
                        ) as producer:
                            sent = await producer.send(Message.create(TOPIC, b"verify me", tags="v"))
                        result = await admin.consume_message_directly(GROUP, CLIENT, sent.offset_msg_id)
                        assert result.consume_result is CMResult.CR_SUCCESS
                        assert result.remark == "from gRPC client"
                finally:
                    client_task.cancel()
                    await stream.cancel()
        finally:
            channel.close()

    asyncio.run(scenario())
    assert [m.body for m in verified] == [b"verify me"]
    assert verified[0].system_properties.tag == "v"
