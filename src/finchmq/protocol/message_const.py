"""Message property keys and SYSFLAG bits (Java ``common/message/MessageConst.java`` and
``common/sysflag/MessageSysFlag.java``, 4.9.x; spec §4.3, §4.4).

Imports: the standard library only.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KEY_SEPARATOR", "RESERVED_PROPERTY_NAMES", "MessageConst", "MessageSysFlag"]


class MessageConst:
    """Property keys (Java ``common/message/MessageConst.java``, 4.9.x; spec §4.4)."""

    PROPERTY_KEYS: Final = "KEYS"
    PROPERTY_TAGS: Final = "TAGS"
    PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
    PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
    PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
    PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
    PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
    PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
    PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
    PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
    PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
    PROPERTY_BUYER_ID: Final = "BUYER_ID"
    PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    PROPERTY_TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    PROPERTY_CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    PROPERTY_MQ2_FLAG: Final = "MQ2_FLAG"
    PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
    PROPERTY_MSG_REGION: Final = "MSG_REGION"
    PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
    PROPERTY_EXTEND_UNIQ_INFO: Final = "EXTEND_UNIQ_INFO"
    PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    # 5.x: POP. A popped message's check-point info (protocol.pop.ExtraInfo), its offset in the
    # check point, and the time it was first popped (kept across revives).
    PROPERTY_POP_CK: Final = "POP_CK"
    PROPERTY_POP_CK_OFFSET: Final = "POP_CK_OFFSET"
    PROPERTY_FIRST_POP_TIME: Final = "1ST_POP_TIME"
    PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
    PROPERTY_INNER_NUM: Final = "INNER_NUM"
    PROPERTY_INNER_BASE: Final = "INNER_BASE"
    DUP_INFO: Final = "DUP_INFO"
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    PROPERTY_TRANSACTION_ID: Final = "__transactionId__"
    PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    PROPERTY_INSTANCE_ID: Final = "INSTANCE_ID"
    PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
    PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    PROPERTY_MESSAGE_TTL: Final = "TTL"
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
    PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    PROPERTY_CLUSTER: Final = "CLUSTER"
    PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
    PROPERTY_SHARDING_KEY: Final = "__SHARDINGKEY"
    PROPERTY_INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    PROPERTY_INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
    PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"
    # 5.x timer messages (Java 5.x MessageConst)
    PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    PROPERTY_TIMER_ENQUEUE_MS: Final = "TIMER_ENQUEUE_MS"
    PROPERTY_TIMER_DEQUEUE_MS: Final = "TIMER_DEQUEUE_MS"
    PROPERTY_TIMER_ROLL_TIMES: Final = "TIMER_ROLL_TIMES"
    PROPERTY_TIMER_OUT_MS: Final = "TIMER_OUT_MS"
    PROPERTY_TIMER_DEL_UNIQKEY: Final = "TIMER_DEL_UNIQKEY"
    PROPERTY_BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
    PROPERTY_TIMER_DELAY_LEVEL: Final = "TIMER_DELAY_LEVEL"
    PROPERTY_BORN_HOST: Final = "__BORNHOST"  # 5.x proxy: the 5.x client's address
    PROPERTY_DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
    PROPERTY_CRC32: Final = "__CRC32#"

    KEY_SEPARATOR: Final = " "


KEY_SEPARATOR: Final = " "  # MessageConst.KEY_SEPARATOR: KEYS holds space-separated keys

# Java MessageConst.STRING_HASH_SET: the names Message.putUserProperty refuses (4.x entries, and
# the 5.x ones finchmq uses: a user property must not turn a message into a timer message).
RESERVED_PROPERTY_NAMES: Final = frozenset(
    {
        MessageConst.PROPERTY_TRACE_SWITCH,
        MessageConst.PROPERTY_MSG_REGION,
        MessageConst.PROPERTY_KEYS,
        MessageConst.PROPERTY_TAGS,
        MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL,
        MessageConst.PROPERTY_RETRY_TOPIC,
        MessageConst.PROPERTY_REAL_TOPIC,
        MessageConst.PROPERTY_REAL_QUEUE_ID,
        MessageConst.PROPERTY_TRANSACTION_PREPARED,
        MessageConst.PROPERTY_PRODUCER_GROUP,
        MessageConst.PROPERTY_MIN_OFFSET,
        MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_BUYER_ID,
        MessageConst.PROPERTY_ORIGIN_MESSAGE_ID,
        MessageConst.PROPERTY_TRANSFER_FLAG,
        MessageConst.PROPERTY_CORRECTION_FLAG,
        MessageConst.PROPERTY_MQ2_FLAG,
        MessageConst.PROPERTY_RECONSUME_TIME,
        MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PROPERTY_MAX_RECONSUME_TIMES,
        MessageConst.PROPERTY_POP_CK,  # 5.x
        MessageConst.PROPERTY_POP_CK_OFFSET,  # 5.x
        MessageConst.PROPERTY_FIRST_POP_TIME,  # 5.x
        MessageConst.PROPERTY_CONSUME_START_TIMESTAMP,
        MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
        MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES,
        MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
        MessageConst.DUP_INFO,
        MessageConst.PROPERTY_EXTEND_UNIQ_INFO,
        MessageConst.PROPERTY_INSTANCE_ID,
        MessageConst.PROPERTY_CORRELATION_ID,
        MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        MessageConst.PROPERTY_MESSAGE_TTL,
        MessageConst.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
        MessageConst.PROPERTY_PUSH_REPLY_TIME,
        MessageConst.PROPERTY_CLUSTER,
        MessageConst.PROPERTY_MESSAGE_TYPE,
        MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET,
        MessageConst.PROPERTY_TIMER_DELAY_MS,
        MessageConst.PROPERTY_TIMER_DELAY_SEC,
        MessageConst.PROPERTY_TIMER_DELIVER_MS,
        MessageConst.PROPERTY_TIMER_ENQUEUE_MS,
        MessageConst.PROPERTY_TIMER_DEQUEUE_MS,
        MessageConst.PROPERTY_TIMER_ROLL_TIMES,
        MessageConst.PROPERTY_TIMER_OUT_MS,
        MessageConst.PROPERTY_TIMER_DEL_UNIQKEY,
    }
)


class MessageSysFlag:
    """SYSFLAG bits of a stored record (Java ``common/sysflag/MessageSysFlag.java``; spec §4.3)."""

    COMPRESSED_FLAG: Final = 0x1
    MULTI_TAGS_FLAG: Final = 0x2
    TRANSACTION_NOT_TYPE: Final = 0x0
    TRANSACTION_PREPARED_TYPE: Final = 0x4
    TRANSACTION_COMMIT_TYPE: Final = 0x8
    TRANSACTION_ROLLBACK_TYPE: Final = 0xC  # also the mask of the transaction bits
    BORNHOST_V6_FLAG: Final = 0x10
    STOREHOSTADDRESS_V6_FLAG: Final = 0x20
    NEED_UNWRAP_FLAG: Final = 0x40
    INNER_BATCH_FLAG: Final = 0x80
    COMPRESSION_LZ4_TYPE: Final = 0x100
    COMPRESSION_ZSTD_TYPE: Final = 0x200
    COMPRESSION_ZLIB_TYPE: Final = 0x300
    COMPRESSION_TYPE_COMPARATOR: Final = 0x700  # mask of the compression type bits

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        return flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @staticmethod
    def reset_transaction_value(flag: int, transaction_type: int) -> int:
        return (flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | transaction_type

    @staticmethod
    def clear_compressed_flag(flag: int) -> int:
        return flag & ~MessageSysFlag.COMPRESSED_FLAG

    @staticmethod
    def get_compression_type(flag: int) -> int:
        """The compression type bits (0 means zlib for 4.x clients)."""
        return flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR

    @staticmethod
    def check(flag: int, expected: int) -> bool:
        return flag & expected != 0


# Java 5.3.3 MessageConst.STRING_HASH_SET: the 4.x names and the 5.x ones a 5.x client may not set
# and that a 5.x message never shows as user properties (the gRPC front end).
SYSTEM_PROPERTY_NAMES_5X: Final = RESERVED_PROPERTY_NAMES | frozenset(
    {
        MessageConst.PROPERTY_TIMER_DELAY_LEVEL,
        MessageConst.PROPERTY_BORN_HOST,
        MessageConst.PROPERTY_BORN_TIMESTAMP,
        MessageConst.PROPERTY_DLQ_ORIGIN_TOPIC,
        MessageConst.PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
        MessageConst.PROPERTY_CRC32,
    }
)
