"""5.x timer messages at the broker: what Java's ``HookUtils.handleScheduleMessage`` does to a
message before it is stored, the recall handle a send is answered with, and how the timer's
deliveries reach the broker's statistics.

Strategy:
    A message with TIMER_DELIVER_MS, TIMER_DELAY_SEC or TIMER_DELAY_MS (checked in that order:
    DELAY_SEC, DELAY_MS, DELIVER_MS) whose time is in the future goes to ``rmq_sys_wheel_timer``
    queue 0, its real topic and queue in REAL_TOPIC/REAL_QID and its time floored to
    ``timerPrecisionMs`` (one precision earlier when it is a multiple of it) in TIMER_OUT_MS; the
    store's ``TimerMessageStore`` delivers it. A delay level wins over the timer properties,
    which are then removed (Java). Refusals are store statuses (WHEEL_TIMER_*), answered as
    Java answers them (``put_status_response``). The send path calls ``handle_schedule_message``
    only for messages that carry one of the properties or a delay level.
"""

from __future__ import annotations

import collections
import math
import re
import struct
import time
from collections.abc import MutableMapping
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.msg_id import UniqueKeyGenerator
from finchmq.protocol.recall import RecallMessageHandle
from finchmq.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC
from finchmq.store import (
    DefaultMessageStore,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
)

if TYPE_CHECKING:
    from finchmq.store.timer import TimerMessageStore

    from .schedule import ScheduleMessageService
    from .stats import BrokerStats

__all__ = [
    "TIMER_PROPERTIES",
    "TimerDeliveries",
    "attach_recall_handle",
    "check_if_timer_message",
    "handle_schedule_message",
    "java_float",
    "parse_java_long",
    "timer_runtime_info",
    "timer_status_response",
]

_DELIVER_MS: Final = MessageConst.PROPERTY_TIMER_DELIVER_MS
_DELAY_SEC: Final = MessageConst.PROPERTY_TIMER_DELAY_SEC
_DELAY_MS: Final = MessageConst.PROPERTY_TIMER_DELAY_MS
TIMER_PROPERTIES: Final = (_DELIVER_MS, _DELAY_SEC, _DELAY_MS)
_JAVA_LONG: Final = re.compile(r"[+-]?[0-9]+")
_LONG_MAX: Final = 2**63 - 1
_ids = UniqueKeyGenerator()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_java_long(text: str) -> int:
    """Java ``Long.parseLong``: ``ValueError`` for anything else."""
    if not _JAVA_LONG.fullmatch(text):
        raise ValueError(text)
    value = int(text)
    if not -(2**63) <= value <= _LONG_MAX:
        raise ValueError(text)
    return value


def _delay_level(properties: MutableMapping[str, str]) -> int:
    try:
        return int(properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL) or 0)
    except ValueError:
        return 0


def check_if_timer_message(topic: str, properties: MutableMapping[str, str]) -> bool:
    """Java ``HookUtils.checkIfTimerMessage``: whether the message waits in the timer. A
    message with a delay level does not, and loses its timer properties."""
    if _delay_level(properties) > 0:
        for name in TIMER_PROPERTIES:
            properties.pop(name, None)
        return False
    if topic == TIMER_TOPIC or MessageConst.PROPERTY_TIMER_OUT_MS in properties:
        return False
    return _DELIVER_MS in properties or _DELAY_MS in properties or _DELAY_SEC in properties


