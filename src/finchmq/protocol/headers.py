"""Typed custom headers: RocketMQ's ``CommandCustomHeader`` classes <-> ``extFields``.

Owns: one frozen, slotted, keyword-only dataclass per Java header class (4.9.8 names, fields in
snake_case), ``PullSysFlag`` and ``REQUEST_HEADERS`` (request code -> request header class).
Imports: stdlib and ``.codes``/``.errors`` only.

Strategy:
    ``@command_header`` turns a class into the dataclass and, once at class creation, generates
    (with ``exec``, as ``dataclasses`` does) a straight-line ``from_ext_fields`` and
    ``to_ext_fields`` for it, so a per-request decode is one ``dict.get`` and one conversion per
    field with no loop or dispatch. The wire key is the field name in camelCase unless
    ``wire("key")`` names it (SEND_MESSAGE_V2's ``a``..``n``, ``clientID``).

Conversion follows Java ``RemotingCommand.makeCustomHeaderToNet`` / ``decodeCommandCustomHeader``:
    * ``str`` as is; ``int`` (Java Integer, 32 bits) and ``Long`` (64 bits) as decimal strings;
      ``bool`` written ``"true"``/``"false"``; fields whose value is ``None`` are not written.
    * A field is required on decode when Java marks it ``@CFNotNull``: it has no default, or is
      declared ``wire(default=..., not_null=True)``. Missing -> ``HeaderError`` naming the header
      class and the key. A number that does not parse or does not fit -> ``HeaderError`` naming
      the key and the value. (Java 4.9.8 only logs both and leaves the field null, which then
      fails in the processor; raising up front gives the same SYSTEM_ERROR with a useful remark.)
    * ``bool`` decodes like ``Boolean.parseBoolean`` (case-insensitive ``"true"``) and also takes
      ``"1"`` as true: a deliberate deviation, since the C++ client writes ``"0"``/``"1"``
      (spec section 3.2.1, cpp batch quirk). Anything else is false; a bool never fails.
    * Numbers use Python ``int()`` syntax, so surrounding whitespace and ``_`` are tolerated
      where Java's ``parseInt`` would refuse them.
    * Unknown keys (the C++ client's ``AccessKey``/``OnsChannel``/``Signature``) are ignored.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import (
    Any,
    ClassVar,
    Final,
    NamedTuple,
    Self,
    TypeAlias,
    TypeVar,
    dataclass_transform,
    overload,
)

from ._compiled import load as load_compiled
from .codes import RequestCode
from .errors import HeaderError

__all__ = [
    "REQUEST_HEADERS",
    "AckMessageRequestHeader",
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "CheckTransactionStateRequestHeader",
    "CloneGroupOffsetRequestHeader",
    "CommandHeader",
    "ConsumeMessageDirectlyResultRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateAccessConfigRequestHeader",
    "CreateAclRequestHeader",
    "CreateTopicRequestHeader",
    "CreateUserRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "DeleteAclRequestHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "DeleteTopicRequestHeader",
    "DeleteUserRequestHeader",
    "EndTransactionRequestHeader",
    "GetAclRequestHeader",
    "GetAllProducerInfoRequestHeader",
    "GetAllTopicConfigResponseHeader",
    "GetBrokerAclConfigResponseHeader",
    "GetBrokerConfigResponseHeader",
    "GetConsumeStatsInBrokerHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "GetProducerConnectionListRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "GetUserRequestHeader",
    "HeaderField",
    "ListAclsRequestHeader",
    "ListUsersRequestHeader",
    "Long",
    "NotificationRequestHeader",
    "NotificationResponseHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "PeekMessageRequestHeader",
    "PollingInfoRequestHeader",
    "PollingInfoResponseHeader",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "PullSysFlag",
    "PutKVConfigRequestHeader",
    "QueryConsumeQueueRequestHeader",
    "QueryConsumeTimeSpanRequestHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "RecallMessageRequestHeader",
    "RecallMessageResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "ReplyMessageRequestHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageFields",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "TopicQueueRequestHeader",
    "UnRegisterBrokerRequestHeader",
    "UnregisterClientRequestHeader",
    "UpdateAclRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
    "UpdateUserRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
    "ViewMessageRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
    "command_header",
    "decode_send_fields",
    "wire",
]

Long: TypeAlias = int
"""A Java ``long`` header field: an ``int`` the codec range-checks to 64 bits (``int`` is 32)."""

_RANGES: Final = {"int": (-(2**31), 2**31 - 1), "Long": (-(2**63), 2**63 - 1)}
_KINDS: Final = frozenset({"str", "int", "Long", "bool"})


# ---------------------------------------------------------------------------------------------
# The declarative base


@dataclass(frozen=True, slots=True)
class HeaderField:
    """How one header field travels: its attribute, its extFields key and its Java type."""

    name: str
    key: str
    kind: str  # "str", "int" (Java Integer), "Long" or "bool"
    not_null: bool  # Java @CFNotNull: required on decode
    default: object  # dataclasses.MISSING when the constructor requires the field


class CommandHeader:
    """Base of all custom headers; subclasses are made with ``@command_header``."""

    __slots__ = ()
    _fields: ClassVar[tuple[HeaderField, ...]] = ()

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """The header held in a command's ``ext_fields``; unknown keys are ignored.

        Raises:
            HeaderError: a ``@CFNotNull`` key is missing or a number does not parse.
        """
        raise NotImplementedError  # replaced on every subclass by @command_header

    def to_ext_fields(self) -> dict[str, str]:
        """A new ``ext_fields`` dict: every non-``None`` field, each value a string."""
        raise NotImplementedError  # replaced on every subclass by @command_header

    @classmethod
    def header_fields(cls) -> tuple[HeaderField, ...]:
        """The wire description of every field, in declaration order."""
        return cls._fields


@overload
def wire(key: str | None = None, *, not_null: bool | None = None) -> Any: ...
@overload
def wire(key: str | None = None, *, default: object, not_null: bool | None = None) -> Any: ...
def wire(
    key: str | None = None, *, default: object = dataclasses.MISSING, not_null: bool | None = None
) -> Any:
    """A header field with an explicit extFields ``key`` and/or a required field with a default.

    ``not_null=True`` with a ``default`` models Java's ``@CFNotNull boolean isForce``: the
    constructor may omit it, the wire may not.
    """
    metadata: dict[str, object] = {}
    if key is not None:
        metadata["key"] = key
    if not_null is not None:
        metadata["not_null"] = not_null
    return dataclasses.field(default=default, metadata=metadata)


_H = TypeVar("_H", bound=CommandHeader)
_CAMEL = re.compile(r"_([a-z0-9])")


def _camel(name: str) -> str:
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def _kind_of(cls: type, name: str, annotation: object) -> tuple[str, bool]:
    """``("int", True)`` for ``"int | None"``: the Java kind and whether ``None`` is allowed."""
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    parts = [p.strip() for p in text.split("|")]
    optional = "None" in parts
    kinds = [p for p in parts if p != "None"]
    if len(kinds) != 1 or kinds[0] not in _KINDS:
        raise TypeError(f"{cls.__name__}.{name}: unsupported header field type {annotation!r}")
    return kinds[0], optional


def _missing(cls: type, key: str) -> HeaderError:
    return HeaderError(f"{cls.__name__}: required field {key!r} is missing")


def _bad(cls: type, key: str, value: str, kind: str) -> HeaderError:
    java = "Java long" if kind == "Long" else "Java int"
    return HeaderError(f"{cls.__name__}: field {key!r} has bad value {value!r} (expected a {java})")


def _decoder_source(fields: tuple[HeaderField, ...], *, values: bool = False) -> str:
    """``from_ext_fields(cls, fields)``; or, with ``values``, ``values_from_ext_fields(fields)``
    that decodes the same way but returns ``_values_type`` (a NamedTuple) instead of a header."""
    head = "def values_from_ext_fields(fields):" if values else "def from_ext_fields(cls, fields):"
    lines = [head, "    get = fields.get"]
    sets: list[str] = []
    for i, f in enumerate(fields):
        var = f"v{i}"
        lines.append(f"    {var} = get({f.key!r})")
        if f.not_null:
            lines += [f"    if {var} is None:", f"        raise _missing(cls, {f.key!r})"]
            indent = "    "
        elif f.kind != "str":
            lines.append(f"    if {var} is not None:")
            indent = "        "
        else:
            indent = ""
        if f.kind in _RANGES:
            low, high = _RANGES[f.kind]
            lines += [
                f"{indent}n = _SMALL_INTS.get({var})",
                f"{indent}if n is None:",
                f"{indent}    try:",
                f"{indent}        n = int({var})",
                f"{indent}    except (ValueError, TypeError):",
                f"{indent}        raise _bad(cls, {f.key!r}, {var}, {f.kind!r}) from None",
                f"{indent}    if not {low} <= n <= {high}:",
                f"{indent}        raise _bad(cls, {f.key!r}, {var}, {f.kind!r})",
                f"{indent}{var} = n",
            ]
        elif f.kind == "bool":
            lines += [
                f"{indent}b = _BOOLS.get({var})",
                f"{indent}{var} = b if b is not None else {var}.lower() == 'true'",
            ]
        if not f.not_null and f.default is not None and f.default is not dataclasses.MISSING:
            lines += [f"    if {var} is None:", f"        {var} = _default_{i}"]
        sets.append(f"    _set_{i}(self, {var})")
    if values:
        names = "".join(f"v{i}, " for i in range(len(fields)))
        lines.append(f"    return _tuple_new(_values_type, ({names}))")
        return "\n".join(lines)
    # Fill the slots directly: the frozen dataclass __init__ (one object.__setattr__ per field)
    # would be half the cost of a decode. command_header refuses __post_init__, so none is skipped.
    lines += ["    self = _new(cls)", *sets, "    return self"]
    return "\n".join(lines)


def _encoder_source(fields: tuple[HeaderField, ...]) -> str:
    lines = ["def to_ext_fields(self):", "    out = {}"]
    for f in fields:
        if f.kind == "str":
            expr = "v"
        elif f.kind == "bool":
            expr = "'true' if v else 'false'"
        else:
            expr = "str(v)"
        lines += [
            f"    v = self.{f.name}",
            "    if v is not None:",
            f"        out[{f.key!r}] = {expr}",
        ]
    lines.append("    return out")
    return "\n".join(lines)


# Java Boolean.parseBoolean is "true" in any case; "1" is the C++ client's true (module doc).
_BOOLS: Final = {"true": True, "false": False, "1": True, "0": False}
# Queue ids, flags, counts: most numbers in headers are small; a lookup beats int() for them.
_SMALL_INTS: Final = {str(i): i for i in range(-1, 1024)}


def _decoder_namespace(spec: tuple[HeaderField, ...]) -> dict[str, object]:
    """The globals ``_decoder_source``'s code reads: its helpers and each field's default."""
    namespace: dict[str, object] = {"_missing": _missing, "_bad": _bad, "_BOOLS": _BOOLS}
    namespace["_SMALL_INTS"] = _SMALL_INTS
    for i, hf in enumerate(spec):
        namespace[f"_default_{i}"] = hf.default
    return namespace


def _compile(source: str, name: str, namespace: dict[str, object]) -> Callable[..., Any]:
    exec(compile(source, f"<{name}>", "exec"), namespace)  # same technique as dataclasses
    fn = namespace[name]
    assert callable(fn)
    return fn


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of slot ``name``: on ``cls``, or on the header class it extends."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__name__}.{name}: no slot")  # pragma: no cover - dataclass made it


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(dataclasses.field, wire))
def command_header(cls: type[_H]) -> type[_H]:
    """Make ``cls`` a frozen, slotted, keyword-only dataclass with a generated extFields codec.

    Field types are ``str``, ``int`` (Java Integer), ``Long`` or ``bool``, optionally ``| None``.
    Raises ``TypeError`` at class creation for any other type.
    """
    annotations: dict[str, object] = {}
    for klass in reversed(cls.__mro__):  # strings where the module defers annotations
        annotations.update(inspect.get_annotations(klass))
    if "__post_init__" in cls.__dict__:
        raise TypeError(
            f"{cls.__name__}: headers may not define __post_init__ (from_ext_fields skips __init__)"
        )
    dc = dataclass(frozen=True, slots=True, kw_only=True)(cls)
    described: list[HeaderField] = []
    for f in dataclasses.fields(typing.cast(Any, dc)):
        kind, optional = _kind_of(dc, f.name, annotations[f.name])
        not_null = bool(f.metadata.get("not_null", f.default is dataclasses.MISSING))
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{dc.__name__}.{f.name}: header fields take a plain default, not a factory")
        if f.default is None and not optional:
            raise TypeError(f"{dc.__name__}.{f.name}: default None needs '| None' in the type")
        key = f.metadata.get("key")
        described.append(
            HeaderField(
                name=f.name,
                key=key if isinstance(key, str) else _camel(f.name),
                kind=kind,
                not_null=not_null,
                default=f.default,
            )
        )
    spec = tuple(described)
    namespace = _decoder_namespace(spec)
    namespace["_new"] = object.__new__
    for i, hf in enumerate(spec):
        namespace[f"_set_{i}"] = _slot(dc, hf.name).__set__  # the slot's member descriptor
    decode = _compile(_decoder_source(spec), "from_ext_fields", namespace)
    encode = _compile(_encoder_source(spec), "to_ext_fields", namespace)
    decode.__qualname__ = f"{dc.__qualname__}.from_ext_fields"
    encode.__qualname__ = f"{dc.__qualname__}.to_ext_fields"
    decode.__doc__ = CommandHeader.from_ext_fields.__doc__
    encode.__doc__ = CommandHeader.to_ext_fields.__doc__
    type.__setattr__(dc, "_fields", spec)
    type.__setattr__(dc, "from_ext_fields", classmethod(decode))
    type.__setattr__(dc, "to_ext_fields", encode)
    return dc


# ---------------------------------------------------------------------------------------------
# Name server (Java common/protocol/header/namesrv/*)


@command_header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str
    accept_standard_json_only: bool | None = None  # 4.9.4+


@command_header
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    compressed: bool = False  # Java primitive: always written
    body_crc32: int = 0  # CRC32 & 0x7FFFFFFF of the body; 0 = not checked


@command_header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@command_header
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@command_header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@command_header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@command_header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str
    value: str


@command_header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@command_header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int = 0


@command_header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str


@command_header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int = 0


@command_header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str
    key: str


@command_header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str


@command_header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@command_header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool


@command_header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str


@command_header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str


# ---------------------------------------------------------------------------------------------
# Send


@command_header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10): the long-name header the C++ client 1.2.4 sends for every send."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False  # Java primitive: always written
    max_reconsume_times: int | None = None
    batch: bool = False  # Java primitive: always written
    broker_name: str | None = None  # V2 "n"; unused by the C++ client


@command_header
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320): the same fields under keys ``a``..``n``.

    Attribute names equal ``SendMessageRequestHeader``'s, so code can read either.
    """

    producer_group: str = wire("a")
    topic: str = wire("b")
    default_topic: str = wire("c")
    default_topic_queue_nums: int = wire("d")
    queue_id: int = wire("e")
    sys_flag: int = wire("f")
    born_timestamp: Long = wire("g")
    flag: int = wire("h")
    properties: str | None = wire("i", default=None)
    reconsume_times: int | None = wire("j", default=None)
    unit_mode: bool = wire("k", default=False)
    max_reconsume_times: int | None = wire("l", default=None)
    batch: bool = wire("m", default=False)
    broker_name: str | None = wire("n", default=None)

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        """Java ``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2``."""
        return cls(**{f.name: getattr(v1, f.name) for f in _SEND_FIELDS})

    def to_v1(self) -> SendMessageRequestHeader:
        """Java ``SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1``."""
        return SendMessageRequestHeader(**{f.name: getattr(self, f.name) for f in _SEND_FIELDS})


