"""ACL 1.0 in the broker (Java ``PlainAccessValidator`` + ``PlainPermissionManager`` +
``AclFileWatchService``): ``plain_acl.yml``, its accounts, and the check every request passes.

Files:
    ``aclEnable=true`` turns the check on. The accounts come from one file: ``aclFilePath``
    (broker.conf, finchmq's own key) when set; else ``$ROCKETMQ_HOME/conf/plain_acl.yml`` as in
    Java, or ``$ROCKETMQ_HOME/<ROCKETMQ_ACL_PLAIN_FILE>`` (Java's ``-Drocketmq.acl.plain.file``,
    relative to the home unless absolute). With ROCKETMQ_HOME, every ``*.yml``/``*.yaml`` under
    ``$ROCKETMQ_HOME/conf/acl/`` is read too (Java 4.9.8); an accessKey defined twice keeps its
    first definition (those files first, sorted by path, the main file last), as Java does.

Reload:
    ``watch()`` runs every 500 ms on the broker's loop: it stats the files (microseconds) and only
    when one changed reads and parses it in a thread. A file that no longer parses is logged and
    its last good content stays in force; so does an empty file (Java skips it too: an editor may
    be half way through writing it) and the main file vanishing.

Check (``check``, the remoting dispatcher's ``before_request`` hook): a peer matching a global
white address passes; else the request must name a known AccessKey; a peer matching that
account's ``whiteRemoteAddress`` passes; else the signature must match, then the permissions
the request needs (``finchmq.protocol.acl.parse_access_request``) must be granted. A refusal
raises ``AclError``, answered SYSTEM_ERROR with Java's remark ("org.apache.rocketmq.acl.common.
AclException: Check signature failed for accessKey=..."): Java 4.9.8's remoting server answers
an exception from an RPC hook that way.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import hmac
import ipaddress
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from finchmq.common import write_atomically
from finchmq.common.logs import RateLimitedLog
from finchmq.protocol.acl import (
    ACL_EXCEPTION,
    ADMIN_CODES,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    AccessRequest,
    AddressPattern,
    check_permission,
    is_perm_string,
    is_trace_publish,
    parse_access_request,
    parse_perm,
    perm_to_string,
    request_signature,
    verify_v2_signature,
)
from finchmq.protocol.bodies import DataVersion
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from finchmq.remoting import RequestRefused

from .config import BrokerConfig

__all__ = [
    "REFUSALS",
    "AclConfigError",
    "AclError",
    "PlainAccessConfig",
    "PlainAccessValidator",
    "PlainAccount",
    "acl_paths",
    "find_acl_files",
    "parse_acl_file",
    "read_access_configs",
]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)

WATCH_INTERVAL_MS: Final = 500  # Java AclFileWatchService
KEY_MIN_LENGTH: Final = 6  # Java AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: longer than this
_SKIP_BROKER: Final = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})
_SKIP_CLIENT: Final = frozenset({SIGNATURE})
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class AclConfigError(RuntimeError):
    """An ACL file that cannot be used: missing, not YAML, or a bad account (names the file and
    the entry). At start-up it stops the broker; on reload the last good content stays."""


class AclError(RequestRefused):
    """A request the ACL refuses; the remark is Java's (``AclException: <message>``). ``kind`` is
    one of ``REFUSALS``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{ACL_EXCEPTION}: {message}")
        self.kind = kind
        self.message = message


REFUSALS: Final = ("malformed", "no-access-key", "unknown-account", "signature", "admin", "permission")
"""Why requests are refused: ``PlainAccessValidator.refusals`` counts them by these kinds."""


