"""Message trace on the client (Java ``AsyncTraceDispatcher`` and the send, consume and
end-transaction trace hooks): with ``enable_msg_trace=True`` a producer records each send (Pub), a
transaction producer each end of a transaction (EndTransaction), and a push consumer each
consumption (SubBefore, SubAfter); the records are batched and sent in the background to
``RMQ_SYS_TRACE_TOPIC`` (or ``customized_trace_topic``) by an internal producer, as Java does:
every 100 ms the queue is drained, and a topic's batch goes out once its first record is 500 ms
old or it nears the message size limit. Recording never blocks nor fails the traced call: when
2048 records wait, new ones are dropped (counted, logged).

The internal producer's class comes from the caller (``producer_factory=Producer``): the
producer module uses this one, so this one does not import it."""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Final, Protocol

from finchmq.common.logs import RateLimitedLog
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.acl import SessionCredentials
from finchmq.protocol.message import Message
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.msg_id import UniqueKeyGenerator
from finchmq.protocol.topics import RMQ_SYS_TRACE_TOPIC
from finchmq.protocol.trace import TraceBean, TraceContext, TraceMessageType, TraceType, encode_trace_context

from .consumer.listener import CONSUME_CONTEXT_TYPE, ConsumeMessageContext
from .errors import MQClientError
from .results import SendResult

__all__ = [
    "ConsumeMessageTraceHook",
    "EndTransactionContext",
    "EndTransactionHook",
    "EndTransactionTraceHook",
    "TraceDispatcher",
    "TraceProducer",
    "TraceProducerFactory",
]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

_QUEUE_SIZE: Final = 2048
_POLL_SECONDS: Final = 0.1
_WAIT_THRESHOLD_MS: Final = 500
_MAX_BATCH_BYTES: Final = 128_000 - 10_000
_DEFAULT_TRACE_REGION_ID: Final = "DefaultRegion"  # Java MixAll.DEFAULT_TRACE_REGION_ID
_counter = itertools.count(1)
_ids = UniqueKeyGenerator()  # SubBefore/SubAfter request ids


class TraceProducer(Protocol):
    """What the dispatcher needs of its internal producer (a ``Producer``)."""

    async def start(self) -> None:
        """Connect (register with the client instance)."""
        ...

    async def send(self, msg: Message) -> SendResult:
        """Send one batch of trace records."""
        ...

    async def close(self) -> None:
        """Stop."""
        ...


class TraceProducerFactory(Protocol):
    """Makes the internal producer: ``Producer(group, **settings)``."""

    def __call__(self, producer_group: str, /, **overrides: object) -> TraceProducer:
        """A producer of ``producer_group`` with the given ``ProducerConfig`` fields."""
        ...


class TraceDispatcher:
    """Batches trace records and sends them with an internal producer on this event loop."""

    def __init__(
        self,
        group: str,
        kind: str,
        namesrv_addr: str | None,
        trace_topic: str | None,
        credentials: SessionCredentials | None = None,
        *,
        producer_factory: TraceProducerFactory,
    ) -> None:
        self.topic = trace_topic or RMQ_SYS_TRACE_TOPIC
        self._credentials = credentials  # Java passes the client's RPC hook to its trace producer
        self.dropped = 0
        self._group = f"_INNER_TRACE_PRODUCER-{group}-{kind}-{next(_counter)}"
        self._namesrv_addr = namesrv_addr
        self._records: deque[TraceContext] = deque()  # append is thread-safe (consume threads)
        self._batch: list[tuple[str, list[str]]] = []
        self._batch_bytes = 0
        self._first_at = 0.0
        self._tasks = BackgroundTasks("trace")
        self._producer_factory = producer_factory
        self._producer: TraceProducer | None = None

    def append(self, ctx: TraceContext) -> None:
        """Queue a record (from any thread); dropped when the queue is full."""
        if len(self._records) >= _QUEUE_SIZE:
            self.dropped += 1
            limited.warning("trace-dropped", "message trace queue full: a trace record was dropped")
            return
        self._records.append(ctx)

    async def start(self) -> None:
        producer = self._producer_factory(
            self._group,
            namesrv_addr=self._namesrv_addr,
            instance_name=f"PID_CLIENT_INNER_TRACE_PRODUCER_{abs(hash(self._namesrv_addr)) % 10**8}",
            send_msg_timeout=5_000,
            session_credentials=self._credentials,
        )
        await producer.start()
        self._producer = producer
        self._tasks.every(_POLL_SECONDS * 1000, self._drain, "trace-drain", _POLL_SECONDS * 1000)

    async def close(self) -> None:
        """Send what is queued, then stop."""
        await self._tasks.close()
        await self._drain(flush=True)
        producer = self._producer
        if producer is not None:
            await producer.close()

    async def _drain(self, *, flush: bool = False) -> None:
        while self._records:
            data, keys = encode_trace_context(self._records.popleft())
            if not data:
                continue
            if not self._batch:
                self._first_at = time.monotonic()
            self._batch.append((data, keys))
            self._batch_bytes += len(data)
            if self._batch_bytes >= _MAX_BATCH_BYTES:
                await self._send()
        if self._batch and (flush or (time.monotonic() - self._first_at) * 1000 >= _WAIT_THRESHOLD_MS):
            await self._send()

    async def _send(self) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        keys = list(dict.fromkeys(k for _, ks in batch for k in ks))
        msg = Message.create(self.topic, "".join(d for d, _ in batch).encode(), keys=keys)
        producer = self._producer
        if producer is None:
            return
        try:
            await producer.send(msg)
        except MQClientError as exc:
            limited.error("trace-send", "send trace data failed: %s", exc)


