"""Message values (Java ``common/message``): ``Message`` as a producer sends it, ``MessageExt`` as
stored, ``MessageQueue``; and the text forms of their fields, the property string (spec §4.4)
and the tag hash (§4.5).

Imports: the standard library and the protocol's errors, property keys, hosts and message ids.
The byte layouts they take live apart: ``stored`` (the commit-log record), ``batch`` (the batch
body), ``msg_id``, ``compression``.

Strategy:
    Values are frozen, slotted dataclasses (h11 events); ``with_*`` helpers return copies, so a
    message handed to a producer or the store cannot change under it.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Final, Self

from ._compiled import load as load_compiled
from .errors import MessageDecodeError, MessageEncodeError
from .hosts import HostAddress
from .message_const import KEY_SEPARATOR, RESERVED_PROPERTY_NAMES, MessageConst
from .msg_id import offset_msg_id_from_packed

__all__ = [
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "Message",
    "MessageExt",
    "MessageQueue",
    "java_string_hash",
    "properties_to_string",
    "string_to_properties",
    "tags_hash_code",
]


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; orders as Java's ``MessageQueue.compareTo``."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


NAME_VALUE_SEPARATOR: Final = "\x01"  # MessageDecoder.NAME_VALUE_SEPARATOR
PROPERTY_SEPARATOR: Final = "\x02"  # MessageDecoder.PROPERTY_SEPARATOR


def properties_to_string(
    properties: Mapping[str, str], *, without: str | None = None, trusted: bool = False
) -> str:
    """``key \\x01 value \\x02 ...`` without a trailing separator (Java 4.9
    ``messageProperties2String``), leaving out the property named ``without`` if given.

    Raises ``MessageEncodeError`` for a pair that would not read back: an empty key or value, a
    key holding ``\\x01``/``\\x02``, a value holding ``\\x02``, or a non-string. ``trusted`` skips
    that check: for properties known to be writable (parsed by ``string_to_properties``, plus
    values checked by the caller), on the per-send path.
    """
    if not trusted:
        # Checked all at once on the joined texts (one pass in C), pair by pair only to say
        # which pair is bad.
        keys = list(properties)
        values = list(properties.values())
        try:
            key_text = "".join(keys)
            value_text = "".join(values)
        except TypeError:
            _check_properties(properties)
            raise  # pragma: no cover - _check_properties raised
        if (
            NAME_VALUE_SEPARATOR in key_text
            or PROPERTY_SEPARATOR in key_text
            or PROPERTY_SEPARATOR in value_text
            or "" in keys
            or "" in values
        ):
            _check_properties(properties)
    pairs = properties.items()
    if without is not None and without in properties:
        return PROPERTY_SEPARATOR.join([NAME_VALUE_SEPARATOR.join(kv) for kv in pairs if kv[0] != without])
    return PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, pairs))


def _check_properties(properties: Mapping[str, str]) -> None:
    """Raise ``MessageEncodeError`` for the first pair ``properties_to_string`` cannot write."""
    for key, value in properties.items():
        if type(key) is not str or not key or NAME_VALUE_SEPARATOR in key or PROPERTY_SEPARATOR in key:
            raise MessageEncodeError(
                f"property name {key!r} must be a non-empty string without \\x01 or \\x02", field=str(key)
            )
        if type(value) is not str or not value or PROPERTY_SEPARATOR in value:
            raise MessageEncodeError(
                f"property {key}={value!r}: the value must be a non-empty string without \\x02", field=key
            )
    raise MessageEncodeError(f"properties {properties!r} cannot be written")


def _string_to_properties_py(text: str) -> dict[str, str]:
    """Parse a property string as Java 4.9 ``MessageDecoder.string2messageProperties`` does.

    Empty segments, segments without ``\\x01`` and segments with an empty name or value (so all
    shorter than 3 characters) are skipped; cpp's trailing ``\\x02`` is accepted. The value is
    everything after the first ``\\x01``; a repeated name keeps its last value.
    """
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        key, _, value = item.partition(NAME_VALUE_SEPARATOR)
        if key and value:
            result[key] = value
    return result


# ``string_to_properties(text)``: the pure function above, or its compiled twin (_message_c.pyx)
# where it is built; the pure one stays the reference.
string_to_properties: Callable[[str], dict[str, str]] = _string_to_properties_py
_message_c = load_compiled("finchmq.protocol._message_c")
if _message_c is not None:
    _message_c.bind(_string_to_properties_py)
    string_to_properties = _message_c.string_to_properties


def tags_hash_code(tags: str | None) -> int:
    """Java ``String.hashCode`` of the tags as a signed int32, 0 for None or "" (spec §4.5).

    The consume queue stores it as the tagsCode; e.g. ``TagA`` -> 2598919, ``*`` -> 42.
    """
    if not tags:
        return 0
    return _java_string_hash(tags)


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode``: a signed int32 over the UTF-16 code units of ``text``."""
    return _java_string_hash(text)


