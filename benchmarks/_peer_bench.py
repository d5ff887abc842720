"""The load generator for the peers, built on the same loops as ``finchmq bench`` (``closed_loop``,
``fixed_rate``, ``Recorder`` from ``finchmq.cli.bench``), so every system is driven the same way.

    python -m benchmarks._peer_bench {nats,redis} {publish,consume,e2e} --addr 127.0.0.1:PORT ...

Prints one JSON line, the summary, with the keys of ``finchmq bench --json``'s summary.

- publish: ``--concurrency`` asyncio tasks each await one acknowledged publish, then the next
  (NATS: ``js.publish`` awaits the PubAck, over one connection; Redis: ``XADD`` awaits the
  reply, redis-py's pool gives each task its own connection: it does not multiplex).
- consume: ``--consumers`` tasks (default 8, as many as the finchmq topic's queues, each of
  which gets one pull loop) fetch batches of 32 (RocketMQ's ``pullBatchSize``) and acknowledge
  each batch once (NATS: durable pull consumer, AckAll on the batch's last message; Redis:
  ``XREADGROUP ... COUNT 32 BLOCK`` then one ``XACK`` of the batch's ids), the analogue of the
  push consumer's offset commits. The clock runs from the first message to the last.
- e2e: publishes at ``--rate`` on a fixed schedule while the consumer tasks above receive;
  latency from just before the publish to the consumer's hands (the time is in the body).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import nats.errors
import redis.asyncio as aredis
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from nats.js.errors import APIError
from redis.exceptions import ResponseError

from finchmq.cli.bench import Recorder, closed_loop, fixed_rate, stamp_body, stamped_latency_ms
from finchmq.remoting import run

BATCH = 32  # RocketMQ's pullBatchSize
FETCH_TIMEOUT_S = 1.0


class Arrivals:
    """Counts consumed bodies (clock from the first to the last) and, for e2e, their latencies."""

    def __init__(self, limit: int, stop: asyncio.Event, *, stamped: bool) -> None:
        self.recorder = Recorder()
        self.limit = limit
        self.stop = stop
        self.stamped = stamped
        self.count = 0
        self.bytes = 0
        self.first = 0.0
        self.last = 0.0
        self.seen: set[int] = set()
        self.duplicates = 0

    def arrived(self, bodies: list[bytes]) -> None:
        if not self.first:
            self.first = time.monotonic()
            if not self.stamped:
                self.recorder.start()
        for body in bodies:
            if self.limit and self.count >= self.limit:
                break
            if self.stamped:
                stamp = stamped_latency_ms(body)
                if stamp is None:
                    continue
                ms, seq = stamp
                if seq in self.seen:
                    self.duplicates += 1
                    continue
                self.seen.add(seq)
                self.recorder.ok(1, ms)
            else:
                self.recorder.ok(1, 0.0)
            self.count += 1
            self.bytes += len(body)
            self.last = time.monotonic()
        if self.limit and self.count >= self.limit:
            self.stop.set()


# -- the systems: connect, publish, consume ------------------------------------------------------------


class Nats:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.subject = f"bench.{args.stream}"
        self.nc: Any = None
        self.js: Any = None

    async def connect(self) -> None:
        self.nc = await nats.connect(f"nats://{self.args.addr}", max_reconnect_attempts=0)
        self.js = self.nc.jetstream()
        try:
            await self.js.stream_info(self.args.stream)
        except Exception:
            await self.js.add_stream(
                name=self.args.stream, subjects=[self.subject], storage=StorageType.FILE, num_replicas=1
            )

    def publisher(self) -> Callable[[bytes], Awaitable[object]]:
        subject, js = self.subject, self.js

        async def publish(body: bytes) -> object:
            return await js.publish(subject, body, timeout=10)

        return publish

    @staticmethod
    def is_response_error(exc: BaseException) -> bool:
        return isinstance(exc, APIError)

    async def prepare_consumer(self, from_start: bool) -> None:
        await self.js.add_consumer(
            self.args.stream,
            ConsumerConfig(
                durable_name="bench",
                ack_policy=AckPolicy.ALL,
                deliver_policy=DeliverPolicy.ALL if from_start else DeliverPolicy.NEW,
                max_ack_pending=100_000,
                filter_subject=self.subject,
            ),
        )

    async def consume(self, arrivals: Arrivals, stop: asyncio.Event) -> None:
        psub = await self.js.pull_subscribe_bind("bench", self.args.stream)
        # nats-py's fetch(n) returns once n arrived or the request expired: right for a backlog,
        # but at a fixed rate it would time batch filling, so e2e fetches one at a time (each
        # consumer task keeps a waiting pull request, like a long poll).
        batch = 1 if self.args.workload == "e2e" else BATCH
        try:
            while not stop.is_set():
                try:
                    msgs = await psub.fetch(batch, timeout=FETCH_TIMEOUT_S)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                if msgs:
                    arrivals.arrived([m.data for m in msgs])
                    await msgs[-1].ack()
        finally:
            await psub.unsubscribe()

    async def close(self) -> None:
        if self.nc is not None:
            await self.nc.close()


class Redis:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stream = args.stream
        self.r: Any = None

    async def connect(self) -> None:
        host, port = self.args.addr.rsplit(":", 1)
        pool_size = max(self.args.concurrency, self.args.consumers) + 16
        pool = aredis.BlockingConnectionPool(host=host, port=int(port), max_connections=pool_size, timeout=30)
        self.r = aredis.Redis(connection_pool=pool)
        await self.r.ping()

    def publisher(self) -> Callable[[bytes], Awaitable[object]]:
        r, stream = self.r, self.stream

        async def publish(body: bytes) -> object:
            return await r.xadd(stream, {"d": body})

        return publish

    @staticmethod
    def is_response_error(exc: BaseException) -> bool:
        return isinstance(exc, ResponseError)

    async def prepare_consumer(self, from_start: bool) -> None:
        await self.r.xgroup_create(self.stream, "bench", id="0" if from_start else "$", mkstream=True)

    async def consume(self, arrivals: Arrivals, stop: asyncio.Event, name: str = "c") -> None:
        r, stream = self.r, self.stream
        while not stop.is_set():
            reply = await r.xreadgroup(
                "bench", name, {stream: ">"}, count=BATCH, block=int(FETCH_TIMEOUT_S * 1000)
            )
            if not reply:
                continue
            entries = reply[0][1]
            if entries:
                arrivals.arrived([fields[b"d"] for _, fields in entries])
                await r.xack(stream, "bench", *[entry_id for entry_id, _ in entries])

    async def close(self) -> None:
        if self.r is not None:
            await self.r.aclose()


# -- workloads -----------------------------------------------------------------------------------------


async def publish(system: Nats | Redis, args: argparse.Namespace) -> dict[str, Any]:
    send_one = system.publisher()
    body = b"x" * args.size

    async def send() -> int:
        await send_one(body)
        return 1

    recorder = Recorder()
    elapsed = await closed_loop(
        send,
        recorder,
        concurrency=args.concurrency,
        duration=args.duration,
        warmup=args.warmup,
        max_messages=args.messages,
        is_response_error=system.is_response_error,
        interval=3600,
    )
    total = recorder.total(elapsed)
    total["mib_per_s"] = round(total["tps"] * args.size / 2**20, 3)
    return total


async def _consumers(system: Nats | Redis, arrivals: Arrivals, stop: asyncio.Event, n: int) -> list[Any]:
    if isinstance(system, Redis):
        return [asyncio.ensure_future(system.consume(arrivals, stop, f"c{i}")) for i in range(n)]
    return [asyncio.ensure_future(system.consume(arrivals, stop)) for _ in range(n)]


async def consume(system: Nats | Redis, args: argparse.Namespace) -> dict[str, Any]:
    stop = asyncio.Event()
    arrivals = Arrivals(args.messages, stop, stamped=False)
    await system.prepare_consumer(from_start=True)
    tasks = await _consumers(system, arrivals, stop, args.consumers)
    try:
        await asyncio.wait_for(stop.wait(), args.duration)
    except TimeoutError:
        stop.set()
    await asyncio.gather(*tasks)
    if arrivals.limit and arrivals.count >= arrivals.limit:
        elapsed = arrivals.last - arrivals.first
    else:
        elapsed = time.monotonic() - arrivals.first if arrivals.first else 0.0
    total = arrivals.recorder.total(elapsed)
    total["mib_per_s"] = round(arrivals.bytes / elapsed / 2**20, 3) if elapsed > 0 else 0.0
    return total


async def e2e(system: Nats | Redis, args: argparse.Namespace) -> dict[str, Any]:
    stop = asyncio.Event()
    arrivals = Arrivals(0, stop, stamped=True)
    await system.prepare_consumer(from_start=False)
    tasks = await _consumers(system, arrivals, stop, args.consumers)
    await asyncio.sleep(0.5)  # the consumers' first fetches are on their way
    send_one = system.publisher()

    async def send(seq: int) -> int:
        await send_one(stamp_body(args.size, seq))
        return 1

    sends = Recorder()
    arrivals.recorder.start()
    sent = await fixed_rate(
        send, sends, rate=args.rate, duration=args.duration, is_response_error=system.is_response_error
    )
    send_elapsed = time.monotonic() - sends.started
    acknowledged = sends.messages
    deadline = time.monotonic() + args.drain
    while len(arrivals.seen) < acknowledged and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*tasks)
    send_total = sends.total(send_elapsed)
    total = arrivals.recorder.total(send_elapsed)
    total.update(
        rate=args.rate,
        sent=sent,
        send_tps=send_total["tps"],
        send_failed=send_total["send_failed"],
        response_failed=send_total["response_failed"],
        send_rt=send_total,
        lost=max(0, send_total["messages"] - len(arrivals.seen)),
        duplicates=arrivals.duplicates,
        first_error=send_total["first_error"] or total["first_error"],
        mib_per_s=round(total["tps"] * args.size / 2**20, 3),
    )
    return total


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    system: Nats | Redis = Nats(args) if args.system == "nats" else Redis(args)
    await system.connect()
    try:
        workload = {"publish": publish, "consume": consume, "e2e": e2e}[args.workload]
        result = await workload(system, args)
    finally:
        await system.close()
    return {"type": "summary", "command": args.workload, "system": args.system, **result}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("system", choices=["nats", "redis"])
    parser.add_argument("workload", choices=["publish", "consume", "e2e"])
    parser.add_argument("--addr", required=True)
    parser.add_argument("--stream", default="bench")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=0)
    parser.add_argument("--messages", type=int, default=0)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--drain", type=float, default=10)
    args = parser.parse_args()
    print(json.dumps(run(main_async(args))), flush=True)


if __name__ == "__main__":
    main()
