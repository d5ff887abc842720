"""``QueueLockManager`` (Java, inside ``PopMessageProcessor``): one try-lock per
``topic@group@queueId`` so a queue is popped by one request at a time, and its offsets are
committed by the buffer-merge service only while no pop is reading it.

Everything runs on the event loop, so a lock is a flag plus the time it was last taken; a pop
holds it across its awaits (the check point's append). Locks unused for a minute are forgotten.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["QueueLockManager"]


@dataclass(slots=True)
class _TimedLock:
    locked: bool = False
    lock_time: float = 0.0  # monotonic s


class QueueLockManager:
    def __init__(self) -> None:
        self._locks: dict[str, _TimedLock] = {}

    def try_lock(self, key: str) -> bool:
        """Take ``key``'s lock; False when someone holds it."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = _TimedLock()
        if lock.locked:
            return False
        lock.locked = True
        lock.lock_time = time.monotonic()
        return True

    def unlock(self, key: str) -> None:
        lock = self._locks.get(key)
        if lock is not None:
            lock.locked = False

    def is_locked(self, key: str) -> bool:
        lock = self._locks.get(key)
        return lock is not None and lock.locked

    def clean_unused_lock(self, used_expire_ms: int = 60_000) -> int:
        """Forget free locks last taken more than ``used_expire_ms`` ago; returns how many remain."""
        deadline = time.monotonic() - used_expire_ms / 1000
        for key in [k for k, lock in self._locks.items() if not lock.locked and lock.lock_time < deadline]:
            del self._locks[key]
        return len(self._locks)

    def __len__(self) -> int:
        return len(self._locks)
