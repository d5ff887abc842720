"""Blocking finchmq clients shared by everything the data source runs in one Python process.

Owns: one ``BlockingPullConsumer``, ``BlockingAdminClient`` or ``BlockingProducer`` per
(process, name server, credentials, TLS settings[, group], namespace), created on first use and
closed at exit; ``security`` is the one place the ACL keys and the TLS settings become client
settings. Spark reuses its Python workers across tasks, so a worker connects once and every later
task of any query reuses the connections, routes and portal thread. Imports: ``finchmq.client``
and ``.options``.

The client instance name carries the process id and a hash of the name-server address: the
client shares one ``MQClientInstance`` per instance name, and an instance talks to the name
server its first user gave, so two queries on different clusters must not share one.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import zlib
from collections.abc import Callable
from typing import Final, TypedDict, TypeVar

from finchmq.client import (
    BlockingAdminClient,
    BlockingProducer,
    BlockingPullConsumer,
    MQClientError,
    SessionCredentials,
    TlsConfig,
)

from .options import namespaced

__all__ = [
    "READER_GROUP",
    "Security",
    "close_shared_clients",
    "security",
    "shared_admin",
    "shared_client",
    "shared_producer",
    "shared_pull_consumer",
]

log = logging.getLogger(__name__)

READER_GROUP: Final = "finchmq-spark-reader"
"""The group the source pulls with. Pulls commit nothing; the group never rebalances (it pulls
actively), so sharing it between queries is harmless. ``consumerGroup`` offsets are committed
through the admin API instead, without joining that group."""

_lock = threading.Lock()
_clients: dict[tuple[object, ...], BlockingPullConsumer | BlockingAdminClient | BlockingProducer] = {}
_pid = os.getpid()


def _instance_name(name_server: str) -> str:
    return f"finchmq-spark-{os.getpid()}-{zlib.crc32(name_server.encode()):08x}"


def _check_fork() -> None:
    global _pid  # noqa: PLW0603 - a forked child must not use its parent's connections
    if os.getpid() != _pid:
        _clients.clear()
        _pid = os.getpid()


class Security(TypedDict):
    """``ClientConfig``'s ACL and TLS settings."""

    session_credentials: SessionCredentials | None
    use_tls: bool
    tls: TlsConfig


def security(credentials: SessionCredentials | None, tls: TlsConfig) -> Security:
    """The client settings that sign (ACL 1.0 keys) and encrypt (``tls.enable``: TLS with
    ``tls``'s ``tls.client.*`` settings) every request of a client the data source builds."""
    return {"session_credentials": credentials, "use_tls": bool(tls.enable), "tls": tls}


_Client = TypeVar("_Client", bound=BlockingPullConsumer | BlockingAdminClient | BlockingProducer)


def _shared(key: tuple[object, ...], make: Callable[[], _Client]) -> _Client:
    """The started client under ``key``, made and started on first use in this process."""
    with _lock:
        _check_fork()
        client = _clients.get(key)
        if client is None:
            client = make()
            client.start()
            _clients[key] = client
        return client  # type: ignore[return-value]  # each key's kind is fixed by its first element


def shared_client(key: tuple[object, ...], make: Callable[[str], _Client]) -> _Client:
    """The started client under ``key`` (its second element the name server), made on first use
    in this process by ``make(instance name base)``."""
    name_server = str(key[1])
    return _shared(key, lambda: make(_instance_name(name_server)))


_PLAIN: Final = TlsConfig()


def shared_pull_consumer(
    name_server: str,
    credentials: SessionCredentials | None = None,
    namespace: str | None = None,
    tls: TlsConfig = _PLAIN,
) -> BlockingPullConsumer:
    """The process's started pull consumer for ``name_server`` (signing with ``credentials``,
    over TLS as ``tls`` says).

    With ``namespace`` its group is ``namespace%finchmq-spark-reader``; the consumer itself is
    given no namespace, so its callers give queues as the broker knows them (``namespaced``)."""
    return _shared(
        ("pull", name_server, credentials, tls, namespace),
        lambda: BlockingPullConsumer(
            namespaced(namespace).with_namespace(READER_GROUP),
            namesrv_addr=name_server,
            instance_name=_instance_name(name_server),
            **security(credentials, tls),
        ),
    )


def shared_admin(
    name_server: str, credentials: SessionCredentials | None = None, tls: TlsConfig = _PLAIN
) -> BlockingAdminClient:
    """The process's started admin client for ``name_server`` (signing with ``credentials``, over
    TLS as ``tls`` says)."""
    return _shared(
        ("admin", name_server, credentials, tls),
        lambda: BlockingAdminClient(
            namesrv_addr=name_server,
            instance_name=_instance_name(name_server) + "-admin",
            **security(credentials, tls),
        ),
    )


def shared_producer(
    name_server: str,
    group: str,
    send_timeout_ms: int,
    credentials: SessionCredentials | None = None,
    namespace: str | None = None,
    tls: TlsConfig = _PLAIN,
) -> BlockingProducer:
    """The process's started producer of ``group`` for ``name_server`` (signing with ``credentials``,
    over TLS as ``tls`` says; in ``namespace``: the client wraps its group and topics, and unwraps
    what it hands back)."""
    return _shared(
        ("producer", name_server, group, str(send_timeout_ms), credentials, tls, namespace),
        lambda: BlockingProducer(
            group,
            namesrv_addr=name_server,
            instance_name=_instance_name(name_server) + f"-{send_timeout_ms}",
            send_msg_timeout=send_timeout_ms,
            namespace=namespace,
            **security(credentials, tls),
        ),
    )


def close_shared_clients() -> None:
    """Close every client of this process (at exit, and in tests)."""
    with _lock:
        clients = list(_clients.values()) if os.getpid() == _pid else []
        _clients.clear()
    for client in clients:
        try:
            client.shutdown()
        except (MQClientError, TimeoutError, RuntimeError) as exc:
            log.warning("closing %s failed: %s", type(client).__name__, exc)


atexit.register(close_shared_clients)
