"""Differential tests: the compiled twins (``_codec_c.pyx``) against the pure functions they replace.

Same input, same outcome: equal commands (field by field, extFields in the same order) or equal
bytes, or the same exception type with the same message. Skips, saying why, where the extensions
are not built (``pip install -e .`` builds them when a C compiler is present).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import struct
import subprocess
import sys
import zlib
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol import _compiled, batch, codec, headers, message, stored
from finchmq.protocol.codes import LanguageCode, ResponseCode, SerializeType
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import Message
from finchmq.protocol.stored import encode_stored

_codec_c = pytest.importorskip(
    "finchmq.protocol._codec_c", reason="the compiled twins are not built (pip install -e . builds them)"
)
_codec_c.bind(codec._command_from_json_py, codec._json_header_py)

int32 = st.integers(-(2**31), 2**31 - 1)
texts = st.text(max_size=24)


def _fields(cmd: RemotingCommand) -> tuple[Any, ...]:
    return (
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
        list(cmd.ext_fields.items()), cmd.body, cmd.serialize_type,
    )  # fmt: skip


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    return ("returned", _fields(result) if isinstance(result, RemotingCommand) else result)


def _same_decode(header: bytes | bytearray) -> None:
    pure = _outcome(codec._command_from_json_py, header, b"body")
    compiled = _outcome(_codec_c.command_from_json, header, b"body")
    assert compiled == pure, header


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    return RemotingCommand(
        draw(int32),
        draw(st.sampled_from(LanguageCode)),
        draw(int32),
        draw(int32),
        draw(int32),
        draw(st.none() | texts),
        draw(st.dictionaries(texts, texts, max_size=8)),
        b"",
        SerializeType.JSON,
    )


@given(commands())
def test_what_finchmq_writes_decodes_the_same(cmd: RemotingCommand) -> None:
    _same_decode(codec._json_header_py(cmd, cmd.opaque))


@given(commands())
def test_the_header_encodes_to_the_same_bytes(cmd: RemotingCommand) -> None:
    assert _outcome(_codec_c.json_header, cmd, cmd.opaque) == _outcome(codec._json_header_py, cmd, cmd.opaque)


# Values a peer may put under any key: what the pure decoder coerces, refuses or ignores.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts
    | st.sampled_from(["310", " 7 ", "1.0", "JAVA", "CPP", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
header_keys = (
    st.sampled_from(
        ["code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC"]
    )
    | texts
)


@st.composite
def odd_headers(draw: st.DrawFn) -> bytes:
    obj: dict[str, Any] = {}
    if draw(st.booleans()):
        obj["code"] = draw(int32)
    for key, value in draw(st.lists(st.tuples(header_keys, json_values), max_size=8)):
        obj[key] = value
    if draw(st.booleans()):
        obj["extFields"] = draw(st.dictionaries(texts, texts | json_values, max_size=4))
    spaced = draw(st.booleans())
    text = json.dumps(
        obj, ensure_ascii=draw(st.booleans()), separators=(", ", ": ") if spaced else (",", ":")
    )
    data = text.encode("utf-8", "surrogatepass")
    # Byte-level damage: truncation, an inserted byte, a flipped byte.
    damage = draw(st.sampled_from(["none", "none", "truncate", "insert", "flip"]))
    if damage != "none" and data:
        at = draw(st.integers(0, len(data) - 1))
        if damage == "truncate":
            data = data[:at]
        elif damage == "insert":
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at:]
        else:
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(odd_headers())
def test_odd_and_broken_headers_give_the_same_command_or_the_same_error(header: bytes) -> None:
    _same_decode(header)
    _same_decode(bytearray(header))


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":310,"code":"12"}',  # the last duplicate wins, as orjson and fastjson
        b'{"code":2147483648}',
        b'{"code":-2147483648,"opaque":01}',
        b'{"code":1,"language":7,"extFields":{"a":"\\u0001\\u00e9\\u20ac","a":"b"}}',
        b'{"code":1,"extFields":{"k":"\\ud83d\\ude00"}}',  # a surrogate pair
        b'{"code":1,"extFields":{"k":"\\ud83d"}}',  # a lone surrogate
        b'{"code":1,"remark":null}',
        b'{"c\\u006fde":5}',  # an escaped key
        b'{"code":1} x',
        b' {"code" : 1 , "extFields" : { } } ',
        b'{"code":1,"extFields":{"k":"\xff"}}',  # not UTF-8
        b'{"code":1,"x":123456789012345678901234567890}',
        b'{"code":1.0}',
        b"[]",
        b"",
    ],
)
def test_edge_headers(header: bytes) -> None:
    _same_decode(header)


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(1, ext_fields={"k": "\ud800"}),  # a lone surrogate: orjson refuses it
        RemotingCommand(2**63),  # past int64: the stdlib path writes it
        RemotingCommand(True),  # type: ignore[arg-type]
        RemotingCommand(1, ext_fields={1: "x"}),  # type: ignore[dict-item]
        RemotingCommand(1, remark='\x00\x1f\x7f"\\/é€😀', ext_fields={"\x01": "\x02\b\f\n\r\t"}),
    ],
)
def test_edge_commands_encode_the_same(cmd: RemotingCommand) -> None:
    assert _outcome(_codec_c.json_header, cmd, 7) == _outcome(codec._json_header_py, cmd, 7)


def test_the_encoder_matches_orjson_on_every_control_character() -> None:
    text = "".join(map(chr, range(0x80)))
    cmd = RemotingCommand(1, remark=text, ext_fields={text: text})
    assert _codec_c.json_header(cmd, 1) == codec._json_header_py(cmd, 1)
    assert orjson.loads(_codec_c.json_header(cmd, 1))["remark"] == text


@pytest.mark.parametrize("no_extensions", ["1", ""])
def test_the_environment_variable_selects_the_pure_functions(no_extensions: str) -> None:
    probe = (
        "from finchmq.protocol import _compiled, codec, headers, message, stored;"
        "print(codec._command_from_json is codec._command_from_json_py, _compiled.loaded())"
    )
    env = {**os.environ, "FINCHMQ_NO_EXTENSIONS": no_extensions}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    built = str([f"finchmq.protocol._{name}_c" for name in ("codec", "headers", "message", "stored")])
    expected = "True []" if no_extensions else f"False {built}"
    assert out.stdout.strip() == expected


# -- the frame split and the frame head -----------------------------------------------------------

_codec_c.bind_frames(codec._encode_parts_py, codec._next_command_py, codec.NEED_DATA)


def _frame(header: bytes, body: bytes, *, word: int | None = None, length: int | None = None) -> bytes:
    declared = 4 + len(header) + len(body) if length is None else length
    return struct.pack(">ii", declared, len(header) if word is None else word) + header + body


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[int], bool]:
    """Frames one after another (mostly good; some odd headers, ROCKETMQ headers, bad prefixes),
    cut into chunks at drawn points, and whether the peer closes after them."""
    frames: list[bytes] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["json", "json", "json", "odd", "rocketmq", "bad"]))
        body = draw(st.binary(max_size=40))
        if kind == "json":
            cmd = draw(commands())
            frames.append(_frame(codec._json_header_py(cmd, cmd.opaque), body))
        elif kind == "odd":
            frames.append(_frame(draw(odd_headers()), body))
        elif kind == "rocketmq":
            cmd = draw(commands())
            cmd.code &= 0x7FFF  # the ROCKETMQ header's code and version are int16
            cmd.version &= 0x7FFF
            header = codec._encode_rocketmq_header(cmd, cmd.opaque)
            frames.append(_frame(header, body, word=0x1000000 | len(header)))
        else:
            header = b'{"code":1}'
            frames.append(
                _frame(
                    header,
                    body,
                    word=draw(st.sampled_from([0x2000000 | len(header), 1, 0xFFFFFF, len(header)])),
                    length=draw(st.sampled_from([None, 3, -1, 1 << 30, len(header) + 2])),
                )
            )
    data = b"".join(frames)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return data, cuts, draw(st.booleans())


def _split(next_command: Any, data: bytes, cuts: list[int], eof: bool, *, as_bytearray: bool) -> list[Any]:
    """Everything ``next_command`` answers while ``data`` arrives in the chunks ``cuts`` make."""
    rc = codec.RemotingCodec(max_frame_size=4096)
    seen: list[Any] = []
    bounds = [0, *cuts, len(data)]
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    if eof:
        chunks.append(b"")
    for chunk in chunks:
        rc.receive_data(bytearray(chunk) if as_bytearray and chunk else chunk)
        for _ in range(10):
            outcome = _outcome(next_command, rc)
            seen.append(outcome)
            if outcome[0] == "raised" or not isinstance(outcome[1], tuple):
                break  # a signal (NEED_DATA, CLOSED) or an error
        if seen and seen[-1][0] == "raised":
            seen.append(_outcome(next_command, rc))  # a failed codec keeps raising the same error
            break
    seen.append((rc.state, rc.buffered))
    return seen


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.booleans())
def test_frames_split_the_same_in_any_chunking(
    stream: tuple[bytes, list[int], bool], as_bytearray: bool
) -> None:
    data, cuts, eof = stream
    pure = _split(codec._next_command_py, data, cuts, eof, as_bytearray=as_bytearray)
    compiled = _split(_codec_c.next_command, data, cuts, eof, as_bytearray=as_bytearray)
    assert compiled == pure


@settings(max_examples=200)
@given(commands(), st.binary(max_size=64), st.none() | int32, st.sampled_from([64, 160, 4096]))
def test_the_frame_head_encodes_to_the_same_bytes(
    cmd: RemotingCommand, body: bytes, opaque: int | None, max_frame_size: int
) -> None:
    cmd = RemotingCommand(
        cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, body
    )
    pure = _outcome(codec._encode_parts_py, cmd, max_frame_size, opaque)
    compiled = _outcome(_codec_c.encode_parts, cmd, max_frame_size, opaque)
    assert compiled == pure


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(1, ext_fields={"k": "\ud800"}),
        RemotingCommand(1, ext_fields={"k": 5}),  # type: ignore[dict-item]
        RemotingCommand(2**40),
        RemotingCommand(1, body=memoryview(b"abc")),
        RemotingCommand(1, serialize_type=SerializeType.ROCKETMQ, ext_fields={"a": "b"}),
        RemotingCommand(1, body=b"x" * 5000),  # over max_frame_size
        RemotingCommand(ResponseCode.SUCCESS, ext_fields={"msgId": "x"}),  # what the broker answers
        RemotingCommand(True),  # type: ignore[arg-type]  # a bool: orjson writes true
    ],
)
def test_edge_frame_heads(cmd: RemotingCommand) -> None:
    assert _outcome(_codec_c.encode_parts, cmd, 4096, 9) == _outcome(codec._encode_parts_py, cmd, 4096, 9)


def test_the_compiled_split_and_head_are_what_the_codec_uses() -> None:
    compiled = not _compiled.NO_EXTENSIONS  # FINCHMQ_NO_EXTENSIONS=1: the pure ones, though built
    assert (codec.RemotingCodec.next_command is _codec_c.next_command) is compiled
    assert (codec.encode_parts is _codec_c.encode_parts) is compiled


# -- the property string ----------------------------------------------------------------------------

_message_c = pytest.importorskip("finchmq.protocol._message_c")
_message_c.bind(message._string_to_properties_py)

# Texts made mostly of the separators, so that empty names, empty values, runs of separators and a
# trailing separator all come up; plus any other character (non-ASCII, surrogates).
property_texts = st.text(
    alphabet=st.sampled_from("\x01\x02\x01\x02ab=é😀\x00") | st.characters(), max_size=40
)


@settings(max_examples=500)
@given(property_texts)
def test_property_strings_parse_the_same(text: str) -> None:
    assert _outcome(_message_c.string_to_properties, text) == _outcome(message._string_to_properties_py, text)


@given(st.dictionaries(st.text(min_size=1).filter(lambda k: "\x01" not in k and "\x02" not in k),
                       st.text(min_size=1).filter(lambda v: "\x02" not in v), max_size=6))  # fmt: skip
def test_written_properties_read_back(properties: dict[str, str]) -> None:
    text = message.properties_to_string(properties)
    assert _message_c.string_to_properties(text) == properties


@pytest.mark.parametrize(
    "text", ["", "\x02", "\x01", "a\x01", "\x01b", "a\x01b\x02", "k\ud800\x01v", None, 5]
)
def test_edge_property_strings(text: Any) -> None:
    assert _outcome(_message_c.string_to_properties, text) == _outcome(message._string_to_properties_py, text)


def test_the_compiled_property_parse_is_what_the_broker_uses() -> None:
    assert (message.string_to_properties is _message_c.string_to_properties) is not _compiled.NO_EXTENSIONS


# -- the stored record ------------------------------------------------------------------------------

_stored_c = pytest.importorskip("finchmq.protocol._stored_c")
# Bound here too: with FINCHMQ_NO_EXTENSIONS=1, stored.py leaves the (built) twins unbound.
stored._bind_stored_c(_stored_c, stored._decode_stored_py)
_stored_c.bind_pack(stored._pack_stored_into_py)
int64 = st.integers(-(2**63), 2**63 - 1)
hosts = st.sampled_from(
    [
        pack_host("127.0.0.1", 10911),
        pack_host("10.1.2.3", 0),
        pack_host("::1", 65535),
        pack_host("fe80::1", 9876),
    ]
)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """One stored record (IPv4/IPv6 hosts, compressed or not, any numbers), maybe damaged."""
    body = draw(st.binary(max_size=48))
    sys_flag = draw(st.sampled_from([0, 0, 1, 4, 0x80])) | draw(int32) & 0x7FFFFF00
    if sys_flag & 1 and draw(st.booleans()):
        body = zlib.compress(body)
    record = encode_stored(
        topic=draw(st.text(max_size=12)).encode("utf-8")[:127],
        body=body,
        properties=message.properties_to_string(
            draw(st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "é", "a"]), st.text("xyé😀", min_size=1)))
        ).encode("utf-8"),
        born_host=draw(hosts), store_host=draw(hosts),
        queue_id=draw(int32), flag=draw(int32), queue_offset=draw(int64), commit_log_offset=draw(int64),
        sys_flag=sys_flag, born_timestamp=draw(int64), store_timestamp=draw(int64),
        reconsume_times=draw(int32), prepared_transaction_offset=draw(int64),
    )  # fmt: skip
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "flip", "extend"]))
    if damage == "truncate":
        del record[draw(st.integers(0, len(record) - 1)) :]
    elif damage == "flip":
        at = draw(st.integers(0, len(record) - 1))
        record[at] ^= draw(st.integers(1, 255))
    elif damage == "extend":
        record += draw(st.binary(min_size=1, max_size=8))
    return bytes(record)


def _messages(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    return (
        "returned",
        [dataclasses.astuple(m) for m in result] if isinstance(result, list) else dataclasses.astuple(result),
    )


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(records(), min_size=1, max_size=4),
    st.sampled_from([bytes, bytearray, memoryview]),
    st.booleans(),
    st.sampled_from([None, 4096]),
    st.integers(-2, 120),
)
def test_stored_records_decode_the_same(
    parts: list[bytes], kind: Any, verify_crc: bool, decompress_max_size: int | None, offset: int
) -> None:
    data = kind(b"".join(parts))
    options = {"verify_crc": verify_crc, "decompress_max_size": decompress_max_size}
    assert _messages(_stored_c.decode_stored_all, data, **options) == _messages(
        stored._decode_stored_all_py, data, **options
    )
    assert _messages(_stored_c.decode_stored, data, **options) == _messages(
        stored._decode_stored_py, data, **options
    )
    assert _messages(_stored_c.decode_stored, data, offset, **options) == _messages(
        stored._decode_stored_py, data, offset, **options
    )


def test_the_compiled_record_decoder_is_what_clients_and_the_broker_use() -> None:
    compiled = not _compiled.NO_EXTENSIONS
    assert (stored.decode_stored is _stored_c.decode_stored) is compiled
    assert (stored.decode_stored_all is _stored_c.decode_stored_all) is compiled


# -- the send header ---------------------------------------------------------------------------------

_headers_c = pytest.importorskip("finchmq.protocol._headers_c")
_headers_c.bind(headers._SEND_V2_VALUES, headers._SEND_V1_VALUES, headers.SendMessageFields)

# What a peer may write for a number or a flag: plain decimals, and what int() reads differently.
header_values = st.sampled_from(
    ["0", "3", "-1", "007", "-0", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
     "9223372036854775808", "1732790000123", " 5", "+5", "1_0", "١٢", "", "-", "x", "true", "TRUE",
     "1", "false", "yes", "é"]
) | st.integers(-(2**64), 2**64).map(str)  # fmt: skip
send_keys = st.sampled_from("abcdefghijklmn") | st.sampled_from(
    ["producerGroup", "topic", "queueId", "batch", "x"]
)


@settings(max_examples=500)
@given(
    st.fixed_dictionaries(
        {
            "a": st.text(max_size=4),
            "b": st.text(max_size=4),
            "c": st.just("TBW102"),
            "d": header_values,
            "e": header_values,
            "f": header_values,
            "g": header_values,
            "h": header_values,
        },
        optional={
            "i": st.text(max_size=6),
            "j": header_values,
            "k": header_values,
            "l": header_values,
            "m": header_values,
            "n": st.text(max_size=4),
        },
    ),
    st.lists(send_keys, max_size=3),
    st.booleans(),
)
def test_send_headers_decode_the_same(fields: dict[str, str], dropped: list[str], short_keys: bool) -> None:
    for key in dropped:
        fields.pop(key, None)
    assert _outcome(_headers_c.decode_send_fields, fields, short_keys=short_keys) == _outcome(
        headers._decode_send_fields_py, fields, short_keys=short_keys
    )


def test_the_compiled_send_header_decode_is_what_the_broker_uses() -> None:
    assert (headers.decode_send_fields is _headers_c.decode_send_fields) is not _compiled.NO_EXTENSIONS


# -- the usual inputs stay in C ----------------------------------------------------------------------


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"handed to the pure fallback: {args!r} {kwargs!r}")


def test_what_the_send_path_sees_never_reaches_the_pure_fallbacks() -> None:
    """A twin that quietly hands the usual case back is correct and slow: the differential tests
    cannot see it, this one can (the broker's SEND_OK answers once did, for their enum code)."""
    ext = {"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1732790000123",
           "h": "0", "i": "UNIQ_KEY\x01AB\x02WAIT\x01true\x02TAGS\x01TagA", "j": "0", "k": "false",
           "m": "false", "n": "broker-a"}  # fmt: skip
    request = RemotingCommand(310, LanguageCode.JAVA, 399, 17, 0, None, ext, b"x" * 128)
    response = request.make_response(
        ResponseCode.SUCCESS, None, {"msgId": "7F00", "queueId": "3", "queueOffset": "1", "TRACE_ON": "true"}
    )
    record = bytes(
        encode_stored(topic=b"T", body=b"x" * 128, properties=ext["i"].encode(), born_host=pack_host("10.0.0.7", 1),
                      store_host=pack_host("10.0.0.1", 10911))
    )  # fmt: skip
    try:
        _codec_c.bind(_refuse, _refuse)
        _codec_c.bind_frames(_refuse, _refuse, codec.NEED_DATA)
        _message_c.bind(_refuse)
        _headers_c.bind(_refuse, _refuse, headers.SendMessageFields)
        stored._bind_stored_c(_stored_c, _refuse)
        head, body = _codec_c.encode_parts(request, 1 << 24, None)
        rc = codec.RemotingCodec()
        rc.receive_data(head + body)
        assert _codec_c.next_command(rc).ext_fields == ext
        _codec_c.encode_parts(response, 1 << 24, 17)
        assert _message_c.string_to_properties(ext["i"])["TAGS"] == "TagA"
        assert _headers_c.decode_send_fields(ext, short_keys=True).queue_id == 3
        assert _stored_c.decode_stored_all(record * 2)[1].body == b"x" * 128
        _stored_c.bind_pack(_refuse)
        _stored_c.bind_batch(_refuse, batch.BatchRecords)
        items = batch.encode_batch([Message("T", b"x" * 64, properties={"TAGS": "a", "KEYS": "k"})] * 3)
        assert len(_stored_c.encode_batch_records(items, 0, 92, b"\x01T", b"", 3, 0, 5, record[48:56],
                                                  record[56:64], 1 << 22).sizes) == 3  # fmt: skip
        hosts, size, crc, tail, flag = stored.prepare_stored(
            b"T", b"a\x01b", b"x" * 128, record[48:56], record[56:64], 0
        )
        log = memoryview(bytearray(4096))
        assert _stored_c.pack_stored_into(log, 100, hosts, size, crc, 3, 0, 1, 9, flag, 5, record[48:56], 6,
                                          record[56:64], 0, 0, b"x" * 128, tail) == 100 + size  # fmt: skip
    finally:
        _stored_c.bind_pack(stored._pack_stored_into_py)
        _stored_c.bind_batch(batch._encode_batch_records_py, batch.BatchRecords)
        _codec_c.bind(codec._command_from_json_py, codec._json_header_py)
        _codec_c.bind_frames(codec._encode_parts_py, codec._next_command_py, codec.NEED_DATA)
        _message_c.bind(message._string_to_properties_py)
        _headers_c.bind(headers._SEND_V2_VALUES, headers._SEND_V1_VALUES, headers.SendMessageFields)
        stored._bind_stored_c(_stored_c, stored._decode_stored_py)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 3),
    st.lists(st.integers(-(2**64), 2**64) | int32 | int64, min_size=10, max_size=10),
    st.binary(max_size=40),
    st.binary(max_size=20),
    st.integers(-3, 40),
    st.sampled_from([300, 120]),
)
def test_records_pack_into_a_buffer_the_same(
    host_index: int, numbers: list[int], body: bytes, tail: bytes, pos: int, size: int
) -> None:
    born = pack_host("::1", 1) if host_index & 1 else pack_host("10.0.0.1", 1)
    store = pack_host("::2", 2) if host_index & 2 else pack_host("10.0.0.2", 2)
    total, crc, qid, flag, qo, phy, sys_flag, born_ts, store_ts, rc = numbers
    args = (
        host_index,
        total,
        crc,
        qid,
        flag,
        qo,
        phy,
        sys_flag,
        born_ts,
        born,
        store_ts,
        store,
        rc,
        7,
        body,
        tail,
    )
    pure_buf, compiled_buf = bytearray(b"\xee" * size), bytearray(b"\xee" * size)
    pure = _outcome(stored._pack_stored_into_py, memoryview(pure_buf), pos, *args)
    compiled = _outcome(_stored_c.pack_stored_into, memoryview(compiled_buf), pos, *args)
    assert compiled == pure
    assert compiled_buf == pure_buf


