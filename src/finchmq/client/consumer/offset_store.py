"""Consumer offsets (Java ``OffsetStore``, ``RemoteBrokerOffsetStore``, ``LocalFileOffsetStore``; seed 002).

Owns: the in-memory offset table of one consumer group and where it is persisted: on the broker
(clustering) or in ``{local_offset_store_dir}/{client_id}/{group}/offsets.json`` (broadcasting).
Imports: ``finchmq.protocol``, ``finchmq.common`` (atomic files) and the client's modules.

Strategy: ``update_offset`` only changes memory; ``persist_all`` (every
``persist_consumer_offset_interval`` and on shutdown) and ``persist`` (a queue leaving the
consumer) write it out. The file store writes through a thread (``write_atomically`` fsyncs);
the remote store commits with acknowledged UPDATE_CONSUMER_OFFSET calls, so a shutdown's last
commit is known to have reached the broker (Java sends them oneway).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from finchmq.client.api import MQClientAPI
from finchmq.client.errors import MQBrokerError, MQClientError
from finchmq.client.route import FindBrokerResult
from finchmq.common import read_config_file, write_atomically
from finchmq.protocol.bodies import OffsetSerializeWrapper
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.message import MessageQueue

__all__ = [
    "LocalFileOffsetStore",
    "OffsetStore",
    "OffsetStoreOwner",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]

log = logging.getLogger(__name__)

_OFFSET_TIMEOUT_MS = 5_000  # Java: 1000 * 5

_T = TypeVar("_T")


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


@runtime_checkable
class OffsetStore(Protocol):
    """Java ``OffsetStore``. ``read_offset`` answers -1 for "none" and -2 for "could not ask"."""

    async def load(self) -> None:
        """Read the persisted offsets (the local file; nothing for the broker store)."""
        ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set ``mq``'s offset in memory (only forward when ``increase_only``)."""
        ...

    def read_offset_from_memory(self, mq: MessageQueue) -> int:
        """``mq``'s offset in memory, -1 if none."""
        ...

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """``mq``'s offset from memory and/or the store, per ``read_type``."""
        ...

    async def persist_all(self, mqs: set[MessageQueue]) -> None:
        """Persist the offsets of ``mqs`` (Java ``persistAll``)."""
        ...

    async def persist(self, mq: MessageQueue) -> None:
        """Persist ``mq``'s offset now."""
        ...

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (its queue moved to another member)."""
        ...

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the offsets in memory, of ``topic`` or of all topics."""
        ...


class OffsetStoreOwner(Protocol):
    """What the offset stores need of the ``MQClientInstance`` they serve: its client id (the
    local file's folder), its RPCs, and the address of a queue's broker."""

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        ...

    @property
    def api(self) -> MQClientAPI:
        """The typed RPCs (QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET)."""
        ...

    async def find_broker(self, mq: MessageQueue, find: Callable[[str], _T | None]) -> _T:
        """``find(mq.broker_name)``, asked again after refreshing the route of ``mq.topic``."""
        ...

    def find_broker_address_in_admin(self, broker_name: str) -> FindBrokerResult | None:
        """The master's address of ``broker_name``, else any slave's."""
        ...


class _MemoryTable(OffsetStore):
    def __init__(self) -> None:
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    def read_offset_from_memory(self, mq: MessageQueue) -> int:
        return self.offset_table.get(mq, -1)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: o for mq, o in self.offset_table.items() if topic is None or mq.topic == topic}

    def _read_memory_first(self, mq: MessageQueue, read_type: ReadOffsetType) -> int | None:
        """``read_offset``'s answer from memory; None: ask the store."""
        if read_type is ReadOffsetType.READ_FROM_STORE:
            return None
        offset = self.offset_table.get(mq)
        if offset is None and read_type is ReadOffsetType.READ_FROM_MEMORY:
            return -1
        return offset


