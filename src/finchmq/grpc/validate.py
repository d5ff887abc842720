"""Java ``GrpcValidator``: names and values a 5.x request may carry, refused with 5.x's codes."""

from __future__ import annotations

import unicodedata

from finchmq.protocol.topics import is_sys_consumer_group, is_system_topic, validate_group, validate_topic

from ._pb import definition_pb2 as pb
from .status import GrpcStatusError


def valid_topic(resource: pb.Resource) -> str:
    name = resource.name
    reason = validate_topic(name)
    if reason is not None:
        raise GrpcStatusError(pb.ILLEGAL_TOPIC, reason)
    if is_system_topic(name):
        raise GrpcStatusError(pb.ILLEGAL_TOPIC, "cannot access system topic")
    return name


def valid_consumer_group(resource: pb.Resource) -> str:
    name = resource.name
    reason = validate_group(name)
    if reason is not None:
        raise GrpcStatusError(pb.ILLEGAL_CONSUMER_GROUP, reason)
    if is_sys_consumer_group(name):
        raise GrpcStatusError(pb.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")
    return name


def has_control_character(text: str) -> bool:
    """Guava ``CharMatcher.javaIsoControl``: U+0000-U+001F and U+007F-U+009F."""
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def check_tag(value: str) -> None:
    if value:
        if not value.strip():
            raise GrpcStatusError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in value:
            raise GrpcStatusError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if has_control_character(value):
            raise GrpcStatusError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def check_invisible_time(millis: int, minimum: int, maximum: int) -> None:
    if millis < minimum:
        raise GrpcStatusError(pb.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
    if maximum > 0 and millis > maximum:
        raise GrpcStatusError(pb.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {maximum}")
