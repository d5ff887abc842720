"""The broker's request processors, one class per family of request codes (Java's
``broker/processor``). Each sees the broker through a ``BrokerContext`` and declares the codes it
answers with ``@handles``; ``PROCESSORS`` lists them for registration."""

from __future__ import annotations

from ._base import BrokerProcessor
from .ack import AckMessageProcessor
from .admin import AdminBrokerProcessor
from .assignment import QueryAssignmentProcessor
from .auth import AuthAdminProcessor
from .change_invisible_time import ChangeInvisibleTimeProcessor
from .client_manage import ClientManageProcessor
from .consumer_manage import ConsumerManageProcessor
from .notification import NotificationProcessor
from .peek import PeekMessageProcessor
from .polling_info import PollingInfoProcessor
from .pop import PopMessageProcessor
from .pull import PullMessageProcessor
from .query import QueryMessageProcessor
from .recall import RecallMessageProcessor
from .send import SendMessageProcessor
from .transaction import EndTransactionProcessor

__all__ = [
    "AckMessageProcessor",
    "AdminBrokerProcessor",
    "AuthAdminProcessor",
    "BrokerProcessor",
    "ChangeInvisibleTimeProcessor",
    "ClientManageProcessor",
    "ConsumerManageProcessor",
    "EndTransactionProcessor",
    "NotificationProcessor",
    "PeekMessageProcessor",
    "PollingInfoProcessor",
    "PopMessageProcessor",
    "PullMessageProcessor",
    "QueryAssignmentProcessor",
    "QueryMessageProcessor",
    "RecallMessageProcessor",
    "SendMessageProcessor",
]
