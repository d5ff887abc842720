"""The frame codec: golden bytes, chunking at every point, limits, poisoning, fuzzing."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol import (
    CLOSED,
    NEED_DATA,
    CodecState,
    LanguageCode,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RemotingCodec,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    _json,
)
from finchmq.protocol.codec import decode_frame, encode_command

# spec §1.5: a SUCCESS response with an empty body for opaque 7.
GOLDEN_RESPONSE_HEADER = (
    b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}'
)
GOLDEN_RESPONSE = bytes.fromhex("000000720000006E") + GOLDEN_RESPONSE_HEADER

# What the C++ client 1.2.4 sends (spec §1.3, §7.1): jsoncpp FastWriter, trailing newline,
# numbers among the extFields, signature keys always present.
CPP_HEADER = (
    b'{"code":11,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
    b'"commitOffset":"-1","consumerGroup":"CG","maxMsgNums":32,"queueId":3,"queueOffset":"0",'
    b'"subVersion":"1795298082373","subscription":"*","suspendTimeoutMillis":"15000","sysFlag":6,'
    b'"topic":"TopicTest","unitMode":false},"flag":0,"language":"CPP","opaque":5,"remark":"","version":63}\n'
)


def frame(header: bytes, body: bytes = b"", serialize: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize << 24) | len(header)) + header + body


def feed_all(codec: RemotingCodec, data: bytes, chunk: int | None = None) -> list[RemotingCommand]:
    out: list[RemotingCommand] = []
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        codec.receive_data(data[i : i + step])
        while isinstance(cmd := codec.next_command(), RemotingCommand):
            out.append(cmd)
    return out


def test_golden_response_encodes_byte_for_byte() -> None:
    request = RemotingCommand.request(RequestCode.HEART_BEAT).with_opaque(7)
    assert RemotingCodec().send(request.make_response(ResponseCode.SUCCESS)) == GOLDEN_RESPONSE


def test_golden_response_decodes() -> None:
    cmd = decode_frame(GOLDEN_RESPONSE)
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (0, 7, 1, 409)
    assert cmd.is_response and not cmd.is_oneway
    assert cmd.language is LanguageCode.JAVA
    assert cmd.ext_fields == {} and cmd.body == b"" and cmd.remark is None


def test_cpp_request_with_numbers_and_trailing_newline_is_normalised_to_strings() -> None:
    cmd = decode_frame(frame(CPP_HEADER, b""))
    assert cmd.code == RequestCode.PULL_MESSAGE
    assert cmd.language is LanguageCode.CPP and cmd.version == 63 and cmd.remark == ""
    assert cmd.ext_fields["maxMsgNums"] == "32"
    assert cmd.ext_fields["queueId"] == "3"
    assert cmd.ext_fields["sysFlag"] == "6"
    assert cmd.ext_fields["unitMode"] == "false"  # Java's Boolean.toString, not Python's "False"
    assert all(type(v) is str for v in cmd.ext_fields.values())


def test_response_keeps_the_request_serialize_type_and_opaque() -> None:
    request = RemotingCommand.request(10, {"a": "1"}, serialize_type=SerializeType.ROCKETMQ).with_opaque(42)
    response = request.make_response(ResponseCode.SYSTEM_BUSY, "busy")
    wire = RemotingCodec().send(response)
    assert wire[4] == SerializeType.ROCKETMQ  # top byte of the header-length word
    decoded = decode_frame(wire)
    assert decoded.opaque == 42 and decoded.is_response and decoded.remark == "busy"
    assert decoded.serialize_type is SerializeType.ROCKETMQ


def test_rocketmq_binary_header_golden() -> None:
    # RocketMQSerializable layout built by hand: code, language, version, opaque, flag, remark,
    # then extFields as (int16 key length, key, int32 value length, value).
    ext = struct.pack(">h", 5) + b"topic" + struct.pack(">i", 9) + b"TopicTest"
    header = struct.pack(">hbhiii", 105, 3, 409, 77, 0, 2) + b"hi" + struct.pack(">i", len(ext)) + ext
    wire = frame(header, b"BODY", serialize=1)
    cmd = decode_frame(wire)
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert cmd.language is LanguageCode.PYTHON
    assert (cmd.version, cmd.opaque, cmd.remark) == (409, 77, "hi")
    assert cmd.ext_fields == {"topic": "TopicTest"} and cmd.body == b"BODY"
    assert encode_command(cmd) == wire


def test_send_with_opaque_override_leaves_the_command_alone() -> None:
    cmd = RemotingCommand.request(10)
    wire = RemotingCodec().send(cmd, opaque=99)
    assert decode_frame(wire).opaque == 99 and cmd.opaque == 0


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, None])
def test_many_frames_in_arbitrary_chunks(chunk: int | None) -> None:
    commands = [
        RemotingCommand.request(10, {"k": str(i)}, body=bytes([i]) * i).with_opaque(i) for i in range(20)
    ]
    wire = b"".join(encode_command(c) for c in commands)
    decoded = feed_all(RemotingCodec(), wire, chunk)
    assert [(c.opaque, c.ext_fields, c.body) for c in decoded] == [
        (c.opaque, c.ext_fields, c.body) for c in commands
    ]


def test_need_data_then_closed_then_eof_mid_frame_is_an_error() -> None:
    codec = RemotingCodec()
    assert codec.next_command() is NEED_DATA
    codec.receive_data(GOLDEN_RESPONSE[:10])
    assert codec.next_command() is NEED_DATA
    codec.receive_data(GOLDEN_RESPONSE[10:])
    assert isinstance(codec.next_command(), RemotingCommand)
    codec.receive_data(b"")
    assert codec.next_command() is CLOSED
    assert codec.state is CodecState.CLOSED

    torn = RemotingCodec()
    torn.receive_data(GOLDEN_RESPONSE[:-1])
    torn.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="closed in the middle of a frame"):
        torn.next_command()


def test_data_after_eof_is_a_local_error() -> None:
    codec = RemotingCodec()
    codec.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        codec.receive_data(b"x")


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (struct.pack(">ii", 17 * 1024 * 1024, 10), "exceeds max_frame_size"),
        (struct.pack(">ii", 2, 0), "below the minimum"),
        (struct.pack(">ii", -5, 0), "below the minimum"),
        (struct.pack(">ii", 20, 100), "header length 100 out of range"),
        (struct.pack(">ii", 20, 0), "out of range for a JSON header"),
        (struct.pack(">ii", 20, (1 << 24) | 5), "out of range for a ROCKETMQ header"),
        (struct.pack(">ii", 20, (7 << 24) | 5), "unknown serialize type 7"),
        (frame(b"{not json}"), "not valid JSON"),
        (frame(b"[1,2]"), "must be an object"),
        (frame(b'{"opaque":1}'), "required field 'code' is missing"),
        (frame(b'{"code":"ten"}'), "must be an integer"),
        (frame(b'{"code":1,"opaque":99999999999}'), "does not fit a Java int"),
        (frame(b'{"code":1,"remark":5}'), "remark must be a string"),
        (frame(b'{"code":1,"extFields":[1]}'), "extFields must be an object"),
        (frame(b'{"code":1,"extFields":{"a":"\\u00e9"}}', b"\xff"), None),  # body may be anything
    ],
)
def test_bad_frames_raise_a_clear_error(wire: bytes, message: str | None) -> None:
    codec = RemotingCodec()
    codec.receive_data(wire)
    if message is None:
        assert isinstance(codec.next_command(), RemotingCommand)
        return
    with pytest.raises(RemoteProtocolError, match=message) as info:
        codec.next_command()
    assert info.value.response_code is ResponseCode.SYSTEM_ERROR
    # Poisoned: the same error again, whatever arrives next, and nothing is buffered.
    codec.receive_data(GOLDEN_RESPONSE)
    with pytest.raises(RemoteProtocolError, match=message):
        codec.next_command()
    assert codec.state is CodecState.ERROR and codec.buffered == 0


def test_oversized_frame_is_rejected_before_it_is_buffered() -> None:
    codec = RemotingCodec(max_frame_size=1024)
    codec.receive_data(struct.pack(">ii", 2000, 10))
    with pytest.raises(RemoteProtocolError, match="exceeds max_frame_size=1024"):
        codec.next_command()


def test_incomplete_frame_within_limit_waits() -> None:
    codec = RemotingCodec(max_frame_size=1024)
    codec.receive_data(struct.pack(">ii", 1000, 10) + b"x" * 500)
    assert codec.next_command() is NEED_DATA
    assert codec.buffered == 508


def test_encoding_refuses_what_the_peer_would_refuse() -> None:
    codec = RemotingCodec(max_frame_size=64)
    with pytest.raises(LocalProtocolError, match="exceeds max_frame_size=64"):
        codec.send(RemotingCommand.request(10, body=b"x" * 100))
    with pytest.raises(LocalProtocolError, match="must be str"):
        RemotingCodec().send(RemotingCommand.request(10, {"queueId": 3}))  # type: ignore[dict-item]
    with pytest.raises(LocalProtocolError, match="ROCKETMQ header"):
        RemotingCodec().send(RemotingCommand.request(40000, serialize_type=SerializeType.ROCKETMQ))


def test_abstract_protocol_error_cannot_be_raised() -> None:
    with pytest.raises(TypeError):
        ProtocolError("x")


# -- property tests ---------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize = draw(st.sampled_from(SerializeType))
    int16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
    return RemotingCommand(
        code=draw(int16 if serialize is SerializeType.ROCKETMQ else _int32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(int16 if serialize is SerializeType.ROCKETMQ else _int32),
        opaque=draw(_int32),
        flag=draw(st.sampled_from([0, 1, 2, 3])),
        remark=draw(st.none() | _text.filter(bool)),
        ext_fields=draw(st.dictionaries(_text, _text, max_size=5)),
        body=draw(st.binary(max_size=64)),
        serialize_type=serialize,
    )


@given(commands())
def test_round_trip(cmd: RemotingCommand) -> None:
    assert decode_frame(encode_command(cmd)) == cmd


@given(st.lists(commands(), min_size=1, max_size=8), st.data())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_cutting_the_stream_anywhere_gives_the_same_commands(
    cmds: list[RemotingCommand], data: st.DataObject
) -> None:
    wire = b"".join(encode_command(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=10)))
    codec = RemotingCodec()
    out: list[RemotingCommand] = []
    previous = 0
    for cut in [*cuts, len(wire)]:
        if cut > previous:  # b"" would mean end of input
            codec.receive_data(wire[previous:cut])
        previous = cut
        while isinstance(cmd := codec.next_command(), RemotingCommand):
            out.append(cmd)
    codec.receive_data(b"")
    assert codec.next_command() is CLOSED
    assert out == cmds


def _mutations() -> st.SearchStrategy[bytes]:
    valid = frame(CPP_HEADER, b"body") + GOLDEN_RESPONSE

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        data = bytearray(valid)
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        return bytes(data)

    return st.binary(max_size=300) | mutate()


@given(_mutations(), st.integers(1, 50))
@settings(max_examples=500)
def test_fuzz_only_commands_or_protocol_errors(data: bytes, chunk: int) -> None:
    codec = RemotingCodec(max_frame_size=4096)
    try:
        for i in range(0, len(data), chunk):
            codec.receive_data(data[i : i + chunk])
            while isinstance(cmd := codec.next_command(), RemotingCommand):
                assert all(type(v) is str for v in cmd.ext_fields.values())
        codec.receive_data(b"")
        assert codec.next_command() is CLOSED
    except RemoteProtocolError:
        assert codec.state is CodecState.ERROR


def test_stdlib_json_fallback_writes_the_same_header_bytes() -> None:
    header = {"code": 0, "extFields": {"k": "\x01é\x02"}, "language": "JAVA"}
    assert _json._dumps_stdlib(header) == _json.dumps(header)
    assert json.loads(_json.dumps(header)) == header
