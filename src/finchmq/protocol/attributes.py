"""Topic attributes (RocketMQ 5.x ``common/attribute``, ``TopicAttributes``): the modification
string an operator gives (``"+message.type=FIFO,-queue.type"``), how the broker applies it to a
topic's stored attributes, and the topic message type the gRPC front end serves.

A stored ``TopicConfig.attributes`` maps the real keys (``{"message.type": "FIFO"}``); a request
(mqadmin ``updateTopic -a``, the ``attributes`` field of UPDATE_AND_CREATE_TOPIC's header) carries
a modification: ``+key=value`` adds or changes, ``-key`` deletes. 4.9.8 has no attributes: a topic
without any reads as NORMAL.

Errors: a malformed or refused modification raises ``TopicAttributeError`` (a ``ValueError``)
with Java's message; the broker answers it with SYSTEM_ERROR, as Java's catch-all does.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .message_const import MessageConst

if TYPE_CHECKING:
    from .bodies import TopicConfig

__all__ = [
    "TOPIC_ATTRIBUTES",
    "TOPIC_MESSAGE_TYPE_ATTRIBUTE",
    "TopicAttribute",
    "TopicAttributeError",
    "TopicMessageType",
    "alter_topic_attributes",
    "format_attribute_modification",
    "message_type_of_properties",
    "parse_attribute_modification",
    "topic_message_type",
]

_ADD: Final = "+"
_DELETE: Final = "-"


class TopicAttributeError(ValueError):
    """A topic attribute modification Java's ``AttributeParser``/``AttributeUtil`` refuses."""


class TopicMessageType(enum.StrEnum):
    """Java ``TopicMessageType``: the kinds of message a 5.x topic accepts."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@dataclass(frozen=True, slots=True)
class TopicAttribute:
    """One supported attribute (Java ``EnumAttribute``/``LongRangeAttribute``)."""

    name: str
    changeable: bool
    default: str
    choices: frozenset[str] | None = None  # an enum attribute's universe
    long_range: tuple[int, int] | None = None  # a long attribute's inclusive bounds

    def verify(self, value: str) -> None:
        """Raise ``TopicAttributeError`` unless ``value`` is allowed."""
        if self.choices is not None and value not in self.choices:
            raise TopicAttributeError(f"value is not in set: {sorted(self.choices)}")
        if self.long_range is not None:
            try:
                number = int(value)
            except ValueError:
                raise TopicAttributeError(f"{self.name}: {value!r} is not a number") from None
            low, high = self.long_range
            if not low <= number <= high:
                raise TopicAttributeError(f"value is not in range({low}, {high})")


TOPIC_MESSAGE_TYPE_ATTRIBUTE: Final = TopicAttribute(
    "message.type", True, TopicMessageType.NORMAL, frozenset(TopicMessageType)
)
TOPIC_ATTRIBUTES: Final[Mapping[str, TopicAttribute]] = {
    a.name: a
    for a in (
        TopicAttribute("queue.type", False, "SimpleCQ", frozenset({"BatchCQ", "SimpleCQ"})),
        TopicAttribute("cleanup.policy", False, "DELETE", frozenset({"DELETE", "COMPACTION"})),
        TOPIC_MESSAGE_TYPE_ATTRIBUTE,
        TopicAttribute("reserve.time", True, "-1", long_range=(-1, (1 << 63) - 1)),
    )
}
"""Java ``TopicAttributes.ALL``."""


def parse_attribute_modification(text: str | None) -> dict[str, str]:
    """Java ``AttributeParser.parseToMap``: ``"+a=b,-c"`` -> ``{"+a": "b", "-c": ""}``.

    Raises ``TopicAttributeError`` for an add without ``+``, a delete without ``-``, an add
    without a value, or a key given twice.
    """
    if not text:
        return {}
    out: dict[str, str] = {}
    for kv in text.split(","):
        if "=" in kv:
            parts = kv.split("=")
            key = parts[0]
            if len(parts) < 2 or not parts[1]:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {kv}")
            value = parts[1]
            if _ADD not in key:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if _DELETE not in key:
                raise TopicAttributeError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicAttributeError(f"key duplication: {key}")
        out[key] = value
    return out


def format_attribute_modification(modification: Mapping[str, str]) -> str:
    """Java ``AttributeParser.parseToString``: ``{"+a": "b", "-c": ""}`` -> ``"+a=b,-c"``."""
    return ",".join(f"{k}={v}" if v else k for k, v in modification.items())


def alter_topic_attributes(
    create: bool, current: Mapping[str, str], modification: Mapping[str, str]
) -> dict[str, str]:
    """Java ``AttributeUtil.alterCurrentAttributes`` over ``TopicAttributes.ALL``: the stored
    attributes after applying ``modification`` (as parsed) to ``current``.

    Creating a topic allows only ``+`` keys; an update may add, change (changeable attributes
    only) and delete (existing keys only). Raises ``TopicAttributeError``.
    """
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in modification.items():
        real = key[1:]
        if not real or _ADD in real or _DELETE in real:
            raise TopicAttributeError("kv string format wrong.")
        if real in seen:
            raise TopicAttributeError(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith(_ADD):
                raise TopicAttributeError(
                    f"only add attribute is supported while creating topic. key: {real}"
                )
            init[real] = value
        elif key.startswith(_ADD):
            (update if real in current else add)[real] = value
        elif key.startswith(_DELETE):
            if real not in current:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
        else:
            raise TopicAttributeError(f"wrong format key: {real}")
    checks = ((init, True, False), (add, False, False), (update, False, False), (delete, False, True))
    for group, is_init, is_delete in checks:
        for key, value in group.items():
            attribute = TOPIC_ATTRIBUTES.get(key)
            if attribute is None:
                raise TopicAttributeError(f"unsupported key: {key}")
            if not is_init and not attribute.changeable:
                raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
            if not is_delete:
                attribute.verify(value)
    final = {**current, **init, **add, **update}
    for key in delete:
        final.pop(key, None)
    return final


def topic_message_type(config: TopicConfig) -> TopicMessageType:
    """Java ``TopicConfig.getTopicMessageType``: the ``message.type`` attribute, NORMAL when the
    topic has none (every 4.9.8 topic). An unknown stored value reads as UNSPECIFIED."""
    value = (config.attributes or {}).get(TOPIC_MESSAGE_TYPE_ATTRIBUTE.name)
    if value is None:
        return TopicMessageType.NORMAL
    try:
        return TopicMessageType(value)
    except ValueError:
        return TopicMessageType.UNSPECIFIED


def message_type_of_properties(properties: Mapping[str, str]) -> TopicMessageType:
    """Java ``TopicMessageType.parseFromMessageProperty``: TRANSACTION for a prepared message,
    DELAY for any delay/timer property, FIFO for a sharding key (message group), else NORMAL."""
    if properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if any(
        properties.get(key) is not None
        for key in (
            MessageConst.PROPERTY_DELAY_TIME_LEVEL,
            MessageConst.PROPERTY_TIMER_DELIVER_MS,
            MessageConst.PROPERTY_TIMER_DELAY_SEC,
            MessageConst.PROPERTY_TIMER_DELAY_MS,
        )
    ):
        return TopicMessageType.DELAY
    if properties.get(MessageConst.PROPERTY_SHARDING_KEY) is not None:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL
