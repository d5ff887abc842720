"""Drive the official C++ RocketMQ client (PyPI ``rocketmq==0.4.4``, librocketmq 1.2.4) from its
own virtual environment. Runs under ``.venv-cpp/bin/python``; never imports finchmq.

Each sub-command prints one JSON object per line on stdout (flushed), so the test that started
it can follow progress; the last line is ``{"done": ...}``.

    produce --namesrv A --topic T --count N --mode sync|async|oneway|orderly|batch ...
    push    --namesrv A --group G --topic T --expect N [--orderly] [--broadcast] [--fail-times K]
    pull    --namesrv A --group G --topic T --expect N

Every sub-command takes ``--access-key K --secret-key S`` to sign its requests for the broker's ACL
(``set_session_credentials``).

A push consumer runs until it has ``--expect`` messages or ``--timeout`` s have passed, or, with
``--stoppable``, until its stdin is closed (the test stops it: ``CppProcess.stop()``); then it shuts
down (offsets persisted, client unregistered).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
from pathlib import Path

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer
from rocketmq.ffi import MessageModel


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def make_message(args: argparse.Namespace, i: int) -> Message:
    msg = Message(args.topic)
    tags = args.tags.split(",") if args.tags else []
    if tags:
        msg.set_tags(tags[i % len(tags)])
    if args.keys_prefix:
        msg.set_keys(f"{args.keys_prefix}{i}")
    for item in args.prop or []:
        key, _, value = item.partition("=")
        msg.set_property(key, value.replace("{i}", str(i)))
    body = f"{args.body_prefix}{i}".encode()
    if args.body_size and len(body) < args.body_size:
        body += b"x" * (args.body_size - len(body))
    msg.set_body(body)
    if args.delay_level:
        msg.set_delay_time_level(args.delay_level)
    return msg


def set_credentials(client, args: argparse.Namespace) -> None:
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, args.channel)


def produce(args: argparse.Namespace) -> int:
    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    set_credentials(producer, args)
    producer.start()
    errors = 0
    try:
        if args.mode == "batch":
            for start in range(0, args.count, args.batch_size):
                batch = [
                    make_message(args, i) for i in range(start, min(start + args.batch_size, args.count))
                ]
                result = producer.send_batch(batch)
                emit(
                    {
                        "i": start,
                        "n": len(batch),
                        "status": int(result.status),
                        "msg_id": result.msg_id,
                        "offset": result.offset,
                    }
                )
        elif args.mode == "async":
            done = threading.Semaphore(0)

            def ok(result, i=None):
                emit(
                    {
                        "status": int(result.status),
                        "msg_id": result.msg_id,
                        "offset": result.offset,
                        "async": True,
                    }
                )
                done.release()

            def failed(exc):
                emit({"error": str(exc), "async": True})
                done.release()

            for i in range(args.count):
                producer.send_async(make_message(args, i), ok, failed)
            for _ in range(args.count):
                if not done.acquire(timeout=30):
                    emit({"error": "async send callback timed out"})
                    errors += 1
                    break
        else:
            for i in range(args.count):
                msg = make_message(args, i)
                try:
                    if args.mode == "sync":
                        r = producer.send_sync(msg)
                        emit({"i": i, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
                    elif args.mode == "oneway":
                        producer.send_oneway(msg)
                        emit({"i": i, "oneway": True})
                    elif args.mode == "orderly":
                        r = producer.send_orderly(msg, i % args.shards)
                        emit(
                            {
                                "i": i,
                                "status": int(r.status),
                                "msg_id": r.msg_id,
                                "offset": r.offset,
                                "shard": i % args.shards,
                            }
                        )
                except Exception as exc:  # the test reads the error text (e.g. SYSTEM_BUSY)
                    errors += 1
                    emit({"i": i, "error": str(exc)})
                    if args.stop_after_errors and errors >= args.stop_after_errors:
                        break
    finally:
        if args.mode == "async":
            # librocketmq aborts (boost::thread_interrupted) when shutdown() meets its first route
            # refresh, 3 s after start; async callbacks can end right then (a 3 s send timeout).
            wait_for_first_route_refresh(args.topic)
        producer.shutdown()
    emit({"done": True, "errors": errors})
    return 0


def wait_for_first_route_refresh(topic: str, timeout: float = 60.0) -> None:
    """Until the client's log shows its first scheduled route refresh over (the next one is 30 s
    later). That refresh alone asks for TBW102; it goes through the producer's topics in name
    order, and is over once the last one's route has come ("has data")."""
    log = Path.home() / "logs" / "rocketmq-cpp" / f"{os.getpid()}_rocketmq-cpp.log.0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        refresh = text.partition("updateTopicRouteInfoFromNameServer start:TBW102[")[2]
        if topic > "TBW102":
            refresh = refresh.partition(f"updateTopicRouteInfoFromNameServer start:{topic}[")[2]
        if "updateTopicRouteInfoFromNameServer has data" in refresh:
            return
        time.sleep(0.05)  # polling interval
    emit({"warning": f"no route refresh in {log} within {timeout:g} s"})


def describe(msg, prop_keys: list[str]) -> dict:
    body = msg.body or b""
    return {
        "topic": _text(msg.topic),
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        "body": base64.b64encode(body).decode(),
        "id": _text(msg.id),
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "commit_log_offset": msg.commit_log_offset,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
        "props": {k: _text(msg.get_property(k)) for k in prop_keys},
    }


def push(args: argparse.Namespace) -> int:
    model = MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    set_credentials(consumer, args)
    if args.instance:
        consumer.set_instance_name(args.instance)
    consumer.set_thread_count(args.threads)
    seen: set[str] = set()
    attempts: dict[str, int] = {}
    lock = threading.Lock()
    finished = threading.Event()
    prop_keys = args.prop_key or []

    def callback(msg):
        if args.gate:  # a stopped listener: nothing is consumed until the test creates the file
            while not os.path.exists(args.gate):
                time.sleep(0.05)
        record = describe(msg, prop_keys)
        key = f"{record['body']}"
        with lock:
            attempts[key] = attempts.get(key, 0) + 1
            failing = attempts[key] <= args.fail_times
            record["attempt"] = attempts[key]
            record["failed"] = failing
            record["t"] = time.time()
            emit(record)
            if not failing and _text(msg.body).startswith(args.expect_prefix):
                seen.add(key)
                if args.expect and len(seen) >= args.expect:
                    finished.set()
        if failing:
            raise RuntimeError("asked to fail (RECONSUME_LATER)")
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000)

    consumer.subscribe(args.topic, callback, args.expression)
    consumer.start()
    emit({"started": True})

    def stop_when_stdin_closes() -> None:
        sys.stdin.read()
        finished.set()

    if args.stoppable:
        threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    finished.wait(args.timeout)
    consumer.shutdown()
    emit({"done": True, "consumed": len(seen)})
    return 0


