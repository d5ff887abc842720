"""finchmq's bodies, byte for byte against the bytes Apache RocketMQ 4.9.8 (fastjson 1.2.69) writes for
the same values: ``data/java/bodies/*.json``, recorded by ``record_java_bodies.py`` from
``java/GoldenBodies.java``. Each finchmq body below is built with the values (and insertion order)
the Java program uses. ``*.default`` is Java's ``encode()``; ``*.standard`` is the route form the
4.9.4+ name server writes (BrowserCompatible, MapSortField)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from finchmq.client import AdminClient
from finchmq.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol._json import java_string_hash
from finchmq.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    Connection,
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ConsumeType,
    DataVersion,
    KVTable,
    LockBatchResponseBody,
    MessageModel,
    OffsetWrapper,
    QueueData,
    RemotingSerializable,
    ResetOffsetBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
)
from finchmq.protocol.message import MessageQueue
from finchmq.remoting import RemotingClient
from finchmq.testing.process import ServerProcess
from tests.client.conftest import TEST_BROKER

GOLDEN = Path(__file__).parent / "data" / "java" / "bodies"
LIVE = Path(__file__).parent / "data" / "java" / "live"  # the Java name server's answers (tests/java)


def broker(cluster: str, name: str, *ids: int) -> BrokerData:
    return BrokerData(
        cluster=cluster, broker_name=name, broker_addrs={i: f"10.0.0.{i + 1}:10911" for i in ids}
    )


def queue(name: str, queues: int, perm: int) -> QueueData:
    return QueueData(
        broker_name=name, read_queue_nums=queues, write_queue_nums=queues, perm=perm, topic_sys_flag=0
    )


ROUTE = TopicRouteData(
    queue_datas=(queue("broker-b", 8, 6), queue("broker-a", 4, 6)),
    broker_datas=(broker("DefaultCluster", "broker-b", 0, 1, 2), broker("DefaultCluster", "broker-a", 0, 3)),
    filter_server_table={},
)
ROUTE_ORDER_FILTER = TopicRouteData(
    order_topic_conf="broker-a:4;broker-b:8",
    queue_datas=ROUTE.queue_datas,
    broker_datas=ROUTE.broker_datas,
    filter_server_table={"10.0.0.1:10911": ("10.0.0.9:30000",)},
)
ROUTE_ESCAPES = TopicRouteData(
    queue_datas=(queue("broker-a", 4, 6),),
    broker_datas=(
        BrokerData(
            cluster="C",
            broker_name="b",
            broker_addrs={0: 'héllo\t"quoted" \u2028 / < > 集', 9007199254740993: "big-id"},
        ),
    ),
    filter_server_table={},
)


def cluster_info() -> ClusterInfo:
    layout = [
        ("DefaultCluster", "broker-a"),
        ("DefaultCluster", "broker-b"),
        ("OtherCluster", "broker-c"),
        ("DefaultCluster", "broker-zz"),
        ("Ünïcode-集群", "broker-ü"),
    ]
    brokers: dict[str, BrokerData] = {}
    clusters: dict[str, list[str]] = {}
    for i, (cluster, name) in enumerate(layout, start=1):
        brokers[name] = broker(cluster, name, 0, i)
        clusters.setdefault(cluster, []).append(name)
    return ClusterInfo(
        broker_addr_table=brokers, cluster_addr_table={c: tuple(names) for c, names in clusters.items()}
    )


TOPICS = ("TBW102", "SELF_TEST_TOPIC", "%RETRY%group_1", "OFFSET_MOVED_EVENT", "orders", "DefaultCluster",
          "broker-a", "SCHEDULE_TOPIC_XXXX", "payments-eu", "RMQ_SYS_TRACE_TOPIC")  # fmt: skip
KV_KEYS = ("brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning", "putTps", "getTransferedTps",
           "commitLogDiskRatio", "sendThreadPoolQueueHeadWaitTimeMills", "bootTimestamp", "earliestMessageTimeStamp",
           "dispatchBehindBytes", "pageCacheLockTimeMills", "runtime", "commitLogMaxOffset", "commitLogMinOffset",
           "remainHowManyDataToFlush", "EndTransactionQueueSize")  # fmt: skip
TOPIC_CONFIGS = ("orders", "TBW102", "payments-eu", "%RETRY%g1", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a",
                 "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "RMQ_SYS_TRACE_TOPIC", "t1", "t2")  # fmt: skip
VERSION = DataVersion(timestamp=1700000000123, counter=7)


def consume_stats() -> ConsumeStats:
    table = {
        MessageQueue("orders" if q % 2 == 0 else "%RETRY%g", f"broker-{'abc'[q % 3]}", q): OffsetWrapper(
            broker_offset=1000 + q, consumer_offset=900 + q, last_timestamp=1700000000000 + q
        )
        for q in range(6)
    }
    return ConsumeStats(offset_table=table, consume_tps=12.5)


def consumer_connection() -> ConsumerConnection:
    tags = ("TagA", "TagB", "集")
    subscription = {
        topic: SubscriptionData(
            topic=topic, sub_string="TagA || TagB || 集", tags_set=tags,
            code_set=tuple(java_string_hash(t) for t in tags), sub_version=1700000000000,
        )
        for topic in ("orders", "%RETRY%g1", "payments-eu")
    }  # fmt: skip
    return ConsumerConnection(
        connection_set=(
            Connection(
                client_id="10.0.0.7@12345",
                client_addr="10.0.0.7:50000",
                language=LanguageCode.PYTHON,
                version=409,
            ),
        ),
        subscription_table=subscription,
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )


BODIES: dict[str, Callable[[], RemotingSerializable]] = {
    "consumer_connection": consumer_connection,
    "route": lambda: ROUTE,
    "route_order_filter": lambda: ROUTE_ORDER_FILTER,
    "route_escapes": lambda: ROUTE_ESCAPES,
    "cluster_info": cluster_info,
    "topic_list": lambda: TopicList(topic_list=TOPICS),
    "topic_list_with_addr": lambda: TopicList(topic_list=TOPICS, broker_addr="10.0.0.1:10911"),
    "kv_table": lambda: KVTable(table={k: str(len(k)) for k in KV_KEYS}),
    "consume_stats": consume_stats,
    "topic_stats": lambda: TopicStatsTable(
        offset_table={
            MessageQueue("orders", "broker-a", q): TopicOffset(
                min_offset=q, max_offset=100 + q, last_update_timestamp=1700000000000 + q
            )
            for q in range(4)
        }
    ),
    "lock_batch_response": lambda: LockBatchResponseBody(
        lock_ok_mq_set=tuple(MessageQueue("orders", "broker-a", q) for q in range(5))
    ),
    "consumer_offsets": lambda: ConsumerOffsetSerializeWrapper(
        offset_table={
            key: {q: 10 * q + len(key) for q in range(4)}
            for key in ("orders@g1", "%RETRY%g1@g1", "payments@g2")
        }
    ),
    "reset_offset": lambda: ResetOffsetBody(
        offset_table={MessageQueue("orders", "broker-a", q): 50 + q for q in range(3)}
    ),
    "topic_config_wrapper": lambda: TopicConfigSerializeWrapper(
        topic_config_table={
            t: TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4, perm=6) for t in TOPIC_CONFIGS
        },
        data_version=VERSION,
    ),
    "subscription_group_wrapper": lambda: SubscriptionGroupWrapper(
        subscription_group_table={
            g: SubscriptionGroupConfig(group_name=g) for g in ("g1", "TOOLS_CONSUMER", "payments-group")
        },
        data_version=VERSION,
    ),
    "data_version": lambda: VERSION,
}

CASES = sorted(p.name.removesuffix(".json") for p in GOLDEN.glob("*.json"))


def test_every_recorded_body_has_a_case() -> None:
    assert CASES, f"no goldens in {GOLDEN}"
    assert {case.split(".")[0] for case in CASES} == set(BODIES)


@pytest.mark.parametrize("case", CASES)
def test_bytes_are_what_java_writes(case: str) -> None:
    name, form = case.split(".")
    body = BODIES[name]()
    expected = (GOLDEN / f"{case}.json").read_bytes()
    assert body.to_json(standard=form == "standard") == expected
    assert type(body).from_json(expected).to_json(standard=form == "standard") == expected


# -- a live name server: finchmq's answers against those recorded from Java's ------------------------


async def name_server_answers(namesrv: str, topic: str) -> dict[str, bytes]:
    """The route (for a version-1 and a version-401 client) and the cluster info, as answered."""
    answers = {}
    async with RemotingClient() as client:
        for version in (1, 401):
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, version=version
            )
            reply = await client.invoke(namesrv, request, 5000)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            answers[f"route.v{version}"] = reply.body
        reply = await client.invoke(
            namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 5000
        )
        answers["cluster_info"] = reply.body
    return answers


def masked(body: bytes) -> bytes:
    return re.sub(rb"127\.0\.0\.1:\d+", b"ADDR", body)


def test_name_server_answers_match_the_recorded_java_answers() -> None:
    topic = "GoldenRouteTopic"  # as created on the Java cluster: 4 queues, perm 6, broker-a

    async def answers(namesrv: str) -> dict[str, bytes]:
        async with AdminClient(namesrv_addr=namesrv) as admin:
            await admin.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
        return await name_server_answers(namesrv, topic)

    with ServerProcess(conf=TEST_BROKER) as server:
        finch = asyncio.run(answers(server.namesrv_addr))
    assert set(finch) == {p.stem for p in LIVE.glob("*.json")}
    for name, body in finch.items():
        assert masked(body) == (LIVE / f"{name}.json").read_bytes(), name
