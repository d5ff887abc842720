"""Tests for finchmq.protocol.message_const: SYSFLAG helpers (spec §4.3)."""

from __future__ import annotations

from finchmq.protocol.message_const import MessageSysFlag


def test_sysflag_helpers() -> None:
    flag = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert MessageSysFlag.get_transaction_value(flag) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
    flag = MessageSysFlag.reset_transaction_value(flag, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert flag == MessageSysFlag.COMPRESSED_FLAG | 0x8
    assert MessageSysFlag.clear_compressed_flag(flag) == 0x8
    assert MessageSysFlag.check(flag, MessageSysFlag.COMPRESSED_FLAG)
    assert not MessageSysFlag.check(flag, MessageSysFlag.MULTI_TAGS_FLAG)
    assert MessageSysFlag.get_compression_type(0x301) == MessageSysFlag.COMPRESSION_ZLIB_TYPE
