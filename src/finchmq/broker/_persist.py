"""JSON state files of the broker (Java ``ConfigManager``): load at start, persist on change,
periodically and at shutdown. Encoding happens on the event loop (a consistent snapshot); the
write (fsync of the file and of its directory included) runs in a thread so the loop never waits
on the disk.

Durability of changes made by requests (a topic auto-created by a send, a group created by a
heartbeat...): Java persists inside the request, before answering. ``flush_changes`` gives the
same guarantee without blocking the loop, as a group commit: every change bumps a version, a
waiter returns once a write that started after its change has completed, and one write serves
every change made before it began.

A file that cannot be read at start (torn by a crash, or corrupted), with a backup that cannot be
read either, never stops the broker: both are moved aside (``*.corrupt``), the error is logged, and
the manager starts from its defaults (the topic table is then rebuilt from the consume queues).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
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
        self._changes = 0  # bumped by every change
        self._written = 0  # the change count that the file on disk includes

    @abstractmethod
    def encode(self) -> bytes:
        """The current state as the file's bytes."""

    @abstractmethod
    def decode(self, data: bytes) -> None:
        """Replace the state with the file's content; raise on malformed data."""

    def load(self) -> bool:
        """Read the file (or its backup); False if neither exists or neither can be read (both are
        then moved aside and the defaults stay). Blocking: call at start-up."""
        try:
            found = read_config_file(self.path, lambda data: (self.decode(data), True)[1])
        except Exception as exc:
            self._set_aside(exc)
            return False
        if found:
            log.info("loaded %s", self.path)
        return bool(found)

    def _set_aside(self, error: Exception) -> None:
        stamp = time.strftime("%Y%m%d%H%M%S")
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            with contextlib.suppress(FileNotFoundError):
                os.replace(candidate, candidate.with_name(f"{candidate.name}.{stamp}.corrupt"))
        log.error(
            "%s and its backup are unreadable (%s); moved aside as *.%s.corrupt, starting from defaults",
            self.path,
            error,
            stamp,
        )
        self.mark_dirty()

    def mark_dirty(self) -> None:
        self._changes += 1

    @property
    def has_unwritten_changes(self) -> bool:
        return self._written != self._changes

    async def persist(self) -> None:
        """Write the current state now (serialised with other writes of this file)."""
        async with self._lock:
            await self._write()

    async def _write(self) -> None:
        changes = self._changes
        data = self.encode()
        await asyncio.to_thread(write_atomically, self.path, data)
        self._written = max(self._written, changes)

    async def flush_changes(self) -> None:
        """Return once every change made before this call is on disk (group commit)."""
        target = self._changes
        while self._written < target:
            async with self._lock:
                if self._written < target:
                    await self._write()

    async def persist_if_dirty(self) -> None:
        if self.has_unwritten_changes:
            await self.flush_changes()

    def persist_blocking(self) -> None:
        """Write synchronously (start-up and shutdown paths outside the loop, tests)."""
        changes = self._changes
        write_atomically(self.path, self.encode())
        self._written = max(self._written, changes)
