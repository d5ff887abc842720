"""Message queue selectors (Java ``producer/MessageQueueSelector`` and ``producer/selector``):
the queue a ``send(msg, selector=..., arg=...)`` goes to, chosen by the caller's ``arg`` (a
sharding key for ordered messages). Pure: no I/O. Imports: ``finchmq.protocol``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeAlias

from finchmq.protocol.message import Message, MessageQueue, tags_hash_code

__all__ = ["MessageQueueSelector", "select_message_queue_by_hash", "select_message_queue_by_random"]

MessageQueueSelector: TypeAlias = Callable[[Sequence[MessageQueue], Message, object], MessageQueue]
"""Java ``MessageQueueSelector.select(mqs, msg, arg)``: the queue a message goes to."""


def _java_hash(arg: object) -> int:
    """``arg.hashCode()`` as Java computes it for strings and ints (stable across processes)."""
    if isinstance(arg, str):
        return tags_hash_code(arg) if arg else 0
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(2**31) <= arg < 2**31:
            return arg
        value = arg & 0xFFFFFFFFFFFFFFFF
        folded = (value ^ (value >> 32)) & 0xFFFFFFFF  # Long.hashCode
        return folded - (1 << 32) if folded & 0x80000000 else folded
    return hash(arg)


def select_message_queue_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    """Java ``SelectMessageQueueByHash``: ``abs(arg.hashCode()) % len(mqs)``; a sharding key
    (string or int) always maps to the same queue, in every language."""
    return mqs[abs(_java_hash(arg)) % len(mqs)]  # == Math.abs(hash % size) with Java's truncating %


def select_message_queue_by_random(mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
    """Java ``SelectMessageQueueByRandom``."""
    return mqs[random.randrange(len(mqs))]
