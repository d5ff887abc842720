"""Long polling (seed 003): ``PullRequestHoldService`` holds pulls that found nothing.

A PULL_MESSAGE that finds no message and allows suspension is parked under ``topic@queueId``
for its ``suspendTimeoutMillis`` (15 s from push consumers), or ``shortPollingTimeMills`` when
``longPollingEnable`` is false. It is re-executed, with suspension disallowed, as soon as
a message that passes its filter arrives (the store's arrival listener, through
``notify_message_arriving``), or when its time is up (checked every 5 s, or every
``shortPollingTimeMills`` with short polling, as Java's service does).

Threading: the store reports arrivals from its dispatch thread; ``arrival_listener`` coalesces
them per queue and hands them to the event loop in one ``call_soon_threadsafe``. Everything
else runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol import RemotingCommand
from finchmq.remoting import Channel, RemotingContext
from finchmq.store.message_filter import MessageFilter

__all__ = ["ArrivalBuffer", "PullRequest", "PullRequestHoldService", "QueueArrivals"]

log = logging.getLogger(__name__)

_MAX_TRACKED = 64  # arrivals of one queue remembered between two drains (then: any filter matches)


@dataclass(slots=True)
class QueueArrivals:
    """What arrived in one queue since the last drain: how many, the highest offset, and their
    tags codes and properties (None once there are more than 64: then any filter matches)."""

    count: int = 0
    max_offset: int = -1
    tags_codes: set[int] | None = field(default_factory=set)
    properties: list[Mapping[str, str]] | None = field(default_factory=list)


class ArrivalBuffer:
    """Message arrivals reported from the store's thread (``add``), handed to ``drain`` on the
    event loop by (topic, queue id), one loop callback for all that arrived in between. Nothing
    is recorded before ``start`` (no loop to hand them to)."""

    def __init__(self, drain: Callable[[dict[tuple[str, int], QueueArrivals]], None]) -> None:
        self._drain = drain
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrivals: dict[tuple[str, int], QueueArrivals] = {}
        self._lock = threading.Lock()
        self._scheduled = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()

    @property
    def started(self) -> bool:
        return self._loop is not None

    def add(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        properties: Mapping[str, str] | None,
    ) -> None:
        """Record an arrival; safe to call from any thread."""
        loop = self._loop
        if loop is None:
            return
        key = (topic, queue_id)
        with self._lock:
            arrivals = self._arrivals.get(key)
            if arrivals is None:
                arrivals = self._arrivals[key] = QueueArrivals()
            arrivals.count += 1
            arrivals.max_offset = max(arrivals.max_offset, logic_offset)
            if arrivals.tags_codes is not None:
                arrivals.tags_codes.add(tags_code)
                if len(arrivals.tags_codes) > _MAX_TRACKED:
                    arrivals.tags_codes = None
            if arrivals.properties is not None:
                if properties is None or len(arrivals.properties) >= _MAX_TRACKED:
                    arrivals.properties = None
                else:
                    arrivals.properties.append(properties)
            if self._scheduled:
                return
            self._scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: shutting down
            loop.call_soon_threadsafe(self._run_drain)

    def _run_drain(self) -> None:
        with self._lock:
            arrivals, self._arrivals = self._arrivals, {}
            self._scheduled = False
        self._drain(arrivals)


@dataclass(slots=True)
class PullRequest:
    """A held pull (Java ``PullRequest``)."""

    ctx: RemotingContext
    request: RemotingCommand
    suspend_timestamp: int  # ms
    timeout_millis: int
    pull_from_this_offset: int
    message_filter: MessageFilter

    @property
    def deadline(self) -> int:
        return self.suspend_timestamp + self.timeout_millis


class PullRequestHoldService:
    """Suspended pulls by queue, woken by arrivals or their timeout."""

    def __init__(
        self,
        *,
        max_offset: Callable[[str, int], int],
        wakeup: Callable[[RemotingContext, RemotingCommand, int], None],
        long_polling_enable: bool,
        short_polling_time_mills: int,
    ) -> None:
        self._max_offset = max_offset
        self._wakeup = wakeup
        self.long_polling_enable = long_polling_enable
        self.short_polling_time_mills = short_polling_time_mills
        self._table: dict[tuple[str, int], list[PullRequest]] = {}  # by (topic, queueId)
        self._tasks = BackgroundTasks("pull-hold")
        # arrivals reported from the store's thread, drained on the loop
        self._arrivals = ArrivalBuffer(self._drain_arrivals)
        self.holds_total = 0  # pulls ever held (metrics)
        self.wakeups = {"arrival": 0, "timeout": 0}  # held pulls run again, by why (metrics)

    @property
    def held_count(self) -> int:
        return sum(len(requests) for requests in self._table.values())

    def start(self) -> None:
        self._arrivals.start()
        self._tasks.spawn(self._run(), "check")

    async def close(self) -> None:
        await self._tasks.close()
        self._table.clear()

    def suspend_pull_request(self, topic: str, queue_id: int, pull_request: PullRequest) -> None:
        self._table.setdefault((topic, queue_id), []).append(pull_request)
        self.holds_total += 1
        # A message may have landed between the empty read and this call; the store makes it
        # visible in the consume queue before it calls the arrival listener, so looking at the
        # queue's end now closes the gap (Java leaves it to the 5 s check).
        max_offset = self._max_offset(topic, queue_id)
        if max_offset > pull_request.pull_from_this_offset:
            self.notify_message_arriving(topic, queue_id, max_offset)

    async def _run(self) -> None:
        while True:
            interval = 5.0 if self.long_polling_enable else self.short_polling_time_mills / 1000
            await asyncio.sleep(interval)
            began = time.monotonic()
            self.check_hold_requests()
            cost = time.monotonic() - began
            if cost > 5:
                log.info("[NOTIFYME] check hold request cost %.0f ms", cost * 1000)

    def check_hold_requests(self) -> None:
        """Wake requests whose queue has grown or whose time is up (the periodic check)."""
        for topic, queue_id in list(self._table):
            self.notify_message_arriving(topic, queue_id, self._max_offset(topic, queue_id))

    def notify_message_arriving(
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_codes: set[int] | None = None,
        arrived: list[Mapping[str, str]] | None = None,
    ) -> None:
        """Re-execute held pulls of the queue that can now be answered (Java semantics): the
        queue has grown past the pull and, when it is known what arrived, something matches its
        filter (tags by hash code; an SQL92 expression on the properties)."""
        key = (topic, queue_id)
        requests = self._table.get(key)
        if not requests:
            return
        now = int(time.time() * 1000)
        keep: list[PullRequest] = []
        for pull in requests:
            if not pull.ctx.channel.is_open:
                continue  # the consumer is gone: nothing to answer
            newest = max_offset
            if newest <= pull.pull_from_this_offset:
                newest = self._max_offset(topic, queue_id)
            matcher = pull.message_filter
            if (
                newest > pull.pull_from_this_offset
                and (tags_codes is None or any(matcher.is_matched_by_consume_queue(c) for c in tags_codes))
                and (arrived is None or any(matcher.is_matched_by_commit_log(None, p) for p in arrived))
            ):
                self._execute(pull, now, "arrival")
                continue
            if now >= pull.deadline:
                self._execute(pull, now, "timeout")
                continue
            keep.append(pull)
        if keep:
            self._table[key] = keep
        else:
            self._table.pop(key, None)

    def _execute(self, pull: PullRequest, now_ms: int, reason: str) -> None:
        self.wakeups[reason] += 1
        try:
            self._wakeup(pull.ctx, pull.request, max(now_ms - pull.suspend_timestamp, 0))
        except Exception:
            log.exception("execute held pull from %s failed", pull.ctx.remote_addr)

    def drop_channel(self, channel: Channel) -> int:
        """Forget the held pulls of a closed channel; returns how many."""
        dropped = 0
        for key in list(self._table):
            requests = self._table[key]
            kept = [p for p in requests if p.ctx.channel is not channel]
            dropped += len(requests) - len(kept)
            if kept:
                self._table[key] = kept
            else:
                del self._table[key]
        return dropped

    # -- arrivals from the store's thread ---------------------------------------------------

    def arrival_listener(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: Mapping[str, str] | None,
    ) -> None:
        """The store's message-arrival hook; safe to call from any thread."""
        if (topic, queue_id) in self._table:  # somebody waits on this queue
            self._arrivals.add(topic, queue_id, logic_offset, tags_code, properties)

    def _drain_arrivals(self, arrivals: dict[tuple[str, int], QueueArrivals]) -> None:
        for (topic, queue_id), seen in arrivals.items():
            self.notify_message_arriving(
                topic, queue_id, seen.max_offset + 1, seen.tags_codes, seen.properties
            )
