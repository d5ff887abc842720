"""mqadmin's ACL commands (``tools/command/acl``): accounts and global white addresses in the
brokers' plain_acl.yml, and the versions of those files. The brokers accept them from admins only.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from finchmq.client import BlockingAdminClient

from .command import BROKER_ADDR, CLUSTER, CommandFamily, Option, Result, parse_bool

__all__ = ["commands"]

commands = CommandFamily()


def _acl_brokers(args: argparse.Namespace, command: str) -> None:
    if not args.cluster and not args.broker:
        raise ValueError(f"give -c CLUSTER or -b BROKER_ADDR (mqadmin {command})")


def _perm_list(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


@commands.admin(
    "updateAclConfig",
    "create or update an ACL account in the brokers' plain_acl.yml (admin only)",
    Option("-a", "--accessKey", dest="access_key_arg", required=True),
    Option("-s", "--secretKey", dest="secret_key_arg", help="required for a new account"),
    Option("-w", "--whiteRemoteAddress", dest="white_remote_address"),
    Option("-i", "--defaultTopicPerm", dest="default_topic_perm", help="PUB, SUB, PUB|SUB or DENY"),
    Option("-u", "--defaultGroupPerm", dest="default_group_perm", help="PUB, SUB, PUB|SUB or DENY"),
    Option("-t", "--topicPerms", dest="topic_perms", help="topicA=DENY,topicD=SUB"),
    Option("-g", "--groupPerms", dest="group_perms", help="groupD=DENY,groupE=SUB"),
    Option("-m", "--admin", type=parse_bool, default=False),
    CLUSTER,
    BROKER_ADDR,
)
def _update_acl_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "updateAclConfig")
    addrs = admin.create_and_update_plain_access_config(
        args.access_key_arg,
        args.secret_key_arg,
        white_remote_address=args.white_remote_address,
        admin=args.admin,
        default_topic_perm=args.default_topic_perm,
        default_group_perm=args.default_group_perm,
        topic_perms=_perm_list(args.topic_perms),
        group_perms=_perm_list(args.group_perms),
        cluster=args.cluster,
        broker_addr=args.broker,
    )
    text = "".join(f"create or update plain access config to {a} success.\n" for a in addrs)
    return {"brokers": addrs, "accessKey": args.access_key_arg}, text + f"accessKey: {args.access_key_arg}"


@commands.admin(
    "deleteAclConfig",
    "delete an ACL account from the brokers' plain_acl.yml (admin only)",
    Option("-a", "--accessKey", dest="access_key_arg", required=True),
    CLUSTER,
    BROKER_ADDR,
    aliases=("deleteAccessConfig",),  # mqadmin's alias, the name finchmq used first
)
def _delete_access_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "deleteAclConfig")
    addrs = admin.delete_plain_access_config(
        args.access_key_arg, cluster=args.cluster, broker_addr=args.broker
    )
    text = "".join(f"delete plain access config account from {a} success.\n" for a in addrs)
    return {
        "brokers": addrs,
        "accessKey": args.access_key_arg,
    }, text + f"account's accesskey is:{args.access_key_arg}"


@commands.admin(
    "updateGlobalWhiteAddr",
    "set the brokers' ACL globalWhiteRemoteAddresses (admin only)",
    Option(
        "-g",
        "--globalWhiteRemoteAddresses",
        dest="global_white_addrs",
        required=True,
        help="10.10.103.*,192.168.0.*",
    ),
    Option("-p", "--aclFileFullPath", dest="acl_file_full_path", help="default: the main ACL file"),
    CLUSTER,
    BROKER_ADDR,
)
def _update_global_white_addr(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "updateGlobalWhiteAddr")
    addresses = _perm_list(args.global_white_addrs)
    addrs = admin.update_global_white_addr_config(
        addresses, acl_file_full_path=args.acl_file_full_path, cluster=args.cluster, broker_addr=args.broker
    )
    text = "".join(f"update global white remote addresses to {a} success.\n" for a in addrs)
    return {"brokers": addrs, "globalWhiteRemoteAddresses": addresses}, text.rstrip("\n")


@commands.admin(
    "clusterAclConfigVersion", "the brokers' ACL files and their versions (admin only)", CLUSTER, BROKER_ADDR
)
def _cluster_acl_config_version(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    _acl_brokers(args, "clusterAclConfigVersion")
    addrs = [args.broker] if args.broker else sorted(admin.master_addrs(args.cluster).values())
    row = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}"
    lines = [row.format("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
                        "#AclConfigVersionNum", "#AclLastUpdateTime")]  # fmt: skip
    data = []
    for addr in addrs:
        info = admin.examine_broker_cluster_acl_version_info(addr)
        for path, version in info.all_acl_config_data_version.items():
            when = datetime.fromtimestamp(version.timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S")
            lines.append(row.format(info.cluster_name, info.broker_name, info.broker_addr, path,
                                    str(version.counter), when))  # fmt: skip
            data.append({"clusterName": info.cluster_name, "brokerName": info.broker_name,
                         "brokerAddr": info.broker_addr, "aclFilePath": path, "counter": version.counter,
                         "timestamp": version.timestamp})  # fmt: skip
    return data, "\n".join(lines)