_SEND_FIELDS: Final = SendMessageRequestHeader.header_fields()


class SendMessageFields(NamedTuple):
    """A SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header as ``decode_send_fields``
    returns it: a tuple with the header classes' attribute names, decoded and checked exactly
    as their ``from_ext_fields`` (same errors), but about half the cost (the per-send path)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None
    reconsume_times: int | None
    unit_mode: bool
    max_reconsume_times: int | None
    batch: bool
    broker_name: str | None


def _values_decoder(cls: type[CommandHeader], values_type: type[tuple[Any, ...]]) -> Callable[..., Any]:
    spec = cls.header_fields()
    if tuple(f.name for f in spec) != values_type._fields:  # type: ignore[attr-defined]
        raise TypeError(f"{values_type.__name__} does not list {cls.__name__}'s fields in order")
    namespace = _decoder_namespace(spec)
    namespace["cls"] = cls
    namespace["_tuple_new"] = tuple.__new__
    namespace["_values_type"] = values_type
    return _compile(_decoder_source(spec, values=True), "values_from_ext_fields", namespace)


_SEND_V1_VALUES: Final = _values_decoder(SendMessageRequestHeader, SendMessageFields)
_SEND_V2_VALUES: Final = _values_decoder(SendMessageRequestHeaderV2, SendMessageFields)


def _decode_send_fields_py(fields: Mapping[str, str], *, short_keys: bool) -> SendMessageFields:
    """The send header in ``fields``: ``SendMessageRequestHeaderV2``'s keys ``a``..``n`` with
    ``short_keys``, else ``SendMessageRequestHeader``'s.

    Raises:
        HeaderError: as the header class's ``from_ext_fields`` (a required key is missing, a
            number does not parse).
    """
    decoded: SendMessageFields = (_SEND_V2_VALUES if short_keys else _SEND_V1_VALUES)(fields)
    return decoded


# ``decode_send_fields(fields, *, short_keys)``: the pure function above, or its compiled twin
# (_headers_c.pyx) where it is built; the pure one stays the reference.
decode_send_fields: Callable[..., SendMessageFields] = _decode_send_fields_py
_headers_c = load_compiled("finchmq.protocol._headers_c")
if _headers_c is not None:
    _headers_c.bind(_SEND_V2_VALUES, _SEND_V1_VALUES, SendMessageFields)
    decode_send_fields = _headers_c.decode_send_fields


@command_header
class SendMessageResponseHeader(CommandHeader):
    """SEND_MESSAGE response; ``msg_region``/``trace_on`` are the extra keys Java's broker adds."""

    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    msg_region: str | None = wire("MSG_REGION", default=None)  # broker regionId, "DefaultRegion"
    trace_on: bool | None = wire("TRACE_ON", default=None)  # broker traceOn
    recall_handle: str | None = None  # 5.x: a timer message's handle for RECALL_MESSAGE


