"""The blocking API follows the async one (``client/sync.py`` is hand-written over it): every
public method of a blocking class has an async counterpart with the same parameters and defaults,
every public async method has a blocking form unless listed below with the reason, and every
public class and method of ``finchmq.client``, ``finchmq.spark`` and ``finchmq.testing`` has a
docstring (inherited ones count)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import finchmq.client
import finchmq.spark
import finchmq.testing
from finchmq.client import (
    BlockingAdminClient,
    BlockingLitePullConsumer,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingSimpleConsumer,
    BlockingTransactionProducer,
)

BLOCKING = [
    BlockingProducer,
    BlockingTransactionProducer,
    BlockingPushConsumer,
    BlockingPullConsumer,
    BlockingLitePullConsumer,
    BlockingSimpleConsumer,
    BlockingAdminClient,
]

# Blocking methods whose parameters differ from the async ones on purpose.
DIFFERENT_SIGNATURE = {
    "BlockingProducer.send_async": "callbacks run in the callback pool; returns a concurrent future",
    "BlockingAdminClient.create_topic": "passes its keyword arguments through",
    "BlockingPushConsumer.register_message_listener": "takes blocking listeners only",
}
# Blocking methods named differently from the async ones.
RENAMED = {"BlockingPushConsumer.running_info": "consumer_running_info"}
# Async methods without a blocking form, and why.
ASYNC_ONLY = {
    "start", "close",  # start() / shutdown() (and the context manager) of every blocking class
    # the consumer machinery (Java's MQConsumerInner, used by the client instance), not user API
    "consume_type", "message_model", "consume_from_where", "subscriptions", "do_rebalance",
    "update_topic_subscribe_info", "is_subscribe_topic_need_update", "consumer_running_info",
    "adjust_thread_pool", "reset_offset", "consume_message_directly", "group_name", "unit_mode",
    "offset_table", "persist_consumer_offset_later", "execute_hook_before", "execute_hook_after",
    "execute_pull_request_immediately", "execute_pull_request_later", "instance", "client_id",
    "publish_topic_list", "is_publish_topic_need_update", "update_topic_publish_info", "stats",
    "check_transaction_state",  # the client instance hands the broker's transaction checks over
    "request_async",  # callbacks on the event loop; blocking code calls request()
    "paused", "consume_orderly", "rebalance", "offset_store", "tasks", "earliest_msg_store_time",
    "pull_threshold_for_queue", "pull_threshold_size_for_queue", "unsubscribe", "request",
    "send_orderly", "subscribe_messages", "running_info", "committed_offset", "max_reconsume_times",
    "pull_message", "register_topics", "compute_pull_from_where", "update_assign_queue_and_start_pull_task",
    # 5.x pop mode: the pull service's pop requests, and the group's POP calls behind receive/ack
    "pop_message", "execute_pop_pull_request_immediately", "execute_pop_pull_request_later", "pop_api",
}  # fmt: skip
# ... and per class
ASYNC_ONLY_OF = {
    # a simple consumer has no offsets (the broker keeps the group's progress): a no-op for the
    # client instance
    "BlockingSimpleConsumer": {"persist_consumer_offset"},
}


def public(cls: type) -> dict[str, Any]:
    out = {}
    for name in dir(cls):
        if name.startswith("_") or name in ("wraps",):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if inspect.isfunction(member) or isinstance(member, property):
            out[name] = member
    return out


def parameters(func: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]


@pytest.mark.parametrize("blocking", BLOCKING, ids=lambda c: c.__name__)
def test_every_blocking_method_mirrors_its_async_method(blocking: type) -> None:
    wrapped = blocking.wraps  # type: ignore[attr-defined]
    async_api = public(wrapped)
    for name, member in public(blocking).items():
        if name in ("start", "shutdown", "close", "config"):
            continue
        async_name = RENAMED.get(f"{blocking.__name__}.{name}", name)
        assert async_name in async_api, (
            f"{blocking.__name__}.{name} has no async counterpart on {wrapped.__name__}"
        )
        if isinstance(member, property) or f"{blocking.__name__}.{name}" in DIFFERENT_SIGNATURE:
            continue
        assert parameters(member) == parameters(async_api[async_name]), f"{blocking.__name__}.{name} drifted"


@pytest.mark.parametrize("blocking", BLOCKING, ids=lambda c: c.__name__)
def test_every_async_method_has_a_blocking_form(blocking: type) -> None:
    wrapped = blocking.wraps  # type: ignore[attr-defined]
    missing = (
        set(public(wrapped))
        - set(public(blocking))
        - ASYNC_ONLY
        - ASYNC_ONLY_OF.get(blocking.__name__, set())
    )
    assert not missing, f"{wrapped.__name__} methods without a blocking form: {sorted(missing)}"


def documented(module: ModuleType) -> Iterator[tuple[str, bool]]:
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            yield f"{module.__name__}.{name}", bool(inspect.getdoc(obj))
            if issubclass(obj, BaseException) or getattr(obj, "__module__", "").startswith("enum"):
                continue
            for member_name, raw in vars(obj).items():
                if member_name.startswith("_"):
                    continue
                member = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
                member = member.fget if isinstance(member, property) else member
                if inspect.isfunction(member):
                    yield (
                        f"{module.__name__}.{name}.{member_name}",
                        bool(inspect.getdoc(getattr(obj, member_name))),
                    )
        elif inspect.isfunction(obj):
            yield f"{module.__name__}.{name}", bool(inspect.getdoc(obj))


@pytest.mark.parametrize("module", [finchmq.client, finchmq.spark, finchmq.testing], ids=lambda m: m.__name__)
def test_every_public_class_and_method_has_a_docstring(module: ModuleType) -> None:
    undocumented = [name for name, ok in documented(module) if not ok]
    assert not undocumented, f"{len(undocumented)} without a docstring: {undocumented}"
