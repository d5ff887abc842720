"""Java's ``toString`` and mqadmin's formatters, for commands that print what mqadmin prints:
``MessageExt`` (printMsg, printMsgByQueue), ``ConsumerRunningInfo.formatString`` and its
analysis (consumerStatus), configuration tables (getBrokerConfig, getNamesrvConfig), and the
value forms they are built from (``HashMap``, ``byte[]``, ``UtilAll.timeMillisToHumanString``,
``String.format("%.2f")``). Also finchmq's own ``#Header`` tables and times, for the commands
whose output is finchmq's."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from finchmq.client.results import SendResult
from finchmq.protocol._json import dumps_fastjson_pretty, java_hash_order, java_string_hash
from finchmq.protocol.bodies import ConsumerRunningInfo, ProcessQueueInfo, RemotingSerializable, java_key_hash
from finchmq.protocol.hosts import HostAddress
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst

__all__ = [
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "TIME_FORMAT",
    "analyze_process_queue",
    "analyze_subscription",
    "config_tables",
    "fastjson_pretty",
    "format_consumer_running_info",
    "format_table",
    "format_time",
    "human_time2",
    "java_bool",
    "java_fixed",
    "java_map",
    "java_message_ext",
    "java_properties_order",
    "java_send_result",
]

# Java ConsumerRunningInfo property names
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, mqadmin style (``#Header``)."""
    cells = [[f"#{h}" for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def format_time(ms: int) -> str:
    """Epoch ms as local ``yyyy-MM-dd HH:mm:ss``; ``-`` for none (0 or less)."""
    return datetime.fromtimestamp(ms / 1000).strftime(TIME_FORMAT) if ms > 0 else "-"


def config_tables(configs: dict[str, dict[str, str]], *, blank_after: bool = False) -> str:
    """mqadmin's ``============addr============`` then ``key  =  value`` per setting, in the order
    Java's Properties map holds them (getBrokerConfig leaves a blank line after each table)."""
    return "".join(
        f"============{addr}============\n"
        + "".join(f"{k:<50}=  {config[k]}\n" for k in java_properties_order(list(config)))
        + ("\n" if blank_after else "")
        for addr, config in configs.items()
    ).removesuffix("\n")


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def java_fixed(value: float, digits: int = 2) -> str:
    """``String.format("%.2f", value)``: Java rounds the double's shortest decimal form half up
    (1.005 -> 1.01, where C's printf gives 1.00)."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def java_map(mapping: Mapping[str, str]) -> str:
    """``HashMap.toString()`` of a map filled in ``mapping``'s order: ``{k=v, k2=v2}``."""
    keys = java_hash_order(list(mapping), java_key_hash)
    return "{" + ", ".join(f"{k}={mapping[k]}" for k in keys) + "}"


def java_properties_order(keys: list[str]) -> list[str]:
    """The order ``java.util.Properties`` (a ConcurrentHashMap since Java 9) iterates ``keys``
    put in this order: bins of a table of 16 that doubles when 3/4 full; a bin keeps insertion
    order, except that a resize moves the nodes before its last run in reverse (Java's
    ``ConcurrentHashMap.transfer``)."""
    size = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(size)]
    count = 0
    for key in dict.fromkeys(keys):
        h = java_string_hash(key) & 0xFFFFFFFF
        spread = (h ^ (h >> 16)) & 0x7FFFFFFF
        table[spread & (size - 1)].append((spread, key))
        count += 1
        if count >= size - (size >> 2):
            grown: list[list[tuple[int, str]]] = [[] for _ in range(size * 2)]
            for index, nodes in enumerate(table):
                if not nodes:
                    continue
                last_run = len(nodes) - 1  # the tail whose nodes all go the same way
                while last_run > 0 and (nodes[last_run - 1][0] & size) == (nodes[-1][0] & size):
                    last_run -= 1
                low = list(nodes[last_run:]) if not nodes[-1][0] & size else []
                high = list(nodes[last_run:]) if nodes[-1][0] & size else []
                for node in nodes[:last_run]:
                    (high if node[0] & size else low).insert(0, node)
                grown[index], grown[index + size] = low, high
            table, size = grown, size * 2
    return [key for nodes in table for _, key in nodes]


def _java_bytes(data: bytes) -> str:
    """``Arrays.toString(byte[])``: signed bytes."""
    return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in data) + "]"


