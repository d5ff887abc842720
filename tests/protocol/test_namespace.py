"""Namespace wrapping and unwrapping (Java ``NamespaceUtil``, 4.9.8, and its unit test's cases)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol.namespace import (
    is_already_with_namespace,
    namespace_of,
    without_any_namespace,
    without_namespace,
    wrap_namespace,
    wrap_namespace_and_retry,
)

NAME = st.text(alphabet="abcXYZ019_-|", min_size=1, max_size=20)
SYSTEM = ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "rmq_sys_wheel_timer", "CID_RMQ_SYS_X"]


@pytest.mark.parametrize(
    ("namespace", "resource", "wrapped"),
    [
        ("MQ_INST_XX", "Topic_XXX", "MQ_INST_XX%Topic_XXX"),
        ("MQ_INST_XX", "%RETRY%GID_XXX", "%RETRY%MQ_INST_XX%GID_XXX"),
        ("MQ_INST_XX", "%DLQ%GID_XXX", "%DLQ%MQ_INST_XX%GID_XXX"),
        ("MQ_INST_XX", "MQ_INST_XX%Topic_XXX", "MQ_INST_XX%Topic_XXX"),  # already wrapped
        ("MQ_INST_XX", "%RETRY%MQ_INST_XX%GID", "%RETRY%MQ_INST_XX%GID"),
        ("MQ_INST_XX", "OTHER%Topic", "MQ_INST_XX%OTHER%Topic"),  # another namespace is wrapped again
        (None, "Topic", "Topic"),
        ("", "Topic", "Topic"),
        ("NS", "", ""),
        ("NS", "%RETRY%CID_RMQ_SYS_X", "%RETRY%NS%CID_RMQ_SYS_X"),  # the retry topic is no system group
    ],
)
def test_wrap_as_java(namespace: str | None, resource: str, wrapped: str) -> None:
    assert wrap_namespace(namespace, resource) == wrapped


@pytest.mark.parametrize("resource", SYSTEM)
def test_system_resources_are_never_wrapped_or_unwrapped(resource: str) -> None:
    assert wrap_namespace("NS", resource) == resource
    assert without_any_namespace(resource) == resource
    assert namespace_of(resource) == ""
    assert not is_already_with_namespace(resource, "NS")


@pytest.mark.parametrize(
    ("resource", "namespace", "unwrapped"),
    [
        ("MQ_INST_XX1%Topic_XXX1", "MQ_INST_XX1", "Topic_XXX1"),
        ("MQ_INST_XX2%Topic_XXX2", None, "MQ_INST_XX2%Topic_XXX2"),
        ("%RETRY%MQ_INST_XX1%GID_XXX1", "MQ_INST_XX1", "%RETRY%GID_XXX1"),
        ("%RETRY%MQ_INST_XX2%GID_XXX2", "MQ_INST_XX3", "%RETRY%MQ_INST_XX2%GID_XXX2"),
        ("%DLQ%NS%GID", "NS", "%DLQ%GID"),
        ("Topic", "NS", "Topic"),
        ("NSX%Topic", "NS", "NSX%Topic"),  # a namespace is matched up to its separator
    ],
)
def test_without_namespace_as_java(resource: str, namespace: str | None, unwrapped: str) -> None:
    assert without_namespace(resource, namespace) == unwrapped


def test_without_any_namespace_and_namespace_of() -> None:
    assert without_any_namespace("MQ_INST_XX%Topic_XXX") == "Topic_XXX"
    assert without_any_namespace("%RETRY%MQ_INST_XX%GID_XXX") == "%RETRY%GID_XXX"
    assert without_any_namespace("%Topic") == "%Topic"  # nothing before the separator
    assert namespace_of("%DLQ%NS%GID") == "NS"
    assert namespace_of("Topic") == ""
    assert wrap_namespace_and_retry("NS", "GID") == "%RETRY%NS%GID"
    assert wrap_namespace_and_retry("NS", "") is None


@given(NAME, NAME, st.sampled_from(["", "%RETRY%", "%DLQ%"]))
def test_round_trip(namespace: str, name: str, prefix: str) -> None:
    resource = prefix + name
    wrapped = wrap_namespace(namespace, resource)
    assert wrapped == f"{prefix}{namespace}%{name}" or resource in SYSTEM
    assert wrap_namespace(namespace, wrapped) == wrapped  # idempotent
    assert is_already_with_namespace(wrapped, namespace)
    assert namespace_of(wrapped) == namespace
    assert without_namespace(wrapped, namespace) == resource
    assert without_any_namespace(wrapped) == resource


@given(NAME, NAME, NAME)
def test_another_namespace_is_left_alone(namespace: str, other: str, name: str) -> None:
    wrapped = wrap_namespace(other, name)
    if other != namespace:
        assert without_namespace(wrapped, namespace) == wrapped