@command_header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: Long  # commit-log offset of the failed message
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@command_header
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int  # MessageSysFlag TRANSACTION_NOT/COMMIT/ROLLBACK_TYPE = 0/8/12
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None


@command_header
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@command_header
class RecallMessageRequestHeader(CommandHeader):
    """RECALL_MESSAGE (5.x): withdraw a timer message by the handle its send answered;
    ``broker_name`` is the 5.x RpcRequestHeader's ``bname`` the Java client sets."""

    producer_group: str | None = None
    topic: str
    recall_handle: str
    broker_name: str | None = wire("bname", default=None)


@command_header
class RecallMessageResponseHeader(CommandHeader):
    msg_id: str


# ---------------------------------------------------------------------------------------------
# Pull and offsets


class PullSysFlag(enum.IntFlag):
    """PULL_MESSAGE ``sysFlag`` bits (Java ``PullSysFlag``)."""

    COMMIT_OFFSET = 1
    SUSPEND = 2
    SUBSCRIPTION = 4
    CLASS_FILTER = 8
    LITE_PULL = 16

    @staticmethod
    def build_sys_flag(
        commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool, lite_pull: bool = False
    ) -> int:
        """Java ``PullSysFlag.buildSysFlag``."""
        return (
            (1 if commit_offset else 0)
            | (2 if suspend else 0)
            | (4 if subscription else 0)
            | (8 if class_filter else 0)
            | (16 if lite_pull else 0)
        )

    @staticmethod
    def clear_commit_offset_flag(sys_flag: int) -> int:
        return sys_flag & ~1

    @staticmethod
    def has_commit_offset_flag(sys_flag: int) -> bool:
        return bool(sys_flag & 1)

    @staticmethod
    def has_suspend_flag(sys_flag: int) -> bool:
        return bool(sys_flag & 2)

    @staticmethod
    def has_subscription_flag(sys_flag: int) -> bool:
        return bool(sys_flag & 4)

    @staticmethod
    def has_class_filter_flag(sys_flag: int) -> bool:
        return bool(sys_flag & 8)

    @staticmethod
    def has_lite_pull_flag(sys_flag: int) -> bool:
        return bool(sys_flag & 16)


