"""Messages from the store as 5.x ``Message``s (Java ``GrpcConverter#buildMessage``)."""

from __future__ import annotations

import hashlib
import time

from google.protobuf import duration_pb2, timestamp_pb2

from finchmq.protocol.compression import MAX_DECOMPRESSED_BODY
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import SYSTEM_PROPERTY_NAMES_5X, MessageConst, MessageSysFlag
from finchmq.protocol.stored import decode_stored_all

from ._pb import definition_pb2 as pb
from .status import GrpcStatusError
from .types import message_type_of


def now_ms() -> int:
    return int(time.time() * 1000)


def timestamp(millis: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


def timestamp_millis(value: timestamp_pb2.Timestamp) -> int:
    return value.seconds * 1000 + value.nanos // 1_000_000


def duration(millis: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


def duration_millis(value: duration_pb2.Duration) -> int:
    return value.seconds * 1000 + value.nanos // 1_000_000


def _resource(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def message_from_ext(msg: MessageExt, receipt_handle: str | None = None) -> pb.Message:
    """``msg`` as a 5.x client receives it. The body is sent as stored after inflation (finchmq's
    decoder inflates compressed bodies), so its encoding is IDENTITY unless still compressed."""
    props = dict(msg.properties)
    body = bytes(msg.body or b"")
    system = pb.SystemProperties(
        message_id=props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=pb.GZIP if msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG else pb.IDENTITY,
        message_type=message_type_of(props),
        born_timestamp=timestamp(msg.born_timestamp),
        store_timestamp=timestamp(msg.store_timestamp),
        store_host=str(msg.store_host),
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    tag = props.get(MessageConst.PROPERTY_TAGS)
    if tag is not None:
        system.tag = tag
    keys = props.get(MessageConst.PROPERTY_KEYS)
    if keys is not None:
        system.keys.extend(keys.split(MessageConst.KEY_SEPARATOR))
    born_host = props.get(MessageConst.PROPERTY_BORN_HOST) or str(msg.born_host)
    if born_host.strip():
        system.born_host = born_host
    delay_sec = props.get(MessageConst.PROPERTY_TIMER_DELAY_SEC)
    deliver_ms = props.get(MessageConst.PROPERTY_TIMER_DELIVER_MS)
    try:
        if delay_sec is not None:
            system.delivery_timestamp.CopyFrom(timestamp(now_ms() + int(delay_sec) * 1000))
        elif deliver_ms is not None:
            system.delivery_timestamp.CopyFrom(timestamp(int(deliver_ms)))
    except ValueError:
        pass  # a malformed timer property: the message was delivered anyway
    group = props.get(MessageConst.PROPERTY_SHARDING_KEY)
    if group is not None:
        system.message_group = group
    handle = receipt_handle or props.get(MessageConst.PROPERTY_POP_CK)
    if handle is not None:
        system.receipt_handle = handle
    trace = props.get(MessageConst.PROPERTY_TRACE_CONTEXT)
    if trace is not None:
        system.trace_context = trace
    dlq_topic = props.get(MessageConst.PROPERTY_DLQ_ORIGIN_TOPIC)
    dlq_id = props.get(MessageConst.PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_id is not None:
        system.dead_letter_queue.CopyFrom(pb.DeadLetterQueue(topic=dlq_topic, message_id=dlq_id))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES_5X}
    return pb.Message(topic=_resource(msg.topic), user_properties=user, system_properties=system, body=body)


def decode_messages(body: bytes) -> list[MessageExt]:
    """Stored records (a pull or pop body, a check request) with inflated bodies."""
    try:
        return decode_stored_all(body, decompress_max_size=MAX_DECOMPRESSED_BODY)
    except ProtocolError as exc:
        raise GrpcStatusError(
            pb.INTERNAL_SERVER_ERROR, f"undecodable messages from the broker: {exc}"
        ) from exc


def message_from_stored(body: bytes) -> pb.Message:
    """The first stored record of ``body`` (a broker's CHECK_TRANSACTION_STATE or
    CONSUME_MESSAGE_DIRECTLY request) as a 5.x message."""
    messages = decode_messages(body)
    if not messages:
        raise GrpcStatusError(pb.INTERNAL_SERVER_ERROR, "the broker's request carries no message")
    return message_from_ext(messages[0])
