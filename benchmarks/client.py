"""The Python client against ``finchmq server`` in its own process, 1 KiB messages (``--size``).

    python -m benchmarks.client [--messages 40000] [--size 1024] [--only sync32 push ...] [--namesrv H:P]

Cases (each on a fresh topic; the broker runs ASYNC_FLUSH in a fresh data directory):
    sync1     sync send, 1 sender: msgs/s, p50/p99 latency
    sync32    sync send, 32 concurrent senders on one producer: msgs/s, p50/p99
    async     send_async with up to 256 in flight: msgs/s
    batch     send_batch of 64 messages (64 KiB): msgs/s
    push      push consumer, async no-op listener, topic pre-filled: msgs/s
    push_blocking  the same with a blocking no-op listener (thread pool)
    e2e       end-to-end latency at 1,000 msgs/s: send -> listener through long polling, p50/p99

Targets (issue 6, 2-core machine): sync32 >= 25,000 msgs/s; push >= 30,000 msgs/s; e2e p99 <= 10 ms.
The CPU used by the broker process and by this one are printed per case, in seconds and in µs
per message: the second figure of sync32 is the client's CPU per sync send.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import resource
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks._profile import py_spy_while
from benchmarks._profile import summarize as summarize_profile
from benchmarks._server import ServerProcess
from finchmq.client import (
    AdminClient,
    BrokerBusyError,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendResult,
)
from finchmq.remoting import HAVE_UVLOOP, run

BODY = b"x" * 1024
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
QUEUES = 8
_STAMP = struct.Struct(">q")


@dataclass
class Result:
    name: str
    count: int
    seconds: float
    latencies: list[float]
    server_cpu: float
    client_cpu: float
    note: str = ""

    def line(self) -> str:
        rate = self.count / self.seconds if self.seconds else 0.0
        text = f"{self.name:<14} {rate:>10,.0f} msgs/s"
        if self.latencies:
            text += f"   p50 {_percentile(self, 0.5):6.2f} ms   p99 {_percentile(self, 0.99):6.2f} ms"
        text += f"   cpu: broker {self.server_cpu:5.1f}s client {self.client_cpu:5.1f}s"
        if self.count:
            per_message = 1e6 / self.count
            text += f" ({self.server_cpu * per_message:.0f} / {self.client_cpu * per_message:.0f} µs per msg)"
        return text + (f"   {self.note}" if self.note else "")


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Bench:
    def __init__(
        self,
        namesrv: str,
        server: ServerProcess | None,
        messages: int,
        fake: bool = False,
        profile: Path | None = None,
    ) -> None:
        self.fake = fake
        self.profile = profile
        self.namesrv = namesrv
        self.server = server
        self.messages = messages
        self.counter = 0

    def topic(self, case: str) -> str:
        self.counter += 1
        return f"Bench_{case}_{os.getpid()}_{self.counter}"

    async def create_topic(self, topic: str) -> None:
        if self.fake:
            return
        async with AdminClient(namesrv_addr=self.namesrv) as admin:
            await admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            for _ in range(100):
                try:
                    route = await admin.topic_route(topic)
                    if sum(q.write_queue_nums for q in route.queue_datas) == QUEUES:
                        return
                except Exception:
                    pass
                await asyncio.sleep(0.05)

    async def measure(self, name: str, body: Callable[[], Awaitable[tuple[int, list[float], str]]]) -> Result:
        server_before = self.server.cpu_seconds() if self.server else 0.0
        client_before = _client_cpu()
        began = time.perf_counter()
        if self.profile is None:
            count, latencies, note = await body()
        else:
            raw = self.profile / f"client_{name}.raw"
            with py_spy_while(os.getpid(), raw):
                count, latencies, note = await body()
            summary = summarize_profile(raw)
            raw.with_suffix(".txt").write_text(f"py-spy --gil, the client, {name}\n{summary}\n")
        seconds = time.perf_counter() - began
        server_cpu = (self.server.cpu_seconds() - server_before) if self.server else 0.0
        return Result(name, count, seconds, latencies, server_cpu, _client_cpu() - client_before, note)

    def producer(self) -> Producer:
        return Producer("bench_pg", namesrv_addr=self.namesrv, instance_name=f"bench-{time.monotonic_ns()}")

    async def sync_send(self, senders: int) -> Result:
        topic = self.topic(f"sync{senders}")
        await self.create_topic(topic)
        async with self.producer() as producer:
            await producer.send(Message(topic, BODY))  # route + connection
            per_sender = self.messages // senders

            async def body() -> tuple[int, list[float], str]:
                latencies: list[float] = []
                perf = time.perf_counter
                busy = 0

                async def sender() -> None:
                    nonlocal busy
                    msg = Message(topic, BODY)
                    for _ in range(per_sender):
                        t0 = perf()
                        try:
                            await producer.send(msg)
                        except BrokerBusyError:  # the broker shed it: counted, not stored
                            busy += 1
                            continue
                        latencies.append(perf() - t0)

                await asyncio.gather(*(sender() for _ in range(senders)))
                return per_sender * senders - busy, latencies, f"SYSTEM_BUSY {busy}" if busy else ""

            return await self.measure(f"sync{senders}", body)

    async def async_send(self, window: int = 256) -> Result:
        topic = self.topic("async")
        await self.create_topic(topic)
        async with self.producer() as producer:
            await producer.send(Message(topic, BODY))

            async def body() -> tuple[int, list[float], str]:
                msg = Message(topic, BODY)
                slots = asyncio.Semaphore(window)
                done = 0
                busy = 0
                finished = asyncio.get_running_loop().create_future()

                def release(future: asyncio.Future[SendResult]) -> None:
                    nonlocal done, busy
                    slots.release()
                    done += 1
                    if future.exception() is not None:
                        busy += 1
                    if done == self.messages and not finished.done():
                        finished.set_result(None)

                for _ in range(self.messages):
                    await slots.acquire()
                    producer.send_async(msg).add_done_callback(release)
                await finished
                return self.messages - busy, [], f"window {window}" + (f", failed {busy}" if busy else "")

            return await self.measure("async", body)

    async def batch_send(self, size: int = 64) -> Result:
        topic = self.topic("batch")
        await self.create_topic(topic)
        async with self.producer() as producer:
            batch = [Message(topic, BODY) for _ in range(size)]
            await producer.send_batch(batch)

            async def body() -> tuple[int, list[float], str]:
                batches = self.messages // size

                busy = 0

                async def sender(n: int) -> None:
                    nonlocal busy
                    for _ in range(n):
                        try:
                            await producer.send_batch(batch)
                        except BrokerBusyError:
                            busy += 1

                await asyncio.gather(*(sender(batches // 4) for _ in range(4)))
                note = f"{size} per batch, 4 senders" + (f", {busy} batches shed" if busy else "")
                return (batches // 4 * 4 - busy) * size, [], note

            return await self.measure("batch", body)

    async def fill(self, topic: str, count: int) -> None:
        async with self.producer() as producer:
            batch = [Message(topic, BODY) for _ in range(64)]
            sent = 0

            async def sender() -> None:
                nonlocal sent
                while sent < count:
                    sent += 64
                    try:
                        await producer.send_batch(batch)
                    except BrokerBusyError:  # shed: send it again a moment later
                        sent -= 64
                        await asyncio.sleep(0.05)

            await asyncio.gather(*(sender() for _ in range(4)))

    async def push(self, blocking: bool) -> Result:
        name = "push_blocking" if blocking else "push"
        topic = self.topic(name)
        await self.create_topic(topic)
        await self.fill(topic, self.messages)
        received = 0
        done = asyncio.get_running_loop().create_future()
        target = self.messages

        def count(n: int) -> None:
            nonlocal received
            received += n
            if received >= target and not done.done():
                done.set_result(None)

        if blocking:
            loop = asyncio.get_running_loop()

            def listener(
                msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
            ) -> ConsumeConcurrentlyStatus:
                loop.call_soon_threadsafe(count, len(msgs))
                return OK

            consume_listener: object = listener
        else:

            async def async_listener(
                msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
            ) -> ConsumeConcurrentlyStatus:
                count(len(msgs))
                return OK

            consume_listener = async_listener
        consumer = PushConsumer(
            f"bench_{name}_{os.getpid()}_{self.counter}",
            namesrv_addr=self.namesrv,
            instance_name=f"bench-c-{time.monotonic_ns()}",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic)
        consumer.register_message_listener(consume_listener)  # type: ignore[arg-type]

        async def body() -> tuple[int, list[float], str]:
            async with consumer:
                await done
            return received, [], "no-op listener, " + ("blocking (thread pool)" if blocking else "async")

        return await self.measure(name, body)

    async def e2e(self, rate: int = 1000, seconds: float = 10.0) -> Result:
        topic = self.topic("e2e")
        await self.create_topic(topic)
        latencies: list[float] = []

        async def listener(
            msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            now = time.time_ns()
            for m in msgs:
                latencies.append((now - _STAMP.unpack_from(m.body)[0]) / 1e9)
            return OK

        consumer = PushConsumer(
            f"bench_e2e_{os.getpid()}_{self.counter}",
            namesrv_addr=self.namesrv,
            instance_name=f"bench-e-{time.monotonic_ns()}",
        )
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        async with consumer, self.producer() as producer:
            while len([mq for mq in consumer.rebalance.process_queue_table if mq.topic == topic]) < QUEUES:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # every queue has a long poll held on the broker
            warmup = 200
            failed = 0
            first_error = ""

            def failures(future: asyncio.Future[SendResult]) -> None:
                nonlocal failed, first_error
                exc = future.exception()
                if exc is not None:
                    failed += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"[:200]

            async def body() -> tuple[int, list[float], str]:
                total = int(rate * seconds) + warmup
                interval = 1.0 / rate
                start = time.perf_counter()
                for i in range(total):
                    target = start + i * interval
                    delay = target - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    payload = _STAMP.pack(time.time_ns()) + BODY[8:]
                    producer.send_async(Message(topic, payload)).add_done_callback(failures)
                deadline = time.monotonic() + 10
                while len(latencies) + failed < total and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                measured = latencies[warmup:]
                note = f"{rate} msgs/s offered, first {warmup} dropped" + (
                    f", {failed} sends failed (first: {first_error})" if failed else ""
                )
                return len(measured), measured, note

            result = await self.measure("e2e", body)
        result.seconds = seconds
        return result


CASES = ("sync1", "sync32", "async", "batch", "push", "push_blocking", "e2e")
FAKE_CASES = ("sync1", "sync32", "async", "batch")


class _FakeBroker:
    """Answers sends at once, so only the client's own cost is measured (``--fake-broker``)."""

    def __init__(self, port_of: Callable[[], int]) -> None:
        self.port_of = port_of
        self.offset = 0

    def reject_request(self) -> bool:
        return False

    async def process_request(self, ctx: Any, request: Any) -> Any:
        from finchmq.protocol import RequestCode, ResponseCode  # noqa: PLC0415
        from finchmq.protocol.bodies import BrokerData, QueueData, TopicRouteData  # noqa: PLC0415
        from finchmq.protocol.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader  # noqa: PLC0415

        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            route = TopicRouteData(
                queue_datas=(
                    QueueData(broker_name="fake", read_queue_nums=QUEUES, write_queue_nums=QUEUES, perm=6),
                ),
                broker_datas=(
                    BrokerData(
                        cluster="c", broker_name="fake", broker_addrs={0: f"127.0.0.1:{self.port_of()}"}
                    ),
                ),
            )
            return request.make_response(ResponseCode.SUCCESS, body=route.to_json())
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            header = SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
            self.offset += 1
            answer = SendMessageResponseHeader(
                msg_id="7F0000010000000000000000000000AA", queue_id=header.queue_id, queue_offset=self.offset
            )
            return request.make_response(ResponseCode.SUCCESS, ext_fields=answer.to_ext_fields())
        return request.make_response(ResponseCode.SUCCESS)


