"""5.x timer messages against ``finchmq server`` in its own process (ASYNC_FLUSH, default timer
settings: timerPrecisionMs 1000, i.e. one-second slots).

    python -m benchmarks.timer [--rate 10000] [--seconds 10] [--delay 5] [--burst 50000]
    python -m benchmarks.timer --only pending [--pending 1000000]

Cases (``rate`` and ``burst`` by default; ``plain`` and ``pending`` with ``--only``):
    rate      an open-loop sender offers ``--rate`` timer messages a second for ``--seconds``, each
              due ``--delay`` s after it is sent (TIMER_DELIVER_MS); a pull consumer in this
              process reads the real topic as they arrive. Prints the rate accepted, the rate
              delivered while they fell due, the broker's timer figures sampled every second
              (timerOffsetBehind: timer-topic messages not yet in the wheel; timerReadBehind: how
              many seconds the dequeue is behind the clock; timerEnqueueTps/timerDequeueTps), and
              the lateness p50/p99/max of delivery (the delivered message's store time minus
              TIMER_DELIVER_MS, the broker's view) and of consumption (receive time at the consumer
              minus TIMER_DELIVER_MS). A slot is delivered once the clock has passed it, so a
              lateness of 0 to timerPrecisionMs (1,000 ms) is the design, ~500 ms at p50.
    burst     ``--burst`` timer messages all due in the same second: how fast the timer delivers
              one full slot (first to last store time).
    plain     (with ``--only``) the rate case's sends without a time, read back the same way: the
              rate taken and the broker's CPU per message for the send and the pull alone.
    pending   ``--pending`` timers due 1 to 2 hours ahead, spread over 3,600 one-second slots: the
              send rate, how long until all are in the wheel, the server's resident memory with
              them waiting (and its files), then the time a clean restart (SIGTERM, start) and a
              crash restart (SIGKILL, start) take until the server is ready (its log says "ready
              in": the store and the timer are loaded, the broker registered), until the topic's
              route is served by the name server, and until the wheel holds every timer again;
              memory after each restart.

The sender runs in a child process on the raw remoting protocol (SEND_MESSAGE_V2 frames written
on a schedule, answers read as they come, at most ``WINDOW`` unanswered), so this process's
consumer does not slow it down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from benchmarks._profile import py_spy_while, summarize
from benchmarks._server import ServerProcess
from finchmq.protocol import NEED_DATA, RemotingCodec, RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import KVTable
from finchmq.protocol.headers import PullMessageRequestHeader, PullSysFlag, SendMessageRequestHeaderV2
from finchmq.protocol.message import properties_to_string
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient, run

QUEUES = 8
BODY = b"t" * 128
WINDOW = 5_000  # unanswered sends at most (the send queue holds 10,000): past capacity the sender waits
CONF = {
    "waitTimeMillsInSendQueue": "10000",  # an open loop past capacity queues, it is not refused
    "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
}
TIMER_KEYS = ("timerOffsetBehind", "timerReadBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- the sender (child process) -------------------------------------------------------------------


class _Answers(asyncio.Protocol):
    def __init__(self) -> None:
        self.codec = RemotingCodec()
        self.accepted = 0
        self.refused = 0
        self.remarks: dict[str, int] = {}
        self.paused = False

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    def data_received(self, data: bytes) -> None:
        self.codec.receive_data(data)
        while (cmd := self.codec.next_command()) is not NEED_DATA:
            assert isinstance(cmd, RemotingCommand)
            if cmd.code == ResponseCode.SUCCESS:
                self.accepted += 1
            else:
                self.refused += 1
                key = (cmd.remark or f"code {cmd.code}")[:60]
                self.remarks[key] = self.remarks.get(key, 0) + 1


async def _send(
    addr: str, topic: str, rate: float, count: int, due: str, delay_ms: int, pipe: Connection
) -> None:
    """Send ``count`` timer messages at ``rate`` a second (as fast as answered if 0): due
    ``delay_ms`` after their send (``due="relative"``), at the absolute ``delay_ms``
    (``due="at"``), or over the hour from it, a second apart (``due="spread"``); ``due="none"``
    sends them without a time (ordinary messages)."""
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    transport, answers = await loop.create_connection(_Answers, host, int(port))
    codec = RemotingCodec()
    began = time.perf_counter()
    sent = 0
    while sent < count:
        elapsed = time.perf_counter() - began
        target = count if not rate else min(count, int(elapsed * rate) + 1)
        target = min(target, answers.accepted + answers.refused + WINDOW)
        if target > sent and not answers.paused:
            frames = []
            stamp = now_ms()
            for i in range(sent, min(target, sent + 2000)):
                deliver = stamp + delay_ms if due == "relative" else delay_ms
                if due == "spread":  # over the hour from delay_ms: one slot in 3,600 each
                    deliver += i % 3600 * 1000
                timer = {} if due == "none" else {"TIMER_DELIVER_MS": str(deliver)}
                props = properties_to_string({**timer, "UNIQ_KEY": f"{i:032X}"})
                header = SendMessageRequestHeaderV2(
                    producer_group="timer_bench", topic=topic, default_topic="TBW102",
                    default_topic_queue_nums=QUEUES, queue_id=i % QUEUES, sys_flag=0, born_timestamp=stamp,
                    flag=0, properties=props,
                ).to_ext_fields()  # fmt: skip
                request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, BODY)
                frames.append(codec.send(request, opaque=i + 1))
            transport.write(b"".join(frames))
            sent += len(frames)
        await asyncio.sleep(0.002)
    send_seconds = time.perf_counter() - began
    while answers.accepted + answers.refused < count:
        await asyncio.sleep(0.01)
    answered_seconds = time.perf_counter() - began
    transport.close()
    pipe.send(
        {"accepted": answers.accepted, "refused": answers.refused, "remarks": answers.remarks,
         "send_seconds": send_seconds, "answered_seconds": answered_seconds}
    )  # fmt: skip


def _sender_main(
    addr: str, topic: str, rate: float, count: int, due: str, delay_ms: int, pipe: Connection
) -> None:
    run(_send(addr, topic, rate, count, due, delay_ms, pipe))


class Sender:
    """The sender's child process; ``result()`` waits for its figures, ``accepted()`` is how
    many sends were accepted once it has said (``count`` until then)."""

    def __init__(self, addr: str, topic: str, rate: float, count: int, due: str, delay_ms: int) -> None:
        self.count = count
        self._pipe, child = mp.Pipe(duplex=False)
        args = (addr, topic, rate, count, due, delay_ms, child)
        self._process: BaseProcess = mp.get_context("spawn").Process(target=_sender_main, args=args)
        self._process.start()
        self._result: dict[str, Any] | None = None

    def accepted(self) -> int:
        if self._result is None and self._pipe.poll():
            self.result()
        return self.count if self._result is None else int(self._result["accepted"])

    def result(self) -> dict[str, Any]:
        if self._result is None:
            self._result = self._pipe.recv()
            self._process.join()
        return self._result


# -- reading back ---------------------------------------------------------------------------------


async def consume(
    addr: str,
    topic: str,
    count: Callable[[], int],
    timeout: float,
    samples: list[dict[str, float]] | None = None,
) -> list[tuple[int, int, float]]:
    """(TIMER_DELIVER_MS, store time, receive time ms) of the messages of ``topic``, pulled with
    long polling as they arrive until there are ``count()`` (what the sender says was accepted);
    meanwhile the broker's timer figures are appended to ``samples`` every second when given."""
    out: list[tuple[int, int, float]] = []
    offsets = dict.fromkeys(range(QUEUES), 0)
    deadline = time.monotonic() + timeout
    async with RemotingClient() as client:

        async def pull(queue_id: int) -> None:
            while len(out) < count() and time.monotonic() < deadline:
                header = PullMessageRequestHeader(
                    consumer_group="timer_bench", topic=topic, queue_id=queue_id,
                    queue_offset=offsets[queue_id], max_msg_nums=32,
                    sys_flag=int(PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND), commit_offset=0,
                    suspend_timeout_millis=1000, sub_version=0, subscription="*",
                )  # fmt: skip
                request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
                reply = await client.invoke(addr, request, 30_000)
                received = time.time() * 1000
                if reply.code == ResponseCode.SUCCESS:
                    for m in decode_stored_all(reply.body):
                        due = int(m.properties.get("TIMER_DELIVER_MS", m.born_timestamp))
                        out.append((due, m.store_timestamp, received))
                if "nextBeginOffset" in reply.ext_fields:
                    offsets[queue_id] = int(reply.ext_fields["nextBeginOffset"])

        async def sample() -> None:
            assert samples is not None
            while len(out) < count() and time.monotonic() < deadline:
                info = await _runtime_info(client, addr)
                samples.append({k: float(info[k]) for k in TIMER_KEYS} | {"delivered": len(out)})
                await asyncio.sleep(1)

        await asyncio.gather(*(pull(q) for q in range(QUEUES)), *([sample()] if samples is not None else []))
    return out


