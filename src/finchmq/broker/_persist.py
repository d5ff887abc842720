"""JSON state files of the broker (Java ``ConfigManager``): load at start, persist on change,
periodically and at shutdown. Encoding happens on the event loop (a consistent snapshot); the
write (fsync included) runs in a thread so the loop never waits on the disk."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from pathlib import Path

from finchmq.common import read_config_file, write_atomically

__all__ = ["JsonConfigManager"]

log = logging.getLogger(__name__)


class JsonConfigManager(ABC):
    """One JSON file of broker state, written atomically with a ``.bak`` of the previous one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()
        self._dirty = False

    @abstractmethod
    def encode(self) -> bytes:
        """The current state as the file's bytes."""

    @abstractmethod
    def decode(self, data: bytes) -> None:
        """Replace the state with the file's content; raise on malformed data."""

    def load(self) -> bool:
        """Read the file (or its backup); False if neither exists. Blocking: call at start-up."""
        found = read_config_file(self.path, lambda data: (self.decode(data), True)[1])
        if found:
            log.info("loaded %s", self.path)
        return bool(found)

    def mark_dirty(self) -> None:
        self._dirty = True

    async def persist(self) -> None:
        """Write the current state now (serialised with other writes of this file)."""
        async with self._lock:
            self._dirty = False
            data = self.encode()
            await asyncio.to_thread(write_atomically, self.path, data)

    async def persist_if_dirty(self) -> None:
        if self._dirty:
            await self.persist()

    def persist_blocking(self) -> None:
        """Write synchronously (shutdown paths outside the loop, tests)."""
        self._dirty = False
        write_atomically(self.path, self.encode())
