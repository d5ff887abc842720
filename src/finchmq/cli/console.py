"""``finchmq console``: the web console for a cluster, given its name server addresses
(``finchmq server`` runs one itself, see ``--console-port``), and ``finchmq console-user``, which
writes the console's accounts file (``finchmq.console.auth``)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from finchmq.cli.credentials import add_credential_options, session_credentials
from finchmq.cli.tls import add_tls_options, tls_client_options
from finchmq.remoting import run

__all__ = [
    "DEFAULT_CONSOLE_PORT",
    "add_console_parser",
    "add_console_user_parser",
    "add_login_arguments",
    "default_data_dir",
    "start_console",
]

DEFAULT_CONSOLE_PORT = 8080  # rocketmq-dashboard's
USERS_ENV = "FINCHMQ_CONSOLE_USERS"


async def start_console(
    namesrv_addr: str,
    host: str,
    port: int,
    client_options: Mapping[str, Any] | None = None,
    *,
    users_file: Path | None = None,
    session_timeout: float | None = None,
    data_dir: Path | None = None,
    sample_interval: float | None = None,
) -> Any:
    """Start a ``finchmq.console.Console`` (imported only when one runs: the web stack is not
    needed by a server without a console); ``OSError`` if the port is taken, ``ValueError`` for
    a bad accounts file or a non-loopback address without one. ``client_options``: ClientConfig
    settings of its clients (``use_tls``/``tls``)."""
    from finchmq.console import Console  # noqa: PLC0415  (the web stack loads only when used)

    timeout: dict[str, Any] = {} if session_timeout is None else {"session_timeout": session_timeout}
    if sample_interval is not None:
        timeout["sample_interval"] = sample_interval
    console = Console(
        namesrv_addr,
        host=host,
        port=port,
        client_options=client_options,
        users_file=users_file,
        data_dir=data_dir,
        **timeout,
    )
    await console.start()
    return console


def default_data_dir() -> Path:
    """Where ``finchmq console`` keeps its charts' samples without ``--data-dir``:
    ``$XDG_DATA_HOME/finchmq/console``, else ``~/.local/share/finchmq/console``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "finchmq" / "console"


def _users_default() -> Path | None:
    value = os.environ.get(USERS_ENV)
    return Path(value) if value else None