def pull(args: argparse.Namespace) -> int:
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    set_credentials(consumer, args)
    consumer.start()
    records = []
    deadline = time.time() + args.timeout
    prop_keys = args.prop_key or []
    try:
        while len(records) < args.expect and time.time() < deadline:
            for msg in consumer.pull(args.topic, args.expression):
                record = describe(msg, prop_keys)
                records.append(record)
                emit(record)
            if len(records) < args.expect:
                time.sleep(0.2)
    finally:
        consumer.shutdown()
    emit({"done": True, "consumed": len(records)})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--namesrv", required=True)
    common.add_argument("--topic", required=True)
    common.add_argument("--timeout", type=float, default=60.0)
    common.add_argument("--prop-key", action="append", help="user property to report for received messages")
    common.add_argument("--access-key", default="", help="ACL accessKey (set_session_credentials)")
    common.add_argument("--secret-key", default="", help="ACL secretKey")
    common.add_argument("--channel", default="ALIYUN", help="ACL channel (OnsChannel)")

    p = sub.add_parser("produce", parents=[common])
    p.add_argument("--group", default="cpp_producer_group")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--mode", choices=["sync", "async", "oneway", "orderly", "batch"], default="sync")
    p.add_argument("--tags", default="")
    p.add_argument("--keys-prefix", default="")
    p.add_argument("--prop", action="append", help="KEY=VALUE user property; {i} is the message index")
    p.add_argument("--body-prefix", default="body-")
    p.add_argument("--body-size", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--delay-level", type=int, default=0)
    p.add_argument("--timeout-ms", type=int, default=3000)
    p.add_argument(
        "--stop-after-errors", type=int, default=0, help="sync mode: stop after this many failed sends"
    )

    c = sub.add_parser("push", parents=[common])
    c.add_argument("--group", required=True)
    c.add_argument("--expression", default="*")
    c.add_argument("--expect", type=int, default=0)
    c.add_argument("--orderly", action="store_true")
    c.add_argument("--broadcast", action="store_true")
    c.add_argument("--fail-times", type=int, default=0)
    c.add_argument("--threads", type=int, default=4)
    c.add_argument("--sleep-ms", type=float, default=0.0, help="time each message takes to consume")
    c.add_argument("--instance", default="")
    c.add_argument("--gate", default="", help="consume nothing until this file exists")
    c.add_argument("--stoppable", action="store_true", help="shut down when stdin is closed")
    c.add_argument("--expect-prefix", default="", help="count only bodies starting with this")

    q = sub.add_parser("pull", parents=[common])
    q.add_argument("--group", required=True)
    q.add_argument("--expression", default="*")
    q.add_argument("--expect", type=int, default=0)

    args = parser.parse_args()
    return {"produce": produce, "push": push, "pull": pull}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
