"""SIGKILL of ``finchmq server`` under the official 5.x SDK's producer and SimpleConsumer (gRPC,
local mode, SYNC_FLUSH): every message the producer saw acknowledged is received after the restart,
and the consumer goes on receiving what is sent after it, with no client restarted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from finchmq.testing.process import ServerProcess
from tests.client.conftest import create_topic
from tests.waiting import wait_until

from .conftest import SdkProcess, simple

TOPIC = "T_grpc_crash"
GROUP = "G_grpc_crash"


def received_ids(consumer: SdkProcess) -> set[str]:
    return {r["message_id"] for r in consumer.of("received")}


def test_sigkill_loses_nothing_acknowledged_and_both_clients_go_on(sdk: Any, tmp_path: Path) -> None:
    server = ServerProcess(
        conf={"flushDiskType": "SYNC_FLUSH"}, data_dir=tmp_path / "data", grpc=True, metrics=False
    ).start()
    try:
        asyncio.run(create_topic(server.namesrv_addr, TOPIC))
        endpoints = f"127.0.0.1:{server.grpc_port}"
        consumer = simple(
            sdk,
            endpoints,
            TOPIC,
            GROUP,
            max_seconds=600,
            retry_errors=True,
            stoppable=True,
            invisible=10,
            **{"await": 2},
        )
        producer: SdkProcess = sdk(
            "produce", "--endpoints", endpoints, "--topic", TOPIC, "--count", "0", "--stoppable",
            "--pace-ms", "10",
        )  # fmt: skip
        wait_until(lambda: len(producer.of("sent")) >= 100, what="100 sends acknowledged before the kill")
        server.kill()
        acked_before = len(producer.of("sent"))
        server.start()  # same data directory and ports
        wait_until(
            lambda: len(producer.of("sent")) >= acked_before + 100,
            timeout=120,
            what="the producer sending again after the restart",
        )
        producer.stop()
        acked = set(producer.of("message_id"))  # the "sent" records carry each acknowledged id
        wait_until(
            lambda: acked <= received_ids(consumer),
            timeout=180,
            what="every acknowledged message received",
        )
        consumer.stop()
    finally:
        server.stop()
