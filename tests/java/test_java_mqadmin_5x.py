"""Java 4.9.8's mqadmin sees RocketMQ 5.x clients (the official Python SDK over gRPC) among a
group's connections, as it sees remoting clients: one store, one client table, two protocols."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from finchmq.testing.process import ServerProcess
from tests.client.conftest import create_topic
from tests.grpc5.conftest import push, sdk  # noqa: F401 (the sdk fixture)
from tests.waiting import wait_until


def mqadmin(java_home: Path, *args: str) -> str:
    done = subprocess.run(
        [str(java_home / "run.sh"), "mqadmin", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_java_mqadmin_lists_a_5x_consumer_and_producer(java_home: Path, sdk: Any, tmp_path: Path) -> None:  # noqa: F811
    with ServerProcess(data_dir=tmp_path / "server", grpc=True, metrics=False) as server:
        topic, group = "T_java_sees_5x", "G_java_sees_5x"
        asyncio.run(create_topic(server.namesrv_addr, topic))
        endpoints = f"127.0.0.1:{server.grpc_port}"
        consumer = push(sdk, endpoints, topic, group)
        consumer.wait_for(lambda records: any("started" in r for r in records))
        producer = sdk("produce", "--endpoints", endpoints, "--topic", topic, "--count", "1", "--stoppable")
        producer.wait_for(lambda records: any("sending_done" in r for r in records))
        try:

            def listed() -> str | None:
                out = mqadmin(java_home, "consumerConnection", "-g", group, "-n", server.namesrv_addr)
                return out if "PYTHON" in out else None

            out = wait_until(listed, timeout=60, what="Java's mqadmin listing the 5.x push consumer")
            rows = [line.split() for line in out.splitlines() if "PYTHON" in line]
            assert len(rows) == 1, out
            assert "CONSUME_PASSIVELY" in out and topic in out, out
            out = mqadmin(
                java_home, "producerConnection", "-g", topic, "-t", topic, "-n", server.namesrv_addr
            )
            assert any("PYTHON" in line for line in out.splitlines()), out
        finally:
            producer.stop()
            consumer.stop()
