"""The official Python client's API (``rocketmq.client`` of rocketmq-client-python 2.x, and the
0.4.x spellings), on finchmq's pure-Python client: switch an application by changing its import

    from rocketmq.client import Producer, Message          # before (needs librocketmq)
    from finchmq.compat.rocketmq import Producer, Message  # after (pure Python)

Imports: ``finchmq.client`` only.

Behaviour matches the official client: blocking calls; ``send_sync``/``send_oneway``/
``send_orderly_with_sharding_key``; a push consumer's callback gets one ``RecvMessage`` and
returns ``ConsumeStatus`` (raising means RECONSUME_LATER; ``None`` means success, as in 0.4.x);
``RecvMessage.tags``/``keys``/``body``/``get_property`` are bytes, ``topic``/``id`` text;
``PullConsumer.pull(topic)`` walks every queue from its remembered offset (0 at first). Errors
are the official exception classes (``ProducerSendSyncFailed``...), with finchmq's error as
``__cause__``. ``set_session_credentials`` signs every request for the broker's ACL (the
channel argument is not sent; Java's client does not send one either). Not supported:
name-server domains (``set_name_server_domain`` raises).
"""

from __future__ import annotations

import abc
import enum
import logging
from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from finchmq.client import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingTransactionProducer,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    MessageConst,
    MessageExt,
    MessageQueue,
    MessageSelector,
    MQClientError,
    PullStatus,
    SessionCredentials,
    select_message_queue_by_hash,
)
from finchmq.client import (
    Message as _Message,
)
from finchmq.client import MessageModel as _MessageModel

__all__ = [
    "ConsumeStatus",
    "ConsumerException",
    "Message",
    "MessageModel",
    "MessageProperty",
    "MessageSelector",
    "NullPointerException",
    "Producer",
    "ProducerException",
    "ProducerSendAsyncFailed",
    "ProducerSendOnewayFailed",
    "ProducerSendOrderlyFailed",
    "ProducerSendSyncFailed",
    "ProducerStartFailed",
    "PullConsumer",
    "PullConsumerFetchMQFailed",
    "PullConsumerStartFailed",
    "PushConsumer",
    "PushConsumerStartFailed",
    "RecvMessage",
    "RocketMQException",
    "SendResult",
    "SendStatus",
    "TransactionMQProducer",
    "TransactionStatus",
]

log = logging.getLogger(__name__)

SendResult = namedtuple("SendResult", ["status", "msg_id", "offset"])


class SendStatus(enum.IntEnum):
    OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


class ConsumeStatus(enum.IntEnum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class MessageProperty(enum.Enum):
    TRACE_SWITCH = "TRACE_ON"
    MSG_REGION = "MSG_REGION"
    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"


# -- exceptions (rocketmq.exceptions) -----------------------------------------------------------


class RocketMQException(Exception):
    """RocketMQ exception base class."""


class NullPointerException(RocketMQException):
    pass


class ProducerException(RocketMQException):
    pass


class ProducerStartFailed(ProducerException):
    pass


class ProducerSendSyncFailed(ProducerException):
    pass


class ProducerSendOnewayFailed(ProducerException):
    pass


class ProducerSendOrderlyFailed(ProducerException):
    pass


class ProducerSendAsyncFailed(ProducerException):
    def __init__(self, msg: str, error: int = 0, file: str = "", line: int = 0, type: str = "") -> None:
        super().__init__(msg)
        self.error = error
        self.file = file
        self.line = line
        self.type = type


class ConsumerException(RocketMQException):
    pass


class PushConsumerStartFailed(ConsumerException):
    pass


class PullConsumerStartFailed(ConsumerException):
    pass


class PullConsumerFetchMQFailed(ConsumerException):
    pass


class PullConsumerFetchMessageFailed(ConsumerException):
    pass


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


# -- messages -----------------------------------------------------------------------------------


class Message:
    """A message to send (official ``Message``)."""

    def __init__(self, topic: str | bytes) -> None:
        self.topic = _text(topic)
        self.body = b""
        self.properties: dict[str, str] = {}

    def set_keys(self, keys: str | bytes) -> None:
        self.properties[MessageConst.PROPERTY_KEYS] = _text(keys)

    def set_tags(self, tags: str | bytes) -> None:
        self.properties[MessageConst.PROPERTY_TAGS] = _text(tags)

    def set_body(self, body: str | bytes) -> None:
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)

    def set_property(self, key: str | bytes, value: str | bytes) -> None:
        self.properties[_text(key)] = _text(value)

    def set_delay_time_level(self, delay_time_level: int) -> None:
        self.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(int(delay_time_level))

    def to_message(self) -> _Message:
        """The finchmq ``Message`` sent for this one."""
        return _Message(self.topic, self.body, properties=dict(self.properties))


