"""Delay levels (Java ``ScheduleMessageService``): messages with ``DELAY=n`` wait in
SCHEDULE_TOPIC_XXXX queue ``n-1`` and go to their real topic and queue when due.

Strategy: one coroutine per level reads its queue from the persisted offset
(``config/delayOffset.json``). A message is due at ``storeTimestamp + levelDelay`` (what the store
also writes as its consume-queue tag code); when due it is re-stored in REAL_TOPIC/REAL_QID with
DELAY removed and everything else kept, through the broker's writer thread, and the level's
offset advances. Idle levels look again every 100 ms (Java's DELAY_FOR_A_WHILE), so delivery is
at most ~0.1 s late.

Exactly once across crashes: offsets are persisted once a second, so after a crash the last
deliveries may be replayed. For the messages that were already scheduled when the broker started
(below each level's queue end at load time), delivery first looks the message's UNIQ_KEY up in
the real topic's index and skips it if a copy stored after it was scheduled is already there.
Messages without a UNIQ_KEY, or a store with ``messageIndexEnable=false``, keep Java's
at-least-once behaviour.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path

from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol import _json
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.stored import decode_stored
from finchmq.protocol.topics import SCHEDULE_TOPIC
from finchmq.store import (
    DefaultMessageStore,
    MessageExtBrokerInner,
    PutMessageStatus,
    TagsFilter,
)

from ._persist import JsonConfigManager
from .put_service import StorePutService, settled
from .stats import BrokerStats

__all__ = ["ScheduleMessageService"]

log = logging.getLogger(__name__)

_IDLE_WAIT = 0.1  # s, Java DELAY_FOR_A_WHILE
_RETRY_AFTER_FAILURE = 1.0  # s
_SCAN_GROUP = "SCHEDULE_MESSAGE_SERVICE"


class _DelayOffsets(JsonConfigManager):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.table: dict[int, int] = {}

    def encode(self) -> bytes:
        return _json.dumps({"offsetTable": {str(k): v for k, v in sorted(self.table.items())}})

    def decode(self, data: bytes) -> None:
        tree = _json.loads_lenient(data)
        table = tree.get("offsetTable", {}) if isinstance(tree, dict) else {}
        self.table = {int(k): int(v) for k, v in table.items()}


class ScheduleMessageService:
    def __init__(
        self,
        path: Path,
        *,
        store: DefaultMessageStore,
        put_service: StorePutService,
        stats: BrokerStats,
        store_host: Callable[[], bytes],
    ) -> None:
        self.store = store
        self.put_service = put_service
        self.stats = stats
        self.store_host = store_host  # the broker's address is known once it listens
        self.offsets = _DelayOffsets(path)
        self.delay_levels_ms: tuple[int, ...] = store.config.delay_levels_ms
        self._tasks = BackgroundTasks("delay")
        self._replay_below: dict[int, int] = {}  # level -> queue end at start: maybe delivered already

    @property
    def max_delay_level(self) -> int:
        return len(self.delay_levels_ms)

    def load(self) -> None:
        """Read the persisted offsets (blocking); call after the store has recovered."""
        self.offsets.load()

    def note_recovered_queues(self) -> None:
        """Remember each level's queue end, below which deliveries may be replays."""
        store = self.store
        for level in range(1, self.max_delay_level + 1):
            end = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            if end > self.offsets.table.get(level, 0):
                self._replay_below[level] = end

    def maybe_delay(self, topic: str, queue_id: int, properties: MutableMapping[str, str]) -> tuple[str, int]:
        """Where a message goes: the schedule topic if it carries a delay level, else unchanged.

        Sets REAL_TOPIC/REAL_QID and clamps the level to the highest one, as Java's CommitLog.
        """
        raw = properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if not raw:
            return topic, queue_id
        try:
            level = int(raw)
        except ValueError:
            return topic, queue_id
        if level <= 0:
            return topic, queue_id
        if level > self.max_delay_level:
            level = self.max_delay_level
            properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        properties[MessageConst.PROPERTY_REAL_TOPIC] = topic
        properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return SCHEDULE_TOPIC, level - 1

    def start(self) -> None:
        for level in range(1, self.max_delay_level + 1):
            self._tasks.spawn(self._deliver_level(level), f"level-{level}")

    async def close(self) -> None:
        await self._tasks.close()

    def offset_table(self) -> dict[int, int]:
        return dict(self.offsets.table)

    async def _deliver_level(self, level: int) -> None:
        queue_id = level - 1
        delay_ms = self.delay_levels_ms[level - 1]
        store = self.store
        match_all = TagsFilter()
        while True:
            offset = self.offsets.table.get(level, 0)
            min_offset = store.get_min_offset_in_queue(SCHEDULE_TOPIC, queue_id)
            offset = max(offset, min_offset)
            result = store.get_message(_SCAN_GROUP, SCHEDULE_TOPIC, queue_id, offset, 32, match_all)
            wait = _IDLE_WAIT
            try:
                records = [bytes(b) for b in result.buffers] if result is not None else []
                queue_offsets = list(result.queue_offsets) if result is not None else []
            finally:
                if result is not None:
                    result.release()
            for record, queue_offset in zip(records, queue_offsets, strict=True):
                try:
                    msg = decode_stored(record)
                except MessageDecodeError as exc:
                    log.error(
                        "delay level %d: undecodable message at queue offset %d skipped: %s",
                        level,
                        queue_offset,
                        exc,
                    )
                    self._advance(level, queue_offset + 1)
                    continue
                now = int(time.time() * 1000)
                deliver_at = msg.store_timestamp + delay_ms
                if (
                    deliver_at > now + delay_ms
                ):  # the clock went back: deliver now (Java correctDeliverTimestamp)
                    deliver_at = now
                if deliver_at > now:
                    wait = (deliver_at - now) / 1000
                    break
                if queue_offset < self._replay_below.get(level, 0) and self._delivered_before(msg):
                    log.info("delay level %d: %s already delivered before the restart", level, msg.msg_id)
                    self._advance(level, queue_offset + 1)
                    continue
                if not await self._deliver(msg, level):
                    wait = _RETRY_AFTER_FAILURE
                    break
                self._advance(level, queue_offset + 1)
            else:
                if records:
                    continue  # there may be more due right now
            await asyncio.sleep(min(wait, _IDLE_WAIT * 10))

    def _delivered_before(self, msg: MessageExt) -> bool:
        uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        real_topic = msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC)
        if not uniq or not real_topic:
            return False
        store = self.store
        with store.query_message(real_topic, uniq, 32, msg.store_timestamp, 2**62) as found:
            for buffer in found.buffers:
                try:
                    copy = decode_stored(buffer)
                except MessageDecodeError:
                    continue
                if (
                    copy.store_timestamp >= msg.store_timestamp
                    and copy.reconsume_times == msg.reconsume_times
                    and copy.body == msg.body
                ):
                    return True
        return False

    def _advance(self, level: int, offset: int) -> None:
        self.offsets.table[level] = offset
        self.offsets.mark_dirty()

    async def _deliver(self, msg: MessageExt, level: int) -> bool:
        properties = dict(msg.properties)
        real_topic = properties.get(MessageConst.PROPERTY_REAL_TOPIC)
        real_qid = properties.get(MessageConst.PROPERTY_REAL_QUEUE_ID)
        if not real_topic or real_qid is None:
            log.error("delayed message %s has no REAL_TOPIC/REAL_QID; dropped", msg.msg_id)
            return True
        properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        inner = MessageExtBrokerInner.from_message_ext(
            msg, topic=real_topic, queue_id=int(real_qid), properties=properties, store_host=self.store_host()
        )
        result = await settled(await self.put_service.append(inner))
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning(
                "delay level %d: re-storing %s to %s failed: %s; retrying",
                level,
                msg.msg_id,
                real_topic,
                result.status.name,
            )
            return False
        self.stats.record_put(real_topic, 1, len(msg.body))
        return True