def test_the_commit_log_writes_records_with_the_compiled_packer() -> None:
    assert (stored.pack_stored_into is _stored_c.pack_stored_into) is not _compiled.NO_EXTENSIONS


# -- the batch encoder ------------------------------------------------------------------------------

_stored_c.bind_batch(batch._encode_batch_records_py, batch.BatchRecords)
property_maps = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "é", "TAGSX"]),
    st.text("ab\x01é", min_size=1),
    max_size=4,
)


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    """A SEND_BATCH_MESSAGE body (0-5 messages), maybe damaged."""
    messages = [
        Message("T", draw(st.binary(max_size=30)), flag=draw(int32), properties=draw(property_maps))
        for _ in range(draw(st.integers(0, 5)))
    ]
    body = bytearray(batch.encode_batch(messages))
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "flip", "extend"]))
    if damage != "none" and body:
        at = draw(st.integers(0, len(body) - 1))
        if damage == "truncate":
            del body[at:]
        elif damage == "flip":
            body[at] ^= draw(st.integers(1, 255))
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(body)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch_bodies(),
    st.integers(0, 3),
    st.sampled_from([b"", b"WAIT\x01true", b"TAGS\x01batch\x02KEYS\x01k"]),
    st.sampled_from([0, 4096, -3]),
    st.sampled_from([4 * 1024 * 1024, 200]),
    st.sampled_from([1_732_790_000_123, 2**63]),
)
def test_batches_encode_to_the_same_records(
    body: bytes, host_index: int, batch_props: bytes, sys_flag: int, max_size: int, born_ts: int
) -> None:
    born = pack_host("::1", 1) if host_index & 1 else pack_host("10.0.0.1", 1)
    store = pack_host("::2", 2) if host_index & 2 else pack_host("10.0.0.2", 2)
    fixed = stored.MIN_STORED_SIZE + 1 + ((host_index & 1) + (host_index >> 1)) * 12
    args = (body, host_index, fixed, b"\x01T", batch_props, 3, sys_flag, born_ts, born, store, max_size)
    assert _outcome(_stored_c.encode_batch_records, *args) == _outcome(batch._encode_batch_records_py, *args)


@given(st.binary(max_size=2000))
def test_the_crc_is_zlibs(data: bytes) -> None:
    assert _stored_c.crc32(data) == zlib.crc32(data)


def test_the_commit_log_encodes_batches_with_the_compiled_encoder() -> None:
    assert (batch.encode_batch_records is _stored_c.encode_batch_records) is not _compiled.NO_EXTENSIONS
