"""The 5.x gRPC endpoint of a broker in this process (local mode) and of a cluster (``finchmq proxy``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from finchmq.broker import BrokerController
from finchmq.cli.credentials import inner_client_credentials, tools_yml_credentials
from finchmq.client import SessionCredentials
from finchmq.common.settings import snake_to_camel
from finchmq.grpc import GrpcServer
from finchmq.grpc.auth import AclAuthorizer, AuthAuthorizer
from finchmq.grpc.backend import LocalBackend
from finchmq.grpc.cluster import ClusterBackend
from finchmq.grpc.config import GrpcConfig

GRPC_KEYS = frozenset(
    snake_to_camel(f.name)
    for f in dataclasses.fields(GrpcConfig)
    if f.name not in ("bind_address", "max_message_size")
)
"""broker.conf keys of the gRPC endpoint (the bind address and message size are the broker's)."""

PROXY_KEYS = frozenset(snake_to_camel(f.name) for f in dataclasses.fields(GrpcConfig))
"""rmq-proxy.json keys ``finchmq proxy`` reads (with ``innerClientAuthenticationCredentials``)."""


def local_grpc_server(broker: BrokerController, config: GrpcConfig) -> GrpcServer:
    """A ``GrpcServer`` serving ``broker`` in-process, as Java's proxy in local mode; with
    ``aclEnable=true`` every call is checked against the broker's ACL accounts (``AclAuthorizer``),
    with ``authenticationEnabled``/``authorizationEnabled`` against its ACL 2.0 users and ACLs
    (``AuthAuthorizer``), without either anyone may call."""
    backend = LocalBackend(
        broker.server.dispatcher,
        broker_name=broker.config.broker_name,
        host=broker.config.broker_ip1,
        topic_config=broker.topic_config_manager.select_topic_config,
        group_config=broker.subscription_group_manager.find_subscription_group_config,
    )
    authorizer: AclAuthorizer | AuthAuthorizer | None = None
    if broker.acl is not None:
        authorizer = AclAuthorizer(broker.acl.check_grpc)
    elif broker.auth_checker is not None and broker.auth_checker.enabled:
        authorizer = AuthAuthorizer(broker.auth_checker.check_grpc)
    return GrpcServer(backend, config, authorizer)


def cluster_credentials(
    config: GrpcConfig, inner_credentials: str, environ: Mapping[str, str] | None = None
) -> SessionCredentials | None:
    """The keys a cluster-mode proxy signs its remoting calls with (Java 5.3.3
    ``DefaultMessagingProcessor.createForClusterMode``): none unless
    ``enableAclRpcHookForClusterMode``; then ``innerClientAuthenticationCredentials`` when set
    (``None`` if a key in it is blank), else the keys of ``$ROCKETMQ_HOME/conf/tools.yml``.

    Raises ValueError for credentials that do not read.
    """
    if not config.enable_acl_rpc_hook_for_cluster_mode:
        return None
    if inner_credentials.strip():
        return inner_client_credentials(inner_credentials)
    return tools_yml_credentials(environ)


def cluster_grpc_server(
    namesrv_addr: str, config: GrpcConfig, credentials: SessionCredentials | None = None
) -> GrpcServer:
    """A ``GrpcServer`` in front of every broker registered with ``namesrv_addr``
    (``host:port;host:port``), over remoting, as Java's proxy in cluster mode; with
    ``credentials`` its remoting calls are signed (``cluster_credentials``), so brokers with an
    ACL accept them. The 5.x clients themselves are not checked (Java's proxy does with its own
    authentication settings): whoever reaches the port acts as ``credentials``.

    Raises ValueError for a bad name server address.
    """
    backend = ClusterBackend(
        namesrv_addr, call_timeout_millis=config.broker_call_timeout_mills, credentials=credentials
    )
    return GrpcServer(backend, config)
