"""POP consumption against pull on the same backlog, ``finchmq server`` in its own process.

    python -m benchmarks.pop [--messages 100000] [--size 128] [--seconds 60] [--only pull pop_ack ...]

The broker (its defaults, a fresh data directory) gets a backlog of ``--messages`` messages of
``--size`` bytes in one topic of 8 queues; then each case consumes it as a consumer group of its
own, one consumer loop per queue (8 in flight), 32 messages per request, over raw requests as the
Java clients send them:

    pull            PULL_MESSAGE of 32, then UPDATE_CONSUMER_OFFSET of the next offset
    pop_batch_ack   POP_MESSAGE of 32 (invisible 5 min), then one BATCH_ACK_MESSAGE for the 32
    pop_ack         POP_MESSAGE of 32, then one ACK_MESSAGE per message (8 loops, in turn)

A case ends when every queue is consumed to its end, or after ``--seconds``. Printed per case:
msgs/s (messages consumed and acknowledged or committed / seconds), and the CPU seconds used by the
broker process and by this one. Every message is decoded by the consumer, as a client would.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from benchmarks._server import ServerProcess
from finchmq.client import AdminClient, BrokerBusyError, Message, Producer
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import BatchAck, BatchAckMessageRequestBody, JavaBitSet
from finchmq.protocol.headers import (
    AckMessageRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PullMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import ConsumeInitMode, ExtraInfo, parse_start_offset_info, start_offset_map_key
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient, run

QUEUES = 8
BATCH = 32
INVISIBLE_MS = 300_000
TIMEOUT_MS = 30_000
BROKER_NAME = "broker-a"
CASES = ("pull", "pop_batch_ack", "pop_ack")
_SUBSCRIPTION = 4  # PullSysFlag FLAG_SUBSCRIPTION


@dataclass
class Result:
    name: str
    count: int
    seconds: float
    server_cpu: float
    client_cpu: float
    complete: bool

    def line(self) -> str:
        rate = self.count / self.seconds if self.seconds else 0.0
        text = f"{self.name:<14} {rate:>10,.0f} msgs/s   {self.count:,} msgs in {self.seconds:.1f} s"
        text += f"   cpu: broker {self.server_cpu:5.1f}s client {self.client_cpu:5.1f}s"
        if self.count:
            per_message = 1e6 / self.count
            text += f" ({self.server_cpu * per_message:.0f} / {self.client_cpu * per_message:.0f} µs per msg)"
        return text + ("" if self.complete else "   (stopped at --seconds)")


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Bench:
    def __init__(self, server: ServerProcess, client: RemotingClient, topic: str, seconds: float) -> None:
        self.server = server
        self.client = client
        self.addr = f"127.0.0.1:{server.broker_port}"
        self.topic = topic
        self.seconds = seconds
        self.ends: dict[int, int] = {}  # queue id -> its max offset (the backlog)

    async def call(self, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), TIMEOUT_MS)

    async def backlog(self, messages: int, size: int, namesrv: str) -> None:
        async with AdminClient(namesrv_addr=namesrv) as admin:
            await admin.create_topic(self.topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        producer = Producer(
            "bench_pop_pg", namesrv_addr=namesrv, instance_name=f"bench-{time.monotonic_ns()}"
        )
        async with producer:
            batch = [Message(self.topic, os.urandom(size)) for _ in range(64)]
            sent = 0

            async def sender() -> None:
                nonlocal sent
                while sent < messages:
                    n = min(64, messages - sent)
                    sent += n
                    try:
                        await producer.send_batch(batch[:n])
                    except BrokerBusyError:  # shed: send it again a moment later
                        sent -= n
                        await asyncio.sleep(0.05)

            await asyncio.gather(*(sender() for _ in range(4)))
        for queue_id in range(QUEUES):
            header = GetMaxOffsetRequestHeader(topic=self.topic, queue_id=queue_id)
            r = await self.call(RequestCode.GET_MAX_OFFSET, header.to_ext_fields())
            self.ends[queue_id] = GetMaxOffsetResponseHeader.from_ext_fields(r.ext_fields).offset
        assert sum(self.ends.values()) == messages, (self.ends, messages)

    async def measure(self, name: str, per_queue: Callable[[int, float], Awaitable[int]]) -> Result:
        server_before = self.server.cpu_seconds()
        client_before = _client_cpu()
        began = time.perf_counter()
        deadline = time.monotonic() + self.seconds
        counts = await asyncio.gather(*(per_queue(q, deadline) for q in range(QUEUES)))
        seconds = time.perf_counter() - began
        return Result(
            name,
            sum(counts),
            seconds,
            self.server.cpu_seconds() - server_before,
            _client_cpu() - client_before,
            complete=sum(counts) == sum(self.ends.values()),
        )

    # -- pull -------------------------------------------------------------------------------

    async def pull(self) -> Result:
        group = "bench_pull"

        async def queue(queue_id: int, deadline: float) -> int:
            offset, end, count = 0, self.ends[queue_id], 0
            while offset < end and time.monotonic() < deadline:
                header = PullMessageRequestHeader(
                    consumer_group=group, topic=self.topic, queue_id=queue_id, queue_offset=offset,
                    max_msg_nums=BATCH, sys_flag=_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0,
                    sub_version=0, subscription="*",
                )  # fmt: skip
                r = await self.call(RequestCode.PULL_MESSAGE, header.to_ext_fields())
                if r.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"pull of queue {queue_id} at {offset}: {r.code} {r.remark}")
                count += len(decode_stored_all(r.body))
                offset = int(r.ext_fields["nextBeginOffset"])
                commit = UpdateConsumerOffsetRequestHeader(
                    consumer_group=group, topic=self.topic, queue_id=queue_id, commit_offset=offset
                )
                c = await self.call(RequestCode.UPDATE_CONSUMER_OFFSET, commit.to_ext_fields())
                if c.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"offset commit of queue {queue_id}: {c.code} {c.remark}")
            return count

        return await self.measure("pull", queue)

    # -- pop --------------------------------------------------------------------------------

    async def pop_once(self, group: str, queue_id: int) -> list[tuple[MessageExt, ExtraInfo]]:
        header = PopMessageRequestHeader(
            consumer_group=group, topic=self.topic, queue_id=queue_id, max_msg_nums=BATCH,
            invisible_time=INVISIBLE_MS, poll_time=0, born_time=int(time.time() * 1000),
            init_mode=ConsumeInitMode.MIN,
        )  # fmt: skip
        r = await self.call(RequestCode.POP_MESSAGE, header.to_ext_fields())
        if r.code != ResponseCode.SUCCESS:
            if r.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
                return []
            raise RuntimeError(f"pop of queue {queue_id}: {r.code} {r.remark}")
        answer = PopMessageResponseHeader.from_ext_fields(r.ext_fields)
        starts = parse_start_offset_info(answer.start_offset_info) or {}
        out = []
        for msg in decode_stored_all(r.body):  # Java processPopResponse: the extra info of each
            pop_ck = msg.properties.get(MessageConst.PROPERTY_POP_CK)
            if pop_ck is not None:
                extra = ExtraInfo.parse(pop_ck)
            else:
                extra = ExtraInfo.build(
                    starts[start_offset_map_key(msg.topic, msg.queue_id)], answer.pop_time,
                    answer.invisible_time, answer.revive_qid, msg.topic, BROKER_NAME, msg.queue_id,
                    msg.queue_offset,
                )  # fmt: skip
            out.append((msg, extra))
        return out

    async def batch_ack(self, group: str, popped: list[tuple[MessageExt, ExtraInfo]]) -> None:
        by_ck: dict[tuple[int, int, int, str, int], list[tuple[MessageExt, ExtraInfo]]] = {}
        for msg, e in popped:
            by_ck.setdefault(
                (e.ck_queue_offset, e.pop_time, e.queue_id or 0, e.retry, e.revive_qid), []
            ).append((msg, e))
        acks = tuple(
            BatchAck(
                consumer_group=group,
                topic=self.topic,
                retry=retry,
                start_offset=start,
                queue_id=queue_id,
                revive_queue_id=revive_qid,
                pop_time=pop_time,
                invisible_time=items[0][1].invisible_time,
                bit_set=JavaBitSet((e.queue_offset or 0) - start for _, e in items),
            )
            for (start, pop_time, queue_id, retry, revive_qid), items in by_ck.items()
        )
        body = BatchAckMessageRequestBody(broker_name=BROKER_NAME, acks=acks).to_json()
        r = await self.call(RequestCode.BATCH_ACK_MESSAGE, {}, body)
        if r.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"batch ack: {r.code} {r.remark}")

    async def ack(self, group: str, msg: MessageExt, extra: ExtraInfo) -> None:
        header = AckMessageRequestHeader(
            consumer_group=group, topic=extra.real_topic(msg.topic, group), queue_id=extra.queue_id or 0,
            offset=extra.queue_offset or 0, extra_info=extra.encode(),
        )  # fmt: skip
        r = await self.call(RequestCode.ACK_MESSAGE, header.to_ext_fields())
        if r.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"ack: {r.code} {r.remark}")

    async def pop(self, batch_ack: bool) -> Result:
        name = "pop_batch_ack" if batch_ack else "pop_ack"
        group = f"bench_{name}"

        async def queue(queue_id: int, deadline: float) -> int:
            end, count = self.ends[queue_id], 0
            while count < end and time.monotonic() < deadline:
                popped = await self.pop_once(group, queue_id)
                if not popped:
                    raise RuntimeError(f"{name}: queue {queue_id} gave nothing after {count} of {end}")
                if batch_ack:
                    await self.batch_ack(group, popped)
                else:
                    for msg, extra in popped:
                        await self.ack(group, msg, extra)
                count += len(popped)
            return count

        return await self.measure(name, queue)


async def main_async(args: argparse.Namespace, server: ServerProcess) -> list[Result]:
    results = []
    async with RemotingClient() as client:
        bench = Bench(server, client, f"Bench_pop_{os.getpid()}", args.seconds)
        t0 = time.perf_counter()
        await bench.backlog(args.messages, args.size, server.namesrv_addr)
        print(
            f"backlog: {args.messages:,} messages of {args.size} B in {QUEUES} queues"
            f" ({time.perf_counter() - t0:.1f} s to send)",
            flush=True,
        )
        for case in args.only or CASES:
            if case == "pull":
                result = await bench.pull()
            else:
                result = await bench.pop(batch_ack=case == "pop_batch_ack")
            print(result.line(), flush=True)
            results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000, help="backlog size (default 100000)")
    parser.add_argument("--size", type=int, default=128, help="body bytes (default 128)")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long per case (default 60)")
    parser.add_argument("--only", nargs="+", choices=CASES, help="run these cases only")
    args = parser.parse_args()
    print(f"pop: {os.cpu_count()} cores, finchmq server in its own process", flush=True)
    with ServerProcess() as server:
        run(main_async(args, server))


if __name__ == "__main__":
    main()
