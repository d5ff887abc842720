"""What sends, pulls and pops return: ``SendResult``/``SendStatus``, ``PullResult``/``PullStatus``
and (5.x) ``PopResult``/``PopStatus`` and ``AckResult``/``AckStatus``.

Owns: these frozen values (Java ``SendResult``, ``PullResult``, ``PopResult``, ``AckResult``).
Imports: ``finchmq.protocol``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from finchmq.protocol.message import MessageExt, MessageQueue

__all__ = [
    "AckResult",
    "AckStatus",
    "PopResult",
    "PopStatus",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
]


class SendStatus(enum.IntEnum):
    """Java ``SendStatus``: anything but ``SEND_OK`` means stored, but not as safely as asked."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class SendResult:
    """The broker's answer to a send.

    ``msg_id`` is the client id (UNIQ_KEY; a batch's ids joined with ``,``), ``offset_msg_id``
    the broker's id (store host + commit-log offset), ``queue_offset`` the message's index in
    ``message_queue`` (the first one of a batch). ``recall_handle`` (a 5.x broker, a timer
    message) withdraws the message before its time: ``Producer.recall_message``.
    """

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True
    recall_handle: str | None = None


_new_object: Final = object.__new__
(
    _set_send_status,
    _set_msg_id,
    _set_offset_msg_id,
    _set_message_queue,
    _set_queue_offset,
    _set_transaction_id,
    _set_region_id,
    _set_trace_on,
    _set_recall_handle,
) = (
    SendResult.__dict__[name].__set__
    for name in (
        "send_status", "msg_id", "offset_msg_id", "message_queue", "queue_offset", "transaction_id",
        "region_id", "trace_on", "recall_handle",
    )
)  # fmt: skip
if len(SendResult.__slots__) != 9:  # pragma: no cover - a field was added but not to new_send_result
    raise RuntimeError(f"new_send_result does not set every field of {SendResult.__slots__}")


def new_send_result(
    send_status: SendStatus,
    msg_id: str,
    offset_msg_id: str,
    message_queue: MessageQueue,
    queue_offset: int,
    transaction_id: str | None,
    region_id: str | None,
    trace_on: bool,
    recall_handle: str | None = None,
) -> SendResult:
    """``SendResult(...)`` for the send path: the slots filled directly, a third of the cost of
    the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field)."""
    result: SendResult = _new_object(SendResult)
    _set_send_status(result, send_status)
    _set_msg_id(result, msg_id)
    _set_offset_msg_id(result, offset_msg_id)
    _set_message_queue(result, message_queue)
    _set_queue_offset(result, queue_offset)
    _set_transaction_id(result, transaction_id)
    _set_region_id(result, region_id)
    _set_trace_on(result, trace_on)
    _set_recall_handle(result, recall_handle)
    return result


class PullStatus(enum.IntEnum):
    """Java ``PullStatus``."""

    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class PullResult:
    """One pull: the messages found (already filtered by tag) and where to continue.

    ``next_begin_offset`` is the offset to pull from next; ``min_offset``/``max_offset`` bound the
    queue on the broker.
    """

    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msg_found_list: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


class PopStatus(enum.IntEnum):
    """Java 5.x ``PopStatus``."""

    FOUND = 0
    NO_NEW_MSG = 1
    POLLING_FULL = 2  # the broker holds as many long-polling pops as it may; try again later
    POLLING_NOT_FOUND = 3  # nothing arrived while the broker held the pop


@dataclass(frozen=True, slots=True, kw_only=True)
class PopResult:
    """One pop (POP_MESSAGE): the messages found, each carrying its check-point info in its
    ``POP_CK`` property (what ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME need), the broker's
    pop time (ms epoch), the invisible time granted (ms) and how many messages are left."""

    pop_status: PopStatus
    msg_found_list: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0


class AckStatus(enum.IntEnum):
    """Java 5.x ``AckStatus``."""

    OK = 0
    NO_EXIST = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AckResult:
    """An ack's or a change of invisible time's outcome; after CHANGE_MESSAGE_INVISIBLETIME,
    ``extra_info`` is the message's new check-point info (its new ``POP_CK``)."""

    status: AckStatus
    extra_info: str | None = None
    pop_time: int = 0
