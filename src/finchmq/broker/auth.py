"""ACL 2.0 in the broker (Java 5.3 ``auth`` module: the local metadata providers, the metadata
managers, ``DefaultAuthenticationHandler``, ``UserAuthorizationHandler`` and
``AclAuthorizationHandler``, and the broker's authentication/authorization pipelines).

Turned on by ``authenticationEnabled`` / ``authorizationEnabled`` (broker.conf, Java's
``AuthConfig`` keys); ACL 1.0 (``aclEnable``, ``finchmq.broker.acl``) is a separate switch and the
two cannot be on together. The users and ACLs exist (and the ``AUTH_*`` requests work) when
either switch is on or a metadata provider is named.

Store:
    Java's local providers keep users and ACLs in two RocksDB databases under
    ``<storePathRootDir>/config/`` (``users``, ``acls``): key = the username (resp. the subject
    key ``User:<name>``), value = the object as fastjson2 writes it. finchmq keeps the same keys
    and the same JSON values in two files, ``<storePathRootDir>/config/auth/users.json`` and
    ``acls.json`` (one JSON object: key -> value), each rewritten atomically after a change
    (Java flushes its write-ahead log after each put). The values are the stored forms of
    ``finchmq.protocol.auth`` (enums as their codes).

Checks (``AuthChecker.check``, the remoting dispatcher's ``before_request`` hook; the order of
Java's pipeline: authentication, then authorization):
    * authentication: the request's ``AccessKey`` names an enabled user and its ``Signature`` is
      the HMAC-SHA1 of the sorted extFields (``_UNIQUE_KEY_QUERY`` left out for clients at or
      below 4.9.3, as Java does) and the body, keyed with the user's password: ACL 1.0's
      signature, so 1.0 clients sign for 2.0 unchanged;
    * authorization: every (resource, actions) the request needs
      (``finchmq.protocol.auth.authorization_contexts``) is granted: a SUPER user passes; else the
      user's ACL must have a matching entry, and the most specific one must ALLOW.
    A refusal is answered NO_PERMISSION with Java's message ("User:bob has no permission to
    access Topic:other from 127.0.0.1, no matched policies."); codes listed in
    ``authenticationWhitelist`` / ``authorizationWhitelist`` skip the respective check.

Migration from ACL 1.0 (Java ``AuthMigrator``; ``migrate_from_v1``):
    With ``migrateAuthFromV1Enabled=true`` the broker reads the 1.0 accounts at start-up (the
    files ACL 1.0 reads: ``aclFilePath``, or ``$ROCKETMQ_HOME/conf/plain_acl.yml`` and
    ``conf/acl/``) after the configured super users are created, and makes each account whose
    accessKey is not a user yet a user and an ACL (``v1_user_and_acl``): accessKey -> username,
    secretKey -> password, ``admin: true`` -> a SUPER user (else NORMAL); ``topicPerms`` and
    ``groupPerms`` -> the CUSTOM policy, an entry per ``Topic:<name>``/``Group:<name>``;
    ``defaultTopicPerm``/``defaultGroupPerm`` -> the DEFAULT policy's ``Topic:*``/``Group:*``;
    a permission PUB, SUB or PUB|SUB -> those actions, ALLOW; DENY -> ``All``, DENY. An existing
    user is left alone, ACL included, so the migration runs again at every start harmlessly. As
    in Java, ``whiteRemoteAddress`` and ``globalWhiteRemoteAddresses`` are not migrated: in 1.0
    they let a peer skip the checks, which 2.0 has no way to say (an entry's source IPs narrow it
    instead). ``finchmq admin migrateAuthFromV1`` does the same from a file over the network
    (``AUTH_*`` requests), for brokers already running.

Not yet: signing the broker's own requests with ``innerClientAuthenticationCredentials`` (the
user is created).
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from finchmq.common import write_atomically
from finchmq.common.logs import RateLimitedLog
from finchmq.protocol import _json
from finchmq.protocol.acl import SIGNATURE, UNIQUE_MSG_QUERY_FLAG, request_signature, verify_v2_signature
from finchmq.protocol.auth import (
    Acl,
    Action,
    AuthorizationContext,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserStatus,
    UserType,
    authorization_contexts,
    is_valid_ip_or_cidr,
    user_subject,
)
from finchmq.protocol.codes import MQVersion, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.errors import ProtocolError
from finchmq.remoting import RequestRefused

from .acl import AclConfigError, PlainAccessConfig, find_acl_files, read_access_configs
from .config import BrokerConfig

__all__ = [
    "AuthChecker",
    "AuthConfigError",
    "AuthError",
    "AuthMetadataManager",
    "AuthStore",
    "MigrationReport",
    "auth_wanted",
    "build_auth",
    "load_auth",
    "migrate_from_v1",
    "v1_user_and_acl",
]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

# Java's class names the provider keys may name (finchmq has one implementation of each)
_PROVIDERS: Final = {
    "authentication_provider": (
        "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider"
    ),
    "authentication_metadata_provider": (
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
    ),
    "authorization_provider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorization_metadata_provider": (
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider"
    ),
}
_SKIP_ALL: Final = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})
_SKIP_SIGNATURE: Final = frozenset({SIGNATURE})


class AuthConfigError(RuntimeError):
    """ACL 2.0 settings or files the broker cannot start with (names the key or the file)."""


class AuthError(RequestRefused):
    """Java's ``AuthenticationException``/``AuthorizationException``: answered NO_PERMISSION
    with the message as the remark, by the check and by the ``AUTH_*`` requests alike."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ResponseCode.NO_PERMISSION)
        self.message = message