class RecvMessage:
    """A received message (official ``RecvMessage``): text ``topic``/``id``, bytes elsewhere."""

    def __init__(self, message: MessageExt) -> None:
        self._msg = message

    @property
    def message(self) -> MessageExt:
        """The finchmq ``MessageExt`` behind this one."""
        return self._msg

    @property
    def topic(self) -> str:
        return self._msg.topic

    @property
    def tags(self) -> bytes | None:
        return _bytes(self._msg.tags)

    @property
    def keys(self) -> bytes | None:
        return _bytes(self._msg.keys)

    @property
    def body(self) -> bytes:
        return self._msg.body

    @property
    def id(self) -> str:
        return self._msg.client_msg_id

    @property
    def delay_time_level(self) -> int:
        return self._msg.delay_time_level

    @property
    def queue_id(self) -> int:
        return self._msg.queue_id

    @property
    def reconsume_times(self) -> int:
        return self._msg.reconsume_times

    @property
    def store_size(self) -> int:
        return self._msg.store_size

    @property
    def born_timestamp(self) -> int:
        return self._msg.born_timestamp

    @property
    def store_timestamp(self) -> int:
        return self._msg.store_timestamp

    @property
    def queue_offset(self) -> int:
        return self._msg.queue_offset

    @property
    def commit_log_offset(self) -> int:
        return self._msg.commit_log_offset

    @property
    def prepared_transaction_offset(self) -> int:
        return self._msg.prepared_transaction_offset

    def get_property(self, prop: str | bytes | MessageProperty) -> bytes | None:
        key = prop.value if isinstance(prop, MessageProperty) else _text(prop)
        return _bytes(self._msg.properties.get(key))

    def __getitem__(self, key: str | bytes | MessageProperty) -> bytes | None:
        return self.get_property(key)

    def __str__(self) -> str:
        return self.body.decode("utf-8")

    def __bytes__(self) -> bytes:
        return self.body

    def __repr__(self) -> str:
        return f"<RecvMessage topic={self.topic!r} id={self.id!r} body={self.body!r}>"


def _send_result(result: Any) -> SendResult:
    return SendResult(SendStatus(int(result.send_status)), result.msg_id, result.queue_offset)


def hashing_queue_selector(mq_size: int, msg: object, arg: Any) -> int:
    """The 0.4.x default ``queue_selector``: ``arg % mq_size``."""
    return int(arg) % mq_size


def _by_index(
    queue_selector: Callable[[int, Any, Any], int], msg: Message
) -> Callable[[Any, Any, object], MessageQueue]:
    """A finchmq selector over a 0.4.x ``queue_selector(mq_size, msg, arg)`` (a queue index)."""

    def select(mqs: Any, _msg: Any, value: object) -> MessageQueue:
        queues: list[MessageQueue] = list(mqs)
        return queues[queue_selector(len(queues), msg, value) % len(queues)]

    return select


# -- the clients ----------------------------------------------------------------------------------


