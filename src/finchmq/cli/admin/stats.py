"""mqadmin's statistics command (``tools/command/stats``): per topic and consuming group, the
backlog, the TPS in and out, and the day's totals.
"""

from __future__ import annotations

import argparse
from typing import Any

from finchmq.client import BlockingAdminClient, MQClientError
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import MASTER_ID, BrokerStatsData, java_key_hash
from finchmq.protocol.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

from .command import CommandFamily, Option, Result
from .javafmt import java_fixed

__all__ = ["commands", "compute_24hour_sum"]

commands = CommandFamily()


def compute_24hour_sum(stats: BrokerStatsData) -> int:
    """Java ``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    for item in (stats.stats_day, stats.stats_hour, stats.stats_minute):
        if item is not None and item.sum != 0:
            return item.sum
    return 0


@commands.admin(
    "statsAll",
    "topics' and groups' TPS, backlog and day totals (mqadmin statsAll)",
    Option("-a", "--activeTopic", dest="active_topic", action="store_true", help="active topics only"),
    Option("-t", "--topic", help="this topic only"),
)
def _stats_all(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``statsAll``: per topic and consuming group, the backlog, the TPS in and out over
    the last minute, and the messages in and out over the last day (VIEW_BROKER_STATS_DATA)."""
    lines = [
        f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
        f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}"
    ]
    data = []
    for topic in admin.topic_list():  # mqadmin iterates the name server's set as it came
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        if args.topic and topic != args.topic:
            continue
        try:
            rows = _topic_stats(admin, topic)
        except MQClientError:
            continue  # as mqadmin: a topic it cannot read is left out
        for row in rows:
            if args.active_topic and not (row["inMsg24Hour"] or row["outMsg24Hour"]):
                continue
            data.append(row)
            name = topic[:64]
            in_tps = java_fixed(row["inTps"])
            if row["group"] is None:
                lines.append(
                    f"{name:<64}  {'':<64} {0:>12d} {in_tps:>11} {'':>11} {row['inMsg24Hour']:>14d} "
                    f"{'NO_CONSUMER':>14}"
                )
            else:
                lines.append(
                    f"{name:<64}  {row['group'][:64]:<64} {row['accumulation']:>12d} {in_tps:>11} "
                    f"{java_fixed(row['outTps']):>11} {row['inMsg24Hour']:>14d} {row['outMsg24Hour']:>14d}"
                )
    return data, "\n".join(lines)


def _topic_stats(admin: BlockingAdminClient, topic: str) -> list[dict[str, Any]]:
    route = admin.topic_route(topic)
    groups = java_hash_order(admin.examine_topic_consume_by_who(topic), java_key_hash)
    masters = [bd.broker_addrs[MASTER_ID] for bd in route.broker_datas if MASTER_ID in bd.broker_addrs]

    def stats_of(name: str, key: str) -> tuple[float, int]:
        tps, total = 0.0, 0
        for addr in masters:
            try:
                stats = admin.view_broker_stats_data(addr, name, key)
            except MQClientError:
                continue  # never counted on that broker
            tps += stats.stats_minute.tps if stats.stats_minute else 0.0
            total += compute_24hour_sum(stats)
        return tps, total

    in_tps, in_24h = stats_of("TOPIC_PUT_NUMS", topic)
    if not groups:
        return [{"topic": topic, "group": None, "accumulation": 0, "inTps": in_tps, "outTps": 0.0,
                 "inMsg24Hour": in_24h, "outMsg24Hour": 0}]  # fmt: skip
    rows = []
    for group in groups:
        out_tps, out_24h = stats_of("GROUP_GET_NUMS", f"{topic}@{group}")
        try:
            accumulation = max(admin.consume_stats(group, topic).compute_total_diff(), 0)
        except MQClientError:
            accumulation = 0
        rows.append({"topic": topic, "group": group, "accumulation": accumulation, "inTps": in_tps,
                     "outTps": out_tps, "inMsg24Hour": in_24h, "outMsg24Hour": out_24h})  # fmt: skip
    return rows
