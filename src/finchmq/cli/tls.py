"""The command line's TLS options for clients (``finchmq admin``, ``finchmq console``): mqadmin's
``-Dtls.enable=true`` and ``-Dtls.config.file=FILE``."""

from __future__ import annotations

import argparse
from pathlib import Path

from finchmq.remoting.tls import TLS_CONFIG_FILE, TLS_ENABLE, TlsConfig

__all__ = ["add_tls_options", "tls_client_options"]


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """``--tls`` and ``--tls-config FILE``."""
    parser.add_argument(
        "--tls",
        action="store_true",
        help="connect with TLS (mqadmin's -Dtls.enable=true); the servers must serve TLS "
        "(tls.server.mode permissive or enforcing)",
    )
    parser.add_argument(
        "--tls-config",
        type=Path,
        metavar="FILE",
        help="tls.config.file: a properties file with the tls.client.* settings (certPath, keyPath, "
        "trustCertPath, authServer, tls.test.mode.enable; default /etc/rocketmq/tls.properties if present)",
    )


def tls_client_options(args: argparse.Namespace) -> dict[str, object]:
    """ClientConfig's ``use_tls``/``tls`` from ``--tls``/``--tls-config``.

    Raises:
        TlsConfigError (a ValueError): a bad or missing config file.
    """
    props = {TLS_ENABLE: "true" if args.tls else "false"}
    if args.tls_config is not None:
        props[TLS_CONFIG_FILE] = str(args.tls_config)
    tls = TlsConfig.from_properties(props)
    return {"use_tls": bool(tls.enable), "tls": tls}
