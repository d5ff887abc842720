"""Remoting round trips on loopback: empty request -> empty response.

The server runs in its own process (as a broker would), the client in this one. For each
number of requests in flight it prints req/s and p50/p99 latency.

    python -m benchmarks.remoting_rtt [--seconds 5] [--in-flight 1 64]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import time
from multiprocessing.connection import Connection

from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.remoting import (
    HAVE_UVLOOP,
    ExecutorName,
    RemotingClient,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RequestExecutor,
    RequestProcessor,
    handles,
    run,
)

ECHO_CODE = 9999


class _Empty(RequestProcessor):
    executor = ExecutorName.SEND

    @handles(ECHO_CODE)
    def echo(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS)


def _serve(pipe: Connection) -> None:
    async def main() -> None:
        server = RemotingServer(RemotingServerConfig(bind_address="127.0.0.1", listen_port=0))
        executor = RequestExecutor(ExecutorName.SEND, workers=1, capacity=100_000)
        server.register_processor(_Empty(), {ExecutorName.SEND: executor})
        await server.start()
        pipe.send(server.port)
        await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
        await server.close()

    run(main())


async def _measure(addr: str, in_flight: int, seconds: float) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    request = RemotingCommand.request(ECHO_CODE)
    async with RemotingClient() as client:
        await client.invoke(addr, request, 3000)  # connect + warm up
        deadline = time.monotonic() + seconds
        count = 0

        async def worker() -> None:
            nonlocal count
            perf = time.perf_counter
            while time.monotonic() < deadline:
                began = perf()
                await client.invoke(addr, request, 3000)
                latencies.append(perf() - began)
                count += 1

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - began
    return count, elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each case (default 5)")
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 64], help="concurrency levels")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(child,), daemon=True)
    server.start()
    port = parent.recv()
    print(f"remoting_rtt: server pid {server.pid} on 127.0.0.1:{port}, uvloop={HAVE_UVLOOP}")
    try:
        for in_flight in args.in_flight:
            count, elapsed, latencies = run(_measure(f"127.0.0.1:{port}", in_flight, args.seconds))
            latencies.sort()
            p50 = statistics.median(latencies) * 1e6
            p99 = latencies[int(len(latencies) * 0.99) - 1] * 1e6
            print(
                f"in_flight={in_flight:<4d} requests={count:<9d} req/s={count / elapsed:>10,.0f}  "
                f"p50={p50:8.1f}us  p99={p99:8.1f}us"
            )
    finally:
        parent.send("stop")
        server.join(10)


if __name__ == "__main__":
    main()