@command_header
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int  # PullSysFlag bits
    commit_offset: Long  # applied only when the COMMIT_OFFSET bit is set
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None  # "TAG" when absent


@command_header
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long


@command_header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int


@command_header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: Long


@command_header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long


@command_header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int


@command_header
class GetMaxOffsetResponseHeader(CommandHeader):
    offset: Long


@command_header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int


@command_header
class GetMinOffsetResponseHeader(CommandHeader):
    offset: Long


@command_header
class SearchOffsetRequestHeader(CommandHeader):
    topic: str
    queue_id: int
    timestamp: Long


@command_header
class SearchOffsetResponseHeader(CommandHeader):
    offset: Long


@command_header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    topic: str
    queue_id: int


@command_header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Long


@command_header
class ViewMessageRequestHeader(CommandHeader):
    offset: Long  # commit-log offset


@command_header
class QueryMessageRequestHeader(CommandHeader):
    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long


@command_header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


# ---------------------------------------------------------------------------------------------
# Clients and consumer groups


@command_header
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@command_header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumer_group: str


@command_header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumer_group: str


@command_header
class ResetOffsetRequestHeader(CommandHeader):
    topic: str
    group: str
    timestamp: Long
    is_force: bool = wire(default=False, not_null=True)


@command_header
class GetConsumerStatusRequestHeader(CommandHeader):
    topic: str
    group: str
    client_addr: str | None = None


