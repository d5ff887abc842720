"""``finchmq bench producer|consumer|e2e``: RocketMQ's benchmark tool (``producer.sh``,
``consumer.sh``) on ``finchmq.client``, for finchmq or any RocketMQ 4.x cluster.

Strategy: one asyncio process (uvloop when installed). ``producer`` runs ``--concurrency`` tasks
(RocketMQ's ``-w`` threads, default 64) that each send a message (or a batch), await the answer
and send the next: a closed loop, so the rate is what the cluster sustains. ``consumer`` runs a
push consumer (or one long-polling pull loop per queue) and counts what arrives. ``e2e`` sends at
a fixed rate while consuming the same topic, and times each message from just before its send
to its arrival in the listener (the send time travels in the body's first 8 bytes).

Every ``--interval`` seconds (default 10) a line gives the rate, average and maximum RT and the
p50/p99/p99.9; the end prints a summary. Labels follow RocketMQ's tool (``Send TPS``,
``Max RT(ms)``, ``Average RT(ms)``, ``Send Failed``, ``Response Failed``) with percentiles
added; ``--json`` prints one JSON object per line instead (``"type": "progress"`` then
``"type": "summary"``).

The load-generator pieces (``LatencyHistogram``, ``Recorder``, ``closed_loop``,
``fixed_rate``) are independent of RocketMQ: ``benchmarks/compare.py`` drives NATS JetStream and
Redis Streams with the very same loops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, TextIO

from finchmq.client import (
    AdminClient,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
)
from finchmq.remoting import run

__all__ = [
    "LatencyHistogram",
    "Recorder",
    "Report",
    "add_bench_parser",
    "closed_loop",
    "fixed_rate",
    "stamp_body",
    "stamped_latency_ms",
]

DEFAULT_TOPIC: Final = "BenchmarkTest"  # RocketMQ's benchmark topic
DEFAULT_SIZE: Final = 128  # bytes; RocketMQ's benchmark default
DEFAULT_CONCURRENCY: Final = 64  # RocketMQ's benchmark default thread count
STAMP: Final = struct.Struct(">QQ")  # send time (µs since the epoch), sequence number
_BUCKETS_PER_E: Final = 100  # log buckets: ~1% resolution
_ERROR_PAUSE_S: Final = 0.01  # after a failed send, so a dead cluster does not spin the loop


# -- measuring ----------------------------------------------------------------------------------------


class LatencyHistogram:
    """Latencies in milliseconds in logarithmic buckets (~1% wide): bounded memory for runs of
    any length; the mean and the maximum are exact."""

    __slots__ = ("_counts", "count", "max", "total")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def record(self, ms: float) -> None:
        us = ms * 1000.0
        key = int(math.log(us) * _BUCKETS_PER_E) if us > 1.0 else 0
        self._counts[key] = self._counts.get(key, 0) + 1
        self.count += 1
        self.total += ms
        if ms > self.max:  # noqa: PLR1730 - cheaper than max() on the hot path
            self.max = ms

    def merge(self, other: LatencyHistogram) -> None:
        for key, n in other._counts.items():
            self._counts[key] = self._counts.get(key, 0) + n
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) in ms, at the bucket's middle, never above the max."""
        if not self.count:
            return 0.0
        rank = max(1, math.ceil(self.count * q / 100))
        seen = 0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if seen >= rank:
                return min(math.exp((key + 0.5) / _BUCKETS_PER_E) / 1000.0, self.max)
        return self.max

    def summary(self) -> dict[str, float]:
        return {
            "avg_ms": round(self.mean, 3),
            "p50_ms": round(self.percentile(50), 3),
            "p99_ms": round(self.percentile(99), 3),
            "p999_ms": round(self.percentile(99.9), 3),
            "max_ms": round(self.max, 3),
        }


@dataclass(slots=True)
class _Counters:
    messages: int = 0
    calls: int = 0
    send_failed: int = 0
    response_failed: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def merge(self, other: _Counters) -> None:
        self.messages += other.messages
        self.calls += other.calls
        self.send_failed += other.send_failed
        self.response_failed += other.response_failed
        self.latency.merge(other.latency)


