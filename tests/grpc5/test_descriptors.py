"""finchmq's own ``.proto`` (src/finchmq/grpc/_pb) against the official 5.x SDK's generated code:
every message, field (name, number, type, label, oneof, optional), enum value and RPC of
``apache.rocketmq.v2`` that the SDK knows must be ours too, byte for byte on the wire."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from finchmq.grpc._pb import definition_pb2, service_pb2

from .conftest import DESCRIPTORS, v5_python
from .sdk_descriptors import dump


def _without_files(table: dict[str, Any], skip_file: str = "admin.proto") -> dict[str, Any]:
    return {
        name: {k: v for k, v in entry.items() if k != "file"}
        for name, entry in table.items()
        if entry["file"] != skip_file
    }


def test_our_contract_is_the_sdks() -> None:
    out = subprocess.run(
        [str(v5_python()), str(DESCRIPTORS)], capture_output=True, text=True, timeout=120, check=True
    )
    sdk = json.loads(out.stdout)
    ours = dump((definition_pb2, service_pb2))
    for kind in ("messages", "enums", "services"):
        theirs, mine = _without_files(sdk[kind]), _without_files(ours[kind])
        assert sorted(theirs) == sorted(mine), kind
        for name, entry in theirs.items():
            assert mine[name] == entry, name
    assert len(ours["services"]["apache.rocketmq.v2.MessagingService"]["methods"]) == 17
