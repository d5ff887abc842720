"""mqadmin's ACL 2.0 commands (Java 5.3 ``tools/command/auth``): users (createUser, updateUser,
deleteUser, getUser, listUser) and ACLs (createAcl, updateAcl, deleteAcl, getAcl, listAcl) on one
broker (``-b``) or every master of a cluster (``-c``), with mqadmin's options and output. When
the brokers check requests, only a super user may change a super user, and the ACL of the
signing user must allow ``Update`` (changes) or ``Get`` (reads) on ``Cluster:<name>``.

``migrateAuthFromV1`` is finchmq's own: it reads an ACL 1.0 file here and creates its accounts'
users and ACLs with the AUTH_* requests above (Java's ``AuthMigrator`` mapping), so it works with
any 5.3 broker; Java does this only at a broker's start (``migrateAuthFromV1Enabled``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from finchmq.broker.acl import read_access_configs
from finchmq.broker.auth import v1_user_and_acl
from finchmq.client import BlockingAdminClient
from finchmq.protocol.auth import AclInfo, UserInfo

from .command import BROKER_ADDR, CLUSTER, CommandFamily, Option, Result

__all__ = ["commands"]

commands = CommandFamily()

# Java's FORMATs: "%-16s  %-22s  %-22s  %-22s%n" and "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s%n"
_USER_ROW = "{:<16}  {:<22}  {:<22}  {:<22}"
_ACL_ROW = "{:<16}  {:<10}  {:<22}  {:<20}  {:<24}  {:<10}"


def _brokers(args: argparse.Namespace, command: str) -> None:
    if not args.cluster and not args.broker:
        raise ValueError(f"give -c CLUSTER or -b BROKER_ADDR (mqadmin {command})")


def _split(text: str | None) -> list[str]:
    """Java ``StringUtils.split(text, ',')``, each item trimmed."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _java(value: object) -> str:
    """How Java's ``printf("%s")`` shows a value: ``null``, ``[a, b]``."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _masters(admin: BlockingAdminClient, args: argparse.Namespace) -> list[str]:
    if args.broker:
        return [args.broker]
    addrs = sorted(admin.master_addrs(args.cluster).values())
    if not addrs:
        raise ValueError(f"there is no broker in cluster {args.cluster}")
    return addrs


def _done(addrs: Sequence[str], what: str) -> str:
    return "".join(f"{what} to {a} success.\n" for a in addrs).rstrip("\n")


# -- users ----------------------------------------------------------------------------------------


def _user_lines(users: Sequence[UserInfo]) -> list[str]:
    lines = [_USER_ROW.format("#UserName", "#Password", "#UserType", "#UserStatus")]
    for u in users:
        values = (u.username, u.password, u.user_type, u.user_status)
        lines.append(_USER_ROW.format(*(_java(v) for v in values)))
    return lines


@commands.admin(
    "createUser",
    "create a user (ACL 2.0) on a broker or every master of a cluster",
    CLUSTER,
    BROKER_ADDR,
    Option("-u", "--username", required=True),
    Option("-p", "--password", required=True),
    Option("-t", "--userType", dest="user_type", help="Super or Normal (default)"),
)
def _create_user(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "createUser")
    addrs = admin.create_user(
        args.username.strip(), args.password.strip(), args.user_type and args.user_type.strip(),
        cluster=args.cluster, broker_addr=args.broker,
    )  # fmt: skip
    return {"brokers": addrs, "username": args.username}, _done(addrs, "create user")


@commands.admin(
    "updateUser",
    "change a user's password, type or status (ACL 2.0)",
    CLUSTER,
    BROKER_ADDR,
    Option("-u", "--username", required=True),
    Option("-p", "--password"),
    Option("-t", "--userType", dest="user_type", help="Super or Normal"),
    Option("-s", "--userStatus", dest="user_status", help="enable or disable"),
)
def _update_user(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "updateUser")
    addrs = admin.update_user(
        args.username.strip(), args.password, args.user_type, args.user_status,
        cluster=args.cluster, broker_addr=args.broker,
    )  # fmt: skip
    return {"brokers": addrs, "username": args.username}, _done(addrs, "update user")


@commands.admin(
    "deleteUser",
    "delete a user and its ACL (ACL 2.0)",
    CLUSTER,
    BROKER_ADDR,
    Option("-u", "--username", required=True),
)
def _delete_user(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "deleteUser")
    addrs = admin.delete_user(args.username.strip(), cluster=args.cluster, broker_addr=args.broker)
    return {"brokers": addrs, "username": args.username}, _done(addrs, "delete user")


@commands.admin(
    "getUser",
    "a user (ACL 2.0); with -c, from the first master that has it",
    BROKER_ADDR,
    CLUSTER,
    Option("-u", "--username", required=True),
)
def _get_user(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "getUser")
    for addr in _masters(admin, args):
        user = admin.get_user(addr, args.username.strip())
        if user is not None:
            return user.as_json(), "\n".join(_user_lines([user]))
    return None, ""


@commands.admin(
    "listUser",
    "the users (ACL 2.0) whose name contains -f; with -c, of the first master that has any",
    BROKER_ADDR,
    CLUSTER,
    Option("-f", "--filter", dest="name_filter"),
)
def _list_user(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "listUser")
    for addr in _masters(admin, args):
        users = admin.list_user(addr, args.name_filter and args.name_filter.strip())
        if users:
            lines = _user_lines(users)
            if not args.broker:
                lines.append(f"get user from {addr} success.")
            return [u.as_json() for u in users], "\n".join(lines)
    return [], ""


# -- ACLs -----------------------------------------------------------------------------------------


def _acl_rows(acl: AclInfo) -> list[str]:
    subject = _java(acl.subject)
    if not acl.policies:
        return [_ACL_ROW.format(subject, "", "", "", "", "")]
    return [
        _ACL_ROW.format(
            subject,
            _java(policy.policy_type),
            _java(entry.resource),
            _java(entry.actions),
            _java(entry.source_ips),
            _java(entry.decision),
        )
        for policy in acl.policies
        for entry in policy.entries or ()
    ]


def _acl_lines(acls: Sequence[AclInfo]) -> list[str]:
    header = _ACL_ROW.format("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
    return [header, *(row for acl in acls for row in _acl_rows(acl))]


_ACL_OPTIONS = (
    CLUSTER,
    BROKER_ADDR,
    Option("-s", "--subject", required=True, help="User:<username>"),
    Option("-r", "--resources", required=True, help="Topic:orders,Topic:orders*,Group:g1,*"),
    Option("-a", "--actions", required=True, help="Pub,Sub,Create,Update,Delete,Get,List,All"),
    Option("-d", "--decision", required=True, help="Allow or Deny"),
    Option("-i", "--sourceIp", dest="source_ip", help="addresses or CIDRs: 10.0.0.1,192.168.0.0/24"),
)


def _create_or_update_acl(admin: BlockingAdminClient, args: argparse.Namespace, update: bool) -> Result:
    name = "updateAcl" if update else "createAcl"
    _brokers(args, name)
    source_ips = _split(args.source_ip) if args.source_ip is not None else None
    addrs = admin.create_acl(
        args.subject.strip(), _split(args.resources), _split(args.actions), args.decision.strip(), source_ips,
        cluster=args.cluster, broker_addr=args.broker, update=update,
    )  # fmt: skip
    verb = "update" if update else "create"
    return {"brokers": addrs, "subject": args.subject}, _done(addrs, f"{verb} acl")


@commands.admin("createAcl", "give a subject ACL 2.0 entries on resources", *_ACL_OPTIONS)
def _create_acl(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _create_or_update_acl(admin, args, update=False)


@commands.admin("updateAcl", "change a subject's ACL 2.0 entries (as createAcl)", *_ACL_OPTIONS)
def _update_acl(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _create_or_update_acl(admin, args, update=True)


@commands.admin(
    "deleteAcl",
    "delete a subject's ACL (ACL 2.0), or only its entry for -r",
    CLUSTER,
    BROKER_ADDR,
    Option("-s", "--subject", required=True, help="User:<username>"),
    Option("-r", "--resources", help="one resource, e.g. Topic:orders*"),
)
def _delete_acl(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "deleteAcl")
    resource = args.resources.strip() if args.resources else None
    addrs = admin.delete_acl(args.subject.strip(), resource, cluster=args.cluster, broker_addr=args.broker)
    return {"brokers": addrs, "subject": args.subject}, _done(addrs, "delete acl")


@commands.admin(
    "getAcl",
    "a subject's ACL (ACL 2.0)",
    BROKER_ADDR,
    CLUSTER,
    Option("-s", "--subject", required=True, help="User:<username>"),
)
def _get_acl(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "getAcl")
    found = [acl for addr in _masters(admin, args) if (acl := admin.get_acl(addr, args.subject.strip()))]
    lines = [line for acl in found for line in _acl_lines([acl])]
    return [a.as_json() for a in found], "\n".join(lines)


@commands.admin(
    "listAcl",
    "the ACLs (ACL 2.0) whose subject contains -s, showing the entries whose resource contains -r",
    BROKER_ADDR,
    CLUSTER,
    Option("-s", "--subject", dest="subject_filter"),
    Option("-r", "--resource", dest="resource_filter"),
)
def _list_acl(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "listAcl")
    data: list[dict[str, object]] = []
    lines: list[str] = []
    for addr in _masters(admin, args):
        acls = admin.list_acl(addr, args.subject_filter, args.resource_filter)
        if acls:
            lines.extend(_acl_lines(acls))
            data.extend(a.as_json() for a in acls)
    return data, "\n".join(lines)


# -- migration from ACL 1.0 -------------------------------------------------------------------------


@commands.admin(
    "migrateAuthFromV1",
    "make the accounts of an ACL 1.0 file (plain_acl.yml) ACL 2.0 users and ACLs, as a broker with "
    "migrateAuthFromV1Enabled=true does at start-up; users that exist are left alone (finchmq's "
    "own command: Java's mqadmin has none)",
    CLUSTER,
    BROKER_ADDR,
    Option("-f", "--aclFile", dest="acl_file", required=True, help="the ACL 1.0 file, plain_acl.yml"),
)
def _migrate_auth_from_v1(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _brokers(args, "migrateAuthFromV1")
    path = Path(args.acl_file).expanduser()
    if not path.is_file():
        raise ValueError(f"no ACL 1.0 file at {path}")
    accounts, problems = read_access_configs(path)
    data: dict[str, dict[str, list[str]]] = {}
    lines = [f"not migrated: {problem}" for problem in problems]
    for addr in _masters(admin, args):
        done = data[addr] = {"migrated": [], "existing": []}
        for account in accounts:
            if admin.get_user(addr, account.access_key) is not None:
                done["existing"].append(account.access_key)
                lines.append(f"user {account.access_key} exists on {addr}, left alone.")
                continue
            user, acl = v1_user_and_acl(account)
            info = UserInfo.of(user)
            admin.create_user(info.username or "", info.password or "", info.user_type, broker_addr=addr)
            if acl is not None:
                admin.put_acl(AclInfo.of(acl), broker_addr=addr)
            done["migrated"].append(account.access_key)
            lines.append(f"migrate user {account.access_key} to {addr} success.")
    return {"brokers": data, "problems": problems}, "\n".join(lines)
