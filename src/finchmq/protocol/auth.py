"""RocketMQ ACL 2.0, the parts both ends share (Java 5.3 ``org.apache.rocketmq.auth``).

ACL 2.0 replaces 1.0's accounts (``finchmq.protocol.acl``, ``plain_acl.yml``) by *users* and
*ACLs*. A user (``User``: username, password, ``UserType`` SUPER/NORMAL, ``UserStatus``) signs
its requests exactly as a 1.0 account does: ``AccessKey`` = the username, ``Signature`` =
HMAC-SHA1 keyed with the password over the sorted extFields and the body
(``finchmq.protocol.acl.sign_request``). An ACL (``Acl``) gives a subject (``User:<name>``)
policies (``Policy``, CUSTOM or DEFAULT); each policy entry (``PolicyEntry``) names a
``Resource`` (``Topic:orders``, ``Topic:orders*`` for a prefix, ``Group:*``, ``*``), the
``Action``s it covers, the source IPs it applies to (``Environment``: addresses or CIDRs) and
a ``Decision`` (ALLOW/DENY).

Owns:
    * the model and its two JSON forms, both with Java's field names:
      the *stored* form (what Java's ``LocalAuthenticationMetadataProvider`` /
      ``LocalAuthorizationMetadataProvider`` write into RocksDB with fastjson2: enums as their
      numeric codes, fields sorted, nulls left out), and the *wire* form (``UserInfo``,
      ``AclInfo``/``PolicyInfo``/``PolicyEntryInfo``, the bodies of the ``AUTH_*`` requests:
      enums by name, resources as keys like ``Topic:orders*``);
    * the converters between them (Java ``UserConverter``/``AclConverter``);
    * ``authorization_contexts``: which ``Action`` a remoting request needs on which
      ``Resource`` (Java ``DefaultAuthorizationContextBuilder``, including the table of
      ``@RocketMQAction``/``@RocketMQResource`` annotations on the 5.3.3 request headers);
    * ``Acl.decide``: the policy entry that decides a request (Java ``AclAuthorizationHandler``).

Sans-IO: the broker's store, managers and checks live in ``finchmq.broker.auth``.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self

from ._json import JSONDecodeError, dumps, loads
from .acl import ACCESS_KEY
from .bodies import HeartbeatData, LockBatchRequestBody, UnlockBatchRequestBody
from .codes import RequestCode
from .command import RemotingCommand
from .errors import ProtocolError
from .topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

__all__ = [
    "Acl",
    "AclInfo",
    "Action",
    "AuthorizationContext",
    "Decision",
    "Environment",
    "Policy",
    "PolicyEntry",
    "PolicyEntryInfo",
    "PolicyInfo",
    "PolicyType",
    "Resource",
    "ResourcePattern",
    "ResourceType",
    "SubjectType",
    "User",
    "UserInfo",
    "UserStatus",
    "UserType",
    "authorization_contexts",
    "ip_in_range",
    "is_valid_ip_or_cidr",
    "source_ip",
    "user_subject",
]


# -- enums: Java writes each as its numeric code in the store and by name on the wire ----------


class _JavaEnum(enum.Enum):
    """An enum with Java's ``code`` (stored JSON) and ``java_name`` (wire JSON)."""

    @property
    def code(self) -> int:
        return int(self.value[0])

    @property
    def java_name(self) -> str:
        return str(self.value[1])

    @classmethod
    def by_name(cls, name: str | None) -> Self | None:
        """Java ``getByName``: case-insensitive; ``None`` for anything unknown."""
        if name is None:
            return None
        wanted = name.lower()
        return next((m for m in cls if m.java_name.lower() == wanted), None)

    @classmethod
    def by_code(cls, code: object) -> Self | None:
        return next((m for m in cls if m.code == code), None)


class SubjectType(_JavaEnum):
    USER = (1, "User")


class UserType(_JavaEnum):
    SUPER = (1, "Super")  # skips authorization; only a super user creates or changes one
    NORMAL = (2, "Normal")


class UserStatus(_JavaEnum):
    ENABLE = (1, "enable")
    DISABLE = (2, "disable")


class Decision(_JavaEnum):
    ALLOW = (1, "Allow")
    DENY = (2, "Deny")


class PolicyType(_JavaEnum):
    CUSTOM = (1, "Custom")  # what mqadmin writes; consulted first
    DEFAULT = (2, "Default")  # consulted only when no CUSTOM entry matches


class Action(_JavaEnum):
    UNKNOWN = (0, "Unknown")
    ALL = (1, "All")  # in an entry: every action
    ANY = (2, "Any")  # in a request: any action will do (never stored)
    PUB = (3, "Pub")
    SUB = (4, "Sub")
    CREATE = (5, "Create")
    UPDATE = (6, "Update")
    DELETE = (7, "Delete")
    GET = (8, "Get")
    LIST = (9, "List")


class ResourceType(_JavaEnum):
    UNKNOWN = (0, "Unknown")
    ANY = (1, "Any")
    CLUSTER = (2, "Cluster")
    NAMESPACE = (3, "Namespace")
    TOPIC = (4, "Topic")
    GROUP = (5, "Group")


