"""``PopLongPollingService`` (Java ``broker/longpolling``): POP and NOTIFICATION requests that
found nothing, held until a message arrives or their time is up.

A request is held under ``topic@group@queueId`` (queue id -1 for one that reads every queue)
until ``bornTime + pollTime`` (``PopRequest.expired``); at most ``popPollingSize`` per key and
``maxPopPollingSize`` in all, else it is answered POLLING_FULL. One arrival wakes one request of
each group polling the topic (the -1 key first, then the queue's), if the message passes its
filter (every ``popLongPollingForceNotifyInterval``-th offset wakes one regardless); a woken
request is run again from the start by its processor, on the pull executor, and is held again
if it still finds nothing. Expired requests are run again 50 ms before their time, and then
answer POLLING_TIMEOUT. The NOTIFICATION processor has its own instance, which wakes the newest
request first (``notify_last``).

Threading: the store reports arrivals on its dispatch thread; ``arrival_listener`` coalesces
them per queue and hands them to the loop in one ``call_soon_threadsafe``, as the pull hold
service does. Everything else runs on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from finchmq.broker.config import BrokerConfig
from finchmq.broker.long_polling import ArrivalBuffer, QueueArrivals
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol import RemotingCommand
from finchmq.protocol.pop import is_pop_retry_topic_v2, parse_normal_topic
from finchmq.remoting import Channel, RemotingContext
from finchmq.store.message_filter import MessageFilter

__all__ = ["PollingResult", "PopLongPollingService", "PopRequest"]

log = logging.getLogger(__name__)

PollingKey = tuple[str, str, int]


class PollingResult(enum.Enum):
    POLLING_SUC = 0
    POLLING_FULL = 1
    POLLING_TIMEOUT = 2
    NOT_POLLING = 3


_SEQ = itertools.count()


@dataclass(slots=True, eq=False)
class PopRequest:
    """A held request (Java ``PopRequest``)."""

    ctx: RemotingContext
    request: RemotingCommand
    expired: int  # ms epoch: bornTime + pollTime
    key: PollingKey
    message_filter: MessageFilter | None = None
    held_at: float = 0.0  # monotonic s
    complete: bool = False
    seq: int = field(default_factory=lambda: next(_SEQ))

    def is_timeout(self, now_ms: int) -> bool:
        return now_ms > self.expired - 50


class PopLongPollingService:
    """Held pops (or notifications) by key; ``wakeup`` runs a woken request again."""

    def __init__(
        self,
        name: str,
        *,
        config: Callable[[], BrokerConfig],
        clock: Callable[[], int],
        notify_last: bool = False,
    ) -> None:
        self.name = name
        self.config = config
        self.clock = clock
        self.notify_last = notify_last
        self.wakeup: Callable[[PopRequest], None] | None = None  # set by the processor
        self.polling_map: dict[PollingKey, list[PopRequest]] = {}
        self.topic_cid_map: dict[str, set[str]] = {}
        self.total_polling_num = 0
        self._timeouts: list[tuple[int, int, PopRequest]] = []
        self._timeout_changed = asyncio.Event()
        self._tasks = BackgroundTasks(name)
        self._arrivals = ArrivalBuffer(self._drain_arrivals)
        self._stopped = False
        self.holds_total = 0
        self.wakeups = {"arrival": 0, "timeout": 0}

    def start(self) -> None:
        self._arrivals.start()
        self._tasks.spawn(self._run(), "timeouts")

    async def close(self) -> None:
        """Stop holding; the requests held are answered (run again, they time out)."""
        self._stopped = True
        await self._tasks.close()
        for requests in list(self.polling_map.values()):
            for request in requests:
                self._wake(request, "timeout")
        self.polling_map.clear()
        self.total_polling_num = 0

    # -- holding ----------------------------------------------------------------------------

    def polling(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        *,
        topic: str,
        group: str,
        queue_id: int,
        born_time: int,
        poll_time: int,
        message_filter: MessageFilter | None = None,
    ) -> PollingResult:
        """Hold ``request`` (POLLING_SUC: answer later) or say why not."""
        if poll_time <= 0 or self._stopped:
            return PollingResult.NOT_POLLING
        self.topic_cid_map.setdefault(topic, set()).add(group)
        cfg = self.config()
        key = (topic, group, queue_id)
        held = PopRequest(ctx, request, born_time + poll_time, key, message_filter)
        if self.total_polling_num >= cfg.max_pop_polling_size:
            log.info("polling %s: POLLING_FULL, %d held in all", key, self.total_polling_num)
            return PollingResult.POLLING_FULL
        if held.is_timeout(self.clock()):
            return PollingResult.POLLING_TIMEOUT
        queue = self.polling_map.get(key)
        if queue is None:
            queue = self.polling_map[key] = []
            if len(self.polling_map) > cfg.pop_polling_map_size:
                log.warning(
                    "%d keys held, more than popPollingMapSize=%d",
                    len(self.polling_map),
                    cfg.pop_polling_map_size,
                )
        elif len(queue) > cfg.pop_polling_size:
            log.info("polling %s: POLLING_FULL, %d held for it", key, len(queue))
            return PollingResult.POLLING_FULL
        held.held_at = asyncio.get_running_loop().time()
        # sorted by expiry, then arrival (Java's skip-list comparator)
        index = len(queue)
        while index and queue[index - 1].expired > held.expired:
            index -= 1
        queue.insert(index, held)
        self.total_polling_num += 1
        self.holds_total += 1
        heapq.heappush(self._timeouts, (held.expired, held.seq, held))
        if self._timeouts[0][2] is held:
            self._timeout_changed.set()
        return PollingResult.POLLING_SUC

    def polling_num(self, topic: str, group: str, queue_id: int) -> int:
        return len(self.polling_map.get((topic, group, queue_id), ()))

    def drop_channel(self, channel: Channel) -> int:
        """Forget the requests of a closed channel; returns how many."""
        dropped = 0
        for key in list(self.polling_map):
            kept = [r for r in self.polling_map[key] if r.ctx.channel is not channel]
            gone = len(self.polling_map[key]) - len(kept)
            if gone:
                for request in self.polling_map[key]:
                    if request.ctx.channel is channel:
                        request.complete = True
                dropped += gone
                self.total_polling_num -= gone
                if kept:
                    self.polling_map[key] = kept
                else:
                    del self.polling_map[key]
        return dropped

    # -- waking -----------------------------------------------------------------------------

    def _take(self, key: PollingKey) -> PopRequest | None:
        queue = self.polling_map.get(key)
        while queue:
            request = queue.pop() if self.notify_last else queue.pop(0)
            self.total_polling_num -= 1
            if not queue:
                self.polling_map.pop(key, None)
            if request.ctx.channel.is_open and not request.complete:
                return request
            request.complete = True
        return None

    def _put_back(self, request: PopRequest) -> None:
        queue = self.polling_map.setdefault(request.key, [])
        index = len(queue)
        while index and queue[index - 1].expired > request.expired:
            index -= 1
        queue.insert(index, request)
        self.total_polling_num += 1

    def _wake(self, request: PopRequest, why: str) -> bool:
        if request.complete:
            return False
        request.complete = True
        if not request.ctx.channel.is_open or self.wakeup is None:
            return False
        self.wakeups[why] += 1
        try:
            self.wakeup(request)
        except Exception:
            log.exception("%s: waking a held request of %s failed", self.name, request.ctx.remote_addr)
        return True

    def notify_message_arriving(
        self,
        topic: str,
        queue_id: int,
        group: str,
        *,
        force: bool = False,
        tags_codes: set[int] | None = None,
        properties: list[Mapping[str, str]] | None = None,
    ) -> bool:
        """Wake one request held for ``(topic, group, queue_id)`` that the arrival matches."""
        request = self._take((topic, group, queue_id))
        if request is None:
            return False
        matcher = request.message_filter
        if not force and matcher is not None:
            match = tags_codes is None or any(matcher.is_matched_by_consume_queue(c) for c in tags_codes)
            if match and properties is not None:
                match = any(matcher.is_matched_by_commit_log(None, p) for p in properties)
            if not match:
                self._put_back(request)
                return False
        return self._wake(request, "arrival")

    def notify_topic_arriving(
        self,
        topic: str,
        queue_id: int,
        *,
        offset: int = -1,
        count: int = 1,
        tags_codes: set[int] | None = None,
        properties: list[Mapping[str, str]] | None = None,
    ) -> None:
        """Messages arrived in ``topic``'s queue: wake, per group polling the topic, up to
        ``count`` requests (the queue's or the all-queue ones). A v2 pop retry topic wakes the
        pops of its topic (Java ``notifyMessageArrivingWithRetryTopic``)."""
        if is_pop_retry_topic_v2(topic):
            topic = parse_normal_topic(topic)
        groups = self.topic_cid_map.get(topic)
        if not groups:
            return
        interval = self.config().pop_long_polling_force_notify_interval
        force = interval > 0 and offset >= 0 and offset % interval == 0
        for group in list(groups):
            for _ in range(count):
                woken = queue_id >= 0 and self.notify_message_arriving(
                    topic, -1, group, force=force, tags_codes=tags_codes, properties=properties
                )
                woken = (
                    self.notify_message_arriving(
                        topic, queue_id, group, force=force, tags_codes=tags_codes, properties=properties
                    )
                    or woken
                )
                if not woken:
                    break

    async def _run(self) -> None:
        while True:
            now = self.clock()
            while self._timeouts and (self._timeouts[0][2].complete or self._timeouts[0][2].is_timeout(now)):
                _, _, request = heapq.heappop(self._timeouts)
                if request.complete:
                    continue
                queue = self.polling_map.get(request.key)
                if queue is not None and request in queue:
                    queue.remove(request)
                    self.total_polling_num -= 1
                    if not queue:
                        del self.polling_map[request.key]
                self._wake(request, "timeout")
            wait = 1.0
            if self._timeouts:
                wait = min(max((self._timeouts[0][2].expired - 50 - now) / 1000, 0.001), 1.0)
            self._timeout_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._timeout_changed.wait(), wait)

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
        if not self._arrivals.started:
            return
        watched = topic if not is_pop_retry_topic_v2(topic) else parse_normal_topic(topic)
        if watched not in self.topic_cid_map:
            return  # nobody ever polled the topic
        self._arrivals.add(topic, queue_id, logic_offset, tags_code, properties)

    def _drain_arrivals(self, arrivals: dict[tuple[str, int], QueueArrivals]) -> None:
        for (topic, queue_id), seen in arrivals.items():
            self.notify_topic_arriving(
                topic,
                queue_id,
                offset=seen.max_offset,
                count=seen.count,
                tags_codes=seen.tags_codes,
                properties=seen.properties,
            )
