"""POP (RocketMQ 5.x) in strings and bytes: what a popped message carries, what the revive
topic holds, and how the names are built.

Owns, with Java 5.3.3's names: ``PopAckConstants`` and ``KeyBuilder`` (the revive topic and its
tags, pop retry topics, the polling key), ``ConsumeInitMode``, ``ExtraInfoUtil`` (a popped
message's extra-info string, and the ``startOffsetInfo``/``msgOffsetInfo``/``orderCountInfo``
of a POP response), the proxy's ``ReceiptHandle``, the revive topic's JSON (``PopCheckPoint``,
``AckMsg``, ``BatchAckMsg``) and ``consumerOrderInfo.json`` (``OrderInfo``), byte for byte as
fastjson writes them (``tests/protocol/data/java/pop/``).
Imports: stdlib and ``.bodies``/``.errors``/``.topics``.

Strategy:
    The strings are parsed as Java does: ``String.split`` (trailing empty parts dropped), then
    ``Long.parseLong``/``Integer.parseInt`` on each number (an optional sign and ASCII digits,
    in range). They come from clients, so anything else raises ``ExtraInfoError``, a
    ``RemoteProtocolError`` answered SYSTEM_ERROR with the reason (Java: the exception's text).
    The JSON classes use the body codec (``bodies.RemotingSerializable``): unknown keys ignored,
    Java's alternate names read, bad values raise ``BodyError``.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

from .bodies import JavaTable, RemotingSerializable
from .codes import ResponseCode
from .errors import RemoteProtocolError
from .headers import PopMessageRequestHeader, PopMessageResponseHeader
from .message import MessageExt
from .message_const import KEY_SEPARATOR, MessageConst
from .topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = [
    "ACK_TAG",
    "ACK_TIME_INTERVAL",
    "BATCH_ACK_TAG",
    "CK_TAG",
    "POP_ORDER_REVIVE_QUEUE",
    "RETRY_QUEUE_NUM",
    "REVIVE_GROUP",
    "REVIVE_TOPIC_PREFIX",
    "AckMsg",
    "BatchAckMsg",
    "ConsumeInitMode",
    "ConsumerOrderInfoWrapper",
    "ExtraInfo",
    "ExtraInfoError",
    "OrderInfo",
    "PopCheckPoint",
    "ReceiptHandle",
    "TopicMark",
    "ack_unique_id",
    "batch_ack_unique_id",
    "build_cluster_revive_topic",
    "build_polling_key",
    "build_pop_retry_topic",
    "build_pop_retry_topic_v1",
    "build_pop_retry_topic_v2",
    "ck_unique_id",
    "is_pop_retry_topic_v2",
    "is_revive_topic",
    "msg_offset_info_item",
    "order_count_item",
    "parse_group",
    "parse_msg_offset_info",
    "parse_normal_topic",
    "parse_order_count_info",
    "parse_start_offset_info",
    "queue_offset_map_key",
    "queue_offset_order_count_item",
    "real_topic",
    "start_offset_info_item",
    "start_offset_map_key",
    "topic_mark",
    "with_pop_check_points",
]

_log = logging.getLogger(__name__)

# -- PopAckConstants / KeyBuilder -----------------------------------------------------------

ACK_TIME_INTERVAL: Final = 1000  # ms: a check point is delivered this long before its revive time
SECOND: Final = 1000
RETRY_QUEUE_NUM: Final = 1  # queues of a pop retry topic made by the broker
REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"  # whose offsets record how far revive got
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
BATCH_ACK_TAG: Final = "bAck"
SPLIT: Final = "@"
POP_ORDER_REVIVE_QUEUE: Final = 999  # the revive queue id of an orderly pop (no check point)
_SEPARATOR: Final = " "  # MessageConst.KEY_SEPARATOR


def build_cluster_revive_topic(cluster_name: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>``: where a cluster's brokers keep check points and acks."""
    return REVIVE_TOPIC_PREFIX + cluster_name


def is_revive_topic(topic: str) -> bool:
    return topic.startswith(REVIVE_TOPIC_PREFIX)


