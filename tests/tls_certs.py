"""Certificates for TLS tests, made with the ``openssl`` command in a test's directory: a CA, a
server certificate and a client certificate it signs (EC P-256, PKCS#8 keys as Java's Netty
wants), and a second CA that signed neither (a client the server must not trust)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["TlsFiles", "client_properties", "make_tls_files", "server_properties", "tls_files"]


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # signed by another CA
    stranger_key: Path


def client_properties(files: TlsFiles) -> dict[str, str]:
    """tls.client.* for a client the server trusts, that verifies the server (Java's names)."""
    return {
        "tls.test.mode.enable": "false",
        "tls.client.certPath": str(files.client_cert),
        "tls.client.keyPath": str(files.client_key),
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(files.ca_cert),
    }


def server_properties(files: TlsFiles) -> dict[str, str]:
    """An enforcing mutual-TLS server (and its own client to the name server)."""
    return {
        "tls.server.mode": "enforcing",
        "tls.server.certPath": str(files.server_cert),
        "tls.server.keyPath": str(files.server_key),
        "tls.server.need.client.auth": "require",
        "tls.server.authClient": "true",
        "tls.server.trustCertPath": str(files.ca_cert),
        **client_properties(files),  # the broker's own client to the name server
    }


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _key(key)
    _openssl(
        "req", "-x509", "-new", "-key", str(key), "-days", "2", "-subj", f"/CN={name}", "-out", str(cert)
    )
    return cert, key


def _signed(directory: Path, name: str, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-subj", f"/CN={name}", "-out", str(csr))
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-days", "2", "-out", str(cert),
    )  # fmt: skip
    return cert, key


def make_tls_files(directory: Path) -> TlsFiles:
    """A CA, server and client certificates under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "test-ca")
    server = _signed(directory, "localhost", ca)
    client = _signed(directory, "client", ca)
    stranger = _signed(directory, "stranger", _ca(directory, "other-ca"))
    return TlsFiles(ca[0], server[0], server[1], client[0], client[1], stranger[0], stranger[1])


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command makes the test certificates")
    return make_tls_files(tmp_path_factory.mktemp("tls"))
