"""Load from the official RocketMQ 5.x Python SDK (PyPI ``rocketmq-python-client==5.1.2``, gRPC), for
``benchmarks/sdk5.py``. Runs under ``.venv-v5/bin/python``; never imports finchmq.

    publish --endpoints H:P --topic T [--threads 8] [--seconds 20] [--size 1024]
    receive --endpoints H:P --topic T --group G --count N [--threads 8] [--batch 32] [--invisible 30]

``publish``: one ``Producer`` shared by ``--threads`` threads, each doing sync ``send`` of a new
``--size``-byte message in a loop for ``--seconds``. ``receive``: one ``SimpleConsumer`` shared by
``--threads`` threads, each doing ``receive(--batch, --invisible)`` then ``ack`` of every message,
until ``--count`` messages are acked (or ``--max-seconds``, or 100 failures in a row). The clock
starts once the client has started (settings received) and stops at the last send (publish) or at
the ``--count``-th ack (receive). Prints one JSON line: ``messages``, ``elapsed`` (s), ``errors``,
``first_error``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

GIVE_UP = 100  # receive: failed calls in a row that end the run (the server does not serve it)


class Tally:
    """Counts shared by the worker threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages = 0
        self.errors = 0
        self.first_error = ""
        self.finished_at = 0.0
        self.in_a_row = 0  # failures since the last success

    def succeeded(self) -> None:
        with self.lock:
            self.messages += 1
            self.in_a_row = 0

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors += 1
            self.in_a_row += 1
            if not self.first_error:
                self.first_error = f"{type(exc).__name__}: {exc}"[:300]


def publish(args: argparse.Namespace) -> dict:
    producer = Producer(ClientConfiguration(args.endpoints, Credentials()), (args.topic,))
    producer.startup()
    body = b"x" * args.size
    tally = Tally()
    began = time.monotonic()
    deadline = began + args.seconds

    def sender() -> None:
        while time.monotonic() < deadline:
            msg = Message()
            msg.topic = args.topic
            msg.body = body
            msg.tag = "bench"
            try:
                producer.send(msg)
            except Exception as exc:
                tally.failed(exc)
                continue
            tally.succeeded()

    threads = [threading.Thread(target=sender, name=f"sender-{i}") for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    producer.shutdown()
    return {
        "messages": tally.messages,
        "elapsed": elapsed,
        "errors": tally.errors,
        "first_error": tally.first_error,
    }


def receive(args: argparse.Namespace) -> dict:
    consumer = SimpleConsumer(
        ClientConfiguration(args.endpoints, Credentials()),
        args.group,
        {args.topic: FilterExpression("*")},
        await_duration=args.await_,
    )
    consumer.startup()
    tally = Tally()
    began = time.monotonic()
    deadline = began + args.max_seconds
    done = threading.Event()

    def receiver() -> None:
        while not done.is_set() and time.monotonic() < deadline and tally.in_a_row < GIVE_UP:
            try:
                messages = consumer.receive(args.batch, args.invisible)
            except Exception as exc:
                tally.failed(exc)
                time.sleep(0.05)  # e.g. nothing there: do not spin
                continue
            for msg in messages:
                try:
                    consumer.ack(msg)
                except Exception as exc:
                    tally.failed(exc)
                    continue
                tally.succeeded()
                with tally.lock:
                    if tally.messages == args.count:
                        tally.finished_at = time.monotonic()
                        done.set()

    threads = [threading.Thread(target=receiver, name=f"receiver-{i}") for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = (tally.finished_at or time.monotonic()) - began
    consumer.shutdown()
    return {
        "messages": min(tally.messages, args.count),  # acks after the count-th came after the clock stopped
        "elapsed": elapsed,
        "errors": tally.errors,
        "first_error": tally.first_error,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--endpoints", required=True, help="the gRPC endpoint, H:P")
    common.add_argument("--topic", required=True)
    common.add_argument("--threads", type=int, default=8)
    p = sub.add_parser("publish", parents=[common], help="sync sends for --seconds")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--size", type=int, default=1024)
    r = sub.add_parser("receive", parents=[common], help="SimpleConsumer receive + ack of --count messages")
    r.add_argument("--group", required=True)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--batch", type=int, default=32)
    r.add_argument("--invisible", type=int, default=30, help="invisible duration, s")
    r.add_argument(
        "--await",
        dest="await_",
        type=int,
        default=5,
        help="long-polling time, s (default 5: the proxy's minimum long-polling time)",
    )
    r.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    result = publish(args) if args.cmd == "publish" else receive(args)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
