"""What every broker processor shares: the broker context, and state written before the answer.

A processor is a ``remoting.RequestProcessor``: its methods answer request codes declared with
``@handles`` (``finchmq.remoting.routing``), and the controller registers it from that table.
"""

from __future__ import annotations

import time

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
        answer = super().process(ctx, request)
        if isinstance(answer, Later):
            return Later(lambda: self._finish_later(answer))
        if self.context.metadata_unwritten:
            return Later(lambda: self._written(answer))
        return answer

    async def _finish_later(self, later: Later) -> RemotingCommand | None:
        return await self._written(await later.resume())

    async def _written(self, answer: RemotingCommand | None) -> RemotingCommand | None:
        if self.context.metadata_unwritten:
            await self.context.flush_metadata()
        return answer
