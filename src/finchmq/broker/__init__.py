"""finchmq.broker: the broker (processors, long polling, offsets, flow control, delay levels).

Imports: ``finchmq.common``, ``finchmq.protocol``, ``finchmq.remoting`` and ``finchmq.store``.
"""

from __future__ import annotations

from .config import BrokerConfig
from .controller import BrokerController

__all__ = ["BrokerConfig", "BrokerController"]
