"""Message queue selectors (``client/selector.py``): a sharding key picks the queue Java's
``SelectMessageQueueByHash`` picks, so Java and Python producers agree on ordered messages."""

from __future__ import annotations

import math

import pytest

from finchmq.client import Message, select_message_queue_by_hash, select_message_queue_by_random
from finchmq.protocol.message import MessageQueue

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(4)]
MSG = Message("T", b"x")


@pytest.mark.parametrize(
    ("arg", "java_hash_code"),
    [
        ("order-0", -1207126487),  # String.hashCode
        ("abc", 96354),
        ("", 0),
        (7, 7),  # Integer.hashCode
        (-5, -5),
        (2**40, 256),  # Long.hashCode: (int) (v ^ (v >>> 32))
        (-(2**40), -256),
        (True, 1231),  # Boolean.hashCode
        (False, 1237),
    ],
)
def test_a_key_goes_where_java_sends_it(arg: object, java_hash_code: int) -> None:
    java_index = abs(int(math.fmod(java_hash_code, len(QUEUES))))  # Math.abs(hash % size): % truncates
    assert select_message_queue_by_hash(QUEUES, MSG, arg) == QUEUES[java_index]


def test_one_key_always_picks_one_queue() -> None:
    assert len({select_message_queue_by_hash(QUEUES, MSG, "k") for _ in range(10)}) == 1


def test_random_picks_only_given_queues() -> None:
    assert {select_message_queue_by_random(QUEUES, MSG, None) for _ in range(50)} <= set(QUEUES)
