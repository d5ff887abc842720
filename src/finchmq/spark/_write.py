"""The writing half: DataFrame rows to RocketMQ messages, sent in batches, at least once.

Owns: the sink's column contract (``check_input_schema``), ``WriteIds`` (the deterministic
UNIQ_KEY of every row) and ``write_batches`` (one Spark task's rows, sent). Imports:
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
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
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
    BrokerBusyError,
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
    select_message_queue_by_hash,
)

from ._clients import shared_admin, shared_producer
from .options import OptionError, WriteOptions

__all__ = ["SinkError", "WriteIds", "check_input_schema", "write_batches"]

log = logging.getLogger(__name__)

_BODY_TYPES: Final = (BinaryType, StringType)
_KEY_TYPES: Final = (StringType, ByteType, ShortType, IntegerType, LongType)
_BUSY_FIRST_PAUSE_S: Final = 0.02
_BUSY_MAX_PAUSE_S: Final = 1.0
_BUSY_BUDGET_S: Final = 60.0
_MARGIN_S: Final = _BUSY_BUDGET_S + 30.0


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
    """Runs ``send_batch`` requests with at most ``max_in_flight`` pending, one per ordered queue."""

    def __init__(self, producer: BlockingProducer, opts: WriteOptions) -> None:
        self.producer = producer
        self.portal = Portal.default()
        self.opts = opts
        self.pending: deque[tuple[_Lane, concurrent.futures.Future[list[SendResult]]]] = deque()
        self.sent = 0
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
                shared_admin(self.opts.name_server, self.opts.credentials).cluster_info()
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

    def _wait_one(self) -> None:
        lane, future = self.pending.popleft()
        timeout = self.opts.send_timeout_ms / 1000 + _MARGIN_S
        try:
            results = future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise MQClientError(f"rocketmq sink: a send got no answer within {timeout:.0f}s") from None
        except MQClientError as exc:
            explained = self._explain(exc, lane.topic)
            if explained is exc:
                raise
            raise explained from exc
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


async def _send_batch(
    producer: Producer, messages: list[Message], queue: MessageQueue | None, timeout_ms: int
) -> list[SendResult]:
    """``send_batch``, retried with a growing pause while the broker's flow control refuses it
    (SYSTEM_BUSY: nothing was stored, so a resend cannot duplicate), for ``_BUSY_BUDGET_S``."""
    pause = _BUSY_FIRST_PAUSE_S
    deadline = time.monotonic() + _BUSY_BUDGET_S
    while True:
        try:
            return await producer.send_batch(messages, queue=queue, timeout_millis=timeout_ms)
        except BrokerBusyError as exc:
            if time.monotonic() + pause > deadline:
                exc.add_note(f"rocketmq sink: the broker stayed busy for {_BUSY_BUDGET_S:.0f}s")
                raise
            log.debug("rocketmq sink: broker busy (%s), resend in %.0f ms", exc, pause * 1000)
            await asyncio.sleep(pause)
            pause = min(pause * 2, _BUSY_MAX_PAUSE_S)


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


def write_batches(batches: Iterator[pa.RecordBatch], opts: WriteOptions, ids: WriteIds) -> int:
    """Send every row of ``batches``; returns how many messages were stored.

    Raises:
        SinkError: a row cannot become a message (null body, no topic).
        MQClientError: a send failed (the task fails; Spark retries it).
    """
    producer = shared_producer(opts.name_server, opts.producer_group, opts.send_timeout_ms, opts.credentials)
    sender = _Sender(producer, opts)
    row = 0
    uniq_name = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    try:
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
            lanes: dict[_Lane, list[Message]] = {}
            for i in range(n):
                topic = opts.topic if topics is None else topics[i]
                if not isinstance(topic, str) or not topic:
                    raise SinkError(
                        f"rocketmq sink: row {row + i} has a null topic and no 'topic' option is set"
                    )
                properties: dict[str, str] = dict(props[i] or ()) if props is not None else {}
                if tags is not None and tags[i]:
                    properties[MessageConst.PROPERTY_TAGS] = tags[i]
                if keys is not None and keys[i]:
                    value = keys[i]
                    text = (
                        value
                        if isinstance(value, str)
                        else MessageConst.KEY_SEPARATOR.join(filter(None, value))
                    )
                    if text:
                        properties[MessageConst.PROPERTY_KEYS] = text
                properties[uniq_name] = ids.uniq_key(row + i)
                msg = Message(topic, bodies[i], properties=properties)
                queue = None
                if shard is not None and shard[i] is not None:
                    queue = select_message_queue_by_hash(sender.queues(topic), msg, shard[i])
                lanes.setdefault(_Lane(topic, queue), []).append(msg)
            for lane, messages in lanes.items():
                sender.send(lane, messages)
            row += n
        sender.drain()
    except BaseException:
        sender.cancel()
        raise
    return sender.sent