# -- the file -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlainAccessConfig:
    """One account as written in the file (Java ``PlainAccessConfig``)."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlainAccount:
    """An account ready to check requests against (Java's owned ``PlainAccessResource``)."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    resource_perms: Mapping[str, int]  # topic, or %RETRY%group -> perm
    path: Path


@dataclass(frozen=True, slots=True)
class AclFile:
    """One parsed ACL file."""

    path: Path
    accounts: tuple[PlainAccount, ...]
    global_white: tuple[AddressPattern, ...]
    global_white_text: tuple[str, ...]
    data_version: DataVersion
    raw: Mapping[str, Any]


def _text(value: object, where: str, name: str) -> str | None:
    """A YAML scalar as Java's fastjson would turn it into a String (12345678 -> "12345678")."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise AclConfigError(f"{where}: {name} must be a string, got {type(value).__name__} {value!r}")


def _text_list(value: object, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: {name} must be a list, got {type(value).__name__} {value!r}")
    items = []
    for i, item in enumerate(value):
        text = _text(item, where, f"{name}[{i}]")
        if text is not None:
            items.append(text)
    return tuple(items)


def _bool(value: object, where: str, name: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{where}: {name} must be true or false, got {value!r}")


def account_config(entry: object, where: str) -> PlainAccessConfig:
    """A ``accounts`` entry as a ``PlainAccessConfig``; ``AclConfigError`` naming ``where``."""
    if not isinstance(entry, dict):
        raise AclConfigError(f"{where}: an account must be a mapping, got {type(entry).__name__} {entry!r}")
    access_key = _text(entry.get("accessKey"), where, "accessKey") or ""
    secret_key = _text(entry.get("secretKey"), where, "secretKey") or ""
    return PlainAccessConfig(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=_text(entry.get("whiteRemoteAddress"), where, "whiteRemoteAddress"),
        admin=_bool(entry.get("admin"), where, "admin"),
        default_topic_perm=_text(entry.get("defaultTopicPerm"), where, "defaultTopicPerm"),
        default_group_perm=_text(entry.get("defaultGroupPerm"), where, "defaultGroupPerm"),
        topic_perms=_text_list(entry.get("topicPerms"), where, "topicPerms"),
        group_perms=_text_list(entry.get("groupPerms"), where, "groupPerms"),
    )


def check_keys(config: PlainAccessConfig) -> None:
    """Java ``checkPlainAccessConfig``: both keys longer than 6 characters (the secret is not shown)."""
    if len(config.access_key) <= KEY_MIN_LENGTH or len(config.secret_key) <= KEY_MIN_LENGTH:
        raise AclConfigError(
            f"The accessKey={config.access_key} and secretKey (of {len(config.secret_key)} characters) "
            f"cannot be null and length should longer than {KEY_MIN_LENGTH}"
        )


def _perm(text: str | None, what: str) -> int:
    if text is not None and not is_perm_string(text):
        raise AclConfigError(
            f"Parse permission error for {what}={text!r}: the expected permissions are "
            "'SUB', 'PUB', 'SUB|PUB', 'PUB|SUB' or 'DENY'"
        )
    return parse_perm(text)  # missing: DENY, as Java


def _resource_perms(items: Sequence[str], is_topic: bool, into: dict[str, int]) -> None:
    """Java ``Permission.parseResourcePerms`` (+ ``checkResourcePerms``'s check of the perm)."""
    kind = "topic" if is_topic else "group"
    for item in items:
        parts = [p for p in item.split("=") if p]
        if len(parts) != 2:
            raise AclConfigError(
                f"Parse resource permission failed for {kind}:{item}: the expected format is "
                f"'Res=Perm', for example {kind}A=SUB"
            )
        name = parts[0].strip()
        into[name if is_topic else retry_topic(name)] = _perm(parts[1], f"{kind}:{name}")


def build_account(config: PlainAccessConfig, path: Path) -> PlainAccount:
    """Java ``buildPlainAccessResource``: check an account and compile its patterns and perms."""
    check_keys(config)
    perms: dict[str, int] = {}
    _resource_perms(config.group_perms, False, perms)
    _resource_perms(config.topic_perms, True, perms)
    try:
        white = AddressPattern(config.white_remote_address)
    except ValueError as exc:
        raise AclConfigError(f"whiteRemoteAddress: {exc}") from None
    return PlainAccount(
        access_key=config.access_key,
        secret_key=config.secret_key,
        white_remote_address=white,
        admin=config.admin,
        default_topic_perm=_perm(config.default_topic_perm, "defaultTopicPerm"),
        default_group_perm=_perm(config.default_group_perm, "defaultGroupPerm"),
        resource_perms=perms,
        path=path,
    )


def _data_version(raw: object) -> DataVersion:
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        first = raw[0]
        try:
            return DataVersion(timestamp=int(first.get("timestamp", 0)), counter=int(first.get("counter", 0)))
        except (TypeError, ValueError):
            pass
    return DataVersion(timestamp=0, counter=0)


def load_yaml(path: Path, data: bytes) -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file)."""
    try:
        tree = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: not valid YAML: {exc}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise AclConfigError(f"{path}: the top level must be a mapping, got {type(tree).__name__}")
    return tree


def parse_acl_file(path: Path, data: bytes) -> AclFile:
    """Parse one ``plain_acl.yml``; ``AclConfigError`` names the file and the entry at fault.

    An accessKey defined twice in the file keeps its first definition (logged), as Java does.
    """
    tree = load_yaml(path, data)
    white_text = _text_list(tree.get("globalWhiteRemoteAddresses"), str(path), "globalWhiteRemoteAddresses")
    white = []
    for i, text in enumerate(white_text):
        try:
            white.append(AddressPattern(text))
        except ValueError as exc:
            raise AclConfigError(f"{path}: globalWhiteRemoteAddresses[{i}]: {exc}") from None
    raw_accounts = tree.get("accounts")
    if raw_accounts is not None and not isinstance(raw_accounts, list):
        raise AclConfigError(f"{path}: accounts must be a list, got {type(raw_accounts).__name__}")
    accounts: dict[str, PlainAccount] = {}
    for i, entry in enumerate(raw_accounts or ()):
        where = f"{path}: accounts[{i}]"
        try:
            account = build_account(account_config(entry, where), path)
        except AclConfigError as exc:
            message = str(exc)
            raise AclConfigError(message if message.startswith(where) else f"{where}: {message}") from None
        if account.access_key in accounts:
            log.warning(
                "%s: accessKey %s is defined again; the first definition is used", where, account.access_key
            )
            continue
        accounts[account.access_key] = account
    return AclFile(
        path=path,
        accounts=tuple(accounts.values()),
        global_white=tuple(white),
        global_white_text=white_text,
        data_version=_data_version(tree.get("dataVersion")),
        raw=tree,
    )


def find_acl_files(
    config: BrokerConfig, environ: Mapping[str, str] | None = None
) -> tuple[Path, Path | None]:
    """(the main ACL file, the ``conf/acl`` directory or ``None``); see the module docstring.

    Raises ``AclConfigError`` when neither ``aclFilePath`` nor ROCKETMQ_HOME says where to look.
    """
    env = os.environ if environ is None else environ
    if config.acl_file_path:
        return Path(config.acl_file_path).expanduser(), None
    home = env.get("ROCKETMQ_HOME", "")
    relative = env.get("ROCKETMQ_ACL_PLAIN_FILE") or "conf/plain_acl.yml"
    if Path(relative).is_absolute():
        return Path(relative), (Path(home) / "conf" / "acl") if home else None
    if not home:
        raise AclConfigError(
            "aclEnable=true but no ACL file: set aclFilePath in broker.conf, or ROCKETMQ_HOME "
            "(the file is then $ROCKETMQ_HOME/conf/plain_acl.yml)"
        )
    return Path(home) / relative, Path(home) / "conf" / "acl"


def acl_paths(main_file: Path, acl_dir: Path | None) -> list[Path]:
    """The files to read: ``conf/acl`` (recursively, sorted), then the main file."""
    paths: list[Path] = []
    if acl_dir is not None and acl_dir.is_dir():
        for root, dirs, names in os.walk(acl_dir):
            dirs.sort()
            paths.extend(Path(root) / n for n in sorted(names) if n.endswith((".yml", ".yaml")))
    if main_file not in paths:
        paths.append(main_file)
    return paths


def read_access_configs(
    main_file: Path, acl_dir: Path | None = None
) -> tuple[list[PlainAccessConfig], list[str]]:
    """Every account of the ACL files (Java 5.3 ``PlainPermissionManager.getAllAclConfig``, the
    source of ``AuthMigrator``): (the accounts that pass the 1.0 checks, in file order, an
    accessKey defined again keeping its first definition; one message per account or file that
    does not). A missing main file has no accounts; unlike the 1.0 check, a bad account does not
    spoil its file, it is only reported."""
    accounts: dict[str, PlainAccessConfig] = {}
    problems: list[str] = []
    for path in acl_paths(main_file, acl_dir):
        try:
            tree = load_yaml(path, path.read_bytes())
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"cannot read the ACL file {path}: {exc.strerror}")
            continue
        except AclConfigError as exc:
            problems.append(str(exc))
            continue
        raw = tree.get("accounts")
        if raw is not None and not isinstance(raw, list):
            problems.append(f"{path}: accounts must be a list, got {type(raw).__name__}")
            continue
        for i, entry in enumerate(raw or ()):
            where = f"{path}: accounts[{i}]"
            try:
                config = account_config(entry, where)
                build_account(config, path)  # the checks of 1.0: keys, permissions, addresses
            except AclConfigError as exc:
                message = str(exc)
                problems.append(message if message.startswith(where) else f"{where}: {message}")
                continue
            accounts.setdefault(config.access_key, config)
    return list(accounts.values()), problems


# -- the accounts in force ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Table:
    accounts: Mapping[str, PlainAccount]
    global_white: tuple[AddressPattern, ...]


_Stat = tuple[int, int, int, int]


def _stat(path: Path) -> _Stat | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


@functools.lru_cache(maxsize=4096)
def _peer_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _same_signature(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


def _print_resource(resource: str) -> str:
    """Java ``PlainAccessResource.printStr``: topic:T or group:G."""
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}"
    return f"topic:{resource}"


class PlainAccessValidator:
    """The accounts in force, their files, and the check of each request (see the module docstring)."""

    def __init__(self, main_file: Path, acl_dir: Path | None = None) -> None:
        self.main_file = main_file
        self.acl_dir = acl_dir
        self._files: dict[Path, AclFile] = {}
        self._stats: dict[Path, _Stat] = {}
        self._table = _Table(accounts={}, global_white=())
        self._lock = asyncio.Lock()  # a reload and an admin edit never interleave
        self.reloads = 0  # how many times files were (re)read
        self.refusals: collections.Counter[str] = collections.Counter()  # by kind (REFUSALS)

    @classmethod
    def from_config(
        cls, config: BrokerConfig, environ: Mapping[str, str] | None = None
    ) -> PlainAccessValidator:
        return cls(*find_acl_files(config, environ))

    # -- files ------------------------------------------------------------------------------------

    def _paths(self) -> list[Path]:
        return acl_paths(self.main_file, self.acl_dir)

    def _snapshot(self) -> dict[Path, _Stat]:
        snapshot = {}
        for path in self._paths():
            stat = _stat(path)
            if stat is not None:
                snapshot[path] = stat
        return snapshot

    @staticmethod
    def _read(paths: Sequence[Path]) -> dict[Path, AclFile | AclConfigError]:
        results: dict[Path, AclFile | AclConfigError] = {}
        for path in paths:
            try:
                results[path] = parse_acl_file(path, path.read_bytes())
            except AclConfigError as exc:
                results[path] = exc
            except OSError as exc:
                results[path] = AclConfigError(f"cannot read the ACL file {path}: {exc.strerror}")
        return results

    def load(self) -> None:
        """Read every file (blocking; at start-up). Raises ``AclConfigError`` for a missing main
        file or any file that does not parse."""
        snapshot = self._snapshot()
        if self.main_file not in snapshot:
            raise AclConfigError(
                f"aclEnable=true but the ACL file {self.main_file} does not exist "
                "(set aclFilePath in broker.conf, or create $ROCKETMQ_HOME/conf/plain_acl.yml)"
            )
        for path, result in self._read(list(snapshot)).items():
            if isinstance(result, AclConfigError):
                raise result
            self._files[path] = result
        self._stats = snapshot
        self._install()
        log.info(
            "ACL on: %d accounts, %d global white addresses from %s",
            len(self._table.accounts),
            len(self._table.global_white),
            ", ".join(str(p) for p in self._files),
        )

    async def watch(self) -> None:
        """Reload the files that changed since the last call (see the module docstring)."""
        snapshot = self._snapshot()
        if snapshot == self._stats:
            return
        async with self._lock:
            changed = [p for p, stat in snapshot.items() if self._stats.get(p) != stat]
            gone = [p for p in self._stats if p not in snapshot]
            self._stats = snapshot
            results = await asyncio.to_thread(self._read, changed) if changed else {}
            for path, result in results.items():
                if isinstance(result, AclConfigError):
                    log.error("ACL file %s not reloaded, the last good content stays: %s", path, result)
                elif not result.raw and path in self._files:
                    # Java skips an empty file on reload (it may be caught half written)
                    log.warning("ACL file %s is empty: not reloaded, the last good content stays", path)
                else:
                    self._files[path] = result
            for path in gone:
                if path == self.main_file:
                    log.error("ACL file %s is gone; its last good content stays", path)
                elif self._files.pop(path, None) is not None:
                    log.info("ACL file %s is gone; its accounts are removed", path)
            self._install()
            log.info(
                "ACL reloaded (%s): %d accounts",
                ", ".join(map(str, changed + gone)),
                len(self._table.accounts),
            )

    def _install(self) -> None:
        accounts: dict[str, PlainAccount] = {}
        white: list[AddressPattern] = []
        for path in self._paths():  # Java's order: conf/acl first, the main file last
            acl_file = self._files.get(path)
            if acl_file is None:
                continue
            white.extend(acl_file.global_white)
            for account in acl_file.accounts:
                first = accounts.setdefault(account.access_key, account)
                if first is not account:
                    log.warning(
                        "accessKey %s is defined in %s and %s; the first is used",
                        account.access_key,
                        first.path,
                        path,
                    )
        self._table = _Table(accounts=accounts, global_white=tuple(white))
        self.reloads += 1

    @property
    def accounts(self) -> Mapping[str, PlainAccount]:
        return self._table.accounts

    # -- the check ----------------------------------------------------------------------------------

    def check(self, remote_addr: str, request: RemotingCommand) -> None:
        """Java ``validate(parse(request, remoteAddr))``: return, or raise ``AclError``."""
        try:
            access = parse_access_request(request, remote_addr)
        except ProtocolError as exc:
            raise self._refuse(remote_addr, request, "malformed", str(exc)) from None
        table = self._table
        ip = _peer_ip(access.remote_ip)
        for pattern in table.global_white:
            if pattern.matches(ip):
                return
        key = access.access_key
        if key is None:
            raise self._refuse(remote_addr, request, "no-access-key", "No accessKey is configured")
        account = table.accounts.get(key)
        if account is None:
            raise self._refuse(remote_addr, request, "unknown-account", f"No acl config for {key}")
        if account.white_remote_address.matches(ip):
            return
        if not self._signature_ok(account, request, access):
            raise self._refuse(
                remote_addr, request, "signature", f"Check signature failed for accessKey={key}"
            )
        if is_trace_publish(access):
            return
        missing = self._missing_permission(access, account)
        if missing is not None:
            raise self._refuse(remote_addr, request, *missing)

    @staticmethod
    def _signature_ok(account: PlainAccount, request: RemotingCommand, access: AccessRequest) -> bool:
        ext, body = request.ext_fields, request.body
        if _same_signature(request_signature(account.secret_key, ext, body, _SKIP_BROKER), access.signature):
            return True
        # Java's broker leaves _UNIQUE_KEY_QUERY out but its client signs it: accept that too.
        return UNIQUE_MSG_QUERY_FLAG in ext and _same_signature(
            request_signature(account.secret_key, ext, body, _SKIP_CLIENT), access.signature
        )

    @staticmethod
    def _missing_permission(access: AccessRequest, account: PlainAccount) -> tuple[str, str] | None:
        """Java ``checkPerm``: ``None`` when granted, else (kind, why not)."""
        code = access.request_code
        if code in ADMIN_CODES and not account.admin:
            return (
                "admin",
                f"Need admin permission for request code={code}, but accessKey={account.access_key} is not",
            )
        return PlainAccessValidator._missing_resource_permission(access.resources, account)

    @staticmethod
    def _missing_resource_permission(
        resources: Mapping[str, int], account: PlainAccount
    ) -> tuple[str, str] | None:
        """Java ``checkPerm`` past the admin check: each topic or ``%RETRY%group`` resource."""
        owned_perms = account.resource_perms
        if not resources or (not owned_perms and account.admin):
            return None
        for resource, needed in resources.items():
            owned = owned_perms.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
                owned = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(needed, owned):
                needs, has = perm_to_string(needed), perm_to_string(owned)
                return "permission", (
                    f"No default permission for {_print_resource(resource)} "
                    f"(needs {needs}, accessKey={account.access_key} has {has})"
                )
        return None

    def _refuse(self, remote_addr: str, request: RemotingCommand | str, kind: str, message: str) -> AclError:
        self.refusals[kind] += 1
        what = request if isinstance(request, str) else f"code={request.code}"
        limited.log(logging.WARNING, "refused", "ACL refused %s from %s: %s", what, remote_addr, message)
        return AclError(kind, message)

    def check_grpc(
        self,
        remote_ip: str,
        access_key: str | None,
        date_time: str | None,
        signature_hex: str | None,
        resources: Iterable[tuple[str, bool, int]],
    ) -> None:
        """The check of a RocketMQ 5.x gRPC call (ACL 1.0, Java 5.2.0 ``PlainAccessValidator``
        over ``PlainAccessResource.parse(GeneratedMessageV3, AuthenticationHeader)``): return, or
        raise the ``AclError`` the remoting check raises (same kinds, messages and counts).

        ``access_key``/``signature_hex`` come from the ``authorization`` metadata
        (``protocol.acl.parse_v2_authorization``; None when absent), ``date_time`` is the signed
        ``x-mq-date-time`` value; ``resources`` are (topic or group name, is it a group, the
        permission needed: ``PUB``, ``SUB`` or ``ANY``); ``remote_ip`` is the HTTP/2 peer's
        address (no port), matched against the white lists.
        """
        table = self._table
        ip = _peer_ip(remote_ip)
        for pattern in table.global_white:
            if pattern.matches(ip):
                return
        if access_key is None:
            raise self._refuse(remote_ip, "gRPC call", "no-access-key", "No accessKey is configured")
        account = table.accounts.get(access_key)
        if account is None:
            raise self._refuse(remote_ip, "gRPC call", "unknown-account", f"No acl config for {access_key}")
        if account.white_remote_address.matches(ip):
            return
        if (
            date_time is None
            or signature_hex is None
            or not verify_v2_signature(account.secret_key, date_time, signature_hex)
        ):
            raise self._refuse(
                remote_ip, "gRPC call", "signature", f"Check signature failed for accessKey={access_key}"
            )
        needs: dict[str, int] = {}
        for name, is_group, needed in resources:
            needs[retry_topic(name) if is_group else name] = needed
        missing = self._missing_resource_permission(needs, account)
        if missing is not None:
            raise self._refuse(remote_ip, "gRPC call", *missing)

    # -- edits by admin requests (Java AdminBrokerProcessor's ACL codes) ------------------------------

    def _write(self, path: Path, tree: dict[str, Any]) -> AclFile:
        """Bump the file's dataVersion, write it (blocking) and return it parsed."""
        version = _data_version(tree.get("dataVersion")).next_version()
        tree["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]
        data = yaml.dump(tree, Dumper=_Dumper, sort_keys=False, allow_unicode=True).encode()
        parsed = parse_acl_file(path, data)  # refuse to write what would not load
        write_atomically(path, data, keep_backup=False)
        return parsed

    async def _edit(self, path: Path, edit: Any) -> None:
        async with self._lock:
            parsed = await asyncio.to_thread(self._edit_blocking, path, edit)
            self._files[path] = parsed
            stat = _stat(path)
            if stat is not None:
                self._stats[path] = stat
            self._install()

    def _edit_blocking(self, path: Path, edit: Any) -> AclFile:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise AclConfigError(f"cannot read the ACL file {path}: {exc.strerror}") from None
        tree = load_yaml(path, data)
        edit(tree)
        return self._write(path, tree)

    async def update_access_config(self, config: PlainAccessConfig) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: change the account in the file that defines it, or add it
        to the main file. Fields left empty keep their value (``admin`` is always set, as Java);
        a new account needs a secret key. Raises ``AclConfigError`` (nothing is written) when the
        result would not load."""
        existing = self._table.accounts.get(config.access_key)
        path = existing.path if existing is not None else self.main_file

        def edit(tree: dict[str, Any]) -> None:
            accounts = tree.get("accounts")
            if not isinstance(accounts, list):
                accounts = tree["accounts"] = []
            for entry in accounts:
                if isinstance(entry, dict) and _text(entry.get("accessKey"), "", "") == config.access_key:
                    break
            else:
                entry = {"accessKey": config.access_key}
                accounts.append(entry)
            if config.secret_key:
                entry["secretKey"] = config.secret_key
            if config.white_remote_address is not None:
                entry["whiteRemoteAddress"] = config.white_remote_address
            entry["admin"] = config.admin
            if config.default_topic_perm:
                entry["defaultTopicPerm"] = config.default_topic_perm
            if config.default_group_perm:
                entry["defaultGroupPerm"] = config.default_group_perm
            if config.topic_perms:
                entry["topicPerms"] = list(config.topic_perms)
            if config.group_perms:
                entry["groupPerms"] = list(config.group_perms)

        await self._edit(path, edit)

    async def delete_access_config(self, access_key: str) -> bool:
        """DELETE_ACL_CONFIG: remove the account from its file; False when there is none."""
        existing = self._table.accounts.get(access_key)
        if existing is None:
            return False

        def edit(tree: dict[str, Any]) -> None:
            accounts = tree.get("accounts")
            if isinstance(accounts, list):
                tree["accounts"] = [
                    e
                    for e in accounts
                    if not (isinstance(e, dict) and _text(e.get("accessKey"), "", "") == access_key)
                ]

        await self._edit(existing.path, edit)
        return True

    async def update_global_white_addrs(self, addresses: Sequence[str], path: str | None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace a file's ``globalWhiteRemoteAddresses``
        (the main file unless ``path`` names another ACL file in force)."""
        target = Path(path) if path else self.main_file
        if target != self.main_file and target not in self._files:
            known = ", ".join(str(p) for p in self._files)
            raise AclConfigError(f"{target} is not an ACL file of this broker (they are: {known})")
        for i, text in enumerate(addresses):
            try:
                AddressPattern(text)
            except ValueError as exc:
                raise AclConfigError(f"globalWhiteRemoteAddresses[{i}]: {exc}") from None

        def edit(tree: dict[str, Any]) -> None:
            tree["globalWhiteRemoteAddresses"] = list(addresses)

        await self._edit(target, edit)

    def data_versions(self) -> dict[str, DataVersion]:
        """GET_BROKER_CLUSTER_ACL_INFO: each file's dataVersion, by path."""
        return {str(path): acl_file.data_version for path, acl_file in self._files.items()}

    def main_data_version(self) -> DataVersion:
        acl_file = self._files.get(self.main_file)
        return acl_file.data_version if acl_file is not None else DataVersion(timestamp=0, counter=0)
