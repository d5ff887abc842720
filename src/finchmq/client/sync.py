"""The blocking API: a portal thread running the async core (house style §13, anyio's
``BlockingPortal``).

Owns: ``Portal`` (one daemon thread with its own event loop, shared by every blocking object of
the process so they share one ``MQClientInstance``) and the blocking façades ``BlockingProducer``,
``BlockingPushConsumer``, ``BlockingPullConsumer``, ``BlockingLitePullConsumer``,
``BlockingSimpleConsumer`` and ``BlockingAdminClient``. Each method is
``run_coroutine_threadsafe(coro, loop).result(timeout)`` over the async object of the same name;
there is no second copy of any logic. Calling one from a thread that runs an event loop raises
``RuntimeError`` (it would block that loop). Blocking listeners still run in the consumer's
thread pool; send callbacks run in a small callback pool (Java's
``clientCallbackExecutorThreads``), never on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Generic, Protocol, Self, TypeVar

from finchmq.protocol.auth import AclInfo, UserInfo
from finchmq.protocol.bodies import (
    BrokerStatsData,
    ClusterInfo,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    MessageRequestMode,
    ProducerConnection,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    SetMessageRequestModeRequestBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    TopicStatsTable,
)
from finchmq.protocol.filter import MessageSelector
from finchmq.protocol.message import Message, MessageExt, MessageQueue
from finchmq.protocol.trace import TraceView
from finchmq.remoting import loop_factory

from .admin import AdminClient, ClusterAclVersionInfo, ClusterBroker, MessageTrack
from .api import PullResultExt
from .config import (
    ClientConfig,
    LitePullConsumerConfig,
    ProducerConfig,
    PullConsumerConfig,
    PushConsumerConfig,
    SimpleConsumerConfig,
)
from .consumer.listener import ConcurrentlyListener, ConsumeMessageHook, OrderlyListener
from .consumer.lite_pull import LitePullConsumer
from .consumer.pop import POP_TIMEOUT_MARGIN_MS
from .consumer.pull import PullConsumer
from .consumer.push import PushConsumer
from .consumer.simple import SimpleConsumer
from .producer import ExceptionCallback, Producer, SendCallback
from .results import PullResult, SendResult
from .selector import MessageQueueSelector
from .trace import EndTransactionHook
from .transaction import (
    HalfMessage,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "BlockingAdminClient",
    "BlockingLitePullConsumer",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BlockingSimpleConsumer",
    "Portal",
]

_T = TypeVar("_T")
_C = TypeVar("_C", bound=ClientConfig)
_C_co = TypeVar("_C_co", bound=ClientConfig, covariant=True)
_LIFECYCLE_TIMEOUT: Final = 120.0  # s: start/close (close may wait for a queue's current batch)
_CALL_TIMEOUT: Final = 60.0  # s: calls without a deadline of their own
_MARGIN: Final = 5.0  # s added to a call's own deadline


class Portal:
    """A private event loop in a daemon thread (anyio ``BlockingPortal``); ``Portal.default()``."""

    _default: Portal | None = None
    _default_lock = threading.Lock()

    def __init__(self, name: str = "finchmq-portal") -> None:
        ready: concurrent.futures.Future[asyncio.AbstractEventLoop] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(ready,), name=name, daemon=True)
        self._thread.start()
        self.loop = ready.result(30)
        self.callbacks = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=f"{name}-callback")

    def _run(self, ready: concurrent.futures.Future[asyncio.AbstractEventLoop]) -> None:
        loop = loop_factory()()
        asyncio.set_event_loop(loop)
        ready.set_result(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    @classmethod
    def default(cls) -> Portal:
        """The process's portal, started on first use."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = Portal()
            return cls._default

    def call(self, coro: Coroutine[Any, Any, _T], timeout: float | None, who: str) -> _T:
        """Run ``coro`` on the portal's loop and wait at most ``timeout`` seconds.

        Raises:
            RuntimeError: called from a thread that runs an event loop.
            TimeoutError: no result in time (the coroutine is cancelled).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                f"Blocking{who} cannot be used inside the event loop; use {who} (finchmq.client) instead"
            )
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"Blocking{who}: no result within {timeout}s") from None

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Run ``coro`` on the portal's loop; returns a ``concurrent.futures.Future``."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


class _Service(Protocol[_C_co]):
    """What a blocking façade wraps: ``Producer``, ``PushConsumer``... (``ClientService``)."""

    @property
    def config(self) -> _C_co: ...
    async def start(self) -> None: ...
    async def close(self) -> None: ...


class _Blocking(Generic[_C]):
    """The part every blocking façade shares: the portal, the life cycle and ``config``.

    A subclass names the async class it wraps (``class BlockingX(_Blocking[...], wraps=X)``): error
    messages name it, and a method without a docstring of its own gets the async method's
    (``tests/client/test_blocking_api.py`` checks that every signature follows the async one)."""

    _who = ""
    wraps: type

    def __init_subclass__(cls, wraps: type | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if wraps is None:
            return
        cls.wraps = wraps
        cls._who = wraps.__name__
        for name, member in list(vars(cls).items()):
            target = getattr(wraps, name, None)
            if name.startswith("_") or not callable(member) or member.__doc__ or target is None:
                continue
            doc = inspect.getdoc(target)
            if doc:
                member.__doc__ = f"Blocking ``{wraps.__name__}.{name}``. {doc}"

    def __init__(self, service: _Service[_C], portal: Portal | None) -> None:
        self._service = service
        self._portal = portal or Portal.default()

    def _call(self, coro: Coroutine[Any, Any, _T], timeout: float | None = _CALL_TIMEOUT) -> _T:
        return self._portal.call(coro, timeout, self._who)

    def _call_within(self, coro: Coroutine[Any, Any, _T], timeout_millis: float) -> _T:
        """``_call`` for a call with a deadline of its own (ms): wait that, plus a margin."""
        return self._call(coro, timeout_millis / 1000 + _MARGIN)

    @property
    def config(self) -> _C:
        """The wrapped object's settings."""
        return self._service.config

    def start(self) -> None:
        """``await start()`` of the wrapped object, blocking."""
        self._call(self._service.start(), _LIFECYCLE_TIMEOUT)

    def shutdown(self) -> None:
        """``await close()`` of the wrapped object, blocking; idempotent."""
        self._call(self._service.close(), _LIFECYCLE_TIMEOUT)

    close = shutdown

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()


