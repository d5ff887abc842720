"""Micro-benchmark of the stored-record layout in ``finchmq.protocol.stored``.

Run from the repository root: ``python -m benchmarks.bench_message --records 200000``.
Prints one line per case with records/s and MB/s. The default message is the store's target
case: a 128-byte body, topic ``TopicTest`` and about 60 bytes of properties.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from finchmq.protocol.hosts import pack_host
from finchmq.protocol.message import Message, properties_to_string
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.stored import (
    decode_stored,
    decode_stored_all,
    encode_stored,
    encode_stored_into,
    fill_stored_offsets,
    stored_size,
)

PULL_BATCH = 32  # pullBatchSize: records per pull body in the decode cases


def _sample_message(body_size: int) -> Message:
    return Message.create(
        "TopicTest",
        bytes(range(256)) * (body_size // 256) + bytes(body_size % 256),
        tags="TagA",
    ).with_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "7F00000100002A9F00000000000000A8")


def _run(name: str, record_size: int, repeat: int, case: Callable[[], int]) -> None:
    """Run ``case`` ``repeat`` times and report the best rate (timeit's rule: noise only slows)."""
    best = 0.0
    done = 0
    for _ in range(repeat):
        start = time.perf_counter()
        done = case()
        best = max(best, done / (time.perf_counter() - start))
    print(
        f"{name:<42} {best:>12,.0f} records/s {best * record_size / 1e6:>9.1f} MB/s "
        f"(best of {repeat} x {done} records, {record_size} B each)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--body-size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    records: int = args.records

    msg = _sample_message(args.body_size)
    topic = msg.topic.encode()
    props = properties_to_string(msg.properties).encode()
    born = pack_host("192.168.0.17", 51234)
    store = pack_host("192.168.0.2", 10911)
    size = stored_size(len(msg.body), len(topic), len(props))
    print(f"record: body {len(msg.body)} B, topic {len(topic)} B, properties {len(props)} B -> {size} B")

    segment = bytearray(4 * 1024 * 1024)
    view = memoryview(segment)
    per_segment = len(segment) // size

    def encode_into() -> int:
        pos = 0
        physical = 0
        for i in range(records):
            if i % per_segment == 0:
                pos = 0
            n = encode_stored_into(
                view,
                pos,
                topic=topic,
                body=msg.body,
                properties=props,
                born_host=born,
                store_host=store,
                queue_id=3,
                queue_offset=i,
                commit_log_offset=physical,
                born_timestamp=1_700_000_000_000,
                store_timestamp=1_700_000_000_001,
            )
            pos += n
            physical += n
        return records

    def encode_bytes() -> int:
        for i in range(records):
            encode_stored(
                topic=topic,
                body=msg.body,
                properties=props,
                born_host=born,
                store_host=store,
                queue_id=3,
                queue_offset=i,
                born_timestamp=1_700_000_000_000,
            )
        return records

    def encode_then_fill() -> int:
        record = encode_stored(topic=topic, body=msg.body, properties=props, born_host=born, store_host=store)
        pos = 0
        for i in range(records):
            if i % per_segment == 0:
                pos = 0
            end = pos + size
            view[pos:end] = record
            fill_stored_offsets(view, pos, queue_offset=i, commit_log_offset=pos, store_timestamp=1)
            pos = end
        return records

    def encode_from_message() -> int:
        for i in range(records):
            encode_stored(
                topic=msg.topic.encode(),
                body=msg.body,
                properties=properties_to_string(msg.properties).encode(),
                born_host=born,
                store_host=store,
                queue_offset=i,
            )
        return records

    record = encode_stored(topic=topic, body=msg.body, properties=props, born_host=born, store_host=store)
    pull_body = record * PULL_BATCH
    pulls = max(records // PULL_BATCH, 1)

    def decode_pull(verify: bool) -> Callable[[], int]:
        def case() -> int:
            for _ in range(pulls):
                decode_stored_all(pull_body, verify_crc=verify)
            return pulls * PULL_BATCH

        return case

    def decode_one_at_offsets() -> int:
        mv = memoryview(pull_body)
        for _ in range(pulls):
            pos = 0
            for _ in range(PULL_BATCH):
                pos += decode_stored(mv, pos).store_size
        return pulls * PULL_BATCH

    _run("encode_stored_into (memoryview segment)", size, args.repeat, encode_into)
    _run("encode_stored -> bytearray", size, args.repeat, encode_bytes)
    _run("pre-encoded copy + fill_stored_offsets", size, args.repeat, encode_then_fill)
    _run("encode_stored from Message (props + topic)", size, args.repeat, encode_from_message)
    _run("decode_stored_all (pull body of 32)", size, args.repeat, decode_pull(False))
    _run("decode_stored_all verify_crc=True", size, args.repeat, decode_pull(True))
    _run("decode_stored over a memoryview", size, args.repeat, decode_one_at_offsets)


if __name__ == "__main__":
    main()