def build_pop_retry_topic_v1(topic: str, group: str) -> str:
    """``%RETRY%group_topic``: where revived messages of ``topic`` wait for ``group``."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def build_pop_retry_topic_v2(topic: str, group: str) -> str:
    """``%RETRY%group+topic`` (``enableRetryTopicV2``): the group and topic can be told apart."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"


def build_pop_retry_topic(topic: str, group: str, enable_retry_v2: bool = False) -> str:
    return (build_pop_retry_topic_v2 if enable_retry_v2 else build_pop_retry_topic_v1)(topic, group)


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def parse_normal_topic(topic: str, group: str | None = None) -> str:
    """The topic a pop retry topic serves (Java's two ``KeyBuilder.parseNormalTopic``): with
    ``group``, either form is cut after ``%RETRY%group``; without, only a v2 name is split."""
    if group is None:
        if is_pop_retry_topic_v2(topic):
            parts = topic.split("+")
            if len(parts) == 2:
                return parts[1]
        return topic
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    v2 = f"{RETRY_GROUP_TOPIC_PREFIX}{group}+"
    if topic.startswith(v2):
        return topic[len(v2) :]
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) + len(group) + 1 :]


def parse_group(retry_topic: str) -> str:
    """The group of a pop retry topic (Java ``KeyBuilder.parseGroup``; a v1 name keeps the topic)."""
    if is_pop_retry_topic_v2(retry_topic):
        parts = retry_topic.split("+")
        if len(parts) == 2:
            return parts[0][len(RETRY_GROUP_TOPIC_PREFIX) :]
    return retry_topic[len(RETRY_GROUP_TOPIC_PREFIX) :]


def build_polling_key(topic: str, group: str, queue_id: int) -> str:
    """``topic@group@queueId``: the key of held pops, queue locks and the offsets in flight."""
    return f"{topic}{SPLIT}{group}{SPLIT}{queue_id}"


class ConsumeInitMode(enum.IntEnum):
    """Where a group that never consumed a queue starts popping (``initMode``)."""

    MIN = 0
    MAX = 1


class TopicMark(enum.StrEnum):
    """The topic kind written into extra info ("retry" field): ``ExtraInfoUtil.getRetry``."""

    NORMAL = "0"
    RETRY_V1 = "1"
    RETRY_V2 = "2"


def topic_mark(topic: str) -> TopicMark:
    """Java ``ExtraInfoUtil.getRetry(topic)``."""
    if is_pop_retry_topic_v2(topic):
        return TopicMark.RETRY_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return TopicMark.RETRY_V1
    return TopicMark.NORMAL


def real_topic(topic: str, group: str, mark: str) -> str:
    """The topic a message was popped from: ``topic`` itself, or ``group``'s retry topic of it.

    Raises:
        ExtraInfoError: ``mark`` is not "0", "1" or "2" (Java ``getRealTopic(topic, cid, retry)``).
    """
    if mark == TopicMark.NORMAL:
        return topic
    if mark == TopicMark.RETRY_V1:
        return build_pop_retry_topic_v1(topic, group)
    if mark == TopicMark.RETRY_V2:
        return build_pop_retry_topic_v2(topic, group)
    raise ExtraInfoError(f"retry mark {mark!r} is not 0, 1 or 2")


# -- parsing as Java does --------------------------------------------------------------------


