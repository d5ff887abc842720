"""Scripted peers on real sockets (our own RemotingServer): a name server routing every topic to
fake brokers whose send answers a test chooses (SYSTEM_BUSY, SYSTEM_ERROR, slow, ...). Used only
where the real broker cannot be made to answer that way on demand."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import BrokerData, QueueData, TopicRouteData
from finchmq.protocol.headers import (
    GetRouteInfoRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from finchmq.protocol.msg_id import create_offset_msg_id
from finchmq.remoting import (
    ExecutorName,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RequestExecutor,
    RequestProcessor,
    handles,
)

_STORED = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT)


@dataclass
class Answer:
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    delay: float = 0.0


class _FakeBrokerProcessor(RequestProcessor):
    executor = ExecutorName.SEND

    def __init__(self, broker: FakeBroker) -> None:
        super().__init__()
        self.broker = broker

    @handles(
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.HEART_BEAT,
        RequestCode.UNREGISTER_CLIENT,
    )
    async def answer(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        return await self.broker.process_request(ctx, request)


class _FakeNamesrvProcessor(RequestProcessor):
    executor = ExecutorName.NAMESRV

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__()
        self.cluster = cluster

    @handles(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    async def answer(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        return await self.cluster.process_request(ctx, request)


@dataclass
class FakeBroker:
    name: str
    answers: deque[Answer] = field(default_factory=deque)  # consumed per send; SUCCESS when empty
    sends: list[SendMessageRequestHeaderV2] = field(default_factory=list)
    wire_headers: list[dict[str, str]] = field(default_factory=list)  # each send's extFields as received
    server: RemotingServer | None = None

    @property
    def addr(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.port}"

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            header = SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
            self.sends.append(header)
            self.wire_headers.append(dict(request.ext_fields))
            answer = self.answers.popleft() if self.answers else Answer()
            if answer.delay:
                await asyncio.sleep(answer.delay)
            if request.is_oneway:
                return None
            if answer.code not in _STORED:
                return request.make_response(answer.code, answer.remark)
            response = SendMessageResponseHeader(
                msg_id=create_offset_msg_id(
                    "127.0.0.1", self.server.port if self.server else 0, len(self.sends)
                ),
                queue_id=header.queue_id,
                queue_offset=len(self.sends) - 1,
            )
            return request.make_response(answer.code, answer.remark, ext_fields=response.to_ext_fields())
        return request.make_response(ResponseCode.SUCCESS)


class FakeCluster:
    """``async with FakeCluster("broker-a", "broker-b") as cluster``: ``cluster.namesrv_addr``."""

    def __init__(self, *broker_names: str, queues: int = 2) -> None:
        self.brokers = {name: FakeBroker(name) for name in broker_names}
        self.queues = queues
        self.namesrv: RemotingServer | None = None
        self.route_requests = 0

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return f"127.0.0.1:{self.namesrv.port}"

    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            self.route_requests += 1
            GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
            route = TopicRouteData(
                queue_datas=tuple(
                    QueueData(
                        broker_name=n, read_queue_nums=self.queues, write_queue_nums=self.queues, perm=6
                    )
                    for n in self.brokers
                ),
                broker_datas=tuple(
                    BrokerData(cluster="FakeCluster", broker_name=n, broker_addrs={0: b.addr})
                    for n, b in self.brokers.items()
                ),
            )
            return request.make_response(ResponseCode.SUCCESS, body=route.to_json())
        return request.make_response(ResponseCode.SUCCESS)

    async def __aenter__(self) -> FakeCluster:
        for broker in self.brokers.values():
            broker.server = RemotingServer(RemotingServerConfig(bind_address="127.0.0.1", listen_port=0))
            executor = RequestExecutor(ExecutorName.SEND, workers=8, capacity=1000)
            broker.server.register_processor(_FakeBrokerProcessor(broker), {ExecutorName.SEND: executor})
            await broker.server.start()
        self.namesrv = RemotingServer(RemotingServerConfig(bind_address="127.0.0.1", listen_port=0))
        executor = RequestExecutor(ExecutorName.NAMESRV, workers=2, capacity=100)
        self.namesrv.register_processor(_FakeNamesrvProcessor(self), {ExecutorName.NAMESRV: executor})
        await self.namesrv.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.namesrv is not None:
            await self.namesrv.close()
        for broker in self.brokers.values():
            if broker.server is not None:
                await broker.server.close()
