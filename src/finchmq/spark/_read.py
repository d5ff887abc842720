"""The reading half of the source: planning offsets on the driver, pulling a partition on a worker.

Owns: ``SCHEMA``/``ARROW_SCHEMA`` (the source's row layout), ``Planner`` (queue listing and
offset resolution: earliest, latest, JSON offsets, timestamps), ``read_partition`` (one queue's
offset range as Arrow record batches) and ``DataLossError``. Imports: ``finchmq.client``,
pyarrow, pyspark's types.

Strategy (``read_partition``): the range ``[start, end)`` is cut into chunks of
``pullBatchSize`` offsets and up to ``_PULLS_IN_FLIGHT`` pulls run ahead on the client's portal
loop while this thread turns the previous answer into columns. Answers are consumed in chunk
order; a chunk the broker answered only in part (its per-pull caps) is continued before the next
chunk, so rows come out in offset order and each offset at most once. Columns accumulate into
record batches of ``_ROWS_PER_BATCH`` rows: Arrow arrays are built from whole Python lists (no
per-row conversion in Spark). Offsets the broker no longer has (segments deleted, queue reset)
are reported through ``_report_loss``: ``DataLossError`` when ``failOnDataLoss`` (the default),
else a warning, and the read goes on after them.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Final

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from finchmq.client import (
    BlockingPullConsumer,
    MessageConst,
    MessageQueue,
    MQClientError,
    MQNetworkError,
    MQTimeoutError,
    NoRouteError,
    Portal,
    PullResult,
    PullStatus,
)

from . import _clients
from .options import EARLIEST, LATEST, OffsetSpec, OptionError, QueueKey, ReadOptions
from .partitions import QueuePartition

__all__ = ["ARROW_SCHEMA", "SCHEMA", "DataLossError", "Planner", "read_partition"]

log = logging.getLogger(__name__)

SCHEMA: Final = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("brokerName", StringType(), False),
        StructField("queueId", IntegerType(), False),
        StructField("queueOffset", LongType(), False),
        StructField("msgId", StringType(), False),
        StructField("keys", StringType(), True),
        StructField("tags", StringType(), True),
        StructField("body", BinaryType(), False),
        StructField("properties", MapType(StringType(), StringType(), True), False),
        StructField("bornTimestamp", TimestampType(), False),
        StructField("storeTimestamp", TimestampType(), False),
        StructField("reconsumeTimes", IntegerType(), False),
    ]
)

_TS: Final = pa.timestamp("us", tz="UTC")  # what Spark expects for TimestampType (session tz aside)
_TS_MS: Final = pa.timestamp("ms", tz="UTC")
ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("topic", pa.string(), False),
        pa.field("brokerName", pa.string(), False),
        pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False),
        pa.field("msgId", pa.string(), False),
        pa.field("keys", pa.string(), True),
        pa.field("tags", pa.string(), True),
        pa.field("body", pa.binary(), False),
        pa.field("properties", pa.map_(pa.string(), pa.string()), False),
        pa.field("bornTimestamp", _TS, False),
        pa.field("storeTimestamp", _TS, False),
        pa.field("reconsumeTimes", pa.int32(), False),
    ]
)

# Not in the ``properties`` column: those with a column of their own, those the client adds at
# pull time (not stored), and the broker's bookkeeping (CLUSTER; WAIT, which batches carry).
_HIDDEN_PROPERTIES: Final = frozenset(
    {
        MessageConst.PROPERTY_TAGS,
        MessageConst.PROPERTY_KEYS,
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_CLUSTER,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
    }
)
_PULLS_IN_FLIGHT: Final = 8
_ROWS_PER_BATCH: Final = 8192
_MARGIN_S: Final = 5.0


class DataLossError(RuntimeError):
    """Offsets the query must read are gone from the broker (``failOnDataLoss=true``)."""


def _queue_name(key: QueueKey) -> str:
    return f"{key[0]}@{key[1]}:{key[2]}"


def _report_loss(opts: ReadOptions, key: QueueKey, lo: int, hi: int, why: str) -> None:
    what = f"queue {_queue_name(key)}: offsets [{lo}, {hi}) are no longer on the broker ({why})"
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"rocketmq: {what}; they were deleted before this query read them. Set the option "
            "failOnDataLoss=false to skip lost offsets and go on."
        )
    log.warning("rocketmq: %s; skipped (failOnDataLoss=false)", what)


# -- planning (driver) ----------------------------------------------------------------------


class Planner:
    """Lists queues and resolves offsets with the process's pull consumer."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    @property
    def consumer(self) -> BlockingPullConsumer:
        return _clients.pull_consumer(self.opts.name_server)

    def _unreachable(self, exc: MQClientError) -> OptionError:
        return OptionError(
            "nameServer", self.opts.name_server, f"cannot reach the name server or broker: {exc}"
        )

    def queues(self) -> list[MessageQueue]:
        """Every readable queue of every topic, sorted.

        Raises:
            OptionError: a topic does not exist, or the name server cannot be reached.
        """
        found: list[MessageQueue] = []
        for topic in self.opts.topics:
            try:
                found.extend(self.consumer.fetch_subscribe_message_queues(topic))
            except NoRouteError:
                raise OptionError(
                    "topic",
                    ",".join(self.opts.topics),
                    f"topic {topic!r} does not exist on the name server {self.opts.name_server}",
                ) from None
            except (MQNetworkError, MQTimeoutError) as exc:
                raise self._unreachable(exc) from None
        return sorted(found, key=lambda q: (q.topic, q.broker_name, q.queue_id))

    def bounds(self, queues: list[MessageQueue]) -> dict[QueueKey, tuple[int, int]]:
        """``(min, max)`` offset of each queue: the first stored and the next to be written."""
        consumer = self.consumer
        out: dict[QueueKey, tuple[int, int]] = {}
        try:
            for mq in queues:
                out[(mq.topic, mq.broker_name, mq.queue_id)] = (
                    consumer.min_offset(mq),
                    consumer.max_offset(mq),
                )
        except (MQNetworkError, MQTimeoutError) as exc:
            raise self._unreachable(exc) from None
        return out

    def resolve(self, spec: OffsetSpec, bounds: Mapping[QueueKey, tuple[int, int]]) -> dict[QueueKey, int]:
        """The offset of every queue in ``bounds`` that ``spec`` names (see ``OffsetSpec``).

        Raises:
            OptionError: the spec names a queue that does not exist.
        """
        if spec.kind == "earliest":
            return {key: lo for key, (lo, _) in bounds.items()}
        if spec.kind == "latest":
            return {key: hi for key, (_, hi) in bounds.items()}
        if spec.kind == "timestamp":
            return {
                key: self._first_at_or_after(key, spec.timestamp, lo, hi) for key, (lo, hi) in bounds.items()
            }
        given = spec.offset_map()
        unknown = sorted(set(given) - set(bounds))
        if unknown:
            known = ", ".join(_queue_name(k) for k in sorted(bounds)) or "none"
            raise OptionError(
                spec.option,
                "...",
                f"queue {_queue_name(unknown[0])} does not exist (the queues read are: {known})",
            )
        out: dict[QueueKey, int] = {}
        for key, (lo, hi) in bounds.items():
            offset = given.get(key, EARLIEST if spec.default == "earliest" else LATEST)
            out[key] = lo if offset == EARLIEST else hi if offset == LATEST else offset
        return out

    def _first_at_or_after(self, key: QueueKey, timestamp: int, lo: int, hi: int) -> int:
        """The first offset whose message was stored at or after ``timestamp`` (``hi`` if none).

        SEARCH_OFFSET_BY_TIMESTAMP answers the message stored *nearest* the time (RocketMQ's
        semantics): that one or its successor is the answer, so one short pull settles it.
        """
        if hi <= lo:
            return hi
        mq = MessageQueue(*key)
        consumer = self.consumer
        try:
            offset = min(max(consumer.search_offset(mq, timestamp), lo), hi)
            while offset < hi:
                result = consumer.pull(mq, "*", offset, 4, timeout_millis=self.opts.pull_timeout_ms)
                if result.pull_status is not PullStatus.FOUND:
                    if result.next_begin_offset <= offset:
                        return hi
                    offset = result.next_begin_offset
                    continue
                for msg in result.msg_found_list:
                    if msg.store_timestamp >= timestamp:
                        return msg.queue_offset
                offset = result.next_begin_offset
        except (MQNetworkError, MQTimeoutError) as exc:
            raise self._unreachable(exc) from None
        return hi