class ExtraInfoError(RemoteProtocolError):
    """An extra-info string, receipt handle or offset info that does not parse."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, ResponseCode.SYSTEM_ERROR)


_JAVA_NUMBER = re.compile(r"[+-]?[0-9]+")  # ASCII digits: Python's \d and int() take more
_LONG = (-(2**63), 2**63 - 1)
_INT = (-(2**31), 2**31 - 1)


def _java_split(text: str, separator: str) -> list[str]:
    """Java ``String.split`` on a one-character literal: trailing empty strings dropped."""
    parts = text.split(separator)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _number(text: str, what: str, bounds: tuple[int, int] = _LONG) -> int:
    if not _JAVA_NUMBER.fullmatch(text):
        raise ExtraInfoError(f"{what}: {text!r} is not a number")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise ExtraInfoError(f"{what}: {text!r} is out of range")
    return value


# -- ExtraInfoUtil ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A popped message's check-point info (its ``POP_CK`` property; ACK_MESSAGE's and
    CHANGE_MESSAGE_INVISIBLETIME's ``extraInfo``)::

        ckQueueOffset popTime invisibleTime reviveQid retry brokerName [queueId [queueOffset]]

    ``ck_queue_offset`` is the start offset of the check point, ``retry`` the ``TopicMark`` of
    the queue it was popped from. A receipt handle (``ReceiptHandle``) is one with a ninth part.
    """

    ck_queue_offset: int
    pop_time: int  # ms epoch
    invisible_time: int  # ms
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int | None = None
    queue_offset: int | None = None

    @classmethod
    def parse(cls, text: str) -> ExtraInfo:
        """Read ``text``; it needs the first six parts (what ack and change-invisible read).

        Raises:
            ExtraInfoError: fewer parts, or a number that does not parse.
        """
        if not isinstance(text, str):
            raise ExtraInfoError(f"extraInfo must be a string, got {type(text).__name__}")
        parts = _java_split(text, _SEPARATOR)
        if len(parts) < 6:
            raise ExtraInfoError(f"extraInfo {text!r} has {len(parts)} parts, at least 6 needed")
        return cls(
            ck_queue_offset=_number(parts[0], "extraInfo ckQueueOffset"),
            pop_time=_number(parts[1], "extraInfo popTime"),
            invisible_time=_number(parts[2], "extraInfo invisibleTime"),
            revive_qid=_number(parts[3], "extraInfo reviveQid", _INT),
            retry=parts[4],
            broker_name=parts[5],
            queue_id=_number(parts[6], "extraInfo queueId", _INT) if len(parts) > 6 else None,
            queue_offset=_number(parts[7], "extraInfo queueOffset") if len(parts) > 7 else None,
        )

    @classmethod
    def build(
        cls,
        ck_queue_offset: int,
        pop_time: int,
        invisible_time: int,
        revive_qid: int,
        topic: str,
        broker_name: str,
        queue_id: int,
        queue_offset: int | None = None,
    ) -> ExtraInfo:
        """Java ``ExtraInfoUtil.buildExtraInfo``: ``topic`` is the topic popped (its mark is kept)."""
        return cls(
            ck_queue_offset,
            pop_time,
            invisible_time,
            revive_qid,
            topic_mark(topic),
            broker_name,
            queue_id,
            queue_offset,
        )

    def encode(self) -> str:
        parts = [
            str(self.ck_queue_offset),
            str(self.pop_time),
            str(self.invisible_time),
            str(self.revive_qid),
            self.retry,
            self.broker_name,
        ]
        if self.queue_id is not None:
            parts.append(str(self.queue_id))
            if self.queue_offset is not None:
                parts.append(str(self.queue_offset))
        return _SEPARATOR.join(parts)

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def real_topic(self, topic: str, group: str) -> str:
        """The queue's topic (Java ``getRealTopic(extraInfo, topic, cid)``: an unknown mark is
        the topic itself)."""
        if self.retry in (TopicMark.RETRY_V1, TopicMark.RETRY_V2):
            return real_topic(topic, group, self.retry)
        return topic


def _info_items(text: str | None, what: str) -> list[tuple[str, str, str]] | None:
    if text is None or not text:
        return None
    items = []
    for one in _java_split(text, ";"):
        parts = _java_split(one, _SEPARATOR)
        if len(parts) != 3:
            raise ExtraInfoError(f"parse {what} error, {text!r}")
        items.append((parts[0], parts[1], parts[2]))
    return items


def _unique(table: dict[str, typing.Any], key: str, text: str, what: str) -> None:
    if key in table:
        raise ExtraInfoError(f"parse {what} error, duplicate, {text!r}")


def start_offset_map_key(topic: str, queue_id: int) -> str:
    """``mark@queueId``: the key of ``parse_start_offset_info``/``parse_msg_offset_info``."""
    return f"{topic_mark(topic)}{SPLIT}{queue_id}"


def queue_offset_map_key(topic: str, queue_id: int, queue_offset: int) -> str:
    """``mark@qo<queueId>%<offset>``: a per-message key of ``parse_order_count_info``."""
    return f"{topic_mark(topic)}{SPLIT}qo{queue_id}%{queue_offset}"