async def _runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    reply = await client.invoke(addr, request, 30_000)
    return KVTable.from_json(reply.body).table


async def runtime_info(addr: str) -> dict[str, str]:
    async with RemotingClient() as client:
        return await _runtime_info(client, addr)


async def route_served(namesrv: str, topic: str) -> bool:
    async with RemotingClient() as client:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        reply = await client.invoke(namesrv, request, 30_000)
    return reply.code == ResponseCode.SUCCESS


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)] if ordered else float("nan")


def lateness_line(label: str, values: Sequence[float]) -> str:
    if not values:
        return f"{label}: nothing delivered"
    p50, p99 = pct(values, 0.5), pct(values, 0.99)
    return f"{label:<30} p50 {p50:6.0f} ms   p99 {p99:6.0f} ms   max {max(values):6.0f} ms"


def rss_detail(pid: int) -> str:
    """VmRSS with its anonymous and file-backed (mapped store files) parts, MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) / 1024
    return f"RSS {fields['VmRSS']:,.0f} MiB (anon {fields['RssAnon']:,.0f}, file {fields['RssFile']:,.0f})"


def wait_for(condition: Callable[[], bool], timeout: float, every: float = 0.05) -> float:
    """Seconds until ``condition()`` held (raises after ``timeout``)."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"not within {timeout:.0f} s")
        time.sleep(every)
    return time.monotonic() - began


