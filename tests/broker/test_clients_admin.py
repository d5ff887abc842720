"""Client registry, the broker's calls to clients, queue locks and the admin requests."""

from __future__ import annotations

from finchmq.common import parse_properties
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    ConsumerConnection,
    ConsumerListByGroupResponseBody,
    ConsumerRunningInfo,
    ConsumeStats,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    TopicStatsTable,
)
from finchmq.protocol.message import MessageQueue
from finchmq.remoting import (
    ExecutorName,
    RemotingClient,
    RemotingContext,
    RequestExecutor,
    RequestProcessor,
    handles,
)
from tests.client.conftest import TEST_BROKER
from tests.waiting import eventually

from .conftest import Broker


class Recorder(RequestProcessor):
    """A client-side processor that records the requests of ``code`` a broker sends a client
    (and answers the others too, as a client does)."""

    executor = ExecutorName.CLIENT

    def __init__(self, code: int, answer: bytes = b"") -> None:
        super().__init__()
        self.code = code
        self.seen: list[RemotingCommand] = []
        self.answer = answer

    @handles(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
    )
    def record(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == self.code:
            self.seen.append(request)
        return request.make_response(ResponseCode.SUCCESS, body=self.answer)

    async def received(self, count: int, what: str) -> RemotingCommand:
        """The ``count``-th request the broker sent (waiting for it); notifications all look
        alike, so they are told apart by how many came."""
        await eventually(lambda: len(self.seen) >= count, what=what)
        return self.seen[count - 1]


def recording_client(recorder: Recorder) -> RemotingClient:
    client = RemotingClient()
    executor = RequestExecutor(ExecutorName.CLIENT, workers=1, capacity=100)
    client.register_processor(recorder, {ExecutorName.CLIENT: executor})
    return client


async def test_heartbeat_registers_consumers_and_notifies_the_group(broker: Broker) -> None:
    await broker.send("T_grp", b"x")
    recorder = Recorder(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    first = recording_client(recorder)
    second = RemotingClient()
    try:
        assert (
            await broker.heartbeat("c1@host", "G1", {"T_grp": "*"}, client=first)
        ).code == ResponseCode.SUCCESS
        # Every member is told of every change, the one that joined too (Java's listener).
        await recorder.received(1, "c1 told of its own joining")
        listed = await broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})
        assert ConsumerListByGroupResponseBody.from_json(listed.body).consumer_id_list == ("c1@host",)
        # The retry topic exists and is routable at once (the C++ client needs it for retries).
        route = await broker.call(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%G1"}, addr=broker.server.namesrv_addr
        )
        assert route.code == ResponseCode.SUCCESS
        assert [q.read_queue_nums for q in TopicRouteData.from_json(route.body).queue_datas] == [1]
        await broker.heartbeat("c2@host", "G1", {"T_grp": "*"}, client=second)
        notify = await recorder.received(2, "c1 told that c2 joined")
        assert notify.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and notify.ext_fields == {
            "consumerGroup": "G1"
        }
        assert notify.is_oneway
        listed = await broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})
        assert sorted(ConsumerListByGroupResponseBody.from_json(listed.body).consumer_id_list) == [
            "c1@host",
            "c2@host",
        ]
        connections = await broker.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G1"})
        conn = ConsumerConnection.from_json(connections.body)
        assert sorted(c.client_id for c in conn.connection_set) == ["c1@host", "c2@host"]
        assert set(conn.subscription_table) == {"T_grp"}
        # The second consumer leaves: the first is told again (once the broker has dropped it), the
        # list shrinks.
        await second.close()
        await recorder.received(3, "c1 told that c2 left")
        listed = await broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})
        assert ConsumerListByGroupResponseBody.from_json(listed.body).consumer_id_list == ("c1@host",)
        await first.invoke(
            broker.addr,
            RemotingCommand.request(
                RequestCode.UNREGISTER_CLIENT, {"clientID": "c1@host", "consumerGroup": "G1"}
            ),
            3000,
        )
        listed = await broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})
        assert listed.code == ResponseCode.SYSTEM_ERROR and listed.remark == "no consumer for this group, G1"
    finally:
        await first.close()
        await second.close()


