"""``finchmq demo``: what finchmq can do today, shown for real.

The main job (a Spark Structured Streaming pipeline over an embedded name server and broker)
replaces this as the layers below it land; until then the demo runs the parts that exist and
says which do not.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from finchmq.protocol import RemotingCodec, RemotingCommand, RequestCode, ResponseCode
from finchmq.remoting import (
    RemotingClient,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RequestExecutor,
    run,
)

__all__ = ["add_demo_parser"]


def add_demo_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "demo",
        help="run the main job (today: a remoting round trip on loopback)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=20_000, help="round trips to time (default 20000)")
    parser.add_argument("--in-flight", type=int, default=64, help="requests in flight (default 64)")
    parser.set_defaults(handler=_run_demo)


class _HeartbeatAck:
    async def process_request(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS)

    def reject_request(self) -> bool:
        return False


async def _demo(requests: int, in_flight: int) -> None:
    server = RemotingServer(RemotingServerConfig(bind_address="127.0.0.1", listen_port=0))
    server.register_processor(
        RequestCode.HEART_BEAT, _HeartbeatAck(), RequestExecutor("demo", workers=4, capacity=10_000)
    )
    await server.start()
    addr = f"127.0.0.1:{server.port}"
    print(f"[1/3] RocketMQ remoting server listening on {addr}")
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {"clientID": "demo@finchmq"})
    async with RemotingClient() as client:
        response = await client.invoke(addr, request, 3000)
        frame = RemotingCodec().send(response)
        print(
            f"[2/3] HEART_BEAT answered {ResponseCode(response.code).name}; the response frame on the wire:"
        )
        print(f"      {frame[:8].hex(' ')} | {frame[8:].decode()}")
        remaining = requests
        began = time.perf_counter()

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await client.invoke(addr, request, 3000)

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - began
    await server.close()
    rate = requests / elapsed
    print(f"[3/3] {requests} round trips with {in_flight} in flight: {rate:,.0f} req/s (one process)")


def _run_demo(args: argparse.Namespace) -> int:
    print("finchmq demo: the layers that exist today are the protocol codec and the asyncio transport.")
    print("Not built yet: the store, name server, broker, client, and the Spark pipeline (the main job).\n")
    run(_demo(args.requests, args.in_flight))
    return 0
