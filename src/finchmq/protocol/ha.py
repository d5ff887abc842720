"""The master/slave replication stream of RocketMQ 4.x (``HAService``/``HAConnection``), sans-IO.

It is not a remoting protocol: the slave connects to the master's ``haListenPort`` and the two
sides write raw big-endian frames.

* slave -> master: an 8-byte offset report, the slave's commit-log max offset. The first report
  says where to start; later ones acknowledge what the slave has appended. Java reads only the
  last complete report in what it has received, so :class:`OffsetReportReader` does too.
* master -> slave: a 12-byte header (8-byte commit-log offset of the data, 4-byte size), then
  ``size`` bytes of commit log. A size of 0 is a heartbeat. Data never crosses a segment.
"""

from __future__ import annotations

import struct

__all__ = [
    "HA_HEADER_SIZE",
    "HA_REPORT_SIZE",
    "HAProtocolError",
    "OffsetReportReader",
    "TransferReader",
    "encode_offset_report",
    "encode_transfer_header",
]

HA_REPORT_SIZE = 8
HA_HEADER_SIZE = 12
_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")


class HAProtocolError(ValueError):
    """A replication frame that cannot be right (negative offset or size, oversized body)."""


def encode_offset_report(offset: int) -> bytes:
    """The slave's report of its commit-log max offset."""
    if offset < 0:
        raise HAProtocolError(f"offset report must be >= 0, got {offset}")
    return _REPORT.pack(offset)


def encode_transfer_header(offset: int, size: int) -> bytes:
    """The master's header before ``size`` bytes of commit log starting at ``offset``."""
    if offset < 0 or not 0 <= size <= 0x7FFFFFFF:
        raise HAProtocolError(f"bad transfer header: offset {offset}, size {size}")
    return _HEADER.pack(offset, size)


class OffsetReportReader:
    """Master side: feed received bytes, get the latest complete offset report (or None)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """The last complete report in what has arrived so far; partial bytes are kept."""
        buf = self._pending + data
        whole = len(buf) - len(buf) % HA_REPORT_SIZE
        self._pending = buf[whole:]
        if whole == 0:
            return None
        (offset,) = _REPORT.unpack_from(buf, whole - HA_REPORT_SIZE)
        if offset < 0:
            raise HAProtocolError(f"slave reported a negative offset {offset}")
        return int(offset)


class TransferReader:
    """Slave side: feed received bytes, get ``(offset, data)`` transfers (data empty for a heartbeat).

    ``max_body`` bounds one transfer's size: a header announcing more is a protocol error, so a
    corrupt stream cannot make the slave buffer without limit.
    """

    __slots__ = ("_buf", "_max_body")

    def __init__(self, max_body: int) -> None:
        self._buf = bytearray()
        self._max_body = max_body

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        out: list[tuple[int, bytes]] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= HA_HEADER_SIZE:
            offset, size = _HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self._max_body:
                raise HAProtocolError(f"bad transfer header: offset {offset}, size {size}")
            end = pos + HA_HEADER_SIZE + size
            if len(buf) < end:
                break
            out.append((offset, bytes(buf[pos + HA_HEADER_SIZE : end])))
            pos = end
        if pos:
            del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete transfer."""
        return len(self._buf)