# -- reading (worker) -------------------------------------------------------------------------


class _Columns:
    """Column lists for one queue's rows, flushed into record batches."""

    __slots__ = (
        "bodies",
        "born",
        "broker",
        "keys",
        "map_offsets",
        "msg_ids",
        "offsets",
        "prop_keys",
        "prop_values",
        "queue_id",
        "reconsume",
        "stored",
        "tags",
        "topic",
    )

    def __init__(self, topic: str, broker: str, queue_id: int) -> None:
        self.topic, self.broker, self.queue_id = topic, broker, queue_id
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.msg_ids: list[str] = []
        self.keys: list[str | None] = []
        self.tags: list[str | None] = []
        self.bodies: list[bytes] = []
        self.map_offsets: list[int] = [0]
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, result: PullResult, lo: int, hi: int) -> int:
        """Add the messages of ``result`` with offsets in ``[lo, hi)``; returns the first offset
        added (``hi`` if none)."""
        first = hi
        hidden = _HIDDEN_PROPERTIES
        offsets, msg_ids, keys, tags = self.offsets, self.msg_ids, self.keys, self.tags
        bodies, born, stored, reconsume = self.bodies, self.born, self.stored, self.reconsume
        map_offsets, prop_keys, prop_values = self.map_offsets, self.prop_keys, self.prop_values
        for msg in result.msg_found_list:
            offset = msg.queue_offset
            if offset < lo or offset >= hi:
                continue
            if first == hi:
                first = offset
            props = msg.properties
            offsets.append(offset)
            msg_ids.append(props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id)
            keys.append(props.get(MessageConst.PROPERTY_KEYS))
            tags.append(props.get(MessageConst.PROPERTY_TAGS))
            bodies.append(msg.body)
            for name, value in props.items():
                if name not in hidden:
                    prop_keys.append(name)
                    prop_values.append(value)
            map_offsets.append(len(prop_keys))
            born.append(msg.born_timestamp)
            stored.append(msg.store_timestamp)
            reconsume.append(msg.reconsume_times)
        return first

    def flush(self) -> pa.RecordBatch:
        n = len(self.offsets)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.broker] * n, pa.string()),
                pa.array([self.queue_id] * n, pa.int32()),
                pa.array(self.offsets, pa.int64()),
                pa.array(self.msg_ids, pa.string()),
                pa.array(self.keys, pa.string()),
                pa.array(self.tags, pa.string()),
                pa.array(self.bodies, pa.binary()),
                pa.MapArray.from_arrays(
                    pa.array(self.map_offsets, pa.int32()),
                    pa.array(self.prop_keys, pa.string()),
                    pa.array(self.prop_values, pa.string()),
                ),
                pa.array(self.born, _TS_MS).cast(_TS),
                pa.array(self.stored, _TS_MS).cast(_TS),
                pa.array(self.reconsume, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )
        self._reset()
        return batch


