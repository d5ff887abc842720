"""``ProcessQueue`` and ``PullRequest`` (Java ``ProcessQueue``/``PullRequest``; seed 002, 004 §5);
for a queue read by POP (5.x), ``PopProcessQueue`` and ``PopRequest``.

Owns: the messages pulled from one queue and not yet consumed, ordered by offset, with the
counters flow control reads (count, size, span), the orderly-consumption state (messages taken,
broker lock, consume lock) and the timestamps shown in the running info. Imports:
``finchmq.protocol``.

Strategy: ``msg_tree_map`` is an ``OrderedDict`` kept sorted by offset: pulls append increasing
offsets, so the first and last keys are O(1); the rare out-of-order insert (orderly messages put
back after SUSPEND) re-sorts. Everything runs on the event loop, except ``consume_start``, a
dict the consume threads write one key at a time (atomic under the GIL).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from finchmq.protocol.bodies import PopProcessQueueInfo, ProcessQueueInfo
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import ConsumeInitMode

__all__ = ["PopProcessQueue", "PopRequest", "ProcessQueue", "PullRequest"]

_MIB: Final = 1024 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


class ProcessQueue:
    """See the module docstring."""

    def __init__(self) -> None:
        self.msg_tree_map: OrderedDict[int, MessageExt] = OrderedDict()
        self.consuming_msg_orderly_tree_map: OrderedDict[int, MessageExt] = OrderedDict()
        self.msg_count = 0
        self.msg_size = 0  # bytes of message bodies
        self.queue_offset_max = 0
        self.consuming = False
        self.msg_acc_cnt = 0  # messages behind the broker's max offset at the last pull
        self.try_unlock_times = 0
        self.dropped = False
        self.locked = False
        now = _now_ms()
        self.last_lock_timestamp = now
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.consume_lock = asyncio.Lock()  # held while an orderly listener runs
        self.consume_start: dict[int, float] = {}  # offset -> time.time() the listener got it
        self.in_flight = 0  # consume requests submitted and not finished

    # -- flow control ---------------------------------------------------------------------------

    @property
    def msg_size_in_mib(self) -> int:
        return self.msg_size // _MIB

    def get_max_span(self) -> int:
        """Last offset - first offset of the cached messages (0 when empty)."""
        tree = self.msg_tree_map
        if not tree:
            return 0
        return next(reversed(tree)) - next(iter(tree))

    def is_pull_expired(self, pull_max_idle_time: int) -> bool:
        return _now_ms() - self.last_pull_timestamp > pull_max_idle_time

    def is_lock_expired(self, lock_max_live_time: int) -> bool:
        return _now_ms() - self.last_lock_timestamp > lock_max_live_time

    # -- concurrent consumption -----------------------------------------------------------------

    def put_message(self, msgs: list[MessageExt], max_offset: int | None = None) -> bool:
        """Add pulled messages; True when nobody consumes this queue yet (orderly dispatch)."""
        tree = self.msg_tree_map
        valid = 0
        size = 0
        resort = False
        last = next(reversed(tree)) if tree else -1
        highest = self.queue_offset_max
        for msg in msgs:
            offset = msg.queue_offset
            if offset in tree:
                continue
            if offset < last:
                resort = True
            else:
                last = offset
            tree[offset] = msg
            valid += 1
            size += len(msg.body)
            if offset > highest:  # noqa: PLR1730 - cheaper than max() on the hot path
                highest = offset
        self.queue_offset_max = highest
        if resort:
            self.msg_tree_map = OrderedDict(sorted(tree.items()))
        self.msg_count += valid
        self.msg_size += size
        dispatch = False
        if self.msg_tree_map and not self.consuming:
            dispatch = True
            self.consuming = True
        if msgs:
            if max_offset is None:
                text = msgs[-1].properties.get(MessageConst.PROPERTY_MAX_OFFSET)
                max_offset = int(text) if text and text.isdigit() else None
            if max_offset is not None:
                self.msg_acc_cnt = max(max_offset - msgs[-1].queue_offset, 0)
        return dispatch

    def remove_message(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; the offset to commit: the smallest one still cached, or
        ``queue_offset_max + 1`` when none is, or -1 if nothing was cached."""
        tree = self.msg_tree_map
        if not tree:
            return -1
        self.last_consume_timestamp = _now_ms()
        result = self.queue_offset_max + 1
        removed = 0
        size = 0
        starts = self.consume_start
        for msg in msgs:
            prev = tree.pop(msg.queue_offset, None)
            if prev is not None:
                removed += 1
                size += len(prev.body)
                starts.pop(msg.queue_offset, None)
        self.msg_count -= removed
        self.msg_size -= size
        if tree:
            result = next(iter(tree))
        return result

    def first_messages(self, limit: int) -> list[MessageExt]:
        out: list[MessageExt] = []
        for msg in self.msg_tree_map.values():
            if len(out) >= limit:
                break
            out.append(msg)
        return out

    # -- orderly consumption --------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` of the first messages to the consuming map (Java ``takeMessages``)."""
        self.last_consume_timestamp = _now_ms()
        tree = self.msg_tree_map
        taken = []
        for _ in range(batch_size):
            if not tree:
                break
            offset, msg = tree.popitem(last=False)
            taken.append(msg)
            self.consuming_msg_orderly_tree_map[offset] = msg
        if not taken:
            self.consuming = False
        return taken

    def has_temp_message(self) -> bool:
        return bool(self.msg_tree_map)

    def commit(self) -> int:
        """Forget the messages being consumed; the offset after the last of them, or -1."""
        consuming = self.consuming_msg_orderly_tree_map
        if not consuming:
            return -1
        last = next(reversed(consuming))
        self.msg_count -= len(consuming)
        self.msg_size -= sum(len(m.body) for m in consuming.values())
        consuming.clear()
        return last + 1

    def make_message_to_consume_again(self, msgs: list[MessageExt]) -> None:
        """Put messages taken for an orderly call back in front (after SUSPEND)."""
        for msg in msgs:
            self.consuming_msg_orderly_tree_map.pop(msg.queue_offset, None)
            self.msg_tree_map[msg.queue_offset] = msg
        self.msg_tree_map = OrderedDict(sorted(self.msg_tree_map.items()))

    def rollback(self) -> None:
        """Put every message being consumed back (Java ``rollback``)."""
        self.msg_tree_map.update(self.consuming_msg_orderly_tree_map)
        self.msg_tree_map = OrderedDict(sorted(self.msg_tree_map.items()))
        self.consuming_msg_orderly_tree_map.clear()

    def clear(self) -> None:
        """Forget everything cached (reset offset)."""
        self.msg_tree_map.clear()
        self.consuming_msg_orderly_tree_map.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.consume_start.clear()

    def fill_process_queue_info(self, commit_offset: int) -> ProcessQueueInfo:
        tree = self.msg_tree_map
        consuming = self.consuming_msg_orderly_tree_map
        return ProcessQueueInfo(
            commit_offset=commit_offset,
            cached_msg_min_offset=next(iter(tree)) if tree else 0,
            cached_msg_max_offset=next(reversed(tree)) if tree else 0,
            cached_msg_count=len(tree),
            cached_msg_size_in_mib=self.msg_size_in_mib,
            transaction_msg_min_offset=next(iter(consuming)) if consuming else 0,
            transaction_msg_max_offset=next(reversed(consuming)) if consuming else 0,
            transaction_msg_count=len(consuming),
            locked=self.locked,
            try_unlock_times=self.try_unlock_times,
            last_lock_timestamp=self.last_lock_timestamp,
            droped=self.dropped,
            last_pull_timestamp=self.last_pull_timestamp,
            last_consume_timestamp=self.last_consume_timestamp,
        )

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(count={self.msg_count}, size={self.msg_size}, span={self.get_max_span()}, "
            f"dropped={self.dropped}, locked={self.locked})"
        )


