"""finchmq.store.timer: 5.x timer messages (Java ``store/timer``): the wheel, the log, the
checkpoint, the per-topic counts and ``TimerMessageStore``, which delivers them.

Imports: ``finchmq.protocol``, ``finchmq.common`` and the store. No asyncio: the timer's work
runs on its own threads, as Java's. See docs/timer.md.
"""

from __future__ import annotations

from .checkpoint import TimerCheckpoint, TimerCheckpointData
from .log import BLANK_MAGIC_CODE, UNIT_SIZE, TimerLog, TimerLogUnit, decode_unit
from .metrics import TIMER_DIST, TimerMetrics
from .timer_store import (
    DELAY_LATENCY_BUCKETS,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    PutHook,
    TimerMessageStore,
    TimerRequest,
    build_delete_key,
)
from .wheel import Slot, TimerWheel, decode_slot, encode_slot

__all__ = [
    "BLANK_MAGIC_CODE",
    "DELAY_LATENCY_BUCKETS",
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "TIMER_DIST",
    "UNIT_SIZE",
    "PutHook",
    "Slot",
    "TimerCheckpoint",
    "TimerCheckpointData",
    "TimerLog",
    "TimerLogUnit",
    "TimerMessageStore",
    "TimerMetrics",
    "TimerRequest",
    "TimerWheel",
    "build_delete_key",
    "decode_slot",
    "decode_unit",
    "encode_slot",
]