def auth_wanted(config: BrokerConfig) -> bool:
    """Whether the broker keeps users and ACLs: a check is on or a metadata provider is named."""
    return bool(
        config.authentication_enabled
        or config.authorization_enabled
        or config.authentication_metadata_provider
        or config.authorization_metadata_provider
    )


def _check_config(config: BrokerConfig) -> None:
    for key, java_class in _PROVIDERS.items():
        value = getattr(config, key).strip()
        if value and value != java_class:
            camel = key.split("_")[0] + "".join(p.title() for p in key.split("_")[1:])
            raise AuthConfigError(
                f"{camel}={value} is not available in finchmq: leave it empty or set {java_class}"
            )
    if config.acl_enable and (config.authentication_enabled or config.authorization_enabled):
        raise AuthConfigError(
            "aclEnable=true (ACL 1.0, plain_acl.yml) and authenticationEnabled/authorizationEnabled "
            "(ACL 2.0) cannot both be on: choose one"
        )
    if config.migrate_auth_from_v1_enabled and not auth_wanted(config):
        raise AuthConfigError(
            "migrateAuthFromV1Enabled=true needs ACL 2.0 on (authenticationEnabled/"
            "authorizationEnabled=true): the 1.0 accounts would have nowhere to go"
        )


def _whitelist(text: str) -> frozenset[str]:
    """Java's whitelists hold rpc codes as strings: a remoting request code (``10``) or a 5.x
    request's protobuf name (``apache.rocketmq.v2.QueryRouteRequest``)."""
    return frozenset(item.strip() for item in text.split(",") if item.strip())


# -- the store ------------------------------------------------------------------------------------


