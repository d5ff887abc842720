"""What every broker processor shares: the controller reference and the processor protocol."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from finchmq.protocol import RemotingCommand, ResponseCode

if TYPE_CHECKING:
    from finchmq.broker.controller import BrokerController

__all__ = ["BrokerProcessor", "now_ms"]


def now_ms() -> int:
    return int(time.time() * 1000)


class BrokerProcessor:
    """Base of the broker's processors; ``reject_request`` is False unless overridden."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    @staticmethod
    def not_supported(request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
