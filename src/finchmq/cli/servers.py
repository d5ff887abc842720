"""``finchmq namesrv``, ``finchmq broker`` and ``finchmq server``: run the servers.

Configuration follows RocketMQ: ``broker.conf`` is a Java properties file with RocketMQ's key
names (brokerClusterName, brokerName, brokerId, namesrvAddr, listenPort, storePathRootDir,
flushDiskType, autoCreateTopicEnable, ...); unknown keys are warned about and a bad value stops
start-up with a message naming the key. ``NAMESRV_ADDR`` is read from the environment as
RocketMQ does. SIGTERM and SIGINT shut down cleanly: flush, persist offsets, unregister.
"""

from __future__ import annotations

import argparse
import asyncio
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
from finchmq.common import SettingsError, config_from_properties, parse_properties
from finchmq.common.metrics import MetricsExporterType
from finchmq.namesrv import NamesrvConfig, NamesrvController
from finchmq.remoting import run
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
        broker, rest = config_from_properties(base_broker, props)
        store, unknown = base_store.with_properties(rest)
    except SettingsError as exc:
        source = f" in {conf_file}" if conf_file else ""
        raise ConfigError(f"bad broker configuration{source}: {exc}") from None
    for key in sorted(unknown):
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


def add_server_parsers(commands: Any) -> None:
    namesrv = commands.add_parser(
        "namesrv",
        help="run a name server",
        description="Run a RocketMQ-compatible name server.",
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
    server.set_defaults(handler=_run_server)


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


async def _namesrv_main(args: argparse.Namespace) -> None:
    config = NamesrvConfig(
        listen_port=args.port,
        bind_address=args.bind,
        kv_config_path=args.data_dir / "namesrv" / "kvConfig.json",
        metrics_exporter_type=MetricsExporterType.PROM if args.metrics_port else MetricsExporterType.DISABLE,
        metrics_prom_exporter_port=args.metrics_port or 5558,
    )
    stop = _stop_on_signal()
    async with NamesrvController(config) as namesrv:
        _print(f"finchmq name server listening on {namesrv.address}")
        if namesrv.metrics_server is not None:
            _print(f"metrics at {namesrv.metrics_server.url}")
        await stop.wait()
        _print("finchmq name server shutting down")


async def _broker_main(
    broker_config: BrokerConfig,
    store_config: MessageStoreConfig,
    conf_file: Path | None,
    props: dict[str, str],
) -> None:
    began = time.monotonic()
    stop = _stop_on_signal()
    broker = BrokerController(broker_config, store_config, config_file=conf_file, extra_properties=props)
    try:
        await broker.start()
    except BaseException:
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
        await stop.wait()
        _print("finchmq broker shutting down")
    finally:
        await broker.close()


def _run_namesrv(args: argparse.Namespace) -> int:
    run(_namesrv_main(args))
    return 0


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
    namesrv = NamesrvController(
        NamesrvConfig(
            listen_port=args.namesrv_port,
            bind_address=args.bind,
            kv_config_path=args.data_dir / "namesrv" / "kvConfig.json",
        )
    )
    await namesrv.start()
    broker_config = replace(broker_config, namesrv_addr=namesrv.address)
    metrics_port = DEFAULT_METRICS_PORT if args.metrics_port is None else args.metrics_port
    host = broker_config.metrics_prom_exporter_host or args.bind
    if args.metrics_port is None and not _can_listen(host, metrics_port):
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
    broker = BrokerController(broker_config, store_config, config_file=args.config, extra_properties=props)
    if broker.metrics is not None:
        broker.metrics_collectors.append(namesrv.enable_metrics().write)
    console = None
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
        console = await _start_console(args, namesrv.address)
        _print(
            f"ready in {(time.monotonic() - began) * 1000:.0f} ms; clients use namesrvAddr={namesrv.address}"
        )
        await stop.wait()
        _print("finchmq server shutting down")
    finally:
        if console is not None:
            await console.close()
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


async def _start_console(args: argparse.Namespace, namesrv_addr: str) -> Any:
    """The embedded web console, unless ``--console-port 0``. The default port taken is a
    warning (the server runs on without a console); a port the user asked for is an error."""
    port = DEFAULT_CONSOLE_PORT if args.console_port is None else args.console_port
    if port == 0:
        return None
    try:
        console = await start_console(
            namesrv_addr,
            args.console_bind,
            port,
            users_file=args.console_users,
            session_timeout=args.console_session_timeout,
        )
    except ValueError as exc:  # a bad accounts file, a network address without one
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
    return 0
