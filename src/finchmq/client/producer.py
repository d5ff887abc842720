"""``Producer``: send messages (Java ``DefaultMQProducer`` + ``DefaultMQProducerImpl``), asyncio
core.

Owns: message validation, the topic publish table, compression, UNIQ_KEY ids, batches split to
the size limit, request-reply sends, and the retry loop. Queues come from the topic's
``TopicPublishInfo`` round robin, a ``selector.MessageQueueSelector``, or, with
``send_latency_fault_enable``, ``latency.MQFaultStrategy`` (which avoids brokers that answered
slowly or failed). Imports: ``finchmq.protocol`` and the client's modules.

Strategy (Java ``sendDefaultImpl``):
    A send finds the topic's route (falling back to the ``create_topic_key`` route so the broker
    creates the topic), picks a queue, and tries at most ``1 + retry_times_when_send_failed``
    times (async: ``retry_times_when_send_async_failed``; oneway, to-a-queue and selector sends:
    once), moving to another broker after a network error or an answer in
    ``PRODUCER_RETRY_RESPONSE_CODES``, within one ``send_msg_timeout`` budget. ``BrokerBusyError``
    (SYSTEM_BUSY) and other answers are raised at once: flow control is not retried (seed 000).
    Each attempt's latency goes to the fault strategy.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final, TypeAlias, cast

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.compression import compress_body
from finchmq.protocol.errors import MessageEncodeError
from finchmq.protocol.headers import (
    CheckTransactionStateRequestHeader,
    RecallMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from finchmq.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    Message,
    MessageExt,
    MessageQueue,
    properties_to_string,
)
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.msg_id import UniqueKeyGenerator
from finchmq.protocol.recall import RecallHandleError, RecallMessageHandle
from finchmq.protocol.stored import MAX_PROPERTIES_LENGTH
from finchmq.protocol.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    CLIENT_INNER_PRODUCER_GROUP,
    is_dlq_topic,
    is_not_allowed_send_topic,
    is_retry_topic,
    reply_topic,
    validate_topic,
)
from finchmq.protocol.trace import TraceBean, TraceContext, TraceMessageType, TraceType

from .config import ProducerConfig, make_config
from .errors import (
    PRODUCER_RETRY_RESPONSE_CODES,
    ClientStateError,
    MQBrokerError,
    MQClientError,
    MQNetworkError,
    MQTimeoutError,
    MQTooManyRequestsError,
    NoRouteError,
    RequestTimeoutError,
    ValidationError,
)
from .instance import ClientService, MQClientInstance, MQProducerInner, ServiceState
from .latency import MQFaultStrategy
from .results import SendResult, SendStatus
from .route import TopicPublishInfo
from .selector import MessageQueueSelector
from .trace import TraceDispatcher

__all__ = ["Producer", "check_message", "create_reply_message", "split_batch"]

log = logging.getLogger(__name__)

SendCallback: TypeAlias = Callable[[SendResult], object]
ExceptionCallback: TypeAlias = Callable[[BaseException], object]

_BATCH_ITEM_OVERHEAD: Final = 22  # TOTALSIZE MAGICCODE BODYCRC FLAG BODYLENGTH (5 x 4) + PROPERTIESLENGTH (2)


_RUNNING: Final = ServiceState.RUNNING
_UNIQ_KEY_PREFIX: Final = f"{MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}{NAME_VALUE_SEPARATOR}"
_COMPRESSED_FLAG: Final = MessageSysFlag.COMPRESSED_FLAG
_TRANSACTION_PREPARED_TYPE: Final = MessageSysFlag.TRANSACTION_PREPARED_TYPE


class _Mode(enum.Enum):
    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


async def _raise(exc: BaseException) -> SendResult | None:
    raise exc


def check_message(
    msg: Message, max_message_size: int, create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
) -> None:
    """Java ``Validators.checkMessage`` + ``checkTopic``; raises ``ValidationError`` saying what is wrong."""
    if not isinstance(msg, Message):
        raise ValidationError(
            f"the message is not a Message: {msg!r}", response_code=ResponseCode.MESSAGE_ILLEGAL
        )
    problem = validate_topic(msg.topic)
    if problem is not None:
        raise ValidationError(f"topic {msg.topic!r}: {problem}", response_code=ResponseCode.MESSAGE_ILLEGAL)
    if msg.topic in (create_topic_key, AUTO_CREATE_TOPIC_KEY_TOPIC):
        raise ValidationError(
            f"The topic[{msg.topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.",
            response_code=ResponseCode.MESSAGE_ILLEGAL,
        )
    if is_not_allowed_send_topic(msg.topic):
        raise ValidationError(
            f"Sending message to topic[{msg.topic}] is forbidden.", response_code=ResponseCode.MESSAGE_ILLEGAL
        )
    if not msg.body:
        raise ValidationError(
            f"the message body length is zero (topic {msg.topic})", response_code=ResponseCode.MESSAGE_ILLEGAL
        )
    if len(msg.body) > max_message_size:
        raise ValidationError(
            f"the message body size over max value, MAX: {max_message_size} (body is {len(msg.body)} bytes)",
            response_code=ResponseCode.MESSAGE_ILLEGAL,
        )


def _encoded_item_size(msg: Message) -> int:
    return _BATCH_ITEM_OVERHEAD + len(msg.body) + len(properties_to_string(msg.properties).encode("utf-8"))


def split_batch(messages: Sequence[Message], size_limit: int) -> list[list[Message]]:
    """Consecutive runs of ``messages`` whose batch body fits ``size_limit`` bytes (Java's
    ``ListSplitter`` example, with exact sizes). A single message larger than the limit raises."""
    batches: list[list[Message]] = []
    current: list[Message] = []
    current_size = 0
    for index, msg in enumerate(messages):
        size = _encoded_item_size(msg) + 48  # room for the UNIQ_KEY property added at send time
        if size > size_limit:
            raise ValidationError(
                f"batch message {index} alone is {size} bytes, over max_message_size={size_limit}",
                response_code=ResponseCode.MESSAGE_ILLEGAL,
            )
        if current and current_size + size > size_limit:
            batches.append(current)
            current, current_size = [], 0
        current.append(msg)
        current_size += size
    if current:
        batches.append(current)
    return batches


_ID_GENERATORS: dict[str, UniqueKeyGenerator] = {}


def _id_generator(ip: str) -> UniqueKeyGenerator:
    gen = _ID_GENERATORS.get(ip)
    if gen is None:
        try:
            gen = UniqueKeyGenerator(ip)
        except MessageEncodeError:  # not an IP literal
            gen = UniqueKeyGenerator()
        _ID_GENERATORS[ip] = gen
    return gen


class Producer(ClientService, MQProducerInner):
    """An asyncio producer (Java ``DefaultMQProducer``).

    ``Producer("group", namesrv_addr="127.0.0.1:9876")`` or ``Producer(ProducerConfig(...))``;
    keyword arguments override config fields. ``await start()`` / ``await close()`` or
    ``async with``. Sends: ``send`` (sync), ``send_async`` (a future, optional callbacks),
    ``send_oneway``, each to the next queue, to a given ``queue`` or through a ``selector``;
    ``send_batch`` for many messages of one topic.
    """

    _KIND = "producer"

    def __init__(self, config: ProducerConfig | str, /, **overrides: object) -> None:
        config = make_config(ProducerConfig, config, "producer_group", overrides)
        if config.namespace:  # Java DefaultMQProducer.start: setProducerGroup(withNamespace(...))
            config = replace(config, producer_group=config.with_namespace(config.producer_group))
        self.config: ProducerConfig = config
        self._state = ServiceState.CREATE_JUST
        self._instance: MQClientInstance | None = None
        self._publish_info: dict[str, TopicPublishInfo] = {}
        self.fault_strategy = MQFaultStrategy(self.config)
        self._ids = _id_generator(self.config.client_ip)
        self._async_tasks: set[asyncio.Task[SendResult | None]] = set()
        self._checked_topics: set[str] = set()  # topics that passed the name checks
        # SEND_MESSAGE_V2 headers by (topic, batch), made from self._templates_config
        self._templates: dict[tuple[str, bool], dict[str, str]] = {}
        self._templates_config: ProducerConfig | None = None
        self._trace: TraceDispatcher | None = None  # with enable_msg_trace

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def instance(self) -> MQClientInstance:
        if self._instance is None:
            raise ClientStateError("The producer is not started; call start() first")
        return self._instance

    async def start(self, *, instance: MQClientInstance | None = None) -> None:
        """Register with the process's client instance and start it.

        Raises:
            ClientStateError: closed, or another producer of this group uses the same instance.
        """
        if self._running_already():
            return
        config = self.config
        if config.producer_group != CLIENT_INNER_PRODUCER_GROUP:
            config = self.config = config.with_instance_name_pid()
        owns_instance_start = instance is None
        self._instance = instance if instance is not None else MQClientInstance.get_or_create(config)
        if not self._instance.register_producer(config.producer_group, self):
            self._instance = None
            raise ClientStateError(
                f"The producer group[{config.producer_group}] has been created before, "
                "specify another name please."
            )
        self._publish_info.setdefault(config.create_topic_key, TopicPublishInfo())
        if owns_instance_start:
            try:
                await self._instance.start()
            except BaseException:
                self._instance.producer_table.pop(config.producer_group, None)
                await self._instance.shutdown()
                raise
        self._state = ServiceState.RUNNING
        if owns_instance_start:
            await self._instance.send_heartbeat_to_all_broker_with_lock()
        if config.enable_msg_trace and not config.producer_group.startswith("_INNER_TRACE_PRODUCER"):
            self._trace = TraceDispatcher(
                config.producer_group,
                "PRODUCE",
                config.namesrv_addr,
                config.customized_trace_topic,
                config.session_credentials,
                producer_factory=Producer,
            )
            await self._trace.start()

    async def close(self, *, shutdown_instance: bool = True) -> None:
        """Wait for async sends in flight, unregister from the brokers, release the instance; idempotent."""
        if self._state is not ServiceState.RUNNING:
            self._state = ServiceState.SHUTDOWN_ALREADY
            return
        self._state = ServiceState.SHUTDOWN_ALREADY
        if self._async_tasks:
            await asyncio.gather(*list(self._async_tasks), return_exceptions=True)
        if self._trace is not None:
            await self._trace.close()
        instance = self.instance
        await instance.unregister_producer(self.config.producer_group)
        if shutdown_instance:
            await instance.shutdown()

    def _make_sure_state_ok(self) -> MQClientInstance:
        if self._state is not _RUNNING or self._instance is None:
            raise ClientStateError(
                f"The producer service state not OK, {self._state.name} (start it first; a closed producer "
                "cannot be reopened)"
            )
        return self._instance

    # -- MQProducerInner ------------------------------------------------------------------------

    def publish_topic_list(self) -> set[str]:
        return set(self._publish_info)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self._publish_info.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self._publish_info[topic] = info

    async def _try_to_find_topic_publish_info(self, topic: str) -> TopicPublishInfo:
        instance = self._make_sure_state_ok()
        info = self._publish_info.get(topic)
        if info is None or not info.ok():
            self._publish_info.setdefault(topic, TopicPublishInfo())
            await instance.update_topic_route_info_from_name_server(topic)
            info = self._publish_info[topic]
        if info.have_topic_router_info or info.ok():
            return info
        await instance.update_topic_route_info_from_name_server(
            topic, is_default=True, producer_config=self.config
        )
        return self._publish_info[topic]

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (Java ``fetchPublishMessageQueues``)."""
        config = self.config
        info = await self._try_to_find_topic_publish_info(config.with_namespace(topic))
        if not info.ok():
            raise self._no_route(topic)
        return [config.queue_without_namespace(mq) for mq in info.message_queue_list]

    # -- namespace ------------------------------------------------------------------------------

    def _to_broker(
        self, msg: Message, queue: MessageQueue | None, selector: MessageQueueSelector | None
    ) -> tuple[Message, MessageQueue | None, MessageQueueSelector | None]:
        """With a namespace: the message and queue as the broker knows them (``ns%topic``,
        INSTANCE_ID set, as Java), and a selector that sees the user's topic."""
        config = self.config
        namespace = config.namespace
        if not namespace:
            return msg, queue, selector
        if selector is not None:
            user_selector = selector
            user_msg = msg

            def user_view(mqs: Sequence[MessageQueue], _msg: Message, arg: object) -> MessageQueue:
                picked = user_selector([config.queue_without_namespace(q) for q in mqs], user_msg, arg)
                return config.queue_with_namespace(picked) if isinstance(picked, MessageQueue) else picked

            selector = user_view

        wrapped = replace(msg, topic=config.with_namespace(msg.topic)).with_property(
            MessageConst.PROPERTY_INSTANCE_ID, namespace
        )
        return wrapped, None if queue is None else config.queue_with_namespace(queue), selector

    def _to_user(self, result: SendResult) -> SendResult:
        """``result`` with its queue's topic as the user names it (Java ``processSendResponse``)."""
        if not self.config.namespace:
            return result
        return replace(result, message_queue=self.config.queue_without_namespace(result.message_queue))

    # -- sending --------------------------------------------------------------------------------

    async def request(self, msg: Message, timeout_millis: int = 3_000) -> MessageExt:
        """Request-reply (Java 4.7+ ``request``): send ``msg`` and wait for the reply a consumer
        sends with ``create_reply_message`` (the broker pushes it back to this client).

        Raises:
            RequestTimeoutError: the request was sent, but no reply came within the time.
            MQClientError: the request could not be sent.
        """
        instance = self.instance
        began = time.monotonic()
        correlation_id = str(uuid.uuid4())
        msg = self._to_broker(msg, None, None)[0]
        msg = msg.with_properties(
            {
                MessageConst.PROPERTY_CORRELATION_ID: correlation_id,
                MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT: instance.client_id,
                MessageConst.PROPERTY_MESSAGE_TTL: str(timeout_millis),
            }
        )
        if msg.topic not in instance.topic_route_table:
            # the broker pushes the reply to this client's connection: it must know it first
            await instance.update_topic_route_info_from_name_server(msg.topic)
            await instance.send_heartbeat_to_all_broker_with_lock()
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        instance.reply_futures[correlation_id] = future
        try:
            remaining = timeout_millis - int((time.monotonic() - began) * 1000)
            try:
                await self.send(msg, timeout_millis=max(remaining, 1))
            except MQClientError as exc:
                raise MQClientError(
                    f"send request message to <{msg.topic}> fail: {exc}", response_code=exc.response_code
                ) from exc
            remaining = timeout_millis - int((time.monotonic() - began) * 1000)
            try:
                return await asyncio.wait_for(future, max(remaining, 0) / 1000)
            except TimeoutError:
                raise RequestTimeoutError(
                    f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                    f"{timeout_millis} ms."
                ) from None
        finally:
            instance.reply_futures.pop(correlation_id, None)

    def request_async(
        self,
        msg: Message,
        on_success: Callable[[MessageExt], object] | None = None,
        on_exception: Callable[[BaseException], object] | None = None,
        timeout_millis: int = 3_000,
    ) -> asyncio.Future[MessageExt]:
        """``request`` in the background (Java ``request(msg, RequestCallback, timeout)``): a
        future of the reply; the callbacks run on the event loop when it comes or fails."""
        task = asyncio.ensure_future(self.request(msg, timeout_millis))

        def done(finished: asyncio.Future[MessageExt]) -> None:
            if finished.cancelled():
                return
            exc = finished.exception()
            if exc is None:
                if on_success is not None:
                    on_success(finished.result())
            elif on_exception is not None:
                on_exception(exc)

        task.add_done_callback(done)
        return task

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """A plain producer cannot answer a transaction check (a ``TransactionProducer`` does)."""
        log.warning(
            "broker %s asks producer group %s about transaction %s, but this producer has no "
            "transaction listener (use TransactionProducer)",
            broker_addr,
            self.config.producer_group,
            header.msg_id,
        )

    async def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
        timeout_millis: int | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer.

        ``queue`` sends to that queue; ``selector(mqs, msg, arg)`` picks one (ordered messages:
        ``selector=select_message_queue_by_hash, arg=sharding_key``); otherwise round robin with
        retries on other brokers.

        Raises:
            ValidationError: the message is invalid (names the problem).
            BrokerBusyError: the broker's flow control refused it (retriable, not retried here).
            MQBrokerError, MQNetworkError, NoRouteError, MQTimeoutError.
        """
        timeout = self.config.send_msg_timeout if timeout_millis is None else timeout_millis
        if self.config.namespace:
            msg, queue, selector = self._to_broker(msg, queue, selector)
        if queue is None and selector is None:  # the common case: one coroutine frame less
            self._check_single(msg)
            result = await self._send_default(msg, _Mode.SYNC, timeout, None)
        else:
            result = await self._dispatch(msg, _Mode.SYNC, queue, selector, arg, timeout)
        assert result is not None
        return self._to_user(result)

    async def recall_message(self, topic: str, recall_handle: str) -> str:
        """Withdraw a timer message before its time (5.x ``recallMessage``): ``recall_handle`` is
        its ``SendResult.recall_handle``. Returns the message's id (UNIQ_KEY) as the broker
        answers it; a handle of no pending message is answered all the same.

        Raises:
            ValidationError: a bad topic, a retry or DLQ topic, a handle that does not decode.
            MQBrokerError: the broker refused (recall off, an expired or foreign handle).
        """
        instance = self._make_sure_state_ok()
        problem = validate_topic(topic)
        if problem is not None:
            raise ValidationError(f"topic {topic!r}: {problem}", response_code=ResponseCode.MESSAGE_ILLEGAL)
        if is_retry_topic(topic) or is_dlq_topic(topic):
            raise ValidationError("topic is not supported")
        try:
            handle = RecallMessageHandle.decode(recall_handle)
        except RecallHandleError as exc:
            raise ValidationError(str(exc)) from exc
        topic = self.config.with_namespace(topic)
        await self._try_to_find_topic_publish_info(topic)
        addr = instance.find_broker_address_in_publish(
            handle.broker_name
        ) or instance.find_broker_addr_by_topic(topic)
        if not addr:
            raise MQClientError("The broker service address not found")
        header = RecallMessageRequestHeader(
            producer_group=self.config.producer_group,
            topic=topic,
            recall_handle=recall_handle,
            broker_name=handle.broker_name,
        )
        return await instance.api.recall_message(addr, header, self.config.send_msg_timeout)

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> None:
        """Send without waiting for an answer (written to the socket, nothing more)."""
        msg, queue, selector = self._to_broker(msg, queue, selector)
        await self._dispatch(msg, _Mode.ONEWAY, queue, selector, arg, self.config.send_msg_timeout)

    def send_async(
        self,
        msg: Message,
        on_success: SendCallback | None = None,
        on_exception: ExceptionCallback | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
        timeout_millis: int | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start a send and return at once: a future of the ``SendResult``, and/or callbacks.

        Callbacks run on the event loop and must not block. Network failures are retried
        ``retry_times_when_send_async_failed`` times. At most ``client_async_semaphore_value``
        async sends are in flight; beyond that this raises ``MQTooManyRequestsError`` at once.
        """
        self._make_sure_state_ok()
        tasks = self._async_tasks
        if len(tasks) >= self.config.client_async_semaphore_value:
            raise MQTooManyRequestsError(
                f"{len(tasks)} async sends in flight: client_async_semaphore_value "
                f"({self.config.client_async_semaphore_value}) reached; await some sends first"
            )
        timeout = self.config.send_msg_timeout if timeout_millis is None else timeout_millis
        coro: Coroutine[object, object, SendResult | None]
        if self.config.namespace:
            msg, queue, selector = self._to_broker(msg, queue, selector)
        if queue is None and selector is None:
            try:
                self._check_single(msg)
            except Exception as exc:  # a bad message fails the future, not the call
                coro = _raise(exc)
            else:
                coro = self._send_default(msg, _Mode.ASYNC, timeout, None)
        else:
            coro = self._dispatch(msg, _Mode.ASYNC, queue, selector, arg, timeout)
        if self.config.namespace:
            coro = self._unwrapped(coro)
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        if on_success is None and on_exception is None:
            task.add_done_callback(tasks.discard)
        else:

            def done(t: asyncio.Task[SendResult | None]) -> None:
                tasks.discard(t)
                if t.cancelled():
                    return
                exc = t.exception()
                try:
                    if exc is None:
                        if on_success is not None:
                            on_success(cast(SendResult, t.result()))
                    elif on_exception is not None:
                        on_exception(exc)
                except Exception:
                    log.exception("send callback failed")

            task.add_done_callback(done)
        return cast("asyncio.Future[SendResult]", task)

    async def _unwrapped(self, coro: Coroutine[object, object, SendResult | None]) -> SendResult | None:
        result = await coro
        return None if result is None else self._to_user(result)

    async def send_batch(
        self,
        messages: Iterable[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_millis: int | None = None,
    ) -> list[SendResult]:
        """Send messages of one topic as batches, split so each fits ``max_message_size``.

        Returns one ``SendResult`` per batch sent (its ``msg_id`` lists the batch's ids).
        Batches do not support delay levels or retry topics (Java).
        """
        msgs = [self._to_broker(m, None, None)[0] for m in messages]
        queue = None if queue is None else self.config.queue_with_namespace(queue)
        if not msgs:
            raise ValidationError("the batch is empty", response_code=ResponseCode.MESSAGE_ILLEGAL)
        topic = msgs[0].topic
        wait = msgs[0].wait_store_msg_ok
        for index, msg in enumerate(msgs):
            if msg.topic != topic:
                raise ValidationError(
                    "The topic of the messages in one batch should be the same: "
                    f"item {index} is {msg.topic!r}, not {topic!r}",
                    response_code=ResponseCode.MESSAGE_ILLEGAL,
                )
            if msg.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL, "0") not in ("0", ""):
                raise ValidationError(
                    f"TimeDelayLevel is not supported for batching (item {index})",
                    response_code=ResponseCode.MESSAGE_ILLEGAL,
                )
            if is_retry_topic(msg.topic):
                raise ValidationError(
                    "Retry Group is not supported for batching", response_code=ResponseCode.MESSAGE_ILLEGAL
                )
            if msg.wait_store_msg_ok != wait:
                raise ValidationError(
                    "The waitStoreMsgOK of the messages in one batch should the same",
                    response_code=ResponseCode.MESSAGE_ILLEGAL,
                )
            check_message(msg, self.config.max_message_size, self.config.create_topic_key)
        timeout = self.config.send_msg_timeout if timeout_millis is None else timeout_millis
        results = []
        for chunk in split_batch(msgs, self.config.max_message_size):
            ids = [m.unique_key or self._ids.create_uniq_id() for m in chunk]
            items = [
                m
                if m.unique_key
                else m.with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uid)
                for m, uid in zip(chunk, ids, strict=True)
            ]
            batch = _Batch(
                Message(
                    topic,
                    encode_batch(items),
                    properties={MessageConst.PROPERTY_WAIT_STORE_MSG_OK: str(wait).lower()},
                ),
                ",".join(ids),
            )
            result = await self._dispatch(batch.message, _Mode.SYNC, queue, None, None, timeout, batch=batch)
            assert result is not None
            results.append(self._to_user(result))
        return results

    async def _dispatch(
        self,
        msg: Message,
        mode: _Mode,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: object,
        timeout: int,
        batch: _Batch | None = None,
    ) -> SendResult | None:
        if batch is None:
            self._check_single(msg)
        else:
            self._make_sure_state_ok()
        if batch is not None and len(msg.body) > self.config.max_message_size:
            raise ValidationError(
                f"the message body size over max value, MAX: {self.config.max_message_size}",
                response_code=ResponseCode.MESSAGE_ILLEGAL,
            )
        if queue is not None:
            if queue.topic != msg.topic:
                raise ValidationError(
                    f"message's topic {msg.topic!r} not equal mq's topic {queue.topic!r}",
                    response_code=ResponseCode.MESSAGE_ILLEGAL,
                )
            began = time.monotonic()
            await self._try_to_find_topic_publish_info(msg.topic)
            return await self._send_kernel(msg, queue, mode, self._remaining(began, timeout), batch)
        if selector is not None:
            began = time.monotonic()
            info = await self._try_to_find_topic_publish_info(msg.topic)
            if not info.ok():
                raise self._no_route(msg.topic)
            try:
                mq = selector(list(info.message_queue_list), msg, arg)
            except Exception as exc:
                raise MQClientError(f"select message queue threw exception: {exc}") from exc
            if not isinstance(mq, MessageQueue):
                raise MQClientError(f"select message queue returned {mq!r}, not a MessageQueue")
            return await self._send_kernel(msg, mq, mode, self._remaining(began, timeout), batch)
        return await self._send_default(msg, mode, timeout, batch)

    def _check_single(self, msg: Message) -> None:
        """The state and message checks of a send of one message (``check_message``; the
        topic's name checks once per topic)."""
        if self._state is not _RUNNING or self._instance is None:
            self._make_sure_state_ok()
        if msg.topic in self._checked_topics and isinstance(msg, Message):
            body = msg.body
            if not body or len(body) > self.config.max_message_size:  # the message checks
                check_message(msg, self.config.max_message_size, self.config.create_topic_key)
        else:
            check_message(msg, self.config.max_message_size, self.config.create_topic_key)
            if len(self._checked_topics) < 10_000:
                self._checked_topics.add(msg.topic)

    def _no_route(self, topic: str) -> NoRouteError:
        """Why ``topic`` has no route: the name servers could not be asked, or the topic does not
        exist (and the broker does not create topics automatically)."""
        failure = self.instance.namesrv_error
        if failure is not None:
            return NoRouteError(topic, f"no name server answered: {failure}")
        return NoRouteError(topic, "FAQ: the topic does not exist and auto-creation is off")

    @staticmethod
    def _remaining(began: float, timeout: int) -> int:
        cost = int((time.monotonic() - began) * 1000)
        if cost >= timeout:
            raise MQTimeoutError(f"send call timeout: {cost}ms spent of {timeout}ms before sending")
        return timeout - cost

    async def _send_default(
        self, msg: Message, mode: _Mode, timeout: int, batch: _Batch | None
    ) -> SendResult | None:
        began = time.monotonic()
        info = self._publish_info.get(msg.topic)
        if info is None or not info.message_queue_list:
            info = await self._try_to_find_topic_publish_info(msg.topic)
            if not info.ok():
                raise self._no_route(msg.topic)
        if mode is _Mode.SYNC:
            times_total = 1 + self.config.retry_times_when_send_failed
        elif mode is _Mode.ASYNC:
            times_total = 1 + self.config.retry_times_when_send_async_failed
        else:
            times_total = 1
        fault = self.fault_strategy
        brokers_sent: list[str] = []
        last_error: MQClientError | None = None
        result: SendResult | None = None
        mq: MessageQueue | None = None
        call_timeout = False
        times = 0
        for times in range(times_total):
            if mq is None and not fault.enabled:  # the first attempt, plain round robin
                mq = info.select_one_message_queue()
            else:
                mq = fault.select_one_message_queue(info, mq.broker_name if mq is not None else None)
            brokers_sent.append(mq.broker_name)
            attempt_began = time.monotonic()
            cost = int((attempt_began - began) * 1000)
            if cost >= timeout:
                call_timeout = True
                break
            try:
                started = (
                    None
                    if self._trace is not None
                    else self._start_kernel(msg, mq, mode, timeout - cost, batch, attempt_began)
                )
                if started is not None:
                    result = await started[1]
                else:  # the broker's address is unknown yet, or a trace to write
                    result = await self._send_kernel(msg, mq, mode, timeout - cost, batch)
            except MQNetworkError as exc:
                self._update_fault(mq, attempt_began, isolation=True)
                log.warning("send to %s failed (attempt %d/%d): %s", mq, times + 1, times_total, exc)
                last_error = exc
                continue
            except MQBrokerError as exc:
                self._update_fault(mq, attempt_began, isolation=True)
                last_error = exc
                if mode is not _Mode.ASYNC and exc.response_code in PRODUCER_RETRY_RESPONSE_CODES:
                    log.warning("send to %s refused (attempt %d/%d): %s", mq, times + 1, times_total, exc)
                    continue
                raise
            except ValidationError:
                raise
            except MQClientError as exc:  # the broker is not in the route table any more
                self._update_fault(mq, attempt_began, isolation=True)
                last_error = exc
                continue
            if fault.enabled:
                self._update_fault(mq, attempt_began, isolation=False)
            if (
                result is not None
                and result.send_status is not SendStatus.SEND_OK
                and mode is _Mode.SYNC
                and self.config.retry_another_broker_when_not_store_ok
            ):
                continue
            return result
        if result is not None:
            return result
        cost = int((time.monotonic() - began) * 1000)
        detail = (
            f"Send [{times + 1}] times, still failed, cost [{cost}]ms, Topic: {msg.topic}, "
            f"BrokersSent: {brokers_sent}"
        )
        if call_timeout or last_error is None:
            raise MQTimeoutError(f"sendDefaultImpl call timeout: {detail}")
        last_error.add_note(detail)
        raise last_error

    def _update_fault(self, mq: MessageQueue, began: float, *, isolation: bool) -> None:
        self.fault_strategy.update_fault_item(mq.broker_name, (time.monotonic() - began) * 1000, isolation)

    async def _send_kernel(
        self, msg: Message, mq: MessageQueue, mode: _Mode, timeout: int, batch: _Batch | None
    ) -> SendResult | None:
        """Send ``msg`` to ``mq`` once (Java ``sendKernelImpl``)."""
        began = time.monotonic()
        if self.instance.find_broker_address_in_publish(mq.broker_name) is None:
            await self._try_to_find_topic_publish_info(mq.topic)
        started = self._start_kernel(msg, mq, mode, timeout, batch, began)
        if started is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        addr, call = started
        result = await call
        if (
            result is not None
            and self._trace is not None
            and msg.topic != self._trace.topic
            and result.region_id
            and result.trace_on
        ):
            self._trace_send(msg, addr, result, began)
        return result

    def _start_kernel(
        self, msg: Message, mq: MessageQueue, mode: _Mode, timeout: int, batch: _Batch | None, began: float
    ) -> tuple[str, Coroutine[object, object, SendResult | None]] | None:
        """The broker's address and the call that sends ``msg`` to ``mq`` (not started), or None
        when the broker's address is unknown. ``_send_default`` awaits the call itself when it
        need not trace: one coroutine frame less per send."""
        instance = self._instance
        if instance is None:
            instance = self.instance  # raises
        addr = instance.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            return None
        if batch is None:
            fields, body, uniq = self._send_fields(msg, mq)
        else:
            text = properties_to_string(msg.properties)
            fields = self._header_fields(msg.topic, True, mq.queue_id, 0, msg.flag, text)
            body, uniq = msg.body, batch.msg_ids
        remaining = timeout - int((time.monotonic() - began) * 1000)
        if remaining <= 0:
            raise MQTimeoutError(f"send to {mq} timed out before the request was written ({timeout}ms)")
        if mode is _Mode.ONEWAY:
            return addr, instance.api.send_message_oneway(
                addr, fields, body, remaining, batch=batch is not None
            )
        reply = msg.properties.get(MessageConst.PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG
        return addr, instance.api.send_message(
            addr, mq, fields, body, remaining, uniq_id=uniq, batch=batch is not None, reply=reply
        )

    def _header_fields(
        self, topic: str, batch: bool, queue_id: int, sys_flag: int, flag: int, properties: str
    ) -> dict[str, str]:
        """A SEND_MESSAGE_V2 header born now, without ``max_reconsume_times`` and with
        ``reconsume_times`` 0 (``_new_header(...).to_ext_fields()``: same keys in the same order):
        a copy of a template made once per topic with ``e`` (queue), ``g`` (born time) and ``i``
        (properties) set, ``f`` (sysflag) and ``h`` (flag) when not 0."""
        config = self.config
        if self._templates_config is not config:
            self._templates.clear()
            self._templates_config = config
        template = self._templates.get((topic, batch))
        if template is None:
            template = self._new_header(topic, 0, 0, 0, 0, "", 0, None, batch).to_ext_fields()
            if len(self._templates) < 10_000:
                self._templates[(topic, batch)] = template
        fields = template.copy()
        fields["e"] = str(queue_id)
        if sys_flag:
            fields["f"] = str(sys_flag)
        fields["g"] = str(int(time.time() * 1000))
        if flag:
            fields["h"] = str(flag)
        fields["i"] = properties
        return fields

    def _new_header(
        self,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        flag: int,
        properties: str,
        reconsume_times: int,
        max_reconsume_times: int | None,
        batch: bool,
    ) -> SendMessageRequestHeaderV2:
        """A SEND_MESSAGE_V2 header with this producer's group, default topic and unit mode."""
        config = self.config
        return SendMessageRequestHeaderV2(
            producer_group=config.producer_group,
            topic=topic,
            default_topic=config.create_topic_key,
            default_topic_queue_nums=config.default_topic_queue_nums,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            flag=flag,
            properties=properties,
            reconsume_times=reconsume_times,
            unit_mode=config.unit_mode,
            max_reconsume_times=max_reconsume_times,
            batch=batch,
        )

    def _send_fields(self, msg: Message, mq: MessageQueue) -> tuple[dict[str, str], bytes, str]:
        """The SEND_MESSAGE_V2 header of one message, its body (compressed when large) and its
        UNIQ_KEY (Java ``sendKernelImpl``)."""
        config = self.config
        props = msg.properties
        topic = msg.topic
        sys_flag = 0
        body = msg.body
        uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        extra = ""
        if not uniq:
            uniq = self._ids.create_uniq_id()
            extra = f"{_UNIQ_KEY_PREFIX}{uniq}"
        if len(body) >= config.compress_msg_body_over_howmuch:
            body = compress_body(body, config.compress_level)
            sys_flag |= _COMPRESSED_FLAG
        prepared = props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED)
        if prepared and prepared.lower() == "true":
            sys_flag |= _TRANSACTION_PREPARED_TYPE
        retry = is_retry_topic(topic)
        reconsume_times: int | None = None
        max_reconsume_times: int | None = None
        if retry:
            props = dict(props)
            reconsume = props.pop(MessageConst.PROPERTY_RECONSUME_TIME, None)
            if reconsume is not None and reconsume.lstrip("-").isdigit():
                reconsume_times = int(reconsume)
            max_reconsume = props.pop(MessageConst.PROPERTY_MAX_RECONSUME_TIMES, None)
            if max_reconsume is not None and max_reconsume.lstrip("-").isdigit():
                max_reconsume_times = int(max_reconsume)
        try:
            text = properties_to_string(props)
        except MessageEncodeError as exc:
            raise ValidationError(str(exc), response_code=ResponseCode.MESSAGE_ILLEGAL) from exc
        if extra:
            text = f"{text}{PROPERTY_SEPARATOR}{extra}" if text else extra
        if len(text) > MAX_PROPERTIES_LENGTH:
            raise ValidationError(
                f"the message properties are {len(text)} characters, over {MAX_PROPERTIES_LENGTH}",
                response_code=ResponseCode.MESSAGE_ILLEGAL,
            )
        if retry:  # "l" goes between "k" and "m": the dataclass writes the keys in order
            fields = self._new_header(
                topic,
                mq.queue_id,
                sys_flag,
                int(time.time() * 1000),
                msg.flag,
                text,
                reconsume_times if reconsume_times is not None else 0,
                max_reconsume_times,
                False,
            ).to_ext_fields()
            return fields, body, uniq
        return self._header_fields(topic, False, mq.queue_id, sys_flag, msg.flag, text), body, uniq

    def _trace_send(self, msg: Message, addr: str, result: SendResult, began: float) -> None:
        """Java ``SendMessageTraceHookImpl``: a Pub record for a send the broker answered."""
        assert self._trace is not None
        props = msg.properties
        msg_type = TraceMessageType.Normal_Msg
        if (props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED) or "").lower() == "true":
            msg_type = TraceMessageType.Trans_Msg_Half
        if "__STARTDELIVERTIME" in props or MessageConst.PROPERTY_DELAY_TIME_LEVEL in props:
            msg_type = TraceMessageType.Delay_Msg
        cost = int((time.monotonic() - began) * 1000)
        bean = TraceBean(
            topic=msg.topic,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            tags=msg.tags,
            keys=msg.keys,
            store_host=addr,
            body_length=len(msg.body),
            msg_type=msg_type,
        )
        self._trace.append(
            TraceContext(
                TraceType.Pub,
                time_stamp=int(time.time() * 1000) - cost,
                region_id=result.region_id or "",
                group_name=self.config.producer_group,
                cost_time=cost,
                success=result.send_status is SendStatus.SEND_OK,
                trace_beans=[bean],
            )
        )


