"""``StoredLayout`` (protocol/message.py) is the one definition of where a stored record's fields
sit: the commit log writes records in place with it, the decoder reads them; both must agree,
for single messages and batches, IPv4 and IPv6 born hosts."""

from __future__ import annotations

from finchmq.protocol.message import StoredLayout, decode_stored, pack_host
from finchmq.store import DefaultMessageStore

from .conftest import batch, msg


def _check(store: DefaultMessageStore, offset: int) -> None:
    data = store.commit_log.get_data(offset)
    assert data is not None
    record = bytes(data)
    decoded = decode_stored(record)
    assert StoredLayout.read_store_timestamp(record) == decoded.store_timestamp > 0
    queue_offset, physical = StoredLayout.OFFSETS.unpack_from(record, StoredLayout.QUEUE_OFFSET)
    assert (
        (queue_offset, physical)
        == (decoded.queue_offset, decoded.commit_log_offset)
        == (queue_offset, offset)
    )


def test_the_commit_log_and_the_decoder_agree_on_the_layout(store: DefaultMessageStore) -> None:
    single = store.put_message(msg("T", b"one"))
    v6 = msg("T", b"v6")
    v6.born_host = pack_host("::1", 5000)
    ipv6 = store.put_message(v6)
    batched = store.put_messages(batch("T", [b"a", b"b", b"c"]))
    for result in (single, ipv6, batched):
        assert result.is_ok() and result.append_message_result is not None
    assert single.append_message_result and ipv6.append_message_result and batched.append_message_result
    _check(store, single.append_message_result.wrote_offset)
    _check(store, ipv6.append_message_result.wrote_offset)
    for offset in batched.append_message_result.offsets:
        _check(store, offset)