def _java_socket_address(addr: HostAddress) -> str:
    """``InetSocketAddress.toString()`` of an address without a host name: ``/ip:port``."""
    return f"/{addr}"


def java_message_ext(msg: MessageExt, broker_name: str | None) -> str:
    """``MessageExt.toString()`` of a pulled message (``brokerName`` is set by the pull)."""
    properties = msg.properties
    transaction_id = "null"
    if properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
        transaction_id = properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "null")
    message = (
        f"Message{{topic='{msg.topic}', flag={msg.flag}, properties={java_map(properties)}, "
        f"body={_java_bytes(msg.body)}, transactionId='{transaction_id}'}}"
    )
    return (
        f"MessageExt [brokerName={broker_name}, queueId={msg.queue_id}, storeSize={msg.store_size}, "
        f"queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, bornTimestamp={msg.born_timestamp}, "
        f"bornHost={_java_socket_address(msg.born_host)}, storeTimestamp={msg.store_timestamp}, "
        f"storeHost={_java_socket_address(msg.store_host)}, msgId={msg.msg_id}, "
        f"commitLogOffset={msg.commit_log_offset}, bodyCRC={msg.body_crc}, "
        f"reconsumeTimes={msg.reconsume_times}, "
        f"preparedTransactionOffset={msg.prepared_transaction_offset}, toString()={message}]"
    )


def _human_time(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: local ``yyyyMMddHHmmssSSS``."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


def human_time2(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: local ``yyyy-MM-dd HH:mm:ss,SSS``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000)) + f",{ms % 1000:03d}"


def _process_queue_info(pq: ProcessQueueInfo) -> str:
    return (
        f"ProcessQueueInfo [commitOffset={pq.commit_offset}, cachedMsgMinOffset={pq.cached_msg_min_offset}, "
        f"cachedMsgMaxOffset={pq.cached_msg_max_offset}, cachedMsgCount={pq.cached_msg_count}, "
        f"cachedMsgSizeInMiB={pq.cached_msg_size_in_mib}, "
        f"transactionMsgMinOffset={pq.transaction_msg_min_offset}, "
        f"transactionMsgMaxOffset={pq.transaction_msg_max_offset}, "
        f"transactionMsgCount={pq.transaction_msg_count}, locked={java_bool(pq.locked)}, "
        f"tryUnlockTimes={pq.try_unlock_times}, lastLockTimestamp={_human_time(pq.last_lock_timestamp)}, "
        f"droped={java_bool(pq.droped)}, lastPullTimestamp={_human_time(pq.last_pull_timestamp)}, "
        f"lastConsumeTimestamp={_human_time(pq.last_consume_timestamp)}]"
    )


