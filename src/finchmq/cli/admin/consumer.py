"""mqadmin's consumer commands (``tools/command/consumer``): a group's progress and its consumers'
running info, creating or deleting a subscription group, and (5.x) how a group reads a topic
(``setConsumeMode``: PULL or POP).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from finchmq.client import BlockingAdminClient, MQClientError
from finchmq.client.results import PullStatus
from finchmq.client.sync import BlockingPullConsumer, Portal
from finchmq.client.views import consume_progress_dict
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import (
    BodyError,
    ConsumerRunningInfo,
    GroupRetryPolicy,
    MessageRequestMode,
    OffsetWrapper,
    SubscriptionGroupConfig,
    java_key_hash,
)
from finchmq.protocol.codes import version_desc
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, TOOLS_CONSUMER_GROUP

from .command import BROKER_ADDR, CLUSTER, CommandFamily, Option, Result, parse_bool
from .javafmt import (
    analyze_process_queue,
    analyze_subscription,
    format_consumer_running_info,
    format_table,
    format_time,
    java_bool,
)

__all__ = ["commands"]

commands = CommandFamily()


@commands.admin(
    "consumerProgress",
    "a group's offsets and lag per queue",
    Option("-g", "--groupName", dest="group", required=True),
    Option("-t", "--topic"),
)
def _consumer_progress(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    stats = admin.consume_stats(args.group, args.topic)
    data = consume_progress_dict(args.group, stats)
    rows = [
        (q["topic"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"],
         format_time(q["lastTimestamp"]))
        for q in data["queues"]
    ]  # fmt: skip
    text = format_table(
        ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "LastTime"], rows
    )
    text += f"\n\nConsume TPS: {stats.consume_tps:.2f}\nDiff Total: {data['diffTotal']}"
    return data, text


@commands.admin(
    "consumerStatus",
    "a group's consumers as they see themselves (mqadmin consumerStatus)",
    Option("-g", "--consumerGroup", dest="group", required=True),
    Option("-i", "--clientId", dest="client_id", help="one consumer's full running info"),
    Option("-b", "--brokerAddr", dest="broker", help="ask this broker for the group's clients"),
    Option("-s", "--jstack", action="store_true", help="include the consumer's thread dump"),
)
def _consumer_status(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``consumerStatus``: each online consumer's running info (written to
    ``<now>/<clientId>`` as mqadmin does) and whether the group agrees; with -i, one client's."""
    now = int(time.time() * 1000)
    if args.client_id:
        info = admin.consumer_running_info(args.group, args.client_id, jstack=args.jstack)
        return json.loads(info.to_json(standard=True)), format_consumer_running_info(info).rstrip("\n")
    conn = admin.consumer_connection(args.group, broker_addr=args.broker)
    lines = [f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile"]
    by_client: dict[str, ConsumerRunningInfo] = {}
    for c in conn.connection_set:
        try:
            info = admin.consumer_running_info(args.group, c.client_id, jstack=args.jstack)
        except MQClientError as exc:
            print(f"{c.client_id}: {exc}", file=sys.stderr)
            continue
        by_client[c.client_id] = info
        path = Path(str(now)) / c.client_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_consumer_running_info(info))
        lines.append(f"{len(by_client):<10d} {c.client_id:<40} {version_desc(c.version):<20} {path}")
    text = "\n".join(lines) + "\n"
    same = analyze_subscription(by_client, now) if by_client else True
    if by_client:
        if same:
            text += "\n\nSame subscription in the same group of consumer"
            text += "\n\nRebalance OK\n"
            text += "".join(analyze_process_queue(cid, by_client[cid], now) for cid in sorted(by_client))
        else:
            text += "\n\nWARN: Different subscription in the same group of consumer!!!"
    data = {
        "group": args.group,
        "sameSubscription": same,
        "clients": {cid: json.loads(info.to_json(standard=True)) for cid, info in by_client.items()},
    }
    return data, text.rstrip("\n")


