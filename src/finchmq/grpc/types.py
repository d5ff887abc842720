"""Message types: what a topic accepts (its ``message.type`` attribute) and what a message is."""

from __future__ import annotations

from collections.abc import Mapping

from finchmq.protocol.bodies import TopicConfig
from finchmq.protocol.message_const import MessageConst

from ._pb import definition_pb2 as pb

_ACCEPTS: dict[str, list[int]] = {
    "NORMAL": [pb.NORMAL],
    "FIFO": [pb.FIFO],
    "DELAY": [pb.DELAY],
    "TRANSACTION": [pb.TRANSACTION],
    "MIXED": [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION],
}


def topic_type(config: TopicConfig | None) -> str:
    """The topic's ``message.type`` (Java ``TopicConfig#getTopicMessageType``; NORMAL when unset)."""
    attributes: Mapping[str, str] = getattr(config, "attributes", None) or {}
    value = attributes.get("+message.type") or attributes.get("message.type") or "NORMAL"
    return value.upper()


def accepted_message_types(config: TopicConfig | None) -> list[int]:
    """Java ``RouteActivity#parseTopicMessageType``."""
    return _ACCEPTS.get(topic_type(config), [pb.MESSAGE_TYPE_UNSPECIFIED])


def message_type_of(properties: Mapping[str, str]) -> int:
    """Java ``TopicMessageType.parseFromMessageProperty`` as the proxy reports it."""
    if properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if (
        MessageConst.PROPERTY_DELAY_TIME_LEVEL in properties
        or MessageConst.PROPERTY_TIMER_DELIVER_MS in properties
        or MessageConst.PROPERTY_TIMER_DELAY_SEC in properties
        or MessageConst.PROPERTY_TIMER_DELAY_MS in properties
    ):
        return pb.DELAY
    if MessageConst.PROPERTY_SHARDING_KEY in properties:
        return pb.FIFO
    return pb.NORMAL
