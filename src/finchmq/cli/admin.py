"""``finchmq admin COMMAND``: mqadmin's most used commands over ``finchmq.client``'s blocking API.

Each command has mqadmin's name and short options (``-n`` name server, ``-t`` topic, ``-g``
group, ``-c`` cluster, ``-b`` broker address...), prints a human-readable table, or JSON with
``--json``. Exit status: 0 on success, 1 when the cluster answers with an error (message on
stderr), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from finchmq.client import (
    BlockingAdminClient,
    BlockingProducer,
    BlockingPullConsumer,
    MessageExt,
    MessageQueue,
    MQClientError,
    PullStatus,
    SessionCredentials,
)
from finchmq.client.allocate import AllocateMessageQueueAveragely
from finchmq.client.route import topic_route_data_to_subscribe_info
from finchmq.client.sync import Portal
from finchmq.client.views import (
    cluster_broker_dict,
    consume_progress_dict,
    message_dict,
    offset_table_rows,
    topic_status_rows,
    trace_view_dict,
)
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import (
    MASTER_ID,
    BrokerStatsData,
    ConsumerRunningInfo,
    PermName,
    RebalanceResult,
    SubscriptionGroupConfig,
    java_key_hash,
)
from finchmq.protocol.codes import version_desc
from finchmq.protocol.message import Message
from finchmq.protocol.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TOOLS_CONSUMER_GROUP
from finchmq.protocol.trace import TraceView

from .javafmt import (
    analyze_process_queue,
    analyze_subscription,
    format_consumer_running_info,
    human_time2,
    java_bool,
    java_fixed,
    java_map,
    java_message_ext,
    java_properties_order,
)

__all__ = ["add_admin_parser", "format_table"]

_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_TIMESTAMP_HELP = "now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, mqadmin style (``#Header``)."""
    cells = [[f"#{h}" for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime(_TIME_FORMAT) if ms > 0 else "-"


def _parse_timestamp(text: str) -> int:
    """``now``, epoch ms, ``yyyy-MM-dd#HH:mm:ss:SSS`` (mqadmin) or ISO 8601 -> epoch ms."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return int(datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"bad timestamp {text!r}: use now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")


# -- commands: each returns (json data, text) --------------------------------------------------------

Result = tuple[Any, str]


def _update_topic(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    if not args.cluster and not args.broker:
        raise SystemExit("updateTopic: give -c CLUSTER or -b BROKER_ADDR")
    addrs = admin.create_topic(
        args.topic,
        read_queue_nums=args.read_queue_nums,
        write_queue_nums=args.write_queue_nums,
        perm=args.perm,
        order=args.order,
        cluster=args.cluster,
        broker_addr=args.broker,
    )
    data = {
        "topic": args.topic,
        "readQueueNums": args.read_queue_nums,
        "writeQueueNums": args.write_queue_nums,
        "perm": args.perm,
        "order": args.order,
        "brokers": addrs,
    }
    text = "\n".join(f"create topic to {a} success." for a in addrs) + f"\n{data}"
    return data, text


def _delete_topic(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.delete_topic(args.topic, args.cluster)
    return {"topic": args.topic, "deleted": True}, f"delete topic [{args.topic}] from cluster success."


def _topic_list(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    topics = admin.topic_list()
    return topics, "\n".join(topics)


def _topic_route(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    route = admin.topic_route(args.topic)
    data = json.loads(route.to_json(standard=True))
    rows = [
        (qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, PermName.perm2string(qd.perm))
        for qd in route.queue_datas
    ]
    brokers = [
        (bd.cluster, bd.broker_name, bid, addr)
        for bd in route.broker_datas
        for bid, addr in sorted(bd.broker_addrs.items())
    ]
    text = format_table(["Broker Name", "Read Queues", "Write Queues", "Perm"], rows)
    text += "\n\n" + format_table(["Cluster", "Broker Name", "BID", "Addr"], brokers)
    return data, text


def _topic_status(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    table = admin.topic_status(args.topic)
    rows = [
        (mq.broker_name, mq.queue_id, o.min_offset, o.max_offset, _time(o.last_update_timestamp))
        for mq, o in table.offset_table.items()
    ]
    return topic_status_rows(table), format_table(
        ["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"], rows
    )


def _consumer_progress(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    stats = admin.consume_stats(args.group, args.topic)
    data = consume_progress_dict(args.group, stats)
    rows = [
        (q["topic"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"],
         _time(q["lastTimestamp"]))
        for q in data["queues"]
    ]  # fmt: skip
    text = format_table(
        ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "LastTime"], rows
    )
    text += f"\n\nConsume TPS: {stats.consume_tps:.2f}\nDiff Total: {data['diffTotal']}"
    return data, text


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


def _reset_offset_by_time(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    table = admin.reset_offset_by_time(args.group, args.topic, args.timestamp, force=args.force)
    rows = [(mq.broker_name, mq.queue_id, offset) for mq, offset in table.items()]
    return offset_table_rows(table), format_table(["brokerName", "queueId", "offset"], rows)


def _describe(msg: MessageExt) -> str:
    d = message_dict(msg)
    lines = [
        ("OffsetID", d["offsetMsgId"]),
        ("Topic", d["topic"]),
        ("Tags", f"[{d['tags'] or ''}]"),
        ("Keys", f"[{d['keys'] or ''}]"),
        ("Queue ID", d["queueId"]),
        ("Queue Offset", d["queueOffset"]),
        ("CommitLog Offset", d["commitLogOffset"]),
        ("Reconsume Times", d["reconsumeTimes"]),
        ("Born Timestamp", _time(d["bornTimestamp"])),
        ("Store Timestamp", _time(d["storeTimestamp"])),
        ("Born Host", d["bornHost"]),
        ("Store Host", d["storeHost"]),
        ("System Flag", msg.sys_flag),
        ("Properties", d["properties"]),
        ("Message Body", d["body"]),
    ]
    return "\n".join(f"{k + ':':<20}{v}" for k, v in lines)


_BODY_DIR = Path("/tmp/rocketmq/msgbodys")  # where mqadmin writes the bodies it shows


def _java_detail(admin: BlockingAdminClient, msg: MessageExt, *, offset_id: bool, index: int = 0) -> str:
    """mqadmin's message detail (``QueryMsgByIdSubCommand.printMsg``, ``showMessage`` without the
    OffsetID line): the fields, the body written to a file, and the consumer groups' tracks."""
    _BODY_DIR.mkdir(parents=True, exist_ok=True)
    body_path = _BODY_DIR / (msg.client_msg_id + (f"_{index}" if index else ""))
    body_path.write_bytes(msg.body)
    rows: list[tuple[str, object]] = [("OffsetID:", msg.msg_id)] if offset_id else []
    rows += [
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags}]" if msg.tags is not None else "[null]"),
        ("Keys:", f"[{msg.keys}]" if msg.keys is not None else "[null]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", human_time2(msg.born_timestamp)),
        ("Store Timestamp:", human_time2(msg.store_timestamp)),
        ("Born Host:", msg.born_host),
        ("Store Host:", msg.store_host),
        ("System Flag:", msg.sys_flag),
        ("Properties:", java_map(msg.properties)),
        ("Message Body Path:", body_path),
    ]
    tracks = "".join(str(t) for t in admin.message_track_detail(msg))
    return "".join(f"{k:<20} {v}\n" for k, v in rows) + "\n\n" + (tracks or "WARN: No Consumer")


