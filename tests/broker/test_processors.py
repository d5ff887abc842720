"""The broker's processors on a ``BrokerContext`` over a store in ``tmp_path``: no listening socket,
no name server, no controller. The end-to-end tests beside this file cover the same codes over
loopback; these pin the processors' contracts and the one registration table."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from finchmq.broker import BrokerConfig, BrokerController
from finchmq.broker.broker2client import Broker2Client
from finchmq.broker.context import BrokerContext, build_broker_context
from finchmq.broker.long_polling import PullRequestHoldService
from finchmq.broker.processor import (
    AckMessageProcessor,
    AdminBrokerProcessor,
    BrokerProcessor,
    ChangeInvisibleTimeProcessor,
    ClientManageProcessor,
    ConsumerManageProcessor,
    EndTransactionProcessor,
    NotificationProcessor,
    PeekMessageProcessor,
    PollingInfoProcessor,
    PopMessageProcessor,
    PullMessageProcessor,
    QueryAssignmentProcessor,
    QueryMessageProcessor,
    RecallMessageProcessor,
    SendMessageProcessor,
)
from finchmq.broker.processor.auth import AuthAdminProcessor
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import TopicConfig
from finchmq.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    PullMessageRequestHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeaderV2,
    UpdateConsumerOffsetRequestHeader,
)
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import (
    ExecutorName,
    LocalChannel,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RequestDispatcher,
    RequestExecutor,
    handles,
)
from tests.broker.conftest import small_store_config

PROCESSORS: tuple[type[BrokerProcessor], ...] = (
    SendMessageProcessor,
    PullMessageProcessor,
    QueryMessageProcessor,
    ClientManageProcessor,
    ConsumerManageProcessor,
    AdminBrokerProcessor,
    EndTransactionProcessor,
    RecallMessageProcessor,
    QueryAssignmentProcessor,
    # 5.x: POP
    PopMessageProcessor,
    AckMessageProcessor,
    ChangeInvisibleTimeProcessor,
    PeekMessageProcessor,
    NotificationProcessor,
    PollingInfoProcessor,
    # 5.x: ACL 2.0's users and ACLs
    AuthAdminProcessor,
)


@pytest.fixture
async def context(tmp_path: Path) -> AsyncIterator[BrokerContext]:
    server = RemotingServer(RemotingServerConfig(listen_port=0), name="unit")  # never started
    spawned: list[object] = []
    broker2client = Broker2Client(server, lambda coro, name: spawned.append(coro.close()))
    ctx = build_broker_context(BrokerConfig(), small_store_config(tmp_path), broker2client)
    ctx.store.load()
    ctx.store.start()
    ctx.put_service.start()
    try:
        yield ctx
    finally:
        ctx.put_service.close()
        ctx.store.shutdown()


def _peer() -> RemotingContext:
    """A request's origin: a channel that never saw a socket."""
    return RemotingContext(LocalChannel(RequestDispatcher(), "127.0.0.1:40001"))


def _send_request(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=None, reconsume_times=None,
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body)


def test_every_claimed_code_has_exactly_one_handler() -> None:
    owners: dict[int, str] = {}
    for processor in PROCESSORS:
        assert processor.handlers, f"{processor.__name__} handles nothing"
        for code, (method, executor) in processor.handlers.items():
            assert code not in owners, f"code {code}: {owners.get(code)} and {processor.__name__}.{method}"
            owners[code] = f"{processor.__name__}.{method}"
            assert callable(getattr(processor, method))
            assert executor is None or isinstance(executor, ExecutorName)
    for code in (
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.PULL_MESSAGE,
        RequestCode.HEART_BEAT,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    ):
        assert code in owners