class Recorder:
    """Counts and latencies for the current interval and for the whole run.

    ``ok(messages, ms)`` records a successful call; ``failed(response=...)`` a send that raised
    (``response=True``: the server answered with an error, RocketMQ's "Response Failed").
    ``start()`` (re)starts the clock and drops what was recorded (the end of a warm-up).
    """

    def __init__(self) -> None:
        self._interval = _Counters()
        self._total = _Counters()
        self.started = time.monotonic()
        self._interval_started = self.started
        self.first_error = ""

    def start(self) -> None:
        self._interval = _Counters()
        self._total = _Counters()
        self.started = self._interval_started = time.monotonic()

    def ok(self, messages: int, ms: float) -> None:
        c = self._interval
        c.messages += messages
        c.calls += 1
        c.latency.record(ms)

    def failed(self, exc: BaseException, *, response: bool) -> None:
        if response:
            self._interval.response_failed += 1
        else:
            self._interval.send_failed += 1
        if not self.first_error:
            self.first_error = f"{type(exc).__name__}: {exc}"[:300]

    @property
    def messages(self) -> int:
        return self._total.messages + self._interval.messages

    def interval(self) -> dict[str, Any]:
        """What happened since the last call, folded into the total."""
        now = time.monotonic()
        c, self._interval = self._interval, _Counters()
        elapsed = max(now - self._interval_started, 1e-9)
        self._interval_started = now
        self._total.merge(c)
        return {
            "time": round(time.time(), 3),
            "elapsed": round(elapsed, 3),
            "messages": c.messages,
            "tps": round(c.messages / elapsed, 1),
            **c.latency.summary(),
            "send_failed": c.send_failed,
            "response_failed": c.response_failed,
        }

    def total(self, elapsed: float | None = None) -> dict[str, Any]:
        t = self._total
        t.merge(self._interval)
        self._interval = _Counters()
        elapsed = max(elapsed if elapsed is not None else time.monotonic() - self.started, 1e-9)
        return {
            "elapsed": round(elapsed, 3),
            "messages": t.messages,
            "calls": t.calls,
            "tps": round(t.messages / elapsed, 1),
            **t.latency.summary(),
            "send_failed": t.send_failed,
            "response_failed": t.response_failed,
            "first_error": self.first_error or None,
        }