class _BlockingClient(Protocol):
    """``BlockingProducer``, ``BlockingPushConsumer``, ``BlockingPullConsumer``."""

    def start(self) -> None: ...
    def shutdown(self) -> None: ...


_B = TypeVar("_B", bound=_BlockingClient)


class _Client(abc.ABC, Generic[_B]):
    """What the official ``Producer``, ``PushConsumer`` and ``PullConsumer`` share: settings
    gathered until ``start()`` makes the finchmq blocking client (``_create``), ``shutdown()``."""

    _GROUP: ClassVar[str]  # the finchmq setting the group id goes to
    _START_FAILED: ClassVar[type[RocketMQException]]

    def __init__(self, group_id: str | bytes) -> None:
        self._settings: dict[str, Any] = {self._GROUP: _text(group_id)}
        self._client: _B | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # settings (before start)
    def set_group(self, group_id: str | bytes) -> None:
        self._settings[self._GROUP] = _text(group_id)

    def set_name_server_address(self, addr: str | bytes) -> None:
        self._settings["namesrv_addr"] = _text(addr)

    set_namesrv_addr = set_name_server_address  # the 0.4.x spelling

    def set_name_server_domain(self, domain: str | bytes) -> None:
        raise RocketMQException(
            "name server domains are not supported by finchmq; use set_name_server_address"
        )

    set_namesrv_domain = set_name_server_domain

    def set_session_credentials(
        self, access_key: str | bytes, access_secret: str | bytes, channel: str | bytes = ""
    ) -> None:
        """Sign every request with these keys (the broker's ACL, ``plain_acl.yml``)."""
        self._settings["session_credentials"] = SessionCredentials(_text(access_key), _text(access_secret))

    def start(self) -> None:
        """Connect with the settings given so far; a second call does nothing."""
        if self._client is not None:
            return
        try:
            settings = dict(self._settings)
            client = self._create(str(settings.pop(self._GROUP)), settings)
            client.start()
        except (MQClientError, ValueError, TypeError) as exc:
            raise self._START_FAILED(str(exc)) from exc
        self._client = client

    @abc.abstractmethod
    def _create(self, group: str, settings: dict[str, Any]) -> _B:
        """The finchmq blocking client, not started yet."""

    def shutdown(self) -> None:
        """Close; safe to call twice."""
        client, self._client = self._client, None
        if client is not None:
            client.shutdown()


# -- producer -----------------------------------------------------------------------------------


