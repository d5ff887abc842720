"""Master/slave replication of the commit log (Java 4.9.8 ``HAService``, ``HAConnection``, ``HAClient``).

Every broker listens on its HA port (``listenPort + 1``). A slave connects to its master's HA
port (``haMasterAddress``, or the address the name servers return when it registers), reports
its commit-log max offset, and the master streams the log from there in transfers of at most
``haTransferBatchSize`` bytes; the slave appends them, builds its own consume queues and index,
and acknowledges with its new max offset. Acknowledgements feed the store's
``ReplicationState``, which a SYNC_MASTER send waits on. The frames are in ``protocol/ha.py``.

Differences from Java, on purpose: the slave reports its offset as soon as it connects (Java waits
one ``haSendHeartbeatInterval``), and the master's sender wakes on each append as well as
polling every 100 ms, so ASYNC_MASTER replication lags by a round trip, not up to 100 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.ha import (
    HAProtocolError,
    OffsetReportReader,
    TransferReader,
    encode_offset_report,
    encode_transfer_header,
)
from finchmq.store import DefaultMessageStore
from finchmq.store.config import BrokerRole

__all__ = ["HAService"]

log = logging.getLogger(__name__)

_RECONNECT_INTERVAL = 5.0  # s, Java HAClient: waitForRunning(1000 * 5) after a failed connect
_READ_SIZE = 1024 * 1024
_IDLE_WAIT = 0.1  # s, Java WriteSocketService: allWaitForRunning(100)


class _SlaveConnection:
    """The master's side of one slave (Java ``HAConnection``)."""

    def __init__(
        self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.requested = asyncio.Event()
        self.new_data = asyncio.Event()

    async def run(self) -> None:
        store = self.service.store
        store.replication.slave_connected()
        log.info("HA: slave %s connected", self.addr)
        tasks = self.service.tasks
        reading = tasks.spawn(self._read_reports(), f"read-{self.addr}")
        writing = tasks.spawn(self._transfer(), f"write-{self.addr}")
        try:
            done, _ = await asyncio.wait((reading, writing), return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.warning("HA: slave %s dropped: %s", self.addr, task.exception())
        finally:
            for task in (reading, writing):
                task.cancel()
            await asyncio.gather(reading, writing, return_exceptions=True)
            store.replication.slave_disconnected()
            self.writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.wait_closed()
            log.info("HA: slave %s disconnected (acknowledged %d)", self.addr, self.slave_ack_offset)

    async def _read_reports(self) -> None:
        store = self.service.store
        reports = OffsetReportReader()
        housekeeping = store.config.ha_housekeeping_interval / 1000
        while True:
            try:
                data = await asyncio.wait_for(self.reader.read(_READ_SIZE), housekeeping)
            except TimeoutError:
                raise ConnectionError(
                    f"no offset report for {housekeeping:.0f} s (haHousekeepingInterval)"
                ) from None
            if not data:
                return
            offset = reports.feed(data)
            if offset is None:
                continue
            self.slave_ack_offset = offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("HA: slave %s requests the log from offset %d", self.addr, offset)
                self.requested.set()
            elif offset > store.get_max_phy_offset():
                end = store.get_max_phy_offset()
                raise HAProtocolError(
                    f"slave acknowledged offset {offset}, beyond this master's log end {end}"
                )
            store.replication.notify_transfer_some(offset)

    async def _transfer(self) -> None:
        store = self.service.store
        cfg = store.config
        await self.requested.wait()
        if self.slave_request_offset == 0:
            end = store.get_max_phy_offset()
            next_offset = max(end - end % cfg.mapped_file_size_commit_log, 0)
        else:
            next_offset = self.slave_request_offset
        log.info("HA: transferring to slave %s from offset %d", self.addr, next_offset)
        heartbeat = cfg.ha_send_heartbeat_interval / 1000
        last_write = 0.0
        writer = self.writer
        while True:
            self.new_data.clear()
            data = store.get_commit_log_data(next_offset, cfg.ha_transfer_batch_size)
            if data:
                writer.write(encode_transfer_header(next_offset, len(data)))
                writer.write(data)
                next_offset += len(data)
                await writer.drain()
                last_write = time.monotonic()
                continue
            if time.monotonic() - last_write >= heartbeat:
                writer.write(encode_transfer_header(next_offset, 0))
                await writer.drain()
                last_write = time.monotonic()
            with contextlib.suppress(TimeoutError):  # appends wake it; 100 ms as Java for the rest
                await asyncio.wait_for(self.new_data.wait(), _IDLE_WAIT)  # (transient-pool commits)


class HAService:
    """The HA port and, on a slave, the client of its master's HA port."""

    def __init__(self, store: DefaultMessageStore, *, bind_address: str, port: int) -> None:
        self.store = store
        self.bind_address = bind_address
        self.port = port
        self._server: asyncio.Server | None = None
        self._connections: set[_SlaveConnection] = set()
        self.tasks = BackgroundTasks("ha")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup_pending = False
        self.master_address: str | None = store.config.ha_master_address or None
        self.connected_to_master = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            self._server = await asyncio.start_server(
                self._accept, self.bind_address, self.port, reuse_address=True
            )
        except OSError as exc:
            if self.store.config.broker_role is BrokerRole.SYNC_MASTER:
                raise  # it cannot keep its promise without slaves
            log.warning("HA port %d unavailable, no slave can replicate from this broker: %s", self.port, exc)
        else:
            self.port = self._server.sockets[0].getsockname()[1]
        self.store.replication.on_data = self._data_arrived
        if self.store.config.broker_role is BrokerRole.SLAVE:
            self.tasks.spawn(self._run_client(), "client")

    async def close(self) -> None:
        self.store.replication.on_data = None
        if self._server is not None:
            self._server.close()
        await self.tasks.close()  # the connections' tasks end, and with them their handlers
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def update_master_address(self, addr: str | None) -> None:
        """A slave learns (or changes) its master's HA address (Java ``updateHaMasterAddress``)."""
        if addr and addr != self.master_address:
            log.info("HA: master address is now %s", addr)
            self.master_address = addr

    # ------------------------------------------------------------------ master side

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _SlaveConnection(self, reader, writer)
        if self.tasks.closed:
            writer.close()
            return
        self._connections.add(conn)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)

    def _data_arrived(self) -> None:
        """Called by the store after an append, on whatever thread appended."""
        loop = self._loop
        if loop is None or not self._connections or self._wakeup_pending:
            return
        self._wakeup_pending = True
        loop.call_soon_threadsafe(self._wake_senders)

    def _wake_senders(self) -> None:
        self._wakeup_pending = False
        for conn in self._connections:
            conn.new_data.set()

    def slave_ack_offsets(self) -> dict[str, int]:
        """Each connected slave's acknowledged offset, by its address (for status pages)."""
        return {c.addr: c.slave_ack_offset for c in self._connections}

    # ------------------------------------------------------------------ slave side

    async def _run_client(self) -> None:
        while True:
            addr = self.master_address
            if not addr:
                await asyncio.sleep(1.0)
                continue
            try:
                await self._replicate_from(addr)
            except (OSError, ConnectionError, HAProtocolError, TimeoutError) as exc:
                log.warning("HA: replication from master %s stopped: %s", addr, exc)
            finally:
                self.connected_to_master = False
            await asyncio.sleep(_RECONNECT_INTERVAL)

    async def _replicate_from(self, addr: str) -> None:
        store = self.store
        cfg = store.config
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 3.0)
        self.connected_to_master = True
        log.info("HA: connected to master %s, reporting offset %d", addr, store.get_max_phy_offset())
        transfers = TransferReader(max_body=max(cfg.ha_transfer_batch_size, cfg.mapped_file_size_commit_log))
        heartbeat = cfg.ha_send_heartbeat_interval / 1000
        housekeeping = cfg.ha_housekeeping_interval / 1000
        try:
            reported = store.get_max_phy_offset()
            writer.write(encode_offset_report(reported))
            await writer.drain()
            last_report = last_read = time.monotonic()
            while True:
                wait = max(0.0, min(heartbeat - (time.monotonic() - last_report), heartbeat))
                try:
                    data = await asyncio.wait_for(reader.read(_READ_SIZE), wait)
                except TimeoutError:
                    data = None
                now = time.monotonic()
                if data == b"":
                    raise ConnectionError("the master closed the connection")
                if data:
                    last_read = now
                    batch = transfers.feed(data)
                    if batch:
                        await asyncio.to_thread(self._append, batch)
                elif now - last_read > housekeeping:
                    raise ConnectionError(f"nothing from the master for {housekeeping:.0f} s")
                current = store.get_max_phy_offset()
                if current > reported or now - last_report >= heartbeat:
                    reported = max(current, reported)
                    writer.write(encode_offset_report(reported))
                    await writer.drain()
                    last_report = now
        finally:
            writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()

    def _append(self, batch: list[tuple[int, bytes]]) -> None:
        store = self.store
        for offset, data in batch:
            if not data:
                continue  # a heartbeat
            here = store.get_max_phy_offset()
            if here not in (0, offset):
                raise HAProtocolError(f"master sent offset {offset} but this slave's log ends at {here}")
            if not store.append_to_commit_log(offset, data):
                raise HAProtocolError(f"could not append {len(data)} replicated bytes at offset {offset}")
