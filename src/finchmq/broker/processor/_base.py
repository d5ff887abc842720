"""What every broker processor shares: the broker context, and state written before the answer.

A processor is a ``remoting.RequestProcessor``: its methods answer request codes declared with
``@handles`` (``finchmq.remoting.routing``), and the controller registers it from that table.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any

from finchmq.broker.context import BrokerContext
from finchmq.protocol.command import RemotingCommand
from finchmq.remoting import Answer, Later, RemotingContext, RequestProcessor

__all__ = ["BrokerProcessor", "now_ms"]


def now_ms() -> int:
    return int(time.time() * 1000)


class BrokerProcessor(RequestProcessor):
    """Base of the broker's processors: a request that created a topic or a subscription group
    is answered only once that state is on disk (Java persists before it answers)."""

    def __init__(self, context: BrokerContext) -> None:
        super().__init__()
        self.context = context

    def process(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        # RequestProcessor.process with the metadata check: inlined, as every request runs it
        bound = self._bound.get(request.code)
        if bound is None:
            return self.not_supported(request)
        handler, is_async = bound
        if is_async:
            return Later(lambda: self._awaited_then_written(handler(ctx, request)))
        answer: Answer = handler(ctx, request)
        if type(answer) is Later:
            return Later(lambda: self._finish_later(answer))
        if self.context.metadata_unwritten:
            return Later(lambda: self._written(answer))  # type: ignore[arg-type]
        return answer

    async def _awaited_then_written(
        self, pending: Coroutine[Any, Any, RemotingCommand | None]
    ) -> RemotingCommand | None:
        return await self._written(await pending)

    async def _finish_later(self, later: Later) -> RemotingCommand | None:
        return await self._written(await later.resume())

    async def _written(self, answer: RemotingCommand | None) -> RemotingCommand | None:
        if self.context.metadata_unwritten:
            await self.context.flush_metadata()
        return answer
