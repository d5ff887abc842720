"""``ConsumerOrderInfoManager`` (Java ``broker/offset``): what an orderly pop handed out of each
queue, so the queue is not handed to anyone else until it is acked or its invisible time ends;
persisted to ``config/consumerOrderInfo.json`` in Java's format (``protocol.pop.OrderInfo``).

An orderly pop (``order=true``) writes no check point. It records the queue offsets it returned
(``update``); while one of them is neither acked nor visible again the queue is blocked
(``check_block``) for every pop but a retry with the same ``attemptId``. An ack marks its bit and
moves the consumer offset to the first message not acked (``commit_and_next``); when the
invisible time ends, the next pop reads the same messages again and reports how often each was
consumed (``orderCountInfo``). With ``enableNotifyAfterPopOrderLockRelease`` the held pops of a
queue are woken when its block ends (Java ``ConsumerOrderInfoLockManager``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from finchmq.broker._persist import JsonConfigManager
from finchmq.protocol.pop import (
    ConsumerOrderInfoWrapper,
    OrderInfo,
    order_count_item,
    queue_offset_order_count_item,
)

__all__ = ["ConsumerOrderInfoManager", "OrderInfoState"]

log = logging.getLogger(__name__)

_CLEAN_SPAN_FROM_LAST: Final = 24 * 3600 * 1000  # ms: an order info unused this long is dropped


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class OrderInfoState:
    """One queue's orderly pop (Java ``OrderInfo``, mutable)."""

    pop_time: int
    invisible_time: int | None
    offset_list: list[int]  # [first offset, distance of message i from it...]
    last_consume_timestamp: int
    commit_offset_bit: int = 0
    attempt_id: str | None = None
    offset_next_visible_time: dict[int, int] | None = None
    offset_consumed_count: dict[int, int] | None = None

    @staticmethod
    def build_offset_list(queue_offsets: list[int]) -> list[int]:
        if len(queue_offsets) == 1:
            return list(queue_offsets)
        first = queue_offsets[0]
        return [first, *(o - first for o in queue_offsets[1:])]

    def queue_offset(self, index: int) -> int:
        if index == 0:
            return self.offset_list[0]
        return self.offset_list[0] + self.offset_list[index]

    def is_not_ack(self, index: int) -> bool:
        return not self.commit_offset_bit >> index & 1

    def _next_visible(self, index: int) -> int:
        visible = self.pop_time + (self.invisible_time or 0)
        if self.offset_next_visible_time is not None:
            visible = self.offset_next_visible_time.get(self.queue_offset(index), visible)
        return visible

    def need_block(self, attempt_id: str | None, current_invisible_time: int, now: int) -> bool:
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = current_invisible_time
        return any(self.is_not_ack(i) and now < self._next_visible(i) for i in range(len(self.offset_list)))

    def lock_free_timestamp(self, now: int) -> int | None:
        """When the queue stops being blocked (now if it is not), None if unknown."""
        if not self.offset_list:
            return None
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                if self.invisible_time is None or self.invisible_time <= 0:
                    return None
                visible = self._next_visible(i)
                if now < visible:
                    return visible
        return now

    def next_offset(self) -> int:
        """The consumer offset: the first message not acked, or past the last."""
        if not self.offset_list:
            return -2
        num = len(self.offset_list)
        for i in range(num):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(num - 1) + 1

    def merge_offset_consumed_count(
        self, pre_attempt_id: str | None, pre_offset_list: list[int], prev: dict[int, int] | None
    ) -> None:
        prev = prev or {}
        if pre_attempt_id is not None and pre_attempt_id == self.attempt_id:
            self.offset_consumed_count = prev
            return
        previous = {
            pre_offset_list[0] if i == 0 else pre_offset_list[0] + pre_offset_list[i]
            for i in range(len(pre_offset_list))
        }
        counts: dict[int, int] = {}
        for i in range(len(self.offset_list)):
            offset = self.queue_offset(i)
            if offset in previous:
                counts[offset] = prev.get(offset, 0) + 1
        self.offset_consumed_count = counts

    def to_wire(self) -> OrderInfo:
        return OrderInfo(
            pop_time=self.pop_time,
            invisible_time=self.invisible_time,
            offset_list=tuple(self.offset_list),
            offset_next_visible_time=dict(self.offset_next_visible_time)
            if self.offset_next_visible_time is not None
            else None,
            offset_consumed_count=dict(self.offset_consumed_count)
            if self.offset_consumed_count is not None
            else None,
            last_consume_timestamp=self.last_consume_timestamp,
            commit_offset_bit=self.commit_offset_bit,
            attempt_id=self.attempt_id,
        )

    @classmethod
    def from_wire(cls, info: OrderInfo) -> OrderInfoState:
        return cls(
            pop_time=info.pop_time,
            invisible_time=info.invisible_time,
            offset_list=list(info.offset_list or ()),
            last_consume_timestamp=info.last_consume_timestamp,
            commit_offset_bit=info.commit_offset_bit,
            attempt_id=info.attempt_id,
            offset_next_visible_time=dict(info.offset_next_visible_time)
            if info.offset_next_visible_time is not None
            else None,
            offset_consumed_count=dict(info.offset_consumed_count)
            if info.offset_consumed_count is not None
            else None,
        )