@command_header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@command_header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@command_header
class CloneGroupOffsetRequestHeader(CommandHeader):
    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@command_header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    is_order: bool = False


@command_header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str
    topic: str | None = None


@command_header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumer_group: str


@command_header
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str


@command_header
class GetAllProducerInfoRequestHeader(CommandHeader):
    """GET_ALL_PRODUCER_INFO (no fields)."""


@command_header
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE: ``count`` units of ``topic``/``queue_id`` from ``index``."""

    topic: str
    queue_id: int
    index: int
    count: int
    consumer_group: str | None = None


@command_header
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str
    group: str


@command_header
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply to the requesting client."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    born_host: str = ""
    store_host: str = ""
    store_timestamp: Long = 0


@command_header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str


@command_header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str
    stats_key: str


# ---------------------------------------------------------------------------------------------
# Topics, groups and broker admin


@command_header
class CreateTopicRequestHeader(CommandHeader):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str = wire(default="SINGLE_TAG", not_null=True)
    topic_sys_flag: int | None = None
    order: bool = wire(default=False, not_null=True)
    attributes: str | None = None  # 5.x: the modification, "+message.type=FIFO,-k" (protocol.attributes)


@command_header
class DeleteTopicRequestHeader(CommandHeader):
    topic: str


@command_header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str


@command_header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    group_name: str


@command_header
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str


@command_header
class GetAllTopicConfigResponseHeader(CommandHeader):
    """Has no fields in Java either; kept so every Java header has a counterpart."""


# -- ACL 1.0 (the broker's plain_acl.yml, edited by mqadmin's ACL commands) ----------------------


@command_header
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG; the perms are comma-separated (``topicA=DENY,topicB=SUB``)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False  # a Java boolean: always written
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@command_header
class DeleteAccessConfigRequestHeader(CommandHeader):
    access_key: str


@command_header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG; ``global_white_addrs`` is comma-separated. Java requires
    the file path; finchmq's broker takes its main ACL file when it is absent."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@command_header
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """GET_BROKER_CLUSTER_ACL_INFO: ``version`` is the main file's DataVersion JSON,
    ``all_acl_file_version`` a JSON object of every file's."""

    version: str
    all_acl_file_version: str | None = None
    broker_name: str
    broker_addr: str
    cluster_name: str


