"""Transport settings with RocketMQ's names (``NettyServerConfig``/``NettyClientConfig``) and defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from finchmq.protocol.codec import DEFAULT_MAX_FRAME_SIZE

from .tls import TlsConfig

__all__ = ["RemotingClientConfig", "RemotingServerConfig"]


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RemotingServerConfig:
    bind_address: str = "0.0.0.0"
    listen_port: int = 10911
    server_channel_max_idle_time_seconds: float = 120  # s; 0 disables the idle close
    server_async_semaphore_value: int = 64  # server -> client async calls in flight
    server_oneway_semaphore_value: int = 256
    server_socket_backlog: int = 1024
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # bytes; Java frameMaxLength
    tls: TlsConfig = field(default_factory=TlsConfig)  # tls.server.mode etc. (Java: system properties)
    tls_handshake_timeout_seconds: float = 10.0  # s; a TLS client's handshake (Netty's default)

    def __post_init__(self) -> None:
        _positive("tls_handshake_timeout_seconds", self.tls_handshake_timeout_seconds)
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port must be in 0..65535, got {self.listen_port!r}")
        if self.server_channel_max_idle_time_seconds < 0:
            raise ValueError(
                "server_channel_max_idle_time_seconds must be >= 0, "
                f"got {self.server_channel_max_idle_time_seconds!r}"
            )
        _positive("server_async_semaphore_value", self.server_async_semaphore_value)
        _positive("server_oneway_semaphore_value", self.server_oneway_semaphore_value)
        _positive("max_frame_size", self.max_frame_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class RemotingClientConfig:
    connect_timeout_millis: int = 3000  # ms
    client_channel_max_idle_time_seconds: float = 120  # s; 0 disables the idle close
    client_async_semaphore_value: int = 65535
    client_oneway_semaphore_value: int = 65535
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # bytes
    use_tls: bool = False  # Java NettyClientConfig.useTLS (tls.enable)
    tls: TlsConfig = field(default_factory=TlsConfig)  # tls.client.* when use_tls

    def __post_init__(self) -> None:
        _positive("connect_timeout_millis", self.connect_timeout_millis)
        if self.client_channel_max_idle_time_seconds < 0:
            raise ValueError(
                "client_channel_max_idle_time_seconds must be >= 0, "
                f"got {self.client_channel_max_idle_time_seconds!r}"
            )
        _positive("client_async_semaphore_value", self.client_async_semaphore_value)
        _positive("client_oneway_semaphore_value", self.client_oneway_semaphore_value)
        _positive("max_frame_size", self.max_frame_size)
