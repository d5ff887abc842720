"""The exactly-once sink's driver side: commit or roll back a batch's half messages, the commit
record on the broker, and the check-back listener.

Owns: ``CommitRecord`` (which task attempts of a (query id, batch id) were committed, stored as
a message of the commit topic keyed ``<query>/<batch>``), ``commit_batch``, ``abort_batch``,
``SinkTransactionListener`` (the answer to the broker's CHECK_TRANSACTION_STATE) and
``shared_transaction_producer``. Imports: ``finchmq.client`` and ``_write``'s half-message
types; no pyspark.

The protocol. Every task of a batch sends its rows as half messages, tagged (``TxnTag``) with
the query, the batch, and an ``epoch`` drawn afresh by each task attempt; it reports a
``HalvesSent`` to the driver. When Spark commits the batch, the driver

1. looks the batch's commit record up: if there is one, the batch was committed by an earlier
   run (the driver died after the sink's commit, before Spark's commit log) and this re-run's
   halves are rolled back;
2. writes the commit record: the epochs of the attempts Spark chose. This send is the moment of
   decision: from then on the batch is committed, whoever ends the halves;
3. commits every half (END_TRANSACTION, two-way; rows of one sharding key in row order).

Spark's abort, a failed task and a retried task's first attempt roll back. What nobody ends
(a driver or worker killed) the broker checks, after the half's check immunity (the
``transactionTimeoutMs`` option), with any live producer of the group; the listener answers
COMMIT if the batch's record names the half's epoch, ROLLBACK if it names others, and, with no
record, ROLLBACK once the half is older than the timeout (a driver writes no record for a batch
whose first send is older than half of it, so none can come later), UNKNOW before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from finchmq.client import (
    BlockingTransactionProducer,
    HalfMessage,
    LocalTransactionState,
    Message,
    MessageConst,
    MessageExt,
    MQClientError,
    NoRouteError,
    Portal,
    SendStatus,
    TransactionProducer,
)

from ._clients import security, shared_admin, shared_client
from ._write import TXN_PROPERTY, HalvesSent, TxnTag, end_all
from .options import WriteOptions, namespaced

__all__ = [
    "CommitRecord",
    "SinkTransactionListener",
    "abort_batch",
    "commit_batch",
    "ensure_commit_topic",
    "find_record",
    "shared_transaction_producer",
]

log = logging.getLogger(__name__)

_END_ROUNDS: Final = 3  # END_TRANSACTION attempts per half before leaving it to the check
_CALL_TIMEOUT_S: Final = 600.0


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """The sink committed batch ``batch`` of query ``query`` with the halves of these task
    attempts (their ``epoch``)."""

    query: str
    batch: int
    epochs: frozenset[str]

    @staticmethod
    def key(query: str, batch: int) -> str:
        return f"{query}/{batch}"

    def message(self, topic: str) -> Message:
        body = {"query": self.query, "batch": self.batch, "epochs": sorted(self.epochs)}
        return Message.create(topic, json.dumps(body).encode(), keys=self.key(self.query, self.batch))

    @classmethod
    def parse(cls, msg: MessageExt) -> CommitRecord | None:
        try:
            body = json.loads(msg.body)
            return cls(str(body["query"]), int(body["batch"]), frozenset(map(str, body["epochs"])))
        except (ValueError, KeyError, TypeError):
            return None


def ensure_commit_topic(opts: WriteOptions) -> None:
    """Create the commit topic (one queue per master) unless it exists: the check must tell "no
    record yet" from "no route to the records", so the topic exists before any half is sent.

    Raises:
        MQClientError: it could not be created (ACL: create it beforehand).
    """
    admin = shared_admin(opts.name_server, opts.credentials, opts.tls)
    topic = namespaced(opts.namespace).with_namespace(opts.commit_topic)  # the admin API takes no namespace
    try:
        admin.topic_route(topic)
    except NoRouteError:
        admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)


def find_record(opts: WriteOptions, commit_topic: str, query: str, batch: int) -> CommitRecord | None:
    """The first commit record stored for (``query``, ``batch``), or None; ``commit_topic`` as
    the user names it (in ``opts.namespace``).

    Raises:
        MQClientError: the brokers could not be asked (nothing is known then).
    """
    admin = shared_admin(opts.name_server, opts.credentials, opts.tls)
    key = CommitRecord.key(query, batch)
    found = admin.query_message(namespaced(opts.namespace).with_namespace(commit_topic), key, 32)
    for msg in found:  # oldest first: were two ever written, every reader picks the same one
        record = CommitRecord.parse(msg)
        if record is not None and (record.query, record.batch) == (query, batch):
            return record
    return None


class SinkTransactionListener:
    """Answers the broker's checks of the sink's half messages (any process of the group)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW  # the sink never runs send_message_in_transaction

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        tag = TxnTag.parse(msg.properties.get(TXN_PROPERTY))
        if tag is None:
            return LocalTransactionState.UNKNOW
        try:
            record = find_record(self.opts, tag.commit_topic, tag.query, tag.batch)
        except MQClientError as exc:
            log.info("rocketmq sink: checking %s: the commit record is out of reach: %s", tag.text(), exc)
            return LocalTransactionState.UNKNOW
        if record is not None:
            if tag.epoch in record.epochs:
                return LocalTransactionState.COMMIT_MESSAGE
            return LocalTransactionState.ROLLBACK_MESSAGE
        timeout_ms = _immunity_ms(msg) or self.opts.transaction_timeout_ms
        if time.time() * 1000 - msg.born_timestamp > timeout_ms:
            return LocalTransactionState.ROLLBACK_MESSAGE
        return LocalTransactionState.UNKNOW