class _Table:
    """One JSON object file of key -> stored value (Java: one RocksDB database)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.values: dict[str, dict[str, Any]] = {}

    def load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise AuthConfigError(f"cannot read {self.path}: {exc.strerror}") from None
        try:
            tree = _json.loads(data) if data.strip() else {}
        except _json.JSONDecodeError as exc:
            raise AuthConfigError(f"{self.path}: not JSON: {exc}") from None
        if not isinstance(tree, dict) or not all(isinstance(v, dict) for v in tree.values()):
            raise AuthConfigError(f"{self.path}: expected a JSON object of key -> object")
        self.values = tree

    def snapshot(self) -> bytes:
        return _json.dumps(dict(sorted(self.values.items())))


class AuthStore:
    """Users and ACLs on disk (see the module docstring) and in memory; a change is written
    before the call that made it returns."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._users = _Table(directory / "users.json")
        self._acls = _Table(directory / "acls.json")
        self._lock = asyncio.Lock()
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}

    def load(self) -> None:
        """Read both files (blocking; at start-up). Raises ``AuthConfigError``."""
        self._users.load()
        self._acls.load()
        try:
            self.users = {k: User.from_stored(v) for k, v in self._users.values.items()}
            self.acls = {k: Acl.from_stored(k, v) for k, v in self._acls.values.items()}
        except ProtocolError as exc:
            raise AuthConfigError(f"{self.directory}: {exc}") from None

    def put_user_now(self, user: User) -> None:
        """Store a user (blocking; at start-up)."""
        self.users[user.username] = user
        self._users.values[user.username] = user.stored()
        write_atomically(self._users.path, self._users.snapshot(), keep_backup=False)

    def put_acl_now(self, acl: Acl) -> None:
        """Store an ACL (blocking; at start-up)."""
        self.acls[acl.subject] = acl
        self._acls.values[acl.subject] = acl.stored()
        write_atomically(self._acls.path, self._acls.snapshot(), keep_backup=False)

    async def _write(self, table: _Table) -> None:
        data = table.snapshot()
        await asyncio.to_thread(write_atomically, table.path, data, keep_backup=False)

    async def put_user(self, user: User) -> None:
        async with self._lock:
            self.users[user.username] = user
            self._users.values[user.username] = user.stored()
            await self._write(self._users)

    async def delete_user(self, username: str) -> None:
        async with self._lock:
            self.users.pop(username, None)
            if self._users.values.pop(username, None) is not None:
                await self._write(self._users)

    async def put_acl(self, acl: Acl) -> None:
        async with self._lock:
            self.acls[acl.subject] = acl
            self._acls.values[acl.subject] = acl.stored()
            await self._write(self._acls)

    async def delete_acl(self, subject: str) -> None:
        async with self._lock:
            self.acls.pop(subject, None)
            if self._acls.values.pop(subject, None) is not None:
                await self._write(self._acls)


# -- the managers (Java AuthenticationMetadataManagerImpl + AuthorizationMetadataManagerImpl) -----


def _copy_acl(acl: Acl) -> Acl:
    """A deep enough copy to edit without touching the ACL in force until it is stored."""
    return Acl.from_stored(acl.subject, acl.stored())


def _subject_user(subject: str | None) -> str:
    """The username of a subject key; ``AuthError`` for anything but ``User:<name>``."""
    if subject:
        kind, sep, name = subject.partition(":")
        if sep and kind.lower() == "user" and name:
            return name
    raise AuthError(f"The subject {subject!r} is not of the form User:<username>.")


