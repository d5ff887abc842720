"""Apache RocketMQ 4.9.8's Java client in TLS mode (``-Dtls.enable=true`` and
``-Dtls.config.file``, its own settings) against ``finchmq server``: mutual TLS on an enforcing
cluster, and Java's defaults (test mode) on a permissive one, where a plain Java client is served
on the same ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.testing.process import ServerProcess
from tests.client.conftest import TEST_BROKER
from tests.tls_certs import TlsFiles, client_properties, server_properties

from .conftest import run_java

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

COUNT = 3  # messages per send mode
MODES = ("sync", "async", "oneway", "selector", "batch")
ALL_KEYS = {f"{mode}-{i}" for mode in MODES for i in range(COUNT)}


def acknowledged(sends: list[dict[str, Any]]) -> None:
    assert {s["key"] for s in sends} == ALL_KEYS
    assert not [s for s in sends if "error" in s]
    for s in sends:
        assert s["status"] == ("ONEWAY" if s["mode"] == "oneway" else "SEND_OK"), s


@pytest.fixture(scope="module")
def enforcing_server(tls_files: TlsFiles) -> Iterator[ServerProcess]:
    """``finchmq server`` with tls.server.mode=enforcing and mutual TLS, from its broker.conf."""
    with ServerProcess(conf={**TEST_BROKER, **server_properties(tls_files)}, metrics=False) as server:
        yield server


@pytest.fixture(scope="module")
def java_tls_config(tls_files: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Java's tls.config.file: the client's certificate, key and the CA it verifies the server with."""
    path = tmp_path_factory.mktemp("java-tls") / "tls.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in client_properties(tls_files).items()))
    return path


def test_java_client_with_mutual_tls_sends_and_pulls(
    java_classes: str, enforcing_server: ServerProcess, java_tls_config: Path
) -> None:
    jvm = ("-Dtls.enable=true", f"-Dtls.config.file={java_tls_config}")
    ns = enforcing_server.namesrv_addr
    acknowledged(run_java(java_classes, "produce", ns, "JavaTls", str(COUNT), jvm_args=jvm))
    got = run_java(java_classes, "litepull", ns, "java_tls_g", "JavaTls", str(len(ALL_KEYS)), jvm_args=jvm)
    assert {m["key"] for m in got} == ALL_KEYS
    log = enforcing_server.log_path.read_text(errors="replace")
    assert "TLS handshake with" not in log  # no failed handshake


def test_java_plain_client_is_refused_by_an_enforcing_server(
    java_classes: str, enforcing_server: ServerProcess
) -> None:
    with pytest.raises(AssertionError):  # Interop exits non-zero: no route, every connection closed
        run_java(java_classes, "produce", enforcing_server.namesrv_addr, "JavaPlain", "1", timeout=120)
    log = enforcing_server.log_path.read_text(errors="replace")
    assert "tls.server.mode=enforcing" in log


def test_java_test_mode_client_and_plain_client_share_a_permissive_port(java_classes: str) -> None:
    with ServerProcess(conf={**TEST_BROKER, "tls.server.mode": "permissive"}, metrics=False) as server:
        ns = server.namesrv_addr
        # Java's defaults: tls.test.mode.enable=true, the server's self-signed certificate trusted
        acknowledged(
            run_java(java_classes, "produce", ns, "JavaMixed", str(COUNT), jvm_args=("-Dtls.enable=true",))
        )
        acknowledged(run_java(java_classes, "produce", ns, "JavaMixed", str(COUNT)))
