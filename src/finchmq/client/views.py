"""Plain-data forms (JSON-ready dicts, RocketMQ's camelCase names) of messages and of the admin
client's answers, shared by ``finchmq admin --json`` and the web console so both show the same
fields under the same names."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from finchmq.protocol.bodies import ConsumerRunningInfo, ConsumeStats, TopicStatsTable
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.trace import TraceView

from .admin import ClusterBroker, MessageTrack

__all__ = [
    "cluster_broker_dict",
    "consume_progress_dict",
    "message_dict",
    "message_track_dict",
    "offset_table_rows",
    "pop_process_queue_rows",
    "pop_runtime_dict",
    "timer_backlog_dict",
    "topic_status_rows",
    "trace_view_dict",
]


def message_dict(msg: MessageExt, *, body: bool = True) -> dict[str, Any]:
    """A stored message's fields and properties; the body as text when it is UTF-8, else as
    ``{"base64": ...}`` (left out when ``body`` is false)."""
    out: dict[str, Any] = {
        "topic": msg.topic,
        "msgId": msg.client_msg_id,
        "offsetMsgId": msg.msg_id,
        "tags": msg.tags,
        "keys": msg.keys,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": str(msg.born_host),
        "storeTimestamp": msg.store_timestamp,
        "storeHost": str(msg.store_host),
        "storeSize": msg.store_size,
        "properties": dict(msg.properties),
    }
    if body:
        try:
            out["body"] = msg.body.decode("utf-8")
        except UnicodeDecodeError:
            out["body"] = {"base64": base64.b64encode(msg.body).decode()}
    return out


def topic_status_rows(table: TopicStatsTable) -> list[dict[str, Any]]:
    """mqadmin ``topicStatus``: each queue's min and max offset and when it last grew."""
    return [
        {
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "minOffset": o.min_offset,
            "maxOffset": o.max_offset,
            "lastUpdateTimestamp": o.last_update_timestamp,
        }
        for mq, o in table.offset_table.items()
    ]


def consume_progress_dict(group: str, stats: ConsumeStats) -> dict[str, Any]:
    """mqadmin ``consumerProgress``: the group's broker and consumer offset (and their
    difference, the lag) of each queue, the consume TPS and the total lag."""
    queues = [
        {
            "topic": mq.topic,
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "brokerOffset": w.broker_offset,
            "consumerOffset": w.consumer_offset,
            "diff": w.broker_offset - w.consumer_offset,
            "lastTimestamp": w.last_timestamp,
        }
        for mq, w in stats.offset_table.items()
    ]
    return {
        "group": group,
        "consumeTps": stats.consume_tps,
        "diffTotal": stats.compute_total_diff(),
        "queues": queues,
    }


def offset_table_rows(table: dict[MessageQueue, int]) -> list[dict[str, Any]]:
    """Offsets by queue (``resetOffsetByTime``'s answer)."""
    return [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": o} for mq, o in table.items()]


def trace_view_dict(view: TraceView) -> dict[str, Any]:
    """One trace record (mqadmin ``queryMsgTraceById``)."""
    return {
        "type": view.msg_type,
        "group": view.group_name,
        "clientHost": view.client_host,
        "timeStamp": view.time_stamp,
        "costTime": view.cost_time,
        "status": view.status,
        "topic": view.topic,
        "storeHost": view.store_host,
    }


def message_track_dict(track: MessageTrack) -> dict[str, Any]:
    """Whether a group consumed a message (Java ``MessageTrack``)."""
    return {
        "consumerGroup": track.consumer_group,
        "trackType": track.track_type.value,
        "exceptionDesc": track.exception_desc,
    }


def cluster_broker_dict(broker: ClusterBroker) -> dict[str, Any]:
    """One broker of ``clusterList`` with its runtime statistics (and the error reading them)."""
    out: dict[str, Any] = {
        "cluster": broker.cluster,
        "brokerName": broker.broker_name,
        "brokerId": broker.broker_id,
        "addr": broker.addr,
        "stats": broker.stats,
    }
    if broker.error is not None:
        out["error"] = broker.error
    return out


def timer_backlog_dict(stats: Mapping[str, str]) -> dict[str, Any] | None:
    """A broker's 5.x timer figures from its runtime info: ``pending`` the timers waiting in
    the wheel (``timerCongestNum``, as of the wheel's last flush), ``readBehind`` the seconds
    its delivery is behind the clock, ``offsetBehind`` the timer-topic messages not yet in the
    wheel, and the timers put in and delivered per second. None when the broker does not say
    (4.x)."""
    try:
        return {
            "pending": int(stats["timerCongestNum"]),
            "readBehind": int(stats["timerReadBehind"]),
            "offsetBehind": int(stats["timerOffsetBehind"]),
            "enqueueTps": float(stats["timerEnqueueTps"]),
            "dequeueTps": float(stats["timerDequeueTps"]),
        }
    except (KeyError, ValueError):
        return None


_POP_RUNTIME_KEYS = {
    "inflight": "popInflightMessageNum",
    "revivePendingCheckPoints": "popRevivePendingCheckPoints",
    "reviveBehindMessages": "popReviveBehindMessages",
    "reviveBehindMillis": "popReviveBehindMillis",
    "bufferedCheckPoints": "popBufferedCheckPointNum",
    "offsetBufferSize": "popOffsetBufferSize",
    "polling": "popPollingNum",
    "notificationPolling": "popNotificationPollingNum",
}


def pop_runtime_dict(stats: Mapping[str, str]) -> dict[str, int] | None:
    """A finchmq broker's POP figures from its runtime info: messages popped and not yet acked
    (``inflight``), check points the revive service has read and not settled, its backlog, the
    check points and offsets still in the buffer, requests held by long polling. None when the
    broker does not say (Apache RocketMQ's broker has no such keys)."""
    try:
        return {name: int(stats[key]) for name, key in _POP_RUNTIME_KEYS.items()}
    except (KeyError, ValueError):
        return None


def pop_process_queue_rows(client_id: str, info: ConsumerRunningInfo) -> list[dict[str, Any]]:
    """A popping consumer's queues (5.x mqadmin ``consumerStatus``'s ``#Consumer Pop Detail#``):
    the messages popped and waiting for their ack, whether the queue was dropped, the last pop.
    Queue id -1: every queue of that broker."""
    return [
        {
            "clientId": client_id,
            "topic": mq.topic,
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "waitAckCount": pq.wait_ack_count,
            "droped": pq.droped,
            "lastPopTimestamp": pq.last_pop_timestamp,
        }
        for mq, pq in sorted((info.mq_pop_table or {}).items(), key=lambda entry: entry[0])
    ]
