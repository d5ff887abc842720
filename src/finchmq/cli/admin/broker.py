"""mqadmin's broker commands (``tools/command/broker``): runtime statistics, settings, and every
group's lag on a broker.
"""

from __future__ import annotations

import argparse
import json
import math
import time

from finchmq.client import BlockingAdminClient, BlockingProducer
from finchmq.client.sync import Portal
from finchmq.protocol.message import Message

from .command import BROKER_ADDR, CLUSTER, CommandFamily, Option, Result, parse_bool
from .javafmt import config_tables, format_time, java_send_result

__all__ = ["commands"]

commands = CommandFamily()


def _broker_addrs(admin: BlockingAdminClient, args: argparse.Namespace) -> list[str]:
    if args.broker:
        return [args.broker]
    if args.cluster:
        return list(admin.master_addrs(args.cluster).values())
    raise SystemExit(f"{args.admin_command}: give -b BROKER_ADDR or -c CLUSTER")


@commands.admin("brokerStatus", "a broker's runtime statistics", BROKER_ADDR, CLUSTER)
def _broker_status(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    data = {addr: admin.broker_runtime_stats(addr) for addr in _broker_addrs(admin, args)}
    parts = []
    for addr, stats in data.items():
        header = f"broker {addr}\n" if len(data) > 1 else ""
        parts.append(header + "\n".join(f"{k:<36}: {v}" for k, v in sorted(stats.items())))
    return data, "\n\n".join(parts)


@commands.admin(
    "updateBrokerConfig",
    "change a broker setting at run time",
    BROKER_ADDR,
    CLUSTER,
    Option("-k", "--key", required=True),
    Option("-v", "--value", required=True),
)
def _update_broker_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    results = {}
    for addr in _broker_addrs(admin, args):
        remark = admin.update_broker_config(addr, {args.key: args.value})
        results[addr] = remark or "OK"
    text = "\n".join(f"update broker config success, {addr}: {r}" for addr, r in results.items())
    return results, text


@commands.admin("getBrokerConfig", "a broker's settings (mqadmin getBrokerConfig)", BROKER_ADDR, CLUSTER)
def _get_broker_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    data = {addr: admin.get_broker_config(addr) for addr in _broker_addrs(admin, args)}
    return data, config_tables(data, blank_after=True)


@commands.admin(
    "brokerConsumeStats",
    "every group's lag on a broker (mqadmin brokerConsumeStats)",
    Option("-b", "--brokerAddr", dest="broker", required=True),
    Option("-l", "--level", type=int, default=0, help="only rows with at least this diff"),
    Option("-o", "--order", type=parse_bool, default=False, help="order topics only"),
)
def _broker_consume_stats(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    stats = admin.broker_consume_stats(args.broker, is_order=args.order)
    header = f"{'#Topic':<64}  {'#Group':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
    header += f"{'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime"
    lines = [header]
    for by_group in stats.consume_stats_list:
        for group, stats_of_topics in by_group.items():
            for topic_stats in stats_of_topics:
                for mq, w in sorted(topic_stats.offset_table.items(), key=lambda e: e[0]):  # as compareTo
                    diff = w.broker_offset - w.consumer_offset
                    if diff < args.level or w.last_timestamp <= 0:  # mqadmin prints consumed queues only
                        continue
                    last = format_time(w.last_timestamp)
                    lines.append(
                        f"{mq.topic:<64}  {group:<64}  {mq.broker_name:<32}  {mq.queue_id:<4d}  "
                        f"{w.broker_offset:<20d}  {w.consumer_offset:<20d}  {diff:<20d}  {last}"
                    )
    lines.append(f"\nDiff Total: {stats.total_diff}")
    return json.loads(stats.to_json(standard=True)), "\n".join(lines)


def _send_msg_status_body(size: int) -> bytes:
    """mqadmin ``sendMsgStatus``'s body: "hello jodie" repeated to at least ``size`` bytes."""
    return b"hello jodie" * math.ceil(size / 11)


@commands.client(
    "sendMsgStatus",
    "send messages to a broker's own topic and print each send's RT (mqadmin sendMsgStatus)",
    Option("-b", "--brokerName", dest="broker_name", required=True, help="broker name"),
    Option("-s", "--messageSize", dest="message_size", type=int, default=128),
    Option("-c", "--count", type=int, default=50),
)
def _send_msg_status(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``sendMsgStatus``: producer group PID_SMSC sends to the topic named as the
    broker, one warm-up send of 16 bytes, then ``count`` sends, each printed with its RT."""
    lines = []
    data = []
    with BlockingProducer(
        "PID_SMSC",
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"PID_SMSC_{int(time.time() * 1000)}",
        portal=portal,
    ) as producer:
        producer.send(Message(args.broker_name, _send_msg_status_body(16)))
        for _ in range(args.count):
            began = time.time_ns() // 1_000_000
            result = producer.send(Message(args.broker_name, _send_msg_status_body(args.message_size)))
            rt = time.time_ns() // 1_000_000 - began
            lines.append(f"rt={rt}ms, SendResult={java_send_result(result)}")
            data.append({"rt": rt, "sendStatus": result.send_status.name, "msgId": result.msg_id,
                         "offsetMsgId": result.offset_msg_id, "queueId": result.message_queue.queue_id,
                         "queueOffset": result.queue_offset})  # fmt: skip
    return data, "\n".join(lines)


_CLEAN_OPTIONS = (
    Option("-b", "--brokerAddr", dest="broker", help="one broker"),
    Option("-c", "--cluster", dest="cluster", help="every broker of a cluster (default: of every cluster)"),
)


def _succeeded(results: dict[str, bool]) -> Result:
    """mqadmin's clean commands print ``success`` or ``false`` (and no newline)."""
    ok = bool(results) and all(results.values())
    return results, "success" if ok else "false"


@commands.admin(
    "cleanExpiredCQ",
    "have brokers destroy the consume queues whose messages are all gone (mqadmin cleanExpiredCQ)",
    *_CLEAN_OPTIONS,
)
def _clean_expired_cq(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _succeeded(admin.clean_expired_consume_queue(cluster=args.cluster, broker_addr=args.broker))


@commands.admin(
    "cleanUnusedTopic",
    "have brokers destroy the consume queues of topics they no longer have (mqadmin cleanUnusedTopic)",
    *_CLEAN_OPTIONS,
)
def _clean_unused_topic(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _succeeded(admin.clean_unused_topic(cluster=args.cluster, broker_addr=args.broker))


@commands.admin(
    "deleteExpiredCommitLog",
    "have brokers delete their expired commit-log files now (mqadmin deleteExpiredCommitLog)",
    *_CLEAN_OPTIONS,
)
def _delete_expired_commit_log(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _succeeded(admin.delete_expired_commit_log(cluster=args.cluster, broker_addr=args.broker))