class Producer(_Client[BlockingProducer]):
    """The official ``Producer``; set the name server, ``start()``, send, ``shutdown()``."""

    _GROUP = "producer_group"
    _START_FAILED = ProducerStartFailed

    def __init__(
        self,
        group_id: str | bytes,
        orderly: bool = False,
        timeout: int | None = None,
        compress_level: int | None = None,
        max_message_size: int | None = None,
    ) -> None:
        super().__init__(group_id)
        self._orderly = orderly
        if timeout is not None:
            self.set_timeout(timeout)
        if compress_level is not None:
            self.set_compress_level(compress_level)
        if max_message_size is not None:
            self.set_max_message_size(max_message_size)

    # settings (before start)
    def set_group(self, group_name: str | bytes) -> None:  # the official name of the argument
        super().set_group(group_name)

    def set_instance_name(self, name: str | bytes) -> None:
        self._settings["instance_name"] = _text(name)

    def set_timeout(self, timeout: int) -> None:
        self._settings["send_msg_timeout"] = int(timeout)

    def set_compress_level(self, level: int) -> None:
        self._settings["compress_level"] = int(level)

    def set_max_message_size(self, max_size: int) -> None:
        self._settings["max_message_size"] = int(max_size)

    def set_namespace(self, namespace: str | bytes) -> None:
        """A finchmq addition (Java ``ClientConfig.setNamespace``): topics and the group go to the
        broker as ``namespace%name``; received messages show the topic without it."""
        self._settings["namespace"] = _text(namespace)

    def _create(self, group: str, settings: dict[str, Any]) -> BlockingProducer:
        return BlockingProducer(group, **settings)

    def _started(self) -> BlockingProducer:
        if self._client is None:
            raise ProducerException("the producer is not started")
        return self._client

    # sending
    def send_sync(self, msg: Message) -> SendResult:
        try:
            return _send_result(self._started().send(msg.to_message()))
        except MQClientError as exc:
            raise ProducerSendSyncFailed(str(exc)) from exc

    def send_oneway(self, msg: Message) -> None:
        try:
            self._started().send_oneway(msg.to_message())
        except MQClientError as exc:
            raise ProducerSendOnewayFailed(str(exc)) from exc

    def send_async(
        self,
        msg: Message,
        success_callback: Callable[[SendResult], object] | None,
        exception_callback: Callable[[Exception], object] | None,
    ) -> None:
        def ok(result: Any) -> None:
            if success_callback is not None:
                success_callback(_send_result(result))

        def failed(exc: BaseException) -> None:
            error = ProducerSendAsyncFailed(str(exc), type=type(exc).__name__)
            error.__cause__ = exc
            if exception_callback is not None:
                exception_callback(error)
            else:
                log.error("async send failed: %s", exc)

        try:
            self._started().send_async(msg.to_message(), ok, failed)
        except MQClientError as exc:
            raise ProducerSendAsyncFailed(str(exc), type=type(exc).__name__) from exc

    def send_orderly_with_sharding_key(self, msg: Message, sharding_key: str | bytes) -> SendResult:
        """Messages with one sharding key go to one queue, in order (Java's hash selector)."""
        try:
            result = self._started().send(
                msg.to_message(), selector=select_message_queue_by_hash, arg=_text(sharding_key)
            )
        except MQClientError as exc:
            raise ProducerSendOrderlyFailed(str(exc)) from exc
        return _send_result(result)

    def send_orderly(
        self,
        msg: Message,
        arg: int,
        retry_times: int = 3,
        queue_selector: Callable[[int, Any, Any], int] = hashing_queue_selector,
    ) -> SendResult:
        """The 0.4.x form: ``queue_selector(mq_size, msg, arg)`` returns a queue index."""
        select = _by_index(queue_selector, msg)
        last: MQClientError | None = None
        for _ in range(max(1, retry_times)):
            try:
                return _send_result(self._started().send(msg.to_message(), selector=select, arg=arg))
            except MQClientError as exc:
                last = exc
        raise ProducerSendOrderlyFailed(str(last)) from last

    def send_oneway_orderly(
        self, msg: Message, arg: int, queue_selector: Callable[[int, Any, Any], int] = hashing_queue_selector
    ) -> None:
        try:
            self._started().send_oneway(msg.to_message(), selector=_by_index(queue_selector, msg), arg=arg)
        except MQClientError as exc:
            raise ProducerSendOnewayFailed(str(exc)) from exc

    def send_batch(self, msgs: list[Message]) -> SendResult:
        if not msgs:
            raise ProducerSendSyncFailed("Batch message length should be greater than 0")
        try:
            results = self._started().send_batch([m.to_message() for m in msgs])
        except MQClientError as exc:
            raise ProducerSendSyncFailed(str(exc)) from exc
        return _send_result(results[0])


# -- transactional producer ------------------------------------------------------------------------


class TransactionStatus(enum.IntEnum):
    """The official ``TransactionStatus``."""

    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2


_LOCAL_STATE = {
    TransactionStatus.COMMIT: LocalTransactionState.COMMIT_MESSAGE,
    TransactionStatus.ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE,
    TransactionStatus.UNKNOWN: LocalTransactionState.UNKNOW,
}


