"""The Python client's CPU per sync send, split into what the client library costs and what the
transport under it (remoting + protocol codec) costs.

    python -m benchmarks.client_cpu [--messages 40000] [--size 128] [--senders 32] [--rounds 3]

Three figures, in µs of this process's CPU (``resource.getrusage``: user + system) per send:

- ``library``: ``Producer.send`` with ``RemotingClient.invoke`` answered in-process by a coroutine
  that returns a prebuilt, already decoded response: the producer, the request building and the
  result, without any I/O or frame encoding/decoding. With one reused ``Message`` and with a
  ``Message.create`` per send (what ``finchmq bench producer`` does); ``send_async`` too (256 in
  flight).
- ``transport floor``: against a real ``finchmq server`` (its own process, ASYNC_FLUSH), the same
  32 senders awaiting ``RemotingClient.invoke`` of one prebuilt SEND_MESSAGE_V2 request: framing,
  JSON header encode/decode, futures, timers and socket I/O, no client library.
- ``Producer.send``: the same senders through the client (``Message.create`` per send).

Best of ``--rounds`` for the library figures (deterministic work), every round for the others
(they move with the broker's pace and the machine's load: compare within one run). Run it with
another checkout's ``src`` first on ``PYTHONPATH`` to compare two clients.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Awaitable, Callable

from benchmarks._server import ServerProcess
from finchmq.client import AdminClient, BrokerBusyError, Message, Producer, SendResult
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.headers import SendMessageRequestHeaderV2
from finchmq.remoting import HAVE_UVLOOP, RemotingClient, run

TOPIC = "ClientCpu"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _closed_loop(
    send: Callable[[], Awaitable[object]], messages: int, senders: int
) -> tuple[float, float, int]:
    """(µs of CPU per send, sends/s, sends refused SYSTEM_BUSY) for ``senders`` closed loops."""
    per_sender = messages // senders
    busy = 0

    async def sender() -> None:
        nonlocal busy
        for _ in range(per_sender):
            try:
                await send()
            except BrokerBusyError:
                busy += 1

    cpu, began = _cpu(), time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(senders)))
    count = per_sender * senders
    return (_cpu() - cpu) / count * 1e6, count / (time.perf_counter() - began), busy


async def library(producer: Producer, args: argparse.Namespace) -> None:
    """The client library alone: invoke answered in-process (see the module docstring)."""
    answer = {
        "msgId": "7F00000100002A9F0000000000000000",
        "queueId": "0",
        "queueOffset": "12345",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }

    remoting = producer.instance.remoting
    real_invoke = remoting.invoke

    async def invoke(addr: str, request: RemotingCommand, timeout_millis: int) -> RemotingCommand:
        if request.code != RequestCode.SEND_MESSAGE_V2:  # heartbeats, routes: the real thing
            return await real_invoke(addr, request, timeout_millis)
        return RemotingCommand(
            code=ResponseCode.SUCCESS, flag=1, ext_fields={**answer, "queueId": request.ext_fields["e"]}
        )

    remoting.invoke = invoke  # type: ignore[method-assign]
    body = b"x" * args.size
    reused = Message(TOPIC, body)
    try:
        for label, make in (
            ("reused Message", lambda: reused),
            ("Message.create per send", lambda: Message.create(TOPIC, body)),
        ):
            best = min([await _sync_loop(producer, make, args.messages) for _ in range(args.rounds)])
            print(f"library, sync send, {label:<24} {best:6.2f} µs/send", flush=True)
        best = min([await _async_window(producer, reused, args.messages) for _ in range(args.rounds)])
        print(
            f"library, send_async, 256 in flight          {best:6.2f} µs/send",
            flush=True,
        )
    finally:
        remoting.invoke = real_invoke  # type: ignore[method-assign]


async def _sync_loop(producer: Producer, make: Callable[[], Message], messages: int) -> float:
    cpu = _cpu()
    for _ in range(messages):
        await producer.send(make())
    return (_cpu() - cpu) / messages * 1e6


async def _async_window(producer: Producer, msg: Message, messages: int) -> float:
    slots = asyncio.Semaphore(256)
    finished = asyncio.get_running_loop().create_future()
    done = 0

    def release(_: asyncio.Future[SendResult]) -> None:
        nonlocal done
        slots.release()
        done += 1
        if done == messages:
            finished.set_result(None)

    cpu = _cpu()
    for _ in range(messages):
        await slots.acquire()
        producer.send_async(msg).add_done_callback(release)
    await finished
    return (_cpu() - cpu) / messages * 1e6


async def against_broker(namesrv: str, args: argparse.Namespace) -> None:
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=8, write_queue_nums=8)
    await asyncio.sleep(0.5)  # the route reaches the name server
    async with Producer("client_cpu_pg", namesrv_addr=namesrv) as producer:
        body = b"x" * args.size
        first = await producer.send(Message(TOPIC, body))
        await library(producer, args)
        addr = producer.instance.find_broker_address_in_publish(first.message_queue.broker_name)
        assert addr is not None
        fields = SendMessageRequestHeaderV2(
            producer_group="client_cpu_pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
            properties="WAIT\x01true\x02UNIQ_KEY\x017F00000100002A9F0000000000000000",
        ).to_ext_fields()  # fmt: skip
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, body)
        transport = RemotingClient()

        async def raw() -> None:
            response = await transport.invoke(addr, request, 3000)
            if response.code == ResponseCode.SYSTEM_BUSY:
                raise BrokerBusyError(response.code, response.remark, addr)

        async def send() -> None:
            await producer.send(Message.create(TOPIC, body))

        try:
            await raw()
            for number in range(args.rounds):
                floor = await _closed_loop(raw, args.messages, args.senders)
                full = await _closed_loop(send, args.messages, args.senders)
                busy = f"   (SYSTEM_BUSY {floor[2]} / {full[2]})" if floor[2] or full[2] else ""
                print(
                    f"round {number + 1}, {args.senders} senders: transport floor {floor[0]:5.1f} µs/send "
                    f"({floor[1]:,.0f}/s)   Producer.send {full[0]:5.1f} µs/send ({full[1]:,.0f}/s){busy}",
                    flush=True,
                )
        finally:
            await transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=40_000, help="sends per figure (default 40000)")
    parser.add_argument("--size", type=int, default=128, help="body bytes (default 128)")
    parser.add_argument("--senders", type=int, default=32, help="concurrent senders (default 32)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args()
    print(
        f"finchmq client CPU per send: {args.size} B bodies, uvloop={HAVE_UVLOOP}; µs of this process's "
        "CPU (user + system) per send",
        flush=True,
    )
    with ServerProcess() as server:
        run(against_broker(server.namesrv_addr, args))


if __name__ == "__main__":
    main()