# -- cases ----------------------------------------------------------------------------------------


def case_rate(server: ServerProcess, rate: float, seconds: float, delay: float, profile: Path | None) -> None:
    addr = f"127.0.0.1:{server.broker_port}"
    count = int(rate * seconds)
    cpu0 = server.cpu_seconds()
    samples: list[dict[str, float]] = []
    with contextlib.ExitStack() as stack:
        if profile is not None:
            stack.enter_context(py_spy_while(server.pid, profile))
        sender = Sender(addr, "TimerRate", rate, count, "relative", int(delay * 1000))
        received = asyncio.run(consume(addr, "TimerRate", sender.accepted, seconds + delay + 300, samples))
    if profile is not None:
        print(summarize(profile))
    sent = sender.result()
    cpu = server.cpu_seconds() - cpu0
    broker = [store - deliver for deliver, store, _ in received]
    e2e = [got - deliver for deliver, _, got in received]
    stores = sorted(store for _, store, _ in received)
    dues = sorted(deliver for deliver, _, _ in received)
    span = (stores[-1] - stores[0]) / 1000 if len(stores) > 1 else float("nan")
    due_span = (dues[-1] - dues[0]) / 1000 if len(dues) > 1 else float("nan")
    accepted_rate = sent["accepted"] / sent["answered_seconds"]
    print(
        f"rate: offered {rate:,.0f} timers/s for {seconds:g} s ({count:,}), "
        f"each due {delay:g} s after its send"
    )
    print(
        f"  accepted   {sent['accepted']:,} in {sent['answered_seconds']:.1f} s: {accepted_rate:,.0f}/s"
        f"   refused {sent['refused']:,} {sent['remarks'] or ''}"
    )
    print(
        f"  delivered  {len(received):,} over {span:.1f} s: {len(received) / span:,.0f}/s"
        f"   (they fell due over {due_span:.1f} s)"
    )
    if samples:
        peak = {k: max(s[k] for s in samples) for k in TIMER_KEYS}
        print(
            f"  broker, sampled every 1 s: timerEnqueueTps max {peak['timerEnqueueTps']:,.0f}, "
            f"timerDequeueTps max {peak['timerDequeueTps']:,.0f}, timerOffsetBehind max "
            f"{peak['timerOffsetBehind']:,.0f} msgs, timerReadBehind max {peak['timerReadBehind']:.0f} s, "
            f"timerCongestNum max {peak['timerCongestNum']:,.0f}"
        )
    print("  " + lateness_line("lateness (store - deliver)", broker))
    print("  " + lateness_line("lateness (receive - deliver)", e2e))
    early = sum(1 for b in broker if b < 0)
    print(f"  early (stored before TIMER_DELIVER_MS): {early}")
    per_msg = cpu / max(len(received), 1) * 1e6
    print(f"  broker CPU {cpu:.1f} s ({per_msg:.0f} µs per timer message: send + wheel + delivery + pull)")
    keeps_up = (
        sent["accepted"] == count
        and len(received) == sent["accepted"]
        and accepted_rate >= 0.95 * rate
        and (not samples or max(s["timerReadBehind"] for s in samples) <= 1)
        and pct(broker, 0.99) <= 2000
    )
    print(f"  keeps up: {'yes' if keeps_up else 'NO'} (all accepted at >= 95% of the offered rate, all "
          "delivered, dequeue at most 1 s behind the clock, p99 store lateness <= 2 s)")  # fmt: skip