class _TransactionListener:
    """The official callbacks behind finchmq's ``TransactionListener`` (run in worker threads)."""

    def __init__(self, checker: Callable[[RecvMessage], TransactionStatus]) -> None:
        self.checker = checker

    def execute_local_transaction(self, msg: _Message, arg: Any) -> LocalTransactionState:
        local_execute, original, user_args = arg
        return _LOCAL_STATE[TransactionStatus(local_execute(original, user_args))]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return _LOCAL_STATE[TransactionStatus(self.checker(RecvMessage(msg)))]


class TransactionMQProducer(Producer):
    """The official ``TransactionMQProducer``: ``checker_callback(RecvMessage)`` answers the
    broker's checks; ``send_message_in_transaction(msg, local_execute, user_args)`` runs
    ``local_execute(msg, user_args)`` between the half message and its end. Both return a
    ``TransactionStatus``."""

    def __init__(
        self,
        group_id: str | bytes,
        checker_callback: Callable[[RecvMessage], TransactionStatus],
        user_args: Any = None,
        timeout: int | None = None,
        compress_level: int | None = None,
        max_message_size: int | None = None,
    ) -> None:
        super().__init__(
            group_id, timeout=timeout, compress_level=compress_level, max_message_size=max_message_size
        )
        self._listener = _TransactionListener(checker_callback)
        self._user_args = user_args

    def _create(self, group: str, settings: dict[str, Any]) -> BlockingProducer:
        return BlockingTransactionProducer(group, transaction_listener=self._listener, **settings)

    def send_message_in_transaction(
        self,
        message: Message,
        local_execute: Callable[[Message, Any], TransactionStatus],
        user_args: Any = None,
    ) -> SendResult:
        producer = self._started()
        assert isinstance(producer, BlockingTransactionProducer)
        try:
            result = producer.send_message_in_transaction(
                message.to_message(), (local_execute, message, user_args)
            )
        except MQClientError as exc:
            raise ProducerSendSyncFailed(str(exc)) from exc
        return _send_result(result)


# -- push consumer ------------------------------------------------------------------------------


