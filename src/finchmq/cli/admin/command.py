"""How an mqadmin command is declared: once, next to its handler.

    commands = CommandFamily()

    @commands.admin("topicRoute", "a topic's queues and brokers", Option("-t", "--topic", required=True))
    def _topic_route(admin: BlockingAdminClient, args: argparse.Namespace) -> Result: ...

``CommandFamily.admin`` registers a handler that runs with a started ``BlockingAdminClient``;
``CommandFamily.client`` one that opens the clients it needs on the shared ``Portal``. Each
module of this package holds one family (mqadmin's ``tools/command/<family>`` packages) and
``startup`` builds the argparse sub-commands and the dispatch from the families. Also here: the
argument types the commands share. Every handler returns ``(json data, text)``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from finchmq.client import BlockingAdminClient
from finchmq.client.sync import Portal

__all__ = [
    "BROKER_ADDR",
    "CLUSTER",
    "TIMESTAMP_HELP",
    "TOPIC",
    "AdminHandler",
    "ClientHandler",
    "Command",
    "CommandFamily",
    "Option",
    "Result",
    "parse_bool",
    "parse_timestamp",
]

Result: TypeAlias = tuple[Any, str]
"""What a command returns: the data ``--json`` prints, and the text printed otherwise."""

AdminHandler: TypeAlias = Callable[[BlockingAdminClient, argparse.Namespace], Result]
ClientHandler: TypeAlias = Callable[[argparse.Namespace, Portal], Result]

TIMESTAMP_HELP = "now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS"


class Option:
    """One ``ArgumentParser.add_argument`` call of a command: its flags and keywords."""

    __slots__ = ("flags", "settings")

    def __init__(self, *flags: str, **settings: Any) -> None:
        self.flags = flags
        self.settings = settings

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """Add this option to ``parser``."""
        parser.add_argument(*self.flags, **self.settings)


@dataclass(frozen=True, slots=True)
class Command:
    """An mqadmin command: its name, one-line help, options and how it runs.

    ``streamed`` commands print as they go (they run until interrupted), so nothing is printed
    from their result. ``aliases`` are other names it answers to (mqadmin's ``commandAlias``).
    """

    name: str
    help: str
    options: tuple[Option, ...]
    run: ClientHandler
    streamed: bool = False
    aliases: tuple[str, ...] = ()


class CommandFamily:
    """The commands of one module, in the order they are declared."""

    def __init__(self) -> None:
        self._commands: list[Command] = []

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands)

    def admin(
        self, name: str, help_text: str, *options: Option, aliases: tuple[str, ...] = ()
    ) -> Callable[[AdminHandler], AdminHandler]:
        """Declare command ``name`` (also called ``aliases``), run by the decorated
        ``handler(admin, args)`` with a started ``BlockingAdminClient`` of the command line's
        name server and credentials."""

        def register(handler: AdminHandler) -> AdminHandler:
            def run(args: argparse.Namespace, portal: Portal) -> Result:
                with BlockingAdminClient(
                    namesrv_addr=args.namesrv, **args.client_options, portal=portal
                ) as admin:
                    return handler(admin, args)

            self._commands.append(Command(name, help_text, options, run, aliases=aliases))
            return handler

        return register

    def client(
        self, name: str, help_text: str, *options: Option, streamed: bool = False
    ) -> Callable[[ClientHandler], ClientHandler]:
        """Declare command ``name``, run by the decorated ``handler(args, portal)``, which opens
        the producers, consumers or admin clients it needs on ``portal``."""

        def register(handler: ClientHandler) -> ClientHandler:
            self._commands.append(Command(name, help_text, options, handler, streamed))
            return handler

        return register


def parse_timestamp(text: str) -> int:
    """``now``, epoch ms, ``yyyy-MM-dd#HH:mm:ss:SSS`` (mqadmin) or ISO 8601 -> epoch ms."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return int(datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"bad timestamp {text!r}: use now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")


def parse_bool(text: str) -> bool:
    """``true``/``1``/``yes`` or ``false``/``0``/``no``, any case (mqadmin's boolean options)."""
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# mqadmin's options that many commands share, spelled the same everywhere
TOPIC = Option("-t", "--topic", required=True)
CLUSTER = Option("-c", "--clusterName", dest="cluster")
BROKER_ADDR = Option("-b", "--brokerAddr", dest="broker")