@dataclass(frozen=True, slots=True)
class _Batch:
    """An encoded batch: ``message.body`` is the batch body, ``msg_ids`` the items' ids joined."""

    message: Message
    msg_ids: str


REPLY_MESSAGE_FLAG = "reply"  # Java MixAll.REPLY_MESSAGE_FLAG


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to a request message (Java ``MessageUtil.createReplyMessage``): to the
    cluster's ``<cluster>_REPLY_TOPIC``, with the request's correlation id, requester and TTL.
    Send it with any producer; the broker pushes it to the waiting ``request``.

    Raises:
        ValidationError: ``request`` is not a request as stored by a broker (no CLUSTER).
    """
    props = request.properties
    cluster = props.get(MessageConst.PROPERTY_CLUSTER)
    if cluster is None:
        raise ValidationError(
            "create reply message fail, requestMessage error, "
            f"property[{MessageConst.PROPERTY_CLUSTER}] is null."
        )
    reply = {
        MessageConst.PROPERTY_MESSAGE_TYPE: REPLY_MESSAGE_FLAG,
        MessageConst.PROPERTY_CORRELATION_ID: props.get(MessageConst.PROPERTY_CORRELATION_ID, ""),
        MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT: props.get(
            MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT, ""
        ),
        MessageConst.PROPERTY_MESSAGE_TTL: props.get(MessageConst.PROPERTY_MESSAGE_TTL, ""),
    }
    return Message(reply_topic(cluster), body, properties=reply)
