"""``finchmq namesrv``, ``finchmq broker``, ``finchmq server`` and ``finchmq proxy``: run the servers.

Configuration follows RocketMQ: ``broker.conf`` is a Java properties file with RocketMQ's key
names (brokerClusterName, brokerName, brokerId, namesrvAddr, listenPort, storePathRootDir,
flushDiskType, autoCreateTopicEnable, ...); unknown keys are warned about and a bad value stops
start-up with a message naming the key. ``NAMESRV_ADDR`` is read from the environment as
RocketMQ does. SIGTERM and SIGINT shut down cleanly: flush, persist offsets, unregister.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from finchmq.broker import BrokerConfig, BrokerController
from finchmq.cli.console import DEFAULT_CONSOLE_PORT, add_login_arguments, start_console
from finchmq.cli.credentials import add_credential_options, session_credentials
from finchmq.cli.grpc import (
    GRPC_KEYS,
    PROXY_KEYS,
    cluster_credentials,
    cluster_grpc_server,
    local_grpc_server,
)
from finchmq.client import SessionCredentials
from finchmq.common import SettingsError, config_from_properties, parse_properties
from finchmq.common.metrics import MetricsExporterType
from finchmq.grpc import GrpcServer
from finchmq.grpc.config import GrpcConfig
from finchmq.namesrv import NamesrvConfig, NamesrvController
from finchmq.remoting import TlsConfig, TlsConfigError, parse_addr, run
from finchmq.remoting.tls import is_tls_key
from finchmq.store import MessageStoreConfig
from finchmq.store.config import BrokerRole
from finchmq.testing.cluster import BrokerProcess

__all__ = ["add_server_parsers", "host_address", "load_broker_config"]

log = logging.getLogger("finchmq.cli")

DEFAULT_DATA_DIR = Path("finchmq-data")
DEFAULT_METRICS_PORT = 5557  # Java 5.x's metricsPromExporterPort


class ConfigError(Exception):
    """A configuration problem the user must fix; printed without a traceback."""


def host_address() -> str:
    """The host's first non-loopback IPv4 address (Java ``RemotingUtil.getLocalAddress``), else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))  # no packet is sent
            address = probe.getsockname()[0]
            if address and not address.startswith("127."):
                return str(address)
    except OSError:
        pass
    return "127.0.0.1"


