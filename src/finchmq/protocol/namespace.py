"""Namespaces: topics and groups prefixed ``namespace%name`` (Java ``NamespaceUtil``, 4.9.8).

A client with a namespace wraps every topic and group it sends (``ns%topic``, ``ns%group``,
``%RETRY%ns%group``, ``%DLQ%ns%group``) and unwraps what it hands back to the user. System
topics and groups (``TopicValidator.isSystemTopic``, ``CID_RMQ_SYS_*``) are never wrapped.
These rules live here only; clients call them through ``ClientConfig.with_namespace`` /
``without_namespace``.
"""

from __future__ import annotations

from typing import Final

from .topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic

__all__ = [
    "NAMESPACE_SEPARATOR",
    "SYS_CONSUMER_GROUP_PREFIX",
    "is_already_with_namespace",
    "namespace_of",
    "without_any_namespace",
    "without_namespace",
    "wrap_namespace",
    "wrap_namespace_and_retry",
]

NAMESPACE_SEPARATOR: Final = "%"
SYS_CONSUMER_GROUP_PREFIX: Final = "CID_RMQ_SYS_"  # Java MixAll.CID_RMQ_SYS_PREFIX


def _is_system_resource(resource: str) -> bool:
    return bool(resource) and (is_system_topic(resource) or resource.startswith(SYS_CONSUMER_GROUP_PREFIX))


def _split_prefix(resource: str) -> tuple[str, str]:
    """(``%RETRY%``, ``%DLQ%`` or ``""``, the rest)."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix) and resource.strip():
            return prefix, resource[len(prefix) :]
    return "", resource


def wrap_namespace(namespace: str | None, resource: str) -> str:
    """``ns%resource`` keeping a ``%RETRY%``/``%DLQ%`` prefix in front (Java ``wrapNamespace``).

    Unchanged when either is empty, for system topics and groups, and when already wrapped
    with this namespace.
    """
    if not namespace or not resource:
        return resource
    if _is_system_resource(resource) or is_already_with_namespace(resource, namespace):
        return resource
    prefix, rest = _split_prefix(resource)
    return f"{prefix}{namespace}{NAMESPACE_SEPARATOR}{rest}"


def without_namespace(resource: str, namespace: str | None) -> str:
    """``resource`` without ``namespace`` (Java ``withoutNamespace(resource, namespace)``):
    ``ns%t`` → ``t``, ``%RETRY%ns%g`` → ``%RETRY%g``. Unchanged when ``namespace`` is empty,
    when ``resource`` is of another namespace or none, and for system resources.
    """
    if not resource or not namespace:
        return resource
    if not _split_prefix(resource)[1].startswith(namespace + NAMESPACE_SEPARATOR):
        return resource
    return without_any_namespace(resource)


def without_any_namespace(resource: str) -> str:
    """``resource`` without whatever namespace it carries (Java ``withoutNamespace(resource)``):
    what is before the first ``%`` past a retry/DLQ prefix goes. System resources are unchanged.
    """
    if not resource or _is_system_resource(resource):
        return resource
    prefix, rest = _split_prefix(resource)
    index = rest.find(NAMESPACE_SEPARATOR)
    if index > 0:
        return prefix + rest[index + 1 :]
    return resource


def is_already_with_namespace(resource: str, namespace: str | None) -> bool:
    """True when ``resource`` (past a retry/DLQ prefix) starts with ``namespace%``."""
    if not namespace or not resource or _is_system_resource(resource):
        return False
    return _split_prefix(resource)[1].startswith(namespace + NAMESPACE_SEPARATOR)


def wrap_namespace_and_retry(namespace: str | None, consumer_group: str) -> str | None:
    """``%RETRY%ns%group`` (Java ``wrapNamespaceAndRetry``); None for an empty group."""
    if not consumer_group:
        return None
    return RETRY_GROUP_TOPIC_PREFIX + wrap_namespace(namespace, consumer_group)


def namespace_of(resource: str) -> str:
    """The namespace ``resource`` carries, ``""`` if none (Java ``getNamespaceFromResource``)."""
    if not resource or _is_system_resource(resource):
        return ""
    rest = _split_prefix(resource)[1]
    index = rest.find(NAMESPACE_SEPARATOR)
    return rest[:index] if index > 0 else ""
