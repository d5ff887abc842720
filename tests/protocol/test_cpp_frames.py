"""Golden frames recorded from the official C++ client (librocketmq 1.2.4, via PyPI rocketmq
0.4.4) by ``record_cpp_frames.py``: each decodes with the codec and with the typed header or
body its request code uses, with the quirks the spec describes."""

from __future__ import annotations

from pathlib import Path

import pytest

from finchmq.protocol import LanguageCode, RemotingCodec, RequestCode, SerializeType
from finchmq.protocol.batch import decode_batch
from finchmq.protocol.bodies import ConsumeType, HeartbeatData, LockBatchRequestBody, MessageModel
from finchmq.protocol.codec import decode_frame, encode_command
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.headers import (
    REQUEST_HEADERS,
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from finchmq.protocol.message import string_to_properties

DATA = Path(__file__).parent / "data" / "cpp"
FRAMES = sorted(DATA.glob("*.bin"))


def load(name: str) -> bytes:
    return (DATA / f"{name}.bin").read_bytes()


def test_the_recordings_are_present() -> None:
    assert {p.stem for p in FRAMES} >= {
        "GET_ROUTEINFO_BY_TOPIC", "SEND_MESSAGE", "SEND_MESSAGE_BATCH", "HEART_BEAT_CONSUMER", "PULL_MESSAGE",
        "QUERY_CONSUMER_OFFSET", "UPDATE_CONSUMER_OFFSET", "CONSUMER_SEND_MSG_BACK", "LOCK_BATCH_MQ",
        "UNLOCK_BATCH_MQ", "GET_CONSUMER_LIST_BY_GROUP", "UNREGISTER_CLIENT",
    }  # fmt: skip


@pytest.mark.parametrize("path", FRAMES, ids=lambda p: p.stem)
def test_every_cpp_frame_decodes_with_its_typed_header(path: Path) -> None:
    raw = path.read_bytes()
    cmd = decode_frame(raw)
    assert cmd.language is LanguageCode.CPP and cmd.version == 63
    assert cmd.serialize_type is SerializeType.JSON and cmd.flag == 0 and cmd.remark == ""
    assert {"AccessKey", "OnsChannel", "Signature"} <= cmd.ext_fields.keys()
    header_len = int.from_bytes(raw[4:8], "big")
    assert raw[8 + header_len - 1 : 8 + header_len] == b"\n", (
        "jsoncpp's FastWriter ends the header with a newline"
    )
    header_class = REQUEST_HEADERS.get(RequestCode(cmd.code))
    if header_class is not None:
        header_class.from_ext_fields(cmd.ext_fields)  # every required field is there and parses
    # Chunked one byte at a time, the same command comes out.
    codec = RemotingCodec()
    for i in range(len(raw)):
        codec.receive_data(raw[i : i + 1])
    again = codec.next_command()
    assert again == cmd
    # Re-encoded as JSON it still decodes to the same command (the codec is lossless).
    assert decode_frame(encode_command(cmd)) == cmd


def test_send_message_uses_v1_names_and_cpp_property_quirks() -> None:
    cmd = decode_frame(load("SEND_MESSAGE"))
    header = SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert (header.topic, header.default_topic, header.default_topic_queue_nums) == ("GoldenT", "TBW102", 4)
    assert header.batch is False and header.unit_mode is False  # "0" on the wire
    assert header.properties is not None and header.properties.endswith("\x02")  # cpp's trailing separator
    props = string_to_properties(header.properties)
    assert props["WAIT"] == "true" and props["TAGS"] == "TagA" and props["KEYS"] == "k0" and props["p"] == "v"
    assert len(props["UNIQ_KEY"]) == 32 and props["UNIQ_KEY"].startswith("0100007F")  # little-endian ip
    assert list(props) == sorted(props), "cpp writes properties sorted (std::map)"
    assert cmd.body == b"body-0"


def test_cpp_batch_is_code_10_with_batch_1_and_a_batch_body() -> None:
    cmd = decode_frame(load("SEND_MESSAGE_BATCH"))
    assert cmd.code == RequestCode.SEND_MESSAGE
    header = SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert cmd.ext_fields["batch"] == "1" and header.batch is True  # "1" read as true (spec §3.2.1)
    items = decode_batch(cmd.body)
    assert [item.body for item in items] == [b"body-0", b"body-1", b"body-2", b"body-3"]
    assert all("UNIQ_KEY" in item.properties for item in items)


def test_consumer_heartbeat_writes_enums_as_ordinals_and_sub_version_as_string() -> None:
    cmd = decode_frame(load("HEART_BEAT_CONSUMER"))
    data = HeartbeatData.from_json(cmd.body)
    consumer = data.consumer_data_set[0]
    assert consumer.group_name == "GoldenCG"
    assert (
        consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
        and consumer.message_model is MessageModel.CLUSTERING
    )
    topics = {s.topic for s in consumer.subscription_data_set}
    assert topics == {"GoldenT", "%RETRY%GoldenCG"}
    assert all(s.sub_version > 1_700_000_000_000 for s in consumer.subscription_data_set)
    assert data.client_id.endswith("-127.0.0.1@DEFAULT")


def test_pull_message_flags_and_subscription() -> None:
    header = PullMessageRequestHeader.from_ext_fields(decode_frame(load("PULL_MESSAGE")).ext_fields)
    assert header.sys_flag & PullSysFlag.SUSPEND and header.sys_flag & PullSysFlag.SUBSCRIPTION
    assert (header.max_msg_nums, header.suspend_timeout_millis, header.subscription) == (32, 15000, "*")
    assert build_subscription_data(header.topic, header.subscription).sub_string == "*"


def test_lock_batch_body_is_plain_json_with_a_newline() -> None:
    body = decode_frame(load("LOCK_BATCH_MQ")).body
    assert body.endswith(b"\n")
    request = LockBatchRequestBody.from_json(body)
    assert request.consumer_group == "GoldenOrderly" and request.mq_set[0].topic == "GoldenT"