def _immunity_ms(msg: MessageExt) -> int:
    text = msg.properties.get(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    try:
        return int(text) * 1000 if text else 0
    except ValueError:
        return 0


def shared_transaction_producer(opts: WriteOptions) -> BlockingTransactionProducer:
    """The process's started transactional producer of ``opts.producer_group``, answering checks."""
    key = (opts.producer_group, str(opts.send_timeout_ms), opts.credentials, opts.tls, opts.namespace)
    return shared_client(
        ("txn-producer", opts.name_server, *key),
        lambda instance: BlockingTransactionProducer(
            opts.producer_group,
            transaction_listener=SinkTransactionListener(opts),
            namesrv_addr=opts.name_server,
            instance_name=f"{instance}-txn-{opts.send_timeout_ms}",
            send_msg_timeout=opts.send_timeout_ms,
            namespace=opts.namespace,
            **security(opts.credentials, opts.tls),
        ),
    )


def _sent(messages: Sequence[object]) -> list[HalvesSent]:
    return [m for m in messages if isinstance(m, HalvesSent)]


def _end(
    opts: WriteOptions,
    producer: BlockingTransactionProducer,
    sent: list[HalvesSent],
    state: LocalTransactionState,
) -> int:
    """END_TRANSACTION ``state`` for every half of ``sent``, awaiting answers, a few rounds;
    sharded rows one after the other per queue, in row order. Returns how many were not ended
    (the broker's check ends them)."""
    free: list[HalfMessage] = []
    lanes: dict[tuple[str, str, int], list[HalfMessage]] = {}
    for task in sent:
        for row in range(task.rows):
            lane = task.lane[row] if task.lanes else -1
            if lane < 0:
                free.append(task.half(row))
            else:
                lanes.setdefault(task.lanes[lane], []).append(task.half(row))
    txn = producer.transaction_producer
    timeout_ms = opts.send_timeout_ms

    async def ordered(halves: list[HalfMessage]) -> int:
        for i, half in enumerate(halves):
            for _ in range(_END_ROUNDS):
                ended, _ = await end_all(txn, [half], state, oneway=False, in_flight=1, timeout_ms=timeout_ms)
                if ended:
                    break
            else:
                return len(halves) - i  # the rest stays for the check: their order is lost anyway
        return 0

    async def unordered(halves: list[HalfMessage]) -> int:
        left = halves
        for _ in range(_END_ROUNDS):
            if not left:
                break
            missed: list[HalfMessage] = []
            await _end_collecting(txn, left, state, opts.max_in_flight, timeout_ms, missed)
            left = missed
        return len(left)

    async def everything() -> int:
        counts = await asyncio.gather(unordered(free), *(ordered(h) for h in lanes.values()))
        return sum(counts)

    return Portal.default().call(everything(), _CALL_TIMEOUT_S, "rocketmq sink")


async def _end_collecting(
    txn: TransactionProducer,
    halves: Iterable[HalfMessage],
    state: LocalTransactionState,
    in_flight: int,
    timeout_ms: int,
    missed: list[HalfMessage],
) -> None:
    source = iter(halves)

    async def worker() -> None:
        for half in source:
            try:
                await txn.end_transaction(half, state, oneway=False, timeout_millis=timeout_ms)
            except MQClientError as exc:
                log.debug("rocketmq sink: END_TRANSACTION %s of %s: %s", state.name, half.msg_id, exc)
                missed.append(half)

    await asyncio.gather(*(worker() for _ in range(max(1, in_flight))))


def commit_batch(opts: WriteOptions, query: str, batch: int, messages: Sequence[object]) -> int:
    """Commit the halves the tasks of (``query``, ``batch``) sent, or roll them back if that batch
    was committed before. Returns how many rows were committed.

    Raises:
        MQClientError: the commit record could not be read or written; the halves are left to
            the broker's check (which commits them if the record was stored after all).
        TimeoutError: the batch took longer than half of ``transactionTimeoutMs`` from its first
            send: its halves are rolled back.
    """
    sent = _sent(messages)
    producer = shared_transaction_producer(opts)
    rows = sum(task.rows for task in sent)
    if not rows:
        return 0
    previous = find_record(opts, opts.commit_topic, query, batch)
    if previous is not None:
        log.warning(
            "rocketmq sink: batch %d of query %s was committed by an earlier run; rolling back this "
            "run's %d rows",
            batch,
            query,
            rows,
        )
        _end(opts, producer, sent, LocalTransactionState.ROLLBACK_MESSAGE)
        return 0
    first = min(task.first_born_ms for task in sent if task.rows)
    age_ms = time.time() * 1000 - first
    if age_ms > opts.transaction_timeout_ms / 2:
        _end(opts, producer, sent, LocalTransactionState.ROLLBACK_MESSAGE)
        raise TimeoutError(
            f"rocketmq sink: batch {batch} reached its commit {age_ms / 1000:.0f}s after its first send, "
            f"more than half of transactionTimeoutMs={opts.transaction_timeout_ms}: rolled back; "
            "raise transactionTimeoutMs or make the batches smaller"
        )
    record = CommitRecord(query, batch, frozenset(task.tag.epoch for task in sent))
    result = producer.send(record.message(opts.commit_topic))
    if result.send_status is not SendStatus.SEND_OK:
        log.warning(
            "rocketmq sink: the commit record of batch %d was stored with %s", batch, result.send_status
        )
    missed = _end(opts, producer, sent, LocalTransactionState.COMMIT_MESSAGE)
    if missed:
        log.warning(
            "rocketmq sink: %d half messages of batch %d left to the broker's check to commit", missed, batch
        )
    return rows


def abort_batch(opts: WriteOptions, messages: Sequence[object]) -> None:
    """Roll back the halves the successful tasks of an aborted batch sent (what this misses, the
    check rolls back: no record names it)."""
    sent = _sent(messages)
    if any(task.rows for task in sent):
        _end(opts, shared_transaction_producer(opts), sent, LocalTransactionState.ROLLBACK_MESSAGE)