class PushConsumer(_Client[BlockingPushConsumer]):
    """The official ``PushConsumer``: ``subscribe(topic, callback)`` then ``start()``."""

    _GROUP = "consumer_group"
    _START_FAILED = PushConsumerStartFailed

    def __init__(
        self,
        group_id: str | bytes,
        orderly: bool = False,
        message_model: MessageModel = MessageModel.CLUSTERING,
    ) -> None:
        super().__init__(group_id)
        self._orderly = orderly
        self.set_message_model(message_model)
        self._subscriptions: dict[str, tuple[str | MessageSelector, Callable[[RecvMessage], Any]]] = {}

    def set_message_model(self, model: MessageModel | int) -> None:
        self._settings["message_model"] = _MessageModel(int(model))

    def set_thread_count(self, thread_count: int) -> None:
        self._settings["consume_thread_min"] = int(thread_count)
        self._settings["consume_thread_max"] = int(thread_count)

    def set_message_batch_max_size(self, max_size: int) -> None:
        self._settings["consume_message_batch_max_size"] = int(max_size)

    def set_namespace(self, namespace: str | bytes) -> None:
        """A finchmq addition (Java ``ClientConfig.setNamespace``): topics and the group go to the
        broker as ``namespace%name``; received messages show the topic without it."""
        self._settings["namespace"] = _text(namespace)

    def set_instance_name(self, name: str | bytes) -> None:
        self._settings["instance_name"] = _text(name)

    def subscribe(
        self,
        topic: str | bytes,
        callback: Callable[[RecvMessage], Any],
        expression: str | bytes | MessageSelector = "*",
    ) -> None:
        """The official ``subscribe``; ``expression`` may also be finchmq's
        ``MessageSelector.by_sql(...)`` (the official client has tags only)."""
        selector = expression if isinstance(expression, MessageSelector) else _text(expression)
        self._subscriptions[_text(topic)] = (selector, callback)
        if self._client is not None:
            self._client.subscribe(_text(topic), selector)

    def _callback_for(self, msg: MessageExt) -> Callable[[RecvMessage], Any]:
        entry = self._subscriptions.get(msg.topic)
        if entry is None:  # a topic subscribed with another callback; one callback is the norm
            entry = next(iter(self._subscriptions.values()))
        return entry[1]

    def _consume_one(self, msg: MessageExt) -> bool:
        try:
            status = self._callback_for(msg)(RecvMessage(msg))
        except Exception:
            log.warning("consume callback raised; the message will be consumed again", exc_info=True)
            return False
        return status is None or int(status) == ConsumeStatus.CONSUME_SUCCESS

    def _concurrently(
        self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        for index, msg in enumerate(msgs):
            if not self._consume_one(msg):
                if index == 0:
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
                context.ack_index = index - 1
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def _orderly_listener(
        self, msgs: list[MessageExt], context: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        for msg in msgs:
            if not self._consume_one(msg):
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    def start(self) -> None:
        if self._client is None and not self._subscriptions:
            raise PushConsumerStartFailed("subscribe a topic with a callback before start()")
        super().start()

    def _create(self, group: str, settings: dict[str, Any]) -> BlockingPushConsumer:
        consumer = BlockingPushConsumer(group, **settings)
        for topic, (expression, _) in self._subscriptions.items():
            consumer.subscribe(topic, expression)
        if self._orderly:
            consumer.register_message_listener(self._orderly_listener, orderly=True)
        else:
            consumer.register_message_listener(self._concurrently)
        return consumer


# -- pull consumer ------------------------------------------------------------------------------


class PullConsumer(_Client[BlockingPullConsumer]):
    """The official ``PullConsumer``: ``pull(topic)`` yields every message from the remembered
    offsets (0 at first), queue after queue, until each queue has nothing new."""

    _GROUP = "consumer_group"
    _START_FAILED = PullConsumerStartFailed

    def __init__(self, group_id: str | bytes) -> None:
        super().__init__(group_id)
        self.offset_table: dict[str, int] = {}

    def _create(self, group: str, settings: dict[str, Any]) -> BlockingPullConsumer:
        return BlockingPullConsumer(group, **settings)

    @staticmethod
    def _get_mq_key(mq: Any) -> str:
        queue_id = getattr(mq, "queue_id", getattr(mq, "queueId", 0))
        return f"{_text(mq.topic)}@{queue_id}"

    def get_message_queue_offset(self, mq: Any) -> int:
        return self.offset_table.get(self._get_mq_key(mq), 0)

    def set_message_queue_offset(self, mq: Any, offset: int) -> None:
        self.offset_table[self._get_mq_key(mq)] = offset

    def get_message_queues(self, topic: str | bytes) -> list[MessageQueue]:
        if self._client is None:
            raise PullConsumerFetchMQFailed("the pull consumer is not started")
        try:
            return sorted(self._client.fetch_subscribe_message_queues(_text(topic)))
        except MQClientError as exc:
            raise PullConsumerFetchMQFailed(str(exc)) from exc

    def pull(
        self, topic: str | bytes, expression: str | bytes = "*", max_num: int = 32
    ) -> Iterator[RecvMessage]:
        consumer = self._client
        if consumer is None:
            raise PullConsumerFetchMessageFailed("the pull consumer is not started")
        for mq in self.get_message_queues(topic):
            offset = self.get_message_queue_offset(mq)
            while True:
                try:
                    result = consumer.pull(mq, _text(expression), offset, max_num)
                except MQClientError as exc:
                    raise PullConsumerFetchMessageFailed(str(exc)) from exc
                moved = result.next_begin_offset != offset
                offset = result.next_begin_offset
                self.set_message_queue_offset(mq, offset)
                if result.pull_status is PullStatus.FOUND:
                    for msg in result.msg_found_list:
                        yield RecvMessage(msg)
                elif result.pull_status is PullStatus.NO_NEW_MSG or not moved:
                    break