@functools.lru_cache(maxsize=4096)
def _java_string_hash(text: str) -> int:
    # h = 31*h + unit over UTF-16 code units; a non-BMP character is a surrogate pair.
    if text.isascii():
        units: Iterable[int] = text.encode("ascii")
    else:
        data = text.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(data) // 2}H", data)
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_ANY_HOST: Final = HostAddress("0.0.0.0", 0)


@dataclass(frozen=True, slots=True)
class Message:
    """A message as a producer sends it (Java ``Message``).

    Immutable: ``with_property`` and friends return a copy, so a message can be shared between a
    caller, a retrying producer and the store without defensive copies. ``properties`` is taken
    as given (not copied); do not mutate a mapping after handing it over.
    ``Message.create`` mirrors Java's constructor (TAGS, KEYS, WAIT).
    """

    topic: str
    body: bytes = b""
    _: KW_ONLY
    flag: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.body) is not bytes:
            object.__setattr__(self, "body", bytes(self.body))

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> Self:
        """A message with Java's constructor defaults: TAGS and KEYS when non-empty, WAIT always."""
        props = dict(properties) if properties else {}
        if tags:
            props[MessageConst.PROPERTY_TAGS] = tags
        joined = _join_keys(keys) if keys is not None else ""
        if joined:
            props[MessageConst.PROPERTY_KEYS] = joined
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        return cls(topic, body, flag=flag, properties=props)

    # Accessors (Java Message getters)

    @property
    def tags(self) -> str | None:
        """The TAGS property, or None."""
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @property
    def tags_code(self) -> int:
        """``tags_hash_code(self.tags)``: the consume queue's tagsCode."""
        return tags_hash_code(self.properties.get(MessageConst.PROPERTY_TAGS))

    @property
    def keys(self) -> str | None:
        """The KEYS property (space-separated keys), or None."""
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @property
    def key_list(self) -> list[str]:
        """KEYS split on ``KEY_SEPARATOR``, empty entries dropped (what the index stores)."""
        keys = self.properties.get(MessageConst.PROPERTY_KEYS)
        return [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []

    @property
    def delay_time_level(self) -> int:
        """DELAY as an int, 0 when absent; raises ``MessageDecodeError`` if it is not an integer."""
        value = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if value is None:
            return 0
        try:
            return int(value)
        except ValueError:
            raise MessageDecodeError(
                f"property DELAY={value!r} is not an integer", field=MessageConst.PROPERTY_DELAY_TIME_LEVEL
            ) from None

    @property
    def wait_store_msg_ok(self) -> bool:
        """WAIT: true when absent, else Java ``Boolean.parseBoolean`` (case-insensitive "true")."""
        value = self.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        return value is None or value.lower() == "true"

    @property
    def deliver_time_ms(self) -> int:
        """TIMER_DELIVER_MS (5.x ``getDeliverTimeMs``), 0 when absent."""
        return self._long_property(MessageConst.PROPERTY_TIMER_DELIVER_MS)

    @property
    def delay_time_sec(self) -> int:
        """TIMER_DELAY_SEC (5.x ``getDelayTimeSec``), 0 when absent."""
        return self._long_property(MessageConst.PROPERTY_TIMER_DELAY_SEC)

    @property
    def delay_time_ms(self) -> int:
        """TIMER_DELAY_MS (5.x ``getDelayTimeMs``), 0 when absent."""
        return self._long_property(MessageConst.PROPERTY_TIMER_DELAY_MS)

    def _long_property(self, name: str) -> int:
        value = self.properties.get(name)
        if value is None:
            return 0
        try:
            return int(value)
        except ValueError:
            raise MessageDecodeError(f"property {name}={value!r} is not an integer", field=name) from None

    @property
    def unique_key(self) -> str | None:
        """UNIQ_KEY, the client-generated id (Java ``MessageClientIDSetter.getUniqID``)."""
        return self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    # Copy-on-write helpers (Java setters)

    def with_property(self, name: str, value: str) -> Self:
        """A copy with one property set (Java ``putProperty``, no name check)."""
        props = dict(self.properties)
        props[name] = value
        return replace(self, properties=props)

    def with_properties(self, properties: Mapping[str, str]) -> Self:
        """A copy with several properties set (existing ones kept unless overwritten)."""
        return replace(self, properties={**self.properties, **properties})

    def without_property(self, name: str) -> Self:
        """A copy without ``name`` (Java ``clearProperty``); ``self`` if it is absent."""
        if name not in self.properties:
            return self
        return replace(self, properties={k: v for k, v in self.properties.items() if k != name})

    def with_user_property(self, name: str, value: str) -> Self:
        """``with_property`` that refuses reserved and blank names (Java ``putUserProperty``)."""
        if name in RESERVED_PROPERTY_NAMES:
            raise MessageEncodeError(f"property name {name!r} is reserved by RocketMQ", field=name)
        if not name.strip() or not value.strip():
            raise MessageEncodeError(
                f"user property {name!r}={value!r}: name and value must not be blank", field=name
            )
        return self.with_property(name, value)

    def with_tags(self, tags: str) -> Self:
        """A copy with TAGS set."""
        return self.with_property(MessageConst.PROPERTY_TAGS, tags)

    def with_keys(self, keys: str | Iterable[str]) -> Self:
        """KEYS from a string or an iterable joined with ``KEY_SEPARATOR`` (Java ``setKeys``)."""
        return self.with_property(MessageConst.PROPERTY_KEYS, _join_keys(keys))

    def with_delay_time_level(self, level: int) -> Self:
        """A copy with DELAY set (1..18: 1s 5s 10s 30s 1m ... 2h)."""
        return self.with_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL, str(level))

    def with_deliver_time_ms(self, time_ms: int) -> Self:
        """A copy delivered at ``time_ms`` (epoch ms; 5.x ``setDeliverTimeMs``, TIMER_DELIVER_MS)
        by a broker with the timer (RocketMQ 5.x, finchmq)."""
        return self.with_property(MessageConst.PROPERTY_TIMER_DELIVER_MS, str(int(time_ms)))

    def with_delay_time_sec(self, seconds: int) -> Self:
        """A copy delivered ``seconds`` after the broker stores it (5.x ``setDelayTimeSec``)."""
        return self.with_property(MessageConst.PROPERTY_TIMER_DELAY_SEC, str(int(seconds)))

    def with_delay_time_ms(self, time_ms: int) -> Self:
        """A copy delivered ``time_ms`` after the broker stores it (5.x ``setDelayTimeMs``)."""
        return self.with_property(MessageConst.PROPERTY_TIMER_DELAY_MS, str(int(time_ms)))

    def with_wait_store_msg_ok(self, wait: bool) -> Self:
        """A copy with WAIT set (answer only once stored, or at once)."""
        return self.with_property(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, "true" if wait else "false")


def _join_keys(keys: str | Iterable[str]) -> str:
    return keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageExt(Message):
    """A message as stored: everything a commit-log record holds (Java ``MessageExt``).

    ``born_host``/``store_host`` are ``HostAddress`` values; ``store_size`` and ``body_crc``
    describe the record as stored even when the decoder inflated a compressed body.
    ``msg_id`` is the offset message id (what Java's server side calls msgId); ``client_msg_id``
    is what clients show: UNIQ_KEY when present, else the offset id (spec §4.2, §4.7).
    """

    queue_id: int = 0
    store_size: int = 0
    queue_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = _ANY_HOST
    store_timestamp: int = 0
    store_host: HostAddress = _ANY_HOST
    commit_log_offset: int = 0
    body_crc: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def msg_id(self) -> str:
        """The offset message id: STOREHOST + PHYSICALOFFSET in upper-case hex."""
        return offset_msg_id_from_packed(self.store_host.packed, self.commit_log_offset)

    @property
    def client_msg_id(self) -> str:
        """UNIQ_KEY if present, else ``msg_id`` (Java ``MessageClientExt.getMsgId``)."""
        uniq = self.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return uniq if uniq else self.msg_id
