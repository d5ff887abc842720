"""What the broker hands the store: ``MessageExtBrokerInner`` and ``MessageExtBatch`` (Java names).

Imports: ``finchmq.protocol`` (host packing, property keys, messages).

Strategy:
    Plain slotted dataclasses (cheap to build on the send path). Hosts are the packed 8-byte
    (IPv4) or 20-byte (IPv6) fields of the stored layout (``pack_host``), so the store never
    parses addresses. A batch carries the SEND_BATCH_MESSAGE body as received (spec §4.6); the
    store turns each item into a stored record itself, appending the batch-level properties
    to each item's, as Java's ``MessageExtEncoder.encode(MessageExtBatch)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import MessageExt, properties_to_string
from finchmq.protocol.message_const import MessageConst

__all__ = ["LOCAL_HOST", "MessageExtBatch", "MessageExtBrokerInner", "stored_properties_string"]

LOCAL_HOST: Final = pack_host("127.0.0.1", 0)


def stored_properties_string(properties: Mapping[str, str], *, trusted: bool = False) -> str:
    """The properties as stored: all but WAIT, which only tells this put whether to wait
    (``trusted`` as ``properties_to_string``)."""
    return properties_to_string(properties, without=MessageConst.PROPERTY_WAIT_STORE_MSG_OK, trusted=trusted)


def _wait(properties: Mapping[str, str]) -> bool:
    value = properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
    return value is None or value.lower() == "true"


# Not kw_only: the send path passes arguments by position, about twice as fast as keywords;
# other callers name them.
@dataclass(slots=True)
class MessageExtBrokerInner:
    """One message to store (Java ``MessageExtBrokerInner``).

    ``properties_string`` is used verbatim when set (e.g. the SEND header's ``properties``), else
    ``properties`` is encoded. ``tags_code`` defaults to the hash of TAGS (or the deliver time
    for SCHEDULE_TOPIC_XXXX with DELAY, computed at store time).
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)
    properties_string: str | None = None
    tags_code: int | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCAL_HOST
    store_host: bytes = LOCAL_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def wait_store_msg_ok(self) -> bool:
        """WAIT property (default true): a SYNC_FLUSH put waits for the flush."""
        return _wait(self.properties)

    @classmethod
    def from_message_ext(
        cls,
        msg: MessageExt,
        *,
        topic: str,
        queue_id: int,
        properties: Mapping[str, str],
        store_host: bytes | None = None,
        sys_flag: int | None = None,
        prepared_transaction_offset: int = 0,
    ) -> MessageExtBrokerInner:
        """A stored message written again (a delayed delivery, a transaction's half message,
        commit or discard): its body, flag, born time and host and reconsume count, with a new
        topic, queue and properties; the store host stays unless given."""
        return cls(
            topic=topic,
            body=msg.body,
            queue_id=queue_id,
            flag=msg.flag,
            properties=properties,
            properties_string=stored_properties_string(properties),
            sys_flag=msg.sys_flag if sys_flag is None else sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=pack_host(msg.born_host.host, msg.born_host.port),
            store_host=store_host
            if store_host is not None
            else pack_host(msg.store_host.host, msg.store_host.port),
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
        )


@dataclass(slots=True, kw_only=True)
class MessageExtBatch:
    """A batch to store (Java ``MessageExtBatch``): all items share topic, queue, sysFlag, hosts."""

    topic: str
    body: bytes | bytearray | memoryview  # the batch body, spec §4.6
    queue_id: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)  # batch-level, appended to each item
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCAL_HOST
    store_host: bytes = LOCAL_HOST

    @property
    def wait_store_msg_ok(self) -> bool:
        return _wait(self.properties)
