"""Where the command line finds ACL keys of its own: mqadmin's ``$ROCKETMQ_HOME/conf/tools.yml``
(read by ``finchmq admin`` and by a cluster-mode proxy, as Java's ``AclUtils.getAclRPCHook``) and
the ``{"accessKey":..,"secretKey":..}`` JSON of ``innerClientAuthenticationCredentials``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from finchmq.client import SessionCredentials

__all__ = ["inner_client_credentials", "tools_yml_credentials"]


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
