"""A send generator on the raw remoting protocol, for capacity and overload runs.

Open loop (``--rate R``): writes SEND_MESSAGE_V2 frames at R per second whatever the broker
answers (a closed-loop client slows down with the broker and never overloads it). Closed loop
(``--window W``): keeps W sends in flight, which measures capacity. Either way it reads the
answers and prints, every interval, JSON with accepted/s, rejected/s by remark and latency
percentiles of accepted sends. Runs in its own process: ``python -m benchmarks._openloop``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections import Counter

from finchmq.protocol import NEED_DATA, RemotingCodec, RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import SendMessageRequestHeaderV2
from finchmq.remoting import run

_REMARK_KIND = re.compile(r"^\[([A-Z_]+)\]")


class _Generator(asyncio.Protocol):
    def __init__(self) -> None:
        self.refill: object = None  # closed loop: called once per answer
        self.codec = RemotingCodec()
        self.sent_at: dict[int, float] = {}
        self.accepted = 0
        self.rejected: Counter[str] = Counter()
        self.latencies: list[float] = []
        self.transport: asyncio.Transport | None = None
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        self.codec.receive_data(data)
        now = time.perf_counter()
        while True:
            cmd = self.codec.next_command()
            if cmd is NEED_DATA or not isinstance(cmd, RemotingCommand):
                return
            began = self.sent_at.pop(cmd.opaque, None)
            if cmd.code == ResponseCode.SUCCESS:
                self.accepted += 1
                if began is not None:
                    self.latencies.append(now - began)
            else:
                match = _REMARK_KIND.match(cmd.remark or "")
                self.rejected[match.group(1) if match else f"code {cmd.code}"] += 1
            if callable(self.refill):
                self.refill()


async def main(
    addr: str, topic: str, rate: float, window: int, seconds: float, size: int, interval: float
) -> None:
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    transport, gen = await loop.create_connection(_Generator, host, int(port))
    header = SendMessageRequestHeaderV2(
        producer_group="overload", topic=topic, default_topic="TBW102", default_topic_queue_nums=8,
        queue_id=-1,
        sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties="TAGS\x01overload",
    ).to_ext_fields()  # fmt: skip
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"x" * size)
    codec = RemotingCodec()
    opaque = 0
    if window:
        counter = iter(range(1, 1 << 62))

        def send_one() -> None:
            tag = next(counter)
            gen.sent_at[tag] = time.perf_counter()
            transport.write(codec.send(request, opaque=tag))  # type: ignore[attr-defined]

        gen.refill = send_one
        for _ in range(window):
            send_one()
        rate = 0
    began = time.perf_counter()
    next_report = began + interval
    offered_in_interval = 0
    backlog_skipped = 0
    tick = 0.002
    while True:
        now = time.perf_counter()
        if now - began >= seconds + 0.001:
            break
        due = int((now - began) * rate) - opaque if rate else 0
        if due > 0 and not gen.paused:
            frames = []
            for _ in range(due):
                opaque += 1
                gen.sent_at[opaque] = now
                frames.append(codec.send(request, opaque=opaque))
            transport.write(b"".join(frames))  # type: ignore[attr-defined]
            offered_in_interval += due
        elif due > 0:
            backlog_skipped += due  # the socket pushes back: these were never offered
            opaque += due
        if now >= next_report or now - began >= seconds:
            gen.latencies.sort()
            lat = gen.latencies
            print(
                json.dumps(
                    {
                        "t": round(now - began, 1),
                        "offered": offered_in_interval / interval,
                        "accepted": gen.accepted / interval,
                        "rejected": {k: v / interval for k, v in gen.rejected.items()},
                        "p99_ms": lat[int(len(lat) * 0.99)] * 1000 if lat else 0.0,
                        "p50_ms": lat[len(lat) // 2] * 1000 if lat else 0.0,
                        "not_offered": backlog_skipped / interval,
                    }
                ),
                flush=True,
            )
            gen.accepted, gen.rejected, gen.latencies = 0, Counter(), []
            offered_in_interval = backlog_skipped = 0
            next_report += interval
        await asyncio.sleep(tick)
    gen.refill = None
    await asyncio.sleep(2)  # collect the last answers
    transport.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("--topic", default="Overload")
    parser.add_argument("--rate", type=float, default=0, help="open loop: sends per second offered")
    parser.add_argument("--window", type=int, default=0, help="closed loop: sends kept in flight")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args()
    if bool(args.rate) == bool(args.window):
        parser.error("give exactly one of --rate (open loop) and --window (closed loop)")
    run(main(args.addr, args.topic, args.rate, args.window, args.seconds, args.size, args.interval))
