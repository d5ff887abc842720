"""mqadmin's offset commands (``tools/command/offset``): move a group's offsets to a time or to the
end of the queues, or copy them from another group.
"""

from __future__ import annotations

import argparse

from finchmq.client import BlockingAdminClient
from finchmq.client.views import offset_table_rows
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import java_key_hash

from .command import TIMESTAMP_HELP, TOPIC, CommandFamily, Option, Result, parse_bool, parse_timestamp
from .javafmt import format_table

__all__ = ["commands"]

commands = CommandFamily()


@commands.admin(
    "resetOffsetByTime",
    "move a group's offsets to a point in time",
    Option("-g", "--group", dest="group", required=True),
    TOPIC,
    Option("-s", "--timestamp", type=parse_timestamp, required=True, help=TIMESTAMP_HELP),
    Option("-f", "--force", type=parse_bool, default=True),
)
def _reset_offset_by_time(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    table = admin.reset_offset_by_time(args.group, args.topic, args.timestamp, force=args.force)
    rows = [(mq.broker_name, mq.queue_id, offset) for mq, offset in table.items()]
    return offset_table_rows(table), format_table(["brokerName", "queueId", "offset"], rows)


@commands.admin(
    "skipAccumulatedMessage",
    "move a group to the end of a topic's queues (mqadmin skipAccumulatedMessage)",
    Option("-g", "--group", dest="group", required=True),
    TOPIC,
    Option("-f", "--force", type=parse_bool, default=True),
)
def _skip_accumulated_message(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``skipAccumulatedMessage``: move the group to the end of each queue of the topic."""
    table = admin.reset_offset_by_time(args.group, args.topic, -1, force=args.force)
    ordered = java_hash_order(list(table), java_key_hash)  # mqadmin prints its HashMap's order
    rows = [f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}"]
    rows += [f"{mq.broker_name:<40}  {mq.queue_id:<40d}  {table[mq]:<40d}" for mq in ordered]
    return offset_table_rows(table), "\n".join(rows)


@commands.admin(
    "cloneGroupOffset",
    "copy a group's offsets of a topic to another group (mqadmin cloneGroupOffset)",
    Option("-s", "--srcGroup", dest="src_group", required=True),
    Option("-d", "--destGroup", dest="dest_group", required=True),
    TOPIC,
    Option("-o", "--offline", type=parse_bool, default=False),
)
def _clone_group_offset(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.clone_group_offset(args.src_group, args.dest_group, args.topic, offline=args.offline)
    data = {"srcGroup": args.src_group, "destGroup": args.dest_group, "topic": args.topic}
    text = (
        f"clone group offset success. srcGroup[{args.src_group}], destGroup=[{args.dest_group}], "
        f"topic[{args.topic}]"
    )
    return data, text
