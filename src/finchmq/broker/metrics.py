"""``BrokerMetrics``: the broker's Prometheus figures (``metricsExporterType=PROM``), see
docs/metrics.md for the list and where each name comes from.

Strategy:
    Three sources, one exposition. (1) Java 5.x's ``BrokerMetricsManager`` names and labels
    (``rocketmq_messages_in_total``, ``rocketmq_consumer_lag_messages`` ...), each sample with
    ``cluster``, ``node_type=broker``, ``node_id`` (brokerName) and the ``metricsLabel`` pairs.
    (2) rocketmq-exporter's names where 5.x has none (``rocketmq_producer_tps``,
    ``rocketmq_group_diff``, ``rocketmq_brokeruntime_*`` ...), with the exporter's own labels.
    (3) finchmq's own ``finchmq_*`` figures: flow control by kind, store put/flush latency,
    page-cache-busy time, long-polling holds, disk use against ``diskMaxUsedSpaceRatio``.

    Almost everything is read at scrape time from state the broker keeps anyway (``BrokerStats``,
    offsets, the consume queues, the client tables, the flow-control counters). Per request,
    enabling metrics adds only: a clock read and a histogram update per answered request
    (``rocketmq_rpc_latency``), a histogram update per put (``rocketmq_message_size``, the store's
    put latency), and a counter per message sent to a DLQ.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Protocol

from finchmq.common.metrics import CONTENT_TYPE, Exposition, HistogramSet
from finchmq.protocol.bodies import MessageModel
from finchmq.protocol.codes import version_desc
from finchmq.protocol.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_HALF_TOPIC,
    is_system_topic,
)
from finchmq.remoting import ExecutorName, RemotingServer
from finchmq.remoting.metrics import RpcMetrics
from finchmq.store import SCHEDULE_TOPIC, DefaultMessageStore
from finchmq.store.config import BrokerRole

from .client_manager import ConsumerManager, ProducerManager
from .config import BrokerConfig
from .context import BrokerContext
from .flow_control import WATCHED_EXECUTORS, FlowControlCounters, overload_kind, timeout_clean_kind
from .ha import HAService
from .long_polling import PullRequestHoldService
from .offset import ConsumerOffsetManager
from .put_service import StorePutService
from .stats import BrokerStats
from .subscription_group import SubscriptionGroupManager
from .topic_config import TopicConfigManager

__all__ = ["CONTENT_TYPE", "MESSAGE_SIZE_BUCKETS", "BrokerMetrics", "is_system_group"]

# bytes: Java 5.x BrokerMetricsManager's view of rocketmq_message_size (1 KiB ... 4 MiB)
MESSAGE_SIZE_BUCKETS = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)

# Java 5.x processor label values by executor
_PROCESSORS = {
    ExecutorName.SEND: "send",
    ExecutorName.PULL: "pull",
    ExecutorName.QUERY: "query_message",
    ExecutorName.CLIENT_MANAGE: "client_manager",
    ExecutorName.HEARTBEAT: "heartbeat",
    ExecutorName.END_TRANSACTION: "transaction",
    ExecutorName.CONSUMER_MANAGE: "consumer_manager",
    ExecutorName.ADMIN: "admin",
    ExecutorName.ACK: "ack",  # 5.x
}
# Java StoreStatsService putMessageDistributeTime ranges as rocketmq-exporter names them (seconds)
_PMDT = (
    ("0ms", -1.0, 0.001),
    ("0to10ms", 0.001, 0.01),
    ("10to50ms", 0.01, 0.05),
    ("50to100ms", 0.05, 0.1),
    ("100to200ms", 0.1, 0.2),
    ("200to500ms", 0.2, 0.5),
    ("500to1s", 0.5, 1.0),
    ("1to2s", 1.0, 2.0),
    ("2to3s", 2.0, 3.0),
    ("3to4s", 3.0, 4.0),
    ("4to5s", 4.0, 5.0),
    ("5to10s", 5.0, 10.0),
    ("10stomore", 10.0, float("inf")),
)
# rocketmq-exporter rocketmq_brokeruntime_* gauges read from GET_BROKER_RUNTIME_INFO's keys
_RUNTIME_GAUGES = (
    ("msg_put_total_today_now", "msgPutTotalTodayNow"),
    ("msg_gettotal_today_now", "msgGetTotalTodayNow"),
    ("msg_puttotal_todaymorning", "msgPutTotalTodayMorning"),
    ("msg_gettotal_todaymorning", "msgGetTotalTodayMorning"),
    ("msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning"),
    ("msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning"),
    ("dispatch_behind_bytes", "dispatchBehindBytes"),
    ("put_message_size_total", "putMessageSizeTotal"),
    ("put_message_average_size", "putMessageAverageSize"),
    ("putmessage_times_total", "putMessageTimesTotal"),
    ("send_threadpool_queue_size", "sendThreadPoolQueueSize"),
    ("send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity"),
    ("send_threadpoolqueue_headwait_timemills", "sendThreadPoolQueueHeadWaitTimeMills"),
    ("pull_threadpoolqueue_size", "pullThreadPoolQueueSize"),
    ("pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity"),
    ("pull_threadpoolqueue_headwait_timemills", "pullThreadPoolQueueHeadWaitTimeMills"),
    ("query_threadpoolqueue_size", "queryThreadPoolQueueSize"),
    ("query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity"),
    ("query_threadpoolqueue_headwait_timemills", "queryThreadPoolQueueHeadWaitTimeMills"),
    ("earliest_message_timestamp", "earliestMessageTimeStamp"),
    ("start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp"),
    ("pagecache_lock_time_mills", "pageCacheLockTimeMills"),
    ("commitlog_disk_ratio", "commitLogDiskRatio"),
    ("consumequeue_disk_ratio", "consumeQueueDiskRatio"),
    ("commitlog_maxoffset", "commitLogMaxOffset"),
    ("commitlog_minoffset", "commitLogMinOffset"),
    ("remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs"),
)
# flow-control kinds shown (as 0) before they first happen, so dashboards can find them
_FLOW_CONTROL_KINDS = (
    overload_kind(ExecutorName.SEND),
    "REJECTREQUEST",
    "PCBUSY_CLEAN_QUEUE",
    "PC_SYNCHRONIZED",
    *(timeout_clean_kind(executor) for executor in WATCHED_EXECUTORS),
)


def is_system_group(group: str) -> bool:
    """Java 5.x ``BrokerMetricsManager.isSystemGroup``: a ``CID_RMQ_SYS_`` group."""
    return group.lower().startswith("cid_rmq_sys_")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _message_type(topic: str) -> str:
    """Java 5.x's message_type, read from where finchmq stores the message: delayed messages
    wait in SCHEDULE_TOPIC_XXXX, prepared transactional ones in the half topic."""
    if topic == SCHEDULE_TOPIC:
        return "delay"
    if topic == RMQ_SYS_TRANS_HALF_TOPIC:
        return "transaction"
    return "normal"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class MeteredBroker(Protocol):
    """What the metrics read of a broker (``BrokerController`` provides it)."""

    server: RemotingServer
    context: BrokerContext
    store: DefaultMessageStore
    stats: BrokerStats
    flow_control: FlowControlCounters
    put_service: StorePutService
    pull_hold_service: PullRequestHoldService
    ha_service: HAService
    topic_config_manager: TopicConfigManager
    subscription_group_manager: SubscriptionGroupManager
    consumer_offset_manager: ConsumerOffsetManager
    consumer_manager: ConsumerManager
    producer_manager: ProducerManager

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def broker_permission(self) -> int: ...
    @property
    def broker_addr(self) -> str: ...
    def runtime_info(self) -> dict[str, str]: ...


class BrokerMetrics:
    """Collects the broker's figures for ``/metrics``; ``install()`` turns on the per-request
    parts, ``write()`` adds the figures to an exposition."""

    def __init__(self, broker: MeteredBroker) -> None:
        self.broker = broker
        self.rpc = RpcMetrics()
        self.message_sizes = HistogramSet(MESSAGE_SIZE_BUCKETS)
        self.dlq_messages: Counter[tuple[str, str]] = Counter()  # (group, origin topic)

    def install(self) -> None:
        """Start counting per request: rpc latency, message sizes, store put/flush latency, DLQ sends."""
        broker = self.broker
        self.rpc.attach(broker.server.dispatcher)
        broker.stats.message_sizes = self.message_sizes
        broker.context.metrics = self
        broker.store.enable_latency_metrics()

    def record_dlq(self, group: str, topic: str) -> None:
        """A message of ``topic`` consumed by ``group`` went to the group's DLQ."""
        self.dlq_messages[group, topic] += 1

    # -- exposition -------------------------------------------------------------------------

    def common_labels(self) -> dict[str, str]:
        config = self.broker.config
        return {
            **config.metrics_labels,
            "cluster": config.broker_cluster_name,
            "node_type": "broker",
            "node_id": config.broker_name,
        }

    def write(self, out: Exposition) -> None:
        common = self.common_labels()
        self._write_broker(out, common)
        self._write_messages(out, common)
        self._write_connections(out, common)
        self._write_lag(out, common)
        self._write_store(out, common)
        self._write_timer(out, common)
        self.rpc.write(out, common)
        self._write_exporter(out)
        self._write_pop(out, common)
        self._write_finchmq(out, common)

    def _write_broker(self, out: Exposition, common: Mapping[str, str]) -> None:
        b = self.broker
        executors = b.server.dispatcher.executors
        out.gauges(
            "rocketmq_processor_watermark",
            "Request processor watermark",
            (
                ({**common, "processor": label}, len(executors[name]))
                for name, label in _PROCESSORS.items()
                if name in executors
            ),
        )
        out.gauge("rocketmq_broker_permission", "Broker permission", b.broker_permission, common)
        out.gauge(
            "rocketmq_topic_number",
            "Active topic number",
            len(b.topic_config_manager.topic_config_table),
            common,
        )
        out.gauge(
            "rocketmq_consumer_group_number",
            "Active subscription group number",
            len(b.subscription_group_manager.table),
            common,
        )

    def _write_messages(self, out: Exposition, common: Mapping[str, str]) -> None:
        stats = self.broker.stats
        ins = []
        for topic, counter in list(stats.put_by_topic.items()):
            if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                continue  # Java counts neither retries nor dead letters as incoming messages
            labels = {
                **common,
                "topic": topic,
                "message_type": _message_type(topic),
                "is_system": _bool(is_system_topic(topic)),
            }
            ins.append((labels, counter.times, counter.total))
        out.counters(
            "rocketmq_messages_in_total",
            "Total number of incoming messages",
            ((labels, times) for labels, times, _ in ins),
        )
        out.counters(
            "rocketmq_throughput_in_total",
            "Total traffic of incoming messages (bytes)",
            ((labels, size) for labels, _, size in ins),
        )
        out.declare("rocketmq_message_size", "histogram", "Incoming messages size (bytes)")
        out.histograms(
            "rocketmq_message_size",
            "Incoming messages size (bytes)",
            (
                (
                    {
                        **common,
                        "topic": topic,
                        "message_type": _message_type(topic),
                        "is_system": _bool(is_system_topic(topic)),
                    },
                    histogram,
                )
                for topic, histogram in list(self.message_sizes.by_key.items())
                if isinstance(topic, str)
                and not topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
            ),
        )
        outs = []
        for key, counter in list(stats.get_by_group_topic.items()):
            topic, _, group = key.rpartition("@")
            if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                continue
            labels = {
                **common,
                "topic": topic,
                "consumer_group": group,
                "is_system": _bool(is_system_topic(topic) or group.startswith("CID_RMQ_SYS_")),
            }
            outs.append((labels, counter.times, counter.total))
        out.counters(
            "rocketmq_messages_out_total",
            "Total number of outgoing messages",
            ((labels, times) for labels, times, _ in outs),
        )
        out.counters(
            "rocketmq_throughput_out_total",
            "Total traffic of outgoing messages (bytes)",
            ((labels, size) for labels, _, size in outs),
        )
        out.counters(
            "rocketmq_send_to_dlq_messages_total",
            "Consumer send to DLQ messages",
            (
                (
                    {
                        **common,
                        "consumer_group": group,
                        "topic": topic,
                        "is_system": _bool(is_system_topic(topic) or is_system_group(group)),
                    },
                    count,
                )
                for (group, topic), count in list(self.dlq_messages.items())
            ),
        )

    def _write_connections(self, out: Exposition, common: Mapping[str, str]) -> None:
        b = self.broker
        producers: Counter[tuple[str, str]] = Counter()
        for members in list(b.producer_manager.groups.values()):
            for info in list(members.values()):
                producers[info.language.name.lower(), version_desc(info.version).lower()] += 1
        out.gauges(
            "rocketmq_producer_connections",
            "Producer connections",
            (
                ({**common, "language": language, "version": version, "protocol_type": "remoting"}, count)
                for (language, version), count in producers.items()
            ),
        )
        consumers: Counter[tuple[str, str, str, str]] = Counter()
        for group, group_info in list(b.consumer_manager.groups.items()):
            mode = group_info.consume_type.type_cn.lower()
            for channel in list(group_info.channels.values()):
                consumers[
                    group, channel.language.name.lower(), version_desc(channel.version).lower(), mode
                ] += 1
        out.gauges(
            "rocketmq_consumer_connections",
            "Consumer connections",
            (
                (
                    {
                        **common,
                        "consumer_group": group,
                        "language": language,
                        "version": version,
                        "consume_mode": mode,
                        "protocol_type": "remoting",
                        "is_system": _bool(is_system_group(group)),
                    },
                    count,
                )
                for (group, language, version, mode), count in consumers.items()
            ),
        )

    def _queue_ids(self, topic: str) -> range:
        config = self.broker.topic_config_manager.select_topic_config(topic)
        return range(config.write_queue_nums if config is not None else 0)

    def _lag_rows(self) -> Iterator[tuple[str, str, int, int, int, int, int]]:
        """Java 5.x ``ConsumerLagCalculator`` over online groups and the topics they subscribe:
        (group, topic, lag, earliest unconsumed store time, in flight, earliest unpulled
        store time, ready)."""
        b = self.broker
        store = b.store
        offsets = b.consumer_offset_manager
        for group, info in list(b.consumer_manager.groups.items()):
            for topic in list(info.subscriptions):
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    continue
                lag = inflight = ready = 0
                earliest_unconsumed = earliest_unpulled = 0
                for queue_id in self._queue_ids(topic):
                    max_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
                    committed = offsets.query_offset(group, topic, queue_id)
                    if committed < 0:
                        committed = max_offset
                    pulled = offsets.query_pull_offset(group, topic, queue_id)
                    if pulled < 0:
                        pulled = committed
                    lag += max(max_offset - committed, 0)
                    inflight += max(pulled - committed, 0)
                    ready += max(max_offset - pulled, 0)
                    if committed < max_offset:
                        ts = store.get_message_store_timestamp(topic, queue_id, committed)
                        if ts > 0 and (not earliest_unconsumed or ts < earliest_unconsumed):
                            earliest_unconsumed = ts
                    if pulled < max_offset:
                        ts = store.get_message_store_timestamp(topic, queue_id, pulled)
                        if ts > 0 and (not earliest_unpulled or ts < earliest_unpulled):
                            earliest_unpulled = ts
                yield group, topic, lag, earliest_unconsumed, inflight, earliest_unpulled, ready

    def _write_lag(self, out: Exposition, common: Mapping[str, str]) -> None:
        now = int(time.time() * 1000)
        rows = []
        for group, topic, lag, unconsumed, inflight, unpulled, ready in self._lag_rows():
            labels = {
                **common,
                "consumer_group": group,
                "topic": topic,
                "is_retry": "false",
                "is_system": _bool(is_system_topic(topic) or is_system_group(group)),
            }
            rows.append(
                (
                    labels,
                    lag,
                    now - unconsumed if unconsumed else 0,
                    inflight,
                    now - unpulled if unpulled else 0,
                    ready,
                )
            )
        out.gauges("rocketmq_consumer_lag_messages", "Consumer lag messages", ((r[0], r[1]) for r in rows))
        out.gauges(
            "rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", ((r[0], r[2]) for r in rows)
        )
        out.gauges(
            "rocketmq_consumer_inflight_messages", "Consumer inflight messages", ((r[0], r[3]) for r in rows)
        )
        out.gauges(
            "rocketmq_consumer_queueing_latency",
            "Consumer queueing time (milliseconds)",
            ((r[0], r[4]) for r in rows),
        )
        out.gauges(
            "rocketmq_consumer_ready_messages", "Consumer ready messages", ((r[0], r[5]) for r in rows)
        )

    def _write_store(self, out: Exposition, common: Mapping[str, str]) -> None:
        store = self.broker.store
        labels = {**common, "storage_type": "local", "storage_medium": "disk"}
        try:
            disk = shutil.disk_usage(store.config.store_path_root_dir)
            out.gauge("rocketmq_storage_size", "Broker storage size (bytes)", disk.total - disk.free, labels)
        except OSError:
            pass
        out.gauge(
            "rocketmq_storage_flush_behind_bytes",
            "Broker flush behind bytes",
            store.remain_how_many_data_to_flush(),
            labels,
        )
        out.gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            store.dispatch_behind_bytes(),
            labels,
        )
        earliest = store.get_earliest_message_time()
        if earliest > 0:
            out.gauge(
                "rocketmq_storage_message_reserve_time",
                "Broker message reserve time (milliseconds)",
                int(time.time() * 1000) - earliest,
                labels,
            )

    def _write_timer(self, out: Exposition, common: Mapping[str, str]) -> None:
        """Java 5.x ``DefaultStoreMetricsManager``'s timer figures (timerWheelEnable only)."""
        timer = self.broker.context.timer_message_store
        if timer is None:
            return
        out.gauge(
            "rocketmq_timer_enqueue_lag",
            "Timer enqueue messages lag",
            timer.get_enqueue_behind_messages(),
            common,
        )
        out.gauge(
            "rocketmq_timer_enqueue_latency",
            "Timer enqueue latency (milliseconds)",
            timer.get_enqueue_behind_millis(),
            common,
        )
        out.gauge(
            "rocketmq_timer_dequeue_lag",
            "Timer dequeue messages lag",
            timer.get_dequeue_behind_messages(),
            common,
        )
        # Java records getDequeueBehind() here, in seconds, though the instrument says milliseconds
        out.gauge(
            "rocketmq_timer_dequeue_latency", "Timer dequeue latency", timer.get_dequeue_behind(), common
        )
        out.gauges(
            "rocketmq_timing_messages",
            "Current message number in timing",
            (
                ({**common, "topic": topic}, count)
                for topic, count in sorted(timer.timer_metrics.counts().items())
            ),
        )
        enqueued, dequeued = timer.totals()
        out.counters(
            "rocketmq_timer_enqueue_total",
            "Total number of timer enqueue",
            (({**common, "topic": topic}, n) for topic, n in sorted(enqueued.items())),
        )
        out.counters(
            "rocketmq_timer_dequeue_total",
            "Total number of timer dequeue",
            (({**common, "topic": topic}, n) for topic, n in sorted(dequeued.items())),
        )
        out.gauges(
            "rocketmq_timer_message_snapshot",
            "Timer message distribution snapshot, only count timing messages in 24h.",
            (({**common, "timer_bound_s": str(bound)}, n) for bound, n in sorted(timer.distribution.items())),
        )
        out.declare(
            "rocketmq_delay_message_latency", "histogram", "Timer message set latency distribution (seconds)"
        )
        out.histograms(
            "rocketmq_delay_message_latency",
            "Timer message set latency distribution (seconds)",
            (
                ({**common, "topic": topic}, histogram)
                for topic, histogram in list(timer.delay_latency.by_key.items())
                if isinstance(topic, str)
            ),
        )

    # -- rocketmq-exporter's names ----------------------------------------------------------

    def _write_exporter(self, out: Exposition) -> None:
        b = self.broker
        config = b.config
        cluster, broker_name = config.broker_cluster_name, config.broker_name
        stats = b.stats
        put_tps, get_tps = stats.tps(60)
        broker_labels = {"cluster": cluster, "brokerIP": b.broker_addr, "broker": broker_name}
        out.gauge("rocketmq_broker_tps", "BrokerPutNums", put_tps, broker_labels)
        out.gauge("rocketmq_broker_qps", "BrokerGetNums", get_tps, broker_labels)
        put_nums: list[tuple[dict[str, str], float]] = []
        put_size: list[tuple[dict[str, str], float]] = []
        get_nums: list[tuple[dict[str, str], float]] = []
        get_size: list[tuple[dict[str, str], float]] = []
        for (name, key), item in list(stats.items.items()):
            minute = item.minute()
            if name == "TOPIC_PUT_NUMS":
                put_nums.append(({"cluster": cluster, "broker": broker_name, "topic": key}, minute.tps))
            elif name == "TOPIC_PUT_SIZE":
                put_size.append(({"cluster": cluster, "broker": broker_name, "topic": key}, minute.tps))
            else:
                topic, _, group = key.rpartition("@")
                labels = {"cluster": cluster, "broker": broker_name, "topic": topic, "group": group}
                (get_nums if name == "GROUP_GET_NUMS" else get_size).append((labels, minute.tps))
        out.gauges("rocketmq_producer_tps", "TopicPutNums", put_nums)
        out.gauges("rocketmq_producer_message_size", "TopicPutMessageSize", put_size)
        out.gauges("rocketmq_consumer_tps", "GroupGetNums", get_nums)
        out.gauges("rocketmq_consumer_message_size", "GroupGetMessageSize", get_size)
        self._write_exporter_groups(out, cluster, broker_name)
        self._write_exporter_runtime(out, cluster)

    def _write_exporter_groups(self, out: Exposition, cluster: str, broker_name: str) -> None:
        """rocketmq-exporter's per (group, topic) figures: its ``examineConsumeStats`` walk over
        every group with offsets on this broker (CLUSTERING groups only for the diffs)."""
        b = self.broker
        store = b.store
        now = int(time.time() * 1000)
        diffs: dict[str, list[tuple[dict[str, str], float]]] = {"": [], "retry": [], "dlq": []}
        totals, latencies, topic_offsets = [], [], []
        counts = []
        for key, queue_offsets in list(b.consumer_offset_manager.offset_table.items()):
            topic, _, group = key.rpartition("@")
            info = b.consumer_manager.get(group)
            online = len(info.channels) if info is not None else 0
            model = info.message_model if info is not None else MessageModel.CLUSTERING
            diff = consumer_total = latency = 0
            for queue_id in self._queue_ids(topic):
                broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
                consumer_offset = max(queue_offsets.get(queue_id, 0), 0)
                diff += max(broker_offset - consumer_offset, 0)
                consumer_total += consumer_offset
                if consumer_offset < broker_offset:
                    ts = store.get_message_store_timestamp(topic, queue_id, consumer_offset)
                    if ts > 0:
                        latency = max(latency, now - ts)
            if model is MessageModel.CLUSTERING:
                kind = (
                    "retry"
                    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                    else ("dlq" if topic.startswith(DLQ_GROUP_TOPIC_PREFIX) else "")
                )
                labels = {
                    "group": group,
                    "topic": topic,
                    "countOfOnlineConsumers": str(online),
                    "msgModel": str(model.value),
                }
                diffs[kind].append((labels, diff))
                latencies.append(
                    ({"cluster": cluster, "broker": broker_name, "topic": topic, "group": group}, latency)
                )
            totals.append(
                ({"cluster": cluster, "broker": broker_name, "topic": topic, "group": group}, consumer_total)
            )
        for group, info in list(b.consumer_manager.groups.items()):
            channels = list(info.channels.values())
            counts.append(
                (
                    {
                        "caddr": ",".join(c.client_addr for c in channels),
                        "localaddr": ",".join(c.client_id for c in channels),
                        "group": group,
                    },
                    len(channels),
                )
            )
        for topic, config in list(b.topic_config_manager.topic_config_table.items()):
            total = sum(
                max(store.get_max_offset_in_queue(topic, q), 0) for q in range(config.write_queue_nums)
            )
            topic_offsets.append((topic, total))
        out.gauges("rocketmq_group_diff", "GroupDiff", diffs[""])
        out.gauges("rocketmq_group_retrydiff", "GroupRetryDiff", diffs["retry"])
        out.gauges("rocketmq_group_dlqdiff", "GroupDLQDiff", diffs["dlq"])
        out.gauges("rocketmq_group_count", "GroupCount", counts)
        out.gauges("rocketmq_consumer_offset", "GroupBrokerTotalOffset", totals)
        out.gauges("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime", latencies)
        producer, retry, dlq = [], [], []
        for topic, total in topic_offsets:
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                retry.append(({"cluster": cluster, "broker": broker_name, "topic": topic}, total))
            elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                group = topic[len(DLQ_GROUP_TOPIC_PREFIX) :]
                dlq.append(({"cluster": cluster, "broker": broker_name, "group": group}, total))
            else:
                producer.append(({"cluster": cluster, "broker": broker_name, "topic": topic}, total))
        out.gauges("rocketmq_producer_offset", "TopicOffset", producer)
        out.gauges("rocketmq_topic_retry_offset", "TopicRetryOffset", retry)
        out.gauges("rocketmq_topic_dlq_offset", "TopicRetryOffset", dlq)

    def _write_exporter_runtime(self, out: Exposition, cluster: str) -> None:
        b = self.broker
        info = b.runtime_info()
        labels = {
            "cluster": cluster,
            "brokerIP": b.broker_addr,
            "brokerHost": "",
            "des": info["brokerVersionDesc"],
            "boottime": info["bootTimestamp"],
            "broker_version": info["brokerVersion"],
        }
        for name, key in _RUNTIME_GAUGES:
            value = _number(info.get(key, ""))
            if value is not None:
                out.gauge(f"rocketmq_brokeruntime_{name}", key, value, labels)
        for name, key in (("put_tps", "putTps"), ("gettransfered_tps", "getTransferedTps")):
            for window, text in zip(("10", "60", "600"), info.get(key, "").split(" "), strict=False):
                value = _number(text)
                if value is not None:
                    out.gauge(
                        f"rocketmq_brokeruntime_{name}{window}", f"{key} over {window} s", value, labels
                    )
        out.gauge(
            "rocketmq_brokeruntime_remain_howmanydata_toflush",
            "remainHowManyDataToFlush (bytes)",
            b.store.remain_how_many_data_to_flush(),
            labels,
        )
        try:
            disk = shutil.disk_usage(b.store.config.commit_log_dir)
            out.gauge(
                "rocketmq_brokeruntime_commitlogdir_capacity_total",
                "commitLogDirCapacity total",
                disk.total,
                labels,
            )
            out.gauge(
                "rocketmq_brokeruntime_commitlogdir_capacity_free",
                "commitLogDirCapacity free",
                disk.free,
                labels,
            )
        except OSError:
            pass
        latency = b.store.latency
        if latency is not None:
            for name, low, high in _PMDT:
                out.gauge(
                    f"rocketmq_brokeruntime_pmdt_{name}",
                    f"putMessageDistributeTime {name}",
                    latency.put.count_between(low, high),
                    labels,
                )

    # -- finchmq's own ----------------------------------------------------------------------

    def _write_ha(self, out: Exposition, common: Mapping[str, str]) -> None:
        """Replication: a master's slaves and how far behind the best of them is; a slave's link."""
        b = self.broker
        store = b.store
        end = store.get_max_phy_offset()
        if store.config.broker_role is BrokerRole.SLAVE:
            out.gauge(
                "finchmq_ha_connected_to_master",
                "1 while this slave's replication connection to its master is up",
                int(b.ha_service.connected_to_master),
                common,
            )
            out.gauge("finchmq_ha_commit_log_max_offset", "This slave's commit-log end (bytes)", end, common)
            return
        replication = store.replication
        out.gauge(
            "finchmq_ha_slave_connections",
            "Slaves replicating from this master",
            replication.connection_count,
            common,
        )
        acked = replication.push_to_slave_max_offset
        out.gauge(
            "finchmq_ha_slave_acked_offset",
            "The highest commit-log offset a slave has acknowledged (bytes)",
            acked,
            common,
        )
        if replication.connection_count:
            out.gauge(
                "finchmq_ha_replication_lag_bytes",
                "Commit-log bytes the most advanced slave has not acknowledged yet",
                max(end - acked, 0),
                common,
            )

    def _write_pop(self, out: Exposition, common: Mapping[str, str]) -> None:
        """5.x: Java ``PopMetricsManager``'s figures (names, labels and units)."""
        pop = self.broker.context.pop
        out.histogram(
            "rocketmq_pop_buffer_scan_time_consume",
            "Time consuming of pop buffer scan",
            pop.buffer_merge.scan_time_ms,
            common,
        )
        out.counters(
            "rocketmq_pop_revive_in_message_total",
            "Total number of put message to revive topic",
            (
                (
                    {**common, "consumer_group": g, "topic": t, "revive_message_type": k, "put_status": st},
                    n,
                )
                for (g, t, k, st), n in sorted(pop.revive_log.puts.items())
            ),
        )
        out.counters(
            "rocketmq_pop_revive_out_message_total",
            "Total number of get message from revive topic",
            (
                (
                    {
                        **common,
                        "consumer_group": g,
                        "topic": t,
                        "queue_id": str(s.queue_id),
                        "revive_message_type": k,
                    },
                    n,
                )
                for s in pop.revive_services
                for (g, t, k), n in sorted(s.got.items())
            ),
        )
        retries: Counter[tuple[str, str, str]] = Counter()
        for service in pop.revive_services:
            retries.update(service.retry_puts)
        out.counters(
            "rocketmq_pop_revive_retry_messages_total",
            "Total number of put message to pop retry topic",
            (
                ({**common, "consumer_group": g, "topic": t, "put_status": st}, n)
                for (g, t, st), n in sorted(retries.items())
            ),
        )
        out.gauge(
            "rocketmq_pop_offset_buffer_size",
            "Time number of buffered offset",
            pop.buffer_merge.offset_total_size(),
            common,
        )
        out.gauge(
            "rocketmq_pop_checkpoint_buffer_size",
            "The number of buffered checkpoint",
            pop.buffer_merge.buffered_ck_size,
            common,
        )
        # Java: the lag is getReviveBehindMessages, the latency getReviveBehindMillis (both declared
        # with unit "milliseconds")
        out.gauges(
            "rocketmq_pop_revive_lag",
            "The processing lag of revive topic",
            (({**common, "queue_id": str(s.queue_id)}, s.behind_messages()) for s in pop.revive_services),
        )
        out.gauges(
            "rocketmq_pop_revive_latency",
            "The processing latency of revive topic",
            (({**common, "queue_id": str(s.queue_id)}, s.behind_millis()) for s in pop.revive_services),
        )
        out.gauge(
            "finchmq_pop_held_requests",
            "POP requests held by long polling",
            pop.long_polling.total_polling_num,
            common,
        )
        out.counter(
            "finchmq_pop_dead_letter_messages_total",
            "Popped messages moved to the DLQ by revive after retryMaxTimes + 1 deliveries",
            sum(s.dead_lettered for s in pop.revive_services),
            common,
        )

    def _write_finchmq(self, out: Exposition, common: Mapping[str, str]) -> None:
        b = self.broker
        store = b.store
        counts = dict.fromkeys(_FLOW_CONTROL_KINDS, 0)
        counts.update(b.flow_control.snapshot())
        out.counters(
            "finchmq_flow_control_total",
            "Requests answered SYSTEM_BUSY by flow control, by mechanism (kind) and request queue",
            (
                ({**common, "kind": kind.partition(":")[0], "queue": kind.partition(":")[2]}, count)
                for kind, count in sorted(counts.items())
            ),
        )
        latency = store.latency
        if latency is not None:
            out.histogram(
                "finchmq_store_put_latency_seconds",
                "Store put latency (the whole append)",
                latency.put,
                common,
            )
            out.histogram(
                "finchmq_store_flush_latency_seconds",
                "Commit log flush latency (flushes that wrote)",
                latency.flush,
                common,
            )
            out.counter(
                "finchmq_store_page_cache_busy_seconds_total",
                "Time puts held the put lock past osPageCacheBusyTimeOutMills (the page cache counted busy)",
                latency.page_cache_busy_seconds,
                common,
            )
        out.gauge(
            "finchmq_store_page_cache_lock_seconds",
            "How long the current append has held the put lock",
            store.lock_time_mills() / 1000,
            common,
        )
        out.gauge(
            "finchmq_store_page_cache_busy",
            "1 while the page cache counts busy (sends are refused)",
            int(store.is_os_page_cache_busy()),
            common,
        )
        config = store.config
        out.gauges(
            "finchmq_store_disk_used_ratio",
            "Used fraction of the disk holding each store directory",
            (
                ({**common, "dir": name}, store.disk_used_ratio(path))
                for name, path in (
                    ("commitlog", config.commit_log_dir),
                    ("consumequeue", config.consume_queue_dir),
                )
            ),
        )
        out.gauge(
            "finchmq_store_disk_max_used_ratio",
            "diskMaxUsedSpaceRatio as a fraction (expiry starts above it)",
            config.disk_max_used_space_fraction,
            common,
        )
        out.gauge(
            "finchmq_store_disk_full",
            "1 while the disk is too full to accept puts",
            int(store.is_disk_full()),
            common,
        )
        out.gauge(
            "finchmq_store_put_on_loop",
            "1 while appends run on the event loop, 0 on the writer threads",
            int(b.put_service.on_loop),
            common,
        )
        self._write_ha(out, common)
        hold = b.pull_hold_service
        out.gauge(
            "finchmq_pull_held_requests", "Pull requests held by long polling now", hold.held_count, common
        )
        out.counter(
            "finchmq_pull_holds_total", "Pull requests held by long polling", hold.holds_total, common
        )
        out.counters(
            "finchmq_pull_hold_wakeups_total",
            "Held pull requests run again, by why",
            (({**common, "reason": reason}, count) for reason, count in sorted(hold.wakeups.items())),
        )