@dataclass(slots=True, eq=False)
class PullRequest:
    """One queue's pull cursor (Java ``PullRequest``): identity-compared, one per assigned queue."""

    consumer_group: str
    message_queue: MessageQueue
    process_queue: ProcessQueue
    next_offset: int
    locked_first: bool = False

    def __repr__(self) -> str:
        return (
            f"PullRequest(group={self.consumer_group}, mq={self.message_queue}, "
            f"next_offset={self.next_offset})"
        )


class PopProcessQueue:
    """A queue read by POP (Java 5.x ``PopProcessQueue``): nothing is cached, only how many
    popped messages wait for their ack (flow control: ``pop_threshold_for_queue``) and when it
    was last popped."""

    def __init__(self) -> None:
        self.last_pop_timestamp = _now_ms()
        self.wait_ack_counter = 0
        self.dropped = False

    def inc_found_msg(self, count: int) -> None:
        """``count`` messages popped."""
        self.wait_ack_counter += count

    def ack(self) -> int:
        """One popped message handled (acked, retried or given up); the count before."""
        before = self.wait_ack_counter
        self.wait_ack_counter -= 1
        return before

    def dec_found_msg(self, count: int) -> None:
        """``count`` popped messages dropped unhandled (their invisible time was over)."""
        self.wait_ack_counter -= count

    @property
    def wait_ack_msg_count(self) -> int:
        return self.wait_ack_counter

    def is_pull_expired(self, pull_max_idle_time: int) -> bool:
        return _now_ms() - self.last_pop_timestamp > pull_max_idle_time

    def fill_pop_process_queue_info(self) -> PopProcessQueueInfo:
        return PopProcessQueueInfo(
            wait_ack_count=self.wait_ack_counter,
            droped=self.dropped,
            last_pop_timestamp=self.last_pop_timestamp,
        )

    def __repr__(self) -> str:
        return (
            f"PopProcessQueue(waitAckCounter={self.wait_ack_counter}, "
            f"lastPopTimestamp={self.last_pop_timestamp}, drop={self.dropped})"
        )


@dataclass(slots=True, eq=False)
class PopRequest:
    """One popped queue's cursor (Java 5.x ``PopRequest``): queue id -1 pops every queue of
    the broker; ``init_mode`` says where a group that never consumed it starts."""

    topic: str
    consumer_group: str
    message_queue: MessageQueue
    pop_process_queue: PopProcessQueue
    init_mode: ConsumeInitMode = ConsumeInitMode.MAX

    def __repr__(self) -> str:
        return f"PopRequest(topic={self.topic}, group={self.consumer_group}, mq={self.message_queue})"
