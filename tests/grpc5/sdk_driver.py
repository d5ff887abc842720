"""Drive the official RocketMQ 5.x Python SDK (PyPI ``rocketmq-python-client==5.1.2``, gRPC) from
its own virtual environment. Runs under ``.venv-v5/bin/python``; never imports finchmq.

Each sub-command prints one JSON object per line on stdout (flushed), so the test that started
it can follow progress; the last line is ``{"done": n}``. A failure the SDK raises is printed as
``{"error": <exception class>, "code": <the apache.rocketmq.v2.Code it carries, when it carries
one>, "message": <text>}`` (the SDK maps a response status to an exception class and keeps the
code: ``rocketmq.v5.util.MessagingResultChecker``), and the driver goes on to its ``done`` line:
an error is a result the test reads, not a crash (the exit status is 0 unless the driver itself
is broken).

    produce --endpoints H:P --topic T --count N [--type normal|fifo|delay|tx] [--group G] [--tag TAG]
            [--keys K] [--prop KEY=VALUE] [--delay-seconds S | --delivery-timestamp V] [--body-prefix P]
            [--tx-resolution commit|rollback|unknown] [--checker commit|rollback] [--stoppable]
    simple  --endpoints H:P --group G --topic T --expect N [--tag-expression E] [--invisible S]
            [--await S] [--nack-first] [--ack-stale] [--no-ack] [--max-seconds S]
    push    --endpoints H:P --group G --topic T [--expect N] [--fail-first] [--hold-file F] [--fifo]
            [--stoppable]
    recall  --endpoints H:P --topic T --handle H
    route   --endpoints H:P --topic T

Every sub-command takes ``--ak AK --sk SK`` (``Credentials``: the SDK signs each call) and
``--tls`` (the client's ``tls_enable``: a secure channel verified against the default roots;
``--ca FILE`` makes those roots FILE through ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``).

Bodies are UTF-8 text: message ``i`` has the body ``{body_prefix}{i}``; ``{i}`` in ``--keys`` and in
``--prop`` values is replaced by ``i``. A received message is printed as ``message_id``, ``body``,
``tag``, ``keys`` (sorted), ``properties`` (user properties), ``delivery_attempt``,
``message_group``, ``topic``, ``message_type`` (the ``apache.rocketmq.v2.MessageType`` number) and
``delivery_timestamp`` (ms, when the server set one); the SimpleConsumer's ``{"batch": n}`` and
``{"received": ...}`` records carry ``at``, the wall clock (ms) when that receive returned.

With ``--stoppable`` a process that would otherwise end (a producer waiting for transaction
checks, a push consumer) runs until its stdin is closed (``SdkProcess.stop()`` in the tests).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time

if "--ca" in sys.argv[:-1]:
    # grpc reads its default TLS roots from here once, on first use: set before it is loaded
    os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = sys.argv[sys.argv.index("--ca") + 1]

import grpc
from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import MessageType, Permission, QueryRouteRequest
from rocketmq.v5.util import MessagingResultChecker

_emit_lock = threading.Lock()


def emit(obj: dict) -> None:
    """One JSON line on stdout, flushed (SDK callbacks print from their own threads)."""
    line = json.dumps(obj, sort_keys=True) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def error_record(exc: BaseException, **extra: object) -> dict:
    """``{"error": class name, "code": int (when the exception carries one), "message": text}``.

    SDK exceptions (``rocketmq.v5.exception.ClientException``) carry the response status code as
    ``.code``; a gRPC failure (``grpc.RpcError``: no server, a gRPC status instead of an in-body
    one) carries its gRPC status name as ``grpc_status``."""
    record: dict = {"error": type(exc).__name__, "message": str(exc), **extra}
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        record["code"] = code
    if isinstance(exc, grpc.RpcError):
        record["grpc_status"] = exc.code().name
        record["message"] = exc.details() or str(exc)
    elif exc.__context__ is not None and "code" not in record:
        # the SDK's clean-up after a failed start can raise over the real failure
        record["context"] = error_record(exc.__context__)
    return record


def explained(exc: BaseException, client, topic: str, **extra: object) -> dict:
    """``error_record``, but a failed route fetch (the SDK's route manager logs the server's
    answer and raises a bare ``Exception``) is asked again, to report the status the server gave."""
    record = error_record(exc, **extra)
    if "code" not in record and "route" in str(exc):
        try:
            query_route(client, topic)
        except Exception as route_exc:
            record = error_record(route_exc, **{**extra, "during": "route"})
    return record


def configuration(args: argparse.Namespace) -> ClientConfiguration:
    return ClientConfiguration(
        args.endpoints, Credentials(args.ak, args.sk), request_timeout=args.request_timeout
    )


def describe(msg: Message) -> dict:
    body = msg.body or b""
    return {
        "message_id": msg.message_id,
        "body": body.decode("utf-8", "replace"),
        "tag": msg.tag,
        "keys": sorted(msg.keys),
        "properties": dict(msg.properties),
        "delivery_attempt": msg.delivery_attempt,
        "message_group": msg.message_group,
        "topic": msg.topic,
        "message_type": msg.message_type,
        "delivery_timestamp": msg.delivery_timestamp,
    }


def wait_for_stdin_close() -> threading.Event:
    """An event set once stdin is closed (the test's ``stop()``)."""
    closed = threading.Event()

    def watch() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()
    return closed


def shutdown(client) -> None:
    try:
        client.shutdown()
    except Exception as exc:
        emit(error_record(exc, during="shutdown"))


def query_route(client, topic: str) -> list[dict]:
    """QueryRoute through the client's own connection, its status checked as the SDK checks it
    (so a refusal raises with its code: the SDK's route manager only logs it)."""
    req = QueryRouteRequest()
    req.topic.name = topic
    req.topic.resource_namespace = client.client_configuration.namespace
    req.endpoints.CopyFrom(client.client_configuration.rpc_endpoints.endpoints)
    future = client.rpc_client.query_topic_route_async(
        client.client_configuration.rpc_endpoints,
        req,
        metadata=client.sign(),
        timeout=client.client_configuration.request_timeout,
    )
    res = future.result()
    MessagingResultChecker.check(res.status)
    return [
        {
            "topic": queue.topic.name,
            "queue_id": queue.id,
            "permission": Permission.Name(queue.permission),
            "broker": queue.broker.name,
            "broker_id": queue.broker.id,
            "endpoints": [f"{a.host}:{a.port}" for a in queue.broker.endpoints.addresses],
            "accept_message_types": [MessageType.Name(t) for t in queue.accept_message_types],
        }
        for queue in res.message_queues
    ]


class Checker(TransactionChecker):
    """Answers the server's transaction checks with ``--checker``, printing ``{"checked": id}``."""

    def __init__(self, resolution: str) -> None:
        self.resolution = resolution

    def check(self, message: Message) -> TransactionResolution:
        emit({"checked": message.message_id, "resolution": self.resolution})
        if self.resolution == "rollback":
            return TransactionResolution.ROLLBACK
        return TransactionResolution.COMMIT


def make_message(args: argparse.Namespace, i: int) -> Message:
    msg = Message()
    msg.topic = args.topic
    msg.body = f"{args.body_prefix}{i}".encode()
    if args.tag:
        msg.tag = args.tag
    if args.keys:
        msg.keys = args.keys.replace("{i}", str(i))
    for item in args.prop or []:
        key, _, value = item.partition("=")
        msg.add_property(key, value.replace("{i}", str(i)))
    if args.type == "fifo":
        msg.message_group = args.group
    elif args.type == "delay":
        # SDK 5.1.2 quirk: Message.delivery_timestamp is documented in ms, but the producer puts it
        # into Timestamp.seconds (producer.py, __send_req), so it must be EPOCH SECONDS here; a
        # ms value lands ~55 000 years ahead (ILLEGAL_DELIVERY_TIME at a 5.x proxy).
        # --delivery-timestamp sends a raw value as it is (e.g. ms, to pin that answer).
        if args.delivery_timestamp is not None:
            msg.delivery_timestamp = args.delivery_timestamp
        else:
            msg.delivery_timestamp = int(time.time()) + args.delay_seconds
    return msg


def send_record(i: int, receipt) -> dict:
    record = {"sent": i, "message_id": receipt.message_id}
    if receipt.transaction_id:
        record["transaction_id"] = receipt.transaction_id
    if receipt.offset is not None:
        record["offset"] = receipt.offset
    if receipt.recall_handle:
        record["recall_handle"] = receipt.recall_handle
    return record


def produce(args: argparse.Namespace) -> int:
    tx = args.type == "tx"
    producer = Producer(
        configuration(args),
        () if args.undeclared else (args.topic,),
        checker=Checker(args.checker) if tx else None,
        tls_enable=args.tls,
    )
    stopped = wait_for_stdin_close() if args.stoppable else None
    try:
        producer.startup()
    except Exception as exc:
        emit(error_record(exc, during="startup"))
        emit({"done": 0, "errors": 1})
        return 0
    sent = errors = 0
    indexes = itertools.count() if args.count == 0 else range(args.count)
    try:
        for i in indexes:
            if args.count == 0 and stopped is not None and stopped.is_set():
                break  # --count 0 --stoppable: send until stdin closes
            if args.pace_ms and i:
                time.sleep(args.pace_ms / 1000)
            try:
                msg = make_message(args, i)
                if tx:
                    transaction = producer.begin_transaction()
                    receipt = producer.send(msg, transaction)
                    record = send_record(i, receipt)
                    if args.tx_resolution == "commit":
                        transaction.commit()
                    elif args.tx_resolution == "rollback":
                        transaction.rollback()
                    record["resolution"] = args.tx_resolution
                else:
                    record = send_record(i, producer.send(msg))
                sent += 1
                emit(record)
            except Exception as exc:
                errors += 1
                emit(explained(exc, producer, args.topic, i=i))
                if args.stop_after_errors and errors >= args.stop_after_errors:
                    break
        if stopped is not None and args.count:
            emit({"sending_done": sent, "errors": errors})
            stopped.wait()
    finally:
        shutdown(producer)
    emit({"done": sent, "errors": errors})
    return 0


def whole(seconds: float) -> float | int:
    """A whole number of seconds as an int: the SDK puts durations into ``Duration.seconds``
    (an int64 field), where a float is a TypeError."""
    return int(seconds) if float(seconds).is_integer() else seconds


def simple(args: argparse.Namespace) -> int:
    consumer = SimpleConsumer(
        configuration(args),
        args.group,
        {args.topic: FilterExpression(args.tag_expression)},
        await_duration=whole(args.await_),
        tls_enable=args.tls,
    )
    try:
        consumer.startup()
    except Exception as exc:
        emit(error_record(exc, during="startup"))
        emit({"done": 0})
        return 0
    deadline = time.monotonic() + args.max_seconds
    stopped = wait_for_stdin_close() if args.stoppable else threading.Event()
    seen: set[str] = set()  # message ids delivered at least once
    finished: set[str] = set()  # acked (or, with --no-ack, received)
    earlier: dict[str, Message] = {}  # --ack-stale: first deliveries, kept to ack after their redelivery
    try:
        while time.monotonic() < deadline and not (args.expect and len(finished) >= args.expect):
            if stopped.is_set():
                break
            try:
                messages = consumer.receive(args.batch, whole(args.invisible))
            except Exception as exc:
                emit(explained(exc, consumer, args.topic, during="receive"))
                if args.retry_errors:
                    time.sleep(0.2)  # the server may be restarting: do not spin
                    continue
                break
            received_at = int(time.time() * 1000)  # wall clock ms: a delay message's check
            emit({"batch": len(messages), "at": received_at})
            for msg in messages:
                emit({"received": describe(msg), "at": received_at})
                first = msg.message_id not in seen
                seen.add(msg.message_id)
                try:
                    if args.no_ack:
                        finished.add(msg.message_id)
                    elif args.nack_first and first:
                        consumer.change_invisible_duration(msg, whole(args.nack_seconds))
                        emit({"nacked": msg.message_id})
                    elif args.ack_stale and first:
                        earlier[msg.message_id] = msg  # not acked: it comes back once invisible time passed
                    elif args.ack_stale and msg.message_id in earlier:
                        try:  # its first handle expired before the redelivery: the server refuses it
                            consumer.ack(earlier.pop(msg.message_id))
                            emit({"stale_acked": msg.message_id})
                        except Exception as exc:
                            emit({"stale": error_record(exc, message_id=msg.message_id)})
                        consumer.ack(msg)
                        finished.add(msg.message_id)
                        emit({"acked": msg.message_id})
                    else:
                        consumer.ack(msg)
                        finished.add(msg.message_id)
                        emit({"acked": msg.message_id})
                except Exception as exc:
                    emit(error_record(exc, message_id=msg.message_id))
    finally:
        shutdown(consumer)
    emit({"done": len(finished)})
    return 0


class Listener(MessageListener):
    """Prints each message it is given; with ``fail_first`` it answers FAILURE the first time it
    sees a message id (the server redelivers it), SUCCESS afterwards."""

    def __init__(self, fail_first: bool, expect: int, hold_file: str | None = None) -> None:
        self.fail_first = fail_first
        self.expect = expect
        self.hold_file = hold_file
        self.attempts: dict[str, int] = {}
        self.succeeded: set[str] = set()
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def consume(self, message: Message) -> ConsumeResult:
        record = describe(message)
        if self.hold_file:  # a long consumption: until the test creates the file
            emit({"holding": message.message_id})
            while not os.path.exists(self.hold_file):
                time.sleep(0.05)
        with self.lock:
            attempt = self.attempts[message.message_id] = self.attempts.get(message.message_id, 0) + 1
            failing = self.fail_first and attempt == 1
            if not failing:
                self.succeeded.add(message.message_id)
            emit({"consumed": record, "attempt": attempt, "result": "FAILURE" if failing else "SUCCESS"})
            if self.expect and len(self.succeeded) >= self.expect:
                self.finished.set()
        return ConsumeResult.FAILURE if failing else ConsumeResult.SUCCESS


def push(args: argparse.Namespace) -> int:
    listener = Listener(args.fail_first, args.expect, args.hold_file)
    consumer = PushConsumer(
        configuration(args),
        args.group,
        listener,
        {args.topic: FilterExpression(args.tag_expression)},
        tls_enable=args.tls,
    )
    stopped = wait_for_stdin_close() if args.stoppable else None
    try:
        consumer.startup()  # waits up to 10 s for the server's settings
    except Exception as exc:
        emit(error_record(exc, during="startup"))
        emit({"done": 0})
        return 0
    emit({"started": True, "fifo": consumer.fifo})
    try:
        if args.fifo and not consumer.fifo:
            emit({"error": "NotFifo", "message": "the server's settings did not make this consumer FIFO"})
        else:
            deadline = time.monotonic() + args.max_seconds
            while not listener.finished.is_set() and time.monotonic() < deadline:
                if stopped is not None and stopped.is_set():
                    break
                listener.finished.wait(0.1)  # polling both the listener and stdin
    finally:
        shutdown(consumer)
    emit({"done": len(listener.succeeded)})
    return 0


def recall(args: argparse.Namespace) -> int:
    producer = Producer(configuration(args), (args.topic,), tls_enable=args.tls)
    recalled = 0
    try:
        producer.startup()
        emit({"recalled": producer.recall_message(args.topic, args.handle)})
        recalled = 1
    except Exception as exc:
        emit(error_record(exc))
    finally:
        if producer.is_running:
            shutdown(producer)
    emit({"done": recalled})
    return 0


def route(args: argparse.Namespace) -> int:
    producer = Producer(configuration(args), tls_enable=args.tls)
    answered = 0
    try:
        producer.startup()
        emit({"started": True})
        emit({"route": query_route(producer, args.topic)})
        answered = 1
    except Exception as exc:
        emit(error_record(exc))
    finally:
        if producer.is_running:
            shutdown(producer)
    emit({"done": answered})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--endpoints", required=True, help="the gRPC endpoint(s), H:P[;H:P]")
    common.add_argument("--topic", required=True)
    common.add_argument("--ak", default="", help="access key (Credentials)")
    common.add_argument("--sk", default="", help="secret key (Credentials)")
    common.add_argument("--tls", action="store_true", help="a TLS channel (tls_enable)")
    common.add_argument(
        "--ca", default="", help="with --tls: trust this PEM file (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)"
    )
    common.add_argument("--request-timeout", type=float, default=3, help="seconds (ClientConfiguration)")

    p = sub.add_parser("produce", parents=[common], help="send --count messages")
    p.add_argument("--count", type=int, default=1, help="0 with --stoppable: until stdin is closed")
    p.add_argument("--pace-ms", type=float, default=0, help="pause between two sends, ms")
    p.add_argument("--type", choices=["normal", "fifo", "delay", "tx"], default="normal")
    p.add_argument("--group", default="sdk-group", help="the message group of --type fifo")
    p.add_argument("--tag", default="")
    p.add_argument("--keys", default="", help="message key; {i} is the message index")
    p.add_argument("--prop", action="append", help="KEY=VALUE user property; {i} is the message index")
    p.add_argument("--delay-seconds", type=int, default=5, help="--type delay: deliver this many s from now")
    p.add_argument(
        "--delivery-timestamp",
        type=int,
        default=None,
        help="--type delay: this raw delivery_timestamp instead",
    )
    p.add_argument("--body-prefix", default="body-")
    p.add_argument("--tx-resolution", choices=["commit", "rollback", "unknown"], default="commit")
    p.add_argument(
        "--checker", choices=["commit", "rollback"], default="commit", help="answer to server checks"
    )
    p.add_argument("--stoppable", action="store_true", help="after sending, run until stdin is closed")
    p.add_argument("--stop-after-errors", type=int, default=0, help="stop after this many failed sends")
    p.add_argument(
        "--undeclared",
        action="store_true",
        help="the producer starts without --topic (no route nor settings for it before the first send)",
    )

    s = sub.add_parser("simple", parents=[common], help="receive with a SimpleConsumer")
    s.add_argument("--group", required=True)
    s.add_argument("--tag-expression", default="*")
    s.add_argument("--expect", type=int, default=0, help="stop once this many messages are acked (received)")
    s.add_argument("--invisible", type=float, default=15, help="invisible duration of a receive, s")
    s.add_argument("--await", dest="await_", type=float, default=5, help="long-polling time, s")
    s.add_argument("--batch", type=int, default=16, help="max messages per receive")
    s.add_argument(
        "--nack-first",
        action="store_true",
        help="change the first delivery of each message to --nack-seconds invisible; ack the redelivery",
    )
    s.add_argument("--nack-seconds", type=float, default=1)
    s.add_argument("--no-ack", action="store_true", help="receive only")
    s.add_argument(
        "--ack-stale",
        action="store_true",
        help="leave each first delivery unacked; at its redelivery ack the first (expired) handle, "
        "printing {stale: error} or {stale_acked: id}, then the new one",
    )
    s.add_argument("--max-seconds", type=float, default=60, help="stop receiving after this long")
    s.add_argument("--retry-errors", action="store_true", help="keep receiving after a receive error")
    s.add_argument("--stoppable", action="store_true", help="stop when stdin is closed")

    c = sub.add_parser("push", parents=[common], help="consume with a PushConsumer")
    c.add_argument("--group", required=True)
    c.add_argument("--tag-expression", default="*")
    c.add_argument("--expect", type=int, default=0, help="stop once this many messages are consumed")
    c.add_argument("--fail-first", action="store_true", help="answer FAILURE the first time a message comes")
    c.add_argument("--hold-file", help="each consumption waits until this file exists (prints {holding: id})")
    c.add_argument(
        "--fifo",
        action="store_true",
        help="the group must be FIFO (the server's settings say so), else an error",
    )
    c.add_argument("--stoppable", action="store_true", help="stop when stdin is closed")
    c.add_argument("--max-seconds", type=float, default=120)

    r = sub.add_parser("recall", parents=[common], help="recall a delay message")
    r.add_argument("--handle", required=True, help="the recall_handle of its send")

    sub.add_parser("route", parents=[common], help="start a producer and ask for the topic's route")

    args = parser.parse_args()  # --ca took effect at the top of this module
    handlers = {"produce": produce, "simple": simple, "push": push, "recall": recall, "route": route}
    return handlers[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
