"""``finchmq``: the command line. The only module that reads argv or configures logging."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import argcomplete
from argcomplete.shell_integration import shellcode

from finchmq._version import __version__
from finchmq.cli.admin import add_admin_parser
from finchmq.cli.bench import add_bench_parser
from finchmq.cli.cluster import add_cluster_parser
from finchmq.cli.console import add_console_parser, add_console_user_parser
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
        epilog=(
            "RocketMQ equivalents: server = mqnamesrv + mqbroker in one process, namesrv = mqnamesrv,\n"
            "broker = mqbroker, proxy = rocketmq-proxy (cluster mode, for 5.x gRPC clients),\n"
            "cluster = a local master/slave cluster of those as processes,\n"
            "admin = mqadmin (same command names and options), bench = the\n"
            "benchmark's producer.sh / consumer.sh, console = rocketmq-dashboard.\n\n"
            "Run 'finchmq COMMAND --help' for the options of a command; 'finchmq completion bash'\n"
            "(or zsh, fish) prints the shell completion to eval."
        ),
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
    add_cluster_parser(commands)
    add_demo_parser(commands)
    add_admin_parser(commands)
    add_bench_parser(commands)
    add_console_parser(commands)
    add_console_user_parser(commands)
    completion = commands.add_parser(
        "completion",
        help='print shell completion code: eval "$(finchmq completion bash)"',
        description="Print the completion code for a shell (argcomplete); eval it in your shell's rc file.",
    )
    completion.add_argument("shell", nargs="?", default="bash", choices=["bash", "zsh", "fish", "tcsh"])
    completion.set_defaults(handler=_print_completion)
    return parser


def _print_completion(args: argparse.Namespace) -> int:
    print(shellcode(["finchmq"], shell=args.shell))
    return 0


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    argcomplete.autocomplete(parser)  # answers and exits only when the shell asks for completions
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _configure_logging(args.log_level)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
