"""The 5.x SDK driver itself, without a finchmq server: every sub-command parses its flags, and a
client pointed at a closed port reports an error record and ends (never hangs), so a server that
is not there fails a test with the SDK's own words instead of its timeout.

The end-to-end tests against finchmq's gRPC server (fixtures ``grpc_server``, ``sdk`` in
``conftest.py``) live in the other modules of this directory.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import DESCRIPTORS, DRIVER, SdkProcess, v5_python

SUBCOMMANDS = ["produce", "simple", "push", "recall", "route"]


@pytest.fixture
def closed_port() -> str:
    """``127.0.0.1:PORT`` where nothing listens: a port bound and released, never listened on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_documents_its_flags(command: str) -> None:
    result = subprocess.run(
        [str(v5_python()), str(DRIVER), command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "--endpoints" in result.stdout
    assert "--ak" in result.stdout
    assert "--tls" in result.stdout


def test_a_producer_without_a_server_reports_the_failure(
    sdk: Callable[..., SdkProcess], closed_port: str
) -> None:
    records = sdk("produce", "--endpoints", closed_port, "--topic", "NoServer", "--count", "2").finish(
        timeout=60
    )
    errors = [r for r in records if "error" in r]
    assert [e["i"] for e in errors] == [0, 1], records
    # the route could not be fetched: the driver asked again and reports gRPC's own status
    assert {e["grpc_status"] for e in errors} == {"UNAVAILABLE"}, errors
    assert records[-1] == {"done": 0, "errors": 2}


def test_route_and_simple_consumer_without_a_server_report_the_failure(
    sdk: Callable[..., SdkProcess], closed_port: str
) -> None:
    route = sdk("route", "--endpoints", closed_port, "--topic", "NoServer").finish(timeout=60)
    assert route[-2]["grpc_status"] == "UNAVAILABLE" and route[-1] == {"done": 0}, route
    simple = sdk(
        "simple", "--endpoints", closed_port, "--topic", "NoServer", "--group", "G", "--expect", "1"
    ).finish(timeout=60)
    assert simple[-2]["during"] == "route" and simple[-2]["grpc_status"] == "UNAVAILABLE", simple
    assert simple[-1] == {"done": 0}


def test_the_sdk_descriptor_dump_covers_the_messaging_service(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(v5_python()), str(DESCRIPTORS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    dump = json.loads(result.stdout)
    methods = {m["name"] for m in dump["services"]["apache.rocketmq.v2.MessagingService"]["methods"]}
    assert {"QueryRoute", "SendMessage", "ReceiveMessage", "Telemetry", "RecallMessage"} <= methods
    assert "apache.rocketmq.v2.Message" in dump["messages"]
    assert dump["enums"]["apache.rocketmq.v2.Code"]["values"]["TOPIC_NOT_FOUND"] == 40402
