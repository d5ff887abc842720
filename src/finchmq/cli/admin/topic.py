"""mqadmin's topic commands (``tools/command/topic``): create, delete, list, route, status, the
clusters a topic is on, queue allocation and the order configuration.
"""

from __future__ import annotations

import argparse
import json

from finchmq.client import BlockingAdminClient
from finchmq.client.allocate import AllocateMessageQueueAveragely
from finchmq.client.route import topic_route_data_to_subscribe_info
from finchmq.client.views import topic_status_rows
from finchmq.protocol._json import java_hash_order
from finchmq.protocol.bodies import MASTER_ID, PermName, RebalanceResult, TopicConfig, java_key_hash

from .command import BROKER_ADDR, CLUSTER, TOPIC, CommandFamily, Option, Result, parse_bool
from .javafmt import format_table, format_time

__all__ = ["commands"]

commands = CommandFamily()


@commands.admin(
    "updateTopic",
    "create or update a topic",
    TOPIC,
    CLUSTER,
    BROKER_ADDR,
    Option("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8),
    Option("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8),
    Option("-p", "--perm", type=int, default=6),
    Option("-o", "--order", type=parse_bool, default=False),
    Option("-a", "--attributes", help="attribute(+a=b,+c=d,-e), e.g. +message.type=FIFO (5.x)"),
)
def _update_topic(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    if not args.cluster and not args.broker:
        raise SystemExit("updateTopic: give -c CLUSTER or -b BROKER_ADDR")
    addrs = admin.create_topic(
        args.topic,
        read_queue_nums=args.read_queue_nums,
        write_queue_nums=args.write_queue_nums,
        perm=args.perm,
        order=args.order,
        cluster=args.cluster,
        broker_addr=args.broker,
        attributes=args.attributes,
    )
    data = {
        "topic": args.topic,
        "readQueueNums": args.read_queue_nums,
        "writeQueueNums": args.write_queue_nums,
        "perm": args.perm,
        "order": args.order,
        **({"attributes": args.attributes} if args.attributes else {}),
        "brokers": addrs,
    }
    text = "\n".join(f"create topic to {a} success." for a in addrs) + f"\n{data}"
    return data, text


@commands.admin(
    "updateTopicPerm",
    "change a topic's permission on a broker or a cluster (mqadmin updateTopicPerm)",
    TOPIC,
    Option("-b", "--brokerAddr", dest="broker", help="a master's address"),
    CLUSTER,
    Option("-p", "--perm", type=int, required=True, help="2 (W), 4 (R) or 6 (RW)"),
)
def _update_topic_perm(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``updateTopicPerm``: the topic's first queue data gives the queue numbers and
    system flag kept; with -b, only a master of the topic, and not to the perm it has."""
    route = admin.topic_route(args.topic)
    if not route.queue_datas:
        raise ValueError(f"topic {args.topic} has no queues in its route")
    first = route.queue_datas[0]
    config = TopicConfig(
        topic_name=args.topic,
        read_queue_nums=first.read_queue_nums,
        write_queue_nums=first.write_queue_nums,
        perm=args.perm,
        topic_sys_flag=first.topic_sys_flag,
    )
    data: dict[str, object] = {"topic": args.topic, "perm": args.perm, "updated": {}}
    if args.broker:
        broker_name = next(
            (bd.broker_name for bd in route.broker_datas if bd.broker_addrs.get(MASTER_ID) == args.broker),
            None,
        )
        if broker_name is None:
            data["error"] = "broker not found or not a master"
            return data, "updateTopicPerm error broker not exit or broker is not master!."
        old = next((qd.perm for qd in route.queue_datas if qd.broker_name == broker_name), 0)
        if old == args.perm:
            data["unchanged"] = True
            return data, "new perm equals to the old one!"
        admin.create_and_update_topic_config(args.broker, config)
        data["updated"] = {args.broker: old}
        return data, f"update topic perm from {old} to {args.perm} in {args.broker} success.\n{config}."
    if not args.cluster:
        raise ValueError("give -b BROKER_ADDR or -c CLUSTER (mqadmin updateTopicPerm)")
    lines = []
    updated = {}
    for addr in admin.master_addrs(args.cluster).values():
        admin.create_and_update_topic_config(addr, config)
        updated[addr] = first.perm
        lines.append(f"update topic perm from {first.perm} to {args.perm} in {addr} success.")
    data["updated"] = updated
    return data, "\n".join(lines)


@commands.admin("deleteTopic", "delete a topic from the brokers and the name servers", TOPIC, CLUSTER)
def _delete_topic(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    admin.delete_topic(args.topic, args.cluster)
    return {"topic": args.topic, "deleted": True}, f"delete topic [{args.topic}] from cluster success."


@commands.admin("topicList", "every topic the name server knows")
def _topic_list(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    topics = admin.topic_list()
    return topics, "\n".join(topics)


@commands.admin("topicRoute", "a topic's queues and brokers", TOPIC)
def _topic_route(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    route = admin.topic_route(args.topic)
    data = json.loads(route.to_json(standard=True))
    rows = [
        (qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, PermName.perm2string(qd.perm))
        for qd in route.queue_datas
    ]
    brokers = [
        (bd.cluster, bd.broker_name, bid, addr)
        for bd in route.broker_datas
        for bid, addr in sorted(bd.broker_addrs.items())
    ]
    text = format_table(["Broker Name", "Read Queues", "Write Queues", "Perm"], rows)
    text += "\n\n" + format_table(["Cluster", "Broker Name", "BID", "Addr"], brokers)
    return data, text


@commands.admin("topicStatus", "min/max offset of each queue of a topic", TOPIC)
def _topic_status(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    table = admin.topic_status(args.topic)
    rows = [
        (mq.broker_name, mq.queue_id, o.min_offset, o.max_offset, format_time(o.last_update_timestamp))
        for mq, o in table.offset_table.items()
    ]
    return topic_status_rows(table), format_table(
        ["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"], rows
    )


@commands.admin("topicClusterList", "the clusters a topic is on (mqadmin topicClusterList)", TOPIC)
def _topic_cluster_list(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    route = admin.topic_route(args.topic)
    brokers = {b.broker_name for b in route.broker_datas}
    clusters = sorted(
        c for c, names in admin.cluster_info().cluster_addr_table.items() if brokers & set(names)
    )
    return clusters, "\n".join(clusters)


@commands.admin(
    "allocateMQ",
    "how AllocateMessageQueueAveragely shares a topic among client ids (mqadmin allocateMQ)",
    TOPIC,
    Option("-i", "--ipList", dest="ip_list", required=True, help="client ids, comma separated"),
)
def _allocate_mq(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``allocateMQ``: how AllocateMessageQueueAveragely shares a topic's queues among
    client ids, queues in the order Java's HashSet holds them (as mqadmin does, unsorted)."""
    queues = topic_route_data_to_subscribe_info(args.topic, admin.topic_route(args.topic))
    ordered = java_hash_order(list(queues), java_key_hash)
    ids = args.ip_list.split(",")
    strategy = AllocateMessageQueueAveragely()
    result = RebalanceResult(result={ip: tuple(strategy.allocate("aa", ip, ordered, ids)) for ip in ids})
    return json.loads(result.to_json(standard=True)), result.to_json().decode()


NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # Java NamesrvUtil


@commands.admin(
    "updateOrderConf",
    "a topic's order configuration on the name servers (mqadmin updateOrderConf)",
    TOPIC,
    Option("-m", "--method", choices=["put", "get", "delete"], required=True),
    Option("-v", "--orderConf", dest="order_conf", help="brokerName1:num;brokerName2:num (put)"),
)
def _update_order_conf(admin: BlockingAdminClient, args: argparse.Namespace) -> Result:
    """mqadmin ``updateOrderConf``: the ORDER_TOPIC_CONFIG KV item of a topic (put, get, delete)."""
    if args.method == "get":
        conf = admin.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, args.topic)
        return {
            "topic": args.topic,
            "orderConf": conf,
        }, f"get orderConf success. topic=[{args.topic}], orderConf=[{conf}] "
    if args.method == "put":
        if not args.order_conf:
            raise ValueError("please set orderConf with option -v.")
        admin.update_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, args.topic, args.order_conf)
        return {"topic": args.topic, "orderConf": args.order_conf}, (
            f"update orderConf success. topic=[{args.topic}], orderConf=[{args.order_conf}]"
        )
    admin.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, args.topic)
    return {"topic": args.topic, "deleted": True}, f"delete orderConf success. topic=[{args.topic}]"
