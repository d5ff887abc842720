"""``RocketMQDataSource``: format ``rocketmq`` for PySpark's Python Data Source API (Spark 4.2+).

Owns: the data source and its four faces: ``RocketMQReader`` (batch), ``RocketMQStreamReader``
(Structured Streaming, with admission control and ``Trigger.AvailableNow``), ``RocketMQWriter``
(batch ``save``) and ``RocketMQStreamWriter`` (streaming sink). Imports: pyspark, and the
spark package's modules (which use ``finchmq.client`` only).

Where each piece runs: the data source object, with its options, is pickled to every Python
process Spark starts. ``partitions()``, ``initialOffset()``, ``latestOffset()`` and ``commit()``
run in a planning process on the driver; ``read()`` and ``write()`` run in executor workers. So
readers and writers hold only options and plain offsets; connections are made per process
(``_clients``). The option parsing happens in ``reader()``/``streamReader()``/``writer()``, on
the driver, so a bad option fails the query before any task starts.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from finchmq.client import MessageQueue, MQClientError

from ._clients import close_shared_clients, shared_admin
from ._read import SCHEMA, DataLossError, Planner, read_partition
from ._transactions import abort_batch, commit_batch, ensure_commit_topic, shared_transaction_producer
from ._write import HalvesSent, SinkError, TxnTag, WriteIds, check_input_schema, write_batches, write_halves
from .options import OptionError, QueueKey, ReadOptions, WriteOptions, namespaced
from .partitions import QueuePartition, from_offset_json, plan_partitions, rate_limit, to_offset_json

__all__ = [
    "RocketMQDataSource",
    "RocketMQReader",
    "RocketMQStreamReader",
    "RocketMQStreamWriter",
    "RocketMQWriter",
    "SentMessages",
]

log = logging.getLogger(__name__)

# TaskContext local properties Spark sets for every task of a micro-batch (MicroBatchExecution).
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


def _check_schema(schema: StructType | None) -> None:
    if schema is not None and schema != SCHEMA:
        raise OptionError(
            "schema",
            schema.simpleString(),
            f"the rocketmq source has a fixed schema; do not pass one (it is {SCHEMA.simpleString()})",
        )


class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq")`` / ``readStream`` / ``write`` / ``writeStream``.

    Register it with ``finchmq.spark.register(spark)``. Options and columns: ``docs/spark.md``.
    """

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> RocketMQReader:
        _check_schema(schema)
        return RocketMQReader(ReadOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        _check_schema(schema)
        return RocketMQStreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQWriter:
        if overwrite:
            raise SinkError(
                "rocketmq sink: save mode 'overwrite' is not supported: a topic is an append-only log; "
                "use .mode('append')"
            )
        opts = WriteOptions.parse(self.options)
        check_input_schema(schema, opts)
        if opts.exactly_once:
            ensure_commit_topic(opts)
        return RocketMQWriter(opts, uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        opts = WriteOptions.parse(self.options)
        check_input_schema(schema, opts)
        if opts.exactly_once:
            ensure_commit_topic(opts)
        return RocketMQStreamWriter(opts)


# -- reading ----------------------------------------------------------------------------------


def _read(partition: InputPartition, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, QueuePartition):  # Spark's placeholder when there is nothing to read
        return iter(())
    return read_partition(partition, opts)


class RocketMQReader(DataSourceReader):
    """Batch read: ``[start, end)`` of every queue, resolved once when the query is planned."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def offset_ranges(self) -> tuple[dict[QueueKey, int], dict[QueueKey, int]]:
        """The start and end offset of every queue read.

        Raises:
            OptionError: unknown topic or queue, unreachable name server, start after end.
        """
        planner = Planner(self.opts)
        bounds = planner.bounds(planner.queues())
        start = planner.resolve(self.opts.starting, bounds)
        end = planner.resolve(self.opts.ending, bounds)
        starting, ending = self.opts.starting, self.opts.ending
        for key, begin in start.items():
            if begin > end[key]:
                if key in starting.offset_map() or key in ending.offset_map():
                    spec = starting if key in starting.offset_map() else ending
                    raise OptionError(
                        spec.option,
                        spec.text,
                        f"queue {key[0]}@{key[1]}:{key[2]}: the range would start at {begin}, after its "
                        f"end {end[key]}",
                    )
                start[key] = end[key]  # timestamps or latest-vs-earliest: an empty range
        return start, end

    def partitions(self) -> Sequence[InputPartition]:
        start, end = self.offset_ranges()
        return plan_partitions(start, end, self.opts.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.opts)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming read. Offsets are ``{"topic": {"brokerName": {"queueId": offset}}}``, the next
    offset to read of each queue; Spark checkpoints them, so a restarted query resumes exactly.

    Each micro-batch reads from the previous end to the queues' max offsets, at most
    ``maxOffsetsPerTrigger`` offsets in all (``ReadMaxRows``, split across queues by backlog).
    A queue that appears later starts at offset 0. After each completed micro-batch, its end
    offsets are stored for ``consumerGroup`` (if set) so RocketMQ's lag monitoring sees the query.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: dict[QueueKey, int] | None = None  # Trigger.AvailableNow's end
        self._latest: dict[QueueKey, int] | None = None
        self._committed: dict[QueueKey, int] | None = None  # last offsets stored for consumerGroup

    def _max_offsets(self) -> dict[QueueKey, int]:
        planner = Planner(self.opts)
        return {key: hi for key, (_, hi) in planner.bounds(planner.queues()).items()}

    def initialOffset(self) -> dict[str, Any]:
        planner = Planner(self.opts)
        bounds = planner.bounds(planner.queues())
        return to_offset_json(planner.resolve(self.opts.starting, bounds))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._max_offsets()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_offset_json(start)
        # Micro-batches run one after the other: the one that ended at ``start`` is complete
        # when Spark plans the next. Spark's own commit(end) of a batch comes only when a later
        # batch with data is planned, so an idle query would show a stale lag without this.
        self._commit_group(begin)
        latest = self._max_offsets()
        for key, hi in latest.items():
            if hi < begin.get(key, 0):
                what = (
                    f"queue {key[0]}@{key[1]}:{key[2]} now ends at {hi}, before the query's offset "
                    f"{begin[key]}: the queue was reset or recreated"
                )
                if self.opts.fail_on_data_loss:
                    raise DataLossError(f"rocketmq: {what}. Set failOnDataLoss=false to go on from there.")
                log.warning("rocketmq: %s; messages below %d are not read again", what, begin[key])
                latest[key] = begin[key]
        if self._target is not None:
            latest = {key: min(hi, self._target.get(key, begin.get(key, 0))) for key, hi in latest.items()}
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, latest, limit.max_rows)
        else:
            end = {key: max(hi, begin.get(key, 0)) for key, hi in latest.items()}
        for key, offset in begin.items():  # a queue gone from the route keeps its offset
            end.setdefault(key, offset)
        return to_offset_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else to_offset_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return plan_partitions(
            from_offset_json(start), from_offset_json(end), self.opts.max_records_per_partition
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.opts)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(from_offset_json(end))

    def _commit_group(self, offsets: dict[QueueKey, int]) -> None:
        """Store ``offsets`` as ``consumerGroup``'s on the brokers (lag monitoring), once each."""
        group = self.opts.consumer_group
        if group is None or offsets == self._committed:
            return
        names = namespaced(self.opts.namespace)  # the admin API takes the broker's names
        try:
            shared_admin(self.opts.name_server, self.opts.credentials, self.opts.tls).update_consume_offsets(
                names.with_namespace(group),
                {names.queue_with_namespace(MessageQueue(*key)): offset for key, offset in offsets.items()},
            )
        except (MQClientError, TimeoutError) as exc:  # monitoring only: the checkpoint is the truth
            log.warning("rocketmq: committing offsets of group %s failed: %s", group, exc)
            return
        self._committed = dict(offsets)

    def stop(self) -> None:
        close_shared_clients()


# -- writing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SentMessages(WriterCommitMessage):
    """What one write task reports: how many messages the broker stored."""

    count: int


def _task_ids(query: str, batch: str) -> WriteIds:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    return WriteIds(query, batch, partition)


def _write(
    iterator: Iterator[pa.RecordBatch], opts: WriteOptions, query: str, batch: str
) -> SentMessages | HalvesSent:
    """One task's rows: sent (at least once), or as half messages of a transaction of its own
    (exactly once: the driver commits them)."""
    ids = _task_ids(query, batch)
    if not opts.exactly_once:
        return SentMessages(write_batches(iterator, opts, ids))
    context = TaskContext.get()
    attempt = context.taskAttemptId() if context is not None else 0
    tag = TxnTag(opts.commit_topic, query, int(batch), uuid.uuid4().hex, attempt)
    return write_halves(iterator, opts, ids, tag, shared_transaction_producer(opts))


def _count(messages: list[WriterCommitMessage | None]) -> int:
    return sum(
        m.count if isinstance(m, SentMessages) else m.rows
        for m in messages
        if isinstance(m, SentMessages | HalvesSent)
    )


class RocketMQWriter(DataSourceArrowWriter):
    """Batch ``save()``: every row becomes a message; a task retry re-sends with the same ids.
    Exactly once: the rows are half messages, committed here when Spark commits the write."""

    def __init__(self, opts: WriteOptions, write_id: str) -> None:
        self.opts = opts
        self.write_id = write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages | HalvesSent:
        return _write(iterator, self.opts, self.write_id, "0")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            commit_batch(self.opts, self.write_id, 0, messages)
        log.info("rocketmq sink: write %s stored %d messages", self.write_id, _count(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            abort_batch(self.opts, messages)
            log.warning("rocketmq sink: write %s failed: its messages were rolled back", self.write_id)
            return
        log.warning(
            "rocketmq sink: write %s failed after %d messages were stored", self.write_id, _count(messages)
        )


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: at least once, UNIQ_KEY = hash(query id, batch id, partition, row); or
    exactly once, each micro-batch's half messages committed with it (``_transactions``)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages | HalvesSent:
        context = TaskContext.get()
        query = (context.getLocalProperty(_QUERY_ID_PROPERTY) if context else None) or "unknown-query"
        batch = (context.getLocalProperty(_BATCH_ID_PROPERTY) if context else None) or "0"
        return _write(iterator, self.opts, query, batch)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            queries = {m.tag.query for m in messages if isinstance(m, HalvesSent)}
            for query in queries:  # one: every task of a micro-batch has the query's id
                commit_batch(self.opts, query, batchId, messages)
        log.info("rocketmq sink: micro-batch %d stored %d messages", batchId, _count(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            abort_batch(self.opts, messages)
            log.warning("rocketmq sink: micro-batch %d failed: its messages were rolled back", batchId)
            return
        log.warning(
            "rocketmq sink: micro-batch %d failed after %d messages were stored", batchId, _count(messages)
        )