class RemoteBrokerOffsetStore(_MemoryTable):
    """Offsets kept by the brokers (clustering)."""

    def __init__(self, instance: OffsetStoreOwner, group_name: str) -> None:
        super().__init__()
        self.instance = instance
        self.group_name = group_name

    async def load(self) -> None:
        return None

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        offset = self._read_memory_first(mq, read_type)
        if offset is not None:
            return offset
        try:
            offset = await self.fetch_consume_offset_from_broker(mq)
        except MQBrokerError:
            return -1  # the broker has no offset for the group (QUERY_NOT_FOUND)
        except MQClientError as exc:
            log.warning("fetchConsumeOffsetFromBroker %s failed: %s", mq, exc)
            return -2
        self.update_offset(mq, offset, False)
        return offset

    async def _broker_addr(self, mq: MessageQueue) -> str:
        found = await self.instance.find_broker(mq, self.instance.find_broker_address_in_admin)
        return found.broker_addr

    async def fetch_consume_offset_from_broker(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET on ``mq``'s broker; -1 when the broker has none."""
        addr = await self._broker_addr(mq)
        return await self.instance.api.query_consumer_offset(addr, self.group_name, mq, _OFFSET_TIMEOUT_MS)

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None:
        """UPDATE_CONSUMER_OFFSET on ``mq``'s broker (oneway unless ``oneway`` is False)."""
        addr = await self._broker_addr(mq)
        await self.instance.api.update_consumer_offset(
            addr, self.group_name, mq, offset, _OFFSET_TIMEOUT_MS, oneway=oneway
        )

    async def persist_all(self, mqs: set[MessageQueue]) -> None:
        """Commit the offsets of ``mqs``; forget the ones of queues no longer consumed."""
        if not mqs:
            return
        unused = [mq for mq in self.offset_table if mq not in mqs]
        targets = [(mq, o) for mq, o in self.offset_table.items() if mq in mqs]
        results = await asyncio.gather(
            *(self.update_consume_offset_to_broker(mq, o) for mq, o in targets), return_exceptions=True
        )
        for (mq, offset), result in zip(targets, results, strict=True):
            if isinstance(result, MQClientError):
                log.warning("updateConsumeOffsetToBroker %s offset=%d failed: %s", mq, offset, result)
            elif isinstance(result, BaseException):
                raise result
        for mq in unused:
            self.offset_table.pop(mq, None)
            log.info("remove unused mq, %s, %s", mq, self.group_name)

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offset_table.get(mq)
        if offset is None:
            return
        try:
            await self.update_consume_offset_to_broker(mq, offset)
        except MQClientError as exc:
            log.warning("updateConsumeOffsetToBroker %s offset=%d failed: %s", mq, offset, exc)


class LocalFileOffsetStore(_MemoryTable):
    """Offsets in a local file (broadcasting: every consumer has its own)."""

    def __init__(self, instance: OffsetStoreOwner, group_name: str, directory: Path) -> None:
        super().__init__()
        self.group_name = group_name
        self.store_path = Path(directory) / instance.client_id / group_name / "offsets.json"
        self._write_lock = asyncio.Lock()

    def _read_file(self) -> dict[MessageQueue, int] | None:
        try:
            wrapper = read_config_file(self.store_path, OffsetSerializeWrapper.from_json)
        except (ProtocolError, OSError) as exc:
            raise MQClientError(f"load consumer offset file {self.store_path} failed: {exc}") from exc
        return None if wrapper is None else dict(wrapper.offset_table)

    async def load(self) -> None:
        table = await asyncio.to_thread(self._read_file)
        if table:
            self.offset_table.update(table)
            log.info("load consumer's offset, %s %s", self.group_name, table)

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        offset = self._read_memory_first(mq, read_type)
        if offset is not None:
            return offset
        try:
            table = await asyncio.to_thread(self._read_file)
        except MQClientError as exc:
            log.warning("%s", exc)
            return -1
        if table is None or mq not in table:
            return -1
        self.update_offset(mq, table[mq], False)
        return table[mq]

    async def persist_all(self, mqs: set[MessageQueue]) -> None:
        if not mqs:
            return
        wrapper = OffsetSerializeWrapper(
            offset_table={mq: o for mq, o in self.offset_table.items() if mq in mqs}
        )
        data = wrapper.to_json()
        async with self._write_lock:
            await asyncio.to_thread(write_atomically, self.store_path, data)

    async def persist(self, mq: MessageQueue) -> None:
        return None  # Java persists broadcasting offsets only with persist_all
