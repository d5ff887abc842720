"""mqadmin's producer command (``tools/command/producer``): every producer connected to a broker."""

from __future__ import annotations

import argparse
import json

from finchmq.client import BlockingAdminClient
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import java_key_hash

from .command import CommandFamily, Option, Result

__all__ = ["commands"]

commands = CommandFamily()


@commands.admin(
    "producer",
    "every producer group's instances on a broker (mqadmin producer)",
    Option("-b", "--broker", dest="broker", required=True, help="broker address"),
)
def _producer(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``producer``: GET_ALL_PRODUCER_INFO, a line per instance, groups in the order
    Java's HashMap holds them."""
    table = admin.all_producer_info(args.broker)
    lines = []
    for group in java_hash_order(list(table.data), java_key_hash):
        members = table.data[group]
        if not members:
            lines.append(f"producer group ({group}) instances are empty")
        lines.extend(f"producer group ({group}) instance : {p}" for p in members)
    return json.loads(table.to_json(standard=True)), "\n".join(lines)
