"""``finchmq cluster``: a local cluster of separate processes, for trying replication and failover.

Two name servers and two broker groups by default, each group a master and a slave with the same
brokerName, on loopback ports; each process has its own data directory and ``broker.conf`` under
DATA_DIR. Kill any of them (their pids are printed) and watch clients carry on. A ``finchmq proxy``
serves RocketMQ 5.x (gRPC) clients in front of all the brokers on ``--grpc-port``.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from finchmq.testing.cluster import LocalCluster

__all__ = ["add_cluster_parser"]


def add_cluster_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "cluster",
        help="run a local cluster: 2 name servers, 2 broker groups of master + slave (separate processes)",
        description=(
            "Run a local RocketMQ-style cluster of separate processes on loopback ports: name servers "
            "and broker groups (broker-a, broker-b, ...), each a master and its slaves replicating the "
            "commit log. Ctrl-C stops them all cleanly. See docs/cluster.md."
        ),
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path("finchmq-cluster"), help="where each process keeps its data"
    )
    parser.add_argument("--groups", type=int, default=2, help="broker groups (default 2)")
    parser.add_argument("--slaves", type=int, default=1, help="slaves per group (default 1)")
    parser.add_argument("--namesrvs", type=int, default=2, help="name servers (default 2)")
    parser.add_argument(
        "--role",
        choices=["SYNC_MASTER", "ASYNC_MASTER"],
        default="SYNC_MASTER",
        help="the masters' brokerRole (default SYNC_MASTER: a send is acknowledged once a slave has it)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra broker.conf key for every broker (repeatable), e.g. --set flushDiskType=SYNC_FLUSH",
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        default=None,
        help="serve RocketMQ 5.x clients (gRPC) through a finchmq proxy in front of every broker on PORT "
        f"(default {DEFAULT_GRPC_PORT}, skipped with a warning when taken; 0: no proxy)",
    )
    parser.set_defaults(handler=_run_cluster)


DEFAULT_GRPC_PORT = 8081


def _grpc_port(asked: int | None) -> int | None:
    """The proxy's port, None for no proxy: the default port only when it is free."""
    if asked is not None:
        return asked or None
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", DEFAULT_GRPC_PORT))
        except OSError:
            print(
                f"warning: gRPC port {DEFAULT_GRPC_PORT} is in use; running without the 5.x proxy "
                "(choose a port with --grpc-port)",
                flush=True,
            )
            return None
    return DEFAULT_GRPC_PORT


def _run_cluster(args: argparse.Namespace) -> int:
    conf: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"finchmq cluster: --set wants KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        conf[key] = value
    try:
        cluster = LocalCluster(
            args.data_dir.resolve(),
            groups=args.groups,
            slaves=args.slaves,
            namesrvs=args.namesrvs,
            role=args.role,
            conf=conf,
            grpc_port=_grpc_port(args.grpc_port),
        )
    except ValueError as exc:
        print(f"finchmq cluster: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"starting {len(cluster.namesrvs)} name servers and {len(cluster.brokers)} brokers ...", flush=True)
    try:
        cluster.start()
    except RuntimeError as exc:
        print(f"finchmq cluster: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        for namesrv in cluster.namesrvs:
            print(f"  name server  {namesrv.addr:<21} pid {namesrv.pid}", flush=True)
        for broker in cluster.brokers.values():
            role = broker.conf["brokerRole"]
            print(
                f"  {broker.label:<12} {broker.addr:<21} pid {broker.pid:<8} {role:<13} "
                f"HA port {int(broker.conf['listenPort']) + 1}, data {broker.data_dir}",
                flush=True,
            )
        if cluster.proxy is not None:
            proxy = cluster.proxy
            print(
                f"  proxy        {proxy.addr:<21} pid {proxy.pid:<8} gRPC for RocketMQ 5.x clients",
                flush=True,
            )
        print(
            f"ready; clients use namesrvAddr={cluster.namesrv_addr}  (Ctrl-C stops the cluster)", flush=True
        )
        stop.wait()
        print("stopping the cluster", flush=True)
    finally:
        cluster.stop()
    return 0
