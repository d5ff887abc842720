"""The writing half: DataFrame rows to RocketMQ messages, sent in batches (at least once) or
as half messages (exactly once).

Owns: the sink's column contract (``check_input_schema``), ``WriteIds`` (the deterministic
UNIQ_KEY of every row), ``write_batches`` (one Spark task's rows, sent) and ``write_halves``
(one task's rows as half messages of its own transaction, ``TxnTag``; what it stored is reported
to the driver as ``HalvesSent``, which ``_transactions`` commits or rolls back). Imports:
``finchmq.client``, pyarrow, pyspark's types.

Strategy: rows arrive as Arrow record batches; each is turned into ``Message`` values column by
column and cut into ``sendBatchSize`` SEND_BATCH_MESSAGE requests. Up to ``maxInFlight``
requests run at once on the client's portal loop. Rows without a ``shardingKey`` go through the
producer's default queue selection (round robin, retried on another broker); rows with one go
to ``queues[abs(javaHash(key)) % n]`` (RocketMQ's ``SelectMessageQueueByHash``, the same queue
a Java or C++ producer picks), and each such queue has at most one request in flight, so rows
of one key are stored in the order Spark gave them. The task returns only after every request
succeeded; any failure fails the task, and Spark retries it: at least once. A row's UNIQ_KEY is
a hash of (query id, batch id, partition, row index), so the retried rows carry the ids of the
first attempt and a consumer can drop duplicates by ``msgId``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import time
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from finchmq.client import (
    BlockingProducer,
    BlockingTransactionProducer,
    BrokerBusyError,
    HalfMessage,
    LocalTransactionState,
    Message,
    MessageConst,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    MQNetworkError,
    MQTimeoutError,
    NoRouteError,
    Portal,
    Producer,
    SendResult,
    SendStatus,
    TransactionProducer,
    select_message_queue_by_hash,
)

from ._clients import shared_admin, shared_producer
from .options import OptionError, WriteOptions

__all__ = [
    "TXN_PROPERTY",
    "HalvesSent",
    "SinkError",
    "TxnTag",
    "WriteIds",
    "check_input_schema",
    "end_all",
    "write_batches",
    "write_halves",
]

log = logging.getLogger(__name__)

_BODY_TYPES: Final = (BinaryType, StringType)
_KEY_TYPES: Final = (StringType, ByteType, ShortType, IntegerType, LongType)
_BUSY_FIRST_PAUSE_S: Final = 0.02
_BUSY_MAX_PAUSE_S: Final = 1.0
_BUSY_BUDGET_S: Final = 60.0
_MARGIN_S: Final = _BUSY_BUDGET_S + 30.0
_T = TypeVar("_T")


class SinkError(ValueError):
    """The DataFrame cannot be written: a missing or mistyped column, a bad row."""


def _is_string_array(dt: DataType) -> bool:
    return isinstance(dt, ArrayType) and isinstance(dt.elementType, StringType)


def _is_string_map(dt: DataType) -> bool:
    return (
        isinstance(dt, MapType)
        and isinstance(dt.keyType, StringType)
        and isinstance(dt.valueType, StringType)
    )


def check_input_schema(schema: StructType, opts: WriteOptions) -> None:
    """Raise ``SinkError`` naming the column if the DataFrame does not fit the sink.

    ``body`` (binary or string) is required; ``topic`` (string) unless the ``topic`` option is
    set; ``tags`` (string), ``keys`` (string or array<string>), ``properties``
    (map<string,string>) and ``shardingKey`` (string or integer) are optional. Other columns are
    ignored, so a DataFrame read from the source can be written back as it is.
    """
    fields = {f.name: f.dataType for f in schema.fields}
    rules: list[tuple[str, bool, str]] = [
        ("body", isinstance(fields.get("body"), _BODY_TYPES), "binary or string"),
        ("topic", isinstance(fields.get("topic"), StringType), "string"),
        ("tags", isinstance(fields.get("tags"), StringType), "string"),
        ("keys", isinstance(fields.get("keys"), StringType) or _is_string_array(fields["keys"])
         if "keys" in fields else True, "string or array<string>"),
        ("properties", _is_string_map(fields["properties"]) if "properties" in fields else True,
         "map<string,string>"),
        ("shardingKey", isinstance(fields.get("shardingKey"), _KEY_TYPES), "string or an integer type"),
    ]  # fmt: skip
    if "body" not in fields:
        raise SinkError(
            "rocketmq sink: the DataFrame needs a 'body' column (binary or string); "
            f"its columns are {list(fields)}"
        )
    if "topic" not in fields and opts.topic is None:
        raise SinkError(
            "rocketmq sink: no topic: set the 'topic' option or give the DataFrame a 'topic' column (string)"
        )
    for name, ok, expected in rules:
        if name in fields and not ok:
            raise SinkError(
                f"rocketmq sink: column {name!r} is {fields[name].simpleString()}; it must be {expected}"
            )


@dataclass(frozen=True, slots=True)
class WriteIds:
    """Where a task's rows come from: ``query`` (the streaming query id, or a write's own id)
    and ``batch`` (the micro-batch id, 0 for a batch write) plus the partition."""

    query: str
    batch: str
    partition: int

    def uniq_key(self, row: int) -> str:
        """32 upper-case hex digits, the shape of RocketMQ's UNIQ_KEY; the same for the same row."""
        data = f"{self.query}/{self.batch}/{self.partition}/{row}".encode()
        return hashlib.blake2b(data, digest_size=16).hexdigest().upper()


