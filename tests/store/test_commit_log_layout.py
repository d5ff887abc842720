"""The commit log writes records with the protocol's packer (``pack_stored_head`` +
``stored_tail``) but in its own ways, for speed: a single message in place under the put lock,
head last; a batch encoded before the lock with its offsets and store time patched in under it.
These tests pin both, byte for byte, to the reference encoder (``encode_stored``) and decoder,
for arbitrary messages, hosts, sys flags and batches, on a real store."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol.batch import encode_batch
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import Message, properties_to_string
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.stored import StoredLayout, decode_stored, encode_stored
from finchmq.store import (
    DefaultMessageStore,
    MessageExtBatch,
    MessageExtBrokerInner,
    stored_properties_string,
)
from finchmq.store.recovery import scan

from .conftest import batch, msg, small_config


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


# ---------------------------------------------------------------------------------------------
# Every writer against the reference encoder


_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_SMALL_FLAGS = st.integers(0, 0x7FF)  # the bits MessageSysFlag names, in every combination

hosts = st.one_of(
    st.builds(pack_host, st.ip_addresses(v=4).map(str), st.integers(0, 0xFFFF)),
    st.builds(pack_host, st.ip_addresses(v=6).map(str), st.integers(0, 0xFFFF)),
)
topics = st.text(
    st.characters(categories=("L", "N")) | st.sampled_from("_-%|"), min_size=1, max_size=16
)  # up to 64 UTF-8 bytes; the consume queues make directories of them
property_maps = st.dictionaries(
    st.text(
        st.characters(exclude_characters="\x01\x02", exclude_categories=("Cs",)), min_size=1, max_size=12
    ),
    st.text(st.characters(exclude_characters="\x02", exclude_categories=("Cs",)), min_size=1, max_size=24),
    max_size=3,
)


@dataclass
class Single:
    """One put_message: the inner message and whether the broker pre-encoded its properties."""

    topic: str
    body: bytes
    queue_id: int
    flag: int
    properties: dict[str, str]
    pre_encoded: bool
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int

    def inner(self) -> MessageExtBrokerInner:
        return MessageExtBrokerInner(
            self.topic,
            self.body,
            self.queue_id,
            self.flag,
            self.properties,
            stored_properties_string(self.properties) if self.pre_encoded else None,
            None,
            self.sys_flag,
            self.born_timestamp,
            self.born_host,
            self.store_host,
            self.reconsume_times,
            self.prepared_transaction_offset,
        )

    def stored_properties(self) -> bytes:
        text = (
            stored_properties_string(self.properties)
            if self.pre_encoded
            else properties_to_string(self.properties)
        )
        return text.encode()


@dataclass
class Batch:
    """One put_messages: items (flag, body, properties) sharing the rest."""

    topic: str
    queue_id: int
    items: list[tuple[int, bytes, dict[str, str]]]
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b""
    store_host: bytes = b""

    def inner(self) -> MessageExtBatch:
        body = encode_batch([Message(self.topic, b, flag=f, properties=p) for f, b, p in self.items])
        return MessageExtBatch(
            topic=self.topic,
            body=body,
            queue_id=self.queue_id,
            properties=self.properties,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_host=self.store_host,
        )

    def stored_properties(self, index: int) -> bytes:
        """Java ``MessageExtEncoder.encode(MessageExtBatch)``: the item's properties, a separator
        when both are there, then the batch's."""
        own = properties_to_string(self.items[index][2])
        if not self.properties:
            return own.encode()
        shared = properties_to_string(self.properties)
        return (f"{own}\x02{shared}" if own else shared).encode()


singles = st.builds(
    Single,
    topic=topics,
    body=st.binary(max_size=256),
    queue_id=st.integers(0, 2),
    flag=_INT32,
    properties=property_maps,
    pre_encoded=st.booleans(),
    sys_flag=st.one_of(_SMALL_FLAGS, _INT32),
    born_timestamp=_INT64,
    born_host=hosts,
    store_host=hosts,
    reconsume_times=_INT32,
    prepared_transaction_offset=_INT64,
)
batches = st.builds(
    Batch,
    topic=topics,
    queue_id=st.integers(0, 2),
    items=st.lists(st.tuples(_INT32, st.binary(max_size=200), property_maps), min_size=1, max_size=4),
    # Java refuses DELAY and transaction bits on a batch (so does the store)
    properties=property_maps.map(lambda p: {k: v for k, v in p.items() if k != "DELAY"}),
    sys_flag=st.one_of(_SMALL_FLAGS, _INT32).map(lambda f: f & ~0xC),
    born_timestamp=_INT64,
    born_host=hosts,
    store_host=hosts,
)