class BlockingProducer(_Blocking[ProducerConfig], wraps=Producer):
    """``Producer`` for threads: same arguments, blocking methods."""

    def __init__(
        self, config: ProducerConfig | str, /, *, portal: Portal | None = None, **overrides: object
    ) -> None:
        self.producer = Producer(config, **overrides)
        super().__init__(self.producer, portal)

    def _send_timeout(self, timeout_millis: int | None) -> int:
        return self.producer.config.send_msg_timeout if timeout_millis is None else timeout_millis

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
        timeout_millis: int | None = None,
    ) -> SendResult:
        """``Producer.send``, blocking."""
        coro = self.producer.send(msg, queue=queue, selector=selector, arg=arg, timeout_millis=timeout_millis)
        return self._call_within(coro, self._send_timeout(timeout_millis))

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: object = None,
    ) -> None:
        self._call_within(
            self.producer.send_oneway(msg, queue=queue, selector=selector, arg=arg), self._send_timeout(None)
        )

    def send_batch(
        self,
        messages: Iterable[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_millis: int | None = None,
    ) -> list[SendResult]:
        coro = self.producer.send_batch(list(messages), queue=queue, timeout_millis=timeout_millis)
        return self._call(coro, _CALL_TIMEOUT if timeout_millis is None else timeout_millis / 1000 + _MARGIN)

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
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send; a ``concurrent.futures.Future``; callbacks run in the callback pool."""
        callbacks = self._portal.callbacks

        def success(result: SendResult) -> None:
            if on_success is not None:
                callbacks.submit(on_success, result)

        def failure(exc: BaseException) -> None:
            if on_exception is not None:
                callbacks.submit(on_exception, exc)

        result: concurrent.futures.Future[SendResult] = concurrent.futures.Future()

        def copy(done: asyncio.Future[SendResult]) -> None:
            if done.cancelled():
                result.cancel()
            elif done.exception() is not None:
                result.set_exception(done.exception())
            else:
                result.set_result(done.result())

        async def start() -> None:
            self.producer.send_async(
                msg, success, failure, queue=queue, selector=selector, arg=arg, timeout_millis=timeout_millis
            ).add_done_callback(copy)

        self._call(start(), _CALL_TIMEOUT)
        return result

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self.producer.fetch_publish_message_queues(topic))

    def recall_message(self, topic: str, recall_handle: str) -> str:
        return self._call_within(self.producer.recall_message(topic, recall_handle), self._send_timeout(None))

    def request(self, msg: Message, timeout_millis: int = 3_000) -> MessageExt:
        return self._call_within(self.producer.request(msg, timeout_millis), timeout_millis)


class BlockingTransactionProducer(BlockingProducer, wraps=TransactionProducer):
    """``TransactionProducer`` for threads. The listener's methods may be plain functions: they
    run in worker threads, never on the event loop."""

    def __init__(
        self,
        config: ProducerConfig | str,
        /,
        *,
        transaction_listener: TransactionListener | None = None,
        portal: Portal | None = None,
        **overrides: object,
    ) -> None:
        self.producer = self.transaction_producer = TransactionProducer(
            config, transaction_listener=transaction_listener, **overrides
        )
        _Blocking.__init__(self, self.producer, portal)

    def set_transaction_listener(self, listener: TransactionListener) -> None:
        self.transaction_producer.set_transaction_listener(listener)

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        return self._call(self.transaction_producer.send_message_in_transaction(msg, arg))

    def send_half_message(
        self, msg: Message, *, queue: MessageQueue | None = None, timeout_millis: int | None = None
    ) -> tuple[SendResult, HalfMessage]:
        return self._call_within(
            self.transaction_producer.send_half_message(msg, queue=queue, timeout_millis=timeout_millis),
            self._send_timeout(timeout_millis),
        )

    def end_transaction(
        self,
        half: HalfMessage,
        state: LocalTransactionState,
        *,
        oneway: bool = True,
        timeout_millis: int | None = None,
        remark: str | None = None,
    ) -> None:
        self._call_within(
            self.transaction_producer.end_transaction(
                half, state, oneway=oneway, timeout_millis=timeout_millis, remark=remark
            ),
            self._send_timeout(timeout_millis),
        )

    def register_end_transaction_hook(self, hook: EndTransactionHook) -> None:
        """Call ``hook`` for every transaction this producer ends (Java ``registerEndTransactionHook``)."""
        self.transaction_producer.register_end_transaction_hook(hook)


class BlockingPushConsumer(_Blocking[PushConsumerConfig], wraps=PushConsumer):
    """``PushConsumer`` for threads. A blocking listener runs in the consume thread pool."""

    def __init__(
        self, config: PushConsumerConfig | str, /, *, portal: Portal | None = None, **overrides: object
    ) -> None:
        self.consumer = PushConsumer(config, **overrides)
        super().__init__(self.consumer, portal)

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        self._call(_run_sync(lambda: self.consumer.subscribe(topic, sub_expression)))

    def unsubscribe(self, topic: str) -> None:
        self._call(_run_sync(lambda: self.consumer.unsubscribe(topic)))

    def register_message_listener(
        self, listener: ConcurrentlyListener | OrderlyListener, *, orderly: bool | None = None
    ) -> None:
        self.consumer.register_message_listener(listener, orderly=orderly)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        self.consumer.register_consume_message_hook(hook)

    def suspend(self) -> None:
        self._call(_run_sync(self.consumer.suspend))

    def resume(self) -> None:
        self._call(_run_sync(self.consumer.resume))

    def persist_consumer_offset(self, *, force: bool = False) -> None:
        self._call(self.consumer.persist_consumer_offset(force=force))

    def running_info(self) -> ConsumerRunningInfo:
        """Blocking ``PushConsumer.consumer_running_info``: what mqadmin ``consumerStatus`` shows."""
        return self._call(_run_sync(self.consumer.consumer_running_info))

    def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        return self._call(self.consumer.fetch_subscribe_message_queues(topic))

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        self._call(self.consumer.send_message_back(msg, delay_level, broker_name))


class BlockingPullConsumer(_Blocking[PullConsumerConfig], wraps=PullConsumer):
    """``PullConsumer`` (the low-level pull API) for threads and Spark tasks."""

    def __init__(
        self, config: PullConsumerConfig | str, /, *, portal: Portal | None = None, **overrides: object
    ) -> None:
        self.consumer = PullConsumer(config, **overrides)
        super().__init__(self.consumer, portal)

    def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        return self._call(self.consumer.fetch_subscribe_message_queues(topic))

    def pull(
        self,
        mq: MessageQueue,
        sub_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int,
        *,
        timeout_millis: int | None = None,
    ) -> PullResult:
        return self._call_within(
            self.consumer.pull(mq, sub_expression, offset, max_nums, timeout_millis=timeout_millis),
            timeout_millis or self.consumer.config.consumer_pull_timeout_millis,
        )

    def pull_raw(
        self,
        mq: MessageQueue,
        sub_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int,
        *,
        timeout_millis: int | None = None,
    ) -> PullResultExt:
        """``PullConsumer.pull_raw`` (undecoded records), blocking."""
        return self._call_within(
            self.consumer.pull_raw(mq, sub_expression, offset, max_nums, timeout_millis=timeout_millis),
            timeout_millis or self.consumer.config.consumer_pull_timeout_millis,
        )

    def pull_block_if_not_found(
        self, mq: MessageQueue, sub_expression: str | MessageSelector | None, offset: int, max_nums: int
    ) -> PullResult:
        return self._call_within(
            self.consumer.pull_block_if_not_found(mq, sub_expression, offset, max_nums),
            self.consumer.config.consumer_timeout_millis_when_suspend,
        )

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._call(_run_sync(lambda: self.consumer.update_consume_offset(mq, offset)))

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool) -> int:
        return self._call(self.consumer.fetch_consume_offset(mq, from_store))

    def persist_consumer_offset(self) -> None:
        self._call(self.consumer.persist_consumer_offset())

    def min_offset(self, mq: MessageQueue) -> int:
        return self._call(self.consumer.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._call(self.consumer.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        return self._call(self.consumer.search_offset(mq, timestamp))

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        self._call(self.consumer.send_message_back(msg, delay_level, broker_name))


class BlockingLitePullConsumer(_Blocking[LitePullConsumerConfig], wraps=LitePullConsumer):
    """``LitePullConsumer`` for threads: ``poll()`` blocks up to its timeout."""

    def __init__(
        self, config: LitePullConsumerConfig | str, /, *, portal: Portal | None = None, **overrides: object
    ) -> None:
        self.consumer = LitePullConsumer(config, **overrides)
        super().__init__(self.consumer, portal)

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        self._call(_run_sync(lambda: self.consumer.subscribe(topic, sub_expression)))

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        mqs = list(queues)
        self._call(_run_sync(lambda: self.consumer.assign(mqs)))

    def assignment(self) -> set[MessageQueue]:
        return self._call(_run_sync(self.consumer.assignment))

    def poll(self, timeout_millis: int | None = None) -> list[MessageExt]:
        timeout = timeout_millis if timeout_millis is not None else self.consumer.config.poll_timeout_millis
        return self._call_within(self.consumer.poll(timeout), timeout)

    def commit_sync(self) -> None:
        self._call(self.consumer.commit_sync())

    def commit(self, offsets: dict[MessageQueue, int], persist: bool = True) -> None:
        self._call(self.consumer.commit(offsets, persist))

    def committed(self, mq: MessageQueue) -> int:
        return self._call(self.consumer.committed(mq))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._call(self.consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._call(self.consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._call(self.consumer.seek_to_end(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        queues = list(mqs)
        self._call(_run_sync(lambda: self.consumer.pause(queues)))

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        queues = list(mqs)
        self._call(_run_sync(lambda: self.consumer.resume(queues)))

    def persist_consumer_offset(self) -> None:
        self._call(self.consumer.persist_consumer_offset())

    def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        return self._call(self.consumer.fetch_message_queues(topic))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp: int) -> int:
        return self._call(self.consumer.offset_for_timestamp(mq, timestamp))


class BlockingSimpleConsumer(_Blocking[SimpleConsumerConfig], wraps=SimpleConsumer):
    """``SimpleConsumer`` for threads: ``receive()`` blocks up to ``await_duration``."""

    def __init__(
        self, config: SimpleConsumerConfig | str, /, *, portal: Portal | None = None, **overrides: object
    ) -> None:
        self.consumer = SimpleConsumer(config, **overrides)
        super().__init__(self.consumer, portal)

    def subscribe(self, topic: str, sub_expression: str | MessageSelector = "*") -> None:
        self._call(_run_sync(lambda: self.consumer.subscribe(topic, sub_expression)))

    def unsubscribe(self, topic: str) -> None:
        self._call(_run_sync(lambda: self.consumer.unsubscribe(topic)))

    def receive(self, max_message_num: int, invisible_duration: int) -> list[MessageExt]:
        coro = self.consumer.receive(max_message_num, invisible_duration)
        return self._call_within(coro, self.consumer.config.await_duration + POP_TIMEOUT_MARGIN_MS)

    def ack(self, message: MessageExt) -> None:
        self._call(self.consumer.ack(message))

    def change_invisible_duration(self, message: MessageExt, invisible_duration: int) -> MessageExt:
        return self._call(self.consumer.change_invisible_duration(message, invisible_duration))


class BlockingAdminClient(_Blocking[ClientConfig], wraps=AdminClient):
    """``AdminClient`` for scripts and the ``finchmq admin`` command."""

    def __init__(
        self, config: ClientConfig | None = None, /, *, portal: Portal | None = None, **overrides: object
    ) -> None:
        self.admin = AdminClient(config, **overrides)
        super().__init__(self.admin, portal)

    def cluster_info(self) -> ClusterInfo:
        return self._call(self.admin.cluster_info())

    def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        return self._call(self.admin.master_addrs(cluster))

    def broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        return self._call(self.admin.broker_runtime_stats(broker_addr))

    def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        return self._call(self.admin.get_broker_config(broker_addr))

    def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        return self._call(self.admin.producer_connection(group, topic))

    def create_and_update_topic_config(self, broker_addr: str, config: TopicConfig) -> None:
        return self._call(self.admin.create_and_update_topic_config(broker_addr, config))

    def examine_subscription_group_config(
        self, broker_addr: str, group: str
    ) -> SubscriptionGroupConfig | None:
        return self._call(self.admin.examine_subscription_group_config(broker_addr, group))

    def user_subscription_groups(self, broker_addr: str) -> SubscriptionGroupWrapper:
        return self._call(self.admin.user_subscription_groups(broker_addr))

    def user_topic_configs(
        self, broker_addr: str, *, special_topic: bool = False
    ) -> TopicConfigSerializeWrapper:
        return self._call(self.admin.user_topic_configs(broker_addr, special_topic=special_topic))

    def all_producer_info(self, broker_addr: str) -> ProducerTableInfo:
        return self._call(self.admin.all_producer_info(broker_addr))

    def query_consume_queue(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        index: int,
        count: int,
        consumer_group: str | None = None,
    ) -> QueryConsumeQueueResponseBody:
        return self._call(
            self.admin.query_consume_queue(broker_addr, topic, queue_id, index, count, consumer_group)
        )

    def cluster_broker_addrs(self, cluster: str | None = None) -> list[str]:
        return self._call(self.admin.cluster_broker_addrs(cluster))

    def clean_expired_consume_queue(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, bool]:
        return self._call(self.admin.clean_expired_consume_queue(cluster=cluster, broker_addr=broker_addr))

    def clean_unused_topic(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, bool]:
        return self._call(self.admin.clean_unused_topic(cluster=cluster, broker_addr=broker_addr))

    def delete_expired_commit_log(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, bool]:
        return self._call(self.admin.delete_expired_commit_log(cluster=cluster, broker_addr=broker_addr))

    def examine_topic_consume_by_who(self, topic: str) -> list[str]:
        return self._call(self.admin.examine_topic_consume_by_who(topic))

    # ACL 2.0 (AdminClient's docstrings say what each does)
    def create_user(
        self,
        username: str,
        password: str,
        user_type: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        return self._call(
            self.admin.create_user(username, password, user_type, cluster=cluster, broker_addr=broker_addr)
        )

    def update_user(
        self,
        username: str,
        password: str | None = None,
        user_type: str | None = None,
        user_status: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        return self._call(
            self.admin.update_user(
                username, password, user_type, user_status, cluster=cluster, broker_addr=broker_addr
            )
        )

    def delete_user(
        self, username: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        return self._call(self.admin.delete_user(username, cluster=cluster, broker_addr=broker_addr))

    def get_user(self, broker_addr: str, username: str) -> UserInfo | None:
        return self._call(self.admin.get_user(broker_addr, username))

    def list_user(self, broker_addr: str, name_filter: str | None = None) -> list[UserInfo]:
        return self._call(self.admin.list_user(broker_addr, name_filter))

    def create_acl(
        self,
        subject: str,
        resources: Sequence[str],
        actions: Sequence[str],
        decision: str,
        source_ips: Sequence[str] | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        update: bool = False,
    ) -> list[str]:
        return self._call(
            self.admin.create_acl(
                subject, resources, actions, decision, source_ips,
                cluster=cluster, broker_addr=broker_addr, update=update,
            )
        )  # fmt: skip

    def put_acl(
        self,
        acl: AclInfo,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        update: bool = False,
    ) -> list[str]:
        return self._call(self.admin.put_acl(acl, cluster=cluster, broker_addr=broker_addr, update=update))

    def delete_acl(
        self,
        subject: str,
        resource: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        return self._call(self.admin.delete_acl(subject, resource, cluster=cluster, broker_addr=broker_addr))

    def get_acl(self, broker_addr: str, subject: str) -> AclInfo | None:
        return self._call(self.admin.get_acl(broker_addr, subject))

    def list_acl(
        self, broker_addr: str, subject_filter: str | None = None, resource_filter: str | None = None
    ) -> list[AclInfo]:
        return self._call(self.admin.list_acl(broker_addr, subject_filter, resource_filter))

    def create_and_update_plain_access_config(
        self,
        access_key: str,
        secret_key: str | None = None,
        *,
        white_remote_address: str | None = None,
        admin: bool = False,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: Sequence[str] = (),
        group_perms: Sequence[str] = (),
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        return self._call(
            self.admin.create_and_update_plain_access_config(
                access_key,
                secret_key,
                white_remote_address=white_remote_address,
                admin=admin,
                default_topic_perm=default_topic_perm,
                default_group_perm=default_group_perm,
                topic_perms=topic_perms,
                group_perms=group_perms,
                cluster=cluster,
                broker_addr=broker_addr,
            )
        )

    def delete_plain_access_config(
        self, access_key: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        return self._call(
            self.admin.delete_plain_access_config(access_key, cluster=cluster, broker_addr=broker_addr)
        )

    def update_global_white_addr_config(
        self,
        addresses: Sequence[str],
        *,
        acl_file_full_path: str | None = None,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        return self._call(
            self.admin.update_global_white_addr_config(
                addresses, acl_file_full_path=acl_file_full_path, cluster=cluster, broker_addr=broker_addr
            )
        )

    def examine_broker_cluster_acl_version_info(self, broker_addr: str) -> ClusterAclVersionInfo:
        return self._call(self.admin.examine_broker_cluster_acl_version_info(broker_addr))

    def view_broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str) -> BrokerStatsData:
        return self._call(self.admin.view_broker_stats_data(broker_addr, stats_name, stats_key))

    def create_subscription_group(
        self, config: SubscriptionGroupConfig, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        return self._call(
            self.admin.create_subscription_group(config, cluster=cluster, broker_addr=broker_addr)
        )

    def delete_subscription_group(
        self, group: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        return self._call(
            self.admin.delete_subscription_group(group, cluster=cluster, broker_addr=broker_addr)
        )

    def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, *, offline: bool = False
    ) -> None:
        self._call(self.admin.clone_group_offset(src_group, dest_group, topic, offline=offline))

    def broker_consume_stats(self, broker_addr: str, *, is_order: bool = False) -> ConsumeStatsList:
        return self._call(self.admin.broker_consume_stats(broker_addr, is_order=is_order))

    def change_write_perm(self, broker_name: str, *, writable: bool) -> dict[str, int]:
        return self._call(self.admin.change_write_perm(broker_name, writable=writable))

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        return self._call(self.admin.namesrv_config())

    def update_namesrv_config(self, properties: dict[str, str]) -> None:
        self._call(self.admin.update_namesrv_config(properties))

    def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        self._call(self.admin.update_kv_config(namespace, key, value))

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        return self._call(self.admin.get_kv_config(namespace, key))

    def delete_kv_config(self, namespace: str, key: str) -> None:
        self._call(self.admin.delete_kv_config(namespace, key))

    def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> str | None:
        return self._call(self.admin.update_broker_config(broker_addr, properties))

    def create_topic(self, topic: str, **kwargs: Any) -> list[str]:
        return self._call(self.admin.create_topic(topic, **kwargs))

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        self._call(self.admin.delete_topic(topic, cluster))

    def topic_list(self) -> list[str]:
        return self._call(self.admin.topic_list())

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._call(self.admin.topic_route(topic))

    def topic_status(self, topic: str) -> TopicStatsTable:
        return self._call(self.admin.topic_status(topic))

    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        return self._call(self.admin.consume_stats(group, topic))

    def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        return self._call(self.admin.consumer_connection(group, broker_addr))

    def reset_offset_by_time(
        self, group: str, topic: str, timestamp: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        return self._call(self.admin.reset_offset_by_time(group, topic, timestamp, force=force))

    def update_consume_offsets(self, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        self._call(self.admin.update_consume_offsets(group, dict(offsets)))

    def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> ConsumerRunningInfo:
        return self._call(self.admin.consumer_running_info(group, client_id, jstack=jstack))

    def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> ConsumeMessageDirectlyResult:
        return self._call(self.admin.consume_message_directly(group, client_id, msg_id, topic))

    def cluster_brokers(self) -> list[ClusterBroker]:
        return self._call(self.admin.cluster_brokers())

    def set_message_request_mode(
        self,
        topic: str,
        group: str,
        mode: MessageRequestMode,
        pop_share_queue_num: int = 0,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        return self._call(
            self.admin.set_message_request_mode(
                topic, group, mode, pop_share_queue_num, cluster=cluster, broker_addr=broker_addr
            )
        )

    def message_request_modes(
        self, cluster: str | None = None
    ) -> dict[str, dict[str, SetMessageRequestModeRequestBody]]:
        return self._call(self.admin.message_request_modes(cluster))

    def subscription_groups(self, cluster: str | None = None) -> dict[str, SubscriptionGroupConfig]:
        return self._call(self.admin.subscription_groups(cluster))

    def query_msg_trace_by_id(self, msg_id: str, trace_topic: str | None = None) -> list[TraceView]:
        return self._call(self.admin.query_msg_trace_by_id(msg_id, trace_topic))

    def message_track_detail(self, msg: MessageExt) -> list[MessageTrack]:
        return self._call(self.admin.message_track_detail(msg))

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        return self._call(self.admin.view_message(msg_id, topic))

    def query_message(
        self, topic: str, key: str, max_num: int = 64, begin: int = 0, end: int | None = None
    ) -> list[MessageExt]:
        return self._call(self.admin.query_message(topic, key, max_num, begin, end))

    def queue_offsets(self, mq: MessageQueue) -> tuple[int, int]:
        return self._call(self.admin.queue_offsets(mq))


async def _run_sync(fn: Callable[[], _T]) -> _T:
    """Run a plain function on the portal's loop (objects that belong to it)."""
    return fn()
