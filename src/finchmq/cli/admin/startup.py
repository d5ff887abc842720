"""``finchmq admin``'s parser and dispatch (Java ``MQAdminStartup``), built from the command
families: each command's sub-parser, options and handler come from its one declaration.

Strategy: every command runs on the default ``Portal`` with the credentials of
``--access-key``/``--secret-key`` or ``$ROCKETMQ_HOME/conf/tools.yml``, and with TLS when
``--tls`` is given (mqadmin's ``-Dtls.enable=true``; the ``tls.client.*`` settings come from
``--tls-config``, mqadmin's ``-Dtls.config.file``), and in the client namespace of
``--namespace`` (a finchmq addition: the topics and groups given are ``NS%name`` on the broker).
Exit status: 0 on success, 1 when the cluster answers with an error, 2 for bad arguments
(messages on stderr).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

from finchmq.cli.credentials import add_credential_options, session_credentials
from finchmq.cli.tls import add_tls_options, tls_client_options
from finchmq.client import MQClientError
from finchmq.client.sync import Portal

from .acl import commands as acl
from .auth import commands as auth
from .broker import commands as broker
from .cluster import commands as cluster
from .command import Command
from .connection import commands as connection
from .consumer import commands as consumer
from .export import commands as export
from .message import commands as message
from .namesrv import commands as namesrv
from .offset import commands as offset
from .producer import commands as producer
from .queue import commands as queue
from .stats import commands as stats
from .topic import commands as topic

__all__ = ["COMMANDS", "add_admin_parser"]

COMMANDS: tuple[Command, ...] = (
    *topic,
    *consumer,
    *connection,
    *offset,
    *message,
    *cluster,
    *broker,
    *stats,
    *namesrv,
    *acl,
    *producer,
    *queue,
    *export,
    *auth,
)
"""Every command, in the order ``finchmq admin --help`` lists them (by mqadmin's families)."""


_NAMESPACE_FLAG = "--namespace"
_NAMESPACE_HELP = (
    "work in client namespace NS, as a client with namespace=NS does: the topics and groups "
    "given are NS%%name on the broker (system topics and groups stay as they are); what is "
    "printed names them as the broker stores them"
)
_ADMIN_EPILOG = (
    "Every command takes --namespace NS but updateKvConfig and deleteKvConfig, whose "
    "-s/--namespace is mqadmin's KV config namespace: " + _NAMESPACE_HELP.replace("%%", "%") + "."
)


def _run(command: Command, args: argparse.Namespace) -> int:
    name = command.name
    portal = Portal.default()
    try:
        args.credentials = session_credentials(args)
        args.client_options = {"session_credentials": args.credentials, **tls_client_options(args)}
        if getattr(args, "client_namespace", None):
            args.client_options["namespace"] = args.client_namespace
        data, text = command.run(args, portal)
    except (MQClientError, TimeoutError) as exc:
        print(f"{name} failed: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if command.streamed:
        return 0  # printed as it went
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(text)
    return 0


def add_admin_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``finchmq admin`` and its sub-commands."""
    admin = commands.add_parser(
        "admin",
        help="mqadmin-style administration (topics, groups, offsets, messages)",
        description="mqadmin's most used commands. Tables by default, --json for machines.",
        epilog=_ADMIN_EPILOG,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="name server address(es), host:port;host:port (default $NAMESRV_ADDR or 127.0.0.1:9876)",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_credential_options(common)
    add_tls_options(common)
    sub = admin.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        parser = sub.add_parser(
            command.name,
            aliases=list(command.aliases),
            parents=[common],
            help=command.help,
            description=command.help,
        )
        for option in command.options:
            option.add_to(parser)
        if not any(_NAMESPACE_FLAG in option.flags for option in command.options):
            parser.add_argument(_NAMESPACE_FLAG, dest="client_namespace", metavar="NS", help=_NAMESPACE_HELP)
        parser.set_defaults(handler=functools.partial(_run, command))