def case_plain(server: ServerProcess, rate: float, seconds: float) -> None:
    """The rate case's sends without a time: what the send and the pull cost alone."""
    addr = f"127.0.0.1:{server.broker_port}"
    count = int(rate * seconds)
    cpu0 = server.cpu_seconds()
    sender = Sender(addr, "PlainRate", rate, count, "none", 0)
    received = asyncio.run(consume(addr, "PlainRate", sender.accepted, seconds + 300))
    sent = sender.result()
    cpu = server.cpu_seconds() - cpu0
    per_msg = cpu / max(len(received), 1) * 1e6
    print(f"plain: the same sends without a time, offered {rate:,.0f}/s for {seconds:g} s")
    print(
        f"  accepted   {sent['accepted']:,} in {sent['answered_seconds']:.1f} s: "
        f"{sent['accepted'] / sent['answered_seconds']:,.0f}/s   refused {sent['refused']:,}"
    )
    print("  " + lateness_line("latency (receive - born)", [got - born for born, _, got in received]))
    print(f"  broker CPU {cpu:.1f} s ({per_msg:.0f} µs per message: send + pull)")


def case_burst(server: ServerProcess, count: int) -> None:
    addr = f"127.0.0.1:{server.broker_port}"
    due_at = now_ms() + max(30_000, count // 1000 * 1000)  # after all are in
    due_at = due_at - due_at % 1000 + 500
    sent = Sender(addr, "TimerBurst", 0, count, "at", due_at).result()
    print(
        f"burst: {sent['accepted']:,} timers due in the same second, sent at "
        f"{sent['accepted'] / sent['answered_seconds']:,.0f}/s; waiting {(due_at - now_ms()) / 1000:.0f} s"
    )
    received = asyncio.run(
        consume(addr, "TimerBurst", lambda: sent["accepted"], (due_at - now_ms()) / 1000 + 300)
    )
    stores = sorted(store for _, store, _ in received)
    span = (stores[-1] - stores[0]) / 1000 if len(stores) > 1 else float("nan")
    print(
        f"  delivered {len(received):,} in {span:.2f} s: {len(received) / span:,.0f}/s "
        "(one slot: the dequeue rate)"
    )
    print("  " + lateness_line("lateness (store - deliver)", [s - d for d, s, _ in received]))


def restart(server: ServerProcess, how: signal.Signals, topic: str, pending: int) -> str:
    """Stop with ``how``, start again: the seconds until ready, route served and wheel loaded."""
    assert server.proc is not None
    server.proc.send_signal(how)
    stopped = time.monotonic()
    server.proc.wait(300)
    stop_seconds = time.monotonic() - stopped
    began = time.monotonic()
    server.start()
    ready = time.monotonic() - began
    addr = f"127.0.0.1:{server.broker_port}"
    routed = ready + wait_for(lambda: asyncio.run(route_served(server.namesrv_addr, topic)), 300)
    loaded = routed + wait_for(
        lambda: int(asyncio.run(runtime_info(addr))["timerCongestNum"]) >= pending, 300, 0.2
    )
    info = asyncio.run(runtime_info(addr))
    return (
        f"stopped in {stop_seconds:.1f} s; ready in {ready:.1f} s, route served at {routed:.1f} s, "
        f"timerCongestNum {int(info['timerCongestNum']):,} at {loaded:.1f} s; {rss_detail(server.pid)}"
    )


def case_pending(server: ServerProcess, count: int) -> None:
    addr = f"127.0.0.1:{server.broker_port}"
    idle = rss_detail(server.pid)
    began = time.monotonic()
    sent = Sender(addr, "TimerPending", 0, count, "spread", now_ms() + 3_600_000).result()

    def in_wheel() -> bool:
        info = asyncio.run(runtime_info(addr))
        return info["timerOffsetBehind"] == "0" and int(info["timerCongestNum"]) >= sent["accepted"]

    wait_for(in_wheel, 900, 0.2)
    all_in = time.monotonic() - began
    info: dict[str, Any] = asyncio.run(runtime_info(addr))
    print(
        f"pending: {sent['accepted']:,} timers due 1 to 2 hours ahead (3,600 slots), sent at "
        f"{sent['accepted'] / sent['answered_seconds']:,.0f}/s (refused {sent['refused']:,}); all in the "
        f"wheel {all_in:.1f} s after the first send"
    )
    print(
        f"  timerCongestNum {int(info['timerCongestNum']):,}: {rss_detail(server.pid)}; "
        f"idle server before: {idle}"
    )
    print(f"  files: {_sizes(server.data_dir / 'store')}")
    for label, how in (
        ("clean restart (SIGTERM, start)", signal.SIGTERM),
        ("crash restart (SIGKILL, start)", signal.SIGKILL),
    ):
        print(f"  {label}: {restart(server, how, 'TimerPending', sent['accepted'])}")


def _sizes(root: Path) -> str:
    def du(path: Path) -> float:
        files = path.rglob("*") if path.is_dir() else [path]
        return sum(p.stat().st_blocks * 512 for p in files if p.is_file()) / 2**20

    names = ("commitlog", "timerlog", "timerwheel")
    return ", ".join(f"{name} {du(root / name):,.1f} MiB" for name in names if (root / name).exists())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=10_000, help="timer messages offered a second")
    parser.add_argument("--seconds", type=float, default=10, help="how long the rate case sends")
    parser.add_argument("--delay", type=float, default=5, help="seconds from send to TIMER_DELIVER_MS")
    parser.add_argument("--burst", type=int, default=50_000)
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--only", nargs="*", choices=["rate", "burst", "plain", "pending"])
    parser.add_argument("--profile", type=Path, help="py-spy the server during the rate case into this file")
    args = parser.parse_args()
    cases = args.only or ["rate", "burst"]
    if "rate" in cases or "burst" in cases or "plain" in cases:
        with ServerProcess(conf=CONF) as server:
            print(f"finchmq server pid {server.pid}, data {server.data_dir}")
            if "plain" in cases:
                case_plain(server, args.rate, args.seconds)
            if "rate" in cases:
                case_rate(server, args.rate, args.seconds, args.delay, args.profile)
            if "burst" in cases:
                case_burst(server, args.burst)
    if "pending" in cases:
        server = ServerProcess(conf=CONF)
        server.ready_timeout_seconds = 900
        with server:
            case_pending(server, args.pending)


if __name__ == "__main__":
    main()