class ConsumeMessageTraceHook:
    """Java ``ConsumeMessageTraceHookImpl``: SubBefore when a batch goes to the listener,
    SubAfter when it returns."""

    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def hook_name(self) -> str:
        return "ConsumeMessageTraceHook"

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        beans = [
            TraceBean(
                topic=msg.topic,
                msg_id=msg.client_msg_id,
                tags=msg.tags,
                keys=msg.keys,
                store_time=msg.store_timestamp,
                body_length=msg.store_size,
                retry_times=msg.reconsume_times,
            )
            for msg in context.msg_list
            if msg.properties.get("TRACE_ON") != "false"
        ]
        if not beans:
            return
        region = context.msg_list[0].properties.get("MSG_REGION", "")
        before = TraceContext(
            TraceType.SubBefore,
            region_id=region,
            group_name=context.consumer_group,
            request_id=_ids.create_uniq_id(),
            trace_beans=beans,
        )
        context.mq_trace_context = before
        self.dispatcher.append(before)

    def consume_message_after(self, context: ConsumeMessageContext) -> None:
        before = context.mq_trace_context
        if not isinstance(before, TraceContext) or not before.trace_beans or not context.msg_list:
            return
        cost = int((time.time() * 1000 - before.time_stamp) / len(context.msg_list))
        self.dispatcher.append(
            TraceContext(
                TraceType.SubAfter,
                region_id=before.region_id,
                group_name=before.group_name,
                request_id=before.request_id,
                success=context.success,
                cost_time=cost,
                context_code=_CONTEXT_CODES.get(context.props.get(CONSUME_CONTEXT_TYPE, ""), 0),
                trace_beans=before.trace_beans,
            )
        )


# Java ConsumeReturnType ordinals, by the name the consume service records in props
_CONTEXT_CODES: Final = {"SUCCESS": 0, "TIME_OUT": 1, "EXCEPTION": 2, "RETURNNULL": 3, "FAILED": 4}


@dataclass(frozen=True, slots=True)
class EndTransactionContext:
    """Java ``EndTransactionContext``: a transaction a producer is about to end (commit, roll
    back, or leave unknown), after its local transaction ran or the broker's check was answered.

    ``message`` is the half message (as sent, or as the broker's check delivered it); ``msg_id``
    its UNIQ_KEY; ``transaction_id`` the message's transaction id (its UNIQ_KEY, None when it has
    none); ``transaction_state`` Java's ``LocalTransactionState`` name."""

    producer_group: str
    broker_addr: str
    message: Message
    msg_id: str
    transaction_id: str | None
    transaction_state: str
    from_transaction_check: bool


class EndTransactionHook(Protocol):
    """Java ``EndTransactionHook``: told of every transaction a producer ends. Called on the
    event loop; must not block. An exception is logged and ignored."""

    def hook_name(self) -> str:
        """A name for the logs."""
        ...

    def end_transaction(self, context: EndTransactionContext) -> None:
        """The producer is ending ``context``'s transaction."""
        ...


class EndTransactionTraceHook:
    """Java ``EndTransactionTraceHookImpl``: an EndTransaction record (type Trans_msg_Commit,
    whatever the state) per ended transaction; none for a message of the trace topic."""

    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def hook_name(self) -> str:
        return "EndTransactionTraceHook"

    def end_transaction(self, context: EndTransactionContext) -> None:
        msg = context.message
        if msg.topic.startswith(self.dispatcher.topic):
            return
        bean = TraceBean(
            topic=msg.topic,
            msg_id=context.msg_id,
            tags=msg.tags,
            keys=msg.keys,
            store_host=context.broker_addr,
            msg_type=TraceMessageType.Trans_msg_Commit,
            transaction_id=context.transaction_id,
            transaction_state=context.transaction_state,
            from_transaction_check=context.from_transaction_check,
        )
        self.dispatcher.append(
            TraceContext(
                TraceType.EndTransaction,
                region_id=msg.properties.get(MessageConst.PROPERTY_MSG_REGION) or _DEFAULT_TRACE_REGION_ID,
                group_name=context.producer_group,
                trace_beans=[bean],
            )
        )
