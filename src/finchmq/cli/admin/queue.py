"""mqadmin's queue command (``tools/command/queue``): the units of a consume queue."""

from __future__ import annotations

import argparse
import json

from finchmq.client import BlockingAdminClient, NoRouteError
from finchmq.protocol.bodies import MASTER_ID

from .command import CommandFamily, Option, Result
from .javafmt import fastjson_pretty

__all__ = ["commands"]

commands = CommandFamily()

_RULE = "======================================"


@commands.admin(
    "queryCq",
    "the units of a consume queue from an index (mqadmin queryCq)",
    Option("-t", "--topic", required=True),
    Option("-q", "--queue", type=int, required=True, help="queue id"),
    Option("-i", "--index", type=int, required=True, help="first unit's index in the queue"),
    Option("-c", "--count", type=int, default=10, help="how many units (default 10)"),
    Option("-b", "--broker", dest="broker", help="broker address (default: the topic's first master)"),
    Option("-g", "--consumer", dest="consumer_group", help="a group: its subscription of the topic too"),
)
def _query_cq(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``queryCq``: QUERY_CONSUME_QUEUE on the broker given, else on the master of the
    topic route's first broker; each unit as Java's ``ConsumeQueueData.toString``."""
    broker = args.broker
    if not broker:
        route = admin.topic_route(args.topic)
        broker = route.broker_datas[0].broker_addrs.get(MASTER_ID) if route.broker_datas else None
        if broker is None:
            raise NoRouteError(args.topic)
    body = admin.query_consume_queue(
        broker, args.topic, args.queue, args.index, args.count, args.consumer_group
    )
    out = []
    if body.subscription_data is not None:
        out.append(f"Subscription data: \n{fastjson_pretty(body.subscription_data)}\n{_RULE}\n")
    if body.filter_data is not None:
        out.append(f"Filter data: \n{body.filter_data}\n{_RULE}\n")
    out.append(f"Queue data: \nmax: {body.max_queue_index}, min: {body.min_queue_index}\n{_RULE}\n")
    for i, unit in enumerate(body.queue_data or (), start=args.index):
        out.append(f"idx: {i}\n{unit}\n{_RULE}\n")
    return json.loads(body.to_json(standard=True)), "".join(out).rstrip("\n")