class AuthMetadataManager:
    """Users and ACLs with Java's rules and messages; every error is an ``AuthError``."""

    def __init__(self, store: AuthStore) -> None:
        self.store = store

    # -- users

    def get_user(self, username: str | None) -> User | None:
        if not username or not username.strip():
            raise AuthError("username can not be blank")
        return self.store.users.get(username)

    def is_super_user(self, username: str) -> bool:
        user = self.store.users.get(username)
        return user is not None and user.user_type is UserType.SUPER

    async def create_user(self, user: User) -> None:
        if not user.username or not user.username.strip():
            raise AuthError("username can not be blank")
        if not user.password or not user.password.strip():
            raise AuthError("password can not be blank")
        if user.username in self.store.users:
            raise AuthError("The user is existed")
        user.user_type = user.user_type or UserType.NORMAL
        user.user_status = user.user_status or UserStatus.ENABLE
        await self.store.put_user(user)

    async def update_user(self, user: User) -> None:
        """Fields left unset keep their value (Java)."""
        old = self.get_user(user.username)
        if old is None:
            raise AuthError("The user is not exist")
        new = User(old.username, old.password, old.user_type, old.user_status)
        if user.password and user.password.strip():
            new.password = user.password
        new.user_type = user.user_type or new.user_type
        new.user_status = user.user_status or new.user_status
        await self.store.put_user(new)

    async def delete_user(self, username: str) -> None:
        """The user and its ACL (Java deletes both)."""
        if not username or not username.strip():
            raise AuthError("username can not be blank")
        await self.store.delete_user(username)
        await self.store.delete_acl(user_subject(username))

    def list_user(self, name_filter: str | None) -> list[User]:
        """The users whose name contains ``name_filter``, in key order (RocksDB's)."""
        users = sorted(self.store.users.items(), key=lambda kv: kv[0].encode())
        return [u for name, u in users if not (name_filter and name_filter.strip()) or name_filter in name]

    def init_users(self, config: BrokerConfig) -> None:
        """``initAuthenticationUser`` and ``innerClientAuthenticationCredentials``: created as
        SUPER users when missing (blocking; at start-up)."""
        if config.init_authentication_user.strip():
            tree = self._json_object(config.init_authentication_user, "initAuthenticationUser")
            username, password = tree.get("username"), tree.get("password")
            if not (isinstance(username, str) and isinstance(password, str) and username and password):
                raise AuthConfigError('initAuthenticationUser must be {"username":"...","password":"..."}')
            self._init_super(username, password)
        if config.inner_client_authentication_credentials.strip():
            key = "innerClientAuthenticationCredentials"
            tree = self._json_object(config.inner_client_authentication_credentials, key)
            access_key, secret_key = tree.get("accessKey"), tree.get("secretKey")
            if (
                not isinstance(access_key, str)
                or not isinstance(secret_key, str)
                or not access_key
                or not secret_key
            ):
                raise AuthConfigError(f'{key} must be {{"accessKey":"...","secretKey":"..."}}')
            self._init_super(access_key, secret_key)

    @staticmethod
    def _json_object(text: str, key: str) -> dict[str, Any]:
        try:
            tree = _json.loads(text)
        except _json.JSONDecodeError:
            tree = None
        if not isinstance(tree, dict):
            raise AuthConfigError(f"{key} is not a JSON object: {text[:40]!r}...")
        return tree

    def _init_super(self, username: str, password: str) -> None:
        if username in self.store.users:
            return
        self.store.put_user_now(User(username, password, UserType.SUPER, UserStatus.ENABLE))
        log.info("ACL 2.0: super user %s created", username)

    # -- ACLs

    def _existing_subject(self, subject: str) -> str:
        username = _subject_user(subject)
        if username not in self.store.users:
            raise AuthError(f"The subject of {subject} is not exist.")
        return username

    @staticmethod
    def validate(acl: Acl) -> None:
        """Java ``AuthorizationMetadataManagerImpl.validate``, with its messages."""
        _subject_user(acl.subject)
        if not acl.policies:
            raise AuthError("The policies is empty.")
        for policy in acl.policies:
            if not policy.entries:
                raise AuthError("The policy entries is empty.")
            for entry in policy.entries:
                if entry.resource is None:
                    raise AuthError("The resource is null.")
                if not entry.actions:
                    raise AuthError("The actions is empty.")
                if Action.ANY in entry.actions:
                    raise AuthError("The actions can not be Any.")
                for ip in entry.environment.source_ips if entry.environment else ():
                    if not ip.strip():
                        raise AuthError("The source ip is empty.")
                    if not is_valid_ip_or_cidr(ip):
                        raise AuthError("The source ip is invalid.")
                if entry.decision is None:
                    raise AuthError("The decision is null or illegal.")
            policy.policy_type = policy.policy_type or PolicyType.CUSTOM

    async def create_acl(self, acl: Acl) -> None:
        """AUTH_CREATE_ACL and AUTH_UPDATE_ACL alike (as in Java): the policies are merged into
        the subject's ACL (an entry for a resource already there is replaced), or become it."""
        self.validate(acl)
        self._existing_subject(acl.subject)
        old = self.store.acls.get(acl.subject)
        if old is None:
            await self.store.put_acl(acl)
            return
        merged = _copy_acl(old)
        merged.update_policies(acl.policies)
        await self.store.put_acl(merged)

    update_acl = create_acl

    async def delete_acl(
        self, subject: str, policy_type: PolicyType | None, resource: Resource | None
    ) -> None:
        """The subject's whole ACL, or (``resource``) its entry in the ``policy_type`` policy
        (CUSTOM when ``None``); an ACL left without policies is deleted."""
        self._existing_subject(subject)
        old = self.store.acls.get(subject)
        if old is None:
            raise AuthError("The acl is not exist.")
        if resource is None:
            await self.store.delete_acl(subject)
            return
        edited = _copy_acl(old)
        edited.delete_policy(policy_type or PolicyType.CUSTOM, resource)
        if edited.policies:
            await self.store.put_acl(edited)
        else:
            await self.store.delete_acl(subject)

    def get_acl(self, subject: str) -> Acl | None:
        self._existing_subject(subject)
        return self.store.acls.get(subject)

    def list_acl(self, subject_filter: str | None, resource_filter: str | None) -> list[Acl]:
        """Java ``listAcl``: ACLs whose subject key contains ``subject_filter``; with a
        ``resource_filter`` not in the subject key, only the entries whose resource key contains
        it (an ACL left with none is not listed)."""
        out = []
        for subject, stored in sorted(self.store.acls.items(), key=lambda kv: kv[0].encode()):
            if subject_filter and subject_filter.strip() and subject_filter not in subject:
                continue
            acl = _copy_acl(stored)
            if resource_filter and resource_filter.strip() and resource_filter not in subject:
                for policy in acl.policies:
                    policy.entries = [
                        e
                        for e in policy.entries
                        if e.resource is not None and resource_filter in e.resource.key
                    ]
                acl.policies = [p for p in acl.policies if p.entries]
            if acl.policies:
                out.append(acl)
        return out


