"""finchmq: a RocketMQ-compatible messaging system in Python.

The package root names the version and re-exports the public client API (``finchmq.Producer``,
``finchmq.PushConsumer``, ``finchmq.Message``, the errors...) from ``finchmq.client``, loaded on
first use so the servers do not import the client. See the README for the tour.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from finchmq._version import __version__

if TYPE_CHECKING:
    from finchmq.client import (
        AdminClient,
        BlockingAdminClient,
        BlockingLitePullConsumer,
        BlockingProducer,
        BlockingPullConsumer,
        BlockingPushConsumer,
        BrokerBusyError,
        ClientStateError,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyStatus,
        LitePullConsumer,
        Message,
        MessageExt,
        MessageQueue,
        MQBrokerError,
        MQClientError,
        Producer,
        PullConsumer,
        PushConsumer,
        SendResult,
        SendStatus,
        ValidationError,
    )

__all__ = [
    "AdminClient",
    "BlockingAdminClient",
    "BlockingLitePullConsumer",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BrokerBusyError",
    "ClientStateError",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyStatus",
    "LitePullConsumer",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "ValidationError",
    "__version__",
]

_CLIENT_NAMES = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        return getattr(importlib.import_module("finchmq.client"), name)
    raise AttributeError(f"module 'finchmq' has no attribute {name!r}")
