"""mqadmin's message commands (``tools/command/message``): query messages by id, key, unique key or
queue offset, their trace, send and read messages, print a topic or a queue, and time sends.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from finchmq.client import (
    BlockingAdminClient,
    BlockingProducer,
    BlockingPullConsumer,
    MessageExt,
    MessageQueue,
    MQClientError,
    PullStatus,
)
from finchmq.client.sync import Portal
from finchmq.client.views import message_dict, trace_view_dict
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import java_key_hash
from finchmq.protocol.message import Message
from finchmq.protocol.topics import TOOLS_CONSUMER_GROUP
from finchmq.protocol.trace import TraceView

from .command import TIMESTAMP_HELP, TOPIC, CommandFamily, Option, Result, parse_bool, parse_timestamp
from .javafmt import format_table, format_time, human_time2, java_bool, java_map, java_message_ext

__all__ = ["commands"]

commands = CommandFamily()


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
        ("Born Timestamp", format_time(d["bornTimestamp"])),
        ("Store Timestamp", format_time(d["storeTimestamp"])),
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


@commands.admin(
    "queryMsgById",
    "messages by offset id, comma separated (or client id with -t) (mqadmin queryMsgById)",
    Option("-i", "--msgId", dest="msg_id", required=True),
    Option("-t", "--topic"),
)
def _query_msg_by_id(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``queryMsgById``: messages by offset id (comma separated), or by client id with -t."""
    msgs = [
        admin.view_message(msg_id.strip(), args.topic) for msg_id in args.msg_id.split(",") if msg_id.strip()
    ]
    data = [message_dict(m) for m in msgs]
    return data[0] if len(data) == 1 else data, "".join(_java_detail(admin, m, offset_id=True) for m in msgs)


