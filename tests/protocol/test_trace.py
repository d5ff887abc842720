"""Message trace records: the text Java 4.9.8's ``TraceDataEncoder.encoderFromContextBean``
writes (the expected strings were printed by Java's encoder for the same contexts), and the
decoder reads them back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol.trace import (
    TraceBean,
    TraceContext,
    TraceMessageType,
    TraceType,
    decode_trace_data,
    encode_trace_context,
    trace_views,
)


def java(text: str) -> str:
    return text.replace("\\x01", "\x01").replace("\\x02", "\x02")


PUB = TraceContext(
    TraceType.Pub, 1700000000000, "DefaultRegion", "pg", cost_time=3,
    trace_beans=[TraceBean(topic="T", msg_id="UNIQ1", tags="TagA", keys="k1 k2", store_host="127.0.0.1:10911",
                           body_length=5, offset_msg_id="OFF1")],
)  # fmt: skip
BEFORE = TraceContext(
    TraceType.SubBefore, 1700000000100, "DefaultRegion", "cg", request_id="REQ1",
    trace_beans=[TraceBean(msg_id="UNIQ1", retry_times=2, keys="k1 k2")],
)  # fmt: skip
AFTER = TraceContext(
    TraceType.SubAfter, 1700000000100, group_name="cg", request_id="REQ1", cost_time=7,
    trace_beans=[TraceBean(msg_id="UNIQ1", retry_times=2, keys="k1 k2")],
)  # fmt: skip


def test_records_are_javas_text() -> None:
    assert encode_trace_context(PUB) == (
        java(r"Pub\x011700000000000\x01DefaultRegion\x01pg\x01T\x01UNIQ1\x01TagA\x01k1 k2\x01127.0.0.1:10911"
             r"\x015\x013\x010\x01OFF1\x01true\x02"),
        ["UNIQ1", "k1", "k2"],
    )  # fmt: skip
    no_tags = TraceContext(
        TraceType.Pub, 1700000000000, "DefaultRegion", "pg", cost_time=3, success=False,
        trace_beans=[TraceBean(topic="T", msg_id="UNIQ2", tags=None, keys=None, store_host="h:1", body_length=0,
                               msg_type=TraceMessageType.Delay_Msg, offset_msg_id="OFF2")],
    )  # fmt: skip
    assert encode_trace_context(no_tags)[0] == java(
        r"Pub\x011700000000000\x01DefaultRegion\x01pg\x01T\x01UNIQ2\x01null\x01null\x01h:1\x010\x013\x013\x01OFF2"
        r"\x01false\x02"
    )
    assert encode_trace_context(BEFORE)[0] == java(
        r"SubBefore\x011700000000100\x01DefaultRegion\x01cg\x01REQ1\x01UNIQ1\x012\x01k1 k2\x02"
    )
    assert encode_trace_context(AFTER)[0] == java(
        r"SubAfter\x01REQ1\x01UNIQ1\x017\x01true\x01k1 k2\x010\x011700000000100\x01cg\x02"
    )


END = TraceContext(
    TraceType.EndTransaction, 1700000000200, "DefaultRegion", "pg",
    trace_beans=[TraceBean(topic="T", msg_id="UNIQ1", tags="TagA", keys="k1 k2", store_host="127.0.0.1:10911",
                           msg_type=TraceMessageType.Trans_msg_Commit, transaction_id="UNIQ1",
                           transaction_state="COMMIT_MESSAGE")],
)  # fmt: skip


def test_end_transaction_records_are_javas_text() -> None:
    # printed by Java 4.9.8's TraceDataEncoder.encoderFromContextBean for the same contexts
    assert encode_trace_context(END) == (
        java(r"EndTransaction\x011700000000200\x01DefaultRegion\x01pg\x01T\x01UNIQ1\x01TagA\x01k1 k2"
             r"\x01127.0.0.1:10911\x012\x01UNIQ1\x01COMMIT_MESSAGE\x01false\x02"),
        ["UNIQ1", "k1", "k2"],
    )  # fmt: skip
    checked = TraceContext(
        TraceType.EndTransaction, 1700000000200, "DefaultRegion", "pg",
        trace_beans=[TraceBean(topic="T", msg_id="UNIQ2", tags=None, keys=None, store_host="h:1",
                               msg_type=TraceMessageType.Trans_msg_Commit, transaction_id=None,
                               transaction_state="UNKNOW", from_transaction_check=True)],
    )  # fmt: skip
    assert encode_trace_context(checked) == (
        java(r"EndTransaction\x011700000000200\x01DefaultRegion\x01pg\x01T\x01UNIQ2\x01null\x01null\x01h:1"
             r"\x012\x01null\x01UNKNOW\x01true\x02"),
        ["UNIQ2"],
    )  # fmt: skip
    [back] = decode_trace_data(encode_trace_context(END)[0])
    assert back == END


def test_a_batch_decodes_into_views_of_one_message() -> None:
    body = "".join(encode_trace_context(c)[0] for c in (PUB, BEFORE, AFTER))
    [pub, before, after] = decode_trace_data(body)
    assert (pub.trace_type, pub.group_name, pub.cost_time, pub.trace_beans[0].offset_msg_id) == (
        TraceType.Pub, "pg", 3, "OFF1",
    )  # fmt: skip
    assert (before.request_id, before.trace_beans[0].retry_times) == ("REQ1", 2)
    assert (after.group_name, after.cost_time, after.success) == ("cg", 7, True)
    views = trace_views("UNIQ1", body, "10.0.0.1")
    assert [(v.msg_type, v.group_name, v.status) for v in views] == [
        ("Pub", "pg", "success"), ("SubBefore", "cg", "success"), ("SubAfter", "cg", "success"),
    ]  # fmt: skip
    assert trace_views("OTHER", body, "10.0.0.1") == []


@given(st.text())
def test_the_decoder_never_raises(text: str) -> None:
    decode_trace_data(text)
