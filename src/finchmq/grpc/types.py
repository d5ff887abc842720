"""5.x message types on the wire: what a topic accepts (its ``message.type`` attribute, read by
``protocol.attributes``) and what one message is, as ``MessageType`` values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from finchmq.protocol.attributes import TopicMessageType, message_type_of_properties, topic_message_type
from finchmq.protocol.bodies import TopicConfig

from ._pb import definition_pb2 as pb

MessageTypeValue: TypeAlias = pb.MessageType.ValueType

_PB: dict[TopicMessageType, MessageTypeValue] = {
    TopicMessageType.NORMAL: pb.NORMAL,
    TopicMessageType.FIFO: pb.FIFO,
    TopicMessageType.DELAY: pb.DELAY,
    TopicMessageType.TRANSACTION: pb.TRANSACTION,
}


def topic_type(config: TopicConfig | None) -> TopicMessageType:
    return TopicMessageType.NORMAL if config is None else topic_message_type(config)


def accepted_message_types(config: TopicConfig | None) -> list[MessageTypeValue]:
    """Java ``RouteActivity#parseTopicMessageType``: MIXED accepts the four, UNSPECIFIED none."""
    kind = topic_type(config)
    if kind is TopicMessageType.MIXED:
        return [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]
    return [_PB.get(kind, pb.MESSAGE_TYPE_UNSPECIFIED)]


def message_type_of(properties: Mapping[str, str]) -> MessageTypeValue:
    """The ``MessageType`` a received message reports (Java ``GrpcConverter#buildMessageType``)."""
    return _PB.get(message_type_of_properties(properties), pb.NORMAL)