# -- ACL 2.0 (Java 5.3.3: users and ACLs, the AUTH_* codes; bodies in protocol/auth.py) ----------
# No field is @CFNotNull in Java: the broker answers a missing one itself ("The username is blank"),
# so these are not in REQUEST_HEADERS (whose headers all have a required field).


@command_header
class CreateUserRequestHeader(CommandHeader):
    """AUTH_CREATE_USER; the body is a ``UserInfo``."""

    username: str | None = None


@command_header
class UpdateUserRequestHeader(CommandHeader):
    """AUTH_UPDATE_USER; the body is a ``UserInfo`` (fields left out keep their value)."""

    username: str | None = None


@command_header
class DeleteUserRequestHeader(CommandHeader):
    username: str | None = None


@command_header
class GetUserRequestHeader(CommandHeader):
    username: str | None = None


@command_header
class ListUsersRequestHeader(CommandHeader):
    """AUTH_LIST_USER: the users whose name contains ``filter`` (all when absent)."""

    filter: str | None = None


@command_header
class CreateAclRequestHeader(CommandHeader):
    """AUTH_CREATE_ACL; ``subject`` like ``User:alice``, the body an ``AclInfo``."""

    subject: str | None = None


@command_header
class UpdateAclRequestHeader(CommandHeader):
    subject: str | None = None