@dataclass(frozen=True, slots=True)
class _Lane:
    """Requests that may be reordered among themselves: a topic (default selection), or one
    queue (sharded rows, strictly in order)."""

    topic: str
    queue: MessageQueue | None


class _Sender:
    """What both senders share: the producer, the portal, route look-ups and error wording."""

    def __init__(self, producer: BlockingProducer, opts: WriteOptions) -> None:
        self.producer = producer
        self.portal = Portal.default()
        self.opts = opts
        self._queues: dict[str, list[MessageQueue]] = {}

    def queues(self, topic: str) -> list[MessageQueue]:
        found = self._queues.get(topic)
        if found is None:
            try:
                mqs = self.producer.fetch_publish_message_queues(topic)
            except MQClientError as exc:
                raise self._explain(exc, topic) from exc
            found = self._queues[topic] = sorted(mqs, key=lambda q: (q.broker_name, q.queue_id))
        return found

    def _explain(self, exc: MQClientError, topic: str) -> Exception:
        """The client's error as the sink's user should read it (naming the option or topic)."""
        if isinstance(exc, NoRouteError):
            try:  # the producer reports an unreachable name server as "no route" too
                shared_admin(self.opts.name_server, self.opts.credentials, self.opts.tls).cluster_info()
            except (MQNetworkError, MQTimeoutError) as probe:
                return OptionError(
                    "nameServer", self.opts.name_server, f"cannot reach the name server or broker: {probe}"
                )
            return SinkError(
                f"rocketmq sink: topic {topic!r} does not exist on the name server {self.opts.name_server} "
                "and the broker does not create topics on first send (autoCreateTopicEnable=false); "
                "create it first"
            )
        if isinstance(exc, MQNetworkError | MQTimeoutError) and not isinstance(exc, MQBrokerError):
            return OptionError(
                "nameServer", self.opts.name_server, f"cannot reach the name server or broker: {exc}"
            )
        return exc

    def _result(self, future: concurrent.futures.Future[_T], topic: str) -> _T:
        timeout = self.opts.send_timeout_ms / 1000 + _MARGIN_S
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise MQClientError(f"rocketmq sink: a send got no answer within {timeout:.0f}s") from None
        except MQClientError as exc:
            explained = self._explain(exc, topic)
            if explained is exc:
                raise
            raise explained from exc


class _BatchSender(_Sender):
    """Runs ``send_batch`` requests with at most ``max_in_flight`` pending, one per ordered queue."""

    def __init__(self, producer: BlockingProducer, opts: WriteOptions) -> None:
        super().__init__(producer, opts)
        self.pending: deque[tuple[_Lane, concurrent.futures.Future[list[SendResult]]]] = deque()
        self.sent = 0

    def _wait_one(self) -> None:
        lane, future = self.pending.popleft()
        results = self._result(future, lane.topic)
        self.sent += sum(len(r.msg_id.split(",")) for r in results)

    def send(self, lane: _Lane, messages: list[Message]) -> None:
        size = self.opts.send_batch_size
        for lo in range(0, len(messages), size):
            chunk = messages[lo : lo + size]
            if lane.queue is not None:
                while any(pending_lane == lane for pending_lane, _ in self.pending):
                    self._wait_one()
            while len(self.pending) >= self.opts.max_in_flight:
                self._wait_one()
            coro = _send_batch(self.producer.producer, chunk, lane.queue, self.opts.send_timeout_ms)
            self.pending.append((lane, self.portal.submit(coro)))

    def drain(self) -> None:
        while self.pending:
            self._wait_one()

    def cancel(self) -> None:
        for _, future in self.pending:
            future.cancel()
        self.pending.clear()