def _serve_fake(pipe: Connection) -> None:
    from finchmq.protocol import RequestCode  # noqa: PLC0415
    from finchmq.remoting import RemotingServer, RemotingServerConfig, RequestExecutor  # noqa: PLC0415

    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(bind_address="127.0.0.1", listen_port=0))
        fake = _FakeBroker(lambda: server.port)
        codes: list[int] = [
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
            RequestCode.HEART_BEAT,
            RequestCode.UNREGISTER_CLIENT,
        ]
        server.register_processor(codes, fake, RequestExecutor("fake", workers=1, capacity=100_000))
        await server.start()
        pipe.send(server.port)
        await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
        await server.close()

    run(main())


async def main_async(
    args: argparse.Namespace, server: ServerProcess | None, namesrv: str, fake: bool = False
) -> list[Result]:
    bench = Bench(namesrv, server, args.messages, fake=fake, profile=args.profile)
    results = []
    cases = list(args.only or CASES) * args.repeat
    for number, case in enumerate(cases):
        if args.repeat > 1 and number % len(args.only or CASES) == 0:
            print(f"-- round {number // len(args.only or CASES) + 1} of {args.repeat}", flush=True)
        if case == "sync1":
            bench_result = await Bench(
                namesrv, server, max(args.messages // 5, 1000), fake=fake, profile=args.profile
            ).sync_send(1)
        elif case == "sync32":
            bench_result = await bench.sync_send(32)
        elif case == "async":
            bench_result = await bench.async_send()
        elif case == "batch":
            bench_result = await bench.batch_send()
        elif case == "push":
            bench_result = await bench.push(blocking=False)
        elif case == "push_blocking":
            bench_result = await bench.push(blocking=True)
        else:
            bench_result = await bench.e2e()
        print(bench_result.line(), flush=True)
        results.append(bench_result)
    if args.repeat > 1:
        summarize(results)
    return results


def _percentile(result: Result, fraction: float) -> float:
    """The latency (ms) below which ``fraction`` of the result's sends fell."""
    lat = sorted(result.latencies)
    return lat[min(len(lat) - 1, int(len(lat) * fraction))] * 1000 if lat else 0.0


def summarize(results: list[Result]) -> None:
    """Best and spread of each case over the rounds (the machine is shared: runs vary)."""
    print("-- summary: best (min..max over rounds)", flush=True)
    for name in dict.fromkeys(r.name for r in results):
        rounds = [r for r in results if r.name == name]
        rates = [r.count / r.seconds for r in rounds if r.seconds]
        text = f"{name:<14} {max(rates):>10,.0f} msgs/s ({min(rates):,.0f}..{max(rates):,.0f})"
        if any(r.latencies for r in rounds):
            p99s = [_percentile(r, 0.99) for r in rounds]
            text += f"   p99 best {min(p99s):.2f} ms ({min(p99s):.2f}..{max(p99s):.2f})"
        print(text, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=40_000, help="messages per throughput case")
    parser.add_argument("--size", type=int, default=1024, help="body bytes, >= 16 (default 1024)")
    parser.add_argument("--only", nargs="+", choices=CASES, help="run these cases only")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds; with more than one, a best/spread summary"
    )
    parser.add_argument("--namesrv", help="use a running server instead of starting one")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="py-spy this process during each case: DIR/client_CASE.raw and a summary in .txt "
        "(the profiler's sampling shows in the timings)",
    )
    parser.add_argument(
        "--fake-broker",
        action="store_true",
        help="send to a process that answers at once: the client's own capacity (send cases only)",
    )
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.size < 16:
        parser.error("--size must be >= 16")
    global BODY  # noqa: PLW0603 - the cases read the module's body
    BODY = b"x" * args.size
    print(
        f"finchmq client benchmark: {args.size} B messages, uvloop={HAVE_UVLOOP}, {os.cpu_count()} CPUs",
        flush=True,
    )
    if args.fake_broker:
        args.only = [c for c in (args.only or FAKE_CASES) if c in FAKE_CASES]
        ours, theirs = mp.Pipe()
        process = mp.Process(target=_serve_fake, args=(theirs,), daemon=True)
        process.start()
        port = ours.recv()
        print("against a fake broker that answers at once (client cost only)", flush=True)
        try:
            run(main_async(args, None, f"127.0.0.1:{port}", fake=True))
        finally:
            ours.send("stop")
            process.join(10)
        return
    if args.namesrv:
        run(main_async(args, None, args.namesrv))
        return
    with ServerProcess() as server:
        run(main_async(args, server, server.namesrv_addr))


if __name__ == "__main__":
    main()
