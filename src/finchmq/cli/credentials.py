"""Where the command line finds ACL keys of its own: ``--access-key``/``--secret-key`` (``finchmq
admin``, ``finchmq console`` and the console of ``finchmq server``), else ``$ROCKETMQ_ACCESS_KEY`` /
``$ROCKETMQ_SECRET_KEY``, else mqadmin's ``$ROCKETMQ_HOME/conf/tools.yml`` (also read by a
cluster-mode proxy, as Java's ``AclUtils.getAclRPCHook``); and the
``{"accessKey":..,"secretKey":..}`` JSON of ``innerClientAuthenticationCredentials``."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from finchmq.client import SessionCredentials

__all__ = [
    "add_credential_options",
    "inner_client_credentials",
    "session_credentials",
    "tools_yml_credentials",
]


def add_credential_options(parser: argparse.ArgumentParser, prefix: str = "", what: str = "requests") -> None:
    """``--access-key`` and ``--secret-key`` (``--console-access-key`` ... with ``prefix="console-"``)."""
    parser.add_argument(
        f"--{prefix}access-key",
        default=os.environ.get("ROCKETMQ_ACCESS_KEY"),
        help=f"ACL accessKey to sign {what} with (default $ROCKETMQ_ACCESS_KEY, else accessKey of "
        "$ROCKETMQ_HOME/conf/tools.yml as mqadmin reads it)",
    )
    parser.add_argument(
        f"--{prefix}secret-key",
        default=os.environ.get("ROCKETMQ_SECRET_KEY"),
        help="ACL secretKey (default $ROCKETMQ_SECRET_KEY, else secretKey of $ROCKETMQ_HOME/conf/tools.yml)",
    )


def session_credentials(args: argparse.Namespace, prefix: str = "") -> SessionCredentials | None:
    """The account of ``add_credential_options``'s options, else mqadmin's
    ``$ROCKETMQ_HOME/conf/tools.yml`` (accessKey, secretKey); None: requests go unsigned.

    Raises:
        ValueError: only one of the two keys given, or an unreadable tools.yml.
    """
    dest = prefix.replace("-", "_")
    access_key, secret_key = getattr(args, f"{dest}access_key"), getattr(args, f"{dest}secret_key")
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise ValueError(
                f"--{prefix}access-key and --{prefix}secret-key go together (the broker's ACL account)"
            )
        return SessionCredentials(access_key, secret_key)
    return tools_yml_credentials()


def tools_yml_credentials(environ: Mapping[str, str] | None = None) -> SessionCredentials | None:
    """``accessKey``/``secretKey`` of ``$ROCKETMQ_HOME/conf/tools.yml``; ``None`` without
    ROCKETMQ_HOME, the file or both keys. Raises ValueError for a file that does not read."""
    home = (os.environ if environ is None else environ).get("ROCKETMQ_HOME")
    if not home:
        return None
    tools = Path(home) / "conf" / "tools.yml"
    try:
        data = yaml.safe_load(tools.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read {tools}: {exc}") from None
    if not isinstance(data, dict):
        return None
    access_key, secret_key = (str(data.get(k) or "").strip() for k in ("accessKey", "secretKey"))
    return SessionCredentials(access_key, secret_key) if access_key and secret_key else None


def inner_client_credentials(text: str) -> SessionCredentials | None:
    """The keys of an ``innerClientAuthenticationCredentials`` value, ``None`` when either is
    blank (Java then signs nothing). Raises ValueError for a value that is not a JSON object."""
    try:
        tree = json.loads(text)
    except json.JSONDecodeError:
        tree = None
    if not isinstance(tree, dict):
        raise ValueError(
            'innerClientAuthenticationCredentials must be {"accessKey":"...","secretKey":"..."}, '
            f"got {text[:40]!r}"
        )
    access_key, secret_key = (str(tree.get(k) or "").strip() for k in ("accessKey", "secretKey"))
    return SessionCredentials(access_key, secret_key) if access_key and secret_key else None