def read_partition(partition: QueuePartition, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Pull ``partition``'s offsets and yield them as record batches of ``ARROW_SCHEMA``.

    Raises:
        DataLossError: offsets of the range are gone and ``failOnDataLoss`` is true.
        MQClientError: the broker cannot be reached or answers with an error.
    """
    consumer = _clients.pull_consumer(opts.name_server)
    portal = Portal.default()
    key = partition.key
    mq = MessageQueue(*key)
    end = partition.end
    columns = _Columns(*key)
    step = opts.pull_batch_size
    sub = opts.sub_expression
    unfiltered = sub == "*"
    timeout = opts.pull_timeout_ms / 1000 + _MARGIN_S

    def submit(lo: int) -> concurrent.futures.Future[PullResult]:
        coro = consumer.consumer.pull(mq, sub, lo, step, timeout_millis=opts.pull_timeout_ms)
        return portal.submit(coro)

    # (chunk start, chunk end, pull) in offset order; a chunk's continuation goes to the front.
    inflight: deque[tuple[int, int, concurrent.futures.Future[PullResult]]] = deque()
    chunks = iter(range(partition.start, end, step))

    def refill() -> None:
        while len(inflight) < _PULLS_IN_FLIGHT:
            lo = next(chunks, None)
            if lo is None:
                return
            inflight.append((lo, min(lo + step, end), submit(lo)))

    def restart(at: int) -> None:
        nonlocal chunks
        for _, _, future in inflight:
            future.cancel()
        inflight.clear()
        chunks = iter(range(at, end, step))

    try:
        refill()
        while inflight:
            lo, hi, future = inflight.popleft()
            result = _result(future, timeout)
            status = result.pull_status
            nxt = result.next_begin_offset
            if status is PullStatus.FOUND or status is PullStatus.NO_MATCHED_MSG:
                first = columns.add(result, lo, hi) if status is PullStatus.FOUND else hi
                if unfiltered and first > lo:
                    # Without a tag filter every offset holds a message: a skipped offset is lost.
                    gap_end = min(first, nxt) if status is PullStatus.FOUND else min(nxt, hi)
                    if gap_end > lo:
                        _report_loss(opts, key, lo, gap_end, "their commit-log segment was deleted")
                if lo < nxt < hi:
                    inflight.appendleft((nxt, hi, submit(nxt)))
                elif nxt <= lo:
                    raise MQClientError(f"pull {_queue_name(key)} at {lo} did not advance (next {nxt})")
            elif status is PullStatus.OFFSET_ILLEGAL and lo < result.min_offset:
                resume = min(result.min_offset, end)
                _report_loss(opts, key, lo, resume, f"the queue now starts at {result.min_offset}")
                restart(resume)
            else:  # NO_NEW_MSG or OFFSET_ILLEGAL beyond the end: the queue is shorter than planned
                _report_loss(
                    opts, key, lo, end, f"the queue ends at {result.max_offset}: it was reset or recreated"
                )
                restart(end)
            if len(columns) >= _ROWS_PER_BATCH:
                yield columns.flush()
            refill()
        if len(columns):
            yield columns.flush()
    finally:
        for _, _, future in inflight:
            future.cancel()


def _result(future: concurrent.futures.Future[PullResult], timeout: float) -> PullResult:
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise MQTimeoutError(f"pull: no answer within {timeout:.0f}s") from None


def offsets_of(bounds: Mapping[QueueKey, tuple[int, int]], which: int) -> dict[QueueKey, int]:
    """``which`` 0: the min offsets; 1: the max offsets."""
    return {key: pair[which] for key, pair in bounds.items()}