def _half(sys_flag: int) -> bool:
    return MessageSysFlag.get_transaction_value(sys_flag) in (
        MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    )


def _segment_bytes(store: DefaultMessageStore, offset: int, size: int) -> bytes:
    data = store.commit_log.get_data(offset, size)
    assert data is not None
    with data:
        return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(puts=st.lists(st.one_of(singles, batches), min_size=1, max_size=12))
def test_every_writer_writes_what_the_reference_encoder_writes(
    tmp_path_factory: pytest.TempPathFactory, puts: list[Single | Batch]
) -> None:
    # 8 KiB segments: a dozen puts roll over, so the BLANK filler is written between them too
    cfg = small_config(tmp_path_factory.mktemp("layout") / "store", mapped_file_size_commit_log=8192)
    queue_offsets: dict[tuple[str, int], int] = {}
    with DefaultMessageStore(cfg) as store:
        for put in puts:
            key = (put.topic, put.queue_id)
            if isinstance(put, Single):
                result = store.put_message(put.inner())
                assert result.is_ok(), result.status
                ar = result.append_message_result
                assert ar is not None and ar.msg_num == 1
                half = _half(put.sys_flag)
                assert ar.logics_offset == (0 if half else queue_offsets.get(key, 0))
                if not half:
                    queue_offsets[key] = ar.logics_offset + 1
                expected = encode_stored(
                    topic=put.topic.encode(),
                    body=put.body,
                    properties=put.stored_properties(),
                    born_host=put.born_host,
                    store_host=put.store_host,
                    queue_id=put.queue_id,
                    flag=put.flag,
                    queue_offset=ar.logics_offset,
                    commit_log_offset=ar.wrote_offset,
                    sys_flag=put.sys_flag,
                    born_timestamp=put.born_timestamp,
                    store_timestamp=ar.store_timestamp,
                    reconsume_times=put.reconsume_times,
                    prepared_transaction_offset=put.prepared_transaction_offset,
                )
                assert ar.wrote_bytes == len(expected)
                assert _segment_bytes(store, ar.wrote_offset, len(expected)) == expected
                assert decode_stored(expected, verify_crc=True).properties == {
                    k: v
                    for k, v in put.properties.items()
                    if not (put.pre_encoded and k == MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
                }
            else:
                result = store.put_messages(put.inner())
                assert result.is_ok(), result.status
                ar = result.append_message_result
                assert ar is not None and ar.msg_num == len(put.items)
                assert ar.logics_offset == queue_offsets.get(key, 0)
                queue_offsets[key] = ar.logics_offset + len(put.items)
                records = []
                for i, (item_flag, item_body, _) in enumerate(put.items):
                    records.append(
                        encode_stored(
                            topic=put.topic.encode(),
                            body=item_body,
                            properties=put.stored_properties(i),
                            born_host=put.born_host,
                            store_host=put.store_host,
                            queue_id=put.queue_id,
                            flag=item_flag,
                            queue_offset=ar.logics_offset + i,
                            commit_log_offset=ar.offsets[i],
                            sys_flag=put.sys_flag,
                            born_timestamp=put.born_timestamp,
                            store_timestamp=ar.store_timestamp,
                        )
                    )
                assert list(ar.offsets) == [
                    ar.wrote_offset + sum(map(len, records[:i])) for i in range(len(records))
                ]
                expected = b"".join(records)
                assert ar.wrote_bytes == len(expected)
                assert _segment_bytes(store, ar.wrote_offset, len(expected)) == expected
        # and the recovery scan accepts all of it, to the end of the log
        end = store.get_max_phy_offset()
        found = scan(store.commit_log.mapped_file_queue, 0, True)
        assert (found.end, found.corrupt, found.records) == (
            end,
            None,
            sum(1 if isinstance(p, Single) else len(p.items) for p in puts),
        )