@command_header
class DeleteAclRequestHeader(CommandHeader):
    """AUTH_DELETE_ACL: the subject's whole ACL, or (``resource``) one entry of its
    ``policy_type`` policy (``Custom`` when absent)."""

    subject: str | None = None
    policy_type: str | None = None
    resource: str | None = None


@command_header
class GetAclRequestHeader(CommandHeader):
    subject: str | None = None


@command_header
class ListAclsRequestHeader(CommandHeader):
    """AUTH_LIST_ACL: the ACLs whose subject contains ``subject_filter``, with only the entries
    whose resource key contains ``resource_filter``."""

    subject_filter: str | None = None
    resource_filter: str | None = None


# ---------------------------------------------------------------------------------------------
# 5.x: POP (Java 5.3.3 remoting/protocol/header/*, rpc/TopicQueueRequestHeader)


@command_header
class TopicQueueRequestHeader(CommandHeader):
    """Java 5.x ``RpcRequestHeader`` + ``TopicRequestHeader``: the routing fields every 5.x
    topic/queue request may carry (the Java 5.x client sets ``bname``; finchmq's broker ignores
    them, as a broker that is not a proxy does)."""

    namespace: str | None = wire("ns", default=None)
    namespaced: bool | None = wire("nsd", default=None)
    broker_name: str | None = wire("bname", default=None)
    oneway: bool | None = wire("oway", default=None)
    lo: bool | None = None  # "logical" (static topics)