def _query_msg_by_id(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``queryMsgById``: messages by offset id (comma separated), or by client id with -t."""
    msgs = [
        admin.view_message(msg_id.strip(), args.topic) for msg_id in args.msg_id.split(",") if msg_id.strip()
    ]
    data = [message_dict(m) for m in msgs]
    return data[0] if len(data) == 1 else data, "".join(_java_detail(admin, m, offset_id=True) for m in msgs)


_TRACE_TAIL = ("#CostTimes", "#Status")


def _query_msg_trace_by_id(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``queryMsgTraceById``: the trace records of a message (its send, each group's
    consumption), read from the trace topic by the message's id."""
    views = admin.query_msg_trace_by_id(args.msg_id, args.trace_topic)
    row = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}"
    lines: list[str] = []
    by_group: dict[str, list[TraceView]] = {}
    for view in views:
        if view.msg_type == "Pub":
            lines.append(
                row.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
            )
            lines.append(row.format("Pub", view.group_name, view.client_host, _time(view.time_stamp),
                                    f"{view.cost_time}ms", view.status))  # fmt: skip
            lines.append("")
        elif view.msg_type == "SubAfter":
            by_group.setdefault(view.group_name, []).append(view)
    for group in java_hash_order(list(by_group), java_key_hash):
        lines.append(
            row.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        )
        for view in by_group[group]:
            lines.append(row.format("Sub", view.group_name, view.client_host, _time(view.time_stamp),
                                    f"{view.cost_time}ms", view.status))  # fmt: skip
        lines.append("")
    return [trace_view_dict(v) for v in views], "\n".join(lines).rstrip("\n")


