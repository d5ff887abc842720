"""JSON command bodies: RocketMQ's ``RemotingSerializable`` classes as frozen dataclasses.

Owns: one frozen, slotted, keyword-only dataclass per Java body class (4.9.8 names, fields in
snake_case; Java ``List``/``Set`` are tuples in wire order, ``Map`` is ``dict``), the enums they
use, ``PermName`` and ``BodyError``. Imports: stdlib, ``._json``, ``.codes``, ``.errors`` and
``MessageQueue`` from ``.message``.

Strategy:
    Each class's JSON codec is derived once, on first use, from its type hints: the JSON key is
    the camelCase field name unless ``field(metadata={"key": ...})`` names it. ``from_json`` is
    lenient like fastjson and jsoncpp: fastjson's unquoted number keys and object keys
    (``_json.loads_lenient``), enums by name or ordinal (the C++ client writes ordinals), numbers
    given as strings (cpp's ``subVersion``), absent arrays (cpp omits empty sets), unknown keys.
    ``to_json()`` writes Java's field names in fastjson's (alphabetical) key order; ``None``
    fields are omitted, as fastjson omits nulls. Bodies are equal by value;
    those holding a ``dict`` are, like any dataclass with a dict field, not hashable.

Output forms: ``to_json()`` writes the bytes of Java's ``RemotingSerializable.encode()``, fastjson's
default form, which every Java reader (and every pre-4.9.4 route reader) expects: number keys bare
(``{0:"a"}``), ``MessageQueue`` keys as objects (``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``;
not valid JSON), non-ASCII as UTF-8, maps and ``HashSet`` fields in Java's hash iteration order
(``_json.java_hash_order``), ``TreeMap`` fields sorted (``JavaCollection`` annotations).
``to_json(standard=True)`` writes the standard JSON the 4.9.4+ name server sends (BrowserCompatible,
MapSortField): every key quoted (a ``MessageQueue`` key as the string of its JSON), maps sorted by
key, non-ASCII and ``/`` escaped. Both are checked against fastjson's own output
(``tests/protocol/data/java/``). ``from_json`` reads all of these forms.

Errors: a body that is not JSON, not an object, or holds a value of the wrong type raises
``BodyError``, a ``RemoteProtocolError``: bodies come from the peer and, unlike extFields, are
decoded after the codec, so this is the only place the direction can be set. The message names
the body class and the path of the bad value (``TopicRouteData: queueDatas[0].perm: ...``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import random
import struct
import time
import types
import typing
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

from ._json import (
    JSONDecodeError,
    ObjectKey,
    dumps,
    dumps_browser_compatible,
    dumps_fastjson,
    java_hash,
    java_hash_order,
    loads,
    loads_lenient,
)
from .codes import LanguageCode
from .errors import RemoteProtocolError
from .message import MessageQueue

__all__ = [
    "DEFAULT_RETRY_NEXT_MILLIS",
    "MASTER_ID",
    "BatchAck",
    "BatchAckMessageRequestBody",
    "BodyError",
    "BrokerData",
    "BrokerStatsData",
    "BrokerStatsItem",
    "CMResult",
    "CheckClientRequestBody",
    "ClusterInfo",
    "Connection",
    "ConsumeFromWhere",
    "ConsumeMessageDirectlyResult",
    "ConsumeQueueData",
    "ConsumeStats",
    "ConsumeStatsList",
    "ConsumeStatus",
    "ConsumeType",
    "ConsumerConnection",
    "ConsumerData",
    "ConsumerListByGroupResponseBody",
    "ConsumerOffsetSerializeWrapper",
    "ConsumerRunningInfo",
    "CustomizedRetryPolicy",
    "DataVersion",
    "ExponentialRetryPolicy",
    "GetConsumerStatusBody",
    "GroupList",
    "GroupRetryPolicy",
    "GroupRetryPolicyType",
    "HeartbeatData",
    "JavaBitSet",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageModel",
    "MessageQueueAssignment",
    "MessageRequestMode",
    "MessageRequestModeSerializeWrapper",
    "OffsetSerializeWrapper",
    "OffsetWrapper",
    "PermName",
    "PopProcessQueueInfo",
    "ProcessQueueInfo",
    "ProducerConnection",
    "ProducerData",
    "ProducerInfo",
    "ProducerTableInfo",
    "QueryAssignmentRequestBody",
    "QueryAssignmentResponseBody",
    "QueryConsumeQueueResponseBody",
    "QueryConsumeTimeSpanBody",
    "QueueData",
    "QueueTimeSpan",
    "RebalanceResult",
    "RegisterBrokerBody",
    "RemotingSerializable",
    "ResetOffsetBody",
    "RetryPolicy",
    "SetMessageRequestModeRequestBody",
    "SubscriptionData",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "UnlockBatchRequestBody",
    "java_key_hash",
]

MASTER_ID: Final = 0  # Java MixAll.MASTER_ID: brokerId of a master in BrokerData.brokerAddrs

# A compressed REGISTER_BROKER body inflates to at most this; a bomb is refused, not buffered.
_MAX_INFLATED_REGISTER_BODY: Final = 64 * 1024 * 1024
_INT32 = struct.Struct(">i")  # Java DataOutputStream.writeInt / RegisterBrokerBody.convertIntToByteArray


class BodyError(RemoteProtocolError):
    """A command body that is not the JSON (or compressed form) its class expects."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------------------------
# Enums and constants used in bodies


class ConsumeType(enum.IntEnum):
    """Java ``ConsumeType``; JSON carries the name (Java) or the ordinal (C++ client)."""

    CONSUME_ACTIVELY = 0  # "PULL"
    CONSUME_PASSIVELY = 1  # "PUSH"

    @property
    def type_cn(self) -> str:
        return "PULL" if self is ConsumeType.CONSUME_ACTIVELY else "PUSH"


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1  # deprecated in Java
    CONSUME_FROM_MIN_OFFSET = 2  # deprecated in Java
    CONSUME_FROM_MAX_OFFSET = 3  # deprecated in Java
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class TopicFilterType(enum.IntEnum):
    SINGLE_TAG = 0
    MULTI_TAG = 1