@command_header
class PopMessageRequestHeader(TopicQueueRequestHeader):
    """POP_MESSAGE. ``queue_id`` -1 pops from every queue; ``poll_time`` is how long (ms) the
    broker may hold the request, counted from ``born_time`` (the client's clock, ms)."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: Long  # ms
    poll_time: Long  # ms
    born_time: Long  # ms epoch
    init_mode: int  # ConsumeInitMode: 0 MIN, 1 MAX
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = False  # Java Boolean.FALSE: written unless set to None
    attempt_id: str | None = None


@command_header
class PopMessageResponseHeader(CommandHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int
    rest_num: Long  # messages left in the queues popped
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@command_header
class AckMessageRequestHeader(TopicQueueRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: Long


@command_header
class ChangeInvisibleTimeRequestHeader(TopicQueueRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str  # "startOffset popTime invisibleTime reviveQid ..." (protocol.pop.ExtraInfo)
    offset: Long
    invisible_time: Long  # ms, from now


@command_header
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    pop_time: Long
    invisible_time: Long
    revive_qid: int


@command_header
class PeekMessageRequestHeader(TopicQueueRequestHeader):
    topic: str
    queue_id: int
    max_msg_nums: int
    consumer_group: str


@command_header
class NotificationRequestHeader(TopicQueueRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int
    poll_time: Long  # ms
    born_time: Long  # ms epoch
    order: bool | None = False
    attempt_id: str | None = None


@command_header
class NotificationResponseHeader(CommandHeader):
    has_msg: bool = wire(default=False, not_null=True)
    polling_full: bool = False  # a Java boolean: always written


@command_header
class PollingInfoRequestHeader(TopicQueueRequestHeader):
    consumer_group: str
    topic: str
    queue_id: int


@command_header
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int


REQUEST_HEADERS: Final[dict[RequestCode, type[CommandHeader]]] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: GetRouteInfoRequestHeader,
    RequestCode.REGISTER_BROKER: RegisterBrokerRequestHeader,
    RequestCode.UNREGISTER_BROKER: UnRegisterBrokerRequestHeader,
    RequestCode.GET_KV_CONFIG: GetKVConfigRequestHeader,
    RequestCode.PUT_KV_CONFIG: PutKVConfigRequestHeader,
    RequestCode.DELETE_KV_CONFIG: DeleteKVConfigRequestHeader,
    RequestCode.GET_KVLIST_BY_NAMESPACE: GetKVListByNamespaceRequestHeader,
    RequestCode.QUERY_DATA_VERSION: QueryDataVersionRequestHeader,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: DeleteTopicFromNamesrvRequestHeader,
    RequestCode.GET_TOPICS_BY_CLUSTER: GetTopicsByClusterRequestHeader,
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    RequestCode.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RequestCode.END_TRANSACTION: EndTransactionRequestHeader,
    RequestCode.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RequestCode.RECALL_MESSAGE: RecallMessageRequestHeader,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RequestCode.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RequestCode.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RequestCode.QUERY_MESSAGE: QueryMessageRequestHeader,
    RequestCode.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader,
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RequestCode.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RequestCode.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    RequestCode.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: QueryTopicConsumeByWhoRequestHeader,
    RequestCode.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    RequestCode.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RequestCode.DELETE_TOPIC_IN_BROKER: DeleteTopicRequestHeader,
    RequestCode.GET_TOPIC_STATS_INFO: GetTopicStatsInfoRequestHeader,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: CreateAccessConfigRequestHeader,
    RequestCode.DELETE_ACL_CONFIG: DeleteAccessConfigRequestHeader,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: UpdateGlobalWhiteAddrsConfigRequestHeader,
    # 5.x: POP (BATCH_ACK_MESSAGE has a body, no header)
    RequestCode.POP_MESSAGE: PopMessageRequestHeader,
    RequestCode.ACK_MESSAGE: AckMessageRequestHeader,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ChangeInvisibleTimeRequestHeader,
    RequestCode.PEEK_MESSAGE: PeekMessageRequestHeader,
    RequestCode.NOTIFICATION: NotificationRequestHeader,
    RequestCode.POLLING_INFO: PollingInfoRequestHeader,
}
"""Request code -> the header class its receiver decodes (Java's processors)."""
