"""mqadmin's name-server commands (``tools/command/namesrv``): the name servers' settings and KV
config, and a broker's write permission on every name server.
"""

from __future__ import annotations

import argparse

from finchmq.client import BlockingAdminClient

from .command import CommandFamily, Option, Result
from .javafmt import config_tables

__all__ = ["commands"]

commands = CommandFamily()


@commands.admin("getNamesrvConfig", "every name server's settings (mqadmin getNamesrvConfig)")
def _get_namesrv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    data = admin.namesrv_config()
    return data, config_tables(data)


@commands.admin(
    "updateNamesrvConfig",
    "change a name server setting (mqadmin updateNamesrvConfig)",
    Option("-k", "--key", required=True),
    Option("-v", "--value", required=True),
)
def _update_namesrv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.update_namesrv_config({args.key: args.value})
    servers = admin.namesrv_config()
    return {"key": args.key, "value": args.value, "nameServers": list(servers)}, (
        f"update name server config success![{', '.join(servers)}]\n{args.key} : {args.value}"
    )


@commands.admin(
    "updateKvConfig",
    "set a KV config item on every name server (mqadmin updateKvConfig)",
    Option("-s", "--namespace", required=True),
    Option("-k", "--key", required=True),
    Option("-v", "--value", required=True),
)
def _update_kv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.update_kv_config(args.namespace, args.key, args.value)
    return {"namespace": args.namespace, "key": args.key, "value": args.value}, (
        "create or update kv config to namespace success."
    )


@commands.admin(
    "deleteKvConfig",
    "delete a KV config item (mqadmin deleteKvConfig)",
    Option("-s", "--namespace", required=True),
    Option("-k", "--key", required=True),
)
def _delete_kv_config(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.delete_kv_config(args.namespace, args.key)
    return {
        "namespace": args.namespace,
        "key": args.key,
        "deleted": True,
    }, "delete kv config from namespace success."


def _change_write_perm(admin: BlockingAdminClient, args: argparse.Namespace, writable: bool) -> Result:
    counts = admin.change_write_perm(args.broker_name, writable=writable)
    verb = "add" if writable else "wipe"
    text = "\n".join(
        f"{verb} write perm of broker[{args.broker_name}] in name server[{ns}] OK, {n}"
        for ns, n in counts.items()
    )
    return counts, text


@commands.admin(
    "wipeWritePerm",
    "stop new sends to a broker on every name server (mqadmin wipeWritePerm)",
    Option("-b", "--brokerName", dest="broker_name", required=True),
)
def _wipe_write_perm(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _change_write_perm(admin, args, writable=False)


@commands.admin(
    "addWritePerm",
    "give a broker its write permission back (mqadmin addWritePerm)",
    Option("-b", "--brokerName", dest="broker_name", required=True),
)
def _add_write_perm(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    return _change_write_perm(admin, args, writable=True)
