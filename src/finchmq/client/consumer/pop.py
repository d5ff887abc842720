"""``PopAPIWrapper``: POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME and forwarding to the
dead letter queue for one consumer group (Java 5.x ``PullAPIWrapper.popAsync`` and
``DefaultMQPushConsumerImpl.ackAsync``/``changePopInvisibleTimeAsync``; the proxy's
``ConsumerProcessor``/``ProducerProcessor`` for the dead letter queue). The ``SimpleConsumer`` and
the push consumer's pop mode build on it.

Imports: ``finchmq.protocol`` and the client's modules.

A popped message carries what acking it needs in its ``POP_CK`` property, the receipt handle
(``protocol.ExtraInfo``): the broker, queue, queue offset, the start offset of its check point,
the pop time and invisible time, the revive queue, and whether it came from the group's pop retry
topic. Like the 5.x proxy, an ack or a change of invisible time with a handle whose invisible
time is over is refused here (``InvalidReceiptHandleError``): the broker has made the message
visible again and will deliver it again, so acking the old delivery would only look like success.
The check uses this host's clock against the broker's pop time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from finchmq.client.errors import InvalidReceiptHandleError, MQBrokerError, MQClientError
from finchmq.protocol.bodies import MASTER_ID, SubscriptionData
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import ConsumeInitMode, ExtraInfo, ExtraInfoError

if TYPE_CHECKING:
    from finchmq.client.instance import MQClientInstance
    from finchmq.client.results import PopResult

__all__ = ["POP_TIMEOUT_MARGIN_MS", "PopAPIWrapper", "matches_tags", "receipt_handle"]

log = logging.getLogger(__name__)

POP_TIMEOUT_MARGIN_MS: Final = 10_000  # Java popAsync: "timeout + 10s, fix the too earlier timeout"


def _now_ms() -> int:
    return int(time.time() * 1000)


def matches_tags(subscription: SubscriptionData, msg: MessageExt) -> bool:
    """Does ``msg``'s tag match the subscription? The broker filters by tag hash code only, so
    popped messages are checked again (Java ``processPopResult``, the proxy's ``FilterUtils``)."""
    if not subscription.tags_set or subscription.class_filter_mode:
        return True
    tags = msg.tags
    return tags is not None and tags in subscription.tags_set


def receipt_handle(msg: MessageExt) -> tuple[str, ExtraInfo]:
    """``msg``'s receipt handle (its ``POP_CK``), as text and parsed.

    Raises:
        InvalidReceiptHandleError: ``msg`` was not popped (no ``POP_CK``) or the handle does not
            parse (it needs the queue id and queue offset: eight parts).
    """
    text = msg.properties.get(MessageConst.PROPERTY_POP_CK)
    if text is None:
        raise InvalidReceiptHandleError(
            f"message {msg.client_msg_id} has no receipt handle (property POP_CK): only messages "
            "received by popping (SimpleConsumer.receive, a push consumer in POP mode) can be acked",
            None,
        )
    try:
        extra = ExtraInfo.parse(text)
    except ExtraInfoError as exc:
        raise InvalidReceiptHandleError(
            f"message {msg.client_msg_id}: bad receipt handle: {exc}", text
        ) from exc
    if extra.queue_id is None or extra.queue_offset is None:
        raise InvalidReceiptHandleError(
            f"message {msg.client_msg_id}: receipt handle {text!r} has no queue id and queue offset", text
        )
    return text, extra


class PopAPIWrapper:
    """Pops, acks and changes invisible times for ``consumer_group`` through ``instance``."""

    def __init__(self, instance: MQClientInstance, consumer_group: str) -> None:
        self.instance = instance
        self.consumer_group = consumer_group

    async def _master(self, broker_name: str, topic: str) -> str:
        instance = self.instance
        found = instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
        if found is None:
            await instance.update_topic_route_info_from_name_server(topic)
            found = instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
        if found is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        return found.broker_addr

    async def pop(
        self,
        mq: MessageQueue,
        invisible_time: int,
        max_nums: int,
        poll_time: int,
        init_mode: ConsumeInitMode,
        order: bool,
        expression_type: str | None,
        expression: str | None,
    ) -> PopResult:
        """POP_MESSAGE from ``mq`` (queue id -1: any queue of its broker), held by the broker up
        to ``poll_time`` ms (0: answered at once) and awaited that long plus 10 s (Java
        ``popAsync``).

        Raises:
            MQClientError: the broker is unknown, or refused the pop (``MQBrokerError``).
            MQNetworkError: no answer.
        """
        addr = await self._master(mq.broker_name, mq.topic)
        header = PopMessageRequestHeader(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            max_msg_nums=max_nums,
            invisible_time=invisible_time,
            poll_time=poll_time,
            born_time=_now_ms(),
            init_mode=init_mode,
            exp_type=expression_type,
            exp=expression,
            order=order,
            broker_name=mq.broker_name,
        )
        timeout = (
            poll_time + POP_TIMEOUT_MARGIN_MS if poll_time > 0 else self.instance.config.mq_client_api_timeout
        )
        return await self.instance.api.pop_message(mq.broker_name, addr, header, timeout)

    def _check(self, msg: MessageExt, what: str) -> tuple[str, ExtraInfo]:
        text, extra = receipt_handle(msg)
        now = _now_ms()
        if extra.revive_time <= now:
            raise InvalidReceiptHandleError(
                f"cannot {what} message {msg.client_msg_id} of {self.consumer_group}: its receipt handle "
                f"expired {now - extra.revive_time} ms ago (popped at {extra.pop_time}, invisible for "
                f"{extra.invisible_time} ms); the broker makes it visible again and delivers it again, "
                "so handle that delivery instead",
                text,
            )
        return text, extra

    async def ack(self, msg: MessageExt, timeout_millis: int | None = None) -> None:
        """ACK_MESSAGE for a popped ``msg`` (Java ``ackAsync``): it will not be delivered again.

        Raises:
            InvalidReceiptHandleError: not popped, expired, or the broker no longer has it.
            MQBrokerError: the broker refused the ack, with its code and remark.
            MQNetworkError: no answer.
        """
        text, extra = self._check(msg, "ack")
        assert extra.queue_id is not None and extra.queue_offset is not None  # receipt_handle checked
        addr = await self._master(extra.broker_name, msg.topic)
        header = AckMessageRequestHeader(
            consumer_group=self.consumer_group,
            topic=extra.real_topic(msg.topic, self.consumer_group),
            queue_id=extra.queue_id,
            extra_info=text,
            offset=extra.queue_offset,
            broker_name=extra.broker_name,
        )
        timeout = timeout_millis or self.instance.config.mq_client_api_timeout
        try:
            await self.instance.api.ack_message(addr, header, timeout)
        except MQBrokerError as exc:
            raise _no_message(exc, msg, text, "ack") from exc

    async def change_invisible_time(
        self, msg: MessageExt, invisible_time: int, timeout_millis: int | None = None
    ) -> MessageExt:
        """CHANGE_MESSAGE_INVISIBLETIME: ``msg`` becomes visible again ``invisible_time`` ms from
        now (Java ``changePopInvisibleTimeAsync``). Returns ``msg`` with its new receipt handle:
        the old one no longer acks it.

        Raises:
            InvalidReceiptHandleError: not popped, expired, or the broker no longer has it.
            MQBrokerError: the broker refused it, with its code and remark.
            MQNetworkError: no answer.
        """
        text, extra = self._check(msg, "change the invisible time of")
        assert extra.queue_id is not None and extra.queue_offset is not None
        addr = await self._master(extra.broker_name, msg.topic)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.consumer_group,
            topic=extra.real_topic(msg.topic, self.consumer_group),
            queue_id=extra.queue_id,
            extra_info=text,
            offset=extra.queue_offset,
            invisible_time=invisible_time,
            broker_name=extra.broker_name,
        )
        timeout = timeout_millis or self.instance.config.mq_client_api_timeout
        try:
            result = await self.instance.api.change_invisible_time(extra.broker_name, addr, header, timeout)
        except MQBrokerError as exc:
            raise _no_message(exc, msg, text, "change the invisible time of") from exc
        assert result.extra_info is not None
        return replace(msg, properties={**msg.properties, MessageConst.PROPERTY_POP_CK: result.extra_info})

    async def forward_to_dead_letter_queue(self, msg: MessageExt, max_reconsume_times: int) -> None:
        """Move ``msg`` to ``%DLQ%group`` (CONSUMER_SEND_MSG_BACK, delay level -1, on the broker
        that holds it), then ack it: the 5.x proxy's ``forwardMessageToDeadLetterQueue``.

        Raises:
            MQClientError: either step failed (the message then comes back after its invisible
                time, and is forwarded again).
        """
        _, extra = receipt_handle(msg)
        addr = await self._master(extra.broker_name, msg.topic)
        stored = replace(msg, topic=extra.real_topic(msg.topic, self.consumer_group))
        # as the proxy: delay level -1 and max reconsume times 0, each alone means the DLQ
        await self.instance.api.consumer_send_message_back(
            addr, stored, self.consumer_group, -1, self.instance.config.mq_client_api_timeout, 0
        )
        log.info(
            "message %s of %s reconsumed %d times (max %d): moved to the dead letter queue",
            msg.client_msg_id,
            self.consumer_group,
            msg.reconsume_times,
            max_reconsume_times,
        )
        await self.ack(msg)


def _no_message(exc: MQBrokerError, msg: MessageExt, handle: str, what: str) -> MQClientError:
    """NO_MESSAGE (the offset is outside the queue: cleaned up, or a bad handle) as an invalid
    receipt handle; other refusals as they are."""
    if exc.response_code != ResponseCode.NO_MESSAGE:
        return exc
    return InvalidReceiptHandleError(
        f"cannot {what} message {msg.client_msg_id}: the broker no longer has it "
        f"({exc.remark or 'NO_MESSAGE'})",
        handle,
        response_code=exc.response_code,
    )
