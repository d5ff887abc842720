"""Per-call µs of each pure function next to its compiled (Cython) twin, in one process.

    python -m benchmarks.compiled_micro [--number 200000]

Needs the extensions built (``pip install -e .``, or ``python setup.py build_ext --inplace``);
it says so and exits otherwise. Inputs are what the broker sees on the send path: a
SEND_MESSAGE_V2 frame as the Java client writes it (keys ``a``..``n``, properties with
``\\u0001``/``\\u0002`` escapes) and the SEND_OK response the broker writes back. Best of 5 rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import timeit
from collections.abc import Callable

from finchmq.protocol import _compiled, codec, headers, message, stored
from finchmq.protocol.codec import RemotingCodec
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import MessageExt

EXT = {
    "a": "SendPathGroup", "b": "SendPath_single128B", "c": "TBW102", "d": "4", "e": "3", "f": "0",
    "g": "1732790000123", "h": "0",
    "i": "UNIQ_KEY\x017F0000010001AABBCCDD0000\x02WAIT\x01true\x02TAGS\x01TagA",
    "j": "0", "k": "false", "m": "false", "n": "broker-a",
}  # fmt: skip
REQUEST = RemotingCommand(310, opaque=12345, ext_fields=EXT, body=b"x" * 128)
RESPONSE = REQUEST.make_response(
    0,
    None,
    {"msgId": "7F00000100002A9F0000000000001234", "queueId": "3", "queueOffset": "12345",
     "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},
)  # fmt: skip


def _comparable(value: object) -> object:
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, MessageExt):
        return dataclasses.astuple(value)
    if isinstance(value, RemotingCommand):
        return (value.code, value.opaque, value.flag, value.version, value.ext_fields, bytes(value.body))
    return value


def _time(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--number", type=int, default=200_000, help="calls per round")
    args = parser.parse_args()
    c = _compiled.load("finchmq.protocol._codec_c")
    if c is None:
        raise SystemExit("the compiled twins are not built (or FINCHMQ_NO_EXTENSIONS is set)")
    frame = RemotingCodec().send(REQUEST)
    header = frame[8 : 8 + (int.from_bytes(frame[4:8], "big") & 0xFFFFFF)]
    pairs: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("JSON header decode (SEND_MESSAGE_V2)",
         lambda: codec._command_from_json_py(header, b""), lambda: c.command_from_json(header, b"")),
        ("JSON header encode (SEND_OK response)",
         lambda: codec._json_header_py(RESPONSE, 12345), lambda: c.json_header(RESPONSE, 12345)),
    ]  # fmt: skip
    pure_codec, compiled_codec = RemotingCodec(), RemotingCodec()

    def split_pure() -> object:
        pure_codec.receive_data(frame)
        return codec._next_command_py(pure_codec)

    def split_compiled() -> object:
        compiled_codec.receive_data(frame)
        return c.next_command(compiled_codec)

    size = codec.DEFAULT_MAX_FRAME_SIZE
    m = _compiled.load("finchmq.protocol._message_c")
    if m is not None:
        props = EXT["i"]
        pairs.append(
            ("property string parse (3 properties)",
             lambda: message._string_to_properties_py(props), lambda: m.string_to_properties(props))
        )  # fmt: skip
    pairs += [
        ("frame split + decode (SEND_MESSAGE_V2)", split_pure, split_compiled),
        ("frame head encode (SEND_OK response)",
         lambda: codec._encode_parts_py(RESPONSE, size, 1), lambda: c.encode_parts(RESPONSE, size, 1)),
    ]  # fmt: skip
    hc = _compiled.load("finchmq.protocol._headers_c")
    if hc is not None:
        pairs.append(
            ("send header fields (SEND_MESSAGE_V2)",
             lambda: headers._decode_send_fields_py(EXT, short_keys=True),
             lambda: hc.decode_send_fields(EXT, short_keys=True))
        )  # fmt: skip
    sc = _compiled.load("finchmq.protocol._stored_c")
    if sc is not None:
        record = bytes(
            stored.encode_stored(
                topic=b"SendPath_single128B", body=b"x" * 128, properties=EXT["i"].encode(),
                born_host=pack_host("10.0.0.7", 53412), store_host=pack_host("10.0.0.1", 10911),
                queue_id=3, queue_offset=12345, commit_log_offset=987654321, born_timestamp=1732790000123,
                store_timestamp=1732790000125,
            )
        )  # fmt: skip
        pull_body = record * 32
        pairs.append(
            ("pull body decode (32 x 128 B records)",
             lambda: stored._decode_stored_all_py(pull_body), lambda: sc.decode_stored_all(pull_body))
        )  # fmt: skip
    print(f"{'function':<40} {'pure us':>8} {'compiled us':>12} {'ratio':>6}")
    for name, pure, compiled in pairs:
        assert _comparable(pure()) == _comparable(compiled())
        p, k = _time(pure, args.number), _time(compiled, args.number)
        print(f"{name:<40} {p:>8.3f} {k:>12.3f} {k / p:>6.2f}")


if __name__ == "__main__":
    main()