# -- the check of each request -------------------------------------------------------------------


class AuthChecker:
    """The broker's authentication and authorization of remoting requests (module docstring)."""

    def __init__(self, config: BrokerConfig, manager: AuthMetadataManager) -> None:
        self.manager = manager
        self.authentication_enabled = config.authentication_enabled
        self.authorization_enabled = config.authorization_enabled
        self.cluster_name = config.broker_cluster_name
        self.authentication_whitelist = _whitelist(config.authentication_whitelist)
        self.authorization_whitelist = _whitelist(config.authorization_whitelist)
        self.refusals: collections.Counter[str] = collections.Counter()  # "authentication"/"authorization"

    @property
    def enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    def check(self, remote_addr: str, request: RemotingCommand) -> None:
        """Return, or raise ``AuthError`` (answered NO_PERMISSION)."""
        what = f"code={request.code}"
        code = str(request.code)
        if self.authentication_enabled and code not in self.authentication_whitelist:
            try:
                self.authenticate(request)
            except AuthError as exc:
                raise self._refused("authentication", remote_addr, what, exc) from None
        if self.authorization_enabled and code not in self.authorization_whitelist:
            try:
                contexts = authorization_contexts(request, remote_addr, self.cluster_name)
            except ProtocolError as exc:
                refusal = AuthError(f"parse authorization context error: {exc}")
                raise self._refused("authorization", remote_addr, what, refusal) from None
            self._authorize_all(remote_addr, what, contexts)

    def check_grpc(
        self,
        remote_ip: str,
        rpc_code: str,
        username: str | None,
        date_time: str | None,
        signature_hex: str | None,
        contexts: Sequence[AuthorizationContext],
    ) -> None:
        """The check of a RocketMQ 5.x gRPC call (Java 5.3.3 proxy's authentication and
        authorization pipelines over ``DefaultAuthenticationContextBuilder`` /
        ``DefaultAuthorizationContextBuilder.build(Metadata, GeneratedMessageV3)``): return, or
        raise ``AuthError``.

        ``rpc_code`` is the request's protobuf name (what the whitelists may list),
        ``username``/``signature_hex`` come from the ``authorization`` metadata (``None`` when
        absent), ``date_time`` is the signed ``x-mq-date-time`` value, ``contexts`` what the call
        needs (``finchmq.grpc.auth.authorization_contexts``).
        """
        what = f"gRPC {rpc_code}"
        if self.authentication_enabled and rpc_code not in self.authentication_whitelist:
            try:
                self._authenticate_grpc(username, date_time, signature_hex)
            except AuthError as exc:
                raise self._refused("authentication", remote_ip, what, exc) from None
        if self.authorization_enabled and rpc_code not in self.authorization_whitelist:
            self._authorize_all(remote_ip, what, contexts)

    def _authorize_all(self, remote_addr: str, what: str, contexts: Sequence[AuthorizationContext]) -> None:
        for context in contexts:
            try:
                self.authorize(context)
            except AuthError as exc:
                raise self._refused("authorization", remote_addr, what, exc) from None

    def _user(self, username: str | None) -> User:
        if not username:
            raise AuthError("username cannot be null.")
        user = self.manager.store.users.get(username)
        if user is None:
            raise AuthError(f"User:{username} is not found.")
        if user.user_status is UserStatus.DISABLE:
            raise AuthError(f"User:{username} is disabled.")
        return user

    def _authenticate_grpc(
        self, username: str | None, date_time: str | None, signature_hex: str | None
    ) -> None:
        """Java ``DefaultAuthenticationHandler`` over a gRPC context: the content signed is the
        ``x-mq-date-time`` value."""
        user = self._user(username)
        if date_time is None:
            raise AuthError("datetime is null.")
        if signature_hex is None or not verify_v2_signature(user.password or "", date_time, signature_hex):
            raise AuthError("check signature failed.")

    def authenticate(self, request: RemotingCommand) -> None:
        """Java ``DefaultAuthenticationHandler``: a known, enabled user and a good signature."""
        ext = request.ext_fields
        user = self._user(ext.get("AccessKey") if ext else None)
        skip = _SKIP_ALL if request.version <= MQVersion.V4_9_3 else _SKIP_SIGNATURE
        expected = request_signature(user.password or "", ext, request.body, skip)
        given = ext.get(SIGNATURE)
        if given is None or not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
            raise AuthError("check signature failed.")

    def authorize(self, context: AuthorizationContext) -> None:
        """Java ``UserAuthorizationHandler`` then ``AclAuthorizationHandler``."""
        if context.username is None:
            raise AuthError(
                "Authorization failed. Please verify your access rights and try again. "
                "(the request has no AccessKey: sign it as a user)"
            )
        store = self.manager.store
        user = store.users.get(context.username)
        if user is None:
            raise AuthError(f"User:{context.username} not found.")
        if user.user_status is UserStatus.DISABLE:
            raise AuthError(f"User:{context.username} is disabled.")
        if user.user_type is UserType.SUPER:
            return
        acl = store.acls.get(user_subject(context.username))
        entry = acl.decide(context.resource, context.actions, context.source_ip) if acl else None
        if entry is None:
            raise AuthError(self._no_permission(context, "no matched policies."))
        if entry.decision is Decision.DENY:
            raise AuthError(self._no_permission(context, "the decision is deny."))

    @staticmethod
    def _no_permission(context: AuthorizationContext, detail: str) -> str:
        return (
            f"{context.subject} has no permission to access {context.resource.key} "
            f"from {context.source_ip}, {detail}"
        )

    def _refused(self, kind: str, remote_addr: str, what: str, exc: AuthError) -> AuthError:
        self.refusals[kind] += 1
        limited.log(
            logging.INFO, kind, "[%s] refused %s from %s: %s", kind.upper(), what, remote_addr, exc.message
        )
        return exc


