"""finchmq.store: the message store (commit log, consume queues, index, flush and crash recovery).

Imports: ``finchmq.protocol`` only. Knows nothing of the network; no asyncio. The broker uses
``DefaultMessageStore`` (see its module and docs/store.md).
"""

from __future__ import annotations

from .config import CQ_STORE_UNIT_SIZE, SCHEDULE_TOPIC, BrokerRole, FlushDiskType, MessageStoreConfig
from .dispatch import DispatchRequest, MessageArrivingListener
from .inner import MessageExtBatch, MessageExtBrokerInner, stored_properties_string
from .message_filter import MessageFilter, TagsFilter
from .message_store import DefaultMessageStore, DiskUsage, StoreState
from .status import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    StoreCorruptedError,
)

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "SCHEDULE_TOPIC",
    "AppendMessageResult",
    "AppendMessageStatus",
    "BrokerRole",
    "DefaultMessageStore",
    "DiskUsage",
    "DispatchRequest",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageArrivingListener",
    "MessageExtBatch",
    "MessageExtBrokerInner",
    "MessageFilter",
    "MessageStoreConfig",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "StoreCorruptedError",
    "StoreState",
    "TagsFilter",
    "stored_properties_string",
]
