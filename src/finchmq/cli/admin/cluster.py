"""mqadmin's cluster commands (``tools/command/cluster``): the brokers of every cluster, and the send
RT of each broker.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import time
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

from finchmq.client import BlockingAdminClient, BlockingProducer, MQClientError
from finchmq.client.sync import Portal
from finchmq.client.views import cluster_broker_dict, timer_backlog_dict
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import java_key_hash
from finchmq.protocol.message import Message

from .command import CommandFamily, Option, Result, parse_bool
from .javafmt import TIME_FORMAT, format_table, java_fixed

__all__ = ["commands", "timer_progress"]

commands = CommandFamily()


@commands.admin("clusterList", "every broker of every cluster")
def _cluster_list(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    brokers = admin.cluster_brokers()
    rows = [
        (b.cluster, b.broker_name, b.broker_id, b.addr, b.stats.get("brokerVersionDesc", "-"),
         b.stats.get("putTps", "-"), b.stats.get("getTransferedTps", "-"), timer_progress(b.stats))
        for b in brokers
    ]  # fmt: skip
    return [cluster_broker_dict(b) for b in brokers], format_table(
        ["Cluster Name", "Broker Name", "BID", "Addr", "Version", "InTPS", "OutTPS", "Timer(Progress)"], rows
    )


def timer_progress(stats: Mapping[str, str]) -> str:
    """5.x clusterList's ``#Timer(Progress)``: ``timerReadBehind-timerOffsetBehind(timerCongestNum
    in units of 10,000 "w", timerEnqueueTps, timerDequeueTps)``, e.g. ``0-0(1.5w, 120.3, 98.0)``: the
    seconds the wheel's delivery is behind the clock, the timer-topic messages not yet in the
    wheel, the timers waiting. Zeros when the broker does not say (a 4.x broker), as Java's."""
    timer = timer_backlog_dict(stats) or {
        "pending": 0, "readBehind": 0, "offsetBehind": 0, "enqueueTps": 0.0, "dequeueTps": 0.0
    }  # fmt: skip
    # Java's figures are floats (congestNum / 10000.0f) formatted with %.1f
    figures = (timer["pending"] / 10000, timer["enqueueTps"], timer["dequeueTps"])
    w, enq, deq = (java_fixed(_f32(x), 1) for x in figures)
    return f"{timer['readBehind']}-{timer['offsetBehind']}({w}w, {enq}, {deq})"


def _f32(value: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", value))[0])


@commands.client(
    "clusterRT",
    "send RT of every broker, every few seconds (mqadmin clusterRT)",
    Option("-a", "--amount", type=int, default=100, help="sends per broker and round"),
    Option("-s", "--size", type=int, default=128, help="message size in bytes"),
    Option("-c", "--cluster", help="this cluster only (default: all)"),
    Option("-p", "--printLog", dest="print_as_tlog", type=parse_bool, default=False, help="print as tlog"),
    Option("-m", "--machineRoom", dest="machine_room", default="noname"),
    Option("-i", "--interval", type=float, default=10, help="seconds between rounds"),
    Option("--rounds", type=int, default=0, help="stop after this many rounds (default: run until ^C)"),
    streamed=True,
)
def _cluster_rt(args: argparse.Namespace, portal: Portal) -> Result:
    """mqadmin ``clusterRT``: ``amount`` sync sends to each broker's own topic, the average RT
    leaving the first send out, every ``interval`` seconds (forever unless --rounds)."""
    with (
        BlockingAdminClient(namesrv_addr=args.namesrv, **args.client_options, portal=portal) as admin,
        BlockingProducer(
            str(int(time.time() * 1000)),
            namesrv_addr=args.namesrv,
            **args.client_options,
            instance_name=f"cli-{os.getpid()}",
            portal=portal,
        ) as producer,
    ):
        table = admin.cluster_info().cluster_addr_table
        clusters = [args.cluster] if args.cluster else java_hash_order(list(table), java_key_hash)
        if not args.print_as_tlog and not args.json:
            headers = ("#Cluster Name", 24), ("#Broker Name", 24), ("#RT", 4), ("#successCount", 8)
            print("  ".join(f"{h:<{w}}" for h, w in headers) + "  #failCount")
        body = b"a" * args.size
        done = 0
        while True:
            for cluster in clusters:
                names = table.get(cluster)
                if names is None:
                    print(f"cluster [{cluster}] not exist")
                    break
                for broker_name in java_hash_order(list(names), java_key_hash):
                    ok = failed = elapsed = 0
                    for i in range(args.amount):
                        began = time.time_ns() // 1_000_000  # whole wall-clock ms, as mqadmin
                        try:
                            producer.send(Message(broker_name, body))
                            ok += 1
                        except MQClientError:
                            failed += 1
                        if i:
                            elapsed += time.time_ns() // 1_000_000 - began
                    rt = elapsed / (args.amount - 1) if args.amount > 1 else math.nan
                    _print_cluster_rt(args, cluster, broker_name, rt, ok, failed)
            done += 1
            if args.rounds and done >= args.rounds:
                return None, ""
            time.sleep(args.interval)


def _print_cluster_rt(
    args: argparse.Namespace, cluster: str, broker: str, rt: float, ok: int, failed: int
) -> None:
    if args.json:
        rt_ms = None if math.isnan(rt) else round(rt, 2)
        row = {"cluster": cluster, "brokerName": broker, "rt": rt_ms, "successCount": ok, "failCount": failed}
        print(json.dumps(row), flush=True)
    elif args.print_as_tlog:
        now = datetime.now(timezone(timedelta(hours=8))).strftime(TIME_FORMAT)  # mqadmin's GMT+8
        rounded = "NaN" if math.isnan(rt) else java_fixed(rt, 0)
        print(f"{now}|{args.machine_room}|{cluster}|{broker}|{rounded}", flush=True)
    else:
        print(f"{cluster:<24}  {broker:<24}  {java_fixed(rt):<8}  {ok:<16}  {failed:<16}", flush=True)
