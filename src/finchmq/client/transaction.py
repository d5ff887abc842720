"""Transactional messages (Java ``TransactionMQProducer`` and ``DefaultMQProducerImpl``'s
transaction path).

``send_message_in_transaction(msg, arg)`` sends ``msg`` as a half message (TRAN_MSG=true, the
producer group in PGROUP; the broker keeps it from consumers), runs the listener's
``execute_local_transaction(msg, arg)``, and ends the transaction with END_TRANSACTION: commit,
roll back, or leave it unknown. For an unknown or unanswered transaction the broker later sends
CHECK_TRANSACTION_STATE to a producer of the group, whose ``check_local_transaction(msg)``
answers. A listener's methods may be coroutines, or plain functions (run in a worker thread, so
a database call does not stall the event loop).

As Java's producer, a delay level on a transactional message is ignored. With
``enable_msg_trace=True`` each end of a transaction (commit, rollback or unknown, by the local
transaction or by a check's answer) writes an EndTransaction trace record, as Java's
``EndTransactionTraceHookImpl`` does; ``register_end_transaction_hook`` adds other hooks.

A transaction may also span processes: ``send_half_message`` stores a half message and returns
its ``HalfMessage`` (picklable), and any producer of the group ends it with ``end_transaction``,
oneway as Java's producer or awaiting the broker's answer. The Spark sink's exactly-once mode
sends halves from its tasks and ends them from the driver (``docs/spark.md``).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from finchmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from finchmq.protocol.message import Message, MessageExt, MessageQueue
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.msg_id import decode_offset_msg_id

from .config import ProducerConfig
from .errors import ClientStateError, MQClientError
from .instance import MQClientInstance
from .producer import Producer
from .results import SendResult, SendStatus
from .trace import EndTransactionContext, EndTransactionHook, EndTransactionTraceHook

__all__ = [
    "HalfMessage",
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    """Java ``LocalTransactionState`` (with its spelling, ``UNKNOW``)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_END_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: MessageSysFlag.TRANSACTION_NOT_TYPE,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionSendResult(SendResult):
    """The half message's ``SendResult`` and what the local transaction decided."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


@dataclass(frozen=True, slots=True)
class HalfMessage:
    """A stored half message, as END_TRANSACTION names it: its real ``topic`` (whose route gives
    the broker's address), the ``broker_name`` holding it, its offset in the half queue
    (``tranStateTableOffset``) and in the commit log, and its UNIQ_KEY ``msg_id``."""

    topic: str
    broker_name: str
    queue_offset: int
    commit_log_offset: int
    msg_id: str

    @classmethod
    def of(cls, sent: SendResult) -> HalfMessage:
        """The half message a send of a prepared message stored."""
        where = decode_offset_msg_id(sent.offset_msg_id or sent.msg_id)
        mq = sent.message_queue
        return cls(mq.topic, mq.broker_name, sent.queue_offset, where.commit_log_offset, sent.msg_id)


class TransactionListener(Protocol):
    """Java ``TransactionListener``; either method may be ``async``."""

    def execute_local_transaction(
        self, msg: Message, arg: Any
    ) -> LocalTransactionState | Awaitable[LocalTransactionState]:
        """Run the local transaction for the half message ``msg`` (its UNIQ_KEY is the
        transaction id) and say whether to commit, roll back, or leave it to a later check."""
        ...

    def check_local_transaction(
        self, msg: MessageExt
    ) -> LocalTransactionState | Awaitable[LocalTransactionState]:
        """The broker asks about an unfinished transaction (``msg`` is its half message)."""
        ...


async def _ask(method: Any, *args: Any) -> LocalTransactionState:
    if inspect.iscoroutinefunction(method):
        state = await method(*args)
    else:
        state = await asyncio.to_thread(method, *args)
        if inspect.isawaitable(state):
            state = await state
    return state if isinstance(state, LocalTransactionState) else LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    """A producer of transactional messages (Java ``TransactionMQProducer``).

    ``TransactionProducer("group", namesrv_addr=..., transaction_listener=listener)``; also a
    plain producer for other sends. Keep one started per group while transactions may be
    checked: the broker asks any live producer of the group.
    """

    def __init__(
        self,
        config: ProducerConfig | str,
        /,
        *,
        transaction_listener: TransactionListener | None = None,
        **overrides: object,
    ) -> None:
        super().__init__(config, **overrides)
        self.transaction_listener = transaction_listener
        self.end_transaction_hooks: list[EndTransactionHook] = []

    async def start(self, *, instance: MQClientInstance | None = None) -> None:
        """As ``Producer.start``; with message trace on, also traces the ends of transactions."""
        await super().start(instance=instance)
        trace = self._trace
        if trace is not None and not any(
            isinstance(h, EndTransactionTraceHook) and h.dispatcher is trace
            for h in self.end_transaction_hooks
        ):
            self.register_end_transaction_hook(EndTransactionTraceHook(trace))

    def register_end_transaction_hook(self, hook: EndTransactionHook) -> None:
        """Java ``registerEndTransactionHook``: call ``hook`` for every transaction this producer
        ends (before END_TRANSACTION is sent)."""
        self.end_transaction_hooks.append(hook)

    def _execute_end_transaction_hook(
        self,
        msg: Message,
        msg_id: str,
        broker_addr: str,
        state: LocalTransactionState,
        transaction_id: str | None,
        from_transaction_check: bool,
    ) -> None:
        """Java ``doExecuteEndTransactionHook``: each hook in turn; a failing one is logged."""
        if not self.end_transaction_hooks:
            return
        context = EndTransactionContext(
            producer_group=self.config.producer_group,
            broker_addr=broker_addr,
            message=msg,
            msg_id=msg_id,
            transaction_id=transaction_id,
            transaction_state=state.value,
            from_transaction_check=from_transaction_check,
        )
        for hook in self.end_transaction_hooks:
            try:
                hook.end_transaction(context)
            except Exception:
                log.warning("failed to executeEndTransactionHook %s", hook.hook_name(), exc_info=True)

    def set_transaction_listener(self, listener: TransactionListener) -> None:
        """Java ``setTransactionListener``: who runs local transactions and answers checks."""
        self.transaction_listener = listener

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it.

        Raises:
            ClientStateError: no transaction listener, or not started.
            MQClientError: the half message could not be sent (nothing was done locally).
        """
        listener = self.transaction_listener
        if listener is None:
            raise ClientStateError("TransactionListener is null: set transaction_listener first")
        half = self._half_message(msg)
        try:
            sent = await self.send(half)
        except MQClientError as exc:
            raise MQClientError(f"send message Exception: {exc}", response_code=exc.response_code) from exc
        state = LocalTransactionState.UNKNOW
        failure: BaseException | None = None
        if sent.send_status is SendStatus.SEND_OK:
            with_id = half.with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, sent.msg_id)
            try:
                state = await _ask(listener.execute_local_transaction, with_id, arg)
            except Exception as exc:
                log.info("local transaction of %s failed: %s", sent.msg_id, exc)
                failure = exc
        else:  # stored, but not as safely as asked: Java rolls back
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end_transaction(half, sent, state, failure)
        except MQClientError as exc:
            log.warning(
                "local transaction %s is %s, but ending it on the broker failed: %s",
                sent.msg_id,
                state.name,
                exc,
            )
        return TransactionSendResult(**asdict(sent), local_transaction_state=state)

    def _half_message(self, msg: Message) -> Message:
        """``msg`` as a half message of this producer's group (TRAN_MSG, PGROUP; no delay level)."""
        return (
            msg.without_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
            .with_property(MessageConst.PROPERTY_TRANSACTION_PREPARED, "true")
            .with_property(MessageConst.PROPERTY_PRODUCER_GROUP, self.config.producer_group)
        )

    async def send_half_message(
        self, msg: Message, *, queue: MessageQueue | None = None, timeout_millis: int | None = None
    ) -> tuple[SendResult, HalfMessage]:
        """Store ``msg`` as a half message and leave its transaction open: ``end_transaction``
        (in this process or in any other with a producer of the group) or the broker's check
        ends it. Runs no local transaction; the listener only answers checks.

        Raises as ``send`` does; a send the broker answered without SEND_OK stored the half
        message all the same (the caller decides whether to roll it back).
        """
        sent = await self.send(self._half_message(msg), queue=queue, timeout_millis=timeout_millis)
        return sent, HalfMessage.of(sent)

    async def end_transaction(
        self,
        half: HalfMessage,
        state: LocalTransactionState,
        *,
        oneway: bool = True,
        timeout_millis: int | None = None,
        remark: str | None = None,
    ) -> None:
        """END_TRANSACTION for ``half``: commit or roll back (or, oneway only, leave it unknown).

        ``oneway`` (Java's way) returns once the request is written: nothing says the broker got
        it, and if it did not its check asks later. Otherwise this waits for the broker's answer,
        sent once the commit or rollback is stored.

        Raises:
            ValueError: UNKNOW awaiting an answer (the broker answers none).
            MQBrokerError: the broker refused (no such half message, another group's): nothing done.
            MQClientError: the request failed or timed out; if it reached the broker, it may be done.
        """
        if state is LocalTransactionState.UNKNOW and not oneway:
            raise ValueError("the broker does not answer END_TRANSACTION with UNKNOW: send it oneway")
        traced = Message.create(
            half.topic, properties={MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: half.msg_id}
        )
        await self._end(half, state, oneway, timeout_millis, remark, half.msg_id, traced, half.msg_id)

    async def _end(
        self,
        half: HalfMessage,
        state: LocalTransactionState,
        oneway: bool,
        timeout_millis: int | None,
        remark: str | None,
        transaction_id: str | None,
        msg: Message,
        traced_transaction_id: str | None,
    ) -> None:
        """END_TRANSACTION of ``half``; the end-transaction hooks see ``msg`` (the half message)
        and ``traced_transaction_id`` (its transaction id, Java ``Message.getTransactionId``)."""
        addr = self.instance.find_broker_address_in_publish(half.broker_name)
        if addr is None:  # a process that has not sent to the topic yet: its route first
            await self._try_to_find_topic_publish_info(self.config.with_namespace(half.topic))
            addr = self.instance.find_broker_address_in_publish(half.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{half.broker_name}] not exist")
        header = EndTransactionRequestHeader(
            producer_group=self.config.producer_group,
            tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset,
            commit_or_rollback=_END_TYPE[state],
            msg_id=half.msg_id,
            transaction_id=transaction_id,
        )
        self._execute_end_transaction_hook(msg, half.msg_id, addr, state, traced_transaction_id, False)
        timeout = self.config.send_msg_timeout if timeout_millis is None else timeout_millis
        api = self.instance.api
        if oneway:
            await api.end_transaction_oneway(addr, header, remark, timeout)
        else:
            await api.end_transaction(addr, header, remark, timeout)

    async def _end_transaction(
        self, half: Message, sent: SendResult, state: LocalTransactionState, failure: BaseException | None
    ) -> None:
        """Java ``endTransaction``: END_TRANSACTION, oneway, to the master that holds the half
        message ``half`` (whose transaction id is its UNIQ_KEY once stored with SEND_OK)."""
        broker_name = sent.message_queue.broker_name
        if self.instance.find_broker_address_in_publish(broker_name) is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        remark = f"executeLocalTransactionBranch exception: {failure!r}" if failure is not None else None
        traced_transaction_id = sent.msg_id if sent.send_status is SendStatus.SEND_OK else None
        await self._end(
            HalfMessage.of(sent), state, True, None, remark, sent.transaction_id, half, traced_transaction_id
        )

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        """The broker asks about a transaction (CHECK_TRANSACTION_STATE): ask the listener in the
        background and answer with END_TRANSACTION (Java ``checkTransactionState``)."""
        self.instance.tasks.spawn(self._answer_check(broker_addr, msg, header), f"check-{header.msg_id}")

    async def _answer_check(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        listener = self.transaction_listener
        if listener is None:
            log.warning(
                "the broker asks about transaction %s, but there is no transaction listener", header.msg_id
            )
            return
        failure: BaseException | None = None
        user_msg = msg
        if self.config.namespace:  # Java ClientRemotingProcessor.checkTransactionState
            user_msg = replace(msg, topic=self.config.without_namespace(msg.topic))
        try:
            state = await _ask(listener.check_local_transaction, user_msg)
        except Exception as exc:
            log.info("checking transaction %s failed: %s", header.msg_id, exc)
            state, failure = LocalTransactionState.UNKNOW, exc
        answer = EndTransactionRequestHeader(
            producer_group=self.config.producer_group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=_END_TYPE[state],
            msg_id=msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
            transaction_id=header.transaction_id,
            from_transaction_check=True,
        )
        remark = f"checkLocalTransactionState Exception: {failure!r}" if failure is not None else None
        self._execute_end_transaction_hook(
            msg,
            answer.msg_id,
            broker_addr,
            state,
            msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or None,
            True,
        )
        try:
            await self.instance.api.end_transaction_oneway(broker_addr, answer, remark, 3000)
        except MQClientError as exc:
            log.warning("answering the check of transaction %s failed: %s", header.msg_id, exc)
