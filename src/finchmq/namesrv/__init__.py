"""finchmq.namesrv: the name server (broker registry and topic routes).

Imports: ``finchmq.common``, ``finchmq.protocol`` and ``finchmq.remoting``.
"""

from __future__ import annotations

from .config import NamesrvConfig
from .controller import NamesrvController
from .kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from .processor import DefaultRequestProcessor
from .route_info import MASTER_ID, BrokerLiveInfo, RegisterBrokerResult, RouteInfoManager

__all__ = [
    "MASTER_ID",
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "BrokerLiveInfo",
    "DefaultRequestProcessor",
    "KVConfigManager",
    "NamesrvConfig",
    "NamesrvController",
    "RegisterBrokerResult",
    "RouteInfoManager",
]