class ResourcePattern(_JavaEnum):
    ANY = (1, "ANY")
    LITERAL = (2, "LITERAL")
    PREFIXED = (3, "PREFIXED")


def _compact(obj: Mapping[str, Any]) -> dict[str, Any]:
    """fastjson2's object form: fields sorted by name, nulls left out."""
    return {k: obj[k] for k in sorted(obj) if obj[k] is not None}


def _dumps(obj: Any) -> bytes:
    return dumps(obj)


def _load_object(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        tree = loads(data)
    except JSONDecodeError as exc:
        raise ProtocolError(f"{what}: not JSON: {exc}") from None
    if not isinstance(tree, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(tree).__name__}")
    return tree


def _load_list(data: bytes | str, what: str) -> list[Any]:
    try:
        tree = loads(data)
    except JSONDecodeError as exc:
        raise ProtocolError(f"{what}: not JSON: {exc}") from None
    if not isinstance(tree, list):
        raise ProtocolError(f"{what}: expected a JSON array, got {type(tree).__name__}")
    return tree


def _opt_str(tree: Mapping[str, Any], key: str, what: str) -> str | None:
    value = tree.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # fastjson reads a number into a String field
    raise ProtocolError(f"{what}: {key} must be a string, got {value!r}")


def _str_list(tree: Mapping[str, Any], key: str, what: str) -> list[str] | None:
    value = tree.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{what}: {key} must be a list of strings, got {value!r}")
    return list(value)


# -- users ----------------------------------------------------------------------------------------


def user_subject(username: str) -> str:
    """The subject key of a user (Java ``User.getSubjectKey``): ``User:<username>``."""
    return f"{SubjectType.USER.java_name}:{username}"


def _subject_username(subject: str | None) -> str | None:
    """Java ``Subject.of``: the username of ``User:<name>`` (type matched case-insensitively);
    ``None`` for anything else."""
    if not subject:
        return None
    kind, _, name = subject.partition(":")
    if SubjectType.by_name(kind) is not SubjectType.USER:
        return None
    return name


@dataclass(slots=True)
class User:
    """A user (Java ``User``). ``password`` is the secret its requests are signed with."""

    username: str
    password: str | None = field(default=None, repr=False)
    user_type: UserType | None = None
    user_status: UserStatus | None = None

    @property
    def subject_key(self) -> str:
        return user_subject(self.username)

    def stored(self) -> dict[str, Any]:
        """The value Java's local provider stores under the username."""
        return _compact(
            {
                "username": self.username,
                "password": self.password,
                "userType": self.user_type.code if self.user_type else None,
                "userStatus": self.user_status.code if self.user_status else None,
                "subjectType": SubjectType.USER.code,
            }
        )

    def to_store_json(self) -> bytes:
        return _dumps(self.stored())

    @classmethod
    def from_stored(cls, tree: Mapping[str, Any]) -> User:
        what = "stored user"
        username = _opt_str(tree, "username", what)
        if not username:
            raise ProtocolError(f"{what}: no username in {dict(tree)!r}")
        return cls(
            username=username,
            password=_opt_str(tree, "password", what),
            user_type=UserType.by_code(tree.get("userType")),
            user_status=UserStatus.by_code(tree.get("userStatus")),
        )


@dataclass(slots=True)
class UserInfo:
    """The wire form of a user (Java ``UserInfo``, the AUTH_*_USER bodies): enums by name."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    user_type: str | None = None
    user_status: str | None = None

    def as_json(self) -> dict[str, Any]:
        return _compact(
            {
                "username": self.username,
                "password": self.password,
                "userType": self.user_type,
                "userStatus": self.user_status,
            }
        )

    def to_json(self) -> bytes:
        return _dumps(self.as_json())

    @classmethod
    def from_tree(cls, tree: Mapping[str, Any]) -> UserInfo:
        what = "UserInfo"
        return cls(
            username=_opt_str(tree, "username", what),
            password=_opt_str(tree, "password", what),
            user_type=_opt_str(tree, "userType", what),
            user_status=_opt_str(tree, "userStatus", what),
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> UserInfo:
        return cls.from_tree(_load_object(data, "UserInfo"))

    @classmethod
    def list_from_json(cls, data: bytes | str) -> list[UserInfo]:
        return [cls.from_tree(_as_object(item, "UserInfo")) for item in _load_list(data, "UserInfo list")]

    @staticmethod
    def list_to_json(infos: Iterable[UserInfo]) -> bytes:
        return _dumps([i.as_json() for i in infos])

    @classmethod
    def of(cls, user: User) -> UserInfo:
        """Java ``UserConverter.convertUser(User)``."""
        return cls(
            username=user.username,
            password=user.password,
            user_type=user.user_type.java_name if user.user_type else None,
            user_status=user.user_status.java_name if user.user_status else None,
        )

    def to_user(self) -> User:
        """Java ``UserConverter.convertUser(UserInfo)``: unknown type/status names become unset."""
        return User(
            username=self.username or "",
            password=self.password,
            user_type=UserType.by_name(self.user_type),
            user_status=UserStatus.by_name(self.user_status),
        )


def _as_object(item: object, what: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {item!r}")
    return item


# -- resources, environments, policies ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resource:
    """What a policy entry covers or a request touches (Java ``Resource``).

    ``name`` is the whole name (LITERAL), the prefix (PREFIXED) or ``None`` (ANY).
    """

    type: ResourceType
    name: str | None
    pattern: ResourcePattern

    @classmethod
    def of_topic(cls, topic: str | None) -> Resource:
        return cls(ResourceType.TOPIC, topic, ResourcePattern.LITERAL)

    @classmethod
    def of_group(cls, group: str | None) -> Resource:
        """A group; a retry or DLQ topic names its group (Java ``Resource.ofGroup``)."""
        if group is not None and group.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = group[len(RETRY_GROUP_TOPIC_PREFIX) :]
        elif group is not None and group.startswith(DLQ_GROUP_TOPIC_PREFIX):
            group = group[len(DLQ_GROUP_TOPIC_PREFIX) :]
        return cls(ResourceType.GROUP, group, ResourcePattern.LITERAL)

    @classmethod
    def of_cluster(cls, cluster: str | None) -> Resource:
        return cls(ResourceType.CLUSTER, cluster, ResourcePattern.LITERAL)

    @classmethod
    def parse(cls, key: str | None) -> Resource | None:
        """Java ``Resource.of(String)``: ``*``, ``Type:*``, ``Type:prefix*`` or ``Type:name``
        (the type matched case-insensitively); ``None`` for a blank key or an unknown type."""
        if key is None or not key.strip():
            return None
        if key == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, _, name = key.partition(":")
        resource_type = ResourceType.by_name(kind)
        if resource_type is None:
            return None
        if name == "*":
            return cls(resource_type, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(resource_type, name[: name.index("*")], ResourcePattern.PREFIXED)
        return cls(resource_type, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        """Java ``getResourceKey``: the form ``parse`` reads."""
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.java_name}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.java_name}:{self.name}*"
        return f"{self.type.java_name}:{self.name}"

    def matches(self, requested: Resource) -> bool:
        """Java ``isMatch``: does this (an entry's) resource cover ``requested``?"""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not requested.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return requested.name == self.name
        return requested.name is not None and requested.name.startswith(self.name or "")

    def stored(self) -> dict[str, Any]:
        return _compact(
            {"resourceType": self.type.code, "resourceName": self.name, "resourcePattern": self.pattern.code}
        )

    @classmethod
    def from_stored(cls, tree: Mapping[str, Any]) -> Resource:
        resource_type = ResourceType.by_code(tree.get("resourceType"))
        pattern = ResourcePattern.by_code(tree.get("resourcePattern"))
        if resource_type is None or pattern is None:
            raise ProtocolError(f"stored resource: unknown type or pattern in {dict(tree)!r}")
        return cls(resource_type, _opt_str(tree, "resourceName", "stored resource"), pattern)


def is_valid_ip_or_cidr(text: str) -> bool:
    """Java ``IPAddressUtils.isValidIPOrCidr``: an IPv4/IPv6 address, or one with ``/prefix``."""
    try:
        if "/" in text:
            ipaddress.ip_network(text, strict=False)
        else:
            ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def ip_in_range(ip: str, cidr: str) -> bool:
    """Java ``IPAddressUtils.isIPInRange``: without ``/`` the two strings must be equal."""
    if "/" not in cidr:
        return ip == cidr
    try:
        network = ipaddress.ip_network(cidr, strict=False)
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return address.version == network.version and address in network


@dataclass(frozen=True, slots=True)
class Environment:
    """Where an entry applies (Java ``Environment``): ``source_ips``, addresses or CIDRs; an
    entry without any applies everywhere."""

    source_ips: tuple[str, ...] = ()

    def matches(self, ip: str | None) -> bool:
        if not self.source_ips:
            return True
        if not ip:
            return False
        return any(ip_in_range(ip, allowed) for allowed in self.source_ips)

    def stored(self) -> dict[str, Any]:
        return {"sourceIps": list(self.source_ips)} if self.source_ips else {}


@dataclass(slots=True)
class PolicyEntry:
    """One rule (Java ``PolicyEntry``). ``resource`` and ``decision`` may be ``None`` only in an
    entry just read off the wire (the broker then refuses it, as Java's validation does)."""

    resource: Resource | None
    actions: tuple[Action, ...]
    environment: Environment | None
    decision: Decision | None

    def matches(self, resource: Resource, actions: Sequence[Action], ip: str | None) -> bool:
        """Java's three filters: the resource, any of the actions (``ALL`` in the entry covers
        every action, ``ANY`` in the request is satisfied by any), the source IP."""
        if self.resource is None or not self.resource.matches(resource):
            return False
        if not self.actions:
            return False
        if Action.ANY not in actions and not any(
            a in self.actions or Action.ALL in self.actions for a in actions
        ):
            return False
        return self.environment is None or self.environment.matches(ip)

    def stored(self) -> dict[str, Any]:
        return _compact(
            {
                "resource": self.resource.stored() if self.resource else None,
                "actions": [a.code for a in self.actions],
                "environment": self.environment.stored() if self.environment is not None else None,
                "decision": self.decision.code if self.decision else None,
            }
        )

    @classmethod
    def from_stored(cls, tree: Mapping[str, Any]) -> PolicyEntry:
        resource = tree.get("resource")
        env = tree.get("environment")
        actions = tree.get("actions") or []
        return cls(
            resource=Resource.from_stored(_as_object(resource, "stored resource")) if resource else None,
            actions=tuple(a for a in (Action.by_code(c) for c in actions) if a is not None),
            environment=Environment(tuple(env.get("sourceIps") or ())) if isinstance(env, dict) else None,
            decision=Decision.by_code(tree.get("decision")),
        )


@dataclass(slots=True)
class Policy:
    """A subject's entries of one type (Java ``Policy``); at most one entry per resource."""

    policy_type: PolicyType | None
    entries: list[PolicyEntry]

    def update_entries(self, entries: Iterable[PolicyEntry]) -> None:
        """Java ``updateEntry``: an entry for a resource already present replaces its actions,
        environment and decision; others are added."""
        for new in entries:
            old = next((e for e in self.entries if e.resource == new.resource), None)
            if old is None:
                self.entries.append(new)
            else:
                old.actions, old.environment, old.decision = new.actions, new.environment, new.decision

    def delete_entry(self, resource: Resource) -> None:
        self.entries = [e for e in self.entries if e.resource != resource]

    def stored(self) -> dict[str, Any]:
        return _compact(
            {
                "policyType": self.policy_type.code if self.policy_type else None,
                "entries": [e.stored() for e in self.entries],
            }
        )

    @classmethod
    def from_stored(cls, tree: Mapping[str, Any]) -> Policy:
        return cls(
            policy_type=PolicyType.by_code(tree.get("policyType")),
            entries=[
                PolicyEntry.from_stored(_as_object(e, "stored entry")) for e in tree.get("entries") or ()
            ],
        )


_PATTERN_RANK: Final = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


def _specificity(entry: PolicyEntry) -> tuple[int, int, int]:
    """Sort key: the entry that decides comes first (see ``Acl.decide``)."""
    resource = entry.resource
    assert resource is not None
    if resource.type is ResourceType.ANY:
        rank = 3
    else:
        rank = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}[
            resource.pattern
        ]
    prefix = -len(resource.name or "") if resource.pattern is ResourcePattern.PREFIXED else 0
    return rank, prefix, 0 if entry.decision is Decision.DENY else 1


@dataclass(slots=True)
class Acl:
    """A subject's policies (Java ``Acl``); ``subject`` is a key like ``User:alice``."""

    subject: str
    policies: list[Policy]

    def policy(self, policy_type: PolicyType) -> Policy | None:
        return next((p for p in self.policies if p.policy_type is policy_type), None)

    def update_policies(self, policies: Iterable[Policy]) -> None:
        """Java ``updatePolicy``: merge each policy into the one of its type, or add it."""
        for new in policies:
            old = self.policy(new.policy_type) if new.policy_type else None
            if old is None:
                self.policies.append(new)
            else:
                old.update_entries(new.entries)

    def delete_policy(self, policy_type: PolicyType, resource: Resource) -> None:
        """Java ``deletePolicy``: drop the entry for ``resource``, and the policy once empty."""
        policy = self.policy(policy_type)
        if policy is None:
            return
        policy.delete_entry(resource)
        if not policy.entries:
            self.policies.remove(policy)

    def decide(self, resource: Resource, actions: Sequence[Action], ip: str | None) -> PolicyEntry | None:
        """The entry that decides a request (Java ``AclAuthorizationHandler``), ``None`` when no
        entry matches (Java then denies). The CUSTOM policy's matching entries are considered
        first, the DEFAULT policy's only when none matches. The most specific entry wins: a
        LITERAL resource before a PREFIXED one (the longer prefix first) before ``Type:*``
        before ``*``; between equally specific entries DENY wins.

        This is the order Java fixed after 5.3.3 (apache/rocketmq#9540); 5.3.3 itself ranks the
        shorter of two prefixes first.
        """
        for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
            policy = self.policy(policy_type)
            if policy is None:
                continue
            matched = [e for e in policy.entries if e.matches(resource, actions, ip)]
            if matched:
                return min(matched, key=_specificity)
        return None

    def stored(self) -> dict[str, Any]:
        username = _subject_username(self.subject)
        return _compact(
            {
                "subject": {"subjectType": SubjectType.USER.code, "username": username},
                "policies": [p.stored() for p in self.policies],
            }
        )

    def to_store_json(self) -> bytes:
        return _dumps(self.stored())

    @classmethod
    def from_stored(cls, subject: str, tree: Mapping[str, Any]) -> Acl:
        """An ACL stored under ``subject`` (Java keys the value by the subject key)."""
        return cls(
            subject=subject,
            policies=[Policy.from_stored(_as_object(p, "stored policy")) for p in tree.get("policies") or ()],
        )


# -- the wire forms of ACLs (Java AclInfo) -------------------------------------------------------


@dataclass(slots=True)
class PolicyEntryInfo:
    """Java ``AclInfo.PolicyEntryInfo``: ``resource`` as a key (``Topic:orders*``), actions and
    decision by name."""

    resource: str | None = None
    actions: list[str] | None = None
    source_ips: list[str] | None = None
    decision: str | None = None

    def as_json(self) -> dict[str, Any]:
        return _compact(
            {
                "resource": self.resource,
                "actions": self.actions,
                "sourceIps": self.source_ips,
                "decision": self.decision,
            }
        )

    @classmethod
    def from_tree(cls, tree: Mapping[str, Any]) -> PolicyEntryInfo:
        what = "PolicyEntryInfo"
        return cls(
            resource=_opt_str(tree, "resource", what),
            actions=_str_list(tree, "actions", what),
            source_ips=_str_list(tree, "sourceIps", what),
            decision=_opt_str(tree, "decision", what),
        )


@dataclass(slots=True)
class PolicyInfo:
    """Java ``AclInfo.PolicyInfo``."""

    policy_type: str | None = None
    entries: list[PolicyEntryInfo] | None = None

    def as_json(self) -> dict[str, Any]:
        entries = None if self.entries is None else [e.as_json() for e in self.entries]
        return _compact({"policyType": self.policy_type, "entries": entries})

    @classmethod
    def from_tree(cls, tree: Mapping[str, Any]) -> PolicyInfo:
        entries = tree.get("entries")
        if entries is not None and not isinstance(entries, list):
            raise ProtocolError(f"PolicyInfo: entries must be a list, got {entries!r}")
        return cls(
            policy_type=_opt_str(tree, "policyType", "PolicyInfo"),
            entries=None
            if entries is None
            else [PolicyEntryInfo.from_tree(_as_object(e, "PolicyEntryInfo")) for e in entries],
        )


@dataclass(slots=True)
class AclInfo:
    """Java ``AclInfo``: the AUTH_*_ACL bodies. ``subject`` is a key like ``User:alice``."""

    subject: str | None = None
    policies: list[PolicyInfo] | None = None

    @classmethod
    def single(
        cls,
        subject: str,
        resources: Sequence[str],
        actions: Sequence[str],
        source_ips: Sequence[str] | None,
        decision: str,
    ) -> AclInfo:
        """Java ``AclInfo.of``: one policy (its type left for the broker: CUSTOM) with an entry
        per resource, each with the same actions, source IPs and decision."""
        entries = [
            PolicyEntryInfo(
                resource=r,
                actions=list(actions),
                source_ips=list(source_ips) if source_ips is not None else None,
                decision=decision,
            )
            for r in resources
        ]
        return cls(subject=subject, policies=[PolicyInfo(entries=entries)])

    def as_json(self) -> dict[str, Any]:
        policies = None if self.policies is None else [p.as_json() for p in self.policies]
        return _compact({"subject": self.subject, "policies": policies})

    def to_json(self) -> bytes:
        return _dumps(self.as_json())

    @classmethod
    def from_tree(cls, tree: Mapping[str, Any]) -> AclInfo:
        policies = tree.get("policies")
        if policies is not None and not isinstance(policies, list):
            raise ProtocolError(f"AclInfo: policies must be a list, got {policies!r}")
        return cls(
            subject=_opt_str(tree, "subject", "AclInfo"),
            policies=None
            if policies is None
            else [PolicyInfo.from_tree(_as_object(p, "PolicyInfo")) for p in policies],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> AclInfo:
        return cls.from_tree(_load_object(data, "AclInfo"))

    @classmethod
    def list_from_json(cls, data: bytes | str) -> list[AclInfo]:
        return [cls.from_tree(_as_object(item, "AclInfo")) for item in _load_list(data, "AclInfo list")]

    @staticmethod
    def list_to_json(infos: Iterable[AclInfo]) -> bytes:
        return _dumps([i.as_json() for i in infos])

    @classmethod
    def of(cls, acl: Acl) -> AclInfo:
        """Java ``AclConverter.convertAcl(Acl)``."""
        policies = []
        for policy in acl.policies:
            entries = [
                PolicyEntryInfo(
                    resource=e.resource.key if e.resource else None,
                    actions=[a.java_name for a in e.actions] or None,
                    source_ips=list(e.environment.source_ips) if e.environment is not None else None,
                    decision=e.decision.java_name if e.decision else None,
                )
                for e in policy.entries
            ]
            policies.append(
                PolicyInfo(
                    policy_type=policy.policy_type.java_name if policy.policy_type else None,
                    entries=entries or None,
                )
            )
        return cls(subject=acl.subject, policies=policies or None)

    def to_acl(self) -> Acl:
        """Java ``AclConverter.convertAcl(AclInfo)``: unknown action names are dropped; a
        resource, policy type or decision Java cannot read is left ``None`` (the broker's
        validation then refuses it with Java's message)."""
        policies = []
        for info in self.policies or ():
            if not info.entries:
                continue
            entries = [
                PolicyEntry(
                    resource=Resource.parse(e.resource),
                    actions=tuple(a for a in (Action.by_name(n) for n in e.actions or ()) if a is not None),
                    environment=Environment(tuple(e.source_ips or ())),
                    decision=Decision.by_name(e.decision),
                )
                for e in info.entries
            ]
            policies.append(Policy(policy_type=PolicyType.by_name(info.policy_type), entries=entries))
        return Acl(subject=self.subject or "", policies=policies)


# -- what a remoting request needs (Java DefaultAuthorizationContextBuilder) ---------------------


@dataclass(frozen=True, slots=True)
class AuthorizationContext:
    """One check: ``username`` (``None``: the request names no AccessKey) needs one of
    ``actions`` on ``resource``, from ``source_ip``."""

    username: str | None
    resource: Resource
    actions: tuple[Action, ...]
    source_ip: str
    rpc_code: int

    @property
    def subject(self) -> str | None:
        return None if self.username is None else user_subject(self.username)


@dataclass(frozen=True, slots=True)
class _Annotated:
    """A 5.3.3 request header's ``@RocketMQAction`` and its ``@RocketMQResource`` fields:
    ``cluster``: the resource is the broker's cluster when no field names one; ``fields``:
    (extFields key, resource type, splitter)."""

    actions: tuple[Action, ...]
    cluster: bool = False
    fields: tuple[tuple[str, ResourceType, str], ...] = ()


def _t(key: str) -> tuple[str, ResourceType, str]:
    return (key, ResourceType.TOPIC, "")


def _g(key: str) -> tuple[str, ResourceType, str]:
    return (key, ResourceType.GROUP, "")


def _c(key: str) -> tuple[str, ResourceType, str]:
    return (key, ResourceType.CLUSTER, "")


_A = Action
_GROUP_TOPIC: Final = (_g("consumerGroup"), _t("topic"))
_CLUSTER_GET: Final = _Annotated((_A.GET,), cluster=True)
_CLUSTER_UPDATE: Final = _Annotated((_A.UPDATE,), cluster=True)

# The annotations of Java 5.3.3's request headers, by request code (numbers for codes finchmq's
# RequestCode does not name). A code not here (and not special-cased in
# ``authorization_contexts``) needs no authorization, as in Java: UPDATE_BROKER_CONFIG and
# UPDATE_AND_CREATE_SUBSCRIPTIONGROUP among them.
_ANNOTATIONS: Final[Mapping[int, _Annotated]] = {
    RequestCode.ACK_MESSAGE: _Annotated((_A.SUB,), fields=_GROUP_TOPIC),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _Annotated(
        (_A.SUB,), fields=(_g("consumerGroup"), _t("topic"))
    ),
    RequestCode.NOTIFICATION: _Annotated((_A.SUB,), fields=_GROUP_TOPIC),
    RequestCode.PEEK_MESSAGE: _Annotated((_A.SUB,), fields=(_t("topic"), _g("consumerGroup"))),
    RequestCode.POLLING_INFO: _Annotated((_A.GET,), fields=_GROUP_TOPIC),
    RequestCode.POP_MESSAGE: _Annotated((_A.SUB,), fields=_GROUP_TOPIC),
    902: _CLUSTER_UPDATE,  # ADD_BROKER
    903: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("brokerClusterName"),)),  # REMOVE_BROKER
    RequestCode.ADD_WRITE_PERM_OF_BROKER: _CLUSTER_UPDATE,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: _CLUSTER_UPDATE,
    RequestCode.AUTH_CREATE_USER: _CLUSTER_UPDATE,
    RequestCode.AUTH_UPDATE_USER: _CLUSTER_UPDATE,
    RequestCode.AUTH_DELETE_USER: _CLUSTER_UPDATE,
    RequestCode.AUTH_GET_USER: _CLUSTER_GET,
    RequestCode.AUTH_LIST_USER: _CLUSTER_GET,
    RequestCode.AUTH_CREATE_ACL: _CLUSTER_UPDATE,
    RequestCode.AUTH_UPDATE_ACL: _CLUSTER_UPDATE,
    RequestCode.AUTH_DELETE_ACL: _CLUSTER_UPDATE,
    RequestCode.AUTH_GET_ACL: _CLUSTER_GET,
    RequestCode.AUTH_LIST_ACL: _CLUSTER_GET,
    904: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),  # BROKER_HEARTBEAT
    RequestCode.CHECK_TRANSACTION_STATE: _Annotated((_A.PUB,), fields=(_t("topic"),)),
    RequestCode.CLONE_GROUP_OFFSET: _Annotated((_A.UPDATE,), fields=(_g("destGroup"), _t("topic"))),
    RequestCode.CONSUMER_SEND_MSG_BACK: _Annotated((_A.SUB,), fields=(_g("group"), _t("originTopic"))),
    RequestCode.CONSUME_MESSAGE_DIRECTLY: _Annotated((_A.SUB,), fields=_GROUP_TOPIC),
    RequestCode.DELETE_KV_CONFIG: _CLUSTER_UPDATE,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: _Annotated((_A.DELETE,), fields=(_g("groupName"),)),
    RequestCode.DELETE_TOPIC_IN_BROKER: _Annotated((_A.DELETE,), fields=(_t("topic"),)),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),
    RequestCode.END_TRANSACTION: _Annotated((_A.PUB,), fields=(_t("topic"),)),
    RequestCode.GET_ALL_PRODUCER_INFO: _CLUSTER_GET,
    RequestCode.GET_BROKER_CONSUME_STATS: _CLUSTER_GET,
    901: _Annotated((_A.GET,), fields=(_c("clusterName"),)),  # GET_BROKER_MEMBER_GROUP
    RequestCode.GET_CONSUMER_CONNECTION_LIST: _Annotated((_A.GET,), fields=(_g("consumerGroup"),)),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _Annotated((_A.SUB,), fields=(_g("consumerGroup"),)),
    RequestCode.GET_CONSUMER_RUNNING_INFO: _Annotated((_A.GET,), fields=(_g("consumerGroup"),)),
    RequestCode.GET_CONSUME_STATS: _Annotated(
        (_A.GET,), fields=(_g("consumerGroup"), _t("topic"), _t("topicList"))
    ),
    RequestCode.GET_EARLIEST_MSG_STORETIME: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.GET_KVLIST_BY_NAMESPACE: _CLUSTER_GET,
    RequestCode.GET_KV_CONFIG: _CLUSTER_GET,
    RequestCode.GET_MAX_OFFSET: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.GET_MIN_OFFSET: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.GET_PRODUCER_CONNECTION_LIST: _CLUSTER_GET,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: _Annotated((_A.GET,), fields=(_g("group"),)),
    RequestCode.GET_TOPIC_CONFIG: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.GET_TOPIC_STATS_INFO: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: _Annotated(
        (_A.GET,), fields=(_t("topic"), _g("group"))
    ),
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: _Annotated((_A.UPDATE,), fields=(_g("group"), _t("topic"))),
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: _Annotated((_A.SUB,), fields=(_g("consumerGroup"),)),
    RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: _Annotated(
        (_A.SUB,), fields=(_g("producerGroup"), _t("topic"))
    ),
    RequestCode.PUT_KV_CONFIG: _CLUSTER_UPDATE,
    RequestCode.QUERY_CONSUME_QUEUE: _Annotated((_A.GET,), fields=(_t("topic"), _g("consumerGroup"))),
    RequestCode.QUERY_CONSUME_TIME_SPAN: _Annotated((_A.GET,), fields=(_t("topic"), _g("group"))),
    RequestCode.QUERY_CORRECTION_OFFSET: _Annotated(
        (_A.GET,),
        fields=(("filterGroups", ResourceType.GROUP, ","), _g("compareGroup"), _t("topic")),
    ),
    RequestCode.QUERY_DATA_VERSION: _Annotated((_A.GET,), cluster=True, fields=(_c("clusterName"),)),
    345: _Annotated((_A.GET,), fields=(_g("group"), _t("topic"))),  # QUERY_SUBSCRIPTION_BY_CONSUMER
    343: _Annotated((_A.GET,), fields=(_g("group"),)),  # QUERY_TOPICS_BY_CONSUMER
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.REGISTER_BROKER: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),
    217: _CLUSTER_UPDATE,  # REGISTER_TOPIC_IN_NAMESRV
    RequestCode.RESUME_CHECK_HALF_MESSAGE: _Annotated((_A.UPDATE,), fields=(_t("topic"),)),
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _Annotated((_A.GET,), fields=(_t("topic"),)),
    RequestCode.UNREGISTER_BROKER: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),
    RequestCode.UPDATE_AND_CREATE_TOPIC: _Annotated((_A.CREATE,), fields=(_t("topic"),)),
    RequestCode.VIEW_BROKER_STATS_DATA: _CLUSTER_GET,
    RequestCode.VIEW_MESSAGE_BY_ID: _Annotated((_A.GET,), fields=(_t("topic"),)),
    # codes finchmq does not otherwise name (Java 5.3.3 RequestCode)
    18: _Annotated((_A.CREATE,)),  # UPDATE_AND_CREATE_TOPIC_LIST: no resource field
    353: _Annotated((_A.UPDATE,), fields=(_g("group"), _t("topic"))),  # UPDATE_AND_GET_GROUP_FORBIDDEN
    354: _Annotated((_A.GET,), fields=(_t("topic"),)),  # CHECK_ROCKSDB_CQ_WRITE_PROGRESS
    355: _CLUSTER_GET,  # EXPORT_ROCKSDB_CONFIG_TO_JSON
    906: _CLUSTER_UPDATE,  # EXCHANGE_BROKER_HA_INFO
    908: _CLUSTER_UPDATE,  # RESET_MASTER_FLUSH_OFFSET (ResetMasterFlushOffsetHeader)
    1008: _CLUSTER_UPDATE,  # NOTIFY_BROKER_ROLE_CHANGED
    1001: _CLUSTER_UPDATE,  # CONTROLLER_ALTER_SYNC_STATE_SET
    1002: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),  # CONTROLLER_ELECT_MASTER
    1004: _CLUSTER_GET,  # CONTROLLER_GET_REPLICA_INFO
    1011: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),  # CLEAN_BROKER_DATA
    1012: _Annotated((_A.GET,), cluster=True, fields=(_c("clusterName"),)),  # CONTROLLER_GET_NEXT_BROKER_ID
    1013: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),  # CONTROLLER_APPLY_BROKER_ID
    1003: _Annotated((_A.UPDATE,), cluster=True, fields=(_c("clusterName"),)),  # CONTROLLER_REGISTER_BROKER
    905: _CLUSTER_UPDATE,  # NOTIFY_MIN_BROKER_ID_CHANGE
}
"""Java 5.3.3's header annotations. The header of GET_ALL_TOPIC_CONFIG and
GET_TOPICS_BY_CLUSTER names ``Topic`` with no field: no check, as in Java."""


