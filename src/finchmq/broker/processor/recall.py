"""RECALL_MESSAGE (Java 5.x ``RecallMessageProcessor``): withdraw a timer message before its time.

Strategy: the handle (``protocol/recall.py``) names the message's topic, broker, time and
UNIQ_KEY. After Java's checks, in Java's order and with its answers, a marker is stored as a
timer message of the same time: topic and UNIQ_KEY of the recalled one, tag ``_RECALL_TAG_``,
body ``0``, ``TIMER_DEL_UNIQKEY = topic+UNIQ_KEY``. It lands in the same slot; the timer reads a
slot's markers first and drops the messages they name. A handle of no pending message is
answered SUCCESS all the same (5.x: the marker finds nothing).
"""

from __future__ import annotations

import logging
import time

from finchmq.broker.put_service import settled
from finchmq.broker.timer import handle_schedule_message, parse_java_long
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import PermName
from finchmq.protocol.errors import MessageEncodeError
from finchmq.protocol.headers import RecallMessageRequestHeader
from finchmq.protocol.message import tags_hash_code
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.recall import RecallHandleError, RecallMessageHandle
from finchmq.remoting import ExecutorName, RemotingContext, handles
from finchmq.store import MessageExtBrokerInner, PutMessageStatus, stored_properties_string
from finchmq.store.config import BrokerRole
from finchmq.store.timer import build_delete_key

from ._base import BrokerProcessor, now_ms
from .send import pack_born_host

__all__ = ["RECALL_MESSAGE_TAG", "RecallMessageProcessor"]

log = logging.getLogger(__name__)

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_NOT_AVAILABLE = "recall failed, broker service not available"
_EXECUTE_ERROR = "recall failed, execute error"
_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


def _to_long(text: str, default: int) -> int:
    """commons-lang ``NumberUtils.toLong``."""
    try:
        return parse_java_long(text)
    except ValueError:
        return default


class RecallMessageProcessor(BrokerProcessor):
    executor = ExecutorName.SEND  # Java registers it on the send executor

    @handles(RequestCode.RECALL_MESSAGE)
    async def recall_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        region = {MessageConst.PROPERTY_MSG_REGION: c.config.region_id}
        header = RecallMessageRequestHeader.from_ext_fields(request.ext_fields)

        def answer(code: int, remark: str | None) -> RemotingCommand:
            return request.make_response(code, remark, region)

        if not c.config.recall_message_enable:
            return answer(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if c.store.config.broker_role is BrokerRole.SLAVE:
            return answer(ResponseCode.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if now_ms() < c.config.start_accept_send_request_time_stamp:
            return answer(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if (
            not PermName.is_writeable(c.broker_permission)
            and not c.config.allow_recall_when_broker_not_writeable
        ):
            return answer(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if c.topic_config_manager.select_topic_config(header.topic) is None:
            return answer(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist")
        try:
            handle = RecallMessageHandle.decode(header.recall_handle)
        except RecallHandleError as exc:
            return answer(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if header.topic != handle.topic:
            return answer(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if c.config.broker_name != handle.broker_name:
            return answer(ResponseCode.ILLEGAL_OPERATION, _NOT_AVAILABLE)
        time_left = _to_long(handle.timestamp_str, -1) - int(time.time() * 1000)
        if time_left <= 0 or time_left >= c.store.config.timer_max_delay_sec * 1000:
            return answer(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        inner = self._build_message(ctx, header, handle)
        if inner is None:
            return answer(ResponseCode.SYSTEM_ERROR, _EXECUTE_ERROR)
        result = await settled(await c.put_service.append(inner))
        if result.status not in _STORED:
            log.warning(
                "recall of %s in %s not stored: %s", handle.message_id, handle.topic, result.status.name
            )
            return answer(ResponseCode.SYSTEM_ERROR, _EXECUTE_ERROR)
        if result.status is PutMessageStatus.PUT_OK:
            c.stats.record_put(inner.topic, 1, len(inner.body))
        return request.make_response(ResponseCode.SUCCESS, None, {**region, "msgId": handle.message_id})

    def _build_message(
        self, ctx: RemotingContext, header: RecallMessageRequestHeader, handle: RecallMessageHandle
    ) -> MessageExtBrokerInner | None:
        """Java ``buildMessage``, through the schedule hook as Java's put would take it; None if
        the marker cannot be stored (a handle whose parts cannot be properties, the hook's
        refusal)."""
        c = self.context
        now = int(time.time() * 1000)
        properties = {
            MessageConst.PROPERTY_TAGS: RECALL_MESSAGE_TAG,
            MessageConst.PROPERTY_TIMER_DEL_UNIQKEY: build_delete_key(handle.topic, handle.message_id),
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
            MessageConst.PROPERTY_TIMER_DELIVER_MS: handle.timestamp_str,
            MessageConst.PROPERTY_BORN_TIMESTAMP: str(now),
        }
        if header.producer_group:
            properties[MessageConst.PROPERTY_PRODUCER_GROUP] = header.producer_group
        status, topic, queue_id = handle_schedule_message(
            c.timer_message_store, c.store.config.timer_wheel_enable, c.schedule_message_service,
            handle.topic, 0, properties, 0,
        )  # fmt: skip
        if status is not None:
            log.warning("recall of %s in %s refused: %s", handle.message_id, handle.topic, status.name)
            return None
        try:
            properties_string = stored_properties_string(properties)
        except MessageEncodeError as exc:
            log.warning("recall handle of %s makes no message: %s", handle.topic, exc)
            return None
        return MessageExtBrokerInner(
            topic=topic,
            body=b"0",
            queue_id=queue_id,
            properties=properties,
            properties_string=properties_string,
            tags_code=tags_hash_code(RECALL_MESSAGE_TAG),
            born_timestamp=now,
            born_host=pack_born_host(ctx),
            store_host=c.store_host,
        )
