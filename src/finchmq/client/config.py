"""Client settings: RocketMQ's names in snake_case, RocketMQ's defaults, validated on construction.

Owns: ``ClientConfig`` (Java ``ClientConfig``), ``ProducerConfig`` (``DefaultMQProducer``),
``PushConsumerConfig`` (``DefaultMQPushConsumer``, seed 002's defaults), ``LitePullConsumerConfig``
(``DefaultLitePullConsumer``), ``PullConsumerConfig`` (``DefaultMQPullConsumer``) and
``SimpleConsumerConfig`` (the 5.x SDKs' ``SimpleConsumer``, over POP); the bases
``ConsumerConfig`` and ``SubscribingConsumerConfig`` hold what several of them have.
Imports: ``finchmq.protocol``, the pure ``allocate`` module and ``finchmq.remoting.tls`` (the
``tls.*`` settings).

Every config is a frozen, slotted, keyword-only dataclass; ``__post_init__`` raises ``ValueError``
naming the field and the value, with Java's wording where Java has a check ("consumeThreadMin Out
of range [1, 1000]"). Units follow RocketMQ (ms unless a comment says otherwise). Settings that
Java reads from system properties (``rocketmq.client.rebalance.lockInterval``...) are fields here,
so tests can shorten them; no environment is read.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar, cast

from finchmq.protocol.acl import SessionCredentials
from finchmq.protocol.bodies import ConsumeFromWhere, MessageModel
from finchmq.protocol.filter import MessageSelector
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.namespace import NAMESPACE_SEPARATOR, without_namespace, wrap_namespace
from finchmq.protocol.topics import DEFAULT_CONSUMER_GROUP, DEFAULT_PRODUCER_GROUP, validate_group
from finchmq.remoting.tls import TlsConfig

from .allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy

if TYPE_CHECKING:
    from .consumer.offset_store import OffsetStore

__all__ = [
    "ClientConfig",
    "ConfigT",
    "ConsumerConfig",
    "LitePullConsumerConfig",
    "ProducerConfig",
    "PullConsumerConfig",
    "PushConsumerConfig",
    "SimpleConsumerConfig",
    "SubscribingConsumerConfig",
    "check_group",
    "local_ip",
    "make_config",
    "parse_consume_timestamp",
]

_ADDR_PATTERN: Final = re.compile(r"^\[?[^\s\[\]]+\]?:\d{1,5}$")
_TIMESTAMP_FORMAT: Final = "%Y%m%d%H%M%S"  # Java UtilAll.YYYYMMDDHHMMSS
DEFAULT_LOCAL_OFFSET_STORE_DIR: Final = Path.home() / ".rocketmq_offsets"


@functools.lru_cache(maxsize=1)
def local_ip() -> str:
    """The host's first non-loopback IPv4 address, else 127.0.0.1 (Java ``RemotingUtil.getLocalAddress``)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))  # no packet is sent
            address = str(probe.getsockname()[0])
            if address and not address.startswith("127."):
                return address
    except OSError:
        pass
    return "127.0.0.1"