def _transform_timer_message(
    timer: TimerMessageStore, topic: str, queue_id: int, properties: MutableMapping[str, str]
) -> tuple[PutMessageStatus | None, str, int]:
    """Java ``HookUtils.transformTimerMessage``."""
    config = timer.store.config
    now = _now_ms()
    try:
        if _DELAY_SEC in properties:
            deliver_ms = now + parse_java_long(properties[_DELAY_SEC]) * 1000
        elif _DELAY_MS in properties:
            deliver_ms = now + parse_java_long(properties[_DELAY_MS])
        else:
            deliver_ms = parse_java_long(properties[_DELIVER_MS])
    except ValueError:
        return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, topic, queue_id
    if deliver_ms <= now:
        if MessageConst.PROPERTY_TIMER_DEL_UNIQKEY in properties:
            return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, topic, queue_id
        return None, topic, queue_id  # due already: stored as it is, delivered at once
    if deliver_ms - now > config.timer_max_delay_sec * 1000:
        return PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, topic, queue_id
    precision = config.timer_precision_ms
    if deliver_ms % precision == 0:
        deliver_ms -= precision
    else:
        deliver_ms = deliver_ms // precision * precision
    if timer.is_reject(deliver_ms):
        return PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL, topic, queue_id
    properties[MessageConst.PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
    properties[MessageConst.PROPERTY_REAL_TOPIC] = topic
    properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    # Java 5.x's broker gives every sent message a UNIQ_KEY; a timer message needs one (recall)
    if not properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
        properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = _ids.create_uniq_id()
    return None, TIMER_TOPIC, 0


def handle_schedule_message(
    timer: TimerMessageStore | None,
    timer_wheel_enable: bool,
    schedule: ScheduleMessageService,
    topic: str,
    queue_id: int,
    properties: MutableMapping[str, str],
    sys_flag: int,
) -> tuple[PutMessageStatus | None, str, int]:
    """Java ``HookUtils.handleScheduleMessage``: where a message to store goes (the timer topic,
    the schedule topic or its own), or the status it is refused with; ``properties`` is changed
    in place. A prepared or rolled-back transaction message is left alone."""
    transaction = MessageSysFlag.get_transaction_value(sys_flag)
    if transaction not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None, topic, queue_id
    if topic != TIMER_TOPIC and check_if_timer_message(topic, properties):
        if not timer_wheel_enable or timer is None:
            return PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, topic, queue_id
        status, topic, queue_id = _transform_timer_message(timer, topic, queue_id, properties)
        if status is not None:
            return status, topic, queue_id
    if _delay_level(properties) > 0:
        topic, queue_id = schedule.maybe_delay(topic, queue_id, properties)
    return None, topic, queue_id


def timer_status_response(status: PutMessageStatus, config: MessageStoreConfig) -> tuple[ResponseCode, str]:
    """Java 5.x ``handlePutMessageResult``'s answers to the timer's refusals (also
    EndTransactionProcessor's)."""
    if status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL:
        return ResponseCode.MESSAGE_ILLEGAL, (
            "timer message illegal, the delay time should not be bigger than the max delay "
            f"{config.timer_max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger "
            "than the current time"
        )
    if status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL:
        limit = config.timer_congest_num_each_slot
        return ResponseCode.SYSTEM_ERROR, (
            f"timer message is under flow control, max num limit is {limit * 2} or the current value is "
            f"greater than {limit} and less than {limit * 2}, trigger random flow control"
        )
    enabled = "true" if config.timer_wheel_enable else "false"
    return ResponseCode.SYSTEM_ERROR, f"accurate timer message is not enabled, timerWheelEnable is {enabled}"


def attach_recall_handle(properties: MutableMapping[str, str], broker_name: str) -> str | None:
    """Java ``SendMessageProcessor.attachRecallHandle``: the handle a timer message's send is
    answered with (not for batches nor send-backs: the caller does not ask), or None."""
    timestamp = properties.get(MessageConst.PROPERTY_TIMER_OUT_MS)
    real_topic = properties.get(MessageConst.PROPERTY_REAL_TOPIC)
    if timestamp is None or real_topic is None or real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    return RecallMessageHandle(
        topic=real_topic,
        broker_name=broker_name,
        timestamp_str=str(int(timestamp) + 1),  # "consider of floor"
        message_id=properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "null"),
    ).encode()


class TimerDeliveries:
    """The timer's put (Java's escape bridge): stores a due message from a timer thread and
    keeps (topic, size) of what it stored for the loop's statistics (``BrokerStats`` is the
    loop's alone), which ``drain_into`` adds every second."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self._store = store
        self._stored: collections.deque[tuple[str, int]] = collections.deque()

    def put(self, inner: MessageExtBrokerInner) -> PutMessageResult:
        result = self._store.put_message(inner)
        if result.status is PutMessageStatus.PUT_OK:
            self._stored.append((inner.topic, len(inner.body)))
        return result

    def drain_into(self, stats: BrokerStats) -> None:
        stored = self._stored
        while stored:
            topic, size = stored.popleft()
            stats.record_put(topic, 1, size)


def java_float(value: float) -> str:
    """Java ``String.valueOf(float)``: the shortest digits that read back as the same float32,
    plain from 1e-3 to 1e7 (at least one decimal), else ``d.dddE±n``."""
    f32 = struct.unpack(">f", struct.pack(">f", value))[0]
    if f32 == 0 or not math.isfinite(f32):
        return "0.0" if f32 == 0 else ("NaN" if math.isnan(f32) else ("Infinity" if f32 > 0 else "-Infinity"))
    for digits in range(1, 10):
        text = f"{f32:.{digits}g}"
        if struct.unpack(">f", struct.pack(">f", float(text)))[0] == f32:
            break
    number = Decimal(text)
    if 1e-3 <= abs(f32) < 1e7:
        plain = format(number, "f")
        return plain if "." in plain else plain + ".0"
    sign, digit_tuple, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    scientific = len(digit_tuple) + exponent - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{scientific}"


def timer_runtime_info(timer: TimerMessageStore | None) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's timer keys (Java 5.x ``prepareRuntimeInfo``; zeros without a
    timer, as Java with timerWheelEnable=false)."""
    if timer is None:
        return {
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
        }
    return {
        "timerReadBehind": str(timer.get_dequeue_behind()),
        "timerOffsetBehind": str(timer.get_enqueue_behind_messages()),
        "timerCongestNum": str(timer.get_all_congest_num()),
        "timerEnqueueTps": java_float(timer.get_enqueue_tps()),
        "timerDequeueTps": java_float(timer.get_dequeue_tps()),
    }