def _key(topic: str, group: str) -> str:
    return f"{topic}@{group}"


class ConsumerOrderInfoManager(JsonConfigManager):
    """The order infos, by ``topic@group`` and queue id."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], int] = _now_ms,
        notify_enabled: Callable[[], bool] = lambda: True,
        queue_exists: Callable[[str, str, int], bool] | None = None,
    ) -> None:
        super().__init__(path)
        self.table: dict[str, dict[int, OrderInfoState]] = {}
        self.clock = clock
        self.notify_enabled = notify_enabled  # enableNotifyAfterPopOrderLockRelease
        self.queue_exists = queue_exists  # (topic, group, queue id): the topic, queue and group exist
        self.on_lock_free: Callable[[str, str, int], None] | None = None  # wakes the queue's held pops
        self._timers: dict[tuple[str, str, int], asyncio.TimerHandle] = {}
        self._to_recover: list[tuple[str, str, int, int]] = []

    # -- persistence ------------------------------------------------------------------------

    def encode(self) -> bytes:
        self.auto_clean()
        return ConsumerOrderInfoWrapper(
            table={
                key: {queue: info.to_wire() for queue, info in queues.items()}
                for key, queues in self.table.items()
            }
        ).to_json()

    def decode(self, data: bytes) -> None:
        wrapper = ConsumerOrderInfoWrapper.from_json(data)
        self.table = {
            key: {queue: OrderInfoState.from_wire(info) for queue, info in queues.items()}
            for key, queues in wrapper.table.items()
        }
        now = self.clock()
        self._to_recover = []
        for key, queues in self.table.items():
            topic, sep, group = key.partition("@")
            if not sep:
                continue
            for queue_id, info in queues.items():
                free = info.lock_free_timestamp(now)
                if free is not None and free > now:
                    self._to_recover.append((topic, group, queue_id, free))

    def start(self) -> None:
        """Arm the lock-free notifications of the order infos loaded (Java ``recover``)."""
        recover, self._to_recover = self._to_recover, []
        for topic, group, queue_id, free in recover:
            self._schedule(topic, group, queue_id, free)

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def auto_clean(self) -> None:
        """Drop order infos of topics, queues or groups gone, and those unused for a day."""
        if self.queue_exists is None:
            return
        now = self.clock()
        for key in list(self.table):
            topic, sep, group = key.partition("@")
            queues = self.table[key]
            if not sep or not queues:
                del self.table[key]
                continue
            for queue_id in list(queues):
                if (
                    not self.queue_exists(topic, group, queue_id)
                    or now - queues[queue_id].last_consume_timestamp > _CLEAN_SPAN_FROM_LAST
                ):
                    del queues[queue_id]
            if not queues:
                del self.table[key]

    # -- lock-free notifications ------------------------------------------------------------

    def _update_lock_free(self, topic: str, group: str, queue_id: int, info: OrderInfoState) -> None:
        free = info.lock_free_timestamp(self.clock())
        if free is not None:
            self._schedule(topic, group, queue_id, free)

    def _schedule(self, topic: str, group: str, queue_id: int, free_at: int) -> None:
        if not self.notify_enabled() or self.on_lock_free is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        key = (topic, group, queue_id)
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        delay = max(free_at - self.clock(), 0) / 1000
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def _fire(self, key: tuple[str, str, int]) -> None:
        self._timers.pop(key, None)
        if self.on_lock_free is not None and self.notify_enabled():
            try:
                self.on_lock_free(*key)
            except Exception:
                log.exception("notify lock free of %s failed", key)

    # -- Java's operations ------------------------------------------------------------------

    def update(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        queue_offsets: list[int],
    ) -> list[str]:
        """Record an orderly pop; returns its ``orderCountInfo`` items."""
        queues = self.table.setdefault(_key(topic, group), {})
        old = queues.get(queue_id)
        info = OrderInfoState(
            pop_time=pop_time,
            invisible_time=invisible_time,
            offset_list=OrderInfoState.build_offset_list(queue_offsets),
            last_consume_timestamp=self.clock(),
            attempt_id=attempt_id,
        )
        if old is not None:
            info.merge_offset_consumed_count(old.attempt_id, old.offset_list, old.offset_consumed_count)
        queues[queue_id] = info
        self.mark_dirty()
        items: list[str] = []
        counts = info.offset_consumed_count
        min_consumed = 0
        if counts is not None:
            min_consumed = 2**31 - 1
            for offset, consumed in counts.items():
                items.append(queue_offset_order_count_item(topic, queue_id, offset, consumed))
                min_consumed = min(min_consumed, consumed)
            if len(counts) != len(info.offset_list):
                min_consumed = 0  # new messages among them
        # the old pop SDK reads the count by queue id
        items.append(order_count_item(topic, queue_id, min_consumed))
        self._update_lock_free(topic, group, queue_id, info)
        return items

    def check_block(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int
    ) -> bool:
        info = self.table.get(_key(topic, group), {}).get(queue_id)
        if info is None:
            return False
        return info.need_block(attempt_id, invisible_time, self.clock())

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        queues = self.table.get(_key(topic, group))
        if queues is not None and queues.pop(queue_id, None) is not None:
            self.mark_dirty()

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """Mark ``queue_offset`` acked; the consumer offset to commit, -1 when the offset is not
        one handed out, -2 when nothing is to be committed (a stale ack)."""
        info = self.table.get(_key(topic, group), {}).get(queue_id)
        if info is None:
            return queue_offset + 1
        if not info.offset_list:
            return -1
        if pop_time != info.pop_time:
            log.warning(
                "orderly ack of %s@%s:%d offset %d: pop time %d is not the current %d",
                topic,
                group,
                queue_id,
                queue_offset,
                pop_time,
                info.pop_time,
            )
            return -2
        for i in range(len(info.offset_list)):
            if info.queue_offset(i) == queue_offset:
                break
        else:
            return -1
        info.commit_offset_bit |= 1 << i
        self.mark_dirty()
        next_offset = info.next_offset()
        self._update_lock_free(topic, group, queue_id, info)
        return next_offset

    def update_next_visible_time(
        self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int, next_visible_time: int
    ) -> None:
        info = self.table.get(_key(topic, group), {}).get(queue_id)
        if info is None or pop_time != info.pop_time:
            return
        if info.offset_next_visible_time is None:
            info.offset_next_visible_time = {}
        info.offset_next_visible_time[queue_offset] = next_visible_time
        self.mark_dirty()
        self._update_lock_free(topic, group, queue_id, info)