_Pending = tuple[_Lane, int, "concurrent.futures.Future[tuple[SendResult, HalfMessage]]"]


class _HalfSender(_Sender):
    """Sends each row as a half message (one SEND_MESSAGE each: a broker stores no batch of
    them), at most ``max_in_flight`` pending, and records where each one is stored, in row
    order (``HalvesSent``). Sharded rows go to their queue; their order is the driver's to keep
    (it commits them in row order), so they need no lane of their own here."""

    def __init__(self, producer: BlockingTransactionProducer, opts: WriteOptions) -> None:
        super().__init__(producer, opts)
        self.transactional = producer.transaction_producer
        self.pending: deque[_Pending] = deque()
        self.places: dict[tuple[str, str], int] = {}
        self.lanes: dict[tuple[str, str, int], int] = {}
        self.place: array[int] = array("H")
        self.lane: array[int] = array("i")
        self.queue_offsets: array[int] = array("q")
        self.commit_log_offsets: array[int] = array("q")
        self.halves: list[HalfMessage] = []  # stored so far (to roll back if the task fails)
        self.first_born_ms = 0

    def _wait_one(self) -> None:
        lane, row, future = self.pending.popleft()
        sent, half = self._result(future, lane.topic)
        self.halves.append(half)
        if sent.send_status is not SendStatus.SEND_OK:  # stored, not as safely as asked: Java rolls back
            raise MQClientError(
                f"rocketmq sink: half message of row {row} stored with {sent.send_status.name}"
            )
        place = self.places.setdefault((half.topic, half.broker_name), len(self.places))
        if place > 0xFFFF:
            raise SinkError("rocketmq sink: a task wrote to more than 65535 (topic, broker) pairs")
        self.place[row] = place
        self.queue_offsets[row] = half.queue_offset
        self.commit_log_offsets[row] = half.commit_log_offset
        if lane.queue is not None:
            mq = sent.message_queue
            self.lane[row] = self.lanes.setdefault((mq.topic, mq.broker_name, mq.queue_id), len(self.lanes))

    def send(self, lane: _Lane, row: int, msg: Message) -> None:
        while len(self.pending) >= self.opts.max_in_flight:
            self._wait_one()
        if not self.first_born_ms:
            self.first_born_ms = int(time.time() * 1000)  # no later than any half's born time
        self.place.append(0)
        self.lane.append(-1)
        self.queue_offsets.append(-1)
        self.commit_log_offsets.append(-1)
        coro = _send_half(self.transactional, msg, lane.queue, self.opts.send_timeout_ms)
        self.pending.append((lane, row, self.portal.submit(coro)))

    def drain(self) -> None:
        while self.pending:
            self._wait_one()

    def cancel(self) -> None:
        """Drop what is pending and roll back what was stored (oneway, best effort: a half
        message this misses is rolled back by the broker's check, its attempt never being
        committed)."""
        for _, _, future in self.pending:
            future.cancel()
        self.pending.clear()
        halves, self.halves = self.halves, []
        if halves:
            coro = end_all(self.transactional, halves, LocalTransactionState.ROLLBACK_MESSAGE, oneway=True)
            try:
                self.portal.call(coro, _MARGIN_S, "rocketmq sink")
            except (MQClientError, TimeoutError) as exc:
                log.info("rocketmq sink: rolling back %d half messages failed: %s", len(halves), exc)


async def _busy_retried(send: Callable[[], Awaitable[_T]]) -> _T:
    """``send()``, retried with a growing pause while the broker's flow control refuses it
    (SYSTEM_BUSY: nothing was stored, so a resend cannot duplicate), for ``_BUSY_BUDGET_S``."""
    pause = _BUSY_FIRST_PAUSE_S
    deadline = time.monotonic() + _BUSY_BUDGET_S
    while True:
        try:
            return await send()
        except BrokerBusyError as exc:
            if time.monotonic() + pause > deadline:
                exc.add_note(f"rocketmq sink: the broker stayed busy for {_BUSY_BUDGET_S:.0f}s")
                raise
            log.debug("rocketmq sink: broker busy (%s), resend in %.0f ms", exc, pause * 1000)
            await asyncio.sleep(pause)
            pause = min(pause * 2, _BUSY_MAX_PAUSE_S)