def _sub_group_text(config: SubscriptionGroupConfig) -> str:
    """4.9.8's ``toString``; the 5.x fields where 5.3.3 puts them, when they are set."""
    orderly = config.consume_message_orderly
    policy = config.group_retry_policy
    return (
        f"SubscriptionGroupConfig [groupName={config.group_name}, "
        f"consumeEnable={java_bool(config.consume_enable)}, "
        f"consumeFromMinEnable={java_bool(config.consume_from_min_enable)}, "
        f"consumeBroadcastEnable={java_bool(config.consume_broadcast_enable)}, "
        + ("" if orderly is None else f"consumeMessageOrderly={java_bool(orderly)}, ")
        + f"retryQueueNums={config.retry_queue_nums}, "
        f"retryMaxTimes={config.retry_max_times}, "
        + ("" if policy is None else f"groupRetryPolicy={policy.to_json().decode()}, ")
        + f"brokerId={config.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={config.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={java_bool(config.notify_consumer_ids_changed_enable)}]"
    )


def _group_retry_policy(text: str) -> GroupRetryPolicy:
    """mqadmin ``-p``: a ``GroupRetryPolicy`` as JSON."""
    try:
        return GroupRetryPolicy.from_json(text.strip())
    except BodyError as exc:
        raise argparse.ArgumentTypeError(
            f'{exc}; e.g. {{"type":"EXPONENTIAL","exponentialRetryPolicy":'
            f'{{"initial":5000,"max":7200000,"multiplier":2}}}} or '
            f'{{"type":"CUSTOMIZED","customizedRetryPolicy":{{"next":[1000,5000,10000]}}}}'
        ) from None


