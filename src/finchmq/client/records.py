"""Reading the records a raw pull returns (``PullConsumer.pull_raw``) without the client's decoder.

A raw pull's body is stored records back to back, in the broker's commit-log layout (the
RocketMQ 4.x stored message format). Readers that turn them straight into columns (the Spark
source) use these names; everyone else lets the client decode them into ``MessageExt``.
"""

from __future__ import annotations

from finchmq.protocol.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from finchmq.protocol.message_const import MessageSysFlag
from finchmq.protocol.msg_id import offset_msg_id_from_packed
from finchmq.protocol.stored import MESSAGE_MAGIC_CODE, decode_stored

from .api import MAX_DECOMPRESSED_BODY, PullResultExt

__all__ = [
    "MAX_DECOMPRESSED_BODY",
    "MESSAGE_MAGIC_CODE",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "MessageSysFlag",
    "PullResultExt",
    "decode_stored",
    "offset_msg_id_from_packed",
]
