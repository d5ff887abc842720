"""Options of the ``rocketmq`` data source: parsed once, validated, and named in every error.

Owns: ``ReadOptions`` and ``WriteOptions`` (frozen, picklable: they travel to Spark's Python
workers inside the reader and writer objects, TLS settings included), ``OptionError``, and the
starting/ending offset specifications (``OffsetSpec``). Imports: the standard library and
``finchmq.client``; no pyspark, so the parsing is unit-tested without a JVM.

Strategy: Spark hands a data source its options as a case-insensitive ``str -> str`` mapping.
``ReadOptions.parse`` and ``WriteOptions.parse`` turn it into typed values, and every problem
raises ``OptionError("rocketmq option startingOffsets='...': <what is wrong>")``: the option, the
value as given, and what would be accepted. Option names follow Spark's Kafka source (camelCase,
``startingOffsets``/``endingOffsets`` with -2 = earliest and -1 = latest) and the old RocketMQ
connector (``nameServer``, ``subExpression``, ``pullBatchSize``); TLS settings keep Java's names
(``tls.enable``, ``tls.client.*``, as everywhere in finchmq). Unknown options are ignored,
as Spark passes its own (``path``, ``checkpointLocation``) through the same mapping.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from finchmq.client import TLS_CLIENT_KEYS, ClientConfig, MessageSelector, SessionCredentials, TlsConfig
from finchmq.client.config import check_group

__all__ = [
    "EARLIEST",
    "LATEST",
    "Delivery",
    "OffsetSpec",
    "OptionError",
    "QueueKey",
    "ReadOptions",
    "WriteOptions",
    "namespaced",
]

EARLIEST: Final = -2  # in offset JSON, as in Spark's Kafka source
LATEST: Final = -1

QueueKey = tuple[str, str, int]
"""``(topic, broker_name, queue_id)``: one message queue."""

_ADDR: Final = re.compile(r"^\[?[^\s\[\];]+\]?:\d{1,5}$")
_TOPIC: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # RocketMQ Validators.VALID_PATTERN_STR
_MAX_PULL_BATCH: Final = 1024
_DEFAULT_PRODUCER_GROUP: Final = "finchmq-spark-writer"
_DEFAULT_TRANSACTIONAL_GROUP: Final = "finchmq-spark-transactional"
_DEFAULT_COMMIT_TOPIC: Final = "finchmq-spark-commits"
_MIN_TRANSACTION_TIMEOUT_MS: Final = 10_000
Delivery = Literal["at-least-once", "exactly-once"]
_DELIVERIES: Final[tuple[Delivery, ...]] = ("at-least-once", "exactly-once")
_TRUE: Final = frozenset({"true"})
_FALSE: Final = frozenset({"false"})


class OptionError(ValueError):
    """A ``rocketmq`` option has a bad value; the message names the option and the value."""

    def __init__(self, option: str, value: object, problem: str) -> None:
        shown = value if isinstance(value, str) else str(value)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        super().__init__(f"rocketmq option {option}={shown!r}: {problem}")
        self.option = option
        self.value = value


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where reading starts or ends: ``earliest``, ``latest``, a timestamp or per-queue offsets.

    ``kind`` is ``"earliest"``, ``"latest"``, ``"timestamp"`` (``timestamp`` in epoch ms, resolved
    per queue to the first message stored at or after it) or ``"offsets"`` (``offsets`` maps a
    queue to an offset, ``EARLIEST`` or ``LATEST``; queues it does not name use ``default``).
    ``option`` and ``text`` are the option the spec came from and its value, for error messages.
    """

    kind: Literal["earliest", "latest", "timestamp", "offsets"]
    option: str
    text: str = ""
    timestamp: int = 0
    offsets: tuple[tuple[QueueKey, int], ...] = ()
    default: Literal["earliest", "latest"] = "earliest"

    def offset_map(self) -> dict[QueueKey, int]:
        return dict(self.offsets)


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup (Spark's mapping is case-insensitive already; plain dicts in
    unit tests are not)."""
    value = options.get(name)
    if value is None:
        lowered = name.lower()
        for key, candidate in options.items():
            if key.lower() == lowered:
                return str(candidate)
        return None
    return str(value)


def _required(options: Mapping[str, str], name: str, what: str) -> str:
    value = _get(options, name)
    if value is None or not value.strip():
        raise OptionError(name, value if value is not None else "", f"required: {what}")
    return value.strip()


def _int(
    options: Mapping[str, str], name: str, default: int | None, *, low: int, high: int | None = None
) -> int | None:
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(name, text, "expected an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise OptionError(name, text, f"must be {bound}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise OptionError(name, text, "expected true or false")


def _name_server(options: Mapping[str, str]) -> str:
    value = _required(options, "nameServer", "the name server address, host:port[;host:port...]")
    for addr in value.split(";"):
        if not _ADDR.match(addr.strip()):
            raise OptionError("nameServer", value, "expected host:port[;host:port...]")
    return ";".join(a.strip() for a in value.split(";"))


def _credentials(options: Mapping[str, str]) -> SessionCredentials | None:
    """``accessKey`` + ``secretKey``: the ACL account every request is signed with."""
    access_key, secret_key = _get(options, "accessKey"), _get(options, "secretKey")
    if access_key is None and secret_key is None:
        return None
    if access_key is None or not access_key.strip():
        raise OptionError("accessKey", access_key or "", "required with secretKey (the ACL account)")
    if secret_key is None or not secret_key.strip():
        raise OptionError(
            "secretKey", "***" if secret_key else "", "required with accessKey (the ACL account)"
        )
    return SessionCredentials(access_key.strip(), secret_key.strip())


_TLS_KEYS: Final = {key.lower(): key for key in TLS_CLIENT_KEYS}
_TLS_FLAGS: Final = ("tls.enable", "tls.test.mode.enable", "tls.client.authServer")


def _tls(options: Mapping[str, str]) -> TlsConfig:
    """``tls.enable`` and the client's other ``tls.*`` settings, under Java's names
    (``TlsConfig.from_properties``: ``tls.config.file``'s values win, as in Java). With
    ``tls.enable=true`` the certificate, key and trust files are loaded here, on the driver, so a
    wrong path fails the query before any task runs."""
    given: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if not lowered.startswith("tls."):
            continue
        name = _TLS_KEYS.get(lowered)
        if name is None:
            shown = "***" if "password" in lowered else value
            problem = (
                "a server setting; the data source connects as a client"
                if lowered.startswith("tls.server.")
                else "not a TLS client setting"
            )
            raise OptionError(key, shown, f"{problem}: expected {', '.join(sorted(TLS_CLIENT_KEYS))}")
        given[name] = str(value)
    for flag in _TLS_FLAGS:
        if flag in given:
            _bool(given, flag, False)  # strict true/false, as every other option
    enabled = _bool(given, "tls.enable", False)
    if not enabled and set(given) - {"tls.enable"}:
        others = ", ".join(sorted(set(given) - {"tls.enable"}))
        raise OptionError(
            "tls.enable", given.get("tls.enable", ""), f"{others} given but TLS is off: set tls.enable=true"
        )
    try:
        config = TlsConfig.from_properties(given)
        if enabled:
            config.client_context()  # loads the files: a bad path fails here, naming its key
    except ValueError as exc:  # TlsConfigError: the message names the key and the file
        text = str(exc)
        option = next((k for k in sorted(given, key=len, reverse=True) if k in text), "tls.config.file")
        shown = "***" if "Password" in option else given.get(option, "")
        raise OptionError(option, shown, text) from None
    return config


@functools.lru_cache(maxsize=16)
def namespaced(namespace: str | None) -> ClientConfig:
    """A client config carrying ``namespace`` (None: no namespace), for its ``with_namespace`` /
    ``without_namespace`` / ``queue_with_namespace`` rules (Java ``NamespaceUtil``) where the
    source calls the pull and admin APIs, which take no namespace of their own.

    Raises:
        ValueError: ``namespace`` is blank or contains ``%``.
    """
    return ClientConfig(namespace=namespace)


def _namespace(options: Mapping[str, str]) -> str | None:
    """``namespace``: topics and groups go to the broker as ``namespace%name`` (Java clients'
    ``ClientConfig.namespace``)."""
    text = _get(options, "namespace")
    if text is None:
        return None
    try:
        namespaced(text.strip())
    except ValueError as exc:
        raise OptionError("namespace", text, str(exc).split(" ", 1)[-1]) from None
    return text.strip()


def _check_topic(option: str, value: str, topic: str) -> str:
    if not _TOPIC.match(topic) or len(topic) > 127:
        raise OptionError(
            option, value, f"{topic!r} is not a valid topic name (letters, digits, %|_-; at most 127)"
        )
    return topic


def _topics(options: Mapping[str, str], namespace: str | None) -> tuple[str, ...]:
    """The topics as the user names them: ``namespace%topic`` is taken as ``topic``."""
    value = _required(options, "topic", "the topic(s) to read, comma-separated")
    topics = [t.strip() for t in value.split(",")]
    if any(not t for t in topics):
        raise OptionError("topic", value, "empty topic name in the comma-separated list")
    for topic in topics:
        _check_topic("topic", value, topic)
    names = namespaced(namespace)
    return tuple(dict.fromkeys(names.without_namespace(t) for t in topics))


def _offset_json(
    option: str, text: str, topics: tuple[str, ...], namespace: str | None
) -> tuple[tuple[QueueKey, int], ...]:
    """``{"topic": {"brokerName": {"queueId": offset}}}`` -> sorted ``((topic, broker, qid), offset)``
    (a topic given as ``namespace%topic`` is taken as ``topic``)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(
            option,
            text,
            f'malformed JSON ({exc.msg} at character {exc.pos}); expected "earliest", "latest" or '
            '{"topic":{"brokerName":{"queueId":offset}}}',
        ) from None
    if not isinstance(data, dict):
        raise OptionError(option, text, 'expected a JSON object {"topic":{"brokerName":{"queueId":offset}}}')
    out: dict[QueueKey, int] = {}
    names = namespaced(namespace)
    for given, brokers in data.items():
        topic = names.without_namespace(given)
        if topic not in topics:
            raise OptionError(option, text, f"topic {topic!r} is not one of the topics read {list(topics)}")
        if not isinstance(brokers, dict):
            raise OptionError(option, text, f"topic {topic!r}: expected an object of broker names")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise OptionError(option, text, f"{topic}/{broker}: expected an object of queue ids")
            for qid, offset in queues.items():
                try:
                    queue_id = int(qid)
                except ValueError:
                    raise OptionError(
                        option, text, f"{topic}/{broker}: queue id {qid!r} is not an integer"
                    ) from None
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise OptionError(
                        option,
                        text,
                        f"{topic}/{broker}/{qid}: offset {offset!r} must be an integer >= 0, "
                        "or -2 (earliest) or -1 (latest)",
                    )
                out[(topic, broker, queue_id)] = offset
    return tuple(sorted(out.items()))


def _offset_spec(
    options: Mapping[str, str],
    offsets_option: str,
    timestamp_option: str,
    topics: tuple[str, ...],
    default: Literal["earliest", "latest"],
    namespace: str | None,
) -> OffsetSpec:
    """The timestamp option wins over the offsets option (Spark's Kafka source precedence)."""
    timestamp = _int(options, timestamp_option, None, low=0)
    if timestamp is not None:
        return OffsetSpec(
            "timestamp", timestamp_option, _get(options, timestamp_option) or "", timestamp=timestamp
        )
    text = _get(options, offsets_option)
    if text is None:
        return OffsetSpec(default, offsets_option)
    lowered = text.strip().lower()
    if lowered == "earliest":
        return OffsetSpec("earliest", offsets_option, text)
    if lowered == "latest":
        return OffsetSpec("latest", offsets_option, text)
    if not text.strip().startswith("{"):
        raise OptionError(
            offsets_option,
            text,
            'expected "earliest", "latest" or {"topic":{"brokerName":{"queueId":offset}}}',
        )
    return OffsetSpec(
        "offsets",
        offsets_option,
        text,
        offsets=_offset_json(offsets_option, text, topics, namespace),
        default=default,
    )


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """The source's options, typed; see ``docs/spark.md`` for the table."""

    name_server: str
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    sub_expression: str = "*"
    sub_expression_type: str = "TAG"  # or SQL92 (the broker filters on properties)
    fail_on_data_loss: bool = True
    pull_batch_size: int = 32
    pull_timeout_ms: int = 3_000
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    consumer_group: str | None = None
    streaming: bool = False
    credentials: SessionCredentials | None = None  # accessKey/secretKey: the broker's ACL
    namespace: str | None = None  # topics and consumerGroup are namespace%name on the broker
    tls: TlsConfig = field(default_factory=TlsConfig)  # tls.enable, tls.client.*: every client

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        """Raises ``OptionError`` for a missing or bad option."""
        name_server = _name_server(options)
        namespace = _namespace(options)
        topics = _topics(options, namespace)
        starting = _offset_spec(
            options,
            "startingOffsets",
            "startingTimestamp",
            topics,
            "latest" if streaming else "earliest",
            namespace,
        )
        if streaming:
            for batch_only in ("endingOffsets", "endingTimestamp"):
                given = _get(options, batch_only)
                if given is not None:
                    raise OptionError(
                        batch_only, given, "only for batch queries; a stream has no end (use a trigger)"
                    )
            ending = OffsetSpec("latest", "endingOffsets")
        else:
            ending = _offset_spec(options, "endingOffsets", "endingTimestamp", topics, "latest", namespace)
            if starting.kind == "latest":
                raise OptionError(
                    "startingOffsets", _get(options, "startingOffsets") or "latest",
                    "a batch query cannot start at latest (it would read nothing); "
                    "use earliest, offsets or startingTimestamp",
                )  # fmt: skip
            if ending.kind == "earliest":
                raise OptionError(
                    "endingOffsets", _get(options, "endingOffsets") or "earliest",
                    "a batch query cannot end at earliest; use latest, offsets or endingTimestamp",
                )  # fmt: skip
            for key, offset in starting.offsets:
                if offset == LATEST:
                    raise OptionError(
                        "startingOffsets",
                        _get(options, "startingOffsets") or "",
                        f"{key[0]}/{key[1]}/{key[2]}: -1 (latest) is not allowed as a batch query's start",
                    )
            for key, offset in ending.offsets:
                if offset == EARLIEST:
                    raise OptionError(
                        "endingOffsets",
                        _get(options, "endingOffsets") or "",
                        f"{key[0]}/{key[1]}/{key[2]}: -2 (earliest) is not allowed as a batch query's end",
                    )
        sub_expression = (_get(options, "subExpression") or "*").strip()
        if not sub_expression:
            raise OptionError("subExpression", _get(options, "subExpression") or "", "empty tag expression")
        sub_expression_type = (_get(options, "subExpressionType") or "TAG").strip().upper()
        if sub_expression_type not in ("TAG", "SQL92"):
            raise OptionError("subExpressionType", sub_expression_type, "expected TAG or SQL92")
        try:
            MessageSelector(sub_expression_type, sub_expression).check()
        except ValueError as exc:
            raise OptionError("subExpression", sub_expression, str(exc)) from None
        consumer_group = _get(options, "consumerGroup")
        if consumer_group is not None:
            try:
                check_group(consumer_group.strip(), "consumerGroup")
            except ValueError as exc:
                raise OptionError("consumerGroup", consumer_group, str(exc).split(": ", 1)[-1]) from None
            consumer_group = consumer_group.strip()
        pull_batch_size = _int(options, "pullBatchSize", 32, low=1, high=_MAX_PULL_BATCH)
        pull_timeout_ms = _int(options, "pullTimeoutMs", 3_000, low=1)
        assert pull_batch_size is not None and pull_timeout_ms is not None
        return cls(
            name_server=name_server,
            topics=topics,
            starting=starting,
            ending=ending,
            sub_expression=sub_expression,
            sub_expression_type=sub_expression_type,
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            pull_batch_size=pull_batch_size,
            pull_timeout_ms=pull_timeout_ms,
            max_records_per_partition=_int(options, "maxRecordsPerPartition", None, low=1),
            max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, low=1),
            consumer_group=consumer_group,
            streaming=streaming,
            credentials=_credentials(options),
            namespace=namespace,
            tls=_tls(options),
        )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """The sink's options, typed; see ``docs/spark.md``.

    ``delivery="exactly-once"`` sends half messages that the driver commits with the batch
    (``_transactions``): ``commit_topic`` holds its commit records, ``transaction_timeout_ms``
    bounds a batch from its first send to its commit (the halves' check immunity), and
    ``max_in_flight`` counts single messages rather than batches.
    """

    name_server: str
    topic: str | None = None
    producer_group: str = _DEFAULT_PRODUCER_GROUP
    send_timeout_ms: int = 3_000
    send_batch_size: int = 64
    max_in_flight: int = 4
    credentials: SessionCredentials | None = None  # accessKey/secretKey: the broker's ACL
    delivery: Delivery = "at-least-once"
    commit_topic: str = _DEFAULT_COMMIT_TOPIC
    transaction_timeout_ms: int = 120_000
    namespace: str | None = None  # topics, producerGroup and commitTopic are namespace%name on the broker
    tls: TlsConfig = field(default_factory=TlsConfig)  # tls.enable, tls.client.*: every client

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly-once"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Raises ``OptionError`` for a missing or bad option."""
        name_server = _name_server(options)
        topic = _get(options, "topic")
        if topic is not None:
            topic = _check_topic("topic", topic, topic.strip())
        delivery_text = (_get(options, "delivery") or "at-least-once").strip()
        delivery = next((d for d in _DELIVERIES if d == delivery_text.lower()), None)
        if delivery is None:
            raise OptionError("delivery", delivery_text, "expected at-least-once or exactly-once")
        exactly_once = delivery == "exactly-once"
        default_group = _DEFAULT_TRANSACTIONAL_GROUP if exactly_once else _DEFAULT_PRODUCER_GROUP
        group = (_get(options, "producerGroup") or default_group).strip()
        try:
            check_group(group, "producerGroup")
        except ValueError as exc:
            raise OptionError("producerGroup", group, str(exc).split(": ", 1)[-1]) from None
        commit_topic_text = _get(options, "commitTopic")
        commit_topic = _DEFAULT_COMMIT_TOPIC
        if commit_topic_text is not None:
            commit_topic = _check_topic("commitTopic", commit_topic_text, commit_topic_text.strip())
        send_timeout_ms = _int(options, "sendTimeoutMs", 3_000, low=1)
        send_batch_size = _int(options, "sendBatchSize", 64, low=1, high=1024)
        max_in_flight = _int(options, "maxInFlight", 64 if exactly_once else 4, low=1, high=256)
        timeout_ms = _int(options, "transactionTimeoutMs", 120_000, low=_MIN_TRANSACTION_TIMEOUT_MS)
        assert send_timeout_ms is not None and send_batch_size is not None and max_in_flight is not None
        assert timeout_ms is not None
        return cls(
            name_server=name_server,
            topic=topic,
            producer_group=group,
            send_timeout_ms=send_timeout_ms,
            send_batch_size=send_batch_size,
            max_in_flight=max_in_flight,
            credentials=_credentials(options),
            delivery=delivery,
            commit_topic=commit_topic,
            transaction_timeout_ms=timeout_ms,
            namespace=_namespace(options),
            tls=_tls(options),
        )
