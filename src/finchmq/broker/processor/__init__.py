"""The broker's request processors, one class per family of request codes (Java's
``broker/processor``). Each sees the broker through a ``BrokerContext`` and declares the codes it
answers with ``@handles``; ``PROCESSORS`` lists them for registration."""

from __future__ import annotations

from ._base import BrokerProcessor
from .admin import AdminBrokerProcessor
from .assignment import QueryAssignmentProcessor
from .client_manage import ClientManageProcessor
from .consumer_manage import ConsumerManageProcessor
from .pull import PullMessageProcessor
from .query import QueryMessageProcessor
from .send import SendMessageProcessor
from .transaction import EndTransactionProcessor

__all__ = [
    "AdminBrokerProcessor",
    "BrokerProcessor",
    "ClientManageProcessor",
    "ConsumerManageProcessor",
    "EndTransactionProcessor",
    "PullMessageProcessor",
    "QueryAssignmentProcessor",
    "QueryMessageProcessor",
    "SendMessageProcessor",
]