def _query_msg_by_unique_key(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``queryMsgByUniqueKey``: the message(s) with a client id (UNIQ_KEY), earliest
    stored first; -a shows every one (up to 32), else the first."""
    found = [m for m in admin.query_message(args.topic, args.msg_id, 32) if m.unique_key == args.msg_id]
    if not found:
        raise ValueError(f"no message of {args.topic} has the unique key {args.msg_id}")
    found.sort(key=lambda m: m.store_timestamp)
    shown = found if args.show_all else found[:1]
    text = "".join(_java_detail(admin, m, offset_id=False, index=i) for i, m in enumerate(shown))
    return [message_dict(m) for m in shown], text


def _query_msg_by_key(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    msgs = admin.query_message(args.topic, args.key, args.max_num, args.begin, args.end)
    rows = [(m.client_msg_id, m.msg_id, m.queue_id, m.queue_offset) for m in msgs]
    return [message_dict(m) for m in msgs], format_table(["Message ID", "Offset ID", "QID", "Offset"], rows)


def _cluster_list(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    brokers = admin.cluster_brokers()
    rows = [
        (b.cluster, b.broker_name, b.broker_id, b.addr, b.stats.get("brokerVersionDesc", "-"),
         b.stats.get("putTps", "-"), b.stats.get("getTransferedTps", "-"))
        for b in brokers
    ]  # fmt: skip
    return [cluster_broker_dict(b) for b in brokers], format_table(
        ["Cluster Name", "Broker Name", "BID", "Addr", "Version", "InTPS", "OutTPS"], rows
    )


def _broker_addrs(admin: BlockingAdminClient, args: argparse.Namespace) -> list[str]:
    if args.broker:
        return [args.broker]
    if args.cluster:
        return list(admin.master_addrs(args.cluster).values())
    raise SystemExit(f"{args.admin_command}: give -b BROKER_ADDR or -c CLUSTER")


def _broker_status(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    data = {addr: admin.broker_runtime_stats(addr) for addr in _broker_addrs(admin, args)}
    parts = []
    for addr, stats in data.items():
        header = f"broker {addr}\n" if len(data) > 1 else ""
        parts.append(header + "\n".join(f"{k:<36}: {v}" for k, v in sorted(stats.items())))
    return data, "\n\n".join(parts)


def _update_broker_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    results = {}
    for addr in _broker_addrs(admin, args):
        remark = admin.update_broker_config(addr, {args.key: args.value})
        results[addr] = remark or "OK"
    text = "\n".join(f"update broker config success, {addr}: {r}" for addr, r in results.items())
    return results, text


def _acl_brokers(args: argparse.Namespace, command: str) -> None:
    if not args.cluster and not args.broker:
        raise ValueError(f"give -c CLUSTER or -b BROKER_ADDR (mqadmin {command})")


def _perm_list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _update_acl_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "updateAclConfig")
    addrs = admin.create_and_update_plain_access_config(
        args.access_key_arg,
        args.secret_key_arg,
        white_remote_address=args.white_remote_address,
        admin=args.admin,
        default_topic_perm=args.default_topic_perm,
        default_group_perm=args.default_group_perm,
        topic_perms=_perm_list(args.topic_perms),
        group_perms=_perm_list(args.group_perms),
        cluster=args.cluster,
        broker_addr=args.broker,
    )
    text = "".join(f"create or update plain access config to {a} success.\n" for a in addrs)
    return {"brokers": addrs, "accessKey": args.access_key_arg}, text + f"accessKey: {args.access_key_arg}"


def _delete_access_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "deleteAccessConfig")
    addrs = admin.delete_plain_access_config(
        args.access_key_arg, cluster=args.cluster, broker_addr=args.broker
    )
    text = "".join(f"delete plain access config account from {a} success.\n" for a in addrs)
    return {
        "brokers": addrs,
        "accessKey": args.access_key_arg,
    }, text + f"account's accesskey is:{args.access_key_arg}"


def _update_global_white_addr(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "updateGlobalWhiteAddr")
    addresses = _perm_list(args.global_white_addrs)
    addrs = admin.update_global_white_addr_config(
        addresses, acl_file_full_path=args.acl_file_full_path, cluster=args.cluster, broker_addr=args.broker
    )
    text = "".join(f"update global white remote addresses to {a} success.\n" for a in addrs)
    return {"brokers": addrs, "globalWhiteRemoteAddresses": addresses}, text.rstrip("\n")


def _cluster_acl_config_version(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "clusterAclConfigVersion")
    addrs = [args.broker] if args.broker else sorted(admin.master_addrs(args.cluster).values())
    row = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}"
    lines = [row.format("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
                        "#AclConfigVersionNum", "#AclLastUpdateTime")]  # fmt: skip
    data = []
    for addr in addrs:
        info = admin.examine_broker_cluster_acl_version_info(addr)
        for path, version in info.all_acl_config_data_version.items():
            when = datetime.fromtimestamp(version.timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S")
            lines.append(row.format(info.cluster_name, info.broker_name, info.broker_addr, path,
                                    str(version.counter), when))  # fmt: skip
            data.append({"clusterName": info.cluster_name, "brokerName": info.broker_name,
                         "brokerAddr": info.broker_addr, "aclFilePath": path, "counter": version.counter,
                         "timestamp": version.timestamp})  # fmt: skip
    return data, "\n".join(lines)


def _send_message(args: argparse.Namespace, portal: Portal) -> Result:
    msg = Message.create(
        args.topic, args.body.encode("utf-8"), tags=args.tags or None, keys=args.keys or None
    )
    with BlockingProducer(
        args.producer_group,
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    ) as producer:
        queue = None
        if args.broker and args.queue_id is not None:
            queue = MessageQueue(args.topic, args.broker, args.queue_id)
        result = producer.send(msg, queue=queue)
    data = {
        "sendStatus": result.send_status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "brokerName": result.message_queue.broker_name,
        "queueId": result.message_queue.queue_id,
        "queueOffset": result.queue_offset,
    }
    rows = [(data["brokerName"], data["queueId"], data["sendStatus"], data["msgId"], data["queueOffset"])]
    return data, format_table(["Broker Name", "QID", "Send Result", "MsgId", "Queue Offset"], rows)


def _consume_message(args: argparse.Namespace, portal: Portal) -> Result:
    out: list[MessageExt] = []
    with BlockingPullConsumer(
        args.consumer_group,
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    ) as consumer:
        queues = sorted(consumer.fetch_subscribe_message_queues(args.topic))
        if args.broker:
            queues = [q for q in queues if q.broker_name == args.broker]
        if args.queue_id is not None:
            queues = [q for q in queues if q.queue_id == args.queue_id]
        for mq in queues:
            offset = args.offset if args.offset is not None else consumer.min_offset(mq)
            while len(out) < args.count:
                result = consumer.pull(mq, args.expression, offset, min(32, args.count - len(out)))
                if result.pull_status is PullStatus.FOUND:
                    out.extend(result.msg_found_list)
                elif result.pull_status is PullStatus.NO_NEW_MSG or result.next_begin_offset == offset:
                    break
                offset = result.next_begin_offset
            if len(out) >= args.count:
                break
    text = "\n\n".join(_describe(m) for m in out) or "no message"
    return [message_dict(m) for m in out], text


def _query_msg_by_offset(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``queryMsgByOffset``: the message at one queue offset."""
    mq = MessageQueue(args.topic, args.broker, args.queue_id)
    with BlockingPullConsumer(
        TOOLS_CONSUMER_GROUP,
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    ) as consumer:
        result = consumer.pull(mq, "*", args.offset, 1)
    if result.pull_status is not PullStatus.FOUND or not result.msg_found_list:
        raise ValueError(f"no message at {mq.topic}/{mq.broker_name}/{mq.queue_id} offset {args.offset}")
    msg = result.msg_found_list[0]
    with BlockingAdminClient(
        namesrv_addr=args.namesrv, session_credentials=args.credentials, portal=portal
    ) as admin:
        return message_dict(msg), _java_detail(admin, msg, offset_id=True)


def _check_msg_send_rt(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``checkMsgSendRT``: ``amount`` sync sends of ``size`` bytes round the queues, each
    one's RT in ms, and the average leaving the first (connection set-up) out."""
    rows: list[str] = [f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT"]
    data = []
    elapsed_total = 0
    with BlockingProducer(
        "PID_SMSC",
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    ) as producer:
        queues = producer.fetch_publish_message_queues(args.topic)
        body = b"a" * args.size
        for i in range(args.amount):
            mq = queues[i % len(queues)]
            began = time.monotonic()
            try:
                producer.send(Message(args.topic, body), queue=mq)
                ok = True
            except MQClientError:
                ok = False
            rt = int((time.monotonic() - began) * 1000)
            if i:
                elapsed_total += rt
            rows.append(f"{mq.broker_name:<32}  {mq.queue_id:<4}  {java_bool(ok):<20}    {rt}")
            data.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "sendResult": ok, "rt": rt})
    average = elapsed_total / max(args.amount - 1, 1)
    rows.append(f"Avg RT: {average:.2f}")
    return {"sends": data, "avgRt": round(average, 2)}, "\n".join(rows)


# -- groups, broker permission, name-server settings (mqadmin's names, options and output) ---------


def _clone_group_offset(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.clone_group_offset(args.src_group, args.dest_group, args.topic, offline=args.offline)
    data = {"srcGroup": args.src_group, "destGroup": args.dest_group, "topic": args.topic}
    text = (
        f"clone group offset success. srcGroup[{args.src_group}], destGroup=[{args.dest_group}], "
        f"topic[{args.topic}]"
    )
    return data, text


def _skip_accumulated_message(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``skipAccumulatedMessage``: move the group to the end of each queue of the topic."""
    table = admin.reset_offset_by_time(args.group, args.topic, -1, force=args.force)
    ordered = java_hash_order(list(table), java_key_hash)  # mqadmin prints its HashMap's order
    rows = [f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}"]
    rows += [f"{mq.broker_name:<40}  {mq.queue_id:<40d}  {table[mq]:<40d}" for mq in ordered]
    return offset_table_rows(table), "\n".join(rows)


def _sub_group_text(config: SubscriptionGroupConfig) -> str:
    return (
        f"SubscriptionGroupConfig [groupName={config.group_name}, "
        f"consumeEnable={java_bool(config.consume_enable)}, "
        f"consumeFromMinEnable={java_bool(config.consume_from_min_enable)}, "
        f"consumeBroadcastEnable={java_bool(config.consume_broadcast_enable)}, "
        f"retryQueueNums={config.retry_queue_nums}, "
        f"retryMaxTimes={config.retry_max_times}, brokerId={config.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={config.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={java_bool(config.notify_consumer_ids_changed_enable)}]"
    )


def _update_sub_group(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    if not args.cluster and not args.broker:
        raise SystemExit("updateSubGroup: give -c CLUSTER or -b BROKER_ADDR")
    config = SubscriptionGroupConfig(  # mqadmin's defaults differ from the broker's for two flags
        group_name=args.group,
        consume_enable=args.consume_enable,
        consume_from_min_enable=args.consume_from_min_enable,
        consume_broadcast_enable=args.consume_broadcast_enable,
        retry_queue_nums=args.retry_queue_nums,
        retry_max_times=args.retry_max_times,
        broker_id=args.broker_id,
        which_broker_when_consume_slowly=args.which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=args.notify_consumer_ids_changed,
    )
    addrs = admin.create_subscription_group(config, cluster=args.cluster, broker_addr=args.broker)
    text = "".join(f"create subscription group to {a} success.\n" for a in addrs) + _sub_group_text(config)
    return {"brokers": addrs, "config": json.loads(config.to_json(standard=True))}, text


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


def _get_broker_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    data = {addr: admin.get_broker_config(addr) for addr in _broker_addrs(admin, args)}
    return data, _config_tables(data, blank_after=True)


def _producer_connection(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    conn = admin.producer_connection(args.group, args.topic)
    rows = [
        f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language.name:<8} {version_desc(c.version)}"
        for i, c in enumerate(conn.connection_set, start=1)
    ]
    return json.loads(conn.to_json(standard=True)), "\n".join(rows)


def _topic_cluster_list(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    route = admin.topic_route(args.topic)
    brokers = {b.broker_name for b in route.broker_datas}
    clusters = sorted(
        c for c, names in admin.cluster_info().cluster_addr_table.items() if brokers & set(names)
    )
    return clusters, "\n".join(clusters)


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
                    last = _time(w.last_timestamp)
                    lines.append(
                        f"{mq.topic:<64}  {group:<64}  {mq.broker_name:<32}  {mq.queue_id:<4d}  "
                        f"{w.broker_offset:<20d}  {w.consumer_offset:<20d}  {diff:<20d}  {last}"
                    )
    lines.append(f"\nDiff Total: {stats.total_diff}")
    return json.loads(stats.to_json(standard=True)), "\n".join(lines)


def _change_write_perm(admin: BlockingAdminClient, args: argparse.Namespace, writable: bool) -> Result:
    counts = admin.change_write_perm(args.broker_name, writable=writable)
    verb = "add" if writable else "wipe"
    text = "\n".join(
        f"{verb} write perm of broker[{args.broker_name}] in name server[{ns}] OK, {n}"
        for ns, n in counts.items()
    )
    return counts, text


def _wipe_write_perm(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _change_write_perm(admin, args, writable=False)


def _add_write_perm(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _change_write_perm(admin, args, writable=True)


def _config_tables(configs: dict[str, dict[str, str]], *, blank_after: bool = False) -> str:
    """mqadmin's ``============addr============`` then ``key  =  value`` per setting, in the order
    Java's Properties map holds them (getBrokerConfig leaves a blank line after each table)."""
    return "".join(
        f"============{addr}============\n"
        + "".join(f"{k:<50}=  {config[k]}\n" for k in java_properties_order(list(config)))
        + ("\n" if blank_after else "")
        for addr, config in configs.items()
    ).removesuffix("\n")


def _get_namesrv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    data = admin.namesrv_config()
    return data, _config_tables(data)


def _update_namesrv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.update_namesrv_config({args.key: args.value})
    servers = admin.namesrv_config()
    return {"key": args.key, "value": args.value, "nameServers": list(servers)}, (
        f"update name server config success![{', '.join(servers)}]\n{args.key} : {args.value}"
    )


def _update_kv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.update_kv_config(args.namespace, args.key, args.value)
    return {"namespace": args.namespace, "key": args.key, "value": args.value}, (
        "create or update kv config to namespace success."
    )


def _delete_kv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.delete_kv_config(args.namespace, args.key)
    return {
        "namespace": args.namespace,
        "key": args.key,
        "deleted": True,
    }, "delete kv config from namespace success."


def _allocate_mq(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``allocateMQ``: how AllocateMessageQueueAveragely shares a topic's queues among
    client ids, queues in the order Java's HashSet holds them (as mqadmin does, unsorted)."""
    queues = topic_route_data_to_subscribe_info(args.topic, admin.topic_route(args.topic))
    ordered = java_hash_order(list(queues), java_key_hash)
    ids = args.ip_list.split(",")
    strategy = AllocateMessageQueueAveragely()
    result = RebalanceResult(result={ip: tuple(strategy.allocate("aa", ip, ordered, ids)) for ip in ids})
    return json.loads(result.to_json(standard=True)), result.to_json().decode()


NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # Java NamesrvUtil


def _update_order_conf(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``updateOrderConf``: the ORDER_TOPIC_CONFIG KV item of a topic (put, get, delete)."""
    if args.method == "get":
        conf = admin.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, args.topic)
        return {
            "topic": args.topic,
            "orderConf": conf,
        }, f"get orderConf success. topic=[{args.topic}], orderConf=[{conf}] "
    if args.method == "put":
        if not args.order_conf:
            raise ValueError("please set orderConf with option -v.")
        admin.update_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, args.topic, args.order_conf)
        return {"topic": args.topic, "orderConf": args.order_conf}, (
            f"update orderConf success. topic=[{args.topic}], orderConf=[{args.order_conf}]"
        )
    admin.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, args.topic)
    return {"topic": args.topic, "deleted": True}, f"delete orderConf success. topic=[{args.topic}]"


# -- messages, statistics and consumers as mqadmin prints them --------------------------------------


def _queue_range(
    consumer: BlockingPullConsumer, mq: MessageQueue, args: argparse.Namespace
) -> tuple[int, int]:
    """mqadmin's read range: the queue's min and max offsets, or the offsets of -b / -e times."""
    low = consumer.search_offset(mq, args.begin) if args.begin is not None else consumer.min_offset(mq)
    high = consumer.search_offset(mq, args.end) if args.end is not None else consumer.max_offset(mq)
    return low, high


def _msg_line(msg: MessageExt, mq: MessageQueue, args: argparse.Namespace) -> str:
    """mqadmin's ``MSGID: <id> <MessageExt.toString> BODY: <body or NOT PRINT BODY>``."""
    body = msg.body.decode(args.charset, errors="replace") if args.print_body else "NOT PRINT BODY"
    return f"MSGID: {msg.client_msg_id} {java_message_ext(msg, mq.broker_name)} BODY: {body}"


def _print_msg(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``printMsg``: every message of a topic, queue by queue, as ``MessageExt.toString``."""
    lines: list[str] = []
    data = []
    with BlockingPullConsumer(
        TOOLS_CONSUMER_GROUP,
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    ) as consumer:
        queues = java_hash_order(list(consumer.fetch_subscribe_message_queues(args.topic)), java_key_hash)
        for mq in queues:
            low, high = _queue_range(consumer, mq, args)
            lines.append(f"minOffset={low}, maxOffset={high}, {mq}")
            messages = []
            offset = low
            while offset < high:
                result = consumer.pull(mq, args.expression, offset, 32)
                offset = result.next_begin_offset
                status = result.pull_status
                if status is PullStatus.FOUND:
                    for msg in result.msg_found_list:
                        lines.append(_msg_line(msg, mq, args))
                        messages.append(message_dict(msg))
                elif status is PullStatus.NO_MATCHED_MSG:
                    lines.append(f"{mq} no matched msg. status={status.name}, offset={offset}")
                else:
                    lines.append(f"{mq} print msg finished. status={status.name}, offset={offset}")
                    break
            lines.append("-" * 56)
            data.append(
                {"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": low, "maxOffset": high,
                 "messages": messages}
            )  # fmt: skip
    return data, "\n".join(lines)


def _print_msg_by_queue(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``printMsgByQueue``: one queue's messages (-p), bodies (-d) and counts by tag (-f)."""
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    lines: list[str] = []
    messages = []
    tag_counts: dict[str, int] = {}
    with BlockingPullConsumer(
        TOOLS_CONSUMER_GROUP,
        namesrv_addr=args.namesrv,
        session_credentials=args.credentials,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    ) as consumer:
        low, high = _queue_range(consumer, mq, args)
        offset = low
        while offset < high:
            result = consumer.pull(mq, args.expression, offset, 32)
            offset = result.next_begin_offset
            if result.pull_status is not PullStatus.FOUND:
                break
            for msg in result.msg_found_list:
                if args.calculate and msg.tags and msg.tags.strip():
                    tag_counts[msg.tags] = tag_counts.get(msg.tags, 0) + 1
                if args.print_msg:
                    lines.append(_msg_line(msg, mq, args))
                messages.append(message_dict(msg))
    if args.calculate:  # by count, descending; ties in the order Java's HashMap holds the tags
        ordered = java_hash_order(list(tag_counts), java_key_hash)
        for tag in sorted(ordered, key=lambda t: -tag_counts[t]):
            lines.append(f"Tag: {tag:<30} Count: {tag_counts[tag]}")
    data = {"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": low, "maxOffset": high,
            "messages": messages if args.print_msg else [], "tagCounts": tag_counts}  # fmt: skip
    return data, "\n".join(lines)


def _stats_24h(stats: BrokerStatsData) -> int:
    """Java ``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    for item in (stats.stats_day, stats.stats_hour, stats.stats_minute):
        if item is not None and item.sum != 0:
            return item.sum
    return 0


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
            total += _stats_24h(stats)
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


def _cluster_rt(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``clusterRT``: ``amount`` sync sends to each broker's own topic, the average RT
    leaving the first send out, every ``interval`` seconds (forever unless --rounds)."""
    with (
        BlockingAdminClient(
            namesrv_addr=args.namesrv, session_credentials=args.credentials, portal=portal
        ) as admin,
        BlockingProducer(
            str(int(time.time() * 1000)),
            namesrv_addr=args.namesrv,
            session_credentials=args.credentials,
            instance_name=f"cli-{os.getpid()}",
            portal=portal,
        ) as producer,
    ):
        table = admin.cluster_info().cluster_addr_table
        clusters = [args.cluster] if args.cluster else java_hash_order(list(table), java_key_hash)
        if not args.print_as_tlog and not args.json:
            headers = ("#Cluster Name", 24), ("#Broker Name", 24), ("#RT", 4), ("#successCount", 8)
            print("  ".join(f"{h:<{w}}" for h, w in headers) + "  #failCount")
        body = b"a" * args.size
        done = 0
        while True:
            for cluster in clusters:
                names = table.get(cluster)
                if names is None:
                    print(f"cluster [{cluster}] not exist")
                    break
                for broker_name in java_hash_order(list(names), java_key_hash):
                    ok = failed = elapsed = 0
                    for i in range(args.amount):
                        began = time.time_ns() // 1_000_000  # whole wall-clock ms, as mqadmin
                        try:
                            producer.send(Message(broker_name, body))
                            ok += 1
                        except MQClientError:
                            failed += 1
                        if i:
                            elapsed += time.time_ns() // 1_000_000 - began
                    rt = elapsed / (args.amount - 1) if args.amount > 1 else math.nan
                    _print_cluster_rt(args, cluster, broker_name, rt, ok, failed)
            done += 1
            if args.rounds and done >= args.rounds:
                return None, ""
            time.sleep(args.interval)


def _print_cluster_rt(
    args: argparse.Namespace, cluster: str, broker: str, rt: float, ok: int, failed: int
) -> None:
    if args.json:
        rt_ms = None if math.isnan(rt) else round(rt, 2)
        row = {"cluster": cluster, "brokerName": broker, "rt": rt_ms, "successCount": ok, "failCount": failed}
        print(json.dumps(row), flush=True)
    elif args.print_as_tlog:
        now = datetime.now(timezone(timedelta(hours=8))).strftime(_TIME_FORMAT)  # mqadmin's GMT+8
        rounded = "NaN" if math.isnan(rt) else java_fixed(rt, 0)
        print(f"{now}|{args.machine_room}|{cluster}|{broker}|{rounded}", flush=True)
    else:
        print(f"{cluster:<24}  {broker:<24}  {java_fixed(rt):<8}  {ok:<16}  {failed:<16}", flush=True)


_ADMIN: dict[str, Callable[[BlockingAdminClient, argparse.Namespace], Result]] = {
    "updateTopic": _update_topic,
    "deleteTopic": _delete_topic,
    "topicList": _topic_list,
    "topicRoute": _topic_route,
    "topicStatus": _topic_status,
    "consumerProgress": _consumer_progress,
    "consumerConnection": _consumer_connection,
    "resetOffsetByTime": _reset_offset_by_time,
    "queryMsgById": _query_msg_by_id,
    "queryMsgByKey": _query_msg_by_key,
    "clusterList": _cluster_list,
    "brokerStatus": _broker_status,
    "updateBrokerConfig": _update_broker_config,
    "updateSubGroup": _update_sub_group,
    "updateAclConfig": _update_acl_config,
    "deleteAccessConfig": _delete_access_config,
    "updateGlobalWhiteAddr": _update_global_white_addr,
    "clusterAclConfigVersion": _cluster_acl_config_version,
    "deleteSubGroup": _delete_sub_group,
    "getBrokerConfig": _get_broker_config,
    "producerConnection": _producer_connection,
    "topicClusterList": _topic_cluster_list,
    "brokerConsumeStats": _broker_consume_stats,
    "wipeWritePerm": _wipe_write_perm,
    "addWritePerm": _add_write_perm,
    "getNamesrvConfig": _get_namesrv_config,
    "updateNamesrvConfig": _update_namesrv_config,
    "updateKvConfig": _update_kv_config,
    "deleteKvConfig": _delete_kv_config,
    "allocateMQ": _allocate_mq,
    "skipAccumulatedMessage": _skip_accumulated_message,
    "cloneGroupOffset": _clone_group_offset,
    "queryMsgByUniqueKey": _query_msg_by_unique_key,
    "queryMsgTraceById": _query_msg_trace_by_id,
    "updateOrderConf": _update_order_conf,
    "statsAll": _stats_all,
    "consumerStatus": _consumer_status,
}
_CLIENT: dict[str, Callable[[argparse.Namespace, Portal], Result]] = {
    "sendMessage": _send_message,
    "consumeMessage": _consume_message,
    "queryMsgByOffset": _query_msg_by_offset,
    "checkMsgSendRT": _check_msg_send_rt,
    "printMsg": _print_msg,
    "printMsgByQueue": _print_msg_by_queue,
    "clusterRT": _cluster_rt,
}


_STREAMED = frozenset({"clusterRT"})  # print each row as it comes (they run until interrupted)


def _session_credentials(args: argparse.Namespace) -> SessionCredentials | None:
    """--access-key/--secret-key, else mqadmin's $ROCKETMQ_HOME/conf/tools.yml (accessKey, secretKey)."""
    if args.access_key or args.secret_key:
        if not (args.access_key and args.secret_key):
            raise ValueError("--access-key and --secret-key go together (the broker's ACL account)")
        return SessionCredentials(args.access_key, args.secret_key)
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None
    tools = Path(home) / "conf" / "tools.yml"
    try:
        data = yaml.safe_load(tools.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read {tools}: {exc}") from None
    if not isinstance(data, dict):
        return None
    access_key, secret_key = (str(data.get(k) or "").strip() for k in ("accessKey", "secretKey"))
    return SessionCredentials(access_key, secret_key) if access_key and secret_key else None


def _run(args: argparse.Namespace) -> int:
    command = args.admin_command
    portal = Portal.default()
    try:
        args.credentials = _session_credentials(args)
        if command in _CLIENT:
            data, text = _CLIENT[command](args, portal)
        else:
            with BlockingAdminClient(
                namesrv_addr=args.namesrv, session_credentials=args.credentials, portal=portal
            ) as admin:
                data, text = _ADMIN[command](admin, args)
    except (MQClientError, TimeoutError) as exc:
        print(f"{command} failed: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    if command in _STREAMED:
        return 0  # printed as it went
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(text)
    return 0


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_admin_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``finchmq admin`` and its sub-commands."""
    admin = commands.add_parser(
        "admin",
        help="mqadmin-style administration (topics, groups, offsets, messages)",
        description="mqadmin's most used commands. Tables by default, --json for machines.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="name server address(es), host:port;host:port (default $NAMESRV_ADDR or 127.0.0.1:9876)",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument(
        "--access-key",
        default=os.environ.get("ROCKETMQ_ACCESS_KEY"),
        help="ACL accessKey to sign requests with (default $ROCKETMQ_ACCESS_KEY, else accessKey of "
        "$ROCKETMQ_HOME/conf/tools.yml as mqadmin reads it)",
    )
    common.add_argument(
        "--secret-key",
        default=os.environ.get("ROCKETMQ_SECRET_KEY"),
        help="ACL secretKey (default $ROCKETMQ_SECRET_KEY, else secretKey of $ROCKETMQ_HOME/conf/tools.yml)",
    )
    sub = admin.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        parser.set_defaults(handler=_run)
        return parser

    p = add("updateTopic", "create or update a topic")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6)
    p.add_argument("-o", "--order", type=_bool, default=False)

    p = add("deleteTopic", "delete a topic from the brokers and the name servers")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--clusterName", dest="cluster")

    add("topicList", "every topic the name server knows")

    p = add("topicRoute", "a topic's queues and brokers")
    p.add_argument("-t", "--topic", required=True)

    p = add("topicStatus", "min/max offset of each queue of a topic")
    p.add_argument("-t", "--topic", required=True)

    p = add("consumerProgress", "a group's offsets and lag per queue")
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-t", "--topic")

    p = add("consumerConnection", "a group's online consumers and subscriptions")
    p.add_argument("-g", "--consumerGroup", dest="group", required=True)

    p = add("resetOffsetByTime", "move a group's offsets to a point in time")
    p.add_argument("-g", "--group", dest="group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument(
        "-s",
        "--timestamp",
        type=_parse_timestamp,
        required=True,
        help="now, epoch ms or yyyy-MM-dd#HH:mm:ss:SSS",
    )
    p.add_argument("-f", "--force", type=_bool, default=True)

    p = add(
        "queryMsgById", "messages by offset id, comma separated (or client id with -t) (mqadmin queryMsgById)"
    )
    p.add_argument("-i", "--msgId", dest="msg_id", required=True)
    p.add_argument("-t", "--topic")

    p = add("queryMsgByKey", "messages by key")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--msgKey", dest="key", required=True)
    p.add_argument("-m", "--maxNum", dest="max_num", type=int, default=64)
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=_parse_timestamp, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=_parse_timestamp, default=None)

    add("clusterList", "every broker of every cluster")

    p = add("brokerStatus", "a broker's runtime statistics")
    p.add_argument("-b", "--brokerAddr", dest="broker")
    p.add_argument("-c", "--clusterName", dest="cluster")

    p = add("updateBrokerConfig", "change a broker setting at run time")
    p.add_argument("-b", "--brokerAddr", dest="broker")
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)

    p = add("updateAclConfig", "create or update an ACL account in the brokers' plain_acl.yml (admin only)")
    p.add_argument("-a", "--accessKey", dest="access_key_arg", required=True)
    p.add_argument("-s", "--secretKey", dest="secret_key_arg", help="required for a new account")
    p.add_argument("-w", "--whiteRemoteAddress", dest="white_remote_address")
    p.add_argument("-i", "--defaultTopicPerm", dest="default_topic_perm", help="PUB, SUB, PUB|SUB or DENY")
    p.add_argument("-u", "--defaultGroupPerm", dest="default_group_perm", help="PUB, SUB, PUB|SUB or DENY")
    p.add_argument("-t", "--topicPerms", dest="topic_perms", help="topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", dest="group_perms", help="groupD=DENY,groupE=SUB")
    p.add_argument("-m", "--admin", type=_bool, default=False)
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")

    p = add("deleteAccessConfig", "delete an ACL account from the brokers' plain_acl.yml (admin only)")
    p.add_argument("-a", "--accessKey", dest="access_key_arg", required=True)
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")

    p = add("updateGlobalWhiteAddr", "set the brokers' ACL globalWhiteRemoteAddresses (admin only)")
    p.add_argument("-g", "--globalWhiteRemoteAddresses", dest="global_white_addrs", required=True,
                   help="10.10.103.*,192.168.0.*")  # fmt: skip
    p.add_argument("-p", "--aclFileFullPath", dest="acl_file_full_path", help="default: the main ACL file")
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")

    p = add("clusterAclConfigVersion", "the brokers' ACL files and their versions (admin only)")
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")

    p = add("updateSubGroup", "create or update a consumer group's settings (mqadmin updateSubGroup)")
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")
    p.add_argument("-s", "--consumeEnable", dest="consume_enable", type=_bool, default=True)
    p.add_argument("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=_bool, default=False)
    p.add_argument(
        "-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=_bool, default=False
    )
    p.add_argument("-q", "--retryQueueNums", dest="retry_queue_nums", type=int, default=1)
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max_times", type=int, default=16)
    p.add_argument("-i", "--brokerId", dest="broker_id", type=int, default=0)
    p.add_argument(
        "-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int, default=1
    )
    p.add_argument(
        "-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed", type=_bool, default=True
    )

    p = add("deleteSubGroup", "delete a consumer group (with -c also its retry and DLQ topics)")
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker")

    p = add("getBrokerConfig", "a broker's settings (mqadmin getBrokerConfig)")
    p.add_argument("-b", "--brokerAddr", dest="broker")
    p.add_argument("-c", "--clusterName", dest="cluster")

    p = add("producerConnection", "a producer group's connections (mqadmin producerConnection)")
    p.add_argument("-g", "--producerGroup", dest="group", required=True)
    p.add_argument("-t", "--topic", required=True)

    p = add("topicClusterList", "the clusters a topic is on (mqadmin topicClusterList)")
    p.add_argument("-t", "--topic", required=True)

    p = add("brokerConsumeStats", "every group's lag on a broker (mqadmin brokerConsumeStats)")
    p.add_argument("-b", "--brokerAddr", dest="broker", required=True)
    p.add_argument("-l", "--level", type=int, default=0, help="only rows with at least this diff")
    p.add_argument("-o", "--order", type=_bool, default=False, help="order topics only")

    p = add("wipeWritePerm", "stop new sends to a broker on every name server (mqadmin wipeWritePerm)")
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)

    p = add("addWritePerm", "give a broker its write permission back (mqadmin addWritePerm)")
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)

    add("getNamesrvConfig", "every name server's settings (mqadmin getNamesrvConfig)")

    p = add("updateNamesrvConfig", "change a name server setting (mqadmin updateNamesrvConfig)")
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)

    p = add("updateKvConfig", "set a KV config item on every name server (mqadmin updateKvConfig)")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)

    p = add("deleteKvConfig", "delete a KV config item (mqadmin deleteKvConfig)")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)

    p = add(
        "allocateMQ", "how AllocateMessageQueueAveragely shares a topic among client ids (mqadmin allocateMQ)"
    )
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="client ids, comma separated")

    p = add("updateOrderConf", "a topic's order configuration on the name servers (mqadmin updateOrderConf)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-m", "--method", choices=["put", "get", "delete"], required=True)
    p.add_argument("-v", "--orderConf", dest="order_conf", help="brokerName1:num;brokerName2:num (put)")

    p = add(
        "skipAccumulatedMessage",
        "move a group to the end of a topic's queues (mqadmin skipAccumulatedMessage)",
    )
    p.add_argument("-g", "--group", dest="group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-f", "--force", type=_bool, default=True)

    p = add(
        "cloneGroupOffset", "copy a group's offsets of a topic to another group (mqadmin cloneGroupOffset)"
    )
    p.add_argument("-s", "--srcGroup", dest="src_group", required=True)
    p.add_argument("-d", "--destGroup", dest="dest_group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-o", "--offline", type=_bool, default=False)

    p = add("queryMsgByUniqueKey", "a message by its client id (UNIQ_KEY) (mqadmin queryMsgByUniqueKey)")
    p.add_argument("-i", "--msgId", dest="msg_id", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="every copy (up to 32)")

    p = add("queryMsgTraceById", "a message's trace: its send and consumptions (mqadmin queryMsgTraceById)")
    p.add_argument("-i", "--msgId", dest="msg_id", required=True)
    p.add_argument("-t", "--traceTopic", dest="trace_topic", help="default RMQ_SYS_TRACE_TOPIC")

    p = add("queryMsgByOffset", "the message at a queue offset (mqadmin queryMsgByOffset)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", dest="broker", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)

    p = add("checkMsgSendRT", "send test messages and print each one's RT (mqadmin checkMsgSendRT)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)

    def read_options(p: argparse.ArgumentParser) -> None:  # printMsg's and printMsgByQueue's
        p.add_argument("-c", "--charsetName", dest="charset", default="UTF-8", help="UTF-8, GBK...")
        p.add_argument("-s", "--subExpression", dest="expression", default="*", help="e.g. TagA || TagB")
        p.add_argument("-b", "--beginTimestamp", dest="begin", type=_parse_timestamp, help=_TIMESTAMP_HELP)
        p.add_argument("-e", "--endTimestamp", dest="end", type=_parse_timestamp, help=_TIMESTAMP_HELP)

    p = add("printMsg", "every message of a topic as MessageExt.toString (mqadmin printMsg)")
    p.add_argument("-t", "--topic", required=True)
    read_options(p)
    p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=True)

    p = add("printMsgByQueue", "one queue's messages and counts by tag (mqadmin printMsgByQueue)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    read_options(p)
    p.add_argument("-p", "--printMsg", dest="print_msg", type=_bool, default=False)
    p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=False)
    p.add_argument("-f", "--calculate", type=_bool, default=False, help="count messages by tag")

    p = add("statsAll", "topics' and groups' TPS, backlog and day totals (mqadmin statsAll)")
    p.add_argument("-a", "--activeTopic", dest="active_topic", action="store_true", help="active topics only")
    p.add_argument("-t", "--topic", help="this topic only")

    p = add("consumerStatus", "a group's consumers as they see themselves (mqadmin consumerStatus)")
    p.add_argument("-g", "--consumerGroup", dest="group", required=True)
    p.add_argument("-i", "--clientId", dest="client_id", help="one consumer's full running info")
    p.add_argument("-b", "--brokerAddr", dest="broker", help="ask this broker for the group's clients")
    p.add_argument("-s", "--jstack", action="store_true", help="include the consumer's thread dump")

    p = add("clusterRT", "send RT of every broker, every few seconds (mqadmin clusterRT)")
    p.add_argument("-a", "--amount", type=int, default=100, help="sends per broker and round")
    p.add_argument("-s", "--size", type=int, default=128, help="message size in bytes")
    p.add_argument("-c", "--cluster", help="this cluster only (default: all)")
    p.add_argument("-p", "--printLog", dest="print_as_tlog", type=_bool, default=False, help="print as tlog")
    p.add_argument("-m", "--machineRoom", dest="machine_room", default="noname")
    p.add_argument("-i", "--interval", type=float, default=10, help="seconds between rounds")
    p.add_argument(
        "--rounds", type=int, default=0, help="stop after this many rounds (default: run until ^C)"
    )

    p = add("sendMessage", "send one message")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--body", required=True)
    p.add_argument("-k", "--keys", default="")
    p.add_argument("-c", "--tags", default="")
    p.add_argument("-b", "--broker", help="broker name (with -i: send to that queue)")
    p.add_argument("-i", "--qid", dest="queue_id", type=int)
    p.add_argument("--producerGroup", dest="producer_group", default="FINCHMQ_ADMIN_PRODUCER")

    p = add("consumeMessage", "read messages of a topic (no offset is committed)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", dest="broker")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int)
    p.add_argument("-o", "--offset", type=int, help="start offset (default: each queue's first)")
    p.add_argument("-c", "--messageNumber", dest="count", type=int, default=128)
    p.add_argument("-s", "--subExpression", dest="expression", default="*")
    p.add_argument("-g", "--consumerGroup", dest="consumer_group", default="FINCHMQ_ADMIN_CONSUMER")
