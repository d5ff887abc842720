"""``finchmq console``: the web console for a cluster, given its name server addresses
(``finchmq server`` runs one itself, see ``--console-port``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from finchmq.cli.tls import add_tls_options, tls_client_options
from finchmq.remoting import run

__all__ = ["DEFAULT_CONSOLE_PORT", "add_console_parser", "start_console"]

DEFAULT_CONSOLE_PORT = 8080  # rocketmq-dashboard's


async def start_console(
    namesrv_addr: str, host: str, port: int, client_options: Mapping[str, Any] | None = None
) -> Any:
    """Start a ``finchmq.console.Console`` (imported only when one runs: the web stack is not
    needed by a server without a console); ``OSError`` if the port is taken. ``client_options``:
    ClientConfig settings of its clients (``use_tls``/``tls``)."""
    from finchmq.console import Console  # noqa: PLC0415  (the web stack loads only when used)

    console = Console(namesrv_addr, host=host, port=port, client_options=client_options)
    await console.start()
    return console


def add_console_parser(commands: Any) -> None:
    """Register ``finchmq console``."""
    parser = commands.add_parser(
        "console",
        help="serve the web console of a cluster (rocketmq-dashboard's main pages)",
        description=(
            "Serve a web console for the cluster whose name servers are given: brokers with live TPS, "
            "topics, consumer groups and their lag, offset resets, message queries with traces, test "
            "messages and dead-letter resends, with charts of the last hour."
        ),
    )
    parser.add_argument(
        "-n",
        "--namesrv",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="name server address(es), host:port;host:port (default $NAMESRV_ADDR or 127.0.0.1:9876)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_CONSOLE_PORT, help=f"listen port (default {DEFAULT_CONSOLE_PORT})"
    )
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        help="listen address (default 127.0.0.1: this machine only; the console has no login)",
    )
    add_tls_options(parser)
    parser.set_defaults(handler=_run_console)


async def _console_main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    console = await start_console(args.namesrv, args.bind, args.port, tls_client_options(args))
    try:
        print(f"finchmq console at {console.url} for name servers {args.namesrv}", flush=True)
        await stop.wait()
        print("finchmq console shutting down", flush=True)
    finally:
        await console.close()


def _run_console(args: argparse.Namespace) -> int:
    try:
        run(_console_main(args))
    except OSError as exc:
        print(f"finchmq console: cannot start: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a malformed name server address
        print(f"finchmq console: {exc}", file=sys.stderr)
        return 2
    return 0
