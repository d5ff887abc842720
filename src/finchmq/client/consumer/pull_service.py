"""``PullMessageService``: the single loop that runs every push consumer's pull requests (Java
``PullMessageService``; seed 002, seed 004 §4.3).

Strategy: one coroutine takes ``PullRequest``s (and 5.x ``PopRequest``s) from a FIFO and hands
each to its consumer's ``pull_message`` (``pop_message``), which checks flow control and either
re-queues the request later or starts the asynchronous pull (pop) whose callback re-queues it.
Requests are put back immediately or after a delay (a timer). The FIFO holds at most one request
per assigned queue, so it needs no bound.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from finchmq.common.tasks import BackgroundTasks

from .process_queue import PopRequest, PullRequest

__all__ = ["ConsumerTable", "PullMessageService"]

log = logging.getLogger(__name__)


class ConsumerTable(Protocol):
    """What the service needs of its owner, the ``MQClientInstance``: a name for its tasks and
        each request's consumer (one with a ``pull_message(PullRequest)`` method takes the request, one
    with ``pop_message(PopRequest)`` a pop request)."""

    @property
    def client_id(self) -> str:
        """The owner's client id, naming the service's task."""
        ...

    def select_consumer(self, group: str) -> object | None:
        """The consumer registered for ``group``, if any."""
        ...


class PullMessageService:
    """See the module docstring; owned by the ``MQClientInstance``."""

    def __init__(self, instance: ConsumerTable) -> None:
        self.instance = instance
        self._queue: asyncio.Queue[PullRequest | PopRequest] = asyncio.Queue()
        self.tasks = BackgroundTasks(f"pull-service-{instance.client_id}")

    def start(self) -> None:
        self.tasks.spawn(self._run(), "loop")

    async def close(self) -> None:
        await self.tasks.close()

    def execute_pull_request_immediately(self, pull_request: PullRequest) -> None:
        if not self.tasks.closed:
            self._queue.put_nowait(pull_request)

    def execute_pull_request_later(self, pull_request: PullRequest, delay_ms: float) -> None:
        self.tasks.call_later(delay_ms, lambda: self.execute_pull_request_immediately(pull_request))

    def execute_pop_pull_request_immediately(self, pop_request: PopRequest) -> None:
        if not self.tasks.closed:
            self._queue.put_nowait(pop_request)

    def execute_pop_pull_request_later(self, pop_request: PopRequest, delay_ms: float) -> None:
        self.tasks.call_later(delay_ms, lambda: self.execute_pop_pull_request_immediately(pop_request))

    async def _run(self) -> None:
        queue = self._queue
        while True:
            pull_request = await queue.get()
            consumer = self.instance.select_consumer(pull_request.consumer_group)
            method = "pop_message" if isinstance(pull_request, PopRequest) else "pull_message"
            pull = getattr(consumer, method, None)
            if pull is not None:
                try:
                    pull(pull_request)
                except Exception:
                    log.exception("pullMessage of %s failed", pull_request)
            else:
                log.warning("No matched consumer for the PullRequest %s, drop it", pull_request)