def add_login_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--users FILE`` and ``--session-timeout`` (``--console-...`` with ``prefix="console-"``)."""
    parser.add_argument(
        f"--{prefix}users",
        type=Path,
        default=_users_default(),
        metavar="FILE",
        help=f"accounts file (finchmq console-user writes it; default ${USERS_ENV}): every page needs a "
        "login, and the console may listen on a network address",
    )
    parser.add_argument(
        f"--{prefix}session-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a login ends after this long without a request (default 1800: half an hour)",
    )


def add_console_parser(commands: Any) -> None:
    """Register ``finchmq console``."""
    parser = commands.add_parser(
        "console",
        help="serve the web console of a cluster (rocketmq-dashboard's main pages)",
        description=(
            "Serve a web console for the cluster whose name servers are given: brokers with live TPS, "
            "topics, consumer groups (create, update, delete) and their lag, offset resets, a group's "
            "producers, message queries with traces, test messages, dead-letter resends and ACL, with "
            "charts of the last hour kept in --data-dir."
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
        help="listen address (default 127.0.0.1: this machine only; another address needs --users)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the charts' samples are kept, so a restart shows the last hour again (default "
        "$XDG_DATA_HOME/finchmq/console, else ~/.local/share/finchmq/console)",
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how often the charts' figures are read from the cluster (default 10)",
    )
    add_tls_options(parser)
    add_credential_options(
        parser,
        what="the console's requests to the brokers, for a cluster with ACL on (an admin (1.0) or super "
        "user (2.0) to manage ACL)",
    )
    add_login_arguments(parser)
    parser.set_defaults(handler=_run_console)


async def _console_main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    options = {"session_credentials": session_credentials(args), **tls_client_options(args)}
    console = await start_console(
        args.namesrv,
        args.bind,
        args.port,
        options,
        users_file=args.users,
        session_timeout=args.session_timeout,
        data_dir=args.data_dir if args.data_dir is not None else default_data_dir(),
        sample_interval=args.sample_interval,
    )
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
    except ValueError as exc:  # a malformed name server address, one ACL key without the other
        print(f"finchmq console: {exc}", file=sys.stderr)
        return 2
    return 0


def add_console_user_parser(commands: Any) -> None:
    """Register ``finchmq console-user``."""
    parser = commands.add_parser(
        "console-user",
        help="add, change, delete or list the web console's accounts",
        description=(
            "Write the web console's accounts file: rocketmq-dashboard's users.properties layout "
            "(NAME=PASSWORD,ROLE; role 1 admin, 0 read-only) with scrypt-hashed passwords. A running "
            "console reads the file again when it changes. Passwords are asked on the terminal, or "
            "read from the first line of standard input when it is not one (--password-stdin)."
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (
        ("add", "add an account (asks its password)"),
        ("passwd", "set an account's password (asks it)"),
        ("role", "change an account's role"),
        ("delete", "delete an account (its sessions end at their next request)"),
        ("list", "list the accounts and their roles"),
    ):
        sub = actions.add_parser(action, help=text, description=text)
        if action != "list":
            sub.add_argument("name", help="user name (letters, digits, _.@-)")
        if action in ("add", "role"):
            sub.add_argument("--role", choices=["admin", "read-only"], required=action == "role",
                             default="read-only" if action == "add" else None,
                             help="admin: everything; read-only: sees every page, changes nothing "
                             "(default for add: read-only)")  # fmt: skip
        if action in ("add", "passwd"):
            sub.add_argument("--password-stdin", action="store_true",
                             help="read the password from standard input's first line")  # fmt: skip
        sub.add_argument(
            "--users",
            type=Path,
            default=_users_default(),
            required=_users_default() is None,
            metavar="FILE",
            help=f"the accounts file (default ${USERS_ENV}); add creates it, mode 0600",
        )
    parser.set_defaults(handler=_run_console_user)


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise ValueError("the two passwords differ")
    if len(password) < 8:
        raise ValueError("a console password has at least 8 characters")
    return password


def _run_console_user(args: argparse.Namespace) -> int:
    from finchmq.console.auth import (  # noqa: PLC0415  (the web stack loads only when used)
        ADMIN,
        READ_ONLY,
        AccountsError,
        hash_password,
        read_accounts,
        write_account,
    )

    path: Path = args.users
    try:
        if args.action == "list":
            for account in read_accounts(path, hashed=False).values():
                print(f"{account.name}\t{account.role}")
            return 0
        if args.action == "add":
            if path.exists() and args.name in read_accounts(path, hashed=False):
                raise AccountsError(f"{args.name!r} is already in {path}: use passwd or role to change it")
            role = ADMIN if args.role == "admin" else READ_ONLY
            write_account(path, args.name, password_hash=hash_password(_read_password(args)), role=role)
            print(f"added {args.name} ({role}) to {path}")
        elif args.action == "passwd":
            if not path.exists() or args.name not in read_accounts(path, hashed=False):
                raise AccountsError(f"no account {args.name!r} in {path}")
            write_account(path, args.name, password_hash=hash_password(_read_password(args)))
            print(f"set the password of {args.name} in {path}")
        elif args.action == "role":
            role = ADMIN if args.role == "admin" else READ_ONLY
            write_account(path, args.name, role=role)
            print(f"{args.name} is now {role} in {path}")
        else:
            write_account(path, args.name, delete=True)
            print(f"deleted {args.name} from {path}")
    except ValueError as exc:  # AccountsError included
        print(f"finchmq console-user: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"finchmq console-user: {path}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