def start_offset_info_item(topic: str, queue_id: int, start_offset: int) -> str:
    """One queue's part of ``startOffsetInfo`` (items are joined with ``;``)."""
    return f"{topic_mark(topic)} {queue_id} {start_offset}"


def msg_offset_info_item(topic: str, queue_id: int, offsets: Sequence[int]) -> str:
    """One queue's part of ``msgOffsetInfo``: the queue offsets of the messages popped."""
    return f"{topic_mark(topic)} {queue_id} {','.join(map(str, offsets))}"


def order_count_item(topic: str, queue_id: int, count: int) -> str:
    """``buildQueueIdOrderCountInfo``: the least consume count of a queue's messages."""
    return f"{topic_mark(topic)} {queue_id} {count}"


def queue_offset_order_count_item(topic: str, queue_id: int, queue_offset: int, count: int) -> str:
    """``buildQueueOffsetOrderCountInfo``: how often one message was consumed already."""
    return f"{topic_mark(topic)} qo{queue_id}%{queue_offset} {count}"


def parse_start_offset_info(text: str | None) -> dict[str, int] | None:
    """``{"mark@queueId": startOffset}``; None for no text.

    Raises:
        ExtraInfoError: an item is not three parts, a key repeats, or a number does not parse.
    """
    items = _info_items(text, "startOffsetInfo")
    if items is None:
        return None
    table: dict[str, int] = {}
    for mark, queue, start in items:
        key = f"{mark}{SPLIT}{queue}"
        _unique(table, key, text or "", "startOffsetInfo")
        table[key] = _number(start, "startOffsetInfo")
    return table


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]] | None:
    """``{"mark@queueId": [queue offsets]}``; None for no text. Raises ``ExtraInfoError``."""
    items = _info_items(text, "msgOffsetInfo")
    if items is None:
        return None
    table: dict[str, list[int]] = {}
    for mark, queue, offsets in items:
        key = f"{mark}{SPLIT}{queue}"
        _unique(table, key, text or "", "msgOffsetInfo")
        table[key] = [_number(o, "msgOffsetInfo") for o in offsets.split(",")]
    return table


def parse_order_count_info(text: str | None) -> dict[str, int] | None:
    """``{"mark@queueId" or "mark@qo<queueId>%<offset>": count}``; None for no text.
    Raises ``ExtraInfoError``."""
    items = _info_items(text, "orderCountInfo")
    if items is None:
        return None
    table: dict[str, int] = {}
    for mark, queue, count in items:
        key = f"{mark}{SPLIT}{queue}"
        _unique(table, key, text or "", "orderCountInfo")
        table[key] = _number(count, "orderCountInfo", _INT)
    return table


# -- the proxy's receipt handle --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """Java ``common/consumer/ReceiptHandle``: the extra info of a popped message with its
    commit-log offset appended (the 5.x proxy hands it to gRPC clients)::

        startOffset retrieveTime invisibleTime reviveQueueId topicType brokerName queueId offset
        [commitLogOffset]
    """

    start_offset: int
    retrieve_time: int  # ms epoch (the pop time)
    invisible_time: int  # ms
    revive_queue_id: int
    topic_type: str  # TopicMark
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int = -1

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Raises ``ExtraInfoError`` for fewer than eight parts or a bad number."""
        if not isinstance(text, str):
            raise ExtraInfoError(f"receipt handle must be a string, got {type(text).__name__}")
        parts = _java_split(text, _SEPARATOR)
        if len(parts) < 8:
            raise ExtraInfoError(f"Parse failed, dataList size {len(parts)}")
        return cls(
            start_offset=_number(parts[0], "receipt handle startOffset"),
            retrieve_time=_number(parts[1], "receipt handle retrieveTime"),
            invisible_time=_number(parts[2], "receipt handle invisibleTime"),
            revive_queue_id=_number(parts[3], "receipt handle reviveQueueId", _INT),
            topic_type=parts[4],
            broker_name=parts[5],
            queue_id=_number(parts[6], "receipt handle queueId", _INT),
            offset=_number(parts[7], "receipt handle offset"),
            commit_log_offset=_number(parts[8], "receipt handle commitLogOffset") if len(parts) > 8 else -1,
        )

    def encode(self) -> str:
        return _SEPARATOR.join(
            map(
                str,
                (
                    self.start_offset,
                    self.retrieve_time,
                    self.invisible_time,
                    self.revive_queue_id,
                    self.topic_type,
                    self.broker_name,
                    self.queue_id,
                    self.offset,
                    self.commit_log_offset,
                ),
            )
        )

    @property
    def next_visible_time(self) -> int:
        return self.retrieve_time + self.invisible_time

    def is_expired(self, now_ms: int) -> bool:
        return self.next_visible_time <= now_ms

    @property
    def is_retry_topic(self) -> bool:
        return self.topic_type in (TopicMark.RETRY_V1, TopicMark.RETRY_V2)

    def real_topic(self, topic: str, group: str) -> str:
        if self.topic_type in (TopicMark.RETRY_V1, TopicMark.RETRY_V2):
            return real_topic(topic, group, self.topic_type)
        return topic