def _is_retry(topic: str | None) -> bool:
    return topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def source_ip(remote_addr: str) -> str:
    """The peer's IP without its port (Java ``substringBeforeLast(addr, ":")``)."""
    host, sep, _ = remote_addr.rpartition(":")
    return (host if sep else remote_addr).strip("[]")


def authorization_contexts(
    request: RemotingCommand, remote_addr: str, cluster_name: str
) -> list[AuthorizationContext]:
    """What ``request`` needs (Java ``DefaultAuthorizationContextBuilder.build`` for remoting):
    an empty list for a request without extFields or a code that needs nothing.

    Raises:
        ProtocolError: a HEART_BEAT or (UN)LOCK_BATCH_MQ body that does not decode.
    """
    ext = request.ext_fields
    if not ext:
        return []
    username = ext.get(ACCESS_KEY)
    ip = source_ip(remote_addr)
    code = request.code
    out: list[AuthorizationContext] = []

    def need(resource: Resource, *actions: Action) -> None:
        out.append(AuthorizationContext(username, resource, actions, ip, code))

    if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        topic = ext.get("topic")
        if _is_retry(topic):
            need(Resource.of_group(topic), Action.SUB, Action.GET)
        else:
            need(Resource.of_topic(topic), Action.PUB, Action.SUB, Action.GET)
    elif code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        topic_key, group_key = ("topic", "group") if code == RequestCode.SEND_MESSAGE else ("b", "a")
        topic = ext.get(topic_key)
        if _is_retry(topic):
            group = ext.get(group_key)
            need(Resource.of_group(group if group and group.strip() else topic), Action.SUB)
        else:
            need(Resource.of_topic(topic), Action.PUB)
    elif code == RequestCode.RECALL_MESSAGE:
        need(Resource.of_topic(ext.get("topic")), Action.PUB)
    elif code == RequestCode.END_TRANSACTION:
        topic = ext.get("topic")
        if topic and topic.strip():
            need(Resource.of_topic(topic), Action.PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        need(Resource.of_group(ext.get("group")), Action.SUB)
    elif code == RequestCode.PULL_MESSAGE:
        if not _is_retry(ext.get("topic")):
            need(Resource.of_topic(ext.get("topic")), Action.SUB)
        need(Resource.of_group(ext.get("consumerGroup")), Action.SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        need(Resource.of_topic(ext.get("topic")), Action.SUB, Action.GET)
    elif code == RequestCode.HEART_BEAT:
        heartbeat = HeartbeatData.from_json(request.body or b"{}")
        for consumer in heartbeat.consumer_data_set:
            need(Resource.of_group(consumer.group_name), Action.SUB)
            for subscription in consumer.subscription_data_set:
                if not _is_retry(subscription.topic):
                    need(Resource.of_topic(subscription.topic), Action.SUB)
    elif code == RequestCode.UNREGISTER_CLIENT:
        group = ext.get("consumerGroup")
        if group and group.strip():
            need(Resource.of_group(group), Action.SUB)
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        need(Resource.of_group(ext.get("consumerGroup")), Action.SUB, Action.GET)
    elif code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET):
        action = Action.GET if code == RequestCode.QUERY_CONSUMER_OFFSET else Action.UPDATE
        if not _is_retry(ext.get("topic")):
            need(Resource.of_topic(ext.get("topic")), Action.SUB, action)
        need(Resource.of_group(ext.get("consumerGroup")), Action.SUB, action)
    elif code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        body_type = LockBatchRequestBody if code == RequestCode.LOCK_BATCH_MQ else UnlockBatchRequestBody
        body = body_type.from_json(request.body or b"{}")
        need(Resource.of_group(body.consumer_group), Action.SUB)
        for mq in body.mq_set:
            if not _is_retry(mq.topic):
                need(Resource.of_topic(mq.topic), Action.SUB)
    else:
        _by_annotation(ext, code, cluster_name, need)
    return out


def _by_annotation(ext: Mapping[str, str], code: int, cluster_name: str, need: Any) -> None:
    """Java ``buildContextByAnnotation``: a context per resource field set in the request; the
    cluster when the header is a cluster one and no field is set."""
    annotated = _ANNOTATIONS.get(code)
    if annotated is None:
        return
    actions = annotated.actions
    found = False
    for key, resource_type, splitter in annotated.fields:
        value = ext.get(key)
        if value is None:
            continue
        values = [v for v in value.split(splitter) if v] if splitter else [value]
        for item in values:
            found = True
            if resource_type is ResourceType.TOPIC and _is_retry(item):
                need(Resource.of_group(item), *actions)
            else:
                need(Resource(resource_type, item, ResourcePattern.LITERAL), *actions)
    if not found and annotated.cluster:
        need(Resource.of_cluster(cluster_name), *actions)
