"""Broker flow control (seeds 000 and 001): why producers see "broker busy".

``BrokerFastFailure`` (Java ``BrokerFastFailure``): every 10 ms, once the broker has run for 1 s,
(1) while the page cache is busy, answer every queued send with SYSTEM_BUSY
``[PCBUSY_CLEAN_QUEUE]``; (2) answer every request that has waited longer than its queue's limit
(``waitTimeMillsInSendQueue`` 200 ms, pull 5 s, heartbeat 31 s, end-transaction 3 s) with
``[TIMEOUT_CLEAN_QUEUE]``. ``FlowControlCounters`` counts every flow-control event by kind and
logs them at most once every 5 s per kind, so an operator can see which mechanism fired.
``docs/flow-control.md`` lists every mechanism, and the rule of finchmq's arrival shedding.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from finchmq.common.logs import RateLimitedLog
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol import ResponseCode
from finchmq.remoting import ExecutorName, RequestExecutor

__all__ = [
    "WATCHED_EXECUTORS",
    "BrokerFastFailure",
    "FlowControlCounters",
    "overload_kind",
    "timeout_clean_kind",
]

log = logging.getLogger(__name__)

_BUSY = "broker busy, start flow control for a while, period in queue: {}ms, size of queue: {}"
PCBUSY_REMARK = "[PCBUSY_CLEAN_QUEUE]" + _BUSY
TIMEOUT_REMARK = "[TIMEOUT_CLEAN_QUEUE]" + _BUSY


@dataclass(slots=True)
class FlowControlCounters:
    """Flow-control events by kind: OVERLOAD, REJECTREQUEST, PCBUSY_CLEAN_QUEUE,
    TIMEOUT_CLEAN_QUEUE (per queue), PC_SYNCHRONIZED."""

    counts: dict[str, int] = field(default_factory=dict)
    _log: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log))

    def record(self, kind: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n
        self._log.warning(
            kind,
            "flow control %s: request(s) answered SYSTEM_BUSY (%d in total)",
            kind,
            self.counts[kind],
        )

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)


def overload_kind(executor: ExecutorName) -> str:
    """The counter of requests refused at arrival by ``executor``'s full queue ([OVERLOAD])."""
    return f"OVERLOAD:{executor}"


def timeout_clean_kind(executor: ExecutorName) -> str:
    """The counter of requests fast failure took out of ``executor``'s queue ([TIMEOUT_CLEAN_QUEUE])."""
    return f"TIMEOUT_CLEAN_QUEUE:{executor}"


# The queues fast failure watches (Java BrokerFastFailure.cleanExpiredRequest's four queues).
WATCHED_EXECUTORS = (
    ExecutorName.SEND,
    ExecutorName.PULL,
    ExecutorName.HEARTBEAT,
    ExecutorName.END_TRANSACTION,
    ExecutorName.ACK,  # 5.x
)


@dataclass(slots=True)
class _WatchedQueue:
    executor: RequestExecutor
    max_wait_ms: Callable[[], int]


class BrokerFastFailure:
    def __init__(
        self,
        *,
        counters: FlowControlCounters,
        is_page_cache_busy: Callable[[], bool],
        enabled: Callable[[], bool],
        send_executor: RequestExecutor,
        watched: list[tuple[RequestExecutor, Callable[[], int]]],
    ) -> None:
        self.counters = counters
        self.is_page_cache_busy = is_page_cache_busy
        self.enabled = enabled
        self.send_executor = send_executor
        self.watched = [_WatchedQueue(executor, wait) for executor, wait in watched]
        self._tasks = BackgroundTasks("fast-failure")

    def start(self) -> None:
        # Java: every 10 ms after 1 s; a failing pass is logged and the next one runs anyway.
        self._tasks.every(10, self._tick, "clean-expired", initial_delay_ms=1000)

    async def close(self) -> None:
        await self._tasks.close()

    def _tick(self) -> None:
        if self.enabled():
            self.clean_expired_requests()

    def clean_expired_requests(self) -> None:
        now = time.monotonic()
        while self.is_page_cache_busy():
            item = self.send_executor.poll_oldest()
            if item is None:
                break
            waited = int((now - item.created_at) * 1000)
            item.answer(ResponseCode.SYSTEM_BUSY, PCBUSY_REMARK.format(waited, len(self.send_executor)))
            self.counters.record("PCBUSY_CLEAN_QUEUE")
        for queue in self.watched:
            limit = queue.max_wait_ms()
            while True:
                item = queue.executor.oldest()
                if item is None:
                    break
                waited = int((now - item.created_at) * 1000)
                if waited < limit:
                    break
                queue.executor.poll_oldest()
                item.answer(ResponseCode.SYSTEM_BUSY, TIMEOUT_REMARK.format(waited, len(queue.executor)))
                self.counters.record(timeout_clean_kind(queue.executor.name))
