"""SendMessage, EndTransaction, RecallMessage and ForwardMessageToDeadLetterQueue (Java's
``SendMessageActivity``, ``EndTransactionActivity``, ``RecallMessageActivity``,
``ForwardMessageToDLQActivity`` over ``ProducerProcessor``/``TransactionProcessor`` and the
local-mode ``LocalMessageService``), and the relay of the broker's transaction checks.

A 5.x client names no producer group: the topic is the producer group (Java), so the broker's
CHECK_TRANSACTION_STATE for a half message goes to a client publishing its topic.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from google.protobuf import timestamp_pb2

from finchmq.protocol.attributes import TopicMessageType, message_type_of_properties
from finchmq.protocol.batch import encode_batch
from finchmq.protocol.bodies import PermName
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from finchmq.protocol.message import Message, java_string_hash, properties_to_string
from finchmq.protocol.message_const import SYSTEM_PROPERTY_NAMES_5X, MessageConst, MessageSysFlag
from finchmq.protocol.msg_id import UniqueKeyGenerator, decode_offset_msg_id
from finchmq.protocol.recall import RecallMessageHandle
from finchmq.protocol.topics import is_dlq_topic, is_retry_topic

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .backend import BROKER_NAME_FIELD
from .clients import ClientSession
from .context import CallContext
from .convert import decode_messages, message_from_ext, now_ms, timestamp_millis
from .receipts import forward_to_dead_letter_queue
from .state import Service
from .status import GrpcStatusError, code_of_remoting, ok, remoting_error, status
from .types import topic_type
from .validate import check_tag, has_control_character, valid_consumer_group, valid_topic

log = logging.getLogger(__name__)

AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"  # Java TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
_RECALL_TIMEOUT: Final = 2.0  # RecallMessageActivity: Duration.ofSeconds(2)

# Java Timestamps.checkValid: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z
_TIMESTAMP_SECONDS_MIN: Final = -62_135_596_800
_TIMESTAMP_SECONDS_MAX: Final = 253_402_300_799

# SendMessageActivity#convertToSendMessageResponse (LocalMessageService's SendStatus first)
_SEND_STATUS: Final[dict[int, tuple[int, str]]] = {
    ResponseCode.SUCCESS: (pb.OK, "SEND_OK"),
    ResponseCode.FLUSH_DISK_TIMEOUT: (pb.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: (pb.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    ResponseCode.SLAVE_NOT_AVAILABLE: (pb.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
}


# -- transactions ---------------------------------------------------------------------------------


def _timestamp_valid(ts: timestamp_pb2.Timestamp) -> bool:
    """Java ``Timestamps.isValid``."""
    return _TIMESTAMP_SECONDS_MIN <= ts.seconds <= _TIMESTAMP_SECONDS_MAX and 0 <= ts.nanos <= 999_999_999


def _timestamp_millis(ts: timestamp_pb2.Timestamp) -> int:
    """Java ``Timestamps.toMillis``: an invalid timestamp is an IllegalArgumentException (an
    internal error to the client, as Java's ``ResponseBuilder`` answers it)."""
    if not _timestamp_valid(ts):
        raise GrpcStatusError(
            pb.INTERNAL_SERVER_ERROR,
            f"Timestamp is not valid. Seconds ({ts.seconds}) must be in range "
            f"[{_TIMESTAMP_SECONDS_MIN}, {_TIMESTAMP_SECONDS_MAX}]. Nanos ({ts.nanos}) must be in "
            "range [0, +999,999,999].",
        )
    return timestamp_millis(ts)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _validate_key(key: str) -> None:
    if key:
        if not key.strip():
            raise GrpcStatusError(pb.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if has_control_character(key):
            raise GrpcStatusError(pb.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _validate_message_group(svc: Service, group: str) -> None:
    if not group.strip():
        raise GrpcStatusError(
            pb.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace"
        )
    max_size = svc.config.max_message_group_size
    if max_size <= 0:
        return
    if _utf8_len(group) >= max_size:
        raise GrpcStatusError(pb.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_size}")
    if has_control_character(group):
        raise GrpcStatusError(pb.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def _validate_body(svc: Service, body: bytes) -> None:
    if not body:
        raise GrpcStatusError(pb.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    limit = svc.config.max_message_size
    if limit > 0 and len(body) > limit:
        raise GrpcStatusError(pb.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")


def message_properties(
    svc: Service, ctx: CallContext, message: pb.Message, producer_group: str
) -> dict[str, str]:
    """The remoting properties of a 5.x message, checked in Java's order
    (``SendMessageActivity#buildMessageProperty``)."""
    config = svc.config
    system = message.system_properties
    user = message.user_properties
    if len(user) > config.user_property_max_num:
        raise GrpcStatusError(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"too many user properties, max is {config.user_property_max_num}",
        )
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_NAMES_5X:
            raise GrpcStatusError(pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if has_control_character(key):
            raise GrpcStatusError(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character"
            )
        if has_control_character(value):
            raise GrpcStatusError(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character"
            )
        size += _utf8_len(key) + _utf8_len(value)
    properties = dict(user)
    tag = system.tag
    check_tag(tag)
    if tag:  # Java Message.setTags puts even "" (validateTag passes it); an empty TAGS reads as none
        properties[MessageConst.PROPERTY_TAGS] = tag
    size += _utf8_len(tag)
    for key in system.keys:
        _validate_key(key)
        size += _utf8_len(key)
    if system.keys:
        properties[MessageConst.PROPERTY_KEYS] = MessageConst.KEY_SEPARATOR.join(system.keys)
    if size > config.max_user_property_size:
        raise GrpcStatusError(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {config.max_user_property_size}",
        )
    message_id = system.message_id
    if not message_id.strip():
        raise GrpcStatusError(pb.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id
    if system.message_type == pb.TRANSACTION:
        properties[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            limit = config.max_transaction_recovery_second
            if limit > 0 and seconds > limit:
                raise GrpcStatusError(
                    pb.BAD_REQUEST,
                    f"the max transaction recovery time of message is too large, max is {limit}",
                )
            properties[MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if system.HasField("delivery_timestamp"):
        deliver_ms = _timestamp_millis(system.delivery_timestamp)
        max_delay = config.max_delay_time_mills
        if max_delay > 0 and deliver_ms - now_ms() > max_delay:
            raise GrpcStatusError(
                pb.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {max_delay}"
            )
        properties[MessageConst.PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(system.delivery_attempt)
    properties[MessageConst.PROPERTY_PRODUCER_GROUP] = producer_group
    group = system.message_group
    if group:
        _validate_message_group(svc, group)
        properties[MessageConst.PROPERTY_SHARDING_KEY] = group
    if system.trace_context:
        properties[MessageConst.PROPERTY_TRACE_CONTEXT] = system.trace_context
    born_host = system.born_host if system.born_host.strip() else ctx.peer
    if born_host.strip():
        properties[MessageConst.PROPERTY_BORN_HOST] = born_host
    if _timestamp_valid(system.born_timestamp):
        born = system.born_timestamp
        properties[MessageConst.PROPERTY_BORN_TIMESTAMP] = str(timestamp_millis(born))
    return properties


def sys_flag_of(message: pb.Message) -> int:
    """Java ``SendMessageActivity#buildSysFlag``: GZIP → COMPRESSED, TRANSACTION → PREPARED."""
    flag = 0
    if message.system_properties.body_encoding == pb.GZIP:
        flag |= MessageSysFlag.COMPRESSED_FLAG
    if message.system_properties.message_type == pb.TRANSACTION:
        flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
    return flag


def check_topic_message_type(expected: TopicMessageType, actual: TopicMessageType) -> None:
    """Java ``DefaultTopicMessageTypeValidator``."""
    if actual is TopicMessageType.UNSPECIFIED or (
        actual is not expected and expected is not TopicMessageType.MIXED
    ):
        raise GrpcStatusError(
            pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {expected}, but actual type is {actual}",
        )


def consistent_hash(value: int, buckets: int) -> int:
    """Guava ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        gen = ((state >> 33) + 1) / 2147483648.0
        nxt = int((candidate + 1) / gen)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


@dataclass(frozen=True, slots=True)
class _Queue:
    broker_name: str
    queue_id: int


class _RoundRobin:
    """Per-topic write-queue counters (Java ``MessageQueueView``'s write selector)."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def next(self, topic: str) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            if len(self._counters) > 100_000:
                self._counters.clear()
            counter = self._counters[topic] = itertools.count()
        return next(counter)


_round_robin = _RoundRobin()
_batch_ids = UniqueKeyGenerator()


async def _write_queues(svc: Service, topic: str) -> list[_Queue]:
    route = await svc.backend.route(topic)
    if route is None:
        raise GrpcStatusError(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
    return [
        _Queue(broker.broker_name, queue_id)
        for broker in route
        if broker.perm & PermName.WRITE
        for queue_id in range(broker.write_queue_nums)
    ]


def _select_queue(queues: list[_Queue], topic: str, request: spb.SendMessageRequest) -> _Queue:
    """Java ``SendMessageQueueSelector``: a single message's group hashes to a queue, else round robin."""
    if not queues:
        raise GrpcStatusError(pb.FORBIDDEN, "no writable queue")
    group = request.messages[0].system_properties.message_group if len(request.messages) == 1 else ""
    if group:
        return queues[consistent_hash(java_string_hash(group), len(queues))]
    return queues[_round_robin.next(topic) % len(queues)]


async def send_message(
    svc: Service, ctx: CallContext, req: spb.SendMessageRequest
) -> spb.SendMessageResponse:
    if not req.messages:
        raise GrpcStatusError(pb.MESSAGE_CORRUPTED, "no message to send")
    first = req.messages[0]
    topic = valid_topic(first.topic)
    producer_group = topic  # Java: the topic is the producer group (for transaction checks)
    messages: list[tuple[bytes, dict[str, str]]] = []
    for message in req.messages:
        if message.topic != first.topic:
            raise GrpcStatusError(pb.MESSAGE_CORRUPTED, "topic in message is not same")
        _validate_body(svc, message.body)
        messages.append((message.body, message_properties(svc, ctx, message, producer_group)))
    sys_flag = sys_flag_of(first)
    properties = messages[0][1]
    if (
        svc.config.enable_topic_message_type_check
        and MessageConst.PROPERTY_TRANSFER_FLAG not in properties
        and not is_retry_topic(topic)
        and not is_dlq_topic(topic)
    ):
        config = await svc.backend.topic_config(topic)
        if config is None:  # Java reads UNSPECIFIED (a type conflict); the route says "not found"
            raise GrpcStatusError(pb.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        check_topic_message_type(topic_type(config), message_type_of_properties(properties))
    queue = _select_queue(await _write_queues(svc, topic), topic, req)
    born = properties.get(MessageConst.PROPERTY_BORN_TIMESTAMP)
    header = SendMessageRequestHeader(
        producer_group=producer_group,
        topic=topic,
        default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums=4,
        queue_id=queue.queue_id,
        sys_flag=sys_flag,
        born_timestamp=int(born) if born and born.lstrip("-").isdigit() else now_ms(),
        flag=0,
        properties=properties_to_string(properties),
        reconsume_times=0,
        batch=len(messages) > 1,
    )
    if len(messages) > 1:
        # Java: the header carries the first message's properties, which the broker appends to
        # every item's (so every item reads the first one's UNIQ_KEY); the SDK sends one at a time
        body = encode_batch(Message(topic, b, properties=p) for b, p in messages)
        message_id = _batch_ids.create_uniq_id()  # Java: MessageClientIDSetter.setUniqID(msgBatch)
    else:
        body = messages[0][0]
        message_id = properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), body)
    response = await svc.invoke(ctx, request, broker_name=queue.broker_name)
    known = _SEND_STATUS.get(response.code)
    if known is None:  # the brief's decision: the remoting code mapped, as cluster mode does
        raise remoting_error(response.code, response.remark, "send message failed")
    code, send_status = known
    if code != pb.OK:
        entry = spb.SendResultEntry(status=status(code, f"send message failed, sendStatus={send_status}"))
    else:
        try:
            answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        except ProtocolError as exc:
            raise GrpcStatusError(
                pb.INTERNAL_SERVER_ERROR, f"bad send response from the broker: {exc}"
            ) from exc
        # a 5.x broker answers transactionId = the message's UNIQ_KEY (SendMessageProcessor)
        transaction_id = answer.transaction_id or message_id
        if sys_flag & MessageSysFlag.TRANSACTION_PREPARED_TYPE and transaction_id.strip():
            _fill_transaction_data(svc, producer_group, queue, topic, answer, message_id, transaction_id)
        entry = spb.SendResultEntry(
            status=status(pb.OK, "OK"),
            offset=answer.queue_offset,
            message_id=message_id,
            transaction_id=transaction_id,
            recall_handle=answer.recall_handle or "",
        )
    return spb.SendMessageResponse(
        status=status(entry.status.code, pb.Code.Name(entry.status.code)), entries=[entry]
    )


def _fill_transaction_data(
    svc: Service,
    producer_group: str,
    queue: _Queue,
    topic: str,
    answer: SendMessageResponseHeader,
    message_id: str,
    transaction_id: str,
) -> None:
    """Java ``ProducerProcessor#fillTransactionData``: the commit-log offset from the offset msg id."""
    try:
        commit_log_offset = decode_offset_msg_id(answer.msg_id or message_id).commit_log_offset
    except ProtocolError as exc:
        log.warning("fillTransactionData failed for %s on %s: %s", transaction_id, queue, exc)
        return
    svc.transactions.add(
        producer_group,
        broker_name=queue.broker_name,
        topic=topic,
        tran_state_table_offset=answer.queue_offset,
        commit_log_offset=commit_log_offset,
        transaction_id=transaction_id,
    )


# -- EndTransaction ----------------------------------------------------------------------------------

_COMMIT_OR_ROLLBACK: Final[Mapping[int, int]] = {
    pb.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    pb.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
}


async def end_transaction(
    svc: Service, ctx: CallContext, req: spb.EndTransactionRequest
) -> spb.EndTransactionResponse:
    topic = valid_topic(req.topic)
    if not req.transaction_id.strip():
        raise GrpcStatusError(pb.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
    producer_group = topic
    data = svc.transactions.poll(producer_group, req.transaction_id)
    if data is None:
        raise GrpcStatusError(pb.INTERNAL_SERVER_ERROR, "cannot found transaction data")
    header = EndTransactionRequestHeader(
        producer_group=producer_group,
        tran_state_table_offset=data.tran_state_table_offset,
        commit_log_offset=data.commit_log_offset,
        commit_or_rollback=_COMMIT_OR_ROLLBACK.get(req.resolution, MessageSysFlag.TRANSACTION_NOT_TYPE),
        msg_id=req.message_id,
        from_transaction_check=req.source == pb.SOURCE_SERVER_CHECK,
        transaction_id=req.transaction_id,
    )
    fields = header.to_ext_fields()
    fields["topic"] = topic  # 5.x EndTransactionRequestHeader.topic
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
    # Java's endTransactionOneway: the broker's answer is not looked at
    await svc.invoke(ctx, request, broker_name=data.broker_name)
    return spb.EndTransactionResponse(status=ok())


async def relay_transaction_check(svc: Service, session: ClientSession, request: RemotingCommand) -> None:
    """CHECK_TRANSACTION_STATE from the broker → RecoverOrphanedTransactionCommand to the client
    (Java ``AbstractProxyRelayService#processCheckTransactionState`` and ``GrpcClientChannel``):
    the half message's data is recorded for the EndTransaction the client answers with."""
    try:
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        if not request.body:
            log.warning("transaction check without a message for %s", session.client_id)
            return
        messages = decode_messages(bytes(request.body))
    except (ProtocolError, GrpcStatusError) as exc:
        log.warning("bad transaction check for %s: %s", session.client_id, exc)
        return
    if not messages:
        return
    stored = messages[0]
    group = stored.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP, "")
    transaction_id = header.transaction_id or ""
    # Java: the broker name of the address the check came from (cluster mode: the backend names
    # it in the request); local mode has one broker
    broker_name = request.ext_fields.get(BROKER_NAME_FIELD, "")  # both backends tag what a broker asks
    data = svc.transactions.add(
        group,
        broker_name=broker_name,
        topic=stored.topic,
        tran_state_table_offset=header.tran_state_table_offset,
        commit_log_offset=header.commit_log_offset,
        transaction_id=transaction_id,
    )
    if data is None:
        log.warning("add transaction data failed for %s: no broker name", transaction_id)
        return
    command = spb.TelemetryCommand(
        recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=message_from_ext(stored), transaction_id=transaction_id
        )
    )
    if not await session.write(command):
        svc.transactions.remove(group, data)  # Java onSendCheckTransactionStateFailed


# -- RecallMessage ----------------------------------------------------------------------------------


async def recall_message(
    svc: Service, ctx: CallContext, req: spb.RecallMessageRequest
) -> spb.RecallMessageResponse:
    topic = valid_topic(req.topic)
    if svc.config.enable_topic_message_type_check:
        config = await svc.backend.topic_config(topic)
        expected = TopicMessageType.UNSPECIFIED if config is None else topic_type(config)
        check_topic_message_type(expected, TopicMessageType.DELAY)
    try:
        handle = RecallMessageHandle.decode(req.recall_handle)
    except ProtocolError as exc:
        raise GrpcStatusError(pb.INTERNAL_SERVER_ERROR, str(exc)) from exc
    header = RecallMessageRequestHeader(
        topic=topic, recall_handle=req.recall_handle, broker_name=handle.broker_name
    )
    request = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext_fields())
    response = await svc.invoke(ctx, request, broker_name=handle.broker_name, timeout=_RECALL_TIMEOUT)
    if response.code != ResponseCode.SUCCESS:  # Java LocalMessageService: INTERNAL_SERVER_ERROR(remark)
        raise GrpcStatusError(pb.INTERNAL_SERVER_ERROR, response.remark or f"code {response.code}")
    answer = RecallMessageResponseHeader.from_ext_fields(response.ext_fields)
    return spb.RecallMessageResponse(status=ok(), message_id=answer.msg_id)


# -- ForwardMessageToDeadLetterQueue ----------------------------------------------------------------


async def forward_message_to_dead_letter_queue(
    svc: Service, ctx: CallContext, req: spb.ForwardMessageToDeadLetterQueueRequest
) -> spb.ForwardMessageToDeadLetterQueueResponse:
    topic = valid_topic(req.topic)
    group = valid_consumer_group(req.group)
    response = await forward_to_dead_letter_queue(svc, ctx, req.receipt_handle, req.message_id, group, topic)
    return spb.ForwardMessageToDeadLetterQueueResponse(status=remoting_status(response.code, response.remark))


def remoting_status(code: int, remark: str | None) -> pb.Status:
    """Java ``ResponseBuilder#buildStatus(int, String)``: the mapped code, the remark (else the number)."""
    return status(code_of_remoting(code), remark if remark is not None else str(code))
