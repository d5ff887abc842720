"""``PopReviveService`` (Java 5.3.3): one per revive queue; puts back every popped message that
was not acked by its check point's revive time.

Each round (every ``reviveInterval``, slower while idle, up to ``reviveMaxSlow`` times) reads
the revive queue on from where it stopped: a check point (``ck``) becomes pending, an ack
(``ack``/``bAck``) sets its bit. Once the queue is read to its end, every pending check point
whose revive time is more than ``ackTimeInterval`` + 1 s past has its unacked messages written to
the group's pop retry topic (``%RETRY%group_topic``, or ``group+topic`` with
``enableRetryTopicV2``) with RECONSUME_TIME raised and ``1ST_POP_TIME`` kept; a message that has
been delivered ``retryMaxTimes`` + 1 times goes to ``%DLQ%group`` instead. A write that fails
writes the check point again for that message, later (Java ``rePutCK``). The queue's progress is
the REVIVE_GROUP's consumer offset on the revive topic (``consumerOffset.json``, as Java).

Where finchmq differs from Java, and why: Java's check points and acks reach the revive queue
through the timer wheel at their delivery time, so Java rebuilds its map from the committed
offset each round and stops at the first check point not yet due. finchmq reads them in the
order written (the timer is a separate feature): the pending check points stay in memory between
rounds, a check point is revived when due wherever it is in the queue, and an ack that arrives
before its check point is held until it comes (``reviveAckWaitMs`` at most). The committed
offset stops before the oldest check point still pending (or ack still held), so a broker killed
at any point rebuilds the same state from the queue after its restart: nothing is lost, a
message may come back once more. The same logic holds if the acks and check points do arrive
through a timer.

Java's 5.3.3 broker leaves dead letters to the proxy (``PopMessageResultFilterImpl``: a message
popped with ``reconsumeTimes >= retryMaxTimes + 1`` is forwarded to the DLQ); finchmq has no proxy
yet, so the revive service does it, with the same count.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from finchmq.broker.config import BrokerConfig
from finchmq.broker.offset import ConsumerOffsetManager
from finchmq.broker.put_service import StorePutService, settled
from finchmq.broker.stats import BrokerStats
from finchmq.broker.subscription_group import SubscriptionGroupManager
from finchmq.broker.topic_config import TopicConfigManager
from finchmq.protocol.bodies import BodyError, PermName, TopicConfig, TopicFilterType
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import (
    ACK_TAG,
    ACK_TIME_INTERVAL,
    BATCH_ACK_TAG,
    CK_TAG,
    RETRY_QUEUE_NUM,
    REVIVE_GROUP,
    SECOND,
    AckMsg,
    BatchAckMsg,
    PopCheckPoint,
    build_pop_retry_topic,
    parse_normal_topic,
)
from finchmq.protocol.stored import decode_stored
from finchmq.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from finchmq.store import (
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBrokerInner,
    stored_properties_string,
)
from finchmq.store.config import BrokerRole

from .buffer_merge import MergeKey, merge_key
from .inflight import PopInflightMessageCounter
from .revive_log import STORED_STATUSES, ReviveLog

__all__ = ["CK_REWRITE_INTERVALS", "PopReviveService"]

log = logging.getLogger(__name__)

# Java ckRewriteIntervalsInSeconds: how much later a check point written again is due
CK_REWRITE_INTERVALS: Final = (
    10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
)  # fmt: skip
_REVIVE_MARGIN: Final = ACK_TIME_INTERVAL + SECOND  # ms past the revive time before reviving
_FINISHED_KEPT: Final = 100_000  # keys of check points done with, to drop their late acks
_BATCH: Final = 32  # messages read per look (Java)
_LOCAL_HOST: Final = "127.0.0.1"  # Java PopAckConstants.LOCAL_HOST: who commits REVIVE_GROUP offsets
_DLQ_NUMS_PER_GROUP: Final = 1


@dataclass(slots=True, eq=False)
class _Pending:
    ck: PopCheckPoint  # revive_offset set
    bits: int
    low_water: int  # the lowest revive-queue offset of the check point and the acks applied to it


@dataclass(slots=True)
class _Orphan:
    offsets: set[int]
    low_water: int
    pop_time: int  # ms: of the check point it acks
    seen_at: float  # monotonic s


class PopReviveService:
    """Revives one revive queue (see the module doc)."""

    def __init__(
        self,
        queue_id: int,
        *,
        revive_log: ReviveLog,
        store: DefaultMessageStore,
        put_service: StorePutService,
        offsets: ConsumerOffsetManager,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        inflight: PopInflightMessageCounter,
        stats: BrokerStats,
        config: Callable[[], BrokerConfig],
        clock: Callable[[], int],
        store_host: Callable[[], bytes],
        on_dlq: Callable[[str, str], None] = lambda group, topic: None,
    ) -> None:
        self.queue_id = queue_id
        self.revive_log = revive_log
        self.revive_topic = revive_log.topic
        self.store = store
        self.put_service = put_service
        self.offsets = offsets
        self.topics = topics
        self.groups = groups
        self.inflight = inflight
        self.stats = stats
        self.config = config
        self.clock = clock
        self.store_host = store_host
        self.on_dlq = on_dlq
        self.read_offset = -1  # next revive-queue offset to read; -1 until the first round
        self.pending: dict[MergeKey, _Pending] = {}
        self.orphans: dict[MergeKey, _Orphan] = {}
        self._due: list[tuple[int, int, MergeKey]] = []  # (revive time, revive offset, key)
        self._finished: OrderedDict[MergeKey, None] = OrderedDict()
        # metrics: (group, topic, CK or ACK) read from the revive queue
        # (rocketmq_pop_revive_out_message_total); (group, topic, put status) written to the pop
        # retry topic (rocketmq_pop_revive_retry_messages_total); dead letters; check points rewritten
        self.got: Counter[tuple[str, str, str]] = Counter()
        self.retry_puts: Counter[tuple[str, str, str]] = Counter()
        self.dead_lettered = 0
        self.re_put = 0

    @property
    def should_run(self) -> bool:
        """Java ``shouldRunPopRevive``: masters revive, slaves only follow."""
        return self.store.config.broker_role is not BrokerRole.SLAVE

    def committed_offset(self) -> int:
        return self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, self.queue_id)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        slow = 1
        while True:
            await asyncio.sleep(self.config().revive_interval / 1000)
            if not self.should_run:
                continue
            try:
                read, revived = await self.revive_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reviveQueueId=%d: revive failed", self.queue_id)
                continue
            if read or revived or self.pending:
                slow = 1
                continue
            await asyncio.sleep(slow * self.config().revive_interval / 1000)
            slow = min(slow + 1, max(self.config().revive_max_slow, 1))

    async def revive_once(self) -> tuple[int, int]:
        """One round: read on, revive what is due, commit; (messages read, check points revived)."""
        if self.read_offset < 0:
            self.read_offset = max(self.committed_offset() + 1, 0)
        read, at_end = await self._consume_revive_message()
        revived = await self._merge_and_revive() if at_end else 0
        self._expire_orphans(at_end)
        self._commit()
        return read, revived

    # -- reading ----------------------------------------------------------------------------

    async def _consume_revive_message(self) -> tuple[int, bool]:
        store = self.store
        offset = self.read_offset
        scan_until = time.monotonic() + self.config().revive_scan_time / 1000
        read = 0
        while True:
            result = store.get_message(REVIVE_GROUP, self.revive_topic, self.queue_id, offset, _BATCH, None)
            try:
                records = [(bytes(b), q) for b, q in zip(result.buffers, result.queue_offsets, strict=True)]
            finally:
                result.release()
            if not records:
                moved = result.status in (
                    GetMessageStatus.OFFSET_TOO_SMALL,
                    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                    GetMessageStatus.OFFSET_FOUND_NULL,
                    GetMessageStatus.MESSAGE_WAS_REMOVING,
                    GetMessageStatus.NO_MATCHED_MESSAGE,
                )
                if moved and result.next_begin_offset != offset:
                    log.warning(
                        "reviveQueueId=%d: offset %d is %s, going on at %d",
                        self.queue_id,
                        offset,
                        result.status.name,
                        result.next_begin_offset,
                    )
                    offset = result.next_begin_offset
                    continue
                self.read_offset = offset
                return read, True
            for record, queue_offset in records:
                self._handle(record, queue_offset)
            read += len(records)
            offset = records[-1][1] + 1
            self.read_offset = offset
            if time.monotonic() > scan_until:
                log.info("reviveQueueId=%d: scan time up at offset %d", self.queue_id, offset)
                return read, False
            await asyncio.sleep(0)  # a long queue must not hold the loop

    def _handle(self, record: bytes, revive_offset: int) -> None:
        try:
            msg = decode_stored(record)
        except MessageDecodeError as exc:
            log.error(
                "reviveQueueId=%d: undecodable message at %d skipped: %s", self.queue_id, revive_offset, exc
            )
            return
        tag = msg.properties.get(MessageConst.PROPERTY_TAGS)
        try:
            if tag == CK_TAG:
                self._on_check_point(PopCheckPoint.from_json(msg.body), revive_offset)
            elif tag == ACK_TAG:
                self._on_ack(AckMsg.from_json(msg.body), revive_offset)
            elif tag == BATCH_ACK_TAG:
                self._on_ack(BatchAckMsg.from_json(msg.body), revive_offset)
        except BodyError as exc:
            log.error("reviveQueueId=%d: bad %s at %d skipped: %s", self.queue_id, tag, revive_offset, exc)

    def _on_check_point(self, ck: PopCheckPoint, revive_offset: int) -> None:
        if ck.topic is None or ck.cid is None:
            return
        self.got[ck.cid, ck.topic, "CK"] += 1
        ck = replace(ck, revive_offset=revive_offset)
        key = merge_key(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name)
        bits, low = ck.bit_map, revive_offset
        orphan = self.orphans.pop(key, None)
        if orphan is not None:
            for offset in orphan.offsets:
                index = ck.index_of_ack(offset)
                if index > -1:
                    bits |= 1 << index
            low = min(low, orphan.low_water)
        previous = self.pending.get(key)
        if previous is not None:  # the same check point again (Java keeps the later one)
            bits |= previous.bits
            low = min(low, previous.low_water)
        if _all_acked(bits, ck.num):
            self.pending.pop(key, None)
            self._finish(key)
            return
        self.pending[key] = _Pending(ck, bits, low)
        heapq.heappush(self._due, (ck.revive_time, revive_offset, key))

    def _on_ack(self, ack: AckMsg, revive_offset: int) -> None:
        self.got[ack.consumer_group or "", ack.topic or "", "ACK"] += 1
        broker = ack.broker_name if ack.broker_name and ack.broker_name.strip() else self.config().broker_name
        key = merge_key(ack.topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time, broker)
        pending = self.pending.get(key)
        if pending is not None:
            for offset in ack.offsets():
                index = pending.ck.index_of_ack(offset)
                if index > -1:
                    pending.bits |= 1 << index
                else:
                    log.error("reviveQueueId=%d: invalid ack index, %s, %s", self.queue_id, ack, pending.ck)
            if _all_acked(pending.bits, pending.ck.num):
                del self.pending[key]
                self._finish(key)
            return
        if key in self._finished:
            return  # acked after it was revived: nothing to do (Java answers it SUCCESS as well)
        orphan = self.orphans.get(key)
        if orphan is None:
            self.orphans[key] = _Orphan(set(ack.offsets()), revive_offset, ack.pop_time, time.monotonic())
        else:
            orphan.offsets.update(ack.offsets())

    def _finish(self, key: MergeKey) -> None:
        finished = self._finished
        finished[key] = None
        finished.move_to_end(key)
        while len(finished) > _FINISHED_KEPT:
            finished.popitem(last=False)

    def _expire_orphans(self, at_end: bool) -> None:
        """Forget acks whose check point will not come: one still in the buffer is written at the
        latest ``popCkStayBufferTime`` after its pop, so once the queue is read to its end an ack
        older than that has none (a check point acked completely in the buffer, a duplicate, or
        one revived before a restart). ``reviveAckWaitMs`` bounds the wait in any case."""
        cfg = self.config()
        now, clock = time.monotonic(), self.clock()
        wait = cfg.revive_ack_wait_ms / 1000
        written_by = cfg.pop_ck_stay_buffer_time + _REVIVE_MARGIN
        for key in [
            k
            for k, o in self.orphans.items()
            if now - o.seen_at > wait or (at_end and clock - o.pop_time > written_by)
        ]:
            log.debug("reviveQueueId=%d: no check point for ack %s, dropped", self.queue_id, key)
            del self.orphans[key]

    def _commit(self) -> None:
        """Commit up to just before the oldest check point or ack still needed."""
        lows = [p.low_water for p in self.pending.values()]
        lows.extend(o.low_water for o in self.orphans.values())
        new = (min(lows) if lows else self.read_offset) - 1
        if new > self.committed_offset():
            self.offsets.commit_offset(_LOCAL_HOST, REVIVE_GROUP, self.revive_topic, self.queue_id, new)

    # -- reviving ---------------------------------------------------------------------------

    def _due_head(self) -> tuple[int, _Pending] | None:
        """The pending check point due first, dropping heap entries acked or replaced since."""
        while self._due:
            revive_time, revive_offset, key = self._due[0]
            pending = self.pending.get(key)
            if pending is not None and pending.ck.revive_offset == revive_offset:
                return revive_time, pending
            heapq.heappop(self._due)
        return None

    async def _merge_and_revive(self) -> int:
        revived = 0
        while self.should_run:
            head = self._due_head()
            if head is None or self.clock() - head[0] <= _REVIVE_MARGIN:
                break
            _, _, key = heapq.heappop(self._due)
            pending = head[1]
            del self.pending[key]
            self._finish(key)
            ck = pending.ck
            normal_topic = parse_normal_topic(ck.topic or "", ck.cid or "")
            if self.topics.select_topic_config(normal_topic) is None:
                log.warning(
                    "reviveQueueId=%d: topic %s is gone, check point dropped", self.queue_id, normal_topic
                )
                continue
            if self.groups.find_subscription_group_config(ck.cid or "") is None:
                log.warning("reviveQueueId=%d: group %s is gone, check point dropped", self.queue_id, ck.cid)
                continue
            await self._revive_msg_from_ck(ck, pending.bits)
            revived += 1
        return revived

    async def _revive_msg_from_ck(self, ck: PopCheckPoint, bits: int) -> None:
        for index in range(ck.num):
            if bits >> index & 1:
                continue
            offset = ck.ack_offset_by_index(index)
            msg = self._get_biz_message(ck, offset)
            if msg is None:
                log.info(
                    "reviveQueueId=%d: message %s:%d@%d is gone, not revived",
                    self.queue_id,
                    ck.topic,
                    ck.queue_id,
                    offset,
                )
                continue
            if not await self._revive_retry(ck, msg):
                await self._re_put_ck(ck, offset)

    def _get_biz_message(self, ck: PopCheckPoint, offset: int) -> MessageExt | None:
        result = self.store.get_message(REVIVE_GROUP, ck.topic or "", ck.queue_id, offset, 1, None)
        try:
            if not result.buffers or result.queue_offsets[0] != offset:
                return None
            record = bytes(result.buffers[0])
        finally:
            result.release()
        try:
            return decode_stored(record)
        except MessageDecodeError as exc:
            log.error(
                "reviveQueueId=%d: message %s:%d@%d undecodable: %s",
                self.queue_id,
                ck.topic,
                ck.queue_id,
                offset,
                exc,
            )
            return None

    async def _revive_retry(self, ck: PopCheckPoint, msg: MessageExt) -> bool:
        """Java ``reviveRetry``: ``msg`` again through the pop retry topic (or to the DLQ)."""
        group = ck.cid or ""
        topic = ck.topic or ""
        cfg = self.config()
        group_config = self.groups.find_subscription_group_config(group)
        properties = dict(msg.properties)
        if msg.reconsume_times == 0 or MessageConst.PROPERTY_FIRST_POP_TIME not in properties:
            properties[MessageConst.PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        properties.pop(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, None)
        if group_config is not None and msg.reconsume_times + 1 > group_config.retry_max_times:
            return await self._to_dlq(ck, msg, properties)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            retry_topic = topic
        else:
            retry_topic = build_pop_retry_topic(topic, group, cfg.enable_retry_topic_v2)
        self._add_retry_topic_if_not_exist(retry_topic, group)
        inner = self._revived(msg, retry_topic, 0, properties)
        result = await settled(await self.put_service.append(inner))
        self.retry_puts[group, topic, result.status.name] += 1
        if result.status not in STORED_STATUSES:
            log.error(
                "reviveQueueId=%d: revive of %s to %s failed: %s",
                self.queue_id,
                msg.msg_id,
                retry_topic,
                result.status.name,
            )
            return False
        self.inflight.decrement_check_point(ck)
        self.stats.record_put(retry_topic, 1, len(msg.body))
        return True

    def _revived(
        self, msg: MessageExt, topic: str, queue_id: int, properties: dict[str, str]
    ) -> MessageExtBrokerInner:
        """``msg`` written again to ``topic`` by this broker, one reconsume time more."""
        host = self.store_host()
        return MessageExtBrokerInner(
            topic=topic,
            body=msg.body,
            queue_id=queue_id,
            flag=msg.flag,
            properties=properties,
            properties_string=stored_properties_string(properties),
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=host,
            store_host=host,
            reconsume_times=msg.reconsume_times + 1,
        )

    def _add_retry_topic_if_not_exist(self, topic: str, group: str) -> None:
        if self.topics.select_topic_config(topic) is not None:
            return
        self.topics.update_topic_config(
            TopicConfig(
                topic_name=topic,
                read_queue_nums=RETRY_QUEUE_NUM,
                write_queue_nums=RETRY_QUEUE_NUM,
                topic_filter_type=TopicFilterType.SINGLE_TAG,
                perm=PermName.READ | PermName.WRITE,
                topic_sys_flag=0,
            )
        )
        if self.offsets.query_offset(group, topic, 0) < 0:  # Java initPopRetryOffset
            self.offsets.commit_offset("initPopRetryOffset", group, topic, 0, 0)

    async def _to_dlq(self, ck: PopCheckPoint, msg: MessageExt, properties: dict[str, str]) -> bool:
        group = ck.cid or ""
        topic = dlq_topic(group)
        normal_topic = parse_normal_topic(ck.topic or "", group)
        properties.setdefault(MessageConst.PROPERTY_RETRY_TOPIC, normal_topic)
        properties.setdefault(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, msg.client_msg_id)
        properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        self.topics.create_topic_in_send_message_back_method(
            topic, _DLQ_NUMS_PER_GROUP, PermName.WRITE | PermName.READ, 0
        )
        inner = self._revived(msg, topic, random.randrange(_DLQ_NUMS_PER_GROUP), properties)
        result = await settled(await self.put_service.append(inner))
        if result.status not in STORED_STATUSES:
            log.error(
                "reviveQueueId=%d: %s to %s failed: %s", self.queue_id, msg.msg_id, topic, result.status.name
            )
            return False
        log.info(
            "reviveQueueId=%d: %s of %s delivered %d times, moved to %s",
            self.queue_id,
            msg.msg_id,
            normal_topic,
            msg.reconsume_times + 1,
            topic,
        )
        self.dead_lettered += 1
        self.inflight.decrement_check_point(ck)
        self.stats.record_put(topic, 1, len(msg.body))
        self.on_dlq(group, normal_topic)
        return True

    async def _re_put_ck(self, old: PopCheckPoint, offset: int) -> None:
        """Java ``rePutCK``: the check point of one message written again, due later."""
        times = old.parse_re_put_times()
        invisible = old.invisible_time
        if old.revive_time <= self.clock():
            invisible += CK_REWRITE_INTERVALS[min(times, len(CK_REWRITE_INTERVALS) - 1)] * 1000
        ck = PopCheckPoint(
            num=1,
            pop_time=old.pop_time,
            invisible_time=invisible,
            start_offset=offset,
            cid=old.cid,
            topic=old.topic,
            queue_id=old.queue_id,
            broker_name=old.broker_name,
            queue_offset_diff=(0,),
            re_put_times=str(times + 1),
        )
        self.re_put += 1
        await self.revive_log.put_ck(ck, self.queue_id)

    # -- figures ----------------------------------------------------------------------------

    def behind_messages(self) -> int:
        """Revive-queue messages not yet read (Java ``getReviveBehindMessages``)."""
        end = self.store.get_max_offset_in_queue(self.revive_topic, self.queue_id)
        return max(0, end - max(self.read_offset, 0))

    def behind_millis(self) -> int:
        """How late the most overdue pending check point is (Java ``getReviveBehindMillis``)."""
        head = self._due_head()
        if head is None:
            return 0
        return max(0, self.clock() - head[0] - _REVIVE_MARGIN)


def _all_acked(bits: int, num: int) -> bool:
    mask = (1 << num) - 1
    return bits & mask == mask
