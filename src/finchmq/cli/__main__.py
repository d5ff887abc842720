"""``finchmq``: the command line. The only module that reads argv or configures logging."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from finchmq import __version__
from finchmq.cli.admin import add_admin_parser
from finchmq.cli.bench import add_bench_parser
from finchmq.cli.demo import add_demo_parser
from finchmq.cli.servers import add_server_parsers

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="finchmq",
        description=(
            "finchmq: a RocketMQ-compatible messaging system in Python.\n\n"
            "It speaks the RocketMQ 4.x remoting protocol, so RocketMQ clients work against it."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'finchmq COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"finchmq {__version__}")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log verbosity (default WARNING: quiet)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_server_parsers(commands)
    add_demo_parser(commands)
    add_admin_parser(commands)
    add_bench_parser(commands)
    return parser


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _configure_logging(args.log_level)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
