"""``ReviveLog``: the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` as pop writes it.

A check point goes to revive queue ``reviveQid`` with tag ``ck``, an ack with ``ack``, a batch
ack with ``bAck``; the body is the JSON of ``protocol.pop`` (fastjson's bytes), UNIQ_KEY is
Java's ``gen*UniqueId`` and TIMER_DELIVER_MS the time Java's timer would deliver it (a check
point 1 s before its revive time, an ack at it), exactly as Java 5.3.3's ``buildCkMsg`` and
``appendAck`` build them. finchmq's revive service does not rely on that delivery time: it
reads the queue in the order written (see ``revive.py``).

Puts go through the broker's ``StorePutService`` and wait for the final result (a SYNC_FLUSH
store flushes first), as Java's ``putMessageToSpecificQueue`` does.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Final

from finchmq.broker.put_service import StorePutService, settled
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import (
    ACK_TAG,
    ACK_TIME_INTERVAL,
    BATCH_ACK_TAG,
    CK_TAG,
    AckMsg,
    BatchAckMsg,
    PopCheckPoint,
    ack_unique_id,
    batch_ack_unique_id,
    ck_unique_id,
)
from finchmq.store import MessageExtBrokerInner, PutMessageResult, PutMessageStatus, stored_properties_string

__all__ = ["PROPERTY_TIMER_DELIVER_MS", "STORED_STATUSES", "ReviveLog"]

log = logging.getLogger(__name__)

# Java 5.x MessageConst.PROPERTY_TIMER_DELIVER_MS (the timer's own key; written, not acted on here)
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
# What Java's pop counts as written (the message is in the commit log, maybe not yet flushed/replicated)
STORED_STATUSES: Final = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


class ReviveLog:
    """Builds and appends the revive topic's messages."""

    def __init__(self, topic: str, put_service: StorePutService, store_host: Callable[[], bytes]) -> None:
        self.topic = topic
        self.put_service = put_service
        self.store_host = store_host  # known once the broker listens
        # (group, topic, CK or ACK, put status) -> messages: rocketmq_pop_revive_in_message_total
        self.puts: Counter[tuple[str, str, str, str]] = Counter()

    def _message(
        self, body: bytes, revive_qid: int, tag: str, uniq: str, deliver_ms: int
    ) -> MessageExtBrokerInner:
        properties = {
            MessageConst.PROPERTY_TAGS: tag,
            PROPERTY_TIMER_DELIVER_MS: str(deliver_ms),
            MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
        }
        host = self.store_host()
        return MessageExtBrokerInner(
            topic=self.topic,
            body=body,
            queue_id=revive_qid,
            properties=properties,
            properties_string=stored_properties_string(properties),
            born_timestamp=int(time.time() * 1000),
            born_host=host,
            store_host=host,
        )

    def ck_message(self, ck: PopCheckPoint, revive_qid: int) -> MessageExtBrokerInner:
        """Java ``PopMessageProcessor.buildCkMsg``."""
        deliver = ck.revive_time - ACK_TIME_INTERVAL
        return self._message(ck.to_json(), revive_qid, CK_TAG, ck_unique_id(ck), deliver)

    def ack_message(
        self, ack: AckMsg, revive_qid: int, deliver_ms: int, *, batch_unique_id: bool = True
    ) -> MessageExtBrokerInner:
        """An ack or batch ack delivered at ``deliver_ms`` (the check point's revive time).

        Java's ``AckMessageProcessor`` gives a batch ack the single ack's UNIQ_KEY (it sets the
        key twice); ``batch_unique_id=False`` does the same."""
        if isinstance(ack, BatchAckMsg):
            uniq = batch_ack_unique_id(ack) if batch_unique_id else ack_unique_id(ack)
            return self._message(ack.to_json(), revive_qid, BATCH_ACK_TAG, uniq, deliver_ms)
        return self._message(ack.to_json(), revive_qid, ACK_TAG, ack_unique_id(ack), deliver_ms)

    async def put_ck(self, ck: PopCheckPoint, revive_qid: int) -> PutMessageResult:
        """Append a check point; the final result."""
        return await self.put(self.ck_message(ck, revive_qid), ck.cid, ck.topic, "CK")

    async def put_ack(
        self, ack: AckMsg, revive_qid: int, deliver_ms: int, *, batch_unique_id: bool = True
    ) -> PutMessageResult:
        """Append an ack or batch ack; the final result."""
        message = self.ack_message(ack, revive_qid, deliver_ms, batch_unique_id=batch_unique_id)
        return await self.put(message, ack.consumer_group, ack.topic, "ACK")

    async def put(
        self, message: MessageExtBrokerInner, group: str | None, topic: str | None, kind: str
    ) -> PutMessageResult:
        """Append ``message`` (Java ``PopReviveMessageType`` ``kind``: CK or ACK) and return the
        final result; never raises for a store refusal."""
        try:
            result = await settled(await self.put_service.append(message))
        except RuntimeError as exc:  # the broker is shutting down
            log.warning("revive log put of %s refused: %s", kind, exc)
            result = PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        self.puts[group or "", topic or "", kind, result.status.name] += 1
        if result.status not in STORED_STATUSES:
            log.error("revive log: %s of %s@%s to queue %d failed: %s", kind, topic, group, message.queue_id,
                      result.status.name)  # fmt: skip
        return result