# -- the revive topic's JSON (Java store/pop/*) ----------------------------------------------


def _name(key: str, alternate: str | None = None) -> dict[str, object]:
    """Field metadata for Java ``@JSONField(name=key[, alternateNames={alternate}])``."""
    return {"key": key, "aliases": (alternate,) if alternate else ()}


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@dataclass(frozen=True, slots=True, kw_only=True)
class PopCheckPoint(RemotingSerializable):
    """A check point (tag ``ck``): ``num`` messages of one queue popped at ``pop_time`` for
    ``invisible_time`` ms, at ``start_offset + queue_offset_diff[i]``; bit ``i`` of ``bit_map``
    set once message ``i`` is acked. ``revive_offset`` is its own offset in the revive queue
    (set when read back). fastjson also writes ``reviveTime`` (a getter), never read."""

    start_offset: int = field(default=0, metadata=_name("so"))
    pop_time: int = field(default=0, metadata=_name("pt"))
    invisible_time: int = field(default=0, metadata=_name("it"))
    bit_map: int = field(default=0, metadata=_name("bm"))
    num: int = field(default=0, metadata=_name("n"))
    queue_id: int = field(default=0, metadata=_name("q"))
    topic: str | None = field(default=None, metadata=_name("t"))
    cid: str | None = field(default=None, metadata=_name("c"))
    revive_offset: int = field(default=0, metadata=_name("ro"))
    queue_offset_diff: tuple[int, ...] | None = field(default=None, metadata=_name("d"))
    broker_name: str | None = field(default=None, metadata=_name("bn"))
    re_put_times: str | None = field(default=None, metadata=_name("rp"))

    json_computed: ClassVar[tuple[tuple[str, str], ...]] = (("reviveTime", "revive_time"),)

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def index_of_ack(self, ack_offset: int) -> int:
        """Which message ``ack_offset`` is, or -1 (Java ``indexOfAck``)."""
        if ack_offset < self.start_offset:
            return -1
        diffs = self.queue_offset_diff
        if not diffs:  # a check point of the old form: consecutive offsets
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        try:
            return diffs.index(_int32(ack_offset - self.start_offset))
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        """The queue offset of message ``index`` (Java ``ackOffsetByIndex``)."""
        diffs = self.queue_offset_diff
        if not diffs:
            return self.start_offset + index
        return self.start_offset + diffs[index]

    def queue_offsets(self) -> list[int]:
        """The queue offsets of the ``num`` messages."""
        return [self.ack_offset_by_index(i) for i in range(self.num)]

    def is_acked(self, index: int) -> bool:
        return bool(self.bit_map >> index & 1)

    def parse_re_put_times(self) -> int:
        """How often revive wrote this check point again (Java: 127 when unreadable)."""
        if self.re_put_times is None:
            return 0
        try:
            return _number(self.re_put_times, "rePutTimes", _INT)
        except ExtraInfoError:
            return 127