def format_consumer_running_info(info: ConsumerRunningInfo) -> str:
    """``ConsumerRunningInfo.formatString()``: properties (in the order Java's Properties map
    iterates them), subscriptions, offsets, process queues, (5.x, for a consumer that pops)
    popped queues, RT and TPS, jstack."""
    out = ["#Consumer Properties#\n"]
    properties = info.properties
    for key in java_properties_order(list(properties)):
        out.append(f"{key:<40}: {properties[key]}\n")
    out.append("\n\n#Consumer Subscription#\n")
    subscriptions = sorted(info.subscription_set, key=lambda s: f"{s.topic}@{s.sub_string}")
    for i, sub in enumerate(subscriptions, start=1):
        out.append(
            f"{i:03d} Topic: {sub.topic:<40} ClassFilter: {java_bool(sub.class_filter_mode):<8} "
            f"SubExpression: {sub.sub_string}\n"
        )
    queues = sorted(info.mq_table.items(), key=lambda entry: entry[0])
    out.append("\n\n#Consumer Offset#\n")
    out.append(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}\n")
    for mq, pq in queues:
        out.append(f"{mq.topic:<32}  {mq.broker_name:<32}  {mq.queue_id:<4d}  {pq.commit_offset:<20d}\n")
    out.append("\n\n#Consumer MQ Detail#\n")
    out.append(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#ProcessQueueInfo':<20}\n")
    for mq, pq in queues:
        out.append(f"{mq.topic:<64}  {mq.broker_name:<32}  {mq.queue_id:<4d}  {_process_queue_info(pq)}\n")
    if info.mq_pop_table:  # 5.x prints this section always; 4.9.8 has none
        out.append("\n\n#Consumer Pop Detail#\n")
        out.append(f"{'#Topic':<32}  {'#Broker Name':<32}  {'#QID':<4}  {'#ProcessQueueInfo':<20}\n")
        for mq, pop_info in sorted(info.mq_pop_table.items(), key=lambda entry: entry[0]):
            out.append(f"{mq.topic:<32}  {mq.broker_name:<32}  {mq.queue_id:<4d}  {pop_info}\n")
    out.append("\n\n#Consumer RT&TPS#\n")
    out.append(
        f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} {'#ConsumeOK TPS':>14} "
        f"{'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}\n"
    )
    for topic, status in sorted(info.status_table.items()):
        out.append(
            f"{topic:<32}  {java_fixed(status.pull_rt):>14} {java_fixed(status.pull_tps):>14} "
            f"{java_fixed(status.consume_rt):>14} {java_fixed(status.consume_ok_tps):>14} "
            f"{java_fixed(status.consume_failed_tps):>18} {status.consume_failed_msgs:>25d}\n"
        )
    if info.jstack is not None:
        out.append("\n\n#Consumer jstack#\n" + info.jstack)
    return "".join(out)


def _is_push(info: ConsumerRunningInfo) -> bool:
    return info.properties.get(PROP_CONSUME_TYPE) == "CONSUME_PASSIVELY"


def analyze_subscription(by_client: Mapping[str, ConsumerRunningInfo], now_ms: int) -> bool:
    """Java ``ConsumerRunningInfo.analyzeSubscription``: a push group running for over two
    minutes must have one subscription set on every client, and not an empty one."""
    ordered = [by_client[c] for c in sorted(by_client)]
    first = ordered[0]
    started = int(first.properties.get(PROP_CONSUMER_START_TIMESTAMP, "0") or 0)
    if not (_is_push(first) and now_ms - started > 120_000):
        return True

    def subscriptions(info: ConsumerRunningInfo) -> list[tuple[str, str | None]]:
        return sorted((s.topic, s.sub_string) for s in info.subscription_set)

    if any(subscriptions(info) != subscriptions(first) for info in ordered):
        return False
    return bool(ordered[-1].subscription_set)


def analyze_process_queue(client_id: str, info: ConsumerRunningInfo, now_ms: int) -> str:
    """Java ``ConsumerRunningInfo.analyzeProcessQueue``: queues an orderly consumer cannot lock,
    or where a concurrent consumer has had messages cached for over a minute without consuming."""
    if not _is_push(info):
        return ""
    orderly = info.properties.get(PROP_CONSUME_ORDERLY, "").lower() == "true"
    out = []
    for mq, pq in sorted(info.mq_table.items(), key=lambda entry: entry[0]):
        if orderly:
            if not pq.locked:
                out.append(f"{client_id} {mq} can't lock for a while, {now_ms - pq.last_lock_timestamp}ms\n")
            elif pq.droped and pq.try_unlock_times > 0:
                out.append(f"{client_id} {mq} unlock {pq.try_unlock_times} times, still failed\n")
        else:
            idle = now_ms - pq.last_consume_timestamp
            if idle > 60_000 and pq.cached_msg_count > 0:
                out.append(f"{client_id} {mq} can't consume for a while, maybe blocked, {idle}ms\n")
    return "".join(out)


def fastjson_pretty(body: RemotingSerializable) -> str:
    """``JSON.toJSONString(body, true)``: the body in fastjson's pretty form (tab-indented)."""
    return dumps_fastjson_pretty(body.to_tree())


def java_send_result(result: SendResult) -> str:
    """Java ``SendResult.toString``."""
    return (
        f"SendResult [sendStatus={result.send_status.name}, msgId={result.msg_id}, "
        f"offsetMsgId={result.offset_msg_id}, messageQueue={result.message_queue}, "
        f"queueOffset={result.queue_offset}]"
    )