def load_broker_config(
    conf_file: Path | None, overrides: dict[str, str], *, default_store_dir: Path
) -> tuple[BrokerConfig, MessageStoreConfig, dict[str, str]]:
    """broker.conf + command-line overrides -> (broker config, store config, every key given).

    Raises ConfigError for an unreadable file or a bad value.
    """
    props: dict[str, str] = {}
    if conf_file is not None:
        try:
            props = parse_properties(conf_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the broker config {conf_file}: {exc.strerror}") from None
    props.update(overrides)
    if "namesrvAddr" not in props and os.environ.get("NAMESRV_ADDR"):
        props["namesrvAddr"] = os.environ["NAMESRV_ADDR"]
    base_broker = BrokerConfig(broker_ip1=host_address())
    base_store = MessageStoreConfig(store_path_root_dir=default_store_dir)
    try:
        tls_properties(props)  # the tls.* keys: checked here, read by the broker
        broker, rest = config_from_properties(
            base_broker, {k: v for k, v in props.items() if not is_tls_key(k)}
        )
        store, unknown = base_store.with_properties(rest)
    except SettingsError as exc:
        source = f" in {conf_file}" if conf_file else ""
        raise ConfigError(f"bad broker configuration{source}: {exc}") from None
    for key in sorted(unknown):
        if key not in GRPC_KEYS:
            log.warning("unknown broker.conf key %r ignored (value %r)", key, unknown[key])
    if not broker.broker_ip2:
        broker = replace(broker, broker_ip2=broker.broker_ip1)
    if store.broker_role is BrokerRole.SLAVE:
        if broker.broker_id <= 0:
            raise ConfigError("a SLAVE's brokerId must be > 0 (brokerRole=SLAVE, brokerId=0 is the master's)")
    elif broker.broker_id != 0:  # Java BrokerStartup: a master is brokerId 0 whatever the file says
        log.warning("brokerId=%d ignored: a %s is brokerId 0", broker.broker_id, store.broker_role.value)
        broker = replace(broker, broker_id=0)
    store = replace(store, ha_listen_port=broker.listen_port + 1)
    return broker, store, props


def tls_properties(props: dict[str, str]) -> TlsConfig:
    """The ``tls.*`` keys of a config file (and ``tls.config.file``'s); ConfigError if bad."""
    try:
        return TlsConfig.from_properties({k: v for k, v in props.items() if is_tls_key(k)})
    except TlsConfigError as exc:
        raise ConfigError(str(exc)) from None


def load_namesrv_config(conf_file: Path | None, base: NamesrvConfig) -> tuple[NamesrvConfig, TlsConfig]:
    """A namesrv.conf (Java ``mqnamesrv -c``): NamesrvConfig keys and the ``tls.*`` keys."""
    if conf_file is None:
        return base, TlsConfig()
    try:
        props = parse_properties(conf_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the name server config {conf_file}: {exc.strerror}") from None
    tls = tls_properties(props)
    try:
        config, unknown = config_from_properties(base, {k: v for k, v in props.items() if not is_tls_key(k)})
    except SettingsError as exc:
        raise ConfigError(f"bad name server configuration in {conf_file}: {exc}") from None
    for key in sorted(unknown):
        log.warning("unknown name server config key %r ignored (value %r)", key, unknown[key])
    return config, tls


def add_server_parsers(commands: Any) -> None:
    namesrv = commands.add_parser(
        "namesrv",
        help="run a name server",
        description="Run a RocketMQ-compatible name server.",
    )
    namesrv.add_argument(
        "-c", "--config", type=Path, help="namesrv.conf: NamesrvConfig keys and tls.* (TLS) settings"
    )
    namesrv.add_argument("--port", type=int, default=9876, help="listen port (default 9876)")
    namesrv.add_argument("--bind", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    namesrv.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where kvConfig.json lives (default ./finchmq-data)",
    )
    namesrv.add_argument(
        "--metrics-port",
        type=_port,
        default=0,
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default 0: off; 5558 is usual)",
    )
    namesrv.set_defaults(handler=_run_namesrv)

    broker = commands.add_parser(
        "broker",
        help="run a broker",
        description="Run a RocketMQ-compatible broker configured by a broker.conf (Java properties).",
    )
    broker.add_argument("-c", "--config", type=Path, help="broker.conf with RocketMQ's key names")
    broker.add_argument(
        "-n", "--namesrv", help="name server address(es), 'host:port;host:port' (namesrvAddr)"
    )
    broker.add_argument("--port", type=int, help="listen port (listenPort, default 10911)")
    broker.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="storePathRootDir default is DATA_DIR/store"
    )
    broker.set_defaults(handler=_run_broker)

    server = commands.add_parser(
        "server",
        help="run a name server and a broker in one process (the embedded default)",
        description=(
            "Run a name server and a broker in one process: the embedded default. Data lives in "
            "DATA_DIR (./finchmq-data); the broker registers with the embedded name server."
        ),
    )
    server.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="data directory (default ./finchmq-data)"
    )
    server.add_argument("--namesrv-port", type=int, default=9876, help="name server port (default 9876)")
    server.add_argument("--broker-port", type=int, default=10911, help="broker port (default 10911)")
    server.add_argument(
        "--brokers",
        type=int,
        default=1,
        metavar="N",
        help=(
            "run N brokers (broker-a, broker-b, ...; default 1): the first in this process, the others as "
            "child processes on --broker-port + 10, + 20, ..., each with its own store under "
            "DATA_DIR/<name>; "
            "clients spread over them through the routes, so N uses N cores"
        ),
    )
    server.add_argument("--broker-ip", help="address the broker advertises (brokerIP1; default: this host's)")
    server.add_argument("--bind", default="0.0.0.0", help="listen address of both servers (default 0.0.0.0)")
    server.add_argument("-c", "--config", type=Path, help="broker.conf with extra broker settings")
    server.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        help=f"serve both servers' Prometheus metrics at http://HOST:PORT/metrics (default "
        f"{DEFAULT_METRICS_PORT}, skipped with a warning when taken; 0: off)",
    )
    server.add_argument(
        "--grpc-port",
        type=_port,
        default=None,
        help="serve RocketMQ 5.x clients (gRPC MessagingService, as Java's proxy) on PORT (default 8081, "
        "skipped with a warning when taken; 0: off; broker.conf grpcServerPort works too); with "
        "--brokers N > 1 it fronts all N brokers (the proxy's cluster mode), so 5.x clients need only it",
    )
    server.add_argument(
        "--console-port",
        type=_port,
        default=None,
        help=f"serve the web console at http://127.0.0.1:PORT/ (default {DEFAULT_CONSOLE_PORT}, "
        "skipped with a warning when taken; 0: off)",
    )
    server.add_argument(
        "--console-bind",
        default="127.0.0.1",
        help="web console listen address (default 127.0.0.1: this machine only; another address needs "
        "--console-users)",
    )
    add_login_arguments(server, "console-")
    add_credential_options(server, "console-", "the console's requests to the broker (its ACL)")
    server.set_defaults(handler=_run_server)

    proxy = commands.add_parser(
        "proxy",
        help="serve RocketMQ 5.x clients (gRPC) in front of a cluster's brokers (Java's proxy, cluster mode)",
        description=(
            "Serve RocketMQ 5.x clients (gRPC apache.rocketmq.v2.MessagingService) in front of the "
            "brokers registered with the name servers, as Java's rocketmq-proxy does in cluster mode. "
            "Clients need only this endpoint: routes list every broker's queues behind it, and each "
            "call goes over remoting to the broker it is for (sends, receives and acks to the "
            "message queue's broker; heartbeats to every master). Routes and configs are re-read from "
            "the name servers and brokers every few seconds."
        ),
    )
    proxy.add_argument(
        "-n",
        "--namesrv",
        help="name server address(es), 'host:port;host:port' (namesrvAddr; default $NAMESRV_ADDR)",
    )
    proxy.add_argument("--grpc-port", type=_port, help="gRPC listen port (grpcServerPort, default 8081)")
    proxy.add_argument("--bind", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    proxy.add_argument(
        "-pc",
        "--proxy-config",
        type=Path,
        help=(
            "Java's rmq-proxy.json: the gRPC keys (grpcServerPort, ...), and, to sign the calls to "
            "brokers with an ACL, enableAclRpcHookForClusterMode=true with "
            'innerClientAuthenticationCredentials={"accessKey":..,"secretKey":..} (else the keys of '
            "$ROCKETMQ_HOME/conf/tools.yml)"
        ),
    )
    proxy.set_defaults(handler=_run_proxy)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, got {port}")
    return port


def _stop_on_signal() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT; installed before start-up so no signal is missed."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def _print(line: str) -> None:
    print(line, flush=True)


async def _namesrv_main(args: argparse.Namespace, config: NamesrvConfig, tls: TlsConfig) -> None:
    stop = _stop_on_signal()
    async with NamesrvController(config, tls=tls) as namesrv:
        _print(f"finchmq name server listening on {namesrv.address} (TLS {tls.server_mode.value})")
        if namesrv.metrics_server is not None:
            _print(f"metrics at {namesrv.metrics_server.url}")
        await stop.wait()
        _print("finchmq name server shutting down")


def _namesrv_config(args: argparse.Namespace) -> NamesrvConfig:
    return NamesrvConfig(
        listen_port=args.port,
        bind_address=args.bind,
        kv_config_path=args.data_dir / "namesrv" / "kvConfig.json",
        metrics_exporter_type=MetricsExporterType.PROM if args.metrics_port else MetricsExporterType.DISABLE,
        metrics_prom_exporter_port=args.metrics_port or 5558,
    )


def load_grpc_config(
    props: dict[str, str], broker: BrokerConfig, store: MessageStoreConfig, port: int | None = None
) -> GrpcConfig:
    """The gRPC endpoint's settings: broker.conf's gRPC keys (``grpcServerPort``, ``tlsCertPath``...),
    the broker's bind address and message size limit; ``port`` (the command line) wins.

    Raises ConfigError for a bad value.
    """
    given = {k: v for k, v in props.items() if k in GRPC_KEYS}
    if port is not None:
        given["grpcServerPort"] = str(port)
    base = GrpcConfig(bind_address=broker.bind_address, max_message_size=store.max_message_size)
    try:
        config, _ = config_from_properties(base, given)
    except SettingsError as exc:
        raise ConfigError(f"bad gRPC configuration: {exc}") from None
    return config


async def _start_grpc(
    broker: BrokerController, config: GrpcConfig, *, explicit: bool, cluster_namesrv: str | None = None
) -> GrpcServer | None:
    """The 5.x endpoint, unless its port is 0: of ``broker`` (local mode), or with
    ``cluster_namesrv`` of every broker registered there (cluster mode). The default port taken is
    a warning (the broker runs on without it); a port the user asked for is an error."""
    if not config.grpc_server_port:
        return None
    if cluster_namesrv is None:
        server = local_grpc_server(broker, config)
    else:
        credentials = cluster_credentials(config, broker.config.inner_client_authentication_credentials)
        server = cluster_grpc_server(cluster_namesrv, config, credentials)
    try:
        await server.start()
    except OSError as exc:
        await server.close()
        if explicit:
            raise OSError(exc.errno, f"gRPC port {config.grpc_server_port}: {exc.strerror}") from exc
        _print(
            f"warning: gRPC port {config.grpc_server_port} on {config.bind_address} is in use; "
            "running without the 5.x endpoint (choose a port with --grpc-port)"
        )
        return None
    mode = "" if cluster_namesrv is None else " (cluster mode: every broker behind it)"
    _print(
        f"finchmq gRPC endpoint for RocketMQ 5.x clients at {broker.config.broker_ip1}:{server.port}{mode}"
    )
    return server


async def _broker_main(
    broker_config: BrokerConfig,
    store_config: MessageStoreConfig,
    conf_file: Path | None,
    props: dict[str, str],
) -> None:
    began = time.monotonic()
    stop = _stop_on_signal()
    broker = BrokerController(broker_config, store_config, config_file=conf_file, extra_properties=props)
    grpc: GrpcServer | None = None
    try:
        await broker.start()
        if "grpcServerPort" in props:  # finchmq broker serves 5.x clients when its conf asks
            grpc = await _start_grpc(
                broker, load_grpc_config(props, broker_config, store_config), explicit=True
            )
    except BaseException:
        if grpc is not None:
            await grpc.close()
        await broker.close()
        raise
    try:
        name, cluster = broker_config.broker_name, broker_config.broker_cluster_name
        _print(
            f"finchmq broker {name} ({cluster}) {store_config.broker_role.value} brokerId="
            f"{broker_config.broker_id} at {broker.broker_addr}, HA port {broker.ha_service.port}, "
            f"store {store_config.store_path_root_dir}, name servers {broker_config.namesrv_addr or 'none'} "
            f"(ready in {(time.monotonic() - began) * 1000:.0f} ms)"
        )
        if broker.metrics_server is not None:
            _print(f"metrics at {broker.metrics_server.url}")
        if broker.metrics_exporter is not None:
            _print(f"metrics pushed over OTLP to {broker.metrics_exporter.endpoint}")
        await stop.wait()
        _print("finchmq broker shutting down")
    finally:
        if grpc is not None:
            await grpc.close()
        await broker.close()


async def _proxy_main(namesrv_addr: str, config: GrpcConfig, credentials: SessionCredentials | None) -> None:
    stop = _stop_on_signal()
    server = cluster_grpc_server(namesrv_addr, config, credentials)
    await server.start()
    try:
        signing = f", signing as {credentials.access_key}" if credentials is not None else ""
        _print(
            f"finchmq proxy: gRPC endpoint for RocketMQ 5.x clients at {server.address} in front of the "
            f"brokers of name servers {namesrv_addr}{signing}"
        )
        await stop.wait()
        _print("finchmq proxy shutting down")
    finally:
        await server.close()


def _run_proxy(args: argparse.Namespace) -> int:
    namesrv_addr = args.namesrv or os.environ.get("NAMESRV_ADDR")
    if not namesrv_addr:
        print(
            "finchmq proxy: give the name servers with --namesrv HOST:PORT (or NAMESRV_ADDR)", file=sys.stderr
        )
        return 2
    try:
        config, inner = load_proxy_config(args.proxy_config, GrpcConfig(bind_address=args.bind))
        if args.grpc_port is not None:
            config = replace(config, grpc_server_port=args.grpc_port)
        credentials = cluster_credentials(config, inner)
        for addr in namesrv_addr.split(";"):
            parse_addr(addr)
    except (ValueError, ConfigError) as exc:
        print(f"finchmq proxy: {exc}", file=sys.stderr)
        return 2
    if config.enable_acl_rpc_hook_for_cluster_mode and credentials is None:
        print(
            "finchmq proxy: enableAclRpcHookForClusterMode=true but no keys to sign with "
            "(innerClientAuthenticationCredentials, or accessKey/secretKey in $ROCKETMQ_HOME/conf/tools.yml)",
            file=sys.stderr,
        )
        return 2
    return _run_or_report(_proxy_main(namesrv_addr, config, credentials))


_INNER_CREDENTIALS = "innerClientAuthenticationCredentials"


def load_proxy_config(path: Path | None, base: GrpcConfig) -> tuple[GrpcConfig, str]:
    """(the gRPC settings, ``innerClientAuthenticationCredentials``) of Java's ``rmq-proxy.json``
    (a JSON object of ``ProxyConfig``/``AuthConfig`` keys; the credentials may be the JSON text
    Java expects or an object). Keys finchmq's proxy has no use for are named on stderr.

    Raises ConfigError for a file that does not read or a bad value.
    """
    if path is None:
        return base, ""
    try:
        tree = json.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a JSON object of ProxyConfig keys")
    inner = tree.pop(_INNER_CREDENTIALS, "")
    if isinstance(inner, dict):
        inner = json.dumps(inner)
    if not isinstance(inner, str):
        raise ConfigError(f'{path}: {_INNER_CREDENTIALS} must be {{"accessKey":..,"secretKey":..}}')

    def text(value: object) -> str:
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    given = {k: text(v) for k, v in tree.items() if k in PROXY_KEYS}
    ignored = sorted(k for k in tree if k not in PROXY_KEYS)
    if ignored:
        print(
            f"finchmq proxy: {path}: ignoring keys finchmq's proxy does not use: {', '.join(ignored)}",
            file=sys.stderr,
        )
    try:
        config, _ = config_from_properties(base, given)
    except SettingsError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return config, inner


def _run_namesrv(args: argparse.Namespace) -> int:
    try:
        config, tls = load_namesrv_config(args.config, _namesrv_config(args))
    except ConfigError as exc:
        print(f"finchmq namesrv: {exc}", file=sys.stderr)
        return 2
    return _run_or_report(_namesrv_main(args, config, tls))


def _run_broker(args: argparse.Namespace) -> int:
    overrides: dict[str, str] = {}
    if args.namesrv:
        overrides["namesrvAddr"] = args.namesrv
    if args.port is not None:
        overrides["listenPort"] = str(args.port)
    try:
        broker, store, props = load_broker_config(
            args.config, overrides, default_store_dir=args.data_dir / "store"
        )
    except ConfigError as exc:
        print(f"finchmq broker: {exc}", file=sys.stderr)
        return 2
    return _run_or_report(_broker_main(broker, store, args.config, props))


async def _server_main(
    args: argparse.Namespace,
    broker_config: BrokerConfig,
    store_config: MessageStoreConfig,
    props: dict[str, str],
) -> None:
    began = time.monotonic()
    stop = _stop_on_signal()
    tls = tls_properties(props)  # broker.conf's tls.* keys serve both servers of the process
    namesrv = NamesrvController(
        NamesrvConfig(
            listen_port=args.namesrv_port,
            bind_address=args.bind,
            kv_config_path=args.data_dir / "namesrv" / "kvConfig.json",
        ),
        tls=tls,
    )
    await namesrv.start()
    broker_config = replace(broker_config, namesrv_addr=namesrv.address)
    metrics_port = DEFAULT_METRICS_PORT if args.metrics_port is None else args.metrics_port
    host = broker_config.metrics_prom_exporter_host or args.bind
    if broker_config.metrics_exporter_type is MetricsExporterType.OTLP_GRPC:
        metrics_port = 0  # broker.conf pushes the metrics (both servers') to a collector instead
    elif args.metrics_port is None and not _can_listen(host, metrics_port):
        # the default port is taken (another finchmq server, an exporter): run without metrics
        _print(
            f"warning: metrics port {metrics_port} on {host} is in use; running without metrics "
            "(choose a port with --metrics-port)"
        )
        metrics_port = 0
    if metrics_port:  # one endpoint for both servers (the node_type label tells them apart)
        broker_config = replace(
            broker_config,
            metrics_exporter_type=MetricsExporterType.PROM,
            metrics_prom_exporter_port=metrics_port,
            metrics_prom_exporter_host=host,
        )
    broker = BrokerController(
        broker_config, store_config, config_file=args.config, extra_properties=props, tls=tls
    )
    if broker.metrics is not None:
        broker.metrics_collectors.append(namesrv.enable_metrics().write)
    console = None
    grpc: GrpcServer | None = None
    children: list[BrokerProcess] = []
    try:
        await broker.start()
        _print(f"finchmq name server listening on {namesrv.address}")
        store_dir = store_config.store_path_root_dir
        _print(f"finchmq broker {broker_config.broker_name} at {broker.broker_addr} (store {store_dir})")
        for child in _child_brokers(args, broker_config, props, namesrv.address):
            children.append(child)
            await asyncio.to_thread(child.start)
            _print(
                f"finchmq broker {child.conf['brokerName']} at {child.conf['brokerIP1']}:"
                f"{child.conf['listenPort']} (store {child.store_dir}, pid {child.pid})"
            )
        if broker.metrics_server is not None:
            _print(f"metrics at {broker.metrics_server.url}")
        if broker.metrics_exporter is not None:
            _print(f"metrics pushed over OTLP to {broker.metrics_exporter.endpoint}")
        grpc_config = load_grpc_config(props, broker_config, store_config, args.grpc_port)
        explicit = args.grpc_port is not None or "grpcServerPort" in props
        grpc = await _start_grpc(
            broker,
            grpc_config,
            explicit=explicit,
            cluster_namesrv=namesrv.address if args.brokers > 1 else None,
        )
        console = await _start_console(args, namesrv.address, tls)
        _print(
            f"ready in {(time.monotonic() - began) * 1000:.0f} ms; clients use namesrvAddr={namesrv.address}"
        )
        await stop.wait()
        _print("finchmq server shutting down")
    finally:
        if console is not None:
            await console.close()
        if grpc is not None:
            await grpc.close()
        await asyncio.gather(*(asyncio.to_thread(child.stop) for child in children))
        await broker.close()
        await namesrv.close()


def _child_brokers(
    args: argparse.Namespace, first: BrokerConfig, props: dict[str, str], namesrv_addr: str
) -> list[BrokerProcess]:
    """Brokers 2..N of ``finchmq server --brokers N``: the first one's settings with their own name,
    port and store (each a ``finchmq broker`` process; metrics and console stay with the first)."""
    out = []
    for i in range(1, args.brokers):
        name = _nth_broker_name(first.broker_name, i)
        data_dir = (args.data_dir / name).resolve()
        conf = {
            **props,
            "brokerName": name,
            "brokerId": "0",
            "brokerClusterName": first.broker_cluster_name,
            "listenPort": str(first.listen_port + 10 * i if first.listen_port else 0),
            "brokerIP1": first.broker_ip1,
            "bindAddress": first.bind_address,
            "namesrvAddr": namesrv_addr,
            "storePathRootDir": str(data_dir / "store"),
            "metricsExporterType": "DISABLE",
        }
        out.append(BrokerProcess(data_dir, conf))
    return out


def _nth_broker_name(first: str, i: int) -> str:
    """broker-a -> broker-b, broker-c, ...; any other name gets a suffix (name-2, name-3, ...)."""
    if len(first) >= 2 and first[-2] == "-" and first[-1].isalpha() and ord(first[-1]) + i <= ord("z"):
        return first[:-1] + chr(ord(first[-1]) + i)
    return f"{first}-{i + 1}"


def _can_listen(host: str, port: int) -> bool:
    """True if ``host:port`` is free to listen on now (as asyncio does: SO_REUSEADDR)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError:
        return False
    return True


async def _start_console(args: argparse.Namespace, namesrv_addr: str, tls: TlsConfig) -> Any:
    """The embedded web console, unless ``--console-port 0``. The default port taken is a
    warning (the server runs on without a console); a port the user asked for is an error."""
    port = DEFAULT_CONSOLE_PORT if args.console_port is None else args.console_port
    if port == 0:
        return None
    try:
        # the console's clients talk to this process's servers as the broker does (TLS if enforcing)
        options = {
            "use_tls": tls.broker_client_uses_tls,
            "tls": tls,
            "session_credentials": session_credentials(args, "console-"),
        }
        console = await start_console(
            namesrv_addr,
            args.console_bind,
            port,
            options,
            users_file=args.console_users,
            session_timeout=args.console_session_timeout,
            data_dir=Path(args.data_dir) / "console",  # the charts' samples, beside the stores
        )
    except ValueError as exc:  # a bad accounts file, a network address without one, half an ACL account
        raise RuntimeError(f"web console: {exc}") from None
    except OSError as exc:
        if args.console_port is not None:
            raise OSError(exc.errno, f"web console port {port}: {exc.strerror}") from exc
        _print(
            f"warning: console port {port} on {args.console_bind} is in use; running without the console "
            "(choose a port with --console-port)"
        )
        return None
    _print(f"finchmq console at {console.url}")
    return console


def _run_server(args: argparse.Namespace) -> int:
    if not 1 <= args.brokers <= 26:
        print(f"finchmq server: --brokers must be in 1..26, got {args.brokers}", file=sys.stderr)
        return 2
    overrides = {"listenPort": str(args.broker_port), "bindAddress": args.bind}
    if args.broker_ip:
        overrides["brokerIP1"] = args.broker_ip
    try:
        broker, store, props = load_broker_config(
            args.config, overrides, default_store_dir=args.data_dir / "store"
        )
    except ConfigError as exc:
        print(f"finchmq server: {exc}", file=sys.stderr)
        return 2
    return _run_or_report(_server_main(args, broker, store, props))


def _run_or_report(main: Any) -> int:
    try:
        run(main)
    except OSError as exc:
        print(f"finchmq: cannot start: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # e.g. the store directory is locked by another process
        print(f"finchmq: cannot start: {exc}", file=sys.stderr)
        return 1
    except TlsConfigError as exc:  # e.g. tls.server.certPath missing with tls.test.mode.enable=false
        print(f"finchmq: cannot start: {exc}", file=sys.stderr)
        return 2
    return 0