@dataclass(frozen=True, slots=True, kw_only=True)
class AckMsg(RemotingSerializable):
    """An ack (tag ``ack``): message ``ack_offset`` of the check point ``(topic, consumer_group,
    queue_id, start_offset, pop_time, broker_name)``."""

    ack_offset: int = field(default=0, metadata=_name("ao", "ackOffset"))
    start_offset: int = field(default=0, metadata=_name("so", "startOffset"))
    consumer_group: str | None = field(default=None, metadata=_name("c", "consumerGroup"))
    topic: str | None = field(default=None, metadata=_name("t", "topic"))
    queue_id: int = field(default=0, metadata=_name("q", "queueId"))
    pop_time: int = field(default=0, metadata=_name("pt", "popTime"))
    broker_name: str | None = field(default=None, metadata=_name("bn", "brokerName"))

    def offsets(self) -> tuple[int, ...]:
        """The queue offsets acked."""
        return (self.ack_offset,)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchAckMsg(AckMsg):
    """Several acks of one check point (tag ``bAck``); ``ack_offset`` is unused (0 or -1)."""

    ack_offset_list: tuple[int, ...] = field(default=(), metadata=_name("aol", "ackOffsetList"))

    def offsets(self) -> tuple[int, ...]:
        return self.ack_offset_list


def ck_unique_id(ck: PopCheckPoint) -> str:
    """The UNIQ_KEY of a check point's message (Java ``genCkUniqueId``)."""
    return SPLIT.join(
        map(_java_str, (ck.topic, ck.queue_id, ck.start_offset, ck.cid, ck.pop_time, ck.broker_name, CK_TAG))
    )


def ack_unique_id(ack: AckMsg) -> str:
    """The UNIQ_KEY of an ack's message (Java ``genAckUniqueId``)."""
    fields = (ack.topic, ack.queue_id, ack.ack_offset, ack.consumer_group, ack.pop_time, ack.broker_name)
    return SPLIT.join(map(_java_str, (*fields, ACK_TAG)))


def batch_ack_unique_id(ack: BatchAckMsg) -> str:
    """The UNIQ_KEY of a batch ack's message (Java ``genBatchAckUniqueId``)."""
    offsets = "[" + ", ".join(map(str, ack.ack_offset_list)) + "]"  # Java List.toString
    fields = (ack.topic, ack.queue_id, offsets, ack.consumer_group, ack.pop_time)
    return SPLIT.join(map(_java_str, (*fields, BATCH_ACK_TAG)))


def _java_str(value: object) -> str:
    return "null" if value is None else str(value)