def test_a_code_handled_twice_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match="handled by"):

        class Twice(BrokerProcessor):
            executor = ExecutorName.ADMIN

            @handles(RequestCode.GET_MAX_OFFSET)
            def one(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
                return request.make_response(ResponseCode.SUCCESS)

            @handles(RequestCode.GET_MAX_OFFSET)
            def two(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
                return request.make_response(ResponseCode.SUCCESS)


async def test_the_controller_registers_every_code_from_the_tables(tmp_path: Path) -> None:
    controller = BrokerController(BrokerConfig(listen_port=0), small_store_config(tmp_path))
    dispatcher = controller.server.dispatcher
    for processor in PROCESSORS:
        for code, executor in processor.executors_by_code().items():
            registered, registered_executor = dispatcher._routes[code]
            assert type(registered) is processor
            assert registered_executor.name == executor
    assert dispatcher._routes[RequestCode.HEART_BEAT][1].name is ExecutorName.HEARTBEAT
    assert dispatcher._routes[RequestCode.UNREGISTER_CLIENT][1].name is ExecutorName.CLIENT_MANAGE
    claimed = {code for processor in PROCESSORS for code in processor.handlers}
    assert dispatcher.codes == claimed
    # the VIP channel: everything but the pull executor's codes (Java's fast remoting server)
    pull_codes = {c for p in PROCESSORS for c, e in p.executors_by_code().items() if e is ExecutorName.PULL}
    assert pull_codes and controller.fast_server.dispatcher.codes == claimed - pull_codes


async def test_unknown_code_is_answered_not_supported(context: BrokerContext) -> None:
    reply = await AdminBrokerProcessor(context).process_request(_peer(), RemotingCommand.request(9999, {}))
    assert reply is not None and reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_send_then_pull_then_offsets_on_a_store_in_tmp_path(context: BrokerContext) -> None:
    context.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="unit_t", read_queue_nums=2, write_queue_nums=2)
    )
    send = SendMessageProcessor(context)
    sent = await send.process_request(_peer(), _send_request("unit_t", b"hello"))
    assert sent is not None and sent.code == ResponseCode.SUCCESS, sent.remark
    assert sent.ext_fields["queueOffset"] == "0"

    admin = AdminBrokerProcessor(context)
    max_offset = await admin.process_request(
        _peer(),
        RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic="unit_t", queue_id=0).to_ext_fields()
        ),
    )
    assert max_offset is not None
    assert GetMaxOffsetResponseHeader.from_ext_fields(max_offset.ext_fields).offset == 1

    hold = PullRequestHoldService(
        max_offset=context.store.get_max_offset_in_queue,
        wakeup=lambda ctx, request, held_ms: None,
        long_polling_enable=False,
        short_polling_time_mills=0,
    )
    pull = PullMessageProcessor(context, hold, RequestExecutor(ExecutorName.PULL, workers=1, capacity=10))
    header = PullMessageRequestHeader(
        consumer_group="cg", topic="unit_t", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=int(PullSysFlag.SUBSCRIPTION),
        commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
    )  # fmt: skip
    pulled = await pull.process_request(
        _peer(), RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
    )
    assert pulled is not None and pulled.code == ResponseCode.SUCCESS, pulled and pulled.remark
    assert [m.body for m in decode_stored_all(pulled.body)] == [b"hello"]

    manage = ConsumerManageProcessor(context)
    commit = UpdateConsumerOffsetRequestHeader(
        consumer_group="cg", topic="unit_t", queue_id=0, commit_offset=1
    )
    await manage.process_request(
        _peer(), RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, commit.to_ext_fields())
    )
    query = QueryConsumerOffsetRequestHeader(consumer_group="cg", topic="unit_t", queue_id=0)
    answer = await manage.process_request(
        _peer(), RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, query.to_ext_fields())
    )
    assert answer is not None and answer.ext_fields["offset"] == "1"


async def test_send_to_a_missing_queue_is_refused(context: BrokerContext) -> None:
    context.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="unit_q", read_queue_nums=1, write_queue_nums=1)
    )
    reply = await SendMessageProcessor(context).process_request(
        _peer(), _send_request("unit_q", b"x", queue_id=7)
    )
    assert reply is not None and reply.code == ResponseCode.SYSTEM_ERROR
    assert "queueId" in reply.remark


async def test_runtime_info_and_config_updates_come_from_the_context(context: BrokerContext) -> None:
    async def update(properties: object) -> dict[str, str]:
        return {"unknownKey": "1"}

    context.runtime_info = lambda: {"putTps": "1.00"}
    context.update_config = update
    admin = AdminBrokerProcessor(context)
    info = await admin.process_request(
        _peer(), RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    )
    assert info is not None and b"putTps" in info.body
    updated = await admin.process_request(
        _peer(), RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"unknownKey=1\n")
    )
    assert updated is not None and updated.code == ResponseCode.SUCCESS
