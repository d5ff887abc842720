"""Hypothesis strategies for the protocol's message values, shared by the tests of their layouts."""

from __future__ import annotations

import ipaddress

from hypothesis import strategies as st

from finchmq.protocol.hosts import HostAddress
from finchmq.protocol.message import MessageExt

prop_names = st.text(min_size=1, max_size=12).filter(lambda s: "\x01" not in s and "\x02" not in s)

prop_values = st.text(min_size=1, max_size=20).filter(lambda s: "\x02" not in s)

properties_st = st.dictionaries(prop_names, prop_values, max_size=6)

int32 = st.integers(-(2**31), 2**31 - 1)

int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def hosts(draw: st.DrawFn) -> HostAddress:
    port = draw(st.integers(0, 65535))
    address = draw(st.ip_addresses())
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return HostAddress(address.compressed, port)


@st.composite
def message_exts(draw: st.DrawFn) -> MessageExt:
    born, store = draw(hosts()), draw(hosts())
    v6_bits = (0x10 if ":" in born.host else 0) | (0x20 if ":" in store.host else 0)
    return MessageExt(
        topic=draw(st.text(max_size=40).filter(lambda t: len(t.encode()) <= 127)),
        body=draw(st.binary(max_size=200)),
        flag=draw(int32),
        properties=draw(properties_st),
        queue_id=draw(int32),
        queue_offset=draw(int64),
        sys_flag=(draw(int32) & ~0x30) | v6_bits,
        born_timestamp=draw(int64),
        born_host=born,
        store_timestamp=draw(int64),
        store_host=store,
        commit_log_offset=draw(int64),
        body_crc=draw(st.integers(0, 2**31 - 1)),
        reconsume_times=draw(int32),
        prepared_transaction_offset=draw(int64),
    )
