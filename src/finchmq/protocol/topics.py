"""Topic and group naming rules both ends share (Java ``TopicValidator`` and ``MixAll``).

A topic is stored with a one-byte length, hence the 127-character limit; its characters are
``[%|a-zA-Z0-9_-]``. Retry and dead-letter topics derive from the consumer group's name.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "BENCHMARK_TOPIC",
    "CLIENT_INNER_PRODUCER_GROUP",
    "DEFAULT_CONSUMER_GROUP",
    "DEFAULT_PRODUCER_GROUP",
    "DLQ_GROUP_TOPIC_PREFIX",
    "GROUP_MAX_LENGTH",
    "LMQ_PREFIX",
    "OFFSET_MOVED_EVENT",
    "RETRY_GROUP_TOPIC_PREFIX",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "SCHEDULE_TOPIC",
    "SELF_TEST_TOPIC",
    "SYSTEM_GROUPS",
    "TIMER_TOPIC",
    "TOOLS_CONSUMER_GROUP",
    "TOPIC_MAX_LENGTH",
    "dlq_topic",
    "is_dlq_topic",
    "is_not_allowed_send_topic",
    "is_retry_topic",
    "is_sys_consumer_group",
    "is_system_group",
    "is_system_topic",
    "reply_topic",
    "retry_topic",
    "validate_topic",
]

AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"  # Java 5.x TimerMessageStore.TIMER_TOPIC
BENCHMARK_TOPIC: Final = "BenchmarkTest"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
LMQ_PREFIX: Final = "%LMQ%"  # Java MixAll.LMQ_PREFIX: light message queues
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
TOPIC_MAX_LENGTH: Final = 127
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"  # Java MixAll.TOOLS_CONSUMER_GROUP: admin tools' reads
# The groups every broker knows from its first start (Java SubscriptionGroupManager.init).
SYSTEM_GROUPS: Final = (
    TOOLS_CONSUMER_GROUP,
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    CLIENT_INNER_PRODUCER_GROUP,
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",  # the value of Java MixAll.CID_SYS_RMQ_TRANS (5.x brokers create it)
)

_VALID: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_NOT_ALLOWED_SEND: Final = frozenset(
    {
        SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    }
)
_SYSTEM: Final = _NOT_ALLOWED_SEND | {
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
    RMQ_SYS_TRACE_TOPIC,
}


def validate_topic(topic: str) -> str | None:
    """None if ``topic`` is a legal name, else the reason (Java ``TopicValidator.validateTopic``)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not _VALID.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    return None


GROUP_MAX_LENGTH: Final = 255  # Java Validators.CHARACTER_MAX_LENGTH


def validate_group(group: str) -> str | None:
    """None if ``group`` is a legal group name, else the reason (Java ``Validators.checkGroup``)."""
    if not group or not group.strip():
        return "the specified group is blank"
    if not _VALID.match(group):
        return "the specified group contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    return None


CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"


def is_sys_consumer_group(group: str) -> bool:
    """Java ``MixAll.isSysConsumerGroup``: the groups a 5.x client may not use."""
    return group.startswith(CID_RMQ_SYS_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """Topics only the broker itself writes (delay and transaction internals)."""
    return topic in _NOT_ALLOWED_SEND


def is_system_topic(topic: str) -> bool:
    return topic in _SYSTEM or topic.startswith("rmq_sys_")


def is_system_group(group: str) -> bool:
    """One of the groups the broker creates for itself and its tools."""
    return group in SYSTEM_GROUPS


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