# -- migration from ACL 1.0 (Java AuthMigrator) ----------------------------------------------------

_V1_ACTIONS: Final = {
    "PUB": (Action.PUB,),
    "SUB": (Action.SUB,),
    "PUB|SUB": (Action.PUB, Action.SUB),
    "SUB|PUB": (Action.PUB, Action.SUB),
    "DENY": (Action.ALL,),
}


def _v1_entry(resource: Resource, perm: str) -> PolicyEntry:
    """Java ``parseActions``/``parseDecision``: a permission the 1.0 check does not know (which
    ``read_access_configs`` never passes on) would become ``All``, ALLOW, as in Java."""
    perm = perm.strip()
    decision = Decision.DENY if perm == "DENY" else Decision.ALLOW
    return PolicyEntry(resource, _V1_ACTIONS.get(perm, (Action.ALL,)), None, decision)


def _v1_entries(items: tuple[str, ...], of: Any) -> list[PolicyEntry]:
    entries = []
    for item in items:
        parts = [p for p in item.split("=") if p]  # Java StringUtils.split: empty parts dropped
        if len(parts) == 2:
            entries.append(_v1_entry(of(parts[0].strip()), parts[1]))
    return entries


def v1_user_and_acl(config: PlainAccessConfig) -> tuple[User, Acl | None]:
    """A 1.0 account as Java's ``AuthMigrator`` makes it a user and an ACL (module docstring);
    no ACL when the account names no permission at all."""
    user_type = UserType.SUPER if config.admin else UserType.NORMAL
    user = User(config.access_key, config.secret_key, user_type, UserStatus.ENABLE)
    policies = []
    custom = _v1_entries(config.topic_perms, Resource.of_topic)
    custom += _v1_entries(config.group_perms, Resource.of_group)
    if custom:
        policies.append(Policy(PolicyType.CUSTOM, custom))
    defaults = [
        _v1_entry(Resource(kind, None, ResourcePattern.ANY), perm)
        for kind, perm in (
            (ResourceType.TOPIC, config.default_topic_perm),
            (ResourceType.GROUP, config.default_group_perm),
        )
        if perm is not None and perm.strip()
    ]
    if defaults:
        policies.append(Policy(PolicyType.DEFAULT, defaults))
    return user, (Acl(user_subject(user.username), policies) if policies else None)