async def _send_batch(
    producer: Producer, messages: list[Message], queue: MessageQueue | None, timeout_ms: int
) -> list[SendResult]:
    return await _busy_retried(lambda: producer.send_batch(messages, queue=queue, timeout_millis=timeout_ms))


async def _send_half(
    producer: TransactionProducer, msg: Message, queue: MessageQueue | None, timeout_ms: int
) -> tuple[SendResult, HalfMessage]:
    return await _busy_retried(
        lambda: producer.send_half_message(msg, queue=queue, timeout_millis=timeout_ms)
    )


async def end_all(
    producer: TransactionProducer,
    halves: Iterable[HalfMessage],
    state: LocalTransactionState,
    *,
    oneway: bool,
    in_flight: int = 64,
    timeout_ms: int = 3_000,
    until: Callable[[], bool] = lambda: True,
) -> tuple[int, int]:
    """END_TRANSACTION ``state`` for each of ``halves``, ``in_flight`` at a time; only while
    ``until()`` holds. Returns how many were ended (answered with success, or written when
    ``oneway``) and how many failed or were not sent."""
    ended = failed = 0
    source = iter(halves)

    async def worker() -> None:
        nonlocal ended, failed
        for half in source:
            if not until():
                failed += 1
                continue
            try:
                await producer.end_transaction(half, state, oneway=oneway, timeout_millis=timeout_ms)
            except MQClientError as exc:
                failed += 1
                log.debug("rocketmq sink: END_TRANSACTION %s of %s failed: %s", state.name, half.msg_id, exc)
            else:
                ended += 1

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return ended, failed


def _bodies(column: pa.Array, first_row: int) -> list[bytes]:
    values = column.to_pylist()
    out: list[bytes] = []
    for i, value in enumerate(values):
        if value is None or len(value) == 0:
            raise SinkError(
                f"rocketmq sink: row {first_row + i} of this partition has an empty or null body; "
                "RocketMQ does not store empty messages"
            )
        out.append(value.encode() if isinstance(value, str) else value)
    return out


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    """A column as Python values (map: a list of (key, value) pairs), or None if absent."""
    index = batch.schema.get_field_index(name)
    return None if index < 0 else list(batch.column(index).to_pylist())


def _rows(
    batches: Iterator[pa.RecordBatch],
    opts: WriteOptions,
    ids: WriteIds,
    sender: _Sender,
    extra: dict[str, str] | None = None,
) -> Iterator[dict[_Lane, list[tuple[int, Message]]]]:
    """Each record batch's rows as messages (with ``extra`` properties), by lane, with their
    row index in the partition.

    Raises:
        SinkError: a row cannot become a message (null body, no topic).
    """
    row = 0
    uniq_name = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        bodies = _bodies(batch.column(batch.schema.get_field_index("body")), row)
        topics = _column(batch, "topic") if opts.topic is None else None
        tags = _column(batch, "tags")
        keys = _column(batch, "keys")
        props = _column(batch, "properties")
        shard = _column(batch, "shardingKey")
        lanes: dict[_Lane, list[tuple[int, Message]]] = {}
        for i in range(n):
            topic = opts.topic if topics is None else topics[i]
            if not isinstance(topic, str) or not topic:
                raise SinkError(f"rocketmq sink: row {row + i} has a null topic and no 'topic' option is set")
            properties: dict[str, str] = dict(props[i] or ()) if props is not None else {}
            if tags is not None and tags[i]:
                properties[MessageConst.PROPERTY_TAGS] = tags[i]
            if keys is not None and keys[i]:
                value = keys[i]
                text = (
                    value if isinstance(value, str) else MessageConst.KEY_SEPARATOR.join(filter(None, value))
                )
                if text:
                    properties[MessageConst.PROPERTY_KEYS] = text
            if extra:
                properties.update(extra)
            properties[uniq_name] = ids.uniq_key(row + i)
            msg = Message(topic, bodies[i], properties=properties)
            queue = None
            if shard is not None and shard[i] is not None:
                queue = select_message_queue_by_hash(sender.queues(topic), msg, shard[i])
            lanes.setdefault(_Lane(topic, queue), []).append((row + i, msg))
        yield lanes
        row += n


