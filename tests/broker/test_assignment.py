"""QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE, GET_ALL_MESSAGE_REQUEST_MODE (Java 5.x
``QueryAssignmentProcessor``): the processor on a context over a store in ``tmp_path`` (its
contracts, Java's ``allocate4Pop``, what ``messageRequestMode.json`` holds and that it survives a
restart), and a real broker that asks its name server for the cluster's queues."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from finchmq.broker import BrokerConfig
from finchmq.broker.broker2client import Broker2Client
from finchmq.broker.client_manager import ClientChannelInfo
from finchmq.broker.context import BrokerContext, build_broker_context
from finchmq.broker.processor import QueryAssignmentProcessor
from finchmq.broker.processor.assignment import allocate_for_pop
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.allocate import AllocateMessageQueueAveragely
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageRequestMode,
    MessageRequestModeSerializeWrapper,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
    TopicConfig,
)
from finchmq.protocol.codes import LanguageCode
from finchmq.protocol.message import MessageQueue
from finchmq.remoting import (
    LocalChannel,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RequestDispatcher,
)
from finchmq.testing import EmbeddedServer
from tests.waiting import eventually

from .conftest import Broker, small_store_config

AVG = AllocateMessageQueueAveragely()


def _context(root: Path, **config: object) -> BrokerContext:
    server = RemotingServer(RemotingServerConfig(listen_port=0), name="unit")  # never started
    broker2client = Broker2Client(server, lambda coro, name: coro.close())
    return build_broker_context(BrokerConfig(**config), small_store_config(root), broker2client)  # type: ignore[arg-type]


@pytest.fixture
async def context(tmp_path: Path) -> AsyncIterator[BrokerContext]:
    ctx = _context(tmp_path)
    ctx.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="T", read_queue_nums=4, write_queue_nums=4)
    )
    yield ctx


def _peer(port: int = 40001) -> RemotingContext:
    return RemotingContext(LocalChannel(RequestDispatcher(), f"127.0.0.1:{port}"))


def _join(ctx: BrokerContext, group: str, *client_ids: str) -> None:
    for i, client_id in enumerate(client_ids):
        info = ClientChannelInfo(
            channel=LocalChannel(RequestDispatcher(), f"127.0.0.1:{41000 + i}"),
            client_id=client_id,
            language=LanguageCode.PYTHON,
            version=0,
            client_addr=f"127.0.0.1:{41000 + i}",
            last_update_timestamp=int(time.time() * 1000),
        )
        ctx.consumer_manager.register_consumer(
            group,
            info,
            ConsumeType.CONSUME_PASSIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            [],
            notify=False,
        )


async def _query(
    ctx: BrokerContext,
    topic: str,
    group: str,
    client_id: str,
    *,
    model: MessageModel = MessageModel.CLUSTERING,
    strategy: str = "AVG",
) -> dict[MessageQueue, MessageRequestMode] | None:
    body = QueryAssignmentRequestBody(
        topic=topic, consumer_group=group, client_id=client_id, strategy_name=strategy, message_model=model
    )
    request = RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, None, body.to_json())
    reply = await QueryAssignmentProcessor(ctx).process_request(_peer(), request)
    assert reply is not None and reply.code == ResponseCode.SUCCESS, reply and reply.remark
    answer = QueryAssignmentResponseBody.from_json(reply.body).message_queue_assignments
    if answer is None:
        return None
    return {a.message_queue: a.mode for a in answer if a.message_queue is not None}


async def _set_mode(
    ctx: BrokerContext, topic: str, group: str, mode: MessageRequestMode, share: int = 0
) -> RemotingCommand:
    body = SetMessageRequestModeRequestBody(
        topic=topic, consumer_group=group, mode=mode, pop_share_queue_num=share
    )
    request = RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None, body.to_json())
    reply = await QueryAssignmentProcessor(ctx).process_request(_peer(), request)
    assert reply is not None
    return reply


def _queues(topic: str, broker: str, n: int) -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


# -- allocate4Pop ---------------------------------------------------------------------------------


def test_pop_without_sharing_gives_every_member_queue_minus_one_of_every_broker() -> None:
    mq_all = _queues("T", "a", 4) + _queues("T", "b", 4)
    for share in (-1, 0, 2):  # 2 >= members - 1
        got = allocate_for_pop(AVG, "g", "c1", mq_all, ["c0", "c1", "c2"], share)
        assert set(got) == {MessageQueue("T", "a", -1), MessageQueue("T", "b", -1)}


def test_pop_sharing_adds_the_shares_of_the_next_members() -> None:
    mq_all = _queues("T", "a", 8)
    cids = ["c0", "c1", "c2", "c3"]
    # AVG: c0 [0 1], c1 [2 3], c2 [4 5], c3 [6 7]; c3 shares with the next one, c0 (wrapping)
    assert allocate_for_pop(AVG, "g", "c3", mq_all, cids, 1) == [mq_all[6], mq_all[7], mq_all[0], mq_all[1]]
    # an unknown member gets its (empty) share and nothing else
    assert allocate_for_pop(AVG, "g", "zz", mq_all, cids, 1) == []


def test_pop_with_more_members_than_queues_gives_one_queue_each_round_robin() -> None:
    mq_all = _queues("T", "a", 2)
    cids = ["c0", "c1", "c2", "c3", "c4"]
    assert [allocate_for_pop(AVG, "g", c, mq_all, cids, 1) for c in cids] == [
        [mq_all[0]], [mq_all[1]], [mq_all[0]], [mq_all[1]], [mq_all[0]]
    ]  # fmt: skip
    assert allocate_for_pop(AVG, "g", "zz", mq_all, cids, 1) == []


# -- the processor ----------------------------------------------------------------------------------


async def test_pull_by_default_divided_as_the_clients_would(context: BrokerContext) -> None:
    _join(context, "g", "c0", "c1")
    first = await _query(context, "T", "g", "c0")
    second = await _query(context, "T", "g", "c1")
    assert first == dict.fromkeys(_queues("T", "broker-a", 2), MessageRequestMode.PULL)
    assert second == dict.fromkeys(_queues("T", "broker-a", 4)[2:], MessageRequestMode.PULL)
    circle = await _query(context, "T", "g", "c0", strategy="AVG_BY_CIRCLE")
    assert circle is not None and set(circle) == {
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 2),
    }


async def test_pop_mode_set_for_a_group_and_topic(context: BrokerContext, tmp_path: Path) -> None:
    _join(context, "g", "c0", "c1")
    reply = await _set_mode(context, "T", "g", MessageRequestMode.POP)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    # answered only once on disk, in Java's form
    saved = json.loads((tmp_path / "config" / "messageRequestMode.json").read_bytes())
    assert saved == {
        "messageRequestModeMap": {
            "T": {"g": {"consumerGroup": "g", "mode": "POP", "popShareQueueNum": 0, "topic": "T"}}
        }
    }
    assert await _query(context, "T", "g", "c0") == {
        MessageQueue("T", "broker-a", -1): MessageRequestMode.POP
    }
    # another group, and the group's retry topic, keep pulling
    _join(context, "other", "c0")
    assert set((await _query(context, "T", "other", "c0") or {}).values()) == {MessageRequestMode.PULL}
    context.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="%RETRY%g", read_queue_nums=1, write_queue_nums=1)
    )
    assert await _query(context, "%RETRY%g", "g", "c0") == {
        MessageQueue("%RETRY%g", "broker-a", 0): MessageRequestMode.PULL
    }
    # and with a share, each member its share plus the next one's
    _join(context, "g4", "c0", "c1", "c2", "c3")
    assert (await _set_mode(context, "T", "g4", MessageRequestMode.POP, share=1)).code == ResponseCode.SUCCESS
    assert set(await _query(context, "T", "g4", "c3") or {}) == {
        MessageQueue("T", "broker-a", 3),
        MessageQueue("T", "broker-a", 0),
    }


async def test_the_default_mode_comes_from_the_broker_config(tmp_path: Path) -> None:
    ctx = _context(tmp_path, default_message_request_mode=MessageRequestMode.POP)
    ctx.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="T", read_queue_nums=2, write_queue_nums=2)
    )
    _join(ctx, "g", "c0")
    assert await _query(ctx, "T", "g", "c0") == {MessageQueue("T", "broker-a", -1): MessageRequestMode.POP}


async def test_the_modes_survive_a_restart(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="T", read_queue_nums=2, write_queue_nums=2)
    )
    assert (await _set_mode(ctx, "T", "g", MessageRequestMode.POP, 3)).code == ResponseCode.SUCCESS
    again = _context(tmp_path)
    assert again.message_request_mode_manager.load()
    found = again.message_request_mode_manager.get_message_request_mode("T", "g")
    assert found == SetMessageRequestModeRequestBody(
        topic="T", consumer_group="g", mode=MessageRequestMode.POP, pop_share_queue_num=3
    )
    reply = await QueryAssignmentProcessor(again).process_request(
        _peer(), RemotingCommand.request(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, {})
    )
    assert reply is not None and reply.code == ResponseCode.SUCCESS
    table = MessageRequestModeSerializeWrapper.from_json(reply.body).message_request_mode_map
    assert table == {"T": {"g": found}}


async def test_set_mode_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    ctx = _context(tmp_path, auto_create_subscription_group=False)
    ctx.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="T", read_queue_nums=2, write_queue_nums=2)
    )
    retry = await _set_mode(ctx, "%RETRY%g", "g", MessageRequestMode.POP)
    assert (retry.code, retry.remark) == (
        ResponseCode.NO_PERMISSION,
        "retry topic is not allowed to set mode",
    )
    missing = await _set_mode(ctx, "Nope", "g", MessageRequestMode.POP)
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")
    no_group = await _set_mode(ctx, "T", "g", MessageRequestMode.POP)
    assert (no_group.code, no_group.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "subscription group does not exist",
    )
    assert ctx.message_request_mode_manager.message_request_mode_map == {}


async def test_no_assignment_when_the_broker_cannot_tell(context: BrokerContext) -> None:
    # unknown topic, unknown group, unknown strategy: null (the client keeps what it has)
    _join(context, "g", "c0")
    assert await _query(context, "Nope", "g", "c0") is None
    assert await _query(context, "T", "nobody", "c0") is None
    assert await _query(context, "T", "g", "c0", strategy="CONSISTENT_HASH") is None
    # a client that is not a member: an empty assignment (it gives its queues up)
    assert await _query(context, "T", "g", "stranger") == {}
    # broadcasting: everything, whoever asks
    every = await _query(context, "T", "nobody", "c9", model=MessageModel.BROADCASTING)
    assert every is not None and set(every) == set(_queues("T", "broker-a", 4))


async def test_server_load_balancer_off_gives_everyone_everything(tmp_path: Path) -> None:
    ctx = _context(tmp_path, server_load_balancer_enable=False)
    ctx.topic_config_manager.update_topic_config(
        TopicConfig(topic_name="T", read_queue_nums=3, write_queue_nums=3)
    )
    assert set(await _query(ctx, "T", "nobody", "c0") or {}) == set(_queues("T", "broker-a", 3))


# -- a real broker: the cluster's queues come from the name server ----------------------------------


async def test_the_broker_assigns_the_queues_its_name_server_routes(broker: Broker) -> None:
    server: EmbeddedServer = broker.server
    topic, group = f"assign_{time.monotonic_ns()}", f"g_{time.monotonic_ns()}"
    create = {"topic": topic, "readQueueNums": "3", "writeQueueNums": "3", "perm": "6", "topicFilterType": "SINGLE_TAG",
              "topicSysFlag": "0", "order": "false", "defaultTopic": "TBW102"}  # fmt: skip
    created = await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
    assert created.code == ResponseCode.SUCCESS, created.remark
    assert (await broker.heartbeat("c0", group, {topic: "*"})).code == ResponseCode.SUCCESS
    body = QueryAssignmentRequestBody(
        topic=topic,
        consumer_group=group,
        client_id="c0",
        strategy_name="AVG",
        message_model=MessageModel.CLUSTERING,
    )

    async def assigned() -> set[MessageQueue]:
        reply = await broker.call(RequestCode.QUERY_ASSIGNMENT, body=body.to_json())
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        answer = QueryAssignmentResponseBody.from_json(reply.body).message_queue_assignments or ()
        return {a.message_queue for a in answer if a.message_queue is not None}

    # the topic reaches the name server with the broker's next registration
    got = await eventually(assigned, what=f"the name server routes {topic}")
    name = server.broker.config.broker_name if server.broker is not None else "broker-a"
    assert got == set(_queues(topic, name, 3))
    mode = SetMessageRequestModeRequestBody(topic=topic, consumer_group=group, mode=MessageRequestMode.POP)
    reply = await broker.call(RequestCode.SET_MESSAGE_REQUEST_MODE, body=mode.to_json())
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert await assigned() == {MessageQueue(topic, name, -1)}