@commands.admin(
    "updateSubGroup",
    "create or update a consumer group's settings (mqadmin updateSubGroup)",
    Option("-g", "--groupName", dest="group", required=True),
    CLUSTER,
    BROKER_ADDR,
    Option("-s", "--consumeEnable", dest="consume_enable", type=parse_bool, default=True),
    Option("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=parse_bool, default=False),
    Option("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=parse_bool, default=False),
    Option("-o", "--consumeMessageOrderly", dest="consume_message_orderly", type=parse_bool),
    Option("-q", "--retryQueueNums", dest="retry_queue_nums", type=int, default=1),
    Option("-r", "--retryMaxTimes", dest="retry_max_times", type=int, default=16),
    Option("-p", "--groupRetryPolicy", dest="group_retry_policy", type=_group_retry_policy),
    Option("-i", "--brokerId", dest="broker_id", type=int, default=0),
    Option(
        "-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int, default=1
    ),
    Option(
        "-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed", type=parse_bool, default=True
    ),
)
def _update_sub_group(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    if not args.cluster and not args.broker:
        raise SystemExit("updateSubGroup: give -c CLUSTER or -b BROKER_ADDR")
    config = SubscriptionGroupConfig(  # mqadmin's defaults differ from the broker's for two flags
        group_name=args.group,
        consume_enable=args.consume_enable,
        consume_from_min_enable=args.consume_from_min_enable,
        consume_broadcast_enable=args.consume_broadcast_enable,
        consume_message_orderly=args.consume_message_orderly,
        retry_queue_nums=args.retry_queue_nums,
        retry_max_times=args.retry_max_times,
        group_retry_policy=args.group_retry_policy,
        broker_id=args.broker_id,
        which_broker_when_consume_slowly=args.which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=args.notify_consumer_ids_changed,
    )
    addrs = admin.create_subscription_group(config, cluster=args.cluster, broker_addr=args.broker)
    text = "".join(f"create subscription group to {a} success.\n" for a in addrs) + _sub_group_text(config)
    return {"brokers": addrs, "config": json.loads(config.to_json(standard=True))}, text


@commands.admin(
    "deleteSubGroup",
    "delete a consumer group (with -c also its retry and DLQ topics)",
    Option("-g", "--groupName", dest="group", required=True),
    CLUSTER,
    BROKER_ADDR,
)
def _delete_sub_group(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    if not args.cluster and not args.broker:
        raise SystemExit("deleteSubGroup: give -c CLUSTER or -b BROKER_ADDR")
    addrs = admin.delete_subscription_group(args.group, cluster=args.cluster, broker_addr=args.broker)
    lines = [
        f"delete subscription group [{args.group}] from broker [{a}]"
        + (f" in cluster [{args.cluster}]" if args.cluster else "")
        + " success."
        for a in addrs
    ]
    if args.cluster:
        for topic in (f"%RETRY%{args.group}", f"%DLQ%{args.group}"):
            lines.append(f"delete topic [{topic}] from cluster [{args.cluster}] success.")
            lines.append(f"delete topic [{topic}] from NameServer success.")
    return {"group": args.group, "brokers": addrs}, "\n".join(lines)


def _mode(text: str) -> MessageRequestMode:
    try:
        return MessageRequestMode[text.strip()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"consume mode must be PULL or POP, got {text!r}") from None


@commands.admin(
    "setConsumeMode",
    "how a group's push consumers read a topic: PULL or POP (5.x mqadmin setConsumeMode)",
    BROKER_ADDR,
    CLUSTER,
    Option("-t", "--topicName", dest="topic", required=True),
    Option("-g", "--groupName", dest="group", required=True),
    Option("-m", "--mode", type=_mode, required=True, help="consume mode. PULL/POP"),
    Option("-q", "--popShareQueueNum", dest="pop_share_queue_num", type=int, default=0,
           help="num of queue which share in pop mode"),
)  # fmt: skip
def _set_consume_mode(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """5.x mqadmin ``setConsumeMode``: -b one broker, -c every master of a cluster (a broker that
    refuses is reported and the others still set)."""
    if not args.cluster and not args.broker:
        raise SystemExit("setConsumeMode: give -c CLUSTER or -b BROKER_ADDR")
    addrs = [args.broker] if args.broker else sorted(admin.master_addrs(args.cluster).values())
    lines, done, failed = [], [], {}
    for addr in addrs:
        try:
            admin.set_message_request_mode(
                args.topic, args.group, args.mode, args.pop_share_queue_num, broker_addr=addr
            )
        except MQClientError as exc:
            if args.broker:
                raise
            print(f"set consume mode to {addr} failed: {exc}", file=sys.stderr)
            failed[addr] = str(exc)
            continue
        done.append(addr)
        lines.append(f"set consume mode to {addr} success.")
    lines.append(
        f"topic[{args.topic}] group[{args.group}] consume mode[{args.mode.name}] "
        f"popShareQueueNum[{args.pop_share_queue_num}]"
    )
    data = {
        "topic": args.topic,
        "group": args.group,
        "mode": args.mode.name,
        "popShareQueueNum": args.pop_share_queue_num,
        "brokers": done,
        "failed": failed,
    }
    return data, "\n".join(lines)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _java_value(value: object) -> str:
    return java_bool(value) if isinstance(value, bool) else str(value)


@commands.admin(
    "getConsumerConfig",
    "a consumer group's settings on every broker that has it (mqadmin getConsumerConfig)",
    Option("-g", "--groupName", dest="group", required=True),
)
def _get_consumer_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``getConsumerConfig``: each broker (the cluster table's order, Java's HashMap's)
    asked through its master (else a slave); a banner then every field of its
    ``SubscriptionGroupConfig``, nothing for a group no broker has."""
    info = admin.cluster_info()
    found = []
    for broker_name in java_hash_order(list(info.broker_addr_table), java_key_hash):
        addr = info.broker_addr_table[broker_name].select_broker_addr()
        if addr is None:
            continue
        config = admin.examine_subscription_group_config(addr, args.group)
        if config is None:
            continue
        cluster = next((c for c, names in info.cluster_addr_table.items() if broker_name in names), None)
        found.append((cluster, broker_name, config))
    lines = []
    for cluster, broker_name, config in found:
        lines.append(f"============================={cluster}:{broker_name}=============================")
        lines.extend(
            f"{_camel(f.name):<40}=  {_java_value(getattr(config, f.name))}"
            for f in dataclasses.fields(config)
            if getattr(config, f.name) is not None  # the 5.x fields, unset: 4.9.8 has no such field
        )
    data = [
        {
            "clusterName": cluster,
            "brokerName": broker_name,
            "config": json.loads(config.to_json(standard=True)),
        }
        for cluster, broker_name, config in found
    ]
    return data, "\n".join(lines)


_MONITOR = "[MONITOR] "
_NOTIFY = _MONITOR + " [NOTIFY] "


def _undone_msgs(admin: BlockingAdminClient, puller: BlockingPullConsumer, group: str) -> list[str]:
    """Java ``MonitorService.reportUndoneMsgs``: per topic the group consumes, its lag in all,
    on its worst queue, and how far (ms) its last consumed message is behind the newest
    stored; nothing for a group with no consumer online."""
    try:
        stats = admin.consume_stats(group)
        admin.consumer_connection(group)
    except MQClientError:
        return []
    by_topic: dict[str, list[tuple[MessageQueue, OffsetWrapper]]] = {}
    for mq, wrapper in stats.offset_table.items():
        by_topic.setdefault(mq.topic, []).append((mq, wrapper))
    lines = []
    for topic in java_hash_order(list(by_topic), java_key_hash):
        total = single_max = delay_max = 0
        for mq, wrapper in by_topic[topic]:
            diff = wrapper.broker_offset - wrapper.consumer_offset
            single_max = max(single_max, diff)
            total += max(diff, 0)
            if wrapper.last_timestamp > 0:
                try:
                    newest = puller.max_offset(mq)
                    if newest > 0:
                        found = puller.pull(mq, "*", newest - 1, 1)
                        if found.pull_status is PullStatus.FOUND:
                            delay = found.msg_found_list[0].store_timestamp - wrapper.last_timestamp
                            delay_max = max(delay_max, delay)
                except MQClientError:
                    pass
        lines.append(
            f"{_MONITOR}reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={topic}, "
            f"undoneMsgsTotal={total}, undoneMsgsSingleMQ={single_max}, undoneMsgsDelayTimeMills={delay_max}]"
        )
    return lines


def _running_info_notices(admin: BlockingAdminClient, group: str, now_ms: int) -> list[str]:
    """Java ``MonitorService.reportConsumerRunningInfo`` with ``DefaultMonitorListener``: a
    notice when the group's clients disagree on subscriptions, and one per client with a
    queue in trouble."""
    try:
        conn = admin.consumer_connection(group)
    except MQClientError:
        return []
    by_client: dict[str, ConsumerRunningInfo] = {}
    for c in conn.connection_set:
        try:
            by_client[c.client_id] = admin.consumer_running_info(group, c.client_id)
        except MQClientError:
            continue
    if not by_client:
        return []
    lines = []
    if not analyze_subscription(by_client, now_ms):
        lines.append(f"{_NOTIFY}reportConsumerRunningInfo: ConsumerGroup: {group}, Subscription different")
    for client_id in sorted(by_client):
        problem = analyze_process_queue(client_id, by_client[client_id], now_ms)
        if problem:
            where = f"ConsumerGroup: {group}, ClientId: {client_id}"
            lines.append(f"{_NOTIFY}reportConsumerRunningInfo: {where}, {problem}")
    return lines


@commands.client(
    "startMonitoring",
    "every round, each group's undone messages and consumers in trouble, until ^C (mqadmin startMonitoring)",
    Option(
        "--roundInterval", dest="round_interval", type=int, default=60_000, help="ms between rounds (60000)"
    ),
    Option("--firstDelay", dest="first_delay", type=int, default=20_000, help="ms before the first (20000)"),
    Option("--rounds", type=int, default=0, help="stop after this many rounds (default: run until ^C)"),
    streamed=True,
)
def _start_monitoring(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``startMonitoring`` (Java ``MonitorService`` with ``DefaultMonitorListener``):
    every round, for each group with a retry topic, its undone messages per topic and notices
    about its consumers, printed here where Java writes them to its client log. Java's
    monitor also logs OFFSET_MOVED_EVENT messages (``reportDeleteMsgsEvent``); finchmq's
    brokers do not send that event, so there is nothing to report."""
    with (
        BlockingAdminClient(
            namesrv_addr=args.namesrv, session_credentials=args.credentials, portal=portal
        ) as admin,
        BlockingPullConsumer(
            TOOLS_CONSUMER_GROUP,
            namesrv_addr=args.namesrv,
            session_credentials=args.credentials,
            instance_name=f"monitor-{int(time.time() * 1000)}",
            portal=portal,
        ) as puller,
    ):
        time.sleep(args.first_delay / 1000)
        done = 0
        while True:
            began = time.monotonic()
            print(f"{_MONITOR}=========================================beginRound", flush=True)
            for topic in admin.topic_list():
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
                    lines = _undone_msgs(admin, puller, group)
                    lines += _running_info_notices(admin, group, int(time.time() * 1000))
                    for line in lines:
                        print(line, flush=True)
            print(f"{_MONITOR}=========================================endRound", flush=True)
            done += 1
            if args.rounds and done >= args.rounds:
                return {"rounds": done}, ""
            time.sleep(max(args.round_interval / 1000 - (time.monotonic() - began), 0))
