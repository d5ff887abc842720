"""The floor of a Python broker's send path, to measure finchmq's against (``send_path.py``).

    python -m benchmarks.send_floor PORT LOG_FILE

A uvloop server that does the least a broker of finchmq's design must do for a send: split the
stream into remoting frames, decode each JSON header with orjson, append the body to an mmap'd
file and answer SEND_OK with the request's opaque, queue id and a queue offset, every answer
of one read written with one ``transport.write``. No validation, no stored-record layout, no
consume queue, no index. A batch (code 320) is appended as one body and answered once.
"""

from __future__ import annotations

import asyncio
import mmap
import os
import struct
import sys
from pathlib import Path

import orjson
import uvloop

LOG_SIZE = 1 << 30
_PREFIX = struct.Struct(">ii")


class FloorLog:
    """A 1 GiB mmap'd file written round-robin, and per-queue offsets."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, LOG_SIZE)
            self.map = mmap.mmap(fd, LOG_SIZE)
        finally:
            os.close(fd)
        self.pos = 0
        self.offsets: dict[tuple[str, str], int] = {}

    def append(self, body: bytes, topic: str, queue_id: str) -> int:
        end = self.pos + len(body)
        if end > LOG_SIZE:
            self.pos, end = 0, len(body)
        self.map[self.pos : end] = body
        self.pos = end
        key = (topic, queue_id)
        offset = self.offsets.get(key, 0)
        self.offsets[key] = offset + 1
        return offset


class FloorProtocol(asyncio.Protocol):
    def __init__(self, log: FloorLog) -> None:
        self.log = log
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        answers: list[bytes] = []
        pos = 0
        while len(buf) - pos >= 8:
            length, word = _PREFIX.unpack_from(buf, pos)
            end = pos + 4 + length
            if len(buf) < end:
                break
            header_end = pos + 8 + (word & 0xFFFFFF)
            header = orjson.loads(buf[pos + 8 : header_end])
            fields = header.get("extFields") or {}
            queue_id = fields.get("e", "0")
            offset = self.log.append(bytes(buf[header_end:end]), fields.get("b", ""), queue_id)
            answer = orjson.dumps(
                {
                    "code": 0,
                    "extFields": {"msgId": "0", "queueId": queue_id, "queueOffset": str(offset)},
                    "flag": 1,
                    "language": "JAVA",
                    "opaque": header["opaque"],
                    "serializeTypeCurrentRPC": "JSON",
                    "version": 395,
                }
            )
            answers.append(_PREFIX.pack(4 + len(answer), len(answer)) + answer)
            pos = end
        del buf[:pos]
        if answers and self.transport is not None:
            self.transport.write(b"".join(answers))


async def serve(port: int, path: Path) -> None:
    log = FloorLog(path)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FloorProtocol(log), "127.0.0.1", port)
    print(f"floor server listening on 127.0.0.1:{port}", flush=True)
    await server.serve_forever()


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: {sys.argv[0]} PORT LOG_FILE (a 1 GiB sparse file)")
    uvloop.run(serve(int(sys.argv[1]), Path(sys.argv[2])))


if __name__ == "__main__":
    main()
