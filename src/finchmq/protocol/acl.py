"""RocketMQ ACL 1.0, the parts both ends share (Java ``org.apache.rocketmq.acl.common``/``plain``).

Owns:
    * the request signature (``AclUtils.combineRequestContent`` + ``AclSigner``): HMAC-SHA1, keyed
      with the secret key, over the values of the request's extFields sorted by key (``Signature``
      left out) followed by the body, Base64-encoded into the ``Signature`` extField next to
      ``AccessKey``. ``sign_request`` is what a client's RPC hook does (``AclClientRPCHook``);
      the broker recomputes the same bytes with ``request_signature``.
    * ``SessionCredentials`` (Java's name and fields);
    * permissions (Java ``Permission``): the bits, ``PUB|SUB`` parsing, the admin-only codes;
    * ``parse_access_request``: what a request needs (Java ``PlainAccessValidator.parse``);
    * ``AddressPattern``: a ``whiteRemoteAddress`` pattern (Java ``RemoteAddressStrategyFactory``).
    * RocketMQ 5.x gRPC's signature: the ``authorization`` metadata value
      (``MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>``,
      ``parse_v2_authorization``) and its check (``verify_v2_signature``: the same HMAC-SHA1,
      over the ``x-mq-date-time`` value).

Sans-IO: no files, no sockets. The broker's account table, file loading and checks live in
``finchmq.broker.acl``.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import ipaddress
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from .bodies import HeartbeatData
from .codes import RequestCode
from .command import Body, RemotingCommand
from .pop import parse_normal_topic
from .topics import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRACE_TOPIC, retry_topic

__all__ = [
    "ACCESS_KEY",
    "ACL_EXCEPTION",
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "ONS_CHANNEL",
    "PUB",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "SUB",
    "UNIQUE_MSG_QUERY_FLAG",
    "V2_AUTHORIZATION",
    "V2_DATE_TIME",
    "AccessRequest",
    "AddressPattern",
    "AuthorizationHeaderError",
    "SessionCredentials",
    "V2Authorization",
    "cal_signature",
    "check_permission",
    "combine_request_content",
    "parse_access_request",
    "parse_perm",
    "parse_v2_authorization",
    "perm_to_string",
    "request_signature",
    "sign_request",
    "verify_v2_signature",
]

# extFields keys (Java SessionCredentials; OnsChannel is what the C++ client adds)
ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
ONS_CHANNEL: Final = "OnsChannel"
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"  # Java MixAll: left out of the broker's content

# Java's remark for a refused request starts with the exception's class name; clients (ours
# included) recognise an ACL refusal by it.
ACL_EXCEPTION: Final = "org.apache.rocketmq.acl.common.AclException"

# Java Permission's bits
DENY: Final = 1
ANY: Final = 1 << 1
PUB: Final = 1 << 2
SUB: Final = 1 << 3

# Java 4.9.8 Permission.ADMIN_CODE, plus the ACL-editing codes (RocketMQ 5.x lists 50-52 too; in
# 4.9.8 any account with a valid signature could rewrite the ACL file, admin flag included).
ADMIN_CODES: Final = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    }
)

_PERMS: Final = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


# -- signature ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An account's keys (Java ``SessionCredentials``): every request a client sends with them is
    signed with ``secret_key`` and carries ``access_key`` (and ``security_token`` when set)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("access_key", "secret_key"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"SessionCredentials.{name} must be a non-blank string, got {value!r}")
        if self.security_token is not None and not isinstance(self.security_token, str):
            raise ValueError(
                f"SessionCredentials.security_token must be a string, got {self.security_token!r}"
            )


def _java_sorted(keys: Iterable[str]) -> list[str]:
    """Keys in Java ``String.compareTo`` order (UTF-16 code units), as a ``TreeMap`` holds them."""
    keys = list(keys)
    if all(k.isascii() for k in keys):
        return sorted(keys)
    return sorted(keys, key=lambda k: k.encode("utf-16-be", "surrogatepass"))


def _content_head(ext_fields: Mapping[str, str], skip: frozenset[str]) -> bytes:
    text = "".join(ext_fields[k] for k in _java_sorted(k for k in ext_fields if k not in skip))
    # Java's getBytes(UTF-8) writes '?' for a lone surrogate; so does "replace".
    return text.encode("utf-8", "replace")


_SKIP_CLIENT: Final = frozenset({SIGNATURE})


def combine_request_content(
    ext_fields: Mapping[str, str], body: Body | None, skip: frozenset[str] = _SKIP_CLIENT
) -> bytes:
    """Java ``AclUtils.combineRequestContent``: the bytes a signature covers."""
    return _content_head(ext_fields, skip) + bytes(body or b"")


def cal_signature(data: bytes, secret_key: str) -> str:
    """Java ``AclSigner.calSignature``: Base64(HMAC-SHA1(secret_key, data))."""
    digest = hmac.new(secret_key.encode("utf-8", "replace"), data, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def request_signature(
    secret_key: str, ext_fields: Mapping[str, str], body: Body | None, skip: frozenset[str] = _SKIP_CLIENT
) -> str:
    """The signature of a request's content (``combine_request_content``) without copying the body."""
    mac = hmac.new(secret_key.encode("utf-8", "replace"), _content_head(ext_fields, skip), hashlib.sha1)
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def sign_request(request: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    """``request`` with ``AccessKey`` (``SecurityToken``) and its ``Signature`` added (Java
    ``AclClientRPCHook.doBeforeRequest``)."""
    fields = dict(request.ext_fields)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = request_signature(credentials.secret_key, fields, request.body)
    return dataclasses.replace(request, ext_fields=fields)


# -- permissions ----------------------------------------------------------------------------------


def parse_perm(text: str | None) -> int:
    """Java ``Permission.parsePermFromString``: PUB, SUB, PUB|SUB, SUB|PUB, DENY; anything else
    (and ``None``) is DENY."""
    if text is None:
        return DENY
    return _PERMS.get(text.strip(), DENY)


def is_perm_string(text: str) -> bool:
    """True for the strings ``parse_perm`` knows (Java ``Permission.checkResourcePerms``)."""
    return text.strip() in _PERMS


def perm_to_string(perm: int) -> str:
    """The inverse of ``parse_perm`` (for messages)."""
    if perm & DENY:
        return "DENY"
    names = [name for name, bit in (("PUB", PUB), ("SUB", SUB)) if perm & bit]
    return "|".join(names) or ("ANY" if perm & ANY else "DENY")


def check_permission(needed: int, owned: int) -> bool:
    """Java ``Permission.checkPermission``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


# -- what a request needs -------------------------------------------------------------------------


@dataclass(slots=True)
class AccessRequest:
    """What a request asks for (the ``PlainAccessResource`` Java's ``parse`` builds).

    ``resources`` maps a topic, or a group's retry topic (``%RETRY%group``), to the permission
    the request needs on it. ``remote_ip`` is the peer's address without its port.
    """

    remote_ip: str
    request_code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    resources: dict[str, int] = field(default_factory=dict)

    def add(self, resource: str | None, perm: int) -> None:
        if resource is not None:
            self.resources[resource] = perm


def _retry(group: str | None) -> str | None:
    return None if group is None else retry_topic(group)


def parse_access_request(request: RemotingCommand, remote_addr: str) -> AccessRequest:
    """Java ``PlainAccessValidator.parse``: who signs ``request`` and which topics and groups it
    needs with which permission.

    Raises:
        ProtocolError: a HEART_BEAT body that does not decode.
    """
    host, sep, _ = remote_addr.rpartition(":")
    access = AccessRequest(remote_ip=host if sep else remote_addr, request_code=request.code)
    ext = request.ext_fields
    access.access_key = ext.get(ACCESS_KEY)
    access.signature = ext.get(SIGNATURE)
    access.security_token = ext.get(SECURITY_TOKEN)
    code = request.code
    if code == RequestCode.SEND_MESSAGE:
        topic = ext.get("topic")
        if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            access.add(_retry(ext.get("group")), SUB)  # Java reads "group" (absent from the header)
        else:
            access.add(topic, PUB)
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        # Java 4.9.8 leaves SEND_BATCH_MESSAGE unchecked; it is a send like the others.
        topic = ext.get("b")
        if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            access.add(_retry(ext.get("a")), SUB)
        else:
            access.add(topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        access.add(_retry(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        access.add(ext.get("topic"), SUB)
        access.add(_retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        access.add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        heartbeat = HeartbeatData.from_json(request.body)
        for consumer in heartbeat.consumer_data_set:
            access.add(retry_topic(consumer.group_name), SUB)
            for subscription in consumer.subscription_data_set:
                access.add(subscription.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        access.add(_retry(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        access.add(_retry(ext.get("consumerGroup")), SUB)
        access.add(ext.get("topic"), SUB)
    elif code == RequestCode.RECALL_MESSAGE:  # 5.x: @RocketMQAction(RECALL_MESSAGE, PUB) on the topic
        access.add(ext.get("topic"), PUB)
    elif code in _POP_CODES:
        # 5.x: what a pull of the topic needs (Java 5.x's headers mark topic and group SUB); an
        # ack of a message from the pop retry topic names the topic it serves
        group = ext.get("consumerGroup")
        topic = ext.get("topic")
        access.add(parse_normal_topic(topic, group) if topic and group else topic, SUB)
        access.add(_retry(group), SUB)
    return access


# 5.x: POP requests that name their topic and group in the header (BATCH_ACK_MESSAGE: signature only)
_POP_CODES: Final = frozenset(
    {
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        RequestCode.PEEK_MESSAGE,
        RequestCode.NOTIFICATION,
        RequestCode.POLLING_INFO,
    }
)


def is_trace_publish(access: AccessRequest) -> bool:
    """Java skips the permission check of a send to the default trace topic."""
    return access.resources.get(RMQ_SYS_TRACE_TOPIC) == PUB


# -- whiteRemoteAddress patterns ------------------------------------------------------------------

_IP: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
_GROUPS: Final = struct.Struct("!8H")
_ALL_PATTERNS: Final = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def _bad(text: str, why: str) -> ValueError:
    return ValueError(f"Netaddress examine Exception netaddress is {text}: {why}")


def _address(text: str, pattern: str) -> _IP:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise _bad(pattern, f"{text!r} is not an IPv4 or IPv6 address") from None


def _octet(text: str, pattern: str, limit: int, base: int) -> int:
    try:
        value = int(text.strip(), base)
    except ValueError:
        raise _bad(pattern, f"{text!r} is not a number") from None
    if not 0 <= value <= limit:
        raise _bad(pattern, f"{text!r} is out of range 0-{limit:{'x' if base == 16 else 'd'}}")
    return value


def _bounds(text: str, pattern: str, limit: int, base: int) -> tuple[int, int]:
    if text == "*":
        return 0, limit
    low_text, sep, high_text = text.partition("-")
    if not sep or not low_text.strip() or "-" in high_text:
        raise _bad(pattern, f"{text!r} is not a range like 1-10")
    low, high = _octet(low_text, pattern, limit, base), _octet(high_text, pattern, limit, base)
    if low > high:
        raise _bad(pattern, f"range {text!r} starts after it ends")
    return low, high


class AddressPattern:
    """A parsed ``whiteRemoteAddress`` (Java ``RemoteAddressStrategyFactory``). Forms:

    * blank: matches nothing; ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: matches everything;
    * one address, IPv4 or IPv6 (``192.168.1.1``, ``::1``);
    * a list: ``192.168.1.1,192.168.1.2`` or ``192.168.1.{1,2}`` (``2001:db8::{1,2}``);
    * a range: ``192.168.1.*``, ``192.168.*.*``, ``192.168.1.1-10``, ``192.168.1-10.*``;
      IPv6: ``2001:db8::5:*``, ``2001:db8::5:1-ff``, ``2001:db8::1-ff:*``.

    Raises ``ValueError`` with Java's wording for anything else. Unlike Java, a range must be
    the last number that is not ``*`` (Java reads ``10.1.1-5.7`` as ``10.1.1-5.*``).
    """

    __slots__ = ("_addrs", "_head", "_high", "_index", "_kind", "_low", "_v6", "text")

    def __init__(self, text: str | None) -> None:
        self.text = text or ""
        self._kind = "none"
        self._addrs: frozenset[_IP] = frozenset()
        self._v6 = False
        self._head: tuple[int, ...] = ()
        self._index = 0
        self._low = self._high = 0
        pattern = self.text.strip()
        if not pattern:
            return
        if pattern in _ALL_PATTERNS:
            self._kind = "all"
        elif pattern.endswith("}"):
            self._kind = "set"
            self._addrs = frozenset(_address(a.strip(), pattern) for a in self._braces(pattern))
        elif "," in pattern:
            self._kind = "set"
            self._addrs = frozenset(_address(a.strip(), pattern) for a in pattern.split(",") if a.strip())
        elif "*" in pattern or "-" in pattern:
            self._kind = "range"
            if ":" in pattern:
                self._parse_v6_range(pattern)
            else:
                self._parse_v4_range(pattern)
        else:
            self._kind = "set"
            self._addrs = frozenset({_address(pattern, pattern)})

    @staticmethod
    def _braces(pattern: str) -> list[str]:
        start = pattern.rfind("{")
        separator = ":" if ":" in pattern else "."
        if start < 0 or (start > 0 and pattern[start - 1] != separator):
            raise _bad(pattern, "the last part must be {a,b,...}")
        if separator == "." and pattern.count(".") != 3:
            raise _bad(pattern, "an IPv4 address has 4 parts")
        prefix = pattern[:start]
        return [prefix + item for item in pattern[start + 1 : -1].split(",") if item]

    def _parse_v4_range(self, pattern: str) -> None:
        parts = pattern.split(".")
        if len(parts) != 4:
            raise _bad(pattern, "an IPv4 address has 4 parts")
        index = next((i for i, part in enumerate(parts) if "*" in part or "-" in part), 0)
        if index == 0:
            raise _bad(pattern, "the first part must be a number")
        if any(part != "*" for part in parts[index + 1 :]):
            raise _bad(pattern, "the parts after a '*' or a range must be '*'")
        self._head = tuple(_octet(part, pattern, 255, 10) for part in parts[:index])
        self._index = index
        self._low, self._high = _bounds(parts[index], pattern, 255, 10)

    def _parse_v6_range(self, pattern: str) -> None:
        self._v6 = True
        groups = pattern.split(":")
        tail = 1
        if groups[-1] == "*" and "-" in groups[-2]:
            tail = 2  # a-b:* : a range in group 7, any group 8
        ranged = groups[-tail]
        rest = groups[: len(groups) - tail]
        if any("*" in g or "-" in g for g in rest) or (tail == 2 and "*" in ranged):
            raise _bad(pattern, "'*' may only end the address and a range must be one of its last groups")
        try:  # the range's groups as 0 give the prefix's 8 groups, '::' expanded
            exploded = ipaddress.IPv6Address(":".join([*rest, *["0"] * tail])).exploded
        except ValueError:
            raise _bad(pattern, "not an IPv6 address with '*' or a range in its last groups") from None
        values = [int(g, 16) for g in exploded.split(":")]
        self._index = 8 - tail
        self._head = tuple(values[: self._index])
        self._low, self._high = _bounds(ranged, pattern, 0xFFFF, 16)

    def matches(self, ip: _IP | None) -> bool:
        """True when the peer at ``ip`` (``None``: not an IP address) matches."""
        kind = self._kind
        if kind == "all":
            return True
        if ip is None or kind == "none":
            return False
        if kind == "set":
            return ip in self._addrs
        if isinstance(ip, ipaddress.IPv6Address) != self._v6:
            return False
        parts = _GROUPS.unpack(ip.packed) if self._v6 else ip.packed
        index = self._index
        return tuple(parts[:index]) == self._head and self._low <= parts[index] <= self._high

    def __repr__(self) -> str:
        return f"AddressPattern({self.text!r})"


# -- RocketMQ 5.x gRPC: the authorization metadata ---------------------------------------------------

V2_AUTHORIZATION: Final = "authorization"
"""The gRPC metadata key of the signature (Java ``GrpcConstants.AUTHORIZATION``)."""
V2_DATE_TIME: Final = "x-mq-date-time"
"""The gRPC metadata key whose value is signed (Java ``GrpcConstants.DATE_TIME``)."""
_CREDENTIAL: Final = "Credential"
_V2_SIGNATURE: Final = "Signature"


class AuthorizationHeaderError(ValueError):
    """An ``authorization`` value Java's ``DefaultAuthenticationContextBuilder`` cannot read; the
    gRPC front end answers UNAUTHORIZED with this message."""


@dataclass(frozen=True, slots=True)
class V2Authorization:
    """What a gRPC ``authorization`` value says: the access key (``Credential`` up to its first
    ``/``) and the signature (lower-case hex of the HMAC-SHA1), either absent when not given."""

    access_key: str | None
    signature: str | None


def parse_v2_authorization(value: str) -> V2Authorization:
    """Java ``DefaultAuthenticationContextBuilder.build(Metadata, ...)``: the algorithm name, a
    space, then comma-separated ``key=value`` items (trimmed); ``Credential`` gives the access
    key, ``Signature`` the hex signature, other items are ignored. An empty value is the caller's
    business (Java: anonymous).

    Raises ``AuthorizationHeaderError`` (and nothing else) for a value without a space, an item
    without ``=``, a ``Credential`` of only slashes, or a ``Signature`` that is not hex.
    """
    _algorithm, space, items = value.partition(" ")
    if not space:
        raise AuthorizationHeaderError("authentication header is incorrect.")
    access_key: str | None = None
    signature: str | None = None
    for item in items.split(","):
        key, equals, text = item.strip().partition("=")
        if not equals:
            raise AuthorizationHeaderError(
                f"authentication keyValues length is incorrect: {item.strip()!r} has no '='."
            )
        if key == _CREDENTIAL:
            parts = text.split("/")
            while len(parts) > 1 and not parts[-1]:  # Java's split drops trailing empty strings
                parts.pop()
            if text and not parts[-1]:  # only slashes: Java's split gives nothing
                raise AuthorizationHeaderError(f"authentication credential is incorrect: {text!r}.")
            access_key = parts[0]
        elif key == _V2_SIGNATURE:
            try:
                bytes.fromhex(text)
            except ValueError:
                raise AuthorizationHeaderError(f"the signature is not hex: {text[:80]!r}.") from None
            if len(text) % 2 or not text.isascii() or any(c.isspace() for c in text):
                raise AuthorizationHeaderError(f"the signature is not hex: {text[:80]!r}.")
            signature = text
    return V2Authorization(access_key, signature)


def verify_v2_signature(secret_key: str, date_time: str, signature_hex: str) -> bool:
    """True when ``signature_hex`` is the HMAC-SHA1 of ``date_time`` (UTF-8) keyed with
    ``secret_key``, as the 5.x SDKs sign a call (``cal_signature`` over the date-time; Java
    compares the Base64 forms in constant time). A signature that is not hex is False."""
    try:
        given = bytes.fromhex(signature_hex)
    except ValueError:
        return False
    expected = cal_signature(date_time.encode("utf-8", "replace"), secret_key)
    return hmac.compare_digest(expected.encode("ascii"), base64.b64encode(given))
