"""The reading half of the source: planning offsets on the driver, pulling a partition on a worker.

Owns: ``SCHEMA`` (the source's row layout), ``Planner`` (queue listing and offset resolution:
earliest, latest, JSON offsets, timestamps), ``read_partition`` (one queue's offset range as
Arrow record batches) and ``DataLossError``. Imports: ``finchmq.client``, pyspark's types.

Strategy (``read_partition``): the range ``[start, end)`` is cut into chunks of
``pullBatchSize`` offsets, and up to ``_PULLS_IN_FLIGHT`` undecoded pulls (``pull_raw``) run
ahead on the client's portal loop while this thread decodes the previous answer straight into
columns (``_columns``). Answers are consumed in chunk order; a chunk the broker answered only in
part (its per-pull caps) is continued before the next chunk, so rows come out in offset order
and each offset at most once. Columns become record batches of ``_ROWS_PER_BATCH`` rows
(or ``_BYTES_PER_BATCH`` of bodies).
Offsets the broker no longer has (segments deleted, queue reset) go to ``_report_loss``:
``DataLossError`` when ``failOnDataLoss`` (the default), else a warning, and the read goes on.
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
    MessageQueue,
    MessageSelector,
    MQClientError,
    MQNetworkError,
    MQTimeoutError,
    NoRouteError,
    Portal,
    PullStatus,
)
from finchmq.client.records import PullResultExt

from ._clients import shared_pull_consumer
from ._columns import Columns
from .options import EARLIEST, LATEST, OffsetSpec, OptionError, QueueKey, ReadOptions, namespaced
from .partitions import QueuePartition

__all__ = ["SCHEMA", "DataLossError", "Planner", "read_partition", "tag_set"]

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

_PULLS_IN_FLIGHT: Final = 8
_ROWS_PER_BATCH: Final = 8192
_BYTES_PER_BATCH: Final = 64 * 1024 * 1024  # of bodies; Arrow's binary offsets are int32
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


def tag_set(sub_expression: str) -> frozenset[str] | None:
    """The tags a ``TagA || TagB`` expression names; None for ``*`` (every message)."""
    tags = frozenset(t.strip() for t in sub_expression.split("||") if t.strip())
    return None if not tags or "*" in tags else tags


# -- planning (driver) ----------------------------------------------------------------------


class Planner:
    """Lists queues and resolves offsets with the process's pull consumer.

    Queues and offsets keys name topics as the user does; with a ``namespace`` they go to the
    broker as ``namespace%topic`` (``_on_broker``).
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._names = namespaced(opts.namespace)

    @property
    def consumer(self) -> BlockingPullConsumer:
        return shared_pull_consumer(
            self.opts.name_server, self.opts.credentials, self.opts.namespace, self.opts.tls
        )

    def _on_broker(self, mq: MessageQueue) -> MessageQueue:
        return self._names.queue_with_namespace(mq)

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
            on_broker = self._names.with_namespace(topic)
            try:
                queues = self.consumer.fetch_subscribe_message_queues(on_broker)
                found.extend(self._names.queue_without_namespace(mq) for mq in queues)
            except NoRouteError:
                named = (
                    f"{topic!r} ({on_broker!r} in namespace {self.opts.namespace})"
                    if on_broker != topic
                    else repr(topic)
                )
                raise OptionError(
                    "topic",
                    ",".join(self.opts.topics),
                    f"topic {named} does not exist on the name server {self.opts.name_server}",
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
                key = (mq.topic, mq.broker_name, mq.queue_id)
                on_broker = self._on_broker(mq)
                out[key] = (consumer.min_offset(on_broker), consumer.max_offset(on_broker))
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
                spec.text,
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
        mq = self._on_broker(MessageQueue(*key))
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


def read_partition(partition: QueuePartition, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Pull ``partition``'s offsets and yield them as record batches of ``ARROW_SCHEMA``.

    Raises:
        DataLossError: offsets of the range are gone and ``failOnDataLoss`` is true.
        MQClientError: the broker cannot be reached or answers with an error.
    """
    consumer = shared_pull_consumer(opts.name_server, opts.credentials, opts.namespace, opts.tls)
    portal = Portal.default()
    key = partition.key
    mq = namespaced(opts.namespace).queue_with_namespace(MessageQueue(*key))  # as the broker knows it
    end = partition.end
    columns = Columns(*key)  # the topic column as the user names it
    step = opts.pull_batch_size
    sql = opts.sub_expression_type == "SQL92"
    sub = MessageSelector.by_sql(opts.sub_expression) if sql else opts.sub_expression
    tags = None if sql else tag_set(opts.sub_expression)
    timeout = opts.pull_timeout_ms / 1000 + _MARGIN_S

    def submit(lo: int) -> concurrent.futures.Future[PullResultExt]:
        coro = consumer.consumer.pull_raw(mq, sub, lo, step, timeout_millis=opts.pull_timeout_ms)
        return portal.submit(coro)

    # (chunk start, chunk end, pull) in offset order; a chunk's continuation goes to the front.
    inflight: deque[tuple[int, int, concurrent.futures.Future[PullResultExt]]] = deque()
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
                first = columns.add(result.body, lo, hi, tags) if status is PullStatus.FOUND else hi
                if tags is None and not sql and first > lo:
                    # Without a filter every offset holds a message: a skipped offset is lost.
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
            if len(columns) >= _ROWS_PER_BATCH or columns.body_bytes >= _BYTES_PER_BATCH:
                yield columns.flush()
            refill()
        if len(columns):
            yield columns.flush()
    finally:
        for _, _, future in inflight:
            future.cancel()


def _result(future: concurrent.futures.Future[PullResultExt], timeout: float) -> PullResultExt:
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise MQTimeoutError(f"pull: no answer within {timeout:.0f}s") from None
