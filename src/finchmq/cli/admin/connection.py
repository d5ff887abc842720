"""mqadmin's connection commands (``tools/command/connection``): the clients of a consumer or
producer group, as the brokers see them.
"""

from __future__ import annotations

import argparse
import json

from finchmq.client import BlockingAdminClient
from finchmq.protocol.codes import version_desc

from .command import TOPIC, CommandFamily, Option, Result
from .javafmt import format_table

__all__ = ["commands"]

commands = CommandFamily()


@commands.admin(
    "consumerConnection",
    "a group's online consumers and subscriptions",
    Option("-g", "--consumerGroup", dest="group", required=True),
)
def _consumer_connection(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    conn = admin.consumer_connection(args.group)
    data = json.loads(conn.to_json(standard=True))
    rows = [
        (i + 1, c.client_id, c.client_addr, c.language.name, c.version)
        for i, c in enumerate(conn.connection_set)
    ]
    subs = [(topic, s.sub_string) for topic, s in sorted(conn.subscription_table.items())]
    text = format_table(["", "ClientId", "ClientAddr", "Language", "Version"], rows)
    text += "\n\nBelow is subscription:\n" + format_table(["Topic", "SubExpression"], subs)
    text += (
        f"\n\nConsumeType: {conn.consume_type.name if conn.consume_type else '-'}"
        f"\nMessageModel: {conn.message_model.name if conn.message_model else '-'}"
        f"\nConsumeFromWhere: {conn.consume_from_where.name if conn.consume_from_where else '-'}"
    )
    return data, text


@commands.admin(
    "producerConnection",
    "a producer group's connections (mqadmin producerConnection)",
    Option("-g", "--producerGroup", dest="group", required=True),
    TOPIC,
)
def _producer_connection(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    conn = admin.producer_connection(args.group, args.topic)
    rows = [
        f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language.name:<8} {version_desc(c.version)}"
        for i, c in enumerate(conn.connection_set, start=1)
    ]
    return json.loads(conn.to_json(standard=True)), "\n".join(rows)