@commands.admin(
    "queryMsgByKey",
    "messages by key",
    TOPIC,
    Option("-k", "--msgKey", dest="key", required=True),
    Option("-m", "--maxNum", dest="max_num", type=int, default=64),
    Option("-b", "--beginTimestamp", dest="begin", type=parse_timestamp, default=0),
    Option("-e", "--endTimestamp", dest="end", type=parse_timestamp, default=None),
)
def _query_msg_by_key(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    msgs = admin.query_message(args.topic, args.key, args.max_num, args.begin, args.end)
    rows = [(m.client_msg_id, m.msg_id, m.queue_id, m.queue_offset) for m in msgs]
    return [message_dict(m) for m in msgs], format_table(["Message ID", "Offset ID", "QID", "Offset"], rows)


@commands.admin(
    "queryMsgByUniqueKey",
    "a message by its client id (UNIQ_KEY) (mqadmin queryMsgByUniqueKey)",
    Option("-i", "--msgId", dest="msg_id", required=True),
    TOPIC,
    Option("-a", "--showAll", dest="show_all", action="store_true", help="every copy (up to 32)"),
)
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


@commands.admin(
    "queryMsgTraceById",
    "a message's trace: its send and consumptions (mqadmin queryMsgTraceById)",
    Option("-i", "--msgId", dest="msg_id", required=True),
    Option("-t", "--traceTopic", dest="trace_topic", help="default RMQ_SYS_TRACE_TOPIC"),
)
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
            lines.append(row.format("Pub", view.group_name, view.client_host, format_time(view.time_stamp),
                                    f"{view.cost_time}ms", view.status))  # fmt: skip
            lines.append("")
        elif view.msg_type == "SubAfter":
            by_group.setdefault(view.group_name, []).append(view)
    for group in java_hash_order(list(by_group), java_key_hash):
        lines.append(
            row.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        )
        for view in by_group[group]:
            lines.append(row.format("Sub", view.group_name, view.client_host, format_time(view.time_stamp),
                                    f"{view.cost_time}ms", view.status))  # fmt: skip
        lines.append("")
    return [trace_view_dict(v) for v in views], "\n".join(lines).rstrip("\n")


def _tools_consumer(args: argparse.Namespace, portal: Portal) -> BlockingPullConsumer:
    """The pull consumer mqadmin's message commands read with (its tools group)."""
    return BlockingPullConsumer(
        TOOLS_CONSUMER_GROUP,
        namesrv_addr=args.namesrv,
        **args.client_options,
        instance_name=f"cli-{os.getpid()}",
        portal=portal,
    )


@commands.client(
    "queryMsgByOffset",
    "the message at a queue offset (mqadmin queryMsgByOffset)",
    TOPIC,
    Option("-b", "--brokerName", dest="broker", required=True),
    Option("-i", "--queueId", dest="queue_id", type=int, required=True),
    Option("-o", "--offset", type=int, required=True),
)
def _query_msg_by_offset(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``queryMsgByOffset``: the message at one queue offset."""
    mq = MessageQueue(args.topic, args.broker, args.queue_id)
    with _tools_consumer(args, portal) as consumer:
        result = consumer.pull(mq, "*", args.offset, 1)
    if result.pull_status is not PullStatus.FOUND or not result.msg_found_list:
        raise ValueError(f"no message at {mq.topic}/{mq.broker_name}/{mq.queue_id} offset {args.offset}")
    msg = result.msg_found_list[0]
    with BlockingAdminClient(namesrv_addr=args.namesrv, **args.client_options, portal=portal) as admin:
        return message_dict(msg), _java_detail(admin, msg, offset_id=True)


@commands.client(
    "sendMessage",
    "send one message",
    TOPIC,
    Option("-p", "--body", required=True),
    Option("-k", "--keys", default=""),
    Option("-c", "--tags", default=""),
    Option("-b", "--broker", help="broker name (with -i: send to that queue)"),
    Option("-i", "--qid", dest="queue_id", type=int),
    Option("--producerGroup", dest="producer_group", default="FINCHMQ_ADMIN_PRODUCER"),
)
def _send_message(args: argparse.Namespace, portal: Portal) -> Result:
    msg = Message.create(
        args.topic, args.body.encode("utf-8"), tags=args.tags or None, keys=args.keys or None
    )
    with BlockingProducer(
        args.producer_group,
        namesrv_addr=args.namesrv,
        **args.client_options,
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


@commands.client(
    "consumeMessage",
    "read messages of a topic (no offset is committed)",
    TOPIC,
    Option("-b", "--brokerName", dest="broker"),
    Option("-i", "--queueId", dest="queue_id", type=int),
    Option("-o", "--offset", type=int, help="start offset (default: each queue's first)"),
    Option("-c", "--messageNumber", dest="count", type=int, default=128),
    Option("-s", "--subExpression", dest="expression", default="*"),
    Option("-g", "--consumerGroup", dest="consumer_group", default="FINCHMQ_ADMIN_CONSUMER"),
)
def _consume_message(args: argparse.Namespace, portal: Portal) -> Result:
    out: list[MessageExt] = []
    with BlockingPullConsumer(
        args.consumer_group,
        namesrv_addr=args.namesrv,
        **args.client_options,
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


# printMsg's and printMsgByQueue's reading options
_READ_OPTIONS = (
    Option("-c", "--charsetName", dest="charset", default="UTF-8", help="UTF-8, GBK..."),
    Option("-s", "--subExpression", dest="expression", default="*", help="e.g. TagA || TagB"),
    Option("-b", "--beginTimestamp", dest="begin", type=parse_timestamp, help=TIMESTAMP_HELP),
    Option("-e", "--endTimestamp", dest="end", type=parse_timestamp, help=TIMESTAMP_HELP),
)


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


@commands.client(
    "printMsg",
    "every message of a topic as MessageExt.toString (mqadmin printMsg)",
    TOPIC,
    *_READ_OPTIONS,
    Option("-d", "--printBody", dest="print_body", type=parse_bool, default=True),
)
def _print_msg(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``printMsg``: every message of a topic, queue by queue, as ``MessageExt.toString``."""
    lines: list[str] = []
    data = []
    with _tools_consumer(args, portal) as consumer:
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


@commands.client(
    "printMsgByQueue",
    "one queue's messages and counts by tag (mqadmin printMsgByQueue)",
    TOPIC,
    Option("-a", "--brokerName", dest="broker_name", required=True),
    Option("-i", "--queueId", dest="queue_id", type=int, required=True),
    *_READ_OPTIONS,
    Option("-p", "--printMsg", dest="print_msg", type=parse_bool, default=False),
    Option("-d", "--printBody", dest="print_body", type=parse_bool, default=False),
    Option("-f", "--calculate", type=parse_bool, default=False, help="count messages by tag"),
)
def _print_msg_by_queue(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``printMsgByQueue``: one queue's messages (-p), bodies (-d) and counts by tag (-f)."""
    mq = MessageQueue(args.topic, args.broker_name, args.queue_id)
    lines: list[str] = []
    messages = []
    tag_counts: dict[str, int] = {}
    with _tools_consumer(args, portal) as consumer:
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


@commands.client(
    "checkMsgSendRT",
    "send test messages and print each one's RT (mqadmin checkMsgSendRT)",
    TOPIC,
    Option("-a", "--amount", type=int, default=100),
    Option("-s", "--size", type=int, default=128),
)
def _check_msg_send_rt(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``checkMsgSendRT``: ``amount`` sync sends of ``size`` bytes round the queues, each
    one's RT in ms, and the average leaving the first (connection set-up) out."""
    rows: list[str] = [f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT"]
    data = []
    elapsed_total = 0
    with BlockingProducer(
        "PID_SMSC",
        namesrv_addr=args.namesrv,
        **args.client_options,
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
