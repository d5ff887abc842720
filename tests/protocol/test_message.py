"""Tests for finchmq.protocol.message: message values, the property string (spec §4.4) and the
tag hash (§4.5)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from finchmq.protocol.errors import MessageDecodeError, MessageEncodeError
from finchmq.protocol.hosts import HostAddress
from finchmq.protocol.message import (
    Message,
    MessageExt,
    MessageQueue,
    properties_to_string,
    string_to_properties,
    tags_hash_code,
)
from finchmq.protocol.message_const import RESERVED_PROPERTY_NAMES, MessageConst

from .strategies import properties_st

# ---------------------------------------------------------------------------------------------
# Values


def test_message_is_immutable_and_helpers_copy() -> None:
    msg = Message.create("T", b"body", tags="TagA", keys=["k1", "k2"])
    assert msg.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.topic = "other"  # type: ignore[misc]
    delayed = msg.with_delay_time_level(3)
    assert delayed.delay_time_level == 3 and msg.delay_time_level == 0
    assert "DELAY" not in msg.properties
    assert delayed.without_property("DELAY") == msg
    assert msg.without_property("absent") is msg
    assert msg.with_properties({"A": "1", "TAGS": "TagB"}).properties == {
        "TAGS": "TagB",
        "KEYS": "k1 k2",
        "WAIT": "true",
        "A": "1",
    }
    assert msg.with_tags("X").tags == "X" and msg.tags == "TagA"
    assert msg.with_keys("a  b").key_list == ["a", "b"]
    assert Message("T").key_list == []


def test_message_accessors_follow_java() -> None:
    plain = Message("T", bytearray(b"abc"))  # type: ignore[arg-type]
    assert type(plain.body) is bytes and plain.body == b"abc"
    assert plain.wait_store_msg_ok is True  # absent means true
    assert plain.with_wait_store_msg_ok(False).wait_store_msg_ok is False
    assert plain.with_property("WAIT", "TRUE").wait_store_msg_ok is True
    assert plain.with_property("WAIT", "yes").wait_store_msg_ok is False
    assert Message.create("T", wait_store_msg_ok=False).properties == {"WAIT": "false"}
    assert Message.create("T", tags="", keys=iter([])).properties == {"WAIT": "true"}
    assert plain.tags is None and plain.keys is None and plain.unique_key is None
    assert plain.tags_code == 0 and plain.with_tags("TagA").tags_code == 2598919
    with pytest.raises(MessageDecodeError, match="DELAY"):
        _ = plain.with_property("DELAY", "soon").delay_time_level


def test_user_property_rejects_reserved_and_blank() -> None:
    assert {"KEYS", "TAGS", "UNIQ_KEY", "CLUSTER", "DELAY", "WAIT"} <= RESERVED_PROPERTY_NAMES
    msg = Message("T")
    assert msg.with_user_property("color", "red").properties == {"color": "red"}
    for name, value in [("TAGS", "x"), ("UNIQ_KEY", "x"), (" ", "x"), ("a", " ")]:
        with pytest.raises(MessageEncodeError):
            msg.with_user_property(name, value)


def test_message_ext_client_msg_id_rule() -> None:
    ext = MessageExt(topic="T", store_host=HostAddress("127.0.0.1", 10911), commit_log_offset=168)
    assert ext.msg_id == ext.client_msg_id == "7F00000100002A9F00000000000000A8"
    with_uniq = ext.with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "ABC")
    assert isinstance(with_uniq, MessageExt)
    assert with_uniq.client_msg_id == "ABC" and with_uniq.msg_id == ext.msg_id
    assert isinstance(ext, Message)


def test_message_queue_unchanged() -> None:
    a, b = MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-a", 2)
    assert a < b and str(a) == "MessageQueue [topic=T, brokerName=broker-a, queueId=1]"
    assert hash(a) == hash(MessageQueue("T", "broker-a", 1))


# ---------------------------------------------------------------------------------------------
# Properties


def test_properties_to_string_has_no_trailing_separator() -> None:
    assert properties_to_string({}) == ""
    assert properties_to_string({"TAGS": "TagA"}) == "TAGS\x01TagA"
    assert properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2"}) == "TAGS\x01TagA\x02KEYS\x01k1 k2"
    assert properties_to_string({"A": "x\x01y"}) == "A\x01x\x01y"


@pytest.mark.parametrize(
    "props",
    [{"": "v"}, {"k\x01": "v"}, {"k\x02": "v"}, {"k": ""}, {"k": "a\x02b"}, {"k": 1}, {1: "v"}],
)
def test_properties_to_string_rejects_pairs_that_would_not_read_back(props: dict[object, object]) -> None:
    with pytest.raises(MessageEncodeError):
        properties_to_string(props)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("TAGS\x01TagA", {"TAGS": "TagA"}),
        ("WAIT\x01true\x02TAGS\x01a\x02", {"WAIT": "true", "TAGS": "a"}),  # cpp trailing \x02
        ("\x02\x02A\x01b\x02\x02", {"A": "b"}),  # empty segments
        ("ab\x02A\x01b", {"A": "b"}),  # no \x01
        ("\x01b\x02A\x01\x02a\x01", {}),  # empty name / empty value / short
        ("k\x01v\x01w", {"k": "v\x01w"}),  # value keeps later \x01
        ("k\x01one\x02k\x01two", {"k": "two"}),  # last wins
        ("\x01", {}),
    ],
)
def test_string_to_properties_follows_java(text: str, expected: dict[str, str]) -> None:
    assert string_to_properties(text) == expected


@given(properties_st)
def test_properties_round_trip(props: dict[str, str]) -> None:
    text = properties_to_string(props)
    assert not text.endswith("\x02")
    assert string_to_properties(text) == props
    assert string_to_properties(text + "\x02") == props  # cpp's trailing separator


# ---------------------------------------------------------------------------------------------
# Tags


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("*", 42),
        ("", 0),
        (None, 0),
        ("hello world", 1794106052),
        ("polygenelubricants", -(2**31)),  # Java's famous Integer.MIN_VALUE hash
        ("é", 233),
        ("😀", 31 * 0xD83D + 0xDE00),  # a surrogate pair: two UTF-16 units
        ("a😀", (31 * (31 * 97 + 0xD83D) + 0xDE00)),
    ],
)
def test_tags_hash_code(tags: str | None, code: int) -> None:
    assert tags_hash_code(tags) == code


@given(st.text(max_size=40))
def test_tags_hash_code_matches_reference(text: str) -> None:
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i : i + 2], "big")) % 2**32
    expected = h - 2**32 if h >= 2**31 else h
    assert tags_hash_code(text) == (expected if text else 0)