class MessageRequestMode(enum.IntEnum):
    """Java 5.x ``MessageRequestMode``: how a push consumer reads a queue the broker assigned
    (QUERY_ASSIGNMENT): PULL at offsets it commits, or POP (the broker tracks what is in flight;
    consumers may share a queue)."""

    PULL = 0
    POP = 1


class CMResult(enum.IntEnum):
    """Java ``CMResult``: the outcome of CONSUME_MESSAGE_DIRECTLY."""

    CR_SUCCESS = 0
    CR_LATER = 1
    CR_ROLLBACK = 2
    CR_COMMIT = 3
    CR_THROW_EXCEPTION = 4
    CR_RETURN_NULL = 5


class PermName(enum.IntFlag):
    """Topic and broker permission bits (Java ``PermName.PERM_*``)."""

    PRIORITY = 8
    READ = 4
    WRITE = 2
    INHERIT = 1

    # The checks run on every send and pull: plain int arithmetic, not IntFlag's (10x slower).
    @staticmethod
    def is_readable(perm: int) -> bool:
        return bool(int(perm) & 4)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return bool(int(perm) & 2)

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return bool(int(perm) & 1)

    @staticmethod
    def perm2string(perm: int) -> str:
        """Java ``PermName.perm2String``: ``"RWX"`` with ``-`` for each missing bit."""
        return (
            ("R" if perm & PermName.READ else "-")
            + ("W" if perm & PermName.WRITE else "-")
            + ("X" if perm & PermName.INHERIT else "-")
        )


# ---------------------------------------------------------------------------------------------
# The codec machinery (private; public API is RemotingSerializable.to_json/from_json)


class _Invalid(Exception):
    """A decoding failure; containers prepend their key to ``path`` as it propagates."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []

    def describe(self) -> str:
        where = "".join(self.path).lstrip(".")
        return f"{where}: {self.problem}" if where else self.problem


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _show(value: object, limit: int = 80) -> str:
    """A repr short enough for an error message (a bad value may be a whole subtree)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Codec:
    def decode(self, value: object) -> object:
        raise NotImplementedError

    def encode(self, value: Any, compat: bool) -> object:
        return value


class _StrCodec(_Codec):
    def decode(self, value: object) -> object:
        if type(value) is str:
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):  # fastjson and jsoncpp turn numbers into strings
            return str(value)
        raise _Invalid(f"expected a string, got {_type_name(value)} {_show(value)}")


class _IntCodec(_Codec):
    def decode(self, value: object) -> object:
        if type(value) is int:
            return value
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, str):  # cpp writes subVersion as a string
            try:
                return int(value.strip())
            except ValueError:
                pass
        elif isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Invalid(f"expected an integer, got {_type_name(value)} {_show(value)}")


