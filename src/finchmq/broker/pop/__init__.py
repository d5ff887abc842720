"""POP consumption (RocketMQ 5.x) on the broker: the state and services behind the POP_MESSAGE,
ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE, NOTIFICATION and
POLLING_INFO processors (``broker/processor/``). See docs/pop.md.

    service.py       PopServices: builds, starts and stops the rest; the broker's ``context.pop``
    revive_log.py    ReviveLog: check points and acks written to rmq_sys_REVIVE_LOG_<cluster>
    buffer_merge.py  PopBufferMergeService: check points in memory, offsets committed in order
    revive.py        PopReviveService: unacked messages back through the pop retry topic (or DLQ)
    long_polling.py  PopLongPollingService: held pops and notifications
    order_info.py    ConsumerOrderInfoManager: orderly pop (consumerOrderInfo.json)
    queue_lock.py    QueueLockManager;  inflight.py  PopInflightMessageCounter
"""

from __future__ import annotations

from .service import PopServices

__all__ = ["PopServices"]
