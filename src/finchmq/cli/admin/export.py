"""mqadmin's export commands (``tools/command/export``): a cluster's settings, metadata (topics
and groups) and metrics, each to a JSON file in fastjson's pretty form.

Maps Java holds in a ``HashMap`` are written in its iteration order. The broker settings Java
picks that finchmq's broker does not have (``filterServerNums``, ``msgTraceTopicName``,
``useTLS``, ``clientCallbackExecutorThreads``: Netty and filter-server settings) are left out,
where Java's mqadmin, reading them from finchmq, stops on a null.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from finchmq.client import BlockingAdminClient, MQClientError
from finchmq.protocol._json import dumps_fastjson_pretty, java_concurrent_hash_order, java_hash_order
from finchmq.protocol.bodies import MASTER_ID, BrokerStatsData, SubscriptionGroupConfig, TopicConfig
from finchmq.protocol.codes import MQVersion, version_desc
from finchmq.protocol.topics import RMQ_SYS_TRANS_HALF_TOPIC, SCHEDULE_TOPIC

from .command import CommandFamily, Option, Result
from .stats import compute_24hour_sum

__all__ = ["DEFAULT_EXPORT_PATH", "commands"]

commands = CommandFamily()

DEFAULT_EXPORT_PATH = "/tmp/rocketmq/export"

_FILE_PATH = Option(
    "-f",
    "--filePath",
    dest="file_path",
    default=DEFAULT_EXPORT_PATH,
    help=f"directory (default {DEFAULT_EXPORT_PATH})",
)

# ExportConfigsCommand.needBrokerProprties
_EXPORTED_BROKER_KEYS = (
    "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
    "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable", "traceOn",
    "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
)  # fmt: skip


def _hash_map(items: dict[str, Any]) -> dict[str, Any]:
    """``items`` in the order a Java ``HashMap<String, ...>`` iterates them, null values left
    out (fastjson writes none)."""
    return {k: items[k] for k in java_hash_order(list(items)) if items[k] is not None}


def _write(directory: str, name: str, tree: Any) -> str:
    """mqadmin's ``MixAll.string2FileNotSafe``: the parent directories made, the file written."""
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_fastjson_pretty(tree), encoding="utf-8")
    return str(path)


def _masters_and_slaves(admin: BlockingAdminClient, cluster: str) -> dict[str, list[str]]:
    """Java ``CommandUtil.fetchMasterAndSlaveDistinguish``: master address -> slave addresses."""
    info = admin.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        raise ValueError(f"cluster {cluster!r} not found; known: {sorted(info.cluster_addr_table)}")
    out: dict[str, list[str]] = {}
    for name in names:
        data = info.broker_addr_table.get(name)
        master = data.broker_addrs.get(MASTER_ID) if data is not None else None
        if data is not None and master is not None:
            out[master] = [a for bid, a in sorted(data.broker_addrs.items()) if bid != MASTER_ID]
    return out