class _FloatCodec(_Codec):
    def decode(self, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise _Invalid(f"expected a number, got {_type_name(value)} {_show(value)}")


class _BoolCodec(_Codec):
    def decode(self, value: object) -> object:
        if isinstance(value, bool):
            return value
        if type(value) is int:
            return value != 0
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        raise _Invalid(f"expected a boolean, got {_type_name(value)} {_show(value)}")


class _EnumCodec(_Codec):
    def __init__(self, enum_type: type[enum.IntEnum], fallback: enum.IntEnum | None = None) -> None:
        self.enum_type = enum_type
        self.fallback = fallback
        self.by_name = {m.name: m for m in enum_type}
        self.by_value = {m.value: m for m in enum_type}

    def decode(self, value: object) -> object:
        member: enum.IntEnum | None = None
        if isinstance(value, str):
            member = self.by_name.get(value)
            if member is None:
                try:
                    member = self.by_value.get(int(value))
                except ValueError:
                    member = None
        elif type(value) is int:
            member = self.by_value.get(value)
        if member is None:
            member = self.fallback
        if member is None:
            raise _Invalid(f"not a {self.enum_type.__name__} name or ordinal: {_show(value)}")
        return member

    def encode(self, value: Any, compat: bool) -> object:
        return value.name  # fastjson writes enums by name


_STR = _StrCodec()
_INT = _IntCodec()


def _mq_from(value: object) -> MessageQueue:
    if isinstance(value, ObjectKey):
        value = value.as_dict()
    elif isinstance(value, str) and value.lstrip().startswith("{"):
        try:  # fastjson WriteNonStringKeyAsString: the key is the MessageQueue's JSON text
            value = loads(value)
        except JSONDecodeError as exc:
            raise _Invalid(f"MessageQueue key is not JSON: {_show(value)}") from exc
    if not isinstance(value, dict):
        raise _Invalid(f"expected a MessageQueue object, got {_type_name(value)} {_show(value)}")
    try:
        return MessageQueue(
            topic=typing.cast(str, _STR.decode(_or(value.get("topic"), ""))),
            broker_name=typing.cast(str, _STR.decode(_or(value.get("brokerName"), ""))),
            queue_id=typing.cast(int, _INT.decode(_or(value.get("queueId"), 0))),
        )
    except _Invalid as exc:
        exc.problem = f"in MessageQueue {_show(value)}: {exc.problem}"
        raise


def _or(value: object, default: object) -> object:
    return default if value is None else value


def _mq_items(mq: MessageQueue) -> dict[str, object]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


class _MQCodec(_Codec):
    def decode(self, value: object) -> object:
        return _mq_from(value)

    def encode(self, value: Any, compat: bool) -> object:
        return _mq_items(value)


class _KeyCodec:
    """Map keys: decode what loads_lenient produced, encode per output form."""

    def __init__(self, kind: type) -> None:
        self.kind = kind

    def decode(self, key: object) -> object:
        if self.kind is str:
            if isinstance(key, str):
                return key
        elif self.kind is int:
            if isinstance(key, str):
                try:
                    return int(key)
                except ValueError:
                    pass
            elif type(key) is int:
                return key
        else:
            return _mq_from(key)
        raise _Invalid(f"bad {self.kind.__name__} map key {_show(key)}")

    def encode(self, key: Any, compat: bool) -> object:
        if self.kind is str:
            return key
        if self.kind is int:
            return key if compat else str(key)
        items = _mq_items(key)
        if compat:
            return ObjectKey(items.items())
        return dumps(items).decode("utf-8")


class _ListCodec(_Codec):
    def __init__(self, item: _Codec) -> None:
        self.item = item
        self.hash_order = False  # a Java HashSet: written in its iteration order

    def decode(self, value: object) -> object:
        if not isinstance(value, list | tuple):
            raise _Invalid(f"expected an array, got {_type_name(value)} {_show(value)}")
        decode = self.item.decode
        out = []
        for i, item in enumerate(value):
            try:
                out.append(decode(item))
            except _Invalid as exc:
                exc.path.insert(0, f"[{i}]")
                raise
        return tuple(out)

    def encode(self, value: Any, compat: bool) -> object:
        encode = self.item.encode
        items = [encode(item, compat) for item in value]
        return java_hash_order(items) if self.hash_order and len(items) > 1 else items


class _MapCodec(_Codec):
    """A Java ``Map``. The default form keeps a ``HashMap``'s iteration order (a ``TreeMap``'s:
    sorted); the standard form sorts the keys (fastjson ``MapSortField``)."""

    def __init__(self, key: _KeyCodec, value: _Codec) -> None:
        self.key = key
        self.value = value
        self.tree = False
        self.table_size = 16  # a map built without an initial capacity

    def decode(self, value: object) -> object:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object, got {_type_name(value)} {_show(value)}")
        out = {}
        for k, v in value.items():
            try:
                out[self.key.decode(k)] = self.value.decode(v)
            except _Invalid as exc:
                exc.path.insert(0, f"[{_show(k, 40)}]")
                raise
        return out

    def encode(self, value: Any, compat: bool) -> object:
        key, val = self.key.encode, self.value.encode
        keys = list(value)
        if len(keys) > 1:
            if self.tree or not compat:
                keys.sort()  # Java's natural order; MessageQueue orders as its compareTo
            else:
                keys = java_hash_order(keys, java_key_hash, self.table_size)
        return {key(k, compat): val(value[k], compat) for k in keys}


def java_key_hash(key: Any) -> int:
    """Java ``hashCode()`` of a map key or set element: String, Long/Integer or MessageQueue."""
    if isinstance(key, MessageQueue):
        return java_hash(_mq_items(key))
    return java_hash(key)


class _BodyRef(_Codec):
    """A nested body; its codec is looked up at use, so classes may refer to later ones."""

    def __init__(self, cls: type[RemotingSerializable]) -> None:
        self.cls = cls

    def decode(self, value: object) -> object:
        return _codec_of(self.cls).decode(value)

    def encode(self, value: Any, compat: bool) -> object:
        return _codec_of(self.cls).encode(value, compat)


@dataclass(frozen=True, slots=True)
class _BodyField:
    name: str
    key: str
    aliases: tuple[str, ...]
    codec: _Codec
    required: bool
    write: bool


class _BodyCodec:
    def __init__(self, cls: type[RemotingSerializable]) -> None:
        self.cls = cls
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            key = f.metadata.get("key") or _camel(f.name)
            fields.append(
                _BodyField(
                    name=f.name,
                    key=key,
                    aliases=tuple(f.metadata.get("aliases", ())),
                    codec=_codec_for(hints[f.name], f"{cls.__name__}.{f.name}"),
                    required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                    write=f.metadata.get("write", True),
                )
            )
        self.fields = tuple(fields)
        # Getters without a field (Java ``PopCheckPoint.getReviveTime``): written, never read.
        computed = [
            _BodyField(name=attr, key=key, aliases=(), codec=_INT, required=False, write=True)
            for key, attr in cls.json_computed
        ]
        # fastjson's default SortField: properties in alphabetical order of their JSON names.
        self.out_fields = tuple(sorted([*(f for f in fields if f.write), *computed], key=lambda f: f.key))
        self.prepare: Callable[[dict[str, Any]], dict[str, Any]] = cls._prepare_tree

    def decode(self, value: object) -> RemotingSerializable:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object, got {_type_name(value)} {_show(value)}")
        value = self.prepare(value)
        kwargs = {}
        for f in self.fields:
            raw = value.get(f.key)
            if raw is None:
                for alias in f.aliases:
                    raw = value.get(alias)
                    if raw is not None:
                        break
            if raw is None:  # absent or null: Java leaves the field at its default
                if f.required:
                    raise _Invalid(f"required key {f.key!r} is missing")
                continue
            try:
                kwargs[f.name] = f.codec.decode(raw)
            except _Invalid as exc:
                exc.path.insert(0, f".{f.key}")
                raise
        return self.cls(**kwargs)

    def encode(self, obj: object, compat: bool) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in self.out_fields:
            value = getattr(obj, f.name)
            if value is not None:
                out[f.key] = f.codec.encode(value, compat)
        return out


_CODECS: dict[type, _BodyCodec] = {}
_SCALARS: Final[dict[object, _Codec]] = {str: _STR, int: _INT, float: _FloatCodec(), bool: _BoolCodec()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _codec_of(cls: type[RemotingSerializable]) -> _BodyCodec:
    codec = _CODECS.get(cls)
    if codec is None:
        codec = _CODECS[cls] = _BodyCodec(cls)
    return codec


class JavaCollection(enum.Enum):
    """How Java holds a collection field, which decides its order on the wire (``Annotated``)."""

    HASH_SET = "HashSet"  # iteration in hash-bucket order
    TREE = "TreeMap/TreeSet"  # natural order of the keys


@dataclass(frozen=True, slots=True)
class JavaTable:
    """The hash table size of the Java map behind a field, when it is built with an initial
    capacity (``new ConcurrentHashMap<>(1024)`` has 2048 buckets); it decides the key order."""

    size: int


class JavaBitSet(frozenset[int]):
    """A Java ``java.util.BitSet``: the indexes of its set bits (5.x ``BatchAck.bitSet``).

    fastjson writes it (``BitSetSerializerDeserializer``) as the base64 of ``toByteArray()``:
    little-endian, bit ``i`` in byte ``i // 8``, trailing zero bytes dropped.
    """

    __slots__ = ()
    MAX_BYTES: ClassVar[int] = 64 * 1024  # decoding refuses more: 512 Ki offsets past a start

    def __new__(cls, bits: typing.Iterable[int] = ()) -> Self:
        self = super().__new__(cls, bits)
        if any(type(bit) is not int or bit < 0 for bit in self):
            raise ValueError(f"BitSet indexes must be ints >= 0, got {sorted(self, key=repr)!r}")
        return self

    @classmethod
    def from_byte_array(cls, data: bytes) -> JavaBitSet:
        """Java ``BitSet.valueOf(byte[])``."""
        number = int.from_bytes(data, "little")
        return cls(i for i in range(number.bit_length()) if number >> i & 1)

    def to_byte_array(self) -> bytes:
        """Java ``BitSet.toByteArray()``."""
        number = 0
        for bit in self:
            number |= 1 << bit
        return number.to_bytes((number.bit_length() + 7) // 8, "little")


class _BitSetCodec(_Codec):
    def decode(self, value: object) -> object:
        if isinstance(value, str):
            if len(value) > JavaBitSet.MAX_BYTES * 4 // 3 + 4:
                raise _Invalid(f"BitSet longer than {JavaBitSet.MAX_BYTES} bytes")
            try:
                data = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise _Invalid(f"BitSet is not base64: {_show(value)}") from exc
        elif isinstance(value, list | tuple):  # fastjson also reads byte[] as an array of numbers
            if len(value) > JavaBitSet.MAX_BYTES:
                raise _Invalid(f"BitSet longer than {JavaBitSet.MAX_BYTES} bytes")
            if not all(type(b) is int and -128 <= b <= 255 for b in value):
                raise _Invalid(f"BitSet bytes must be numbers in -128..255, got {_show(value)}")
            data = bytes(b & 0xFF for b in value)
        else:
            raise _Invalid(f"expected a base64 BitSet, got {_type_name(value)} {_show(value)}")
        return JavaBitSet.from_byte_array(data)

    def encode(self, value: Any, compat: bool) -> object:
        return base64.b64encode(value.to_byte_array()).decode("ascii")


def _codec_for(tp: object, where: str) -> _Codec:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        codec = _codec_for(args[0], where)
        for mark in args[1:]:
            if mark is JavaCollection.HASH_SET and isinstance(codec, _ListCodec):
                codec.hash_order = True
            elif mark is JavaCollection.TREE and isinstance(codec, _MapCodec):
                codec.tree = True
            elif isinstance(mark, JavaTable) and isinstance(codec, _MapCodec):
                codec.table_size = mark.size
        return codec
    if origin is typing.Union or origin is types.UnionType:
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _codec_for(inner[0], where)  # None is handled by the field (omitted)
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _ListCodec(_codec_for(args[0], where))
    elif origin is dict and len(args) == 2 and args[0] in (str, int, MessageQueue):
        return _MapCodec(_KeyCodec(args[0]), _codec_for(args[1], where))
    elif tp in _SCALARS:
        return _SCALARS[tp]
    elif tp is MessageQueue:
        return _MQCodec()
    elif tp is JavaBitSet:
        return _BitSetCodec()
    elif tp is LanguageCode:
        return _EnumCodec(LanguageCode, fallback=LanguageCode.OTHER)
    elif isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return _EnumCodec(tp)
    elif isinstance(tp, type) and issubclass(tp, RemotingSerializable):
        return _BodyRef(tp)
    raise TypeError(f"{where}: no JSON codec for type {tp!r}")


def _key(key: str, **kwargs: Any) -> Any:
    """A body field whose JSON key is not the camelCase of its name."""
    return field(metadata={"key": key}, **kwargs)


class RemotingSerializable:
    """Base of JSON bodies (Java ``RemotingSerializable``)."""

    __slots__ = ()
    json_computed: ClassVar[tuple[tuple[str, str], ...]] = ()
    """``(JSON key, int property)`` pairs fastjson writes from a Java getter with no field."""

    @classmethod
    def _prepare_tree(cls, tree: dict[str, Any]) -> dict[str, Any]:
        """Hook: rewrite a decoded JSON object before its fields are read (alternative forms)."""
        return tree

    def to_tree(self) -> dict[str, Any]:
        """The JSON object ``to_json`` writes (fastjson's default form), as Python values in
        Java's key order: for other printers (fastjson's pretty form)."""
        return typing.cast(dict[str, Any], _codec_of(type(self)).encode(self, True))

    def to_json(self, *, standard: bool = False) -> bytes:
        """The body as Java writes it: ``encode()``, fastjson's default form; with ``standard``,
        the standard JSON of ``encode(BrowserCompatible, QuoteFieldNames, MapSortField)``, which
        the name server sends clients of 4.9.4 and later. See the module docstring."""
        tree = _codec_of(type(self)).encode(self, not standard)
        return dumps_browser_compatible(tree) if standard else dumps_fastjson(tree)

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse a body leniently (fastjson and jsoncpp forms).

        Raises:
            BodyError: the body is empty, not JSON, or a value has the wrong type.
        """
        if not data:
            raise BodyError(f"{cls.__name__}: body is empty")
        try:
            tree = loads_lenient(data)
        except JSONDecodeError as exc:
            raise BodyError(f"{cls.__name__}: body is not JSON ({exc})") from exc
        return cls._from_tree(tree)

    @classmethod
    def _from_tree(cls, tree: object) -> Self:
        try:
            return typing.cast(Self, _codec_of(cls).decode(tree))
        except _Invalid as exc:
            raise BodyError(f"{cls.__name__}: {exc.describe()}") from None


# ---------------------------------------------------------------------------------------------
# Routes (Java common/protocol/route/*)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueData(RemotingSerializable):
    """One broker's queues of a topic. Reads the pre-4.9 key ``topicSynFlag`` too."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = field(default=0, metadata={"aliases": ("topicSynFlag",)})


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerData(RemotingSerializable):
    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)  # brokerId -> "ip:port", 0 = master

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """Java ``BrokerData.selectBrokerAddr``: the master, else a random slave; None if empty."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr is None and self.broker_addrs:
            addr = random.choice(list(self.broker_addrs.values()))
        return addr


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRouteData(RemotingSerializable):
    """GET_ROUTEINFO_BY_TOPIC response body. ``queueDatas``/``brokerDatas`` are always written."""

    order_topic_conf: str | None = None
    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    filter_server_table: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterInfo(RemotingSerializable):
    """GET_BROKER_CLUSTER_INFO response body."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, typing.Annotated[tuple[str, ...], JavaCollection.HASH_SET]] = field(
        default_factory=dict
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicList(RemotingSerializable):
    topic_list: typing.Annotated[tuple[str, ...], JavaCollection.HASH_SET] = ()
    broker_addr: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KVTable(RemotingSerializable):
    table: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Heartbeat (Java common/protocol/heartbeat/*)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionData(RemotingSerializable):
    """One subscription. ``code_set`` is kept as sent (the C++ client fills it with atoi(tag)).

    ``filterClassSource`` is read but never written (Java ``@JSONField(serialize=false)``).
    """

    class_filter_mode: bool = False
    topic: str = ""
    sub_string: str = ""
    tags_set: typing.Annotated[tuple[str, ...], JavaCollection.HASH_SET] = ()
    code_set: typing.Annotated[tuple[int, ...], JavaCollection.HASH_SET] = ()
    sub_version: int = field(default_factory=_now_ms)
    expression_type: str = "TAG"
    filter_class_source: str | None = field(default=None, metadata={"write": False})


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerData(RemotingSerializable):
    group_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerData(RemotingSerializable):
    group_name: str = ""
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckClientRequestBody(RemotingSerializable):
    """CHECK_CLIENT_CONFIG body: a consumer asks whether the broker accepts its subscription."""

    client_id: str | None = None
    group: str | None = None
    subscription_data: SubscriptionData | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatData(RemotingSerializable):
    """HEART_BEAT request body; the C++ client omits empty data sets."""

    client_id: str = _key("clientID", default="")
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerListByGroupResponseBody(RemotingSerializable):
    """GET_CONSUMER_LIST_BY_GROUP response body (Java ``GetConsumerListByGroupResponseBody``)."""

    consumer_id_list: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Orderly locks


@dataclass(frozen=True, slots=True, kw_only=True)
class LockBatchRequestBody(RemotingSerializable):
    consumer_group: str = ""
    client_id: str = ""
    only_this_broker: bool = False
    mq_set: typing.Annotated[tuple[MessageQueue, ...], JavaCollection.HASH_SET] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LockBatchResponseBody(RemotingSerializable):
    lock_ok_mq_set: typing.Annotated[tuple[MessageQueue, ...], JavaCollection.HASH_SET] = _key(
        "lockOKMQSet", default=()
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class UnlockBatchRequestBody(RemotingSerializable):
    consumer_group: str = ""
    client_id: str = ""
    only_this_broker: bool = False
    mq_set: typing.Annotated[tuple[MessageQueue, ...], JavaCollection.HASH_SET] = ()


# ---------------------------------------------------------------------------------------------
# Topic configs and broker registration


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig(RemotingSerializable):
    """Java ``TopicConfig`` with its defaults (16 queues, perm RW)."""

    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.READ | PermName.WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = None
    """5.x topic attributes by real key (``{"message.type": "FIFO"}``, ``protocol.attributes``);
    ``None`` (4.9.8, or none set) is omitted from the JSON. In an admin client's request the keys
    carry their ``+``/``-`` sign, as Java's mqadmin puts them (``AttributeParser.parseToMap``)."""

    def __str__(self) -> str:
        """Java ``TopicConfig.toString`` (mqadmin ``updateTopic``/``updateTopicPerm`` print it)."""
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={PermName.perm2string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type.name}, topicSysFlag={self.topic_sys_flag}, "
            f"order={'true' if self.order else 'false'}]"
        )

    def encode(self) -> str:
        """Java ``TopicConfig.encode``: ``"name read write perm filterType"``, space-separated,
        then (5.x, when there are attributes) the attributes' JSON."""
        text = (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{self.perm} {self.topic_filter_type.name}"
        )
        if self.attributes is None:
            return text
        ordered = java_hash_order(list(self.attributes))
        return f"{text} " + dumps_fastjson({k: self.attributes[k] for k in ordered}).decode("utf-8")

    @classmethod
    def decode(cls, text: str) -> TopicConfig:
        """Java ``TopicConfig.decode``; ``topic_sys_flag``/``order`` keep their defaults.

        Raises ``BodyError`` unless there are 5 or 6 fields; a 6th, 5.x's attributes, is read
        when it is a JSON object of strings and ignored otherwise (as Java ignores it).
        """
        parts = text.split(" ")
        try:
            if len(parts) not in (5, 6):
                raise ValueError(f"{len(parts)} fields")
            attributes: dict[str, str] | None = None
            if len(parts) == 6 and parts[5]:
                try:
                    tree = loads(parts[5])
                except JSONDecodeError:
                    tree = None
                if isinstance(tree, dict) and all(isinstance(v, str) for v in tree.values()):
                    attributes = {str(k): v for k, v in tree.items()}
            return cls(
                topic_name=parts[0],
                read_queue_nums=int(parts[1]),
                write_queue_nums=int(parts[2]),
                perm=int(parts[3]),
                topic_filter_type=TopicFilterType[parts[4]],
                attributes=attributes,
            )
        except (ValueError, KeyError) as exc:
            raise BodyError(f"TopicConfig: bad encoded form {_show(text)} ({exc})") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVersion(RemotingSerializable):
    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    def next_version(self) -> DataVersion:
        """Java ``DataVersion.nextVersion``, as a new value: counter + 1, timestamp now."""
        return DataVersion(timestamp=_now_ms(), counter=self.counter + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigSerializeWrapper(RemotingSerializable):
    # the broker's TopicConfigManager table: new ConcurrentHashMap<>(1024)
    topic_config_table: typing.Annotated[dict[str, TopicConfig], JavaTable(2048)] = field(
        default_factory=dict
    )
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerBody(RemotingSerializable):
    """REGISTER_BROKER request body: plain JSON, or Java's compressed form (``compressed=true``)."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: tuple[str, ...] = ()

    def encode(self, compress: bool = False) -> bytes:
        """Java ``RegisterBrokerBody.encode(compress)``.

        Compressed: a zlib stream of int32-length-prefixed DataVersion JSON, an int32 topic
        count, each topic's ``TopicConfig.encode()`` and the filterServerList JSON.
        """
        if not compress:
            return self.to_json()
        wrapper = self.topic_config_serialize_wrapper

        def chunk(data: bytes) -> bytes:
            return _INT32.pack(len(data)) + data

        parts = [chunk(wrapper.data_version.to_json()), _INT32.pack(len(wrapper.topic_config_table))]
        parts += [chunk(tc.encode().encode("utf-8")) for tc in wrapper.topic_config_table.values()]
        parts.append(chunk(dumps(list(self.filter_server_list))))
        return zlib.compress(b"".join(parts), 9)  # Java Deflater.BEST_COMPRESSION

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, compressed: bool) -> RegisterBrokerBody:
        """Java ``RegisterBrokerBody.decode(data, compressed)``. Raises ``BodyError``."""
        if not compressed:
            return cls.from_json(data)
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(bytes(data), _MAX_INFLATED_REGISTER_BODY + 1)
        except zlib.error as exc:
            raise BodyError(f"RegisterBrokerBody: compressed body does not inflate ({exc})") from exc
        if len(raw) > _MAX_INFLATED_REGISTER_BODY:
            raise BodyError(f"RegisterBrokerBody: inflates beyond {_MAX_INFLATED_REGISTER_BODY} bytes")
        pos = 0

        def take(n: int, what: str) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(raw):
                raise BodyError(f"RegisterBrokerBody: compressed body truncated in {what}")
            pos += n
            return raw[pos - n : pos]

        def take_chunk(what: str) -> bytes:
            (length,) = _INT32.unpack(take(4, what))
            return take(length, what)

        data_version = DataVersion.from_json(take_chunk("dataVersion"))
        (count,) = _INT32.unpack(take(4, "topic count"))
        table: dict[str, TopicConfig] = {}
        for _ in range(max(count, 0)):
            text = take_chunk("topic config").decode("utf-8", errors="replace")
            topic_config = TopicConfig.decode(text)
            table[topic_config.topic_name] = topic_config
        servers = loads_lenient(take_chunk("filterServerList"))
        if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
            raise BodyError(
                f"RegisterBrokerBody: filterServerList is not a list of strings: {_show(servers)}"
            )
        wrapper = TopicConfigSerializeWrapper(topic_config_table=table, data_version=data_version)
        return cls(topic_config_serialize_wrapper=wrapper, filter_server_list=tuple(servers))


class GroupRetryPolicyType(enum.IntEnum):
    """Java 5.x ``GroupRetryPolicyType``; JSON carries the name."""

    EXPONENTIAL = 0
    CUSTOMIZED = 1


_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1


def _java_long(value: int) -> int:
    """``value`` wrapped to a Java ``long`` (two's complement overflow)."""
    return (value - _LONG_MIN) % (1 << 64) + _LONG_MIN


def _java_pow_long(base: int, exponent: int) -> int:
    """Java ``(long) Math.pow(base, exponent)``: a double, truncated and clamped to ``long``."""
    try:
        power = float(base) ** exponent
    except OverflowError:
        power = float("inf") if base > 0 or exponent % 2 == 0 else float("-inf")
    if power >= 2.0**63:
        return _LONG_MAX
    if power <= -(2.0**63):
        return _LONG_MIN
    return int(power)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExponentialRetryPolicy(RemotingSerializable):
    """Java 5.x ``ExponentialRetryPolicy``: a retry waits ``initial * multiplier^n``, at most
    ``max`` milliseconds."""

    initial: int = 5_000  # TimeUnit.SECONDS.toMillis(5)
    max: int = 7_200_000  # TimeUnit.HOURS.toMillis(2)
    multiplier: int = 2

    def next_delay_duration(self, reconsume_times: int) -> int:
        """Java ``nextDelayDuration``: milliseconds before the next delivery of a message
        consumed ``reconsume_times`` times (clamped to 0..32)."""
        times = min(max(reconsume_times, 0), 32)
        return min(self.max, _java_long(self.initial * _java_pow_long(self.multiplier, times)))


DEFAULT_RETRY_NEXT_MILLIS: Final[tuple[int, ...]] = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)
"""Java ``CustomizedRetryPolicy``'s default ``next``: 1s 5s 10s 30s 1m..10m 20m 30m 1h 2h, the
broker's default ``messageDelayLevel``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomizedRetryPolicy(RemotingSerializable):
    """Java 5.x ``CustomizedRetryPolicy``: a retry waits ``next[reconsumeTimes + 2]``
    milliseconds, as the 4.x delay levels did."""

    next: tuple[int, ...] = DEFAULT_RETRY_NEXT_MILLIS

    def next_delay_duration(self, reconsume_times: int) -> int:
        """Java ``nextDelayDuration``: index ``reconsumeTimes + 2`` (delay level ``+ 3``), the
        last entry beyond the end."""
        if not self.next:
            raise ValueError("CustomizedRetryPolicy.next is empty")
        return self.next[min(max(reconsume_times, 0) + 2, len(self.next) - 1)]


RetryPolicy: typing.TypeAlias = ExponentialRetryPolicy | CustomizedRetryPolicy
"""Java 5.x ``RetryPolicy``: either policy, both with ``next_delay_duration``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRetryPolicy(RemotingSerializable):
    """Java 5.x ``GroupRetryPolicy``: a consumer group's retry back-off (JSON
    ``{"type":"EXPONENTIAL","exponentialRetryPolicy":{...}}`` or
    ``{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[...]}}``)."""

    type: GroupRetryPolicyType = GroupRetryPolicyType.CUSTOMIZED
    exponential_retry_policy: ExponentialRetryPolicy | None = None
    customized_retry_policy: CustomizedRetryPolicy | None = None

    @property
    def retry_policy(self) -> RetryPolicy:
        """Java ``getRetryPolicy`` (not serialized): the policy of ``type``; when that one is
        absent, the default ``CustomizedRetryPolicy``."""
        if self.type is GroupRetryPolicyType.EXPONENTIAL and self.exponential_retry_policy is not None:
            return self.exponential_retry_policy
        if self.type is GroupRetryPolicyType.CUSTOMIZED and self.customized_retry_policy is not None:
            return self.customized_retry_policy
        return CustomizedRetryPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionGroupConfig(RemotingSerializable):
    """Java ``SubscriptionGroupConfig`` with its defaults.

    The 5.x fields ``consume_message_orderly`` and ``group_retry_policy`` are None unless set, so
    a group written without them has 4.9.8's bytes; None means Java 5.x's default (not orderly;
    ``effective_group_retry_policy``).
    """

    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool | None = None  # 5.x: FIFO consumption for gRPC clients
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: GroupRetryPolicy | None = None  # 5.x
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    @property
    def is_consume_message_orderly(self) -> bool:
        """Java ``isConsumeMessageOrderly``: False when unset."""
        return bool(self.consume_message_orderly)

    @property
    def effective_group_retry_policy(self) -> GroupRetryPolicy:
        """Java ``getGroupRetryPolicy``: the group's policy, or Java's default
        (``CUSTOMIZED`` with the default ``next``) when unset."""
        return self.group_retry_policy if self.group_retry_policy is not None else GroupRetryPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionGroupWrapper(RemotingSerializable):
    subscription_group_table: typing.Annotated[dict[str, SubscriptionGroupConfig], JavaTable(2048)] = field(
        default_factory=dict
    )
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOffsetSerializeWrapper(RemotingSerializable):
    """GET_ALL_CONSUMER_OFFSET body: ``"topic@group"`` -> {queueId: offset}."""

    # ConsumerOffsetManager: new ConcurrentHashMap<>(512) of new ConcurrentHashMap<>(32)
    offset_table: typing.Annotated[
        dict[str, typing.Annotated[dict[int, int], JavaTable(64)]], JavaTable(1024)
    ] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Admin: stats, connections, offsets


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetWrapper(RemotingSerializable):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeStats(RemotingSerializable):
    """GET_CONSUME_STATS body; mqadmin reads fastjson's default form with object keys."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        """Java ``ConsumeStats.computeTotalDiff``: the summed lag."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeStatsList(RemotingSerializable):
    """GET_BROKER_CONSUME_STATS body (mqadmin ``brokerConsumeStats``): per group, its topics' stats."""

    consume_stats_list: tuple[dict[str, tuple[ConsumeStats, ...]], ...] = ()
    broker_addr: str | None = None
    total_diff: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceResult(RemotingSerializable):
    """mqadmin ``allocateMQ``'s answer: each client id's queues."""

    result: dict[str, tuple[MessageQueue, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicOffset(RemotingSerializable):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicStatsTable(RemotingSerializable):
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection(RemotingSerializable):
    client_id: str = ""
    client_addr: str = ""
    language: LanguageCode = LanguageCode.JAVA  # unknown names read as OTHER
    version: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConnection(RemotingSerializable):
    connection_set: tuple[Connection, ...] = ()
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConnection(RemotingSerializable):
    connection_set: tuple[Connection, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerInfo(RemotingSerializable):
    """One producer of GET_ALL_PRODUCER_INFO; ``str()`` is Java's ``toString`` (mqadmin ``producer``)."""

    client_id: str = ""
    remote_ip: str = _key("remoteIP", default="")  # Netty's SocketAddress.toString: "/host:port"
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = 0

    def __str__(self) -> str:
        return (
            f"clientId={self.client_id},remoteIP={self.remote_ip}, language={self.language.name}, "
            f"version={self.version}, lastUpdateTimestamp={self.last_update_timestamp}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerTableInfo(RemotingSerializable):
    """GET_ALL_PRODUCER_INFO response body: every producer group's members on a broker."""

    data: dict[str, tuple[ProducerInfo, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeQueueData(RemotingSerializable):
    """One consume-queue unit of QUERY_CONSUME_QUEUE; ``str()`` is Java's ``toString``
    (mqadmin ``queryCq``)."""

    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def __str__(self) -> str:
        def quoted(v: str | None) -> str:
            return "null" if v is None else v

        return (
            f"ConsumeQueueData{{physicOffset={self.physic_offset}, physicSize={self.physic_size}, "
            f"tagsCode={self.tags_code}, extendDataJson='{quoted(self.extend_data_json)}', "
            f"bitMap='{quoted(self.bit_map)}', eval={'true' if self.eval else 'false'}, "
            f"msg='{quoted(self.msg)}'}}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumeQueueResponseBody(RemotingSerializable):
    """QUERY_CONSUME_QUEUE response body: a queue's index range, some units, and (given a group)
    its subscription and filter."""

    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: tuple[ConsumeQueueData, ...] | None = None
    max_queue_index: int = 0
    min_queue_index: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessQueueInfo(RemotingSerializable):
    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = _key("cachedMsgSizeInMiB", default=0)
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # sic, Java's spelling
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeStatus(RemotingSerializable):
    pull_rt: float = _key("pullRT", default=0.0)
    pull_tps: float = _key("pullTPS", default=0.0)
    consume_rt: float = _key("consumeRT", default=0.0)
    consume_ok_tps: float = _key("consumeOKTPS", default=0.0)
    consume_failed_tps: float = _key("consumeFailedTPS", default=0.0)
    consume_failed_msgs: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerRunningInfo(RemotingSerializable):
    """GET_CONSUMER_RUNNING_INFO response body; ``mq_table`` has MessageQueue keys."""

    properties: dict[str, str] = field(default_factory=dict)  # non-string values read as strings
    subscription_set: tuple[SubscriptionData, ...] = ()
    mq_table: typing.Annotated[dict[MessageQueue, ProcessQueueInfo], JavaCollection.TREE] = field(
        default_factory=dict
    )
    status_table: typing.Annotated[dict[str, ConsumeStatus], JavaCollection.TREE] = field(
        default_factory=dict
    )
    jstack: str | None = None
    # 5.x: the queues popped (pop mode); None (not written, as 4.9.8) when there are none
    mq_pop_table: typing.Annotated[dict[MessageQueue, PopProcessQueueInfo], JavaCollection.TREE] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PopProcessQueueInfo(RemotingSerializable):
    """5.x: a queue a push consumer pops (``ConsumerRunningInfo.mq_pop_table``)."""

    wait_ack_count: int = 0
    droped: bool = False  # sic, Java's spelling
    last_pop_timestamp: int = 0

    def __str__(self) -> str:
        """Java ``PopProcessQueueInfo.toString`` (mqadmin ``consumerStatus`` prints it)."""
        droped = "true" if self.droped else "false"
        return (
            f"PopProcessQueueInfo [waitAckCount:{self.wait_ack_count}, droped:{droped}, "
            f"lastPopTimestamp:{self.last_pop_timestamp}]"
        )


def _reset_offset_array_form(tree: dict[str, Any]) -> dict[str, Any]:
    """The C++ client's ``{"offsetTable":[{"topic",..,"offset":N}]}`` -> the map form."""
    table = tree.get("offsetTable")
    if not isinstance(table, list):
        return tree
    as_map: dict[object, object] = {}
    for i, entry in enumerate(table):
        if not isinstance(entry, dict):
            raise _Invalid(f"offsetTable[{i}]: expected an object, got {_type_name(entry)} {_show(entry)}")
        as_map[ObjectKey(_mq_items(_mq_from(entry)).items())] = entry.get("offset")
    return {**tree, "offsetTable": as_map}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetOffsetBody(RemotingSerializable):
    """RESET_CONSUMER_CLIENT_OFFSET / INVOKE_BROKER_TO_RESET_OFFSET body.

    Reads Java's map form (any key form) and the C++ client's array form (spec section 3.3).
    """

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    @classmethod
    def _prepare_tree(cls, tree: dict[str, Any]) -> dict[str, Any]:
        return _reset_offset_array_form(tree)

    def to_cpp_json(self) -> bytes:
        """The array form the C++ client 1.2.4 parses (it cannot read fastjson's object keys)."""
        entries = [{**_mq_items(mq), "offset": offset} for mq, offset in self.offset_table.items()]
        return dumps({"offsetTable": entries})


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerStatusBody(RemotingSerializable):
    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeMessageDirectlyResult(RemotingSerializable):
    order: bool = False
    auto_commit: bool = True
    consume_result: CMResult | None = None
    remark: str | None = None
    spent_time_mills: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueTimeSpan(RemotingSerializable):
    """Java also writes ``*TimeStampStr`` getters; they are ignored on input, not written."""

    message_queue: MessageQueue | None = None
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryConsumeTimeSpanBody(RemotingSerializable):
    consume_time_span_set: tuple[QueueTimeSpan, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerStatsItem(RemotingSerializable):
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerStatsData(RemotingSerializable):
    """VIEW_BROKER_STATS_DATA response body: one stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem | None = None
    stats_hour: BrokerStatsItem | None = None
    stats_day: BrokerStatsItem | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupList(RemotingSerializable):
    """QUERY_TOPIC_CONSUME_BY_WHO response body (Java ``GroupList``)."""

    group_list: typing.Annotated[tuple[str, ...], JavaCollection.HASH_SET] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetSerializeWrapper(RemotingSerializable):
    """A broadcasting consumer's ``offsets.json`` (Java client ``OffsetSerializeWrapper``); Java
    writes it in fastjson's default form (MessageQueue objects as keys)."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# 5.x: POP (Java 5.3.3 remoting/protocol/body/BatchAck*)


def _json_field(key: str, alternate: str) -> dict[str, object]:
    """Field metadata for Java ``@JSONField(name=key, alternateNames={alternate})``."""
    return {"key": key, "aliases": (alternate,)}


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchAck(RemotingSerializable):
    """One check point's acks in a BATCH_ACK_MESSAGE: bit ``i`` of ``bit_set`` acks queue offset
    ``start_offset + i``; ``retry`` is the extra info's topic mark ("0", "1" v1, "2" v2 retry)."""

    consumer_group: str | None = field(default=None, metadata=_json_field("c", "consumerGroup"))
    topic: str | None = field(default=None, metadata=_json_field("t", "topic"))
    retry: str | None = field(default=None, metadata=_json_field("r", "retry"))
    start_offset: int = field(default=0, metadata=_json_field("so", "startOffset"))
    queue_id: int = field(default=0, metadata=_json_field("q", "queueId"))
    revive_queue_id: int = field(default=0, metadata=_json_field("rq", "reviveQueueId"))
    pop_time: int = field(default=0, metadata=_json_field("pt", "popTime"))
    invisible_time: int = field(default=0, metadata=_json_field("it", "invisibleTime"))
    bit_set: JavaBitSet | None = field(default=None, metadata=_json_field("b", "bitSet"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchAckMessageRequestBody(RemotingSerializable):
    """BATCH_ACK_MESSAGE request body."""

    broker_name: str | None = None
    acks: tuple[BatchAck, ...] = ()


# ---------------------------------------------------------------------------------------------
# 5.x: queues assigned by the broker (Java 5.3.3 QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageQueueAssignment(RemotingSerializable):
    """One queue the broker assigned and how to read it (a POP queue id may be -1: every queue
    of that broker)."""

    message_queue: MessageQueue | None = None
    mode: MessageRequestMode = MessageRequestMode.PULL
    attachments: dict[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryAssignmentRequestBody(RemotingSerializable):
    """QUERY_ASSIGNMENT request body: which queues of ``topic`` should ``client_id`` read."""

    topic: str = ""
    consumer_group: str = ""
    client_id: str = ""
    strategy_name: str = ""
    message_model: MessageModel | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryAssignmentResponseBody(RemotingSerializable):
    """QUERY_ASSIGNMENT response body (a Java ``HashSet``; None: the broker could not tell)."""

    message_queue_assignments: tuple[MessageQueueAssignment, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetMessageRequestModeRequestBody(RemotingSerializable):
    """SET_MESSAGE_REQUEST_MODE request body, and one entry of ``messageRequestMode.json``.

    ``pop_share_queue_num``: in POP mode a member also pops the queues of the next N members
    (0 or less, or at least members - 1: every member pops every queue)."""

    topic: str = ""
    consumer_group: str = ""
    mode: MessageRequestMode = MessageRequestMode.PULL
    pop_share_queue_num: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRequestModeSerializeWrapper(RemotingSerializable):
    """``config/messageRequestMode.json`` (Java ``MessageRequestModeManager``) and
    GET_ALL_MESSAGE_REQUEST_MODE's body: topic -> group -> mode."""

    message_request_mode_map: dict[str, dict[str, SetMessageRequestModeRequestBody]] = field(
        default_factory=dict
    )