# -- consumerOrderInfo.json (Java broker/offset/ConsumerOrderInfoManager) -----------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderInfo(RemotingSerializable):
    """What an orderly pop handed out of one queue: ``offset_list[0]`` is the first queue
    offset, ``offset_list[i]`` (i > 0) the distance of message ``i`` from it; bit ``i`` of
    ``commit_offset_bit`` set once it is acked."""

    pop_time: int = 0
    invisible_time: int | None = field(default=None, metadata=_name("i"))
    offset_list: tuple[int, ...] | None = field(default=None, metadata=_name("o"))
    offset_next_visible_time: dict[int, int] | None = field(default=None, metadata=_name("ot"))
    offset_consumed_count: dict[int, int] | None = field(default=None, metadata=_name("oc"))
    last_consume_timestamp: int = field(default=0, metadata=_name("l"))
    commit_offset_bit: int = field(default=0, metadata=_name("cm"))
    attempt_id: str | None = field(default=None, metadata=_name("a"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOrderInfoWrapper(RemotingSerializable):
    """``config/consumerOrderInfo.json``: ``{"topic@group": {queueId: OrderInfo}}`` (Java's
    ``ConcurrentHashMap``s of 128 and 16: their key order)."""

    table: typing.Annotated[
        dict[str, typing.Annotated[dict[int, OrderInfo], JavaTable(32)]], JavaTable(256)
    ] = field(default_factory=dict)


# -- a popped message's check point (MQClientAPIImpl#processPopResponse) ----------------------


def with_pop_check_points(
    broker_name: str,
    request: PopMessageRequestHeader,
    answer: PopMessageResponseHeader,
    msgs: list[MessageExt],
) -> list[MessageExt]:
    """The messages of a FOUND POP_MESSAGE answer as Java's ``processPopResponse`` leaves them
    (the client's ``MQClientAPIImpl``, and the 5.x proxy's ``ConsumerProcessor#popMessage``): each
    gets its ``POP_CK`` (its check point's start offset from ``startOffsetInfo``, its own queue
    offset from ``msgOffsetInfo``; pre-``startOffsetInfo`` brokers: one check point per queue),
    its ``1ST_POP_TIME``, the consume count of an orderly pop (``orderCountInfo``) as
    ``reconsume_times``, and ``request.topic`` as its topic. The messages' property dicts are
    updated in place (they must be the decoder's own); new ``MessageExt`` values are returned.

    Raises ``ExtraInfoError`` when the answer holds no check point for a message.
    """
    start_offsets = parse_start_offset_info(answer.start_offset_info)
    msg_offsets = parse_msg_offset_info(answer.msg_offset_info)
    order_counts = parse_order_count_info(answer.order_count_info)
    sorted_offsets = _queue_offset_sorted_map(msgs)
    first_pop_time = str(answer.pop_time)
    by_queue: dict[str, str] = {}  # the old form (no startOffsetInfo): one check point per queue
    out = []
    for msg in msgs:
        props = msg.properties
        assert isinstance(props, dict)  # the decoder made it for us alone
        reconsume_times = msg.reconsume_times
        if start_offsets is None:
            key = f"{msg.topic}{msg.queue_id}"
            if key not in by_queue:
                by_queue[key] = ExtraInfo.build(
                    msg.queue_offset, answer.pop_time, answer.invisible_time, answer.revive_qid,
                    msg.topic, broker_name, msg.queue_id,
                ).encode()  # fmt: skip
            props[MessageConst.PROPERTY_POP_CK] = f"{by_queue[key]}{KEY_SEPARATOR}{msg.queue_offset}"
        elif MessageConst.PROPERTY_POP_CK not in props:
            queue_key = start_offset_map_key(msg.topic, msg.queue_id)
            offset_key = queue_offset_map_key(msg.topic, msg.queue_id, msg.queue_offset)
            start = start_offsets.get(queue_key)
            offsets = (msg_offsets or {}).get(queue_key)
            index = sorted_offsets.get(queue_key, []).index(msg.queue_offset)
            if start is None or offsets is None or index >= len(offsets):
                raise ExtraInfoError(
                    f"no check point for {msg.topic}:{msg.queue_id} offset {msg.queue_offset} in "
                    f"startOffsetInfo={answer.start_offset_info!r} msgOffsetInfo={answer.msg_offset_info!r}"
                )
            queue_offset = offsets[index]
            if queue_offset != msg.queue_offset:
                _log.warning(
                    "Queue offset[%d] of msg is strange, not equal to the stored in msg, %s",
                    queue_offset,
                    msg.client_msg_id,
                )
            props[MessageConst.PROPERTY_POP_CK] = ExtraInfo.build(
                start, answer.pop_time, answer.invisible_time, answer.revive_qid,
                msg.topic, broker_name, msg.queue_id, queue_offset,
            ).encode()  # fmt: skip
            if request.order and order_counts is not None:
                count = order_counts.get(offset_key, order_counts.get(queue_key))
                if count is not None and count > 0:
                    reconsume_times = count
        props.setdefault(MessageConst.PROPERTY_FIRST_POP_TIME, first_pop_time)
        out.append(dataclasses.replace(msg, topic=request.topic, reconsume_times=reconsume_times))
    return out


def _queue_offset_sorted_map(msgs: list[MessageExt]) -> dict[str, list[int]]:
    """Java ``buildQueueOffsetSortedMap``: each queue's popped offsets (``mark@queueId``), in
    the order the broker sent them (its check point's order)."""
    table: dict[str, list[int]] = {}
    for msg in msgs:
        ck = msg.properties.get(MessageConst.PROPERTY_POP_CK)
        mark = ExtraInfo.parse(ck).retry if ck is not None else topic_mark(msg.topic)
        table.setdefault(f"{mark}@{msg.queue_id}", []).append(msg.queue_offset)
    return table
