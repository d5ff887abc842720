"""Record the frames the official C++ client (librocketmq 1.2.4) sends, as golden test data.

Run by hand (not collected by pytest): ``.venv/bin/python tests/protocol/record_cpp_frames.py``.
It starts a finchmq name server and broker in this process, tees every byte they receive, drives
the C++ client (``.venv-cpp``) through produce, batch, push (concurrent and orderly, with a retry)
and pull, then splits the captured streams into frames and writes the first request of each code
to ``tests/protocol/data/cpp/<CODE_NAME>.bin``. ``test_cpp_frames.py`` decodes them.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from finchmq.protocol import NEED_DATA, RemotingCodec, RemotingCommand, RequestCode
from finchmq.remoting import RemotingConnection
from finchmq.testing import EmbeddedServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = HERE / "data" / "cpp"
DRIVER = ROOT / "tests" / "integration" / "cpp_driver.py"
CPP_PYTHON = ROOT / ".venv-cpp" / "bin" / "python"

captured: dict[int, bytearray] = {}


def install_tee() -> None:
    original = RemotingConnection.data_received

    def tee(self: RemotingConnection, data: bytes) -> None:
        captured.setdefault(id(self), bytearray()).extend(data)
        original(self, data)

    RemotingConnection.data_received = tee  # type: ignore[method-assign]


def drive(namesrv: str) -> None:
    def run(*args: str) -> None:
        subprocess.run([str(CPP_PYTHON), str(DRIVER), *args, "--namesrv", namesrv], check=True, timeout=120)

    run(
        "produce",
        "--topic",
        "GoldenT",
        "--count",
        "3",
        "--tags",
        "TagA",
        "--keys-prefix",
        "k",
        "--prop",
        "p=v",
    )
    run("produce", "--topic", "GoldenT", "--count", "4", "--mode", "batch", "--batch-size", "4")
    run(
        "push",
        "--topic",
        "GoldenT",
        "--group",
        "GoldenCG",
        "--expect",
        "7",
        "--fail-times",
        "1",
        "--timeout",
        "30",
    )
    run(
        "push",
        "--topic",
        "GoldenT",
        "--group",
        "GoldenOrderly",
        "--orderly",
        "--expect",
        "7",
        "--timeout",
        "30",
    )
    run("pull", "--topic", "GoldenT", "--group", "GoldenPull", "--expect", "7", "--timeout", "20")


def main() -> int:
    install_tee()
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedServer(Path(tmp), {"messageDelayLevel": "1s 1s 1s 1s"}) as server,
    ):
        drive(server.namesrv_addr)
    written: dict[str, bytes] = {}
    for stream in captured.values():
        codec = RemotingCodec()
        codec.receive_data(bytes(stream))
        pos = 0
        while True:
            before = codec.buffered
            cmd = codec.next_command()
            if cmd is NEED_DATA or not isinstance(cmd, RemotingCommand):
                break
            size = before - codec.buffered
            frame = bytes(stream[pos : pos + size])
            pos += size
            if cmd.is_response or cmd.language.name != "CPP":
                continue
            try:
                name = RequestCode(cmd.code).name
            except ValueError:
                continue
            if name == "SEND_MESSAGE" and cmd.ext_fields.get("batch") in ("1", "true"):
                name = "SEND_MESSAGE_BATCH"
            if name == "HEART_BEAT" and b"consumerDataSet" in cmd.body:
                name = "HEART_BEAT_CONSUMER"
            written.setdefault(name, frame)
    for name, frame in sorted(written.items()):
        (OUT / f"{name}.bin").write_bytes(frame)
        print(f"{name:<32} {len(frame):>6} bytes")
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    sys.exit(main())