async def test_reset_offset_is_computed_committed_and_sent_to_clients(broker: Broker) -> None:
    for i in range(6):
        await broker.send("T_reset", f"m{i}".encode(), queue_id=0)
    q = {"consumerGroup": "G_reset", "topic": "T_reset", "queueId": "0", "commitOffset": "6"}
    await broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, q)
    recorder = Recorder(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
    client = recording_client(recorder)
    try:
        await broker.heartbeat("c@host", "G_reset", {"T_reset": "*"}, client=client)
        response = await broker.call(
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            {"topic": "T_reset", "group": "G_reset", "timestamp": "0", "isForce": "true"},
        )
        assert response.code == ResponseCode.SUCCESS
        table = ResetOffsetBody.from_json(response.body).offset_table
        assert table[MessageQueue("T_reset", "broker-a", 0)] == 0
        reset = await recorder.received(1, "the client told to reset its offsets")
        assert reset.ext_fields["group"] == "G_reset" and reset.ext_fields["topic"] == "T_reset"
        assert ResetOffsetBody.from_json(reset.body).offset_table[MessageQueue("T_reset", "broker-a", 0)] == 0
        query = await broker.call(
            RequestCode.QUERY_CONSUMER_OFFSET, {k: q[k] for k in ("consumerGroup", "topic", "queueId")}
        )
        assert query.ext_fields == {"offset": "0"}, "the broker's own table is reset too"
    finally:
        await client.close()


async def test_consumer_running_info_is_forwarded_to_the_client(broker: Broker) -> None:
    answer = ConsumerRunningInfo(properties={"consumeThreadMin": "20"}).to_json()
    recorder = Recorder(RequestCode.GET_CONSUMER_RUNNING_INFO, answer=answer)
    client = recording_client(recorder)
    try:
        await broker.heartbeat("ci@host", "G_info", {"T_info": "*"}, client=client)
        response = await broker.call(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": "G_info", "clientId": "ci@host", "jstackEnable": "false"},
        )
        assert response.code == ResponseCode.SUCCESS
        assert ConsumerRunningInfo.from_json(response.body).properties == {"consumeThreadMin": "20"}
        absent = await broker.call(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": "G_info", "clientId": "nobody", "jstackEnable": "false"},
        )
        assert absent.code == ResponseCode.SYSTEM_ERROR and "not online" in (absent.remark or "")
    finally:
        await client.close()


async def test_queue_locks_are_exclusive_and_renewable(broker: Broker) -> None:
    mqs = tuple(MessageQueue("T_lock", "broker-a", i) for i in range(3))

    async def lock(client_id: str, queues: tuple[MessageQueue, ...]) -> set[MessageQueue]:
        body = LockBatchRequestBody(consumer_group="G_lock", client_id=client_id, mq_set=queues).to_json()
        response = await broker.call(RequestCode.LOCK_BATCH_MQ, body=body)
        return set(LockBatchResponseBody.from_json(response.body).lock_ok_mq_set)

    assert await lock("a", mqs[:2]) == set(mqs[:2])
    assert await lock("b", mqs) == {mqs[2]}, "a queue is never locked by two clients"
    assert await lock("a", mqs[:2]) == set(mqs[:2]), "the owner renews"
    body = LockBatchRequestBody(consumer_group="G_lock", client_id="a", mq_set=mqs[:1]).to_json()
    assert (await broker.call(RequestCode.UNLOCK_BATCH_MQ, body=body)).code == ResponseCode.SUCCESS
    assert await lock("b", mqs) == {mqs[0], mqs[2]}


async def test_topic_and_group_admin(broker: Broker) -> None:
    create = {
        "topic": "T_admin", "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
    }  # fmt: skip
    assert (await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)).code == ResponseCode.SUCCESS

    async def routed() -> RemotingCommand | None:  # the broker registers the topic in the background
        route = await broker.call(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T_admin"}, addr=broker.server.namesrv_addr
        )
        return route if route.code == ResponseCode.SUCCESS else None

    route = await eventually(routed, what="the route of T_admin on the name server")
    assert TopicRouteData.from_json(route.body).queue_datas[0].write_queue_nums == 3
    configs = TopicConfigSerializeWrapper.from_json(
        (await broker.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body
    )
    assert configs.topic_config_table["T_admin"].read_queue_nums == 3
    bad = await broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "topic": "DefaultCluster"})
    assert bad.code == ResponseCode.SYSTEM_ERROR and "conflict with system reserved words" in (
        bad.remark or ""
    )

    for i in range(4):
        await broker.send("T_admin", f"m{i}".encode(), queue_id=i % 2)
    stats = TopicStatsTable.from_json(
        (await broker.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "T_admin"})).body
    )
    assert {mq.queue_id: o.max_offset for mq, o in stats.offset_table.items()} == {0: 2, 1: 2, 2: 0}
    await broker.call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "G_admin", "topic": "T_admin", "queueId": "0", "commitOffset": "1"},
    )
    consume = ConsumeStats.from_json(
        (
            await broker.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G_admin", "topic": "T_admin"})
        ).body
    )
    assert consume.compute_total_diff() == 3  # lag: 1 on queue 0, 2 on queue 1

    group = SubscriptionGroupConfig(group_name="G_admin", retry_max_times=3)
    assert (
        await broker.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.to_json())
    ).code == 0
    groups = SubscriptionGroupWrapper.from_json(
        (await broker.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body
    )
    assert groups.subscription_group_table["G_admin"].retry_max_times == 3
    assert (await broker.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G_admin"})).code == 0
    groups = SubscriptionGroupWrapper.from_json(
        (await broker.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body
    )
    assert "G_admin" not in groups.subscription_group_table

    assert (
        await broker.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T_admin"})
    ).code == ResponseCode.SUCCESS
    configs = TopicConfigSerializeWrapper.from_json(
        (await broker.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body
    )
    assert "T_admin" not in configs.topic_config_table
    assert (
        await broker.call(RequestCode.GET_MAX_OFFSET, {"topic": "T_admin", "queueId": "0"})
    ).ext_fields == {"offset": "0"}


async def test_broker_config_and_runtime_info(broker: Broker) -> None:
    config = await broker.call(RequestCode.GET_BROKER_CONFIG)
    values = parse_properties(config.body.decode())
    assert values["brokerName"] == "broker-a" and values["longPollingEnable"] == "true"
    assert values["mappedFileSizeCommitLog"] == TEST_BROKER["mappedFileSizeCommitLog"]
    update = await broker.call(
        RequestCode.UPDATE_BROKER_CONFIG, body=b"waitTimeMillsInSendQueue=1234\nlongPollingEnable=false\n"
    )
    assert update.code == ResponseCode.SUCCESS
    values = parse_properties((await broker.call(RequestCode.GET_BROKER_CONFIG)).body.decode())
    assert values["waitTimeMillsInSendQueue"] == "1234" and values["longPollingEnable"] == "false"
    assert (
        broker.server.broker is not None
        and broker.server.broker.pull_hold_service.long_polling_enable is False
    )
    bad = await broker.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"waitTimeMillsInSendQueue=soon\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "waitTimeMillsInSendQueue" in (bad.remark or "")
    info = KVTable.from_json((await broker.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
    assert info["brokerVersionDesc"] == "V4_9_8"
    assert {
        "putTps",
        "sendThreadPoolQueueSize",
        "pageCacheLockTimeMills",
        "dispatchBehindBytes",
    } <= info.keys()
