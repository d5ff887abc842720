"""Messages between the two protocols: a stored ``MessageExt`` as a 5.x ``Message`` (Java
``GrpcConverter#buildMessage``)."""

from __future__ import annotations

import hashlib
import time
from typing import Final

from google.protobuf import timestamp_pb2

from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import KEY_SEPARATOR, MessageConst, MessageSysFlag
from finchmq.protocol.stored import decode_stored

from ._pb import definition_pb2 as pb
from .types import message_type_of

MAX_DECOMPRESSED_BODY: Final = 64 * 1024 * 1024
"""A compressed stored body is inflated to at most this many bytes before it goes to a 5.x client."""

SYSTEM_PROPERTY_NAMES: Final = frozenset(
    {
        MessageConst.PROPERTY_TRACE_SWITCH,
        MessageConst.PROPERTY_MSG_REGION,
        MessageConst.PROPERTY_KEYS,
        MessageConst.PROPERTY_TAGS,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL,
        MessageConst.PROPERTY_RETRY_TOPIC,
        MessageConst.PROPERTY_REAL_TOPIC,
        MessageConst.PROPERTY_REAL_QUEUE_ID,
        MessageConst.PROPERTY_TRANSACTION_PREPARED,
        MessageConst.PROPERTY_PRODUCER_GROUP,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_BUYER_ID,
        MessageConst.PROPERTY_ORIGIN_MESSAGE_ID,
        MessageConst.PROPERTY_TRANSFER_FLAG,
        MessageConst.PROPERTY_CORRECTION_FLAG,
        MessageConst.PROPERTY_MQ2_FLAG,
        MessageConst.PROPERTY_RECONSUME_TIME,
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PROPERTY_MAX_RECONSUME_TIMES,
        MessageConst.PROPERTY_CONSUME_START_TIMESTAMP,
        MessageConst.PROPERTY_POP_CK,
        MessageConst.PROPERTY_POP_CK_OFFSET,
        MessageConst.PROPERTY_FIRST_POP_TIME,
        MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageConst.DUP_INFO,
        MessageConst.PROPERTY_EXTEND_UNIQ_INFO,
        MessageConst.PROPERTY_INSTANCE_ID,
        MessageConst.PROPERTY_CORRELATION_ID,
        MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        MessageConst.PROPERTY_MESSAGE_TTL,
        MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
        MessageConst.PROPERTY_PUSH_REPLY_TIME,
        MessageConst.PROPERTY_CLUSTER,
        MessageConst.PROPERTY_MESSAGE_TYPE,
        MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET,
        MessageConst.PROPERTY_TIMER_DELAY_MS,
        MessageConst.PROPERTY_TIMER_DELAY_SEC,
        MessageConst.PROPERTY_TIMER_DELIVER_MS,
        MessageConst.PROPERTY_TIMER_ENQUEUE_MS,
        MessageConst.PROPERTY_TIMER_DEQUEUE_MS,
        MessageConst.PROPERTY_TIMER_ROLL_TIMES,
        MessageConst.PROPERTY_TIMER_OUT_MS,
        MessageConst.PROPERTY_TIMER_DEL_UNIQKEY,
        "TIMER_DELAY_LEVEL",
        MessageConst.PROPERTY_BORN_TIMESTAMP,
        "__BORNHOST",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#",
    }
)
"""Java 5.3.3 ``MessageConst.STRING_HASH_SET``: the properties a 5.x client never sees among its
message's user properties (and may not set as one)."""

_SYSTEM_PREFIXES: Final = ("%RETRY%", "%DLQ%")
PROPERTY_BORN_HOST: Final = "__BORNHOST"
PROPERTY_DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"


def resource(name_with_namespace: str) -> pb.Resource:
    """Java ``GrpcConverter#buildResource`` (``NamespaceUtil``): ``[%RETRY%|%DLQ%]ns%name`` as
    its namespace and its name (the retry/DLQ prefix kept on the name)."""
    prefix = next((p for p in _SYSTEM_PREFIXES if name_with_namespace.startswith(p)), "")
    namespace, sep, name = name_with_namespace[len(prefix) :].partition("%")
    if not sep or not namespace:
        return pb.Resource(name=name_with_namespace)
    return pb.Resource(name=prefix + name, resource_namespace=namespace)


def _timestamp(millis: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


def message_from_ext(msg: MessageExt, receipt_handle: str | None = None) -> pb.Message:
    """``msg`` as the 5.x client receives it (Java ``GrpcConverter#buildMessage``). The receipt
    handle is ``receipt_handle``, else the message's ``POP_CK`` (a popped message's handle)."""
    props = msg.properties
    system = pb.SystemProperties()
    tag = props.get(MessageConst.PROPERTY_TAGS)
    if tag is not None:
        system.tag = tag
    keys = props.get(MessageConst.PROPERTY_KEYS)
    if keys is not None:
        system.keys.extend(keys.split(KEY_SEPARATOR))
    message_id = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
    if message_id:
        system.message_id = message_id
    body = bytes(msg.body)
    system.body_digest.type = pb.MD5
    system.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    compressed = msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG == MessageSysFlag.COMPRESSED_FLAG
    system.body_encoding = pb.GZIP if compressed else pb.IDENTITY
    system.message_type = message_type_of(props)
    system.born_timestamp.CopyFrom(_timestamp(msg.born_timestamp))
    born_host = props.get(PROPERTY_BORN_HOST) or str(msg.born_host)
    if born_host.strip():
        system.born_host = born_host
    system.store_timestamp.CopyFrom(_timestamp(msg.store_timestamp))
    system.store_host = str(msg.store_host)
    delay_sec = props.get(MessageConst.PROPERTY_TIMER_DELAY_SEC)
    deliver_ms = props.get(MessageConst.PROPERTY_TIMER_DELIVER_MS)
    try:
        if delay_sec is not None:
            system.delivery_timestamp.CopyFrom(_timestamp(int(time.time() * 1000) + int(delay_sec) * 1000))
        elif deliver_ms is not None:
            system.delivery_timestamp.CopyFrom(_timestamp(int(deliver_ms)))
    except ValueError:
        pass  # a malformed timer property: no delivery time (Java would fail the whole receive)
    group = props.get(MessageConst.PROPERTY_SHARDING_KEY)
    if group is not None:
        system.message_group = group
    handle = receipt_handle if receipt_handle is not None else props.get(MessageConst.PROPERTY_POP_CK)
    if handle is not None:
        system.receipt_handle = handle
    system.queue_id = msg.queue_id
    system.queue_offset = msg.queue_offset
    system.delivery_attempt = msg.reconsume_times + 1
    trace_context = props.get(MessageConst.PROPERTY_TRACE_CONTEXT)
    if trace_context is not None:
        system.trace_context = trace_context
    dlq_topic = props.get(PROPERTY_DLQ_ORIGIN_TOPIC)
    dlq_message_id = props.get(PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_message_id is not None:
        system.dead_letter_queue.topic = dlq_topic
        system.dead_letter_queue.message_id = dlq_message_id
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES}
    return pb.Message(topic=resource(msg.topic), user_properties=user, system_properties=system, body=body)


def message_from_stored(body: bytes) -> pb.Message:
    """The first stored record of ``body`` as a 5.x message, its body inflated when it was
    stored compressed (``MessageDecodeError`` for a bad record)."""
    return message_from_ext(decode_stored(body, decompress_max_size=MAX_DECOMPRESSED_BODY))
