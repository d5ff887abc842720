"""finchmq.client: a pure-Python RocketMQ 4.x client (asyncio core, blocking API).

Imports: ``finchmq.protocol``, ``finchmq.remoting`` and ``finchmq.common``; never the broker,
name server or store. Works against finchmq and, being wire compatible, Apache RocketMQ.

    Producer, PushConsumer, LitePullConsumer, PullConsumer, AdminClient   asyncio (the core)
    SimpleConsumer                                    asyncio: RocketMQ 5.x's, over POP
    BlockingProducer, BlockingPushConsumer, ...                             the same, blocking

See ``docs/client.md`` for a guide; ``finchmq.compat.rocketmq`` mirrors the official Python
client's API for a drop-in switch.
"""

from __future__ import annotations

from finchmq.protocol.acl import SessionCredentials
from finchmq.protocol.bodies import ConsumeFromWhere, MessageModel, MessageRequestMode
from finchmq.protocol.filter import MessageSelector
from finchmq.protocol.message import Message, MessageExt, MessageQueue
from finchmq.protocol.message_const import MessageConst
from finchmq.remoting.tls import TLS_CLIENT_KEYS, TlsConfig, TlsMode

from .admin import AdminClient
from .allocate import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    MachineRoomResolver,
)
from .config import (
    ClientConfig,
    LitePullConsumerConfig,
    ProducerConfig,
    PullConsumerConfig,
    PushConsumerConfig,
    SimpleConsumerConfig,
)
from .consumer.listener import (
    AsyncMessageListenerConcurrently,
    AsyncMessageListenerOrderly,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeMessageContext,
    ConsumeMessageHook,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListenerConcurrently,
    MessageListenerOrderly,
)
from .consumer.lite_pull import LitePullConsumer
from .consumer.offset_store import LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from .consumer.pull import PullConsumer
from .consumer.push import PushConsumer
from .consumer.simple import SimpleConsumer
from .errors import (
    AclRefusedError,
    BrokerBusyError,
    ClientStateError,
    InvalidReceiptHandleError,
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQNetworkError,
    MQTimeoutError,
    NoRouteError,
    PollingFullError,
    RequestTimeoutError,
    ValidationError,
)
from .producer import Producer, create_reply_message, split_batch
from .results import (
    AckResult,
    AckStatus,
    PopResult,
    PopStatus,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from .selector import MessageQueueSelector, select_message_queue_by_hash, select_message_queue_by_random
from .sync import (
    BlockingAdminClient,
    BlockingLitePullConsumer,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingSimpleConsumer,
    BlockingTransactionProducer,
    Portal,
)
from .transaction import (
    HalfMessage,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "TLS_CLIENT_KEYS",
    "AckResult",
    "AckStatus",
    "AclRefusedError",
    "AdminClient",
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "AsyncMessageListenerConcurrently",
    "AsyncMessageListenerOrderly",
    "BlockingAdminClient",
    "BlockingLitePullConsumer",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BlockingSimpleConsumer",
    "BlockingTransactionProducer",
    "BrokerBusyError",
    "ClientConfig",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "HalfMessage",
    "InvalidReceiptHandleError",
    "LitePullConsumer",
    "LitePullConsumerConfig",
    "LocalFileOffsetStore",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "MQConnectError",
    "MQNetworkError",
    "MQTimeoutError",
    "MachineRoomResolver",
    "Message",
    "MessageConst",
    "MessageExt",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageRequestMode",
    "MessageSelector",
    "NoRouteError",
    "OffsetStore",
    "PollingFullError",
    "PopResult",
    "PopStatus",
    "Portal",
    "Producer",
    "ProducerConfig",
    "PullConsumer",
    "PullConsumerConfig",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "PushConsumerConfig",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "RequestTimeoutError",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "SimpleConsumer",
    "SimpleConsumerConfig",
    "TlsConfig",
    "TlsMode",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "ValidationError",
    "create_reply_message",
    "select_message_queue_by_hash",
    "select_message_queue_by_random",
    "split_batch",
]
