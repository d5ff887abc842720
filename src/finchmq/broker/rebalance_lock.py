"""``RebalanceLockManager``: broker-side locks that give one client a queue for orderly
consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ). A lock belongs to a client id, expires after
``rebalanceLockMaxLiveTime`` (60 s) unless renewed by its owner, and is never held by two
clients at once."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from finchmq.protocol.message import MessageQueue

__all__ = ["RebalanceLockManager"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update_timestamp: float  # monotonic seconds


class RebalanceLockManager:
    def __init__(self, lock_max_live_time_ms: int = 60_000) -> None:
        self.lock_max_live_time = lock_max_live_time_ms / 1000
        self._table: dict[str, dict[MessageQueue, _LockEntry]] = {}

    def _expired(self, entry: _LockEntry, now: float) -> bool:
        return now - entry.last_update_timestamp > self.lock_max_live_time

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        entry = self._table.get(group, {}).get(mq)
        if entry is None or entry.client_id != client_id or self._expired(entry, time.monotonic()):
            return False
        entry.last_update_timestamp = time.monotonic()
        return True

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> set[MessageQueue]:
        """Lock (or renew) what is free or already ours; returns the queues this client holds."""
        now = time.monotonic()
        locks = self._table.setdefault(group, {})
        held: set[MessageQueue] = set()
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None:
                locks[mq] = _LockEntry(client_id, now)
                log.info("lock %s for %s in group %s", mq, client_id, group)
                held.add(mq)
            elif entry.client_id == client_id:
                entry.last_update_timestamp = now
                held.add(mq)
            elif self._expired(entry, now):
                log.warning(
                    "lock of %s in group %s expired for %s, now held by %s",
                    mq,
                    group,
                    entry.client_id,
                    client_id,
                )
                locks[mq] = _LockEntry(client_id, now)
                held.add(mq)
            else:
                log.debug(
                    "lock of %s in group %s is held by %s, refused to %s",
                    mq,
                    group,
                    entry.client_id,
                    client_id,
                )
        return held

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        locks = self._table.get(group)
        if locks is None:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
                log.info("unlock %s for %s in group %s", mq, client_id, group)
        if not locks:
            self._table.pop(group, None)

    def holder(self, group: str, mq: MessageQueue) -> str | None:
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, time.monotonic()):
            return None
        return entry.client_id