def write_batches(batches: Iterator[pa.RecordBatch], opts: WriteOptions, ids: WriteIds) -> int:
    """Send every row of ``batches``; returns how many messages were stored.

    Raises:
        SinkError: a row cannot become a message (null body, no topic).
        MQClientError: a send failed (the task fails; Spark retries it).
    """
    producer = shared_producer(
        opts.name_server,
        opts.producer_group,
        opts.send_timeout_ms,
        opts.credentials,
        opts.namespace,
        opts.tls,
    )
    sender = _BatchSender(producer, opts)
    try:
        for lanes in _rows(batches, opts, ids, sender):
            for lane, items in lanes.items():
                sender.send(lane, [msg for _, msg in items])
        sender.drain()
    except BaseException:
        sender.cancel()
        raise
    return sender.sent


@dataclass(frozen=True, slots=True)
class TxnTag:
    """Which transaction a half message belongs to, carried in its ``TXN_PROPERTY``: where the
    commit records are (``commit_topic``), the query, the micro-batch, the run (``epoch``: Spark's
    run id, new at every start of the query) and the task attempt (Spark's task attempt id)."""

    commit_topic: str
    query: str
    batch: int
    epoch: str
    attempt: int

    def text(self) -> str:
        return f"{self.commit_topic}/{self.query}/{self.batch}/{self.epoch}/{self.attempt}"

    @classmethod
    def parse(cls, text: str | None) -> TxnTag | None:
        parts = (text or "").split("/")
        if len(parts) != 5 or not all(parts):
            return None
        try:
            return cls(parts[0], parts[1], int(parts[2]), parts[3], int(parts[4]))
        except ValueError:
            return None


TXN_PROPERTY: Final = "FINCHMQ_SPARK_TXN"


@dataclass(frozen=True)
class HalvesSent(WriterCommitMessage):
    """What one exactly-once write task reports to the driver: its transaction (``tag``), its
    partition, when its first send started (wall clock, ms), and where each row's half message
    is stored, in row order: ``places[place[row]]`` is (topic, broker name), then the half-queue
    and commit-log offsets; ``lane[row]`` >= 0 indexes ``lanes`` (topic, broker, queue id) for a
    sharded row, whose commits must keep row order."""

    tag: TxnTag
    partition: int
    first_born_ms: int
    places: tuple[tuple[str, str], ...]
    place: array[int]
    queue_offsets: array[int]
    commit_log_offsets: array[int]
    lanes: tuple[tuple[str, str, int], ...]
    lane: array[int]

    @property
    def rows(self) -> int:
        return len(self.queue_offsets)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({topic for topic, _ in self.places}))

    def half(self, row: int) -> HalfMessage:
        topic, broker = self.places[self.place[row]]
        ids = WriteIds(self.tag.query, str(self.tag.batch), self.partition)
        return HalfMessage(
            topic, broker, self.queue_offsets[row], self.commit_log_offsets[row], ids.uniq_key(row)
        )


def write_halves(
    batches: Iterator[pa.RecordBatch],
    opts: WriteOptions,
    ids: WriteIds,
    tag: TxnTag,
    producer: BlockingTransactionProducer,
) -> HalvesSent:
    """Send every row of ``batches`` as a half message of ``tag``'s transaction; the driver
    commits or rolls them back. On any failure, what was stored is rolled back and the task
    fails (Spark retries it; a half message the rollback missed is rolled back by the check).

    Raises:
        SinkError: a row cannot become a message (null body, no topic).
        MQClientError: a send failed.
    """
    sender = _HalfSender(producer, opts)
    immunity = str(-(-opts.transaction_timeout_ms // 1000))
    extra = {TXN_PROPERTY: tag.text(), MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: immunity}
    try:
        for lanes in _rows(batches, opts, ids, sender, extra):
            for lane, items in lanes.items():
                for row, msg in items:
                    sender.send(lane, row, msg)
        sender.drain()
    except BaseException:
        sender.cancel()
        raise
    return HalvesSent(
        tag=tag,
        partition=ids.partition,
        first_born_ms=sender.first_born_ms,
        places=tuple(sender.places),
        place=sender.place,
        queue_offsets=sender.queue_offsets,
        commit_log_offsets=sender.commit_log_offsets,
        lanes=tuple(sender.lanes),
        lane=sender.lane if sender.lanes else array("i"),
    )