def check_group(group: str, field_name: str = "group") -> None:
    """Java ``Validators.checkGroup``; raises ``ValueError`` naming the field and the value."""
    reason = validate_group(group)
    if reason is not None:
        raise ValueError(f"{field_name}={group!r}: {reason}")


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time) to epoch ms; ``ValueError`` if it does not parse."""
    try:
        return int(time.mktime(time.strptime(text, _TIMESTAMP_FORMAT)) * 1000)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"consume_timestamp={text!r} is invalid, yyyyMMddHHmmss") from exc


def _default_consume_timestamp() -> str:
    # Java: UtilAll.timeMillisToHumanString3(System.currentTimeMillis() - (1000 * 60 * 30))
    return time.strftime(_TIMESTAMP_FORMAT, time.localtime(time.time() - 30 * 60))


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def _in_range(name: str, java_name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{java_name} Out of range [{low}, {high}]: {name}={value!r}")


def _check_long_polling(
    broker_suspend_max_time_millis: int, consumer_timeout_millis_when_suspend: int
) -> None:
    """The broker holds a pull ``broker_suspend_max_time_millis``; the client must wait longer."""
    _positive("broker_suspend_max_time_millis", broker_suspend_max_time_millis)
    if consumer_timeout_millis_when_suspend <= broker_suspend_max_time_millis:
        raise ValueError(
            f"consumer_timeout_millis_when_suspend={consumer_timeout_millis_when_suspend} must be "
            f"larger than broker_suspend_max_time_millis={broker_suspend_max_time_millis}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Settings every client object shares (Java ``ClientConfig``).

    ``namesrv_addr`` is ``"host:port;host:port"``. Objects with equal ``client_ip@instance_name``
    in one event loop share one ``MQClientInstance`` (connections, routes, heartbeats).
    """

    namesrv_addr: str | None = None
    client_ip: str = field(default_factory=local_ip)
    instance_name: str = "DEFAULT"
    unit_mode: bool = False
    unit_name: str | None = None
    poll_name_server_interval: int = 30_000  # ms: route refresh
    heartbeat_broker_interval: int = 30_000  # ms: heartbeats and offline-broker clean-up
    persist_consumer_offset_interval: int = 5_000  # ms
    mq_client_api_timeout: int = 3_000  # ms: admin-style calls (routes, offsets, heartbeats)
    rebalance_wait_interval: int = 20_000  # ms; Java rocketmq.client.rebalance.waitInterval
    connect_timeout_millis: int = 3_000  # ms
    client_channel_max_idle_time_seconds: float = 120  # s
    client_async_semaphore_value: int = 65_535  # async calls (sends) in flight
    enable_msg_trace: bool = False  # send message traces (Java enableMsgTrace)
    customized_trace_topic: str | None = None  # default RMQ_SYS_TRACE_TOPIC
    # ACL 1.0: sign every request with these keys (Java AclClientRPCHook); None sends unsigned
    session_credentials: SessionCredentials | None = None
    # TLS (Java useTLS, default tls.enable): connect to name servers and brokers with TLS, with
    # the tls.client.* settings of ``tls`` (TlsConfig.from_properties reads Java's names and
    # tls.config.file); the default TlsConfig is Java's test mode: any server is trusted
    use_tls: bool = False
    tls: TlsConfig = field(default_factory=TlsConfig)
    # Java ClientConfig.namespace: topics and groups go to the broker as "namespace%name"
    namespace: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tls, TlsConfig):
            raise ValueError(f"tls must be a TlsConfig, got {type(self.tls).__name__}")
        if self.namespace is not None and (
            not self.namespace.strip() or NAMESPACE_SEPARATOR in self.namespace
        ):
            raise ValueError(
                f"namespace={self.namespace!r} must be non-blank and without '{NAMESPACE_SEPARATOR}' "
                "(its separator from the topic or group)"
            )
        if self.namesrv_addr is not None:
            for addr in self.namesrv_addr_list():
                if not _ADDR_PATTERN.match(addr):
                    raise ValueError(f"namesrv_addr={self.namesrv_addr!r}: {addr!r} is not host:port")
        if not self.client_ip:
            raise ValueError("client_ip must not be empty")
        if self.session_credentials is not None and not isinstance(
            self.session_credentials, SessionCredentials
        ):
            raise ValueError(
                f"session_credentials must be a SessionCredentials(access_key, secret_key), "
                f"got {type(self.session_credentials).__name__}"
            )
        if not self.instance_name or "@" in self.instance_name:
            raise ValueError(f"instance_name={self.instance_name!r} must be non-empty and without '@'")
        _positive("poll_name_server_interval", self.poll_name_server_interval)
        _positive("heartbeat_broker_interval", self.heartbeat_broker_interval)
        _positive("persist_consumer_offset_interval", self.persist_consumer_offset_interval)
        _positive("mq_client_api_timeout", self.mq_client_api_timeout)
        _positive("rebalance_wait_interval", self.rebalance_wait_interval)
        _positive("connect_timeout_millis", self.connect_timeout_millis)
        _positive("client_async_semaphore_value", self.client_async_semaphore_value)
        if self.client_channel_max_idle_time_seconds < 0:
            raise ValueError(
                "client_channel_max_idle_time_seconds must be >= 0, "
                f"got {self.client_channel_max_idle_time_seconds!r}"
            )

    def namesrv_addr_list(self) -> list[str]:
        """The name servers, in the order given (``;``-separated)."""
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def build_mq_client_id(self) -> str:
        """Java ``buildMQClientId``: ``ip@instanceName`` (``@unitName`` when set)."""
        client_id = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name:
            client_id += f"@{self.unit_name}"
        return client_id

    def with_namespace(self, resource: str) -> str:
        """``resource`` as the broker knows it: ``namespace%resource`` (``%RETRY%namespace%group``
        for a retry topic), unchanged without a namespace or for system topics and groups (Java
        ``withNamespace``)."""
        return wrap_namespace(self.namespace, resource)

    def without_namespace(self, resource: str) -> str:
        """``resource`` as the user names it: this namespace stripped (Java ``withoutNamespace``)."""
        return without_namespace(resource, self.namespace)

    def queue_with_namespace(self, queue: MessageQueue) -> MessageQueue:
        """``queue`` with its topic wrapped (Java ``queueWithNamespace``)."""
        if not self.namespace:
            return queue
        return replace(queue, topic=self.with_namespace(queue.topic))

    def queue_without_namespace(self, queue: MessageQueue) -> MessageQueue:
        """``queue`` with its topic unwrapped, as the user sees it."""
        if not self.namespace:
            return queue
        return replace(queue, topic=self.without_namespace(queue.topic))

    def with_instance_name_pid(self) -> Self:
        """Java ``changeInstanceNameToPID``: ``DEFAULT`` becomes the process id."""
        if self.instance_name == "DEFAULT":
            return replace(self, instance_name=str(os.getpid()))
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig(ClientConfig):
    """Java ``DefaultMQProducer``'s settings and defaults."""

    producer_group: str
    create_topic_key: str = "TBW102"  # AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4
    send_msg_timeout: int = 3_000  # ms
    compress_msg_body_over_howmuch: int = 4_096  # bytes
    compress_level: int = 5  # zlib; Java rocketmq.message.compressLevel
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024  # bytes
    send_latency_fault_enable: bool = False
    latency_max: tuple[int, ...] = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)  # ms
    not_available_duration: tuple[int, ...] = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)  # ms

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        check_group(self.producer_group, "producer_group")
        if self.producer_group == DEFAULT_PRODUCER_GROUP:
            raise ValueError(
                f"producer_group={self.producer_group!r}: producerGroup can not equal "
                f"{DEFAULT_PRODUCER_GROUP}, please specify another one."
            )
        _positive("default_topic_queue_nums", self.default_topic_queue_nums)
        _positive("send_msg_timeout", self.send_msg_timeout)
        if self.compress_msg_body_over_howmuch < 0:
            raise ValueError(
                f"compress_msg_body_over_howmuch must be >= 0, got {self.compress_msg_body_over_howmuch}"
            )
        if not 0 <= self.compress_level <= 9:
            raise ValueError(f"compress_level must be in 0..9, got {self.compress_level}")
        if self.retry_times_when_send_failed < 0:
            raise ValueError(
                f"retry_times_when_send_failed must be >= 0, got {self.retry_times_when_send_failed}"
            )
        if self.retry_times_when_send_async_failed < 0:
            raise ValueError(
                "retry_times_when_send_async_failed must be >= 0, "
                f"got {self.retry_times_when_send_async_failed}"
            )
        _positive("max_message_size", self.max_message_size)
        if len(self.latency_max) != len(self.not_available_duration):
            raise ValueError(
                f"latency_max and not_available_duration must have the same length, got "
                f"{len(self.latency_max)} and {len(self.not_available_duration)}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig(ClientConfig):
    """What every consumer has: a group, a model, an offset store."""

    consumer_group: str
    message_model: MessageModel = MessageModel.CLUSTERING
    offset_store: OffsetStore | None = None  # None: remote (clustering) or local file (broadcasting)
    local_offset_store_dir: Path = DEFAULT_LOCAL_OFFSET_STORE_DIR  # Java rocketmq.client.localOffsetStoreDir

    def with_namespaced_group(self) -> Self:
        """This config with ``consumer_group`` wrapped in ``namespace`` (Java consumers' ``start``:
        ``setConsumerGroup(wrapNamespace(namespace, consumerGroup))``)."""
        if not self.namespace:
            return self
        return replace(self, consumer_group=self.with_namespace(self.consumer_group))

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        check_group(self.consumer_group, "consumer_group")
        if self.consumer_group == DEFAULT_CONSUMER_GROUP:
            raise ValueError(
                f"consumer_group={self.consumer_group!r}: consumerGroup can not equal "
                f"{DEFAULT_CONSUMER_GROUP}, please specify another one."
            )
        if not isinstance(self.message_model, MessageModel):
            raise ValueError(f"message_model={self.message_model!r}: messageModel is null")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribingConsumerConfig(ConsumerConfig):
    """What the consumers that share a group's queues by rebalancing (push, lite pull) add:
    where a queue without a committed offset starts, and how queues are divided."""

    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = field(default_factory=_default_consume_timestamp)  # yyyyMMddHHmmss
    allocate_message_queue_strategy: AllocateMessageQueueStrategy = field(
        default_factory=AllocateMessageQueueAveragely
    )

    def __post_init__(self) -> None:
        ConsumerConfig.__post_init__(self)
        parse_consume_timestamp(self.consume_timestamp)

    @property
    def consume_timestamp_ms(self) -> int:
        """``consume_timestamp`` (CONSUME_FROM_TIMESTAMP's start) as epoch ms."""
        return parse_consume_timestamp(self.consume_timestamp)


@dataclass(frozen=True, slots=True, kw_only=True)
class PushConsumerConfig(SubscribingConsumerConfig):
    """Java ``DefaultMQPushConsumer`` with seed 002's defaults and ``checkConfig`` ranges.

    ``consume_thread_max`` defaults to 64 as in seed 002 (Java 4.9 uses 20). Settings marked
    "system property" are JVM-wide in Java.
    """

    subscription: Mapping[str, str] = field(default_factory=dict)  # topic -> expression
    consume_thread_min: int = 20
    consume_thread_max: int = 64
    adjust_thread_pool_nums_threshold: int = 100_000  # accumulated messages
    consume_concurrently_max_span: int = 2_000  # offsets
    pull_threshold_for_queue: int = 1_000  # messages
    pull_threshold_size_for_queue: int = 100  # MiB
    pull_threshold_for_topic: int = -1  # messages; -1 = unlimited
    pull_threshold_size_for_topic: int = -1  # MiB; -1 = unlimited
    pull_interval: int = 0  # ms
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    post_subscription_when_pull: bool = False
    max_reconsume_times: int = -1  # -1: 16 concurrently, unlimited orderly
    suspend_current_queue_time_millis: int = 1_000  # ms
    consume_timeout: float = 15  # minutes
    pull_time_delay_mills_when_exception: int = 3_000  # ms
    broker_suspend_max_time_millis: int = 15_000  # ms: long-poll hold on the broker
    consumer_timeout_millis_when_suspend: int = 30_000  # ms: the pull call's own timeout
    rebalance_lock_interval: int = 20_000  # ms; system property rocketmq.client.rebalance.lockInterval
    rebalance_lock_max_live_time: int = 30_000  # ms; rocketmq.client.rebalance.lockMaxLiveTime
    pull_max_idle_time: int = 120_000  # ms; rocketmq.client.pull.pullMaxIdleTime
    max_time_consume_continuously: int = 60_000  # ms; rocketmq.client.maxTimeConsumeContinuously
    # 5.x: False asks the broker which queues to read and how (QUERY_ASSIGNMENT): PULL, or POP
    # when the group's mode on the topic is POP (mqadmin setConsumeMode); broadcasting always
    # rebalances on the client
    client_rebalance: bool = True
    pop_threshold_for_queue: int = 96  # popped messages not yet acked, per queue
    pop_invisible_time: int = 60_000  # ms, [5000, 300000]
    pop_batch_nums: int = 32  # [1, 32]
    # s: how long a message whose listener said RECONSUME_LATER stays invisible, by delay level
    # (Java's popDelayLevel, a constant there: 10s 30s 1m 2m ... 2h)
    pop_delay_level: tuple[int, ...] = (
        10,
        30,
        60,
        120,
        180,
        240,
        300,
        360,
        420,
        480,
        540,
        600,
        1200,
        1800,
        3600,
        7200,
    )

    def __post_init__(self) -> None:
        SubscribingConsumerConfig.__post_init__(self)
        if not isinstance(self.consume_from_where, ConsumeFromWhere):
            raise ValueError(f"consume_from_where={self.consume_from_where!r}: consumeFromWhere is null")
        if not isinstance(self.allocate_message_queue_strategy, AllocateMessageQueueStrategy):
            raise ValueError(
                f"allocate_message_queue_strategy={self.allocate_message_queue_strategy!r}: "
                "allocateMessageQueueStrategy is null"
            )
        _in_range("consume_thread_min", "consumeThreadMin", self.consume_thread_min, 1, 1000)
        _in_range("consume_thread_max", "consumeThreadMax", self.consume_thread_max, 1, 1000)
        if self.consume_thread_min > self.consume_thread_max:
            raise ValueError(
                f"consumeThreadMin ({self.consume_thread_min}) is larger than consumeThreadMax "
                f"({self.consume_thread_max})"
            )
        _in_range(
            "consume_concurrently_max_span",
            "consumeConcurrentlyMaxSpan",
            self.consume_concurrently_max_span,
            1,
            65535,
        )
        _in_range(
            "pull_threshold_for_queue", "pullThresholdForQueue", self.pull_threshold_for_queue, 1, 65535
        )
        if self.pull_threshold_for_topic != -1:
            _in_range(
                "pull_threshold_for_topic", "pullThresholdForTopic", self.pull_threshold_for_topic, 1, 6553500
            )
        _in_range(
            "pull_threshold_size_for_queue",
            "pullThresholdSizeForQueue",
            self.pull_threshold_size_for_queue,
            1,
            1024,
        )
        if self.pull_threshold_size_for_topic != -1:
            _in_range(
                "pull_threshold_size_for_topic",
                "pullThresholdSizeForTopic",
                self.pull_threshold_size_for_topic,
                1,
                102400,
            )
        _in_range("pull_interval", "pullInterval", self.pull_interval, 0, 65535)
        _in_range(
            "consume_message_batch_max_size",
            "consumeMessageBatchMaxSize",
            self.consume_message_batch_max_size,
            1,
            1024,
        )
        _in_range("pull_batch_size", "pullBatchSize", self.pull_batch_size, 1, 1024)
        if self.max_reconsume_times < -1:
            raise ValueError(f"max_reconsume_times must be >= -1, got {self.max_reconsume_times}")
        _positive("suspend_current_queue_time_millis", self.suspend_current_queue_time_millis)
        _positive("consume_timeout", self.consume_timeout)
        _positive("adjust_thread_pool_nums_threshold", self.adjust_thread_pool_nums_threshold)
        _positive("pull_time_delay_mills_when_exception", self.pull_time_delay_mills_when_exception)
        _check_long_polling(self.broker_suspend_max_time_millis, self.consumer_timeout_millis_when_suspend)
        _positive("rebalance_lock_interval", self.rebalance_lock_interval)
        _positive("rebalance_lock_max_live_time", self.rebalance_lock_max_live_time)
        _positive("pull_max_idle_time", self.pull_max_idle_time)
        _positive("max_time_consume_continuously", self.max_time_consume_continuously)
        _positive("pop_threshold_for_queue", self.pop_threshold_for_queue)
        _in_range("pop_invisible_time", "popInvisibleTime", self.pop_invisible_time, 5_000, 300_000)
        _in_range("pop_batch_nums", "popBatchNums", self.pop_batch_nums, 1, 32)
        if not self.pop_delay_level or any(d <= 0 for d in self.pop_delay_level):
            raise ValueError(f"pop_delay_level must be delays > 0 (s), got {self.pop_delay_level!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LitePullConsumerConfig(SubscribingConsumerConfig):
    """Java ``DefaultLitePullConsumer``'s settings and defaults."""

    pull_batch_size: int = 10
    pull_thread_nums: int = 20  # concurrent pulls
    auto_commit: bool = True
    auto_commit_interval_millis: int = 5_000  # ms
    pull_threshold_for_all: int = 10_000  # messages cached for poll()
    consume_max_span: int = 2_000
    pull_threshold_for_queue: int = 1_000
    pull_threshold_size_for_queue: int = 100  # MiB
    poll_timeout_millis: int = 5_000  # ms
    topic_metadata_check_interval_millis: int = 30_000  # ms
    broker_suspend_max_time_millis: int = 20_000  # ms
    consumer_timeout_millis_when_suspend: int = 30_000  # ms
    consumer_pull_timeout_millis: int = 10_000  # ms
    pull_time_delay_mills_when_exception: int = 1_000  # ms

    def __post_init__(self) -> None:
        SubscribingConsumerConfig.__post_init__(self)
        _in_range("pull_batch_size", "pullBatchSize", self.pull_batch_size, 1, 1024)
        _in_range("pull_thread_nums", "pullThreadNums", self.pull_thread_nums, 1, 1000)
        if self.auto_commit_interval_millis < 1000:
            raise ValueError(
                f"autoCommitIntervalMillis Out of range [1000, ...]: auto_commit_interval_millis="
                f"{self.auto_commit_interval_millis}"
            )
        _positive("pull_threshold_for_all", self.pull_threshold_for_all)
        _positive("consume_max_span", self.consume_max_span)
        _positive("pull_threshold_for_queue", self.pull_threshold_for_queue)
        _positive("pull_threshold_size_for_queue", self.pull_threshold_size_for_queue)
        _positive("poll_timeout_millis", self.poll_timeout_millis)
        _positive("topic_metadata_check_interval_millis", self.topic_metadata_check_interval_millis)
        _check_long_polling(self.broker_suspend_max_time_millis, self.consumer_timeout_millis_when_suspend)
        _positive("consumer_pull_timeout_millis", self.consumer_pull_timeout_millis)
        _positive("pull_time_delay_mills_when_exception", self.pull_time_delay_mills_when_exception)


@dataclass(frozen=True, slots=True, kw_only=True)
class PullConsumerConfig(ConsumerConfig):
    """Java ``DefaultMQPullConsumer``: the low-level pull API's settings."""

    broker_suspend_max_time_millis: int = 20_000  # ms
    consumer_timeout_millis_when_suspend: int = 30_000  # ms
    consumer_pull_timeout_millis: int = 10_000  # ms
    max_reconsume_times: int = 16

    def __post_init__(self) -> None:
        ConsumerConfig.__post_init__(self)
        _check_long_polling(self.broker_suspend_max_time_millis, self.consumer_timeout_millis_when_suspend)
        _positive("consumer_pull_timeout_millis", self.consumer_pull_timeout_millis)
        if self.max_reconsume_times < 0:
            raise ValueError(f"max_reconsume_times must be >= 0, got {self.max_reconsume_times}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimpleConsumerConfig(ClientConfig):
    """The 5.x ``SimpleConsumer``'s settings (the gRPC SDKs' builder), for a consumer that pops.

    ``subscription`` maps topics to a tag expression or a ``MessageSelector``. ``receive`` waits
    up to ``await_duration`` for messages (the broker holds the pop). ``fifo`` pops in order: a
    queue's next messages are handed out only once those before them are acked (or their
    invisible time is over); every member of a group should agree on it (the 5.x group setting
    ``consumeMessageOrderly``). A message received ``max_reconsume_times`` + 1 times and never
    acked goes to ``%DLQ%group`` when it comes once more (the group's ``retryMaxTimes``).
    """

    consumer_group: str
    subscription: Mapping[str, str | MessageSelector] = field(default_factory=dict)
    await_duration: int = 20_000  # ms; 0 answers at once
    fifo: bool = False
    max_reconsume_times: int = 16

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        check_group(self.consumer_group, "consumer_group")
        if self.consumer_group == DEFAULT_CONSUMER_GROUP:
            raise ValueError(
                f"consumer_group={self.consumer_group!r}: consumerGroup can not equal "
                f"{DEFAULT_CONSUMER_GROUP}, please specify another one."
            )
        if self.await_duration < 0:
            raise ValueError(f"await_duration must be >= 0 (ms), got {self.await_duration!r}")
        if self.max_reconsume_times < 0:
            raise ValueError(f"max_reconsume_times must be >= 0, got {self.max_reconsume_times!r}")


ConfigT = TypeVar("ConfigT", bound=ClientConfig)


def make_config(
    cls: type[ConfigT], config: ConfigT | str, group_field: str, overrides: Mapping[str, object]
) -> ConfigT:
    """``config`` with ``overrides`` applied, or a new ``cls`` whose ``group_field`` is the string.

    Unknown names raise ``TypeError`` naming them; bad values raise ``ValueError``.
    """
    if isinstance(config, str):
        return cls(**cast(Any, {group_field: config, **overrides}))
    if not isinstance(config, cls):
        raise TypeError(f"expected a {cls.__name__} or a group name, got {config!r}")
    if not overrides:
        return config
    return cast(ConfigT, replace(cast(Any, config), **overrides))
