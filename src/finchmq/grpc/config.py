"""The gRPC front end's settings, with Java ``ProxyConfig``'s names and defaults (5.3.3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcConfig:
    grpc_server_port: int = 8081
    grpc_server_impl: str = "grpclib"  # grpclib (pure Python, the default) or grpcio (C core, optional)
    bind_address: str = "0.0.0.0"
    grpc_max_inbound_message_size: int = 130 * 1024 * 1024  # one gRPC message, as Java's proxy
    max_message_size: int = 4 * 1024 * 1024  # maxMessageSize: a body larger is MESSAGE_BODY_TOO_LARGE
    max_user_property_size: int = 16 * 1024  # maxUserPropertySize: properties + tag + keys
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    max_delay_time_mills: int = 24 * 3600 * 1000
    max_transaction_recovery_second: int = 3600
    transaction_data_expire_millis: int = 30_000  # a half message's data, kept for EndTransaction
    transaction_data_max_num: int = 15  # per (producer group, transaction id)
    enable_topic_message_type_check: bool = True
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    grpc_client_idle_time_mills: int = 120_000
    grpc_proxy_relay_request_timeout_in_seconds: int = 5
    broker_call_timeout_mills: int = 3_000  # a remoting call to a broker (not a long poll)
    # auto-renewed receipt handles (ReceiveMessage auto_renew: the PushConsumer's), renew.py
    enable_proxy_auto_renew: bool = True
    renew_ahead_time_millis: int = 10_000
    renew_max_time_millis: int = 3 * 3600 * 1000
    renew_schedule_period_millis: int = 5_000
    max_renew_retry_times: int = 3
    invisible_time_millis_when_clear: int = 1_000
    # cluster mode: sign the remoting calls to the brokers with innerClientAuthenticationCredentials,
    # else with $ROCKETMQ_HOME/conf/tools.yml's keys (Java's createForClusterMode)
    enable_acl_rpc_hook_for_cluster_mode: bool = False
    # TLS on the gRPC port when both are set (ProxyConfig tlsCertPath/tlsKeyPath; Java's default
    # tlsTestModeEnable self-signed certificate and its plaintext-beside-TLS port are not done)
    tls_cert_path: str | None = None  # PEM certificate chain
    tls_key_path: str | None = None  # PEM private key

    def __post_init__(self) -> None:
        if not 0 <= self.grpc_server_port <= 65535:
            raise ValueError(f"grpcServerPort must be in 0..65535, got {self.grpc_server_port!r}")
        if self.grpc_server_impl not in ("grpclib", "grpcio"):
            raise ValueError(f"grpcServerImpl must be grpclib or grpcio, got {self.grpc_server_impl!r}")
        if (self.tls_cert_path is None) != (self.tls_key_path is None):
            raise ValueError("TLS needs both a certificate (tlsCertPath) and a key (tlsKeyPath)")