class Report:
    """Prints progress lines and the summary, as text (RocketMQ's labels) or as JSON lines."""

    def __init__(self, *, as_json: bool, out: TextIO | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout

    def progress(self, kind: str, data: dict[str, Any]) -> None:
        if self.as_json:
            self._json({"type": "progress", "command": kind, **data})
            return
        stamp = datetime.fromtimestamp(data["time"]).strftime("%Y-%m-%d %H:%M:%S")
        rate = {"producer": "Send TPS", "consumer": "Consume TPS", "e2e": "Consume TPS"}[kind]
        rt = "E2E RT" if kind == "e2e" else ("B2C RT" if kind == "consumer" else "RT")
        line = (
            f"Current Time: {stamp} {rate}: {data['tps']:.0f} Max {rt}(ms): {data['max_ms']:.3f} "
            f"Average {rt}(ms): {data['avg_ms']:7.3f} p50(ms): {data['p50_ms']:.3f} "
            f"p99(ms): {data['p99_ms']:.3f} p99.9(ms): {data['p999_ms']:.3f}"
        )
        if kind == "producer":
            line += f" Send Failed: {data['send_failed']} Response Failed: {data['response_failed']}"
        elif kind == "consumer":
            line += f" Average S2C RT(ms): {data['s2c_avg_ms']:7.3f} Max S2C RT(ms): {data['s2c_max_ms']:.3f}"
        else:
            line += (
                f" Send TPS: {data['send_tps']:.0f} Send Failed: {data['send_failed']} "
                f"Response Failed: {data['response_failed']}"
            )
        self._line(line)

    def summary(self, kind: str, data: dict[str, Any]) -> None:
        if self.as_json:
            self._json({"type": "summary", "command": kind, **data})
            return
        lines = [f"Summary ({kind}): {data['description']}"]
        lines.append(
            f"  {data['messages']:,} messages in {data['elapsed']:.1f} s: {data['tps']:,.0f} msgs/s "
            f"({data['mib_per_s']:.2f} MiB/s)"
        )
        rt = {"producer": "send RT", "consumer": "B2C RT", "e2e": "end-to-end RT"}[kind]
        lines.append(
            f"  {rt}(ms): avg {data['avg_ms']:.3f} p50 {data['p50_ms']:.3f} p99 {data['p99_ms']:.3f} "
            f"p99.9 {data['p999_ms']:.3f} max {data['max_ms']:.3f}"
        )
        if kind == "producer":
            lines.append(f"  Send Failed: {data['send_failed']} Response Failed: {data['response_failed']}")
        elif kind == "e2e":
            lines.append(
                f"  sent {data['sent']:,} (target {data['rate']:,.0f}/s, "
                f"achieved {data['send_tps']:,.0f}/s), "
                f"received {data['messages']:,}, lost {data['lost']:,}, duplicates {data['duplicates']:,}; "
                f"Send Failed: {data['send_failed']} Response Failed: {data['response_failed']}"
            )
        if data.get("first_error"):
            lines.append(f"  first error: {data['first_error']}")
        self._line("\n".join(lines))

    def note(self, text: str) -> None:
        if not self.as_json:
            self._line(text)

    def _json(self, data: dict[str, Any]) -> None:
        self._line(json.dumps(data, separators=(", ", ": ")))

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def stamp_body(size: int, seq: int) -> bytes:
    """A body of ``size`` bytes (at least 16) starting with the send time and ``seq``."""
    head = STAMP.pack(time.time_ns() // 1000, seq)
    return head + b"x" * (size - len(head)) if size > len(head) else head


def stamped_latency_ms(body: bytes) -> tuple[float, int] | None:
    """(ms since the send, seq) of a ``stamp_body`` body, or None when it carries no stamp."""
    if len(body) < STAMP.size:
        return None
    sent_us, seq = STAMP.unpack_from(body)
    return (time.time_ns() // 1000 - sent_us) / 1000.0, seq


# -- load-generator loops (any system) -----------------------------------------------------------------


async def _ticker(
    stop: asyncio.Event, interval: float, tick: Callable[[], None], warmup: float, on_warm: Callable[[], None]
) -> None:
    if warmup > 0:
        await _wait(stop, warmup)
        if stop.is_set():
            return
    on_warm()
    await _report_every(interval, stop, tick)


async def _stop_after(stop: asyncio.Event, seconds: float) -> None:
    if seconds > 0:
        await _wait(stop, seconds)
        stop.set()


async def closed_loop(
    send: Callable[[], Awaitable[int]],
    recorder: Recorder,
    *,
    concurrency: int,
    duration: float,
    warmup: float = 0.0,
    max_messages: int = 0,
    messages_per_call: int = 1,
    is_response_error: Callable[[BaseException], bool] = lambda exc: False,
    interval: float = 10.0,
    on_interval: Callable[[dict[str, Any]], None] = lambda data: None,
    stop: asyncio.Event | None = None,
) -> float:
    """``concurrency`` tasks each await ``send()`` (which returns the messages it sent, usually
    ``messages_per_call``) and start the next one at once. Runs ``warmup`` + ``duration`` seconds
    (0: until ``stop`` is set), or until ``max_messages`` were started; returns the measured
    seconds (after the warm-up)."""
    stop = stop or asyncio.Event()
    issued = 0
    # the workers check the deadline too: a send that never suspends would starve the timer
    deadline = time.monotonic() + warmup + duration if duration > 0 else math.inf

    async def worker() -> None:
        nonlocal issued
        while not stop.is_set():
            if (max_messages and issued >= max_messages) or time.monotonic() >= deadline:
                stop.set()
                return
            issued += messages_per_call
            began = time.perf_counter()
            try:
                n = await send()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                recorder.failed(exc, response=is_response_error(exc))
                await asyncio.sleep(_ERROR_PAUSE_S)
                continue
            recorder.ok(n, (time.perf_counter() - began) * 1000.0)

    measured_from = time.monotonic()

    def warm() -> None:
        nonlocal measured_from
        recorder.start()
        measured_from = time.monotonic()

    ticker = asyncio.ensure_future(
        _ticker(stop, interval, lambda: on_interval(recorder.interval()), warmup, warm)
    )
    timer = asyncio.ensure_future(_stop_after(stop, warmup + duration if duration > 0 else 0))
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        stop.set()
        await asyncio.gather(ticker, timer)
    return time.monotonic() - measured_from


async def fixed_rate(
    send: Callable[[int], Awaitable[int]],
    recorder: Recorder,
    *,
    rate: float,
    duration: float,
    max_in_flight: int = 1000,
    is_response_error: Callable[[BaseException], bool] = lambda exc: False,
    stop: asyncio.Event | None = None,
) -> int:
    """Start ``send(seq)`` at ``rate`` per second on a fixed schedule (open loop: a slow answer
    does not delay the next send) for ``duration`` seconds, at most ``max_in_flight`` at once
    (beyond that a send waits, and the schedule catches up). Returns the sends started."""
    stop = stop or asyncio.Event()
    gate = asyncio.Semaphore(max_in_flight)
    in_flight: set[asyncio.Task[None]] = set()

    async def one(seq: int) -> None:
        began = time.perf_counter()
        try:
            n = await send(seq)
        except Exception as exc:
            recorder.failed(exc, response=is_response_error(exc))
        else:
            recorder.ok(n, (time.perf_counter() - began) * 1000.0)
        finally:
            gate.release()

    loop = asyncio.get_running_loop()
    start = loop.time()
    seq = 0
    while not stop.is_set():
        now = loop.time()
        if duration > 0 and now - start >= duration:
            break
        due = int((now - start) * rate) + 1
        while seq < due and not stop.is_set():
            await gate.acquire()
            task = asyncio.ensure_future(one(seq))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            seq += 1
        await asyncio.sleep(max(0.0, start + seq / rate - loop.time()))
    if in_flight:
        await asyncio.gather(*in_flight)
    return seq


# -- RocketMQ commands ----------------------------------------------------------------------------------


def _is_broker_error(exc: BaseException) -> bool:
    return isinstance(exc, MQBrokerError)


@contextlib.contextmanager
def _interruptible(stop: asyncio.Event) -> Iterator[None]:
    """Ctrl-C (and SIGTERM) end the run early, with its summary."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def _ensure_topic(args: argparse.Namespace, report: Report) -> None:
    """Create the topic with ``--queues`` queues on every master unless it exists (RocketMQ's
    tool relies on auto-creation; an explicit topic is the same on clusters that disable it)."""
    if args.queues <= 0:
        return
    async with AdminClient(namesrv_addr=args.namesrv) as admin:
        if args.topic in await admin.topic_list():
            return
        brokers = await admin.create_topic(
            args.topic, read_queue_nums=args.queues, write_queue_nums=args.queues
        )
    report.note(f"created topic {args.topic} with {args.queues} queues on {', '.join(brokers)}")
    await asyncio.sleep(0.2)  # the brokers register the topic with the name servers


def _describe_producer(args: argparse.Namespace) -> str:
    what = f"batches of {args.batch} x {args.size} B" if args.batch > 1 else f"{args.size} B messages"
    return (
        f"{what} to {args.topic}, {args.concurrency} concurrent senders ({args.mode}), namesrv {args.namesrv}"
    )


async def _producer(args: argparse.Namespace, report: Report) -> int:
    await _ensure_topic(args, report)
    body = b"x" * args.size
    tag = args.tag or None
    batch: int = max(1, args.batch)
    producer = Producer(
        args.group,
        namesrv_addr=args.namesrv,
        send_msg_timeout=args.timeout,
        compress_msg_body_over_howmuch=2**31 - 1,  # a repeated byte compresses to nothing: never compress
    )
    await producer.start()
    seq = 0

    def message() -> Message:
        nonlocal seq
        seq += 1
        keys = str(seq) if args.keys else None
        return Message.create(args.topic, body, tags=tag, keys=keys)

    async def send_sync() -> int:
        await producer.send(message())
        return 1

    async def send_async() -> int:
        await producer.send_async(message())
        return 1

    async def send_oneway() -> int:
        await producer.send_oneway(message())
        await asyncio.sleep(0)  # send_oneway may not suspend: let the loop run I/O and timers
        return 1

    async def send_batch() -> int:
        await producer.send_batch([message() for _ in range(batch)])
        return batch

    send = (
        send_batch
        if batch > 1
        else {"sync": send_sync, "async": send_async, "oneway": send_oneway}[args.mode]
    )
    recorder = Recorder()
    stop = asyncio.Event()
    report.note(f"producer: {_describe_producer(args)}")
    try:
        with _interruptible(stop):
            elapsed = await closed_loop(
                send,
                recorder,
                concurrency=args.concurrency,
                duration=args.duration,
                warmup=args.warmup,
                max_messages=args.messages,
                messages_per_call=batch,
                is_response_error=_is_broker_error,
                interval=args.interval,
                on_interval=lambda data: report.progress("producer", data),
                stop=stop,
            )
    finally:
        await producer.close()
    total = recorder.total(elapsed)
    total.update(
        description=_describe_producer(args),
        mode=args.mode,
        size=args.size,
        batch=batch,
        concurrency=args.concurrency,
        topic=args.topic,
        mib_per_s=round(total["tps"] * args.size / 2**20, 3),
    )
    report.summary("producer", total)
    return 0 if total["messages"] else 1


class _ConsumeRecorder:
    """Arrivals: B2C (born to consumed) latencies in the recorder, S2C (stored to consumed) aside.

    The clock starts at the first message, so start-up and rebalancing are not counted."""

    def __init__(self, recorder: Recorder, limit: int, stop: asyncio.Event) -> None:
        self.recorder = recorder
        self.s2c = LatencyHistogram()
        self.s2c_total = LatencyHistogram()
        self.limit = limit
        self.stop = stop
        self.first = 0.0
        self.last = 0.0
        self.count = 0
        self.bytes = 0

    def arrived(self, msgs: list[MessageExt]) -> None:
        now_ms = time.time() * 1000.0
        if not self.first:
            self.first = time.monotonic()
            self.recorder.start()
        counted = self.count
        for msg in msgs:
            if self.limit and self.count >= self.limit:
                break  # what is already in flight when the limit is reached is not counted
            self.recorder.ok(1, max(0.0, now_ms - msg.born_timestamp))
            self.s2c.record(max(0.0, now_ms - msg.store_timestamp))
            self.count += 1
            self.bytes += len(msg.body)
        if self.count > counted:
            self.last = time.monotonic()  # the messages of one call arrived together
        if self.limit and self.count >= self.limit:
            self.stop.set()

    def interval(self) -> dict[str, Any]:
        data = self.recorder.interval()
        data["s2c_avg_ms"] = round(self.s2c.mean, 3)
        data["s2c_max_ms"] = round(self.s2c.max, 3)
        self.s2c_total.merge(self.s2c)
        self.s2c = LatencyHistogram()
        return data


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    """Until ``stop`` is set or ``seconds`` pass (0: until ``stop``)."""
    if seconds > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
    else:
        await stop.wait()


async def _report_every(interval: float, stop: asyncio.Event, tick: Callable[[], None]) -> None:
    while not stop.is_set():
        await _wait(stop, interval)
        if not stop.is_set():
            tick()


def _from_where(args: argparse.Namespace) -> ConsumeFromWhere:
    return (
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        if args.from_where == "first"
        else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    )


async def _pull_loops(
    args: argparse.Namespace, arrived: Callable[[list[MessageExt]], None], stop: asyncio.Event
) -> tuple[PullConsumer, asyncio.Future[None]]:
    """One long-polling pull loop per queue (``PullConsumer``), offsets committed as it goes."""
    consumer = PullConsumer(args.group, namesrv_addr=args.namesrv, broker_suspend_max_time_millis=1000)
    consumer.register_topics([args.topic])
    await consumer.start()
    queues = sorted(
        await consumer.fetch_subscribe_message_queues(args.topic), key=lambda q: (q.broker_name, q.queue_id)
    )

    async def loop(mq: MessageQueue) -> None:
        offset = await consumer.fetch_consume_offset(mq, True)
        if offset < 0:
            offset = await (
                consumer.min_offset(mq) if args.from_where == "first" else consumer.max_offset(mq)
            )
        while not stop.is_set():
            result = await consumer.pull_block_if_not_found(mq, args.tag or "*", offset, 32)
            if result.pull_status is PullStatus.FOUND and result.msg_found_list:
                arrived(result.msg_found_list)
            offset = result.next_begin_offset
            consumer.update_consume_offset(mq, offset)

    tasks = [asyncio.ensure_future(loop(mq)) for mq in queues]

    async def cancel_on_stop() -> None:
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    return consumer, asyncio.ensure_future(cancel_on_stop())


async def _consumer(args: argparse.Namespace, report: Report) -> int:
    stop = asyncio.Event()
    recorder = Recorder()
    counter = _ConsumeRecorder(recorder, args.messages, stop)
    description = f"{args.topic} as group {args.group} ({args.mode}, from the {args.from_where} offset)"
    report.note(f"consumer: {description}, namesrv {args.namesrv}")
    push: PushConsumer | None = None
    pull: tuple[PullConsumer, asyncio.Future[None]] | None = None
    if args.mode == "push":
        push = PushConsumer(
            args.group,
            namesrv_addr=args.namesrv,
            consume_from_where=_from_where(args),
            consume_message_batch_max_size=args.consume_batch,
        )
        push.subscribe(args.topic, args.tag or "*")

        async def listener(msgs: list[MessageExt], context: object) -> ConsumeConcurrentlyStatus:
            counter.arrived(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        push.register_message_listener(listener)
        await push.start()
    else:
        pull = await _pull_loops(args, counter.arrived, stop)
    ticker = asyncio.ensure_future(
        _report_every(args.interval, stop, lambda: report.progress("consumer", counter.interval()))
    )
    try:
        with _interruptible(stop):
            await _wait(stop, args.duration)
    finally:
        stop.set()
        await ticker
        if push is not None:
            await push.close()
        if pull is not None:
            await pull[1]
            await pull[0].close()
    if not counter.count:
        elapsed = 0.0
    elif args.messages and counter.count >= args.messages:
        elapsed = counter.last - counter.first  # a drain: first to last message
    else:
        elapsed = time.monotonic() - counter.first  # a window: the idle tail counts too
    total = recorder.total(elapsed)
    counter.s2c_total.merge(counter.s2c)
    total.update(
        description=description,
        mode=args.mode,
        topic=args.topic,
        group=args.group,
        mib_per_s=round(counter.bytes / elapsed / 2**20, 3) if elapsed > 0 else 0.0,
        s2c_avg_ms=round(counter.s2c_total.mean, 3),
        s2c_max_ms=round(counter.s2c_total.max, 3),
    )
    report.summary("consumer", total)
    return 0 if total["messages"] else 1


async def _wait_for_assignment(consumer: PushConsumer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if consumer.rebalance.process_queue_table:
            await asyncio.sleep(0.3)  # the first pulls are on their way
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the consumer got no queue within {timeout:.0f} s")


async def _e2e(args: argparse.Namespace, report: Report) -> int:
    await _ensure_topic(args, report)
    stop = asyncio.Event()
    e2e = Recorder()  # end-to-end latencies, counted on arrival
    sends = Recorder()  # the producer's side
    seen: set[int] = set()
    duplicates = 0

    async def listener(msgs: list[MessageExt], context: object) -> ConsumeConcurrentlyStatus:
        nonlocal duplicates
        for msg in msgs:
            stamped = stamped_latency_ms(msg.body)
            if stamped is None:
                continue
            ms, seq = stamped
            if seq in seen:
                duplicates += 1
                continue
            seen.add(seq)
            e2e.ok(1, ms)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(args.group, namesrv_addr=args.namesrv)
    consumer.subscribe(args.topic, "*")
    consumer.register_message_listener(listener)
    producer = Producer(args.group + "_producer", namesrv_addr=args.namesrv, send_msg_timeout=args.timeout)
    await consumer.start()
    await producer.start()
    description = (
        f"{args.size} B messages at {args.rate:,.0f}/s to {args.topic}, consumed by a push consumer "
        f"in the same process, namesrv {args.namesrv}"
    )
    try:
        await _wait_for_assignment(consumer, 20)
        report.note(f"e2e: {description}")

        async def send(seq: int) -> int:
            await producer.send(Message(args.topic, stamp_body(args.size, seq)))
            return 1

        def tick() -> None:
            data = e2e.interval()
            sent = sends.interval()
            data.update(
                send_tps=sent["tps"],
                send_failed=sent["send_failed"],
                response_failed=sent["response_failed"],
            )
            report.progress("e2e", data)

        e2e.start()
        sends.start()
        ticker = asyncio.ensure_future(_report_every(args.interval, stop, tick))
        with _interruptible(stop):
            sent = await fixed_rate(
                send,
                sends,
                rate=args.rate,
                duration=args.duration,
                is_response_error=_is_broker_error,
                stop=stop,
            )
            send_elapsed = time.monotonic() - sends.started
            acknowledged = sends.messages
            deadline = time.monotonic() + args.drain
            while len(seen) < acknowledged and time.monotonic() < deadline and not stop.is_set():
                await asyncio.sleep(0.05)
        stop.set()
        await ticker
    finally:
        await producer.close(shutdown_instance=False)
        await consumer.close()
    send_total = sends.total(send_elapsed)
    total = e2e.total(send_elapsed)
    total.update(
        description=description,
        rate=args.rate,
        size=args.size,
        sent=sent,
        send_tps=send_total["tps"],
        send_failed=send_total["send_failed"],
        response_failed=send_total["response_failed"],
        send_rt=send_total,
        lost=max(0, send_total["messages"] - len(seen)),
        duplicates=duplicates,
        first_error=send_total["first_error"] or total["first_error"],
        mib_per_s=round(total["tps"] * args.size / 2**20, 3),
    )
    report.summary("e2e", total)
    return 0 if total["messages"] and not total["lost"] else 1


# -- command line --------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _common(parser: argparse.ArgumentParser, *, duration: float) -> None:
    parser.add_argument(
        "-n", "--namesrv", required=True, help="name server address(es), host:port[;host:port]"
    )
    parser.add_argument("-t", "--topic", default=DEFAULT_TOPIC, help=f"topic (default {DEFAULT_TOPIC})")
    parser.add_argument(
        "-d",
        "--duration",
        type=float,
        default=duration,
        help=f"seconds to run; 0: until Ctrl-C (default {duration:g})",
    )
    parser.add_argument(
        "--interval", type=float, default=10.0, help="seconds between progress lines (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON lines (progress, then the summary)")


def add_bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="benchmark a finchmq or RocketMQ 4.x cluster (producer, consumer, end-to-end)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = bench.add_subparsers(dest="bench_command", metavar="WORKLOAD", required=True)

    producer = sub.add_parser("producer", help="send as fast as the cluster answers (producer.sh)")
    _common(producer, duration=60)
    producer.add_argument(
        "-w", "--concurrency", "--threads", type=_positive_int, default=DEFAULT_CONCURRENCY,
        help=f"concurrent senders, each awaiting its answer (default {DEFAULT_CONCURRENCY}, like -w)",
    )  # fmt: skip
    producer.add_argument(
        "-s", "--size", type=_positive_int, default=DEFAULT_SIZE, help=f"body bytes (default {DEFAULT_SIZE})"
    )
    producer.add_argument(
        "-b", "--batch", type=_positive_int, default=1, help="messages per batch send (default 1)"
    )
    producer.add_argument(
        "-m", "--mode", choices=["sync", "async", "oneway"], default="sync",
        help="send API: sync (await the answer), async (send_async future), oneway (no answer: counts "
        "what was written; a broker whose send queue is full drops oneway requests, as RocketMQ does)",
    )  # fmt: skip
    producer.add_argument("-g", "--group", default="benchmark_producer", help="producer group")
    producer.add_argument("--tag", default="", help="tag of every message (default none)")
    producer.add_argument("-k", "--keys", action="store_true", help="give every message a key")
    producer.add_argument(
        "-q", "--messages", type=int, default=0, help="stop after this many (default 0: no limit)"
    )
    producer.add_argument(
        "--warmup", type=float, default=0.0, help="seconds sent before measuring (default 0)"
    )
    producer.add_argument(
        "--timeout", type=_positive_int, default=3000, help="send timeout in ms (default 3000)"
    )
    producer.add_argument(
        "--queues",
        type=int,
        default=8,
        help="create a missing topic with this many queues; 0: rely on auto-creation",
    )
    producer.set_defaults(handler=_run_command(_producer))

    consumer = sub.add_parser("consumer", help="consume and count (consumer.sh)")
    _common(consumer, duration=60)
    consumer.add_argument(
        "-g", "--group", default=f"benchmark_consumer_{int(time.time() * 1000) % 100}", help="consumer group"
    )
    consumer.add_argument(
        "-m", "--mode", choices=["push", "pull"], default="push",
        help="push: PushConsumer; pull: a long-polling PullConsumer loop per queue",
    )  # fmt: skip
    consumer.add_argument(
        "--from", dest="from_where", choices=["last", "first"], default="last",
        help="where a new group starts: last (new messages) or first (the backlog)",
    )  # fmt: skip
    consumer.add_argument("--tag", default="", help="tag expression (default *)")
    consumer.add_argument(
        "--consume-batch", type=_positive_int, default=1, help="messages per listener call (push)"
    )
    consumer.add_argument(
        "-q", "--messages", type=int, default=0, help="stop after this many (default 0: run --duration)"
    )
    consumer.set_defaults(handler=_run_command(_consumer))

    e2e = sub.add_parser("e2e", help="send at a fixed rate, consume, and time each message end to end")
    _common(e2e, duration=30)
    e2e.add_argument("-r", "--rate", type=float, default=1000.0, help="messages per second (default 1000)")
    e2e.add_argument(
        "-s",
        "--size",
        type=_positive_int,
        default=DEFAULT_SIZE,
        help=f"body bytes, >= 16 (default {DEFAULT_SIZE})",
    )
    e2e.add_argument(
        "-g", "--group", default=f"benchmark_e2e_{os.getpid()}", help="consumer group (fresh per run)"
    )
    e2e.add_argument("--drain", type=float, default=10.0, help="seconds to wait for stragglers (default 10)")
    e2e.add_argument("--timeout", type=_positive_int, default=3000, help="send timeout in ms (default 3000)")
    e2e.add_argument("--queues", type=int, default=8, help="create a missing topic with this many queues")
    e2e.set_defaults(handler=_run_command(_e2e), topic=None)


def _run_command(
    command: Callable[[argparse.Namespace, Report], Coroutine[Any, Any, int]],
) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        if getattr(args, "topic", DEFAULT_TOPIC) is None:
            args.topic = f"BenchmarkE2E_{os.getpid()}"
        if getattr(args, "rate", 1.0) <= 0:
            raise SystemExit("--rate must be > 0")
        try:
            return run(command(args, Report(as_json=args.json)))
        except (MQClientError, TimeoutError) as exc:
            print(f"finchmq bench: {exc}", file=sys.stderr)
            return 1

    return handler