@commands.admin(
    "exportConfigs",
    "a cluster's main broker settings and size to configs.json (mqadmin exportConfigs)",
    Option("-c", "--clusterName", dest="cluster", required=True),
    _FILE_PATH,
)
def _export_configs(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    masters = _masters_and_slaves(admin, args.cluster)
    broker_configs = {}
    for master in masters:
        props = admin.get_broker_config(master)
        picked = [k for k in _EXPORTED_BROKER_KEYS if k in props]  # a Properties: a ConcurrentHashMap
        broker_configs[props.get("brokerName", master)] = {
            k: props[k] for k in java_concurrent_hash_order(picked)
        }
    result = {
        "brokerConfigs": _hash_map(broker_configs),
        "clusterScale": _hash_map(
            {
                "namesrvSize": len([a for a in args.namesrv.split(";") if a]),
                "masterBrokerSize": len(masters),
                "slaveBrokerSize": sum(len(s) for s in masters.values()),
            }
        ),
    }
    path = _write(args.file_path, "configs.json", _hash_map(result))
    return {"path": path, **result}, f"export {path} success"


@commands.admin(
    "exportMetadata",
    "topics and subscription groups of a broker or a cluster to JSON (mqadmin exportMetadata)",
    Option("-c", "--clusterName", dest="cluster"),
    Option("-b", "--brokerAddr", dest="broker"),
    _FILE_PATH,
    Option("-t", "--topic", dest="only_topics", action="store_true", help="only the topics"),
    Option("-g", "--subscriptionGroup", dest="only_groups", action="store_true", help="only the groups"),
    Option(
        "-s", "--specialTopic", dest="special_topic", action="store_true", help="retry and DLQ topics too"
    ),
)
def _export_metadata(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``exportMetadata``: with -b, one broker's topics (-t) or groups (-g) as its
    wrapper (nothing without -t or -g, as Java); with -c, the cluster's masters merged, queue
    numbers (topics) and retry queue numbers (groups) summed over the masters."""
    if args.broker:
        if args.only_topics:
            topic_wrapper = admin.user_topic_configs(args.broker, special_topic=args.special_topic)
            name, table_key = "topic.json", "topicConfigTable"
            tree, order = topic_wrapper.to_tree(), list(topic_wrapper.topic_config_table)
        elif args.only_groups:
            group_wrapper = admin.user_subscription_groups(args.broker)
            name, table_key = "subscriptionGroup.json", "subscriptionGroupTable"
            tree, order = group_wrapper.to_tree(), list(group_wrapper.subscription_group_table)
        else:
            return {}, ""
        tree[table_key] = {k: tree[table_key][k] for k in order}  # in the order Java's client has
        path = _write(args.file_path, name, tree)
        return {"path": path}, f"export {path} success"
    if not args.cluster:
        raise ValueError("give -c CLUSTER or -b BROKER_ADDR (mqadmin exportMetadata)")
    topics: dict[str, TopicConfig] = {}
    groups: dict[str, SubscriptionGroupConfig] = {}
    for addr in admin.master_addrs(args.cluster).values():
        topic_table = admin.user_topic_configs(addr, special_topic=args.special_topic).topic_config_table
        for name, config in topic_table.items():
            seen = topics.get(name)
            topics[name] = (
                config
                if seen is None
                else dataclasses.replace(
                    config,
                    write_queue_nums=seen.write_queue_nums + config.write_queue_nums,
                    read_queue_nums=seen.read_queue_nums + config.read_queue_nums,
                )
            )
        for name, group in admin.user_subscription_groups(addr).subscription_group_table.items():
            was = groups.get(name)
            groups[name] = (
                group
                if was is None
                else dataclasses.replace(
                    group, retry_queue_nums=was.retry_queue_nums + group.retry_queue_nums
                )
            )
    result: dict[str, Any] = {}
    if args.only_topics or not args.only_groups:
        result["topicConfigTable"] = _hash_map({k: v.to_tree() for k, v in topics.items()})
    if args.only_groups or not args.only_topics:
        result["subscriptionGroupTable"] = _hash_map({k: v.to_tree() for k, v in groups.items()})
    name = (
        "topic.json"
        if args.only_topics
        else "subscriptionGroup.json"
        if args.only_groups
        else "metadata.json"
    )
    result["exportTime"] = int(time.time() * 1000)
    path = _write(args.file_path, name, _hash_map(result))
    return {"path": path, **result}, f"export {path} success"


def _stats_or_none(admin: BlockingAdminClient, addr: str, topic: str) -> BrokerStatsData | None:
    try:
        return admin.view_broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
    except MQClientError:  # never counted
        return None


def _first_number(text: str | None) -> float:
    parts = (text or "").split(" ")
    return float(parts[0]) if parts and parts[0] else 0.0


@commands.admin(
    "exportMetrics",
    "a cluster's brokers' TPS, day totals and client versions to metrics.json (mqadmin exportMetrics)",
    Option("-c", "--clusterName", dest="cluster", required=True),
    _FILE_PATH,
)
def _export_metrics(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    info = admin.cluster_info()
    names = info.cluster_addr_table.get(args.cluster)
    if names is None:
        raise ValueError(f"cluster {args.cluster!r} not found; known: {sorted(info.cluster_addr_table)}")
    total_tps = {
        "totalNormalInTps": 0.0,
        "totalNormalOutTps": 0.0,
        "totalTransInTps": 0.0,
        "totalScheduleInTps": 0.0,
    }
    total_day = {
        "normalOneDayInNum": 0,
        "normalOneDayOutNum": 0,
        "transOneDayInNum": 0,
        "scheduleOneDayInNum": 0,
    }
    report: dict[str, Any] = {}
    for broker_name in names:
        data = info.broker_addr_table.get(broker_name)
        addr = data.broker_addrs.get(MASTER_ID) if data is not None else None
        if addr is None:
            continue
        kv = admin.broker_runtime_stats(addr)
        props = admin.get_broker_config(addr)
        groups = admin.user_subscription_groups(addr)
        topics = admin.user_topic_configs(addr)
        trans = _stats_or_none(admin, addr, RMQ_SYS_TRANS_HALF_TOPIC)
        schedule = _stats_or_none(admin, addr, SCHEDULE_TOPIC)
        tps = {
            "normalInTps": _first_number(kv.get("putTps")),
            "normalOutTps": _first_number(kv.get("getTransferedTps")),
            "transInTps": trans.stats_minute.tps if trans is not None and trans.stats_minute else 0.0,
            "scheduleInTps": schedule.stats_minute.tps
            if schedule is not None and schedule.stats_minute
            else 0.0,
        }
        day = {
            "normalOneDayInNum": int(kv.get("msgPutTotalTodayMorning", 0))
            - int(kv.get("msgPutTotalYesterdayMorning", 0)),
            "normalOneDayOutNum": int(kv.get("msgGetTotalTodayMorning", 0))
            - int(kv.get("msgGetTotalYesterdayMorning", 0)),
            "transOneDayInNum": compute_24hour_sum(trans) if trans is not None else 0,
            "scheduleOneDayInNum": compute_24hour_sum(schedule) if schedule is not None else 0,
        }
        for key, total_key in zip(tps, total_tps, strict=True):
            total_tps[total_key] += tps[key]
        for key, count in day.items():
            total_day[key] += count
        clients: set[str] = set()
        for group in groups.subscription_group_table.values():
            try:
                conn = admin.consumer_connection(group.group_name)
            except MQClientError:
                continue
            clients.update(f"{c.language.name}%{version_desc(c.version)}" for c in conn.connection_set)
        report[broker_name] = _hash_map(
            {
                "runtimeEnv": _hash_map(
                    {
                        "cpuNum": props.get("clientCallbackExecutorThreads"),
                        "totalMemKBytes": kv.get("totalMemKBytes"),
                    }
                ),
                "runtimeQuota": _hash_map(
                    {
                        "diskRatio": _hash_map(
                            {
                                "commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                                "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio"),
                            }
                        ),
                        "tps": _hash_map(tps),
                        "oneDayNum": _hash_map(day),
                        "messageAverageSize": kv.get("putMessageAverageSize"),
                        "topicSize": len(topics.topic_config_table),
                        "groupSize": len(groups.subscription_group_table),
                    }
                ),
                "runtimeVersion": _hash_map(
                    {
                        "rocketmqVersion": version_desc(MQVersion.V4_9_8),
                        "clientInfo": java_hash_order(sorted(clients)),
                    }
                ),
            }
        )
    result = _hash_map(
        {
            "evaluateReport": _hash_map(report),
            "totalData": _hash_map(
                {"totalTps": _hash_map(total_tps), "totalOneDayNum": _hash_map(total_day)}
            ),
        }
    )
    path = _write(args.file_path, "metrics.json", result)
    return {"path": path, **result}, f"export {path} success"
