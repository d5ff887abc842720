"""Transactional messages on the broker (Java ``TransactionalMessageBridge``,
``TransactionalMessageServiceImpl``, the store side of ``EndTransactionProcessor`` and
``TransactionalMessageCheckService``).

A prepared ("half") message is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its real topic and
queue kept in REAL_TOPIC/REAL_QID; no consumer reads that topic. END_TRANSACTION commits (the
message is stored again, in its real topic, as COMMIT_TYPE) or rolls back; either way an op
message (tag ``d``, body: the half message's queue offset) goes to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``,
same queue id. The check walks the half queue from the offset committed for the internal group
``CID_RMQ_SYS_TRANS``, skips what the op queue marks done, and asks a producer of the message's
group about each older one (CHECK_TRANSACTION_STATE), writing it again at the end of the half
queue with ``TRANSACTION_CHECK_TIMES`` + 1; after ``transactionCheckMax`` checks it moves it to
``TRANS_CHECK_MAX_TIME_TOPIC``. Everything lives in the commit log, so restarts and crashes lose
nothing; a crash can at worst make a producer be asked again.

Where finchmq differs: a half message's delay level is applied when it is committed, not to the
half message (Java's store would move the half message itself to the schedule topic; Java's own
producer drops the level before sending, so its users see no difference), and a transaction
already committed by this broker is not committed twice when its producer answers two checks.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Final

from finchmq.common.logs import RateLimitedLog
from finchmq.protocol import ResponseCode
from finchmq.protocol.bodies import PermName
from finchmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.msg_id import UniqueKeyGenerator
from finchmq.protocol.stored import decode_stored_all, encode_message_ext
from finchmq.store import GetMessageStatus, MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from finchmq.store.inner import stored_properties_string

from .context import BrokerContext
from .put_service import settled
from .timer import handle_schedule_message, timer_status_response

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "HALF_TOPIC",
    "OP_TOPIC",
    "TRANSACTION_GROUP",
    "TransactionalMessageService",
    "to_half_message",
]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TRANSACTION_GROUP: Final = "CID_RMQ_SYS_TRANS"  # whose offsets say how far the check has come
REMOVE_TAG: Final = "d"
_MAX_CHECK_MILLIS: Final = 60_000  # Java MAX_PROCESS_TIME_LIMIT: one queue's share of a pass
_ENDED_MEMORY: Final = 100_000  # transactions remembered as committed (no second commit)

_ILLEGAL_OFFSET: Final = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY)
_NOT_TYPE: Final = MessageSysFlag.TRANSACTION_NOT_TYPE
_COMMIT: Final = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


def to_half_message(inner: MessageExtBrokerInner) -> MessageExtBrokerInner:
    """Java ``parseHalfMessageInner``: the prepared message as stored, in the half topic's queue 0,
    its real topic and queue kept in properties, its transaction type cleared so that it is
    indexed (the check reads it by queue offset)."""
    properties = dict(inner.properties)
    properties[MessageConst.PROPERTY_REAL_TOPIC] = inner.topic
    properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(inner.queue_id)
    return replace(
        inner,
        topic=HALF_TOPIC,
        queue_id=0,
        properties=properties,
        properties_string=stored_properties_string(properties),
        tags_code=None,
        sys_flag=MessageSysFlag.reset_transaction_value(inner.sys_flag, _NOT_TYPE),
    )


class TransactionalMessageService:
    """Ends transactions (END_TRANSACTION) and checks the unfinished ones (``check``)."""

    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self.discarded = 0  # half messages given up after transactionCheckMax checks
        self.passes = 0  # completed check passes
        self._ids = UniqueKeyGenerator()
        self._committed: OrderedDict[tuple[str, str], None] = OrderedDict()

    # -- END_TRANSACTION ------------------------------------------------------------------------

    async def end_transaction(self, header: EndTransactionRequestHeader) -> tuple[int, str | None]:
        """Commit or roll back the half message at ``header.commit_log_offset``; the response code
        and remark (Java ``EndTransactionProcessor.processRequest``)."""
        c = self.context
        half = c.store.look_message_by_offset(header.commit_log_offset)
        problem = self._check_prepare_message(half, header)
        if problem is not None or half is None:
            return ResponseCode.SYSTEM_ERROR, problem
        if header.commit_or_rollback == _ROLLBACK:
            await self._put_op(half)
            return ResponseCode.SUCCESS, None
        key = (
            header.producer_group,
            half.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        )
        if key[1] and key in self._committed:  # asked twice (two checks raced a restart): once only
            await self._put_op(half)
            return ResponseCode.SUCCESS, None
        final = self._final_message(half, header)
        if isinstance(final, PutMessageStatus):  # a timer message the hook refuses (Java's answers)
            return timer_status_response(final, c.store.config)
        result = await self._put(final)
        if result.status is not PutMessageStatus.PUT_OK:
            return ResponseCode.SYSTEM_ERROR, f"commit of {half.msg_id} failed: {result.status.name}"
        self.context.stats.record_put(self._real_topic(half), 1, len(half.body))
        if key[1]:
            self._committed[key] = None
            if len(self._committed) > _ENDED_MEMORY:
                self._committed.popitem(last=False)
        await self._put_op(half)
        return ResponseCode.SUCCESS, None

    @staticmethod
    def _check_prepare_message(half: MessageExt | None, header: EndTransactionRequestHeader) -> str | None:
        """Java ``checkPrepareMessage``: the offsets and group must be those of a half message."""
        if half is None or half.topic != HALF_TOPIC:
            return "Find prepared transaction message failed"
        if half.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP) != header.producer_group:
            return "The producer group wrong"
        if half.queue_offset != header.tran_state_table_offset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != header.commit_log_offset:
            return "The commit log offset wrong"
        return None

    @staticmethod
    def _real_topic(half: MessageExt) -> str:
        return half.properties.get(MessageConst.PROPERTY_REAL_TOPIC, "")

    def _final_message(
        self, half: MessageExt, header: EndTransactionRequestHeader
    ) -> MessageExtBrokerInner | PutMessageStatus:
        """Java ``endMessageTransaction``: the message in its real topic and queue, COMMIT_TYPE,
        pointing back at the half message; a delay level or a timer applies from now (a timer
        the store refuses: its status)."""
        c = self.context
        properties = dict(half.properties)
        topic = properties.pop(MessageConst.PROPERTY_REAL_TOPIC, "")
        queue_id = int(properties.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, "0") or 0)
        properties.pop(MessageConst.PROPERTY_TRANSACTION_PREPARED, None)
        status, topic, queue_id = handle_schedule_message(
            c.timer_message_store, c.store.config.timer_wheel_enable, c.schedule_message_service,
            topic, queue_id, properties, _COMMIT,
        )  # fmt: skip
        if status is not None:
            return status
        properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        return MessageExtBrokerInner.from_message_ext(
            half,
            topic=topic,
            queue_id=queue_id,
            properties=properties,
            store_host=self.context.store_host,
            sys_flag=MessageSysFlag.reset_transaction_value(half.sys_flag, _COMMIT),
            prepared_transaction_offset=header.commit_log_offset,
        )

    async def _put_op(self, half: MessageExt) -> None:
        """Java ``addRemoveTagInTransactionOp``: mark the half message done."""
        properties = {
            MessageConst.PROPERTY_TAGS: REMOVE_TAG,
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: self._ids.create_uniq_id(),
        }
        op = MessageExtBrokerInner(
            topic=OP_TOPIC,
            body=str(half.queue_offset).encode(),
            queue_id=half.queue_id,
            properties=properties,
            properties_string=stored_properties_string(properties),
            born_timestamp=int(time.time() * 1000),
            born_host=self.context.store_host,
            store_host=self.context.store_host,
        )
        result = await self._put(op)
        if result.status is not PutMessageStatus.PUT_OK:
            limited.error(
                "op-put", "transaction op message for %s not written: %s", half.msg_id, result.status.name
            )

    async def _put(self, inner: MessageExtBrokerInner) -> PutMessageResult:
        c = self.context
        return await settled(await c.put_service.append(inner))

    # -- the check ----------------------------------------------------------------------------

    async def check(self) -> None:
        """One pass over the half queues (Java ``TransactionalMessageServiceImpl.check``)."""
        c = self.context
        config = c.topic_config_manager.select_topic_config(HALF_TOPIC)
        if config is None:
            config = c.topic_config_manager.create_topic_in_send_message_back_method(
                HALF_TOPIC, 1, PermName.WRITE | PermName.READ
            )
        for queue_id in range(config.read_queue_nums):
            await self._check_queue(queue_id)
        self.passes += 1

    async def _check_queue(self, queue_id: int) -> None:
        c = self.context
        started = int(time.time() * 1000)
        timeout = c.config.transaction_time_out
        half_offset = self._committed_offset(HALF_TOPIC, queue_id)
        op_offset = self._committed_offset(OP_TOPIC, queue_id)
        done_ops: list[int] = []
        removed: dict[int, int] = {}  # half queue offset -> op queue offset of its op message
        next_op, ops_found = self._read_ops(queue_id, op_offset, half_offset, removed, done_ops)
        offset = new_offset = half_offset
        while int(time.time() * 1000) - started < _MAX_CHECK_MILLIS:
            if offset in removed:
                done_ops.append(removed.pop(offset))
                offset = new_offset = offset + 1
                continue
            msg, next_offset = self._read_half(queue_id, offset)
            if msg is None:
                if next_offset is None or next_offset == offset:
                    break  # nothing more in the queue
                offset = new_offset = next_offset  # skipped (expired or illegal offset)
                continue
            properties = dict(msg.properties)
            if self._give_up(msg, properties):
                await self._discard(msg)
                offset = new_offset = offset + 1
                continue
            if msg.store_timestamp >= started:
                break  # written during this pass
            age = int(time.time() * 1000) - msg.born_timestamp
            immunity = timeout
            immunity_text = properties.get(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_text is not None:
                immunity = _immunity_millis(immunity_text, timeout)
                if age < immunity and await self._settled_or_deferred(msg, properties, removed, done_ops):
                    offset = new_offset = offset + 1
                    continue
            elif 0 <= age < immunity:
                break  # too young, and so is everything after it
            if ops_found and age >= 0:
                next_op, ops_found = self._read_ops(queue_id, next_op, half_offset, removed, done_ops)
                continue  # maybe a later op ends it
            if age <= immunity and age >= 0:
                break
            renewed = await self._put_back(msg, properties)
            if renewed is None:
                break  # the store refused: try again next pass
            self._ask_producer(renewed)
            offset = new_offset = offset + 1
        if new_offset != half_offset:
            self._commit_offset(HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _contiguous_end(done_ops, op_offset)
        if new_op_offset != op_offset:
            self._commit_offset(OP_TOPIC, queue_id, new_op_offset)

    def _committed_offset(self, topic: str, queue_id: int) -> int:
        offset = self.context.consumer_offset_manager.query_offset(TRANSACTION_GROUP, topic, queue_id)
        return offset if offset >= 0 else self.context.store.get_min_offset_in_queue(topic, queue_id)

    def _commit_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.context.consumer_offset_manager.commit_offset("", TRANSACTION_GROUP, topic, queue_id, offset)

    def _read_ops(
        self, queue_id: int, op_offset: int, half_offset: int, removed: dict[int, int], done_ops: list[int]
    ) -> tuple[int, bool]:
        """Java ``fillOpRemoveMap``: up to 32 op messages from ``op_offset``; returns the next op
        offset and whether any was found."""
        store = self.context.store
        with store.get_message(TRANSACTION_GROUP, OP_TOPIC, queue_id, op_offset, 32) as result:
            if result.status is not GetMessageStatus.FOUND:
                if result.status in (
                    GetMessageStatus.OFFSET_TOO_SMALL,
                    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                ):
                    self._commit_offset(OP_TOPIC, queue_id, result.next_begin_offset)
                return result.next_begin_offset, False
            ops = decode_stored_all(result.body())
            next_offset = result.next_begin_offset
        for op in ops:
            if op.tags != REMOVE_TAG:
                limited.error("op-tag", "op message with tag %r in %s ignored", op.tags, OP_TOPIC)
                continue
            try:
                half_queue_offset = int(op.body.decode())
            except ValueError:
                continue
            if half_queue_offset < half_offset:
                done_ops.append(op.queue_offset)
            else:
                removed[half_queue_offset] = op.queue_offset
        return next_offset, bool(ops)

    def _read_half(self, queue_id: int, offset: int) -> tuple[MessageExt | None, int | None]:
        """The half message at ``offset``, or (None, where to go on) when there is none."""
        with self.context.store.get_message(TRANSACTION_GROUP, HALF_TOPIC, queue_id, offset, 1) as result:
            if result.status is GetMessageStatus.FOUND:
                [msg] = decode_stored_all(result.body())[:1]
                return msg, None
            if result.status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE):
                return None, None
            return None, result.next_begin_offset

    def _give_up(self, msg: MessageExt, properties: dict[str, str]) -> bool:
        """Java ``needDiscard`` (counting this check in ``properties``) or ``needSkip`` (older than
        the commit log keeps files)."""
        times_text = properties.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES)
        times = 1
        if times_text is not None:
            try:
                times = int(times_text)
            except ValueError:
                times = -1
            if times >= self.context.config.transaction_check_max:
                return True
            times += 1
        properties[MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        reserved = self.context.store.config.file_reserved_time * 3_600_000
        return int(time.time() * 1000) - msg.born_timestamp > reserved

    async def _settled_or_deferred(
        self, msg: MessageExt, properties: dict[str, str], removed: dict[int, int], done_ops: list[int]
    ) -> bool:
        """Java ``checkPrepareQueueOffset``, for a message still inside its own immunity time:
        true when an op for its first copy ends it, or once it is written again further on."""
        text = properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if text is not None:
            first = int(text) if text.lstrip("-").isdigit() else -1
            if first == -1:
                return False
            if first in removed:
                done_ops.append(removed.pop(first))
                return True
        properties.setdefault(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        return await self._put_back(msg, properties) is not None

    async def _put_back(self, msg: MessageExt, properties: dict[str, str]) -> MessageExt | None:
        """Java ``putBackHalfMsgQueue``: the half message written again at the end of its queue;
        the new copy (its offsets), or None if the store refused."""
        inner = MessageExtBrokerInner.from_message_ext(
            msg, topic=msg.topic, queue_id=msg.queue_id, properties=properties
        )
        result = await self._put(inner)
        append = result.append_message_result
        if result.status is not PutMessageStatus.PUT_OK or append is None:
            limited.error(
                "half-put-back", "half message %s not written back: %s", msg.msg_id, result.status.name
            )
            return None
        return replace(
            msg,
            properties=properties,
            queue_offset=append.logics_offset,
            commit_log_offset=append.wrote_offset,
        )

    def _ask_producer(self, half: MessageExt) -> None:
        """Java ``AbstractTransactionalMessageCheckListener.sendCheckMessage``: CHECK_TRANSACTION_STATE
        (oneway) to a live producer of the message's group, the message as its real topic's."""
        c = self.context
        group = half.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP, "")
        channel = c.producer_manager.available_channel(group)
        if channel is None:
            limited.warning(
                "check-no-producer", "transaction check: no producer of group %s is online", group
            )
            return
        uniq = half.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=half.msg_id,
        )
        as_sent = replace(
            half,
            topic=self._real_topic(half),
            queue_id=int(half.properties.get(MessageConst.PROPERTY_REAL_QUEUE_ID, "0") or 0),
            store_size=0,
        )
        c.broker2client.check_producer_transaction_state(group, channel, header, encode_message_ext(as_sent))

    async def _discard(self, msg: MessageExt) -> None:
        """Java ``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``: checked too many
        times (or too old), the message goes to TRANS_CHECK_MAX_TIME_TOPIC."""
        c = self.context
        log.error(
            "transaction %s of group %s checked %s times: discarded to %s",
            msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            msg.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP),
            msg.properties.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES),
            CHECK_MAX_TIME_TOPIC,
        )
        self.discarded += 1
        if c.topic_config_manager.select_topic_config(CHECK_MAX_TIME_TOPIC) is None:
            c.topic_config_manager.create_topic_in_send_message_back_method(
                CHECK_MAX_TIME_TOPIC, 1, PermName.READ | PermName.WRITE
            )
        properties = dict(msg.properties)
        result = await self._put(
            MessageExtBrokerInner.from_message_ext(
                msg, topic=CHECK_MAX_TIME_TOPIC, queue_id=0, properties=properties, store_host=c.store_host
            )
        )
        if result.status is not PutMessageStatus.PUT_OK:
            limited.error(
                "discard-put", "discarded transaction %s not written: %s", msg.msg_id, result.status.name
            )


def _immunity_millis(text: str, timeout: int) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS in ms; -1 or garbage means transactionTimeOut."""
    try:
        seconds = int(text)
    except ValueError:
        return timeout
    return timeout if seconds == -1 else seconds * 1000


def _contiguous_end(done: list[int], start: int) -> int:
    """Java ``calculateOpOffset``: past the run of processed op offsets that begins at ``start``."""
    offset = start
    for value in sorted(done):
        if value != offset:
            break
        offset += 1
    return offset