@dataclass(slots=True)
class MigrationReport:
    """What a migration did: the usernames made users, those left alone because they are users
    already, and one message per account or file that could not be migrated."""

    migrated: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def migrate_from_v1(
    manager: AuthMetadataManager, accounts: list[PlainAccessConfig], report: MigrationReport | None = None
) -> MigrationReport:
    """Make each account a user and an ACL unless its accessKey is a user already (blocking; at
    start-up). An account that cannot be stored is reported and the others go on, as Java logs
    it and goes on."""
    report = report if report is not None else MigrationReport()
    store = manager.store
    for config in accounts:
        if config.access_key in store.users:
            report.existing.append(config.access_key)
            continue
        user, acl = v1_user_and_acl(config)
        try:
            if acl is not None:
                manager.validate(acl)
            store.put_user_now(user)
            if acl is not None:
                store.put_acl_now(acl)
        except (AuthError, OSError) as exc:
            report.failed.append(f"accessKey {config.access_key}: {exc}")
            continue
        report.migrated.append(config.access_key)
    return report


def _migrate_at_start(manager: AuthMetadataManager, config: BrokerConfig) -> None:
    try:
        main_file, acl_dir = find_acl_files(config)
    except AclConfigError:
        raise AuthConfigError(
            "migrateAuthFromV1Enabled=true but no ACL 1.0 file: set aclFilePath in broker.conf, or "
            "ROCKETMQ_HOME (the file is then $ROCKETMQ_HOME/conf/plain_acl.yml)"
        ) from None
    accounts, problems = read_access_configs(main_file, acl_dir)
    report = migrate_from_v1(manager, accounts, MigrationReport(failed=problems))
    for problem in report.failed:
        log.error("[ACL MIGRATE] not migrated: %s", problem)
    log.info(
        "[ACL MIGRATE] from %s: %d accounts migrated (%s), %d already users, %d not migrated",
        main_file,
        len(report.migrated),
        ", ".join(report.migrated) or "none",
        len(report.existing),
        len(report.failed),
    )


def build_auth(config: BrokerConfig, config_dir: Path) -> tuple[AuthMetadataManager, AuthChecker] | None:
    """The broker's ACL 2.0 parts, ``None`` when ``auth_wanted`` is false. Checks the settings
    (``AuthConfigError``); the files are read by ``load_auth``."""
    if not auth_wanted(config):
        if config.migrate_auth_from_v1_enabled:
            _check_config(config)
        return None
    _check_config(config)
    manager = AuthMetadataManager(AuthStore(config_dir / "auth"))
    return manager, AuthChecker(config, manager)


def load_auth(manager: AuthMetadataManager, config: BrokerConfig) -> None:
    """Read the users and ACLs and create the configured super users (blocking; at start-up)."""
    manager.store.load()
    manager.init_users(config)
    if config.migrate_auth_from_v1_enabled:
        _migrate_at_start(manager, config)
    log.info(
        "ACL 2.0: %d users, %d ACLs from %s (authenticationEnabled=%s, authorizationEnabled=%s)",
        len(manager.store.users),
        len(manager.store.acls),
        manager.store.directory,
        config.authentication_enabled,
        config.authorization_enabled,
    )
