"""Broker settings with RocketMQ 4.9.8's names (``BrokerConfig`` + the remoting server's) and
defaults (5.x's for the 5.x features, in blocks marked so). The store has its own
``MessageStoreConfig``; ``broker.conf`` feeds both."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from finchmq.common.metrics import MetricsExporterType
from finchmq.common.otlp import parse_otlp_headers
from finchmq.common.settings import snake_to_camel
from finchmq.protocol.bodies import MessageRequestMode

__all__ = ["BrokerConfig", "MetricsExporterType"]

_CPUS = os.cpu_count() or 2
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    # identity and cluster
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0  # 0 = master
    broker_ip1: str = "127.0.0.1"  # the address clients reach; the cli defaults it to the host's
    broker_ip2: str = ""  # HA address; defaults to broker_ip1
    namesrv_addr: str | None = None  # "host:port;host:port"
    listen_port: int = 10911
    bind_address: str = "0.0.0.0"
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    broker_permission: int = 6  # PermName READ | WRITE

    # topics and groups
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    auto_create_subscription_group: bool = True
    enable_mixed_message_type: bool = False  # 5.x: refuse a topic whose message.type is MIXED
    notify_consumer_ids_changed_enable: bool = True

    # registration with name servers
    register_name_server_period: int = 30_000  # ms, clamped to 10..60 s as Java does
    register_broker_timeout_mills: int = 6000  # ms
    force_register: bool = True
    compressed_register: bool = False

    # request executors (Java thread pools) and their queues
    send_message_thread_pool_nums: int = min(_CPUS, 4)
    pull_message_thread_pool_nums: int = 16 + _CPUS * 2
    query_message_thread_pool_nums: int = 8 + _CPUS
    admin_broker_thread_pool_nums: int = 16
    client_manage_thread_pool_nums: int = 32
    consumer_manage_thread_pool_nums: int = 32
    heartbeat_thread_pool_nums: int = min(32, _CPUS)
    end_transaction_thread_pool_nums: int = max(8 + _CPUS * 2, 16)
    send_thread_pool_queue_capacity: int = 10_000
    pull_thread_pool_queue_capacity: int = 100_000
    query_thread_pool_queue_capacity: int = 20_000
    client_manager_thread_pool_queue_capacity: int = 1_000_000
    consumer_manager_thread_pool_queue_capacity: int = 1_000_000
    heartbeat_thread_pool_queue_capacity: int = 50_000
    end_transaction_pool_queue_capacity: int = 100_000
    load_balance_processor_thread_pool_nums: int = 32  # 5.x: QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE
    load_balance_thread_pool_queue_capacity: int = 100_000

    # fast failure (seed 000/001)
    broker_fast_failure_enable: bool = True
    wait_time_mills_in_send_queue: int = 200  # ms
    wait_time_mills_in_pull_queue: int = 5000  # ms
    wait_time_mills_in_heartbeat_queue: int = 31_000  # ms
    wait_time_mills_in_transaction_queue: int = 3000  # ms
    start_accept_send_request_time_stamp: int = 0  # ms epoch
    # finchmq's own: a connection answered [OVERLOAD] is not read again until the send queue has
    # room or for this long, so TCP pushes back on a flood; 0 decodes and refuses every request
    overload_pause_read_mills: int = 10  # ms

    # where appends run (finchmq's own): three appends within a second holding the event loop
    # longer than this move appends to the writer threads for a while; 0 keeps them there always
    put_off_loop_threshold_ms: int = 50  # ms

    # consumption
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000  # ms
    flush_consumer_offset_interval: int = 5000  # ms
    slave_read_enable: bool = False
    transfer_msg_by_heap: bool = True
    rebalance_lock_max_live_time: int = (
        60_000  # ms (Java system property rocketmq.broker.rebalance.lockMaxLiveTime)
    )
    channel_expired_timeout: int = 120_000  # ms without a heartbeat before a client is dropped
    server_channel_max_idle_time_seconds: float = 120  # s
    max_error_rate_of_bloom_filter: int = 20  # unused (no SQL92 filter); kept for broker.conf compatibility
    enable_property_filter: bool = False

    # 5.x: queues assigned by the broker (QUERY_ASSIGNMENT, broker/processor/assignment.py). A
    # group/topic without a mode set by SET_MESSAGE_REQUEST_MODE reads its queues in the default
    # mode; serverLoadBalancerEnable=false hands every member every queue.
    server_load_balancer_enable: bool = True
    default_message_request_mode: MessageRequestMode = MessageRequestMode.PULL
    default_pop_share_queue_num: int = -1  # -1: in POP mode, every member pops every queue
    load_balance_poll_name_server_interval: int = 30_000  # ms: the assigned topics' routes refresh

    # request-reply: also store replies in <cluster>_REPLY_TOPIC (Java's default)
    store_reply_message_enable: bool = True

    # ACL 1.0 (broker/acl.py): plain_acl.yml; aclFilePath is finchmq's own key (default: Java's
    # $ROCKETMQ_HOME/conf/plain_acl.yml). Both are read at start-up only, as Java does.
    acl_enable: bool = False
    acl_file_path: str = ""

    # ACL 2.0 (Java 5.3 AuthConfig; broker/auth.py): users and ACLs kept in
    # <storePathRootDir>/config/auth/{users,acls}.json. authenticationEnabled checks every
    # request's signature against a user's password, authorizationEnabled its ACL. The provider
    # keys take Java's class names (Default*/Local*), or nothing: finchmq has one of each. The
    # *Whitelist keys are comma-separated request codes (5.x: protobuf names) that skip the check.
    authentication_enabled: bool = False
    authentication_provider: str = ""
    authentication_metadata_provider: str = ""
    authentication_strategy: str = ""  # accepted for broker.conf compatibility; one strategy
    authentication_whitelist: str = ""
    init_authentication_user: str = ""  # {"username":..,"password":..}: created SUPER at start-up
    inner_client_authentication_credentials: str = ""  # {"accessKey":..,"secretKey":..}: SUPER
    authorization_enabled: bool = False
    authorization_provider: str = ""
    authorization_metadata_provider: str = ""
    authorization_strategy: str = ""  # accepted for broker.conf compatibility; one strategy
    authorization_whitelist: str = ""
    migrate_auth_from_v1_enabled: bool = False  # 1.0 accounts into users and ACLs at start-up

    # transactional messages (broker/transaction.py)
    reject_transaction_message: bool = False
    transaction_time_out: int = 6000  # ms (Java transactionTimeOut)
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000

    # 5.x recall of timer messages (RECALL_MESSAGE, broker/processor/recall.py)
    recall_message_enable: bool = False
    allow_recall_when_broker_not_writeable: bool = True

    # metrics (Java 5.x keys): PROM serves GET /metrics in Prometheus' text format, OTLP_GRPC
    # pushes the same figures to an OpenTelemetry collector (the otlp extra), see
    # docs/metrics.md; an empty host means bindAddress; metricsLabel adds "k:v,k2:v2" labels
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557  # 0 = any free port
    metrics_label: str = ""
    metrics_grpc_exporter_target: str = ""  # host:port (TLS) or http://host:port (plain)
    metrics_grpc_exporter_header: str = ""  # "k:v,k2:v2", sent as gRPC metadata
    metric_grpc_exporter_time_out_in_mills: int = 3000
    metric_grpc_exporter_interval_in_mills: int = 60_000

    # 5.x: POP (broker/pop/, docs/pop.md), Java 5.3.3's keys and defaults
    ack_message_thread_pool_nums: int = 16
    ack_thread_pool_queue_capacity: int = 100_000
    wait_time_mills_in_ack_queue: int = 3000  # ms
    revive_queue_num: int = 8  # queues of rmq_sys_REVIVE_LOG_<cluster>; read at start-up only
    revive_interval: int = 1000  # ms between revive rounds
    revive_max_slow: int = 3  # an idle revive queue waits up to this many more intervals
    revive_scan_time: int = 10_000  # ms one round may read the revive queue
    revive_ack_wait_ms: int = 180_000  # ms an ack waits for its check point to be read
    enable_pop_buffer_merge: bool = False
    pop_ck_stay_buffer_time: int = 10_000  # ms
    pop_ck_stay_buffer_time_out: int = 3000  # ms
    pop_ck_max_buffer_size: int = 200_000
    pop_ck_offset_max_queue_size: int = 20_000
    enable_pop_batch_ack: bool = False
    pop_polling_size: int = 1024  # held pops per topic@group@queueId
    pop_polling_map_size: int = 100_000
    max_pop_polling_size: int = 100_000  # held pops in all
    pop_long_polling_force_notify_interval: int = 800
    enable_notify_after_pop_order_lock_release: bool = True
    init_pop_offset_by_check_msg_in_mem: bool = True
    enable_retry_topic_v2: bool = False
    retrieve_message_from_pop_retry_topic_v1: bool = True
    pop_from_retry_probability: int = 20  # %
    pop_response_return_actual_retry_topic: bool = False
    enable_pop_message_threshold: bool = False
    pop_inflight_message_threshold: int = 10_000
    enable_pop_log: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port must be in 0..65535, got {self.listen_port!r}")
        if self.broker_id < 0:
            raise ValueError(f"broker_id must be >= 0, got {self.broker_id!r}")
        if not self.broker_name or not self.broker_cluster_name:
            raise ValueError("broker_name and broker_cluster_name must not be empty")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ValueError(
                f"default_topic_queue_nums must be in 1..1024, got {self.default_topic_queue_nums!r}"
            )
        for name in (
            "send_message_thread_pool_nums",
            "pull_message_thread_pool_nums",
            "query_message_thread_pool_nums",
            "admin_broker_thread_pool_nums",
            "client_manage_thread_pool_nums",
            "consumer_manage_thread_pool_nums",
            "heartbeat_thread_pool_nums",
            "end_transaction_thread_pool_nums",
            "send_thread_pool_queue_capacity",
            "pull_thread_pool_queue_capacity",
            "query_thread_pool_queue_capacity",
            "client_manager_thread_pool_queue_capacity",
            "consumer_manager_thread_pool_queue_capacity",
            "heartbeat_thread_pool_queue_capacity",
            "end_transaction_pool_queue_capacity",
            "load_balance_processor_thread_pool_nums",
            "load_balance_thread_pool_queue_capacity",
            "load_balance_poll_name_server_interval",
            "wait_time_mills_in_send_queue",
            "wait_time_mills_in_pull_queue",
            "wait_time_mills_in_heartbeat_queue",
            "wait_time_mills_in_transaction_queue",
            "short_polling_time_mills",
            "flush_consumer_offset_interval",
            "rebalance_lock_max_live_time",
            "channel_expired_timeout",
            "register_broker_timeout_mills",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.metrics_exporter_type is MetricsExporterType.LOG:
            raise ValueError(
                "metricsExporterType LOG is not supported by finchmq: "
                "use PROM (Prometheus, GET /metrics), OTLP_GRPC or DISABLE"
            )
        if self.metrics_exporter_type is MetricsExporterType.OTLP_GRPC:
            if not self.metrics_grpc_exporter_target.strip():
                raise ValueError(
                    "metricsExporterType=OTLP_GRPC needs metricsGrpcExporterTarget: the collector's "
                    "host:port (TLS) or http://host:port (plain)"
                )
            parse_otlp_headers(self.metrics_grpc_exporter_header)
            for name in ("metric_grpc_exporter_time_out_in_mills", "metric_grpc_exporter_interval_in_mills"):
                if getattr(self, name) <= 0:
                    raise ValueError(f"{snake_to_camel(name)} must be > 0, got {getattr(self, name)!r}")
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise ValueError(
                f"metricsPromExporterPort must be in 0..65535, got {self.metrics_prom_exporter_port!r}"
            )
        for item in filter(None, self.metrics_label.split(",")):
            key, sep, value = item.partition(":")
            if not sep or not _LABEL_NAME.match(key.strip()) or not value.strip() or ":" in value:
                raise ValueError(f"metricsLabel must be 'key:value,key:value', got {self.metrics_label!r}")
        for name in (  # 5.x: POP
            "ack_message_thread_pool_nums",
            "ack_thread_pool_queue_capacity",
            "wait_time_mills_in_ack_queue",
            "revive_queue_num",
            "revive_interval",
            "revive_scan_time",
            "pop_ck_max_buffer_size",
            "pop_ck_offset_max_queue_size",
            "pop_polling_size",
            "pop_polling_map_size",
            "max_pop_polling_size",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 <= self.pop_from_retry_probability <= 100:
            raise ValueError(
                f"pop_from_retry_probability must be in 0..100, got {self.pop_from_retry_probability!r}"
            )
        if not 0 <= self.overload_pause_read_mills <= 60_000:
            raise ValueError(
                f"overload_pause_read_mills must be in 0..60000, got {self.overload_pause_read_mills!r}"
            )

    @property
    def metrics_labels(self) -> dict[str, str]:
        """``metricsLabel`` as a dict (validated at construction)."""
        pairs = (item.partition(":") for item in self.metrics_label.split(",") if item)
        return {key.strip(): value.strip() for key, _, value in pairs}

    @property
    def broker_addr(self) -> str:
        """The address published in routes and stored as STOREHOST."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.listen_port + 1}"

    @property
    def namesrv_addrs(self) -> list[str]:
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    @property
    def register_period_ms(self) -> int:
        return max(10_000, min(self.register_name_server_period, 60_000))
