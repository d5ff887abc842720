"""``ConsoleService``: what each page of the console shows and does, as JSON-ready data, over
finchmq's client (the admin client that ``finchmq admin`` uses, a producer for test messages,
a pull consumer for reading a time range).

Imports: ``finchmq.client`` and ``finchmq.protocol`` only. Errors are the client's
(``MQClientError`` with the RocketMQ response code); the web layer shows them to the user.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any

from finchmq.client import (
    AdminClient,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    NoRouteError,
    Producer,
    PullConsumer,
    PullStatus,
    ValidationError,
)
from finchmq.client.errors import SubscriptionGroupNotExistError
from finchmq.client.views import (
    cluster_broker_dict,
    consume_progress_dict,
    message_dict,
    message_track_dict,
    offset_table_rows,
    pop_process_queue_rows,
    pop_runtime_dict,
    timer_backlog_dict,
    topic_status_rows,
    trace_view_dict,
)
from finchmq.protocol.acl import is_perm_string
from finchmq.protocol.auth import Action, Decision, Resource, UserStatus, UserType, is_valid_ip_or_cidr
from finchmq.protocol.bodies import Connection, PermName, SubscriptionGroupConfig
from finchmq.protocol.codes import ResponseCode, version_desc
from finchmq.protocol.topics import (
    TOOLS_CONSUMER_GROUP,
    dlq_topic,
    is_dlq_topic,
    is_retry_topic,
    is_system_group,
    is_system_topic,
    reply_topic,
    validate_group,
)

__all__ = ["GROUP_SETTINGS", "MAX_LISTED_MESSAGES", "ConsoleService", "mask_secret"]

MAX_LISTED_MESSAGES = 2000  # rocketmq-dashboard's cap on a time-range query
_PULL_BATCH = 32
_GROUP_CONCURRENCY = 8  # groups asked about at once by the group list
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"  # Java MixAll: the dashboard's test-message producer

# The consumer group settings the console writes: Java name -> (SubscriptionGroupConfig field,
# the type a JSON value must have)
GROUP_SETTINGS: dict[str, tuple[str, type]] = {
    "consumeEnable": ("consume_enable", bool),
    "consumeFromMinEnable": ("consume_from_min_enable", bool),
    "consumeBroadcastEnable": ("consume_broadcast_enable", bool),
    "consumeMessageOrderly": ("consume_message_orderly", bool),
    "retryQueueNums": ("retry_queue_nums", int),
    "retryMaxTimes": ("retry_max_times", int),
    "brokerId": ("broker_id", int),
    "whichBrokerWhenConsumeSlowly": ("which_broker_when_consume_slowly", int),
    "notifyConsumerIdsChangedEnable": ("notify_consumer_ids_changed_enable", bool),
}


def _first_float(text: str | None) -> float | None:
    """The first figure of a broker's ``putTps``-style value (``"12.5 11.0 9.8"``), or None."""
    if not text:
        return None
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


def _standard(obj: Any) -> Any:
    """A protocol body as the JSON Java's standard form writes (camelCase keys)."""
    return json.loads(obj.to_json(standard=True))


class ConsoleService:
    """The console's operations on one cluster, given its name server addresses
    (``"host:port;host:port"``). ``start``/``close`` (or ``async with``). ``client_options`` are
    ``ClientConfig`` settings for every client it opens (e.g. ``use_tls``/``tls``)."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        instance_name: str = "finchmq-console",
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.instance_name = instance_name
        self.client_options = dict(client_options or {})
        self.admin = AdminClient(
            namesrv_addr=namesrv_addr, instance_name=instance_name, **self.client_options
        )
        self._producers: dict[bool, Producer] = {}
        self._consumer: PullConsumer | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        await self.admin.start()

    async def close(self) -> None:
        for producer in self._producers.values():
            await producer.close()
        if self._consumer is not None:
            await self._consumer.close()
        await self.admin.close()

    async def __aenter__(self) -> ConsoleService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _producer(self, trace: bool) -> Producer:
        async with self._lock:
            producer = self._producers.get(trace)
            if producer is None:
                producer = Producer(
                    SELF_TEST_PRODUCER_GROUP,
                    namesrv_addr=self.namesrv_addr,
                    instance_name=f"{self.instance_name}-trace" if trace else self.instance_name,
                    enable_msg_trace=trace,
                    **self.client_options,
                )
                await producer.start()
                self._producers[trace] = producer
            return producer

    async def _pull_consumer(self) -> PullConsumer:
        async with self._lock:
            if self._consumer is None:
                consumer = PullConsumer(
                    TOOLS_CONSUMER_GROUP,
                    namesrv_addr=self.namesrv_addr,
                    instance_name=self.instance_name,
                    **self.client_options,
                )
                await consumer.start()
                self._consumer = consumer
            return self._consumer

    # -- cluster ------------------------------------------------------------------------------------

    async def cluster(self) -> dict[str, Any]:
        """Every broker with its runtime figures; ``inTps``/``outTps`` are the broker's own
        10-second figures (``putTps``/``getTransferedTps``); ``timer`` its 5.x timer backlog
        (``timerCongestNum`` and the rest, as mqadmin ``clusterList``'s ``#Timer(Progress)``),
        ``pop`` finchmq's POP figures (inflight messages, check points not yet revived); each
        None from a broker that does not report them."""
        brokers = []
        for broker in await self.admin.cluster_brokers():
            row = cluster_broker_dict(broker)
            stats = broker.stats
            row["version"] = stats.get("brokerVersionDesc")
            row["inTps"] = _first_float(stats.get("putTps"))
            row["outTps"] = _first_float(stats.get("getTransferedTps"))
            row["inTotal"] = int(stats.get("msgPutTotalTodayNow", "0") or 0)
            row["outTotal"] = int(stats.get("msgGetTotalTodayNow", "0") or 0)
            row["runtime"] = stats.get("runtime")
            row["timer"] = timer_backlog_dict(stats)
            row["pop"] = pop_runtime_dict(stats)
            brokers.append(row)
        return {"nameServers": self.admin.config.namesrv_addr_list(), "brokers": brokers}

    # -- topics -------------------------------------------------------------------------------------

    async def topics(self) -> list[dict[str, str]]:
        """Every topic the name servers know, sorted, with its kind: NORMAL, RETRY, DLQ or SYSTEM
        (the broker's own, and the topics named after clusters and brokers, and their reply topics)."""
        topics, info = await asyncio.gather(self.admin.topic_list(), self.admin.cluster_info())
        clusters = set(info.cluster_addr_table)
        named = clusters | set(info.broker_addr_table) | {reply_topic(c) for c in clusters}

        def kind(topic: str) -> str:
            if is_retry_topic(topic):
                return "RETRY"
            if is_dlq_topic(topic):
                return "DLQ"
            if is_system_topic(topic) or topic in named:
                return "SYSTEM"
            return "NORMAL"

        return [{"topic": t, "kind": kind(t)} for t in sorted(topics)]

    async def topic(self, topic: str) -> dict[str, Any]:
        """A topic's route, per-queue status and consuming groups (``NoRouteError`` if unknown)."""
        route = await self.admin.topic_route(topic)
        status, groups = await asyncio.gather(
            self.admin.topic_status(topic), self.admin.examine_topic_consume_by_who(topic)
        )
        queue_datas = [
            {
                "brokerName": q.broker_name,
                "readQueueNums": q.read_queue_nums,
                "writeQueueNums": q.write_queue_nums,
                "perm": q.perm,
                "permName": PermName.perm2string(q.perm),
            }
            for q in route.queue_datas
        ]
        brokers = [
            {"cluster": b.cluster, "brokerName": b.broker_name, "brokerId": bid, "addr": addr}
            for b in route.broker_datas
            for bid, addr in sorted(b.broker_addrs.items())
        ]
        return {
            "topic": topic,
            "route": {"queueDatas": queue_datas, "brokerDatas": brokers},
            "status": topic_status_rows(status),
            "consumerGroups": groups,
        }

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None,
        broker_addr: str | None,
        read_queue_nums: int,
        write_queue_nums: int,
        perm: int,
        order: bool,
    ) -> dict[str, Any]:
        """Create or update a topic on a broker or every master of a cluster (``updateTopic``)."""
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to create the topic on")
        if not 1 <= read_queue_nums <= 1024 or not 1 <= write_queue_nums <= 1024:
            raise ValidationError("queue numbers must be between 1 and 1024")
        if perm not in (PermName.READ, PermName.WRITE, PermName.READ | PermName.WRITE):
            raise ValidationError(f"perm must be 2 (W), 4 (R) or 6 (RW), not {perm}")
        brokers = await self.admin.create_topic(
            topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
            cluster=cluster or None,
            broker_addr=broker_addr or None,
        )
        return {"topic": topic, "brokers": brokers}

    async def delete_topic(self, topic: str, cluster: str | None) -> dict[str, Any]:
        """Delete a topic from the brokers (of the cluster) and the name servers."""
        await self.admin.topic_route(topic)  # an unknown topic is an error, not a silent no-op
        await self.admin.delete_topic(topic, cluster or None)
        return {"topic": topic, "deleted": True}

    # -- consumer groups ----------------------------------------------------------------------------

    async def groups(self) -> list[dict[str, Any]]:
        """Every consumer group with its online clients, consume TPS and lag (rocketmq-dashboard's
        group list). A group never consumed (no retry topic) has no figures."""
        configs = await self.admin.subscription_groups()
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)

        async def summary(group: str) -> dict[str, Any]:
            row: dict[str, Any] = {"group": group, "system": is_system_group(group), "clients": 0}
            row.update({"consumeType": None, "messageModel": None, "consumeTps": None, "diffTotal": None})
            if row["system"]:
                return row
            async with limit:
                stats, conn = await asyncio.gather(
                    self.admin.consume_stats(group),
                    self.admin.consumer_connection(group),
                    return_exceptions=True,
                )
            if isinstance(stats, BaseException):
                if not isinstance(stats, MQClientError | TimeoutError):
                    raise stats
                if not isinstance(stats, NoRouteError):
                    row["error"] = str(stats)
            else:
                row["consumeTps"] = stats.consume_tps
                row["diffTotal"] = stats.compute_total_diff()
            if isinstance(conn, BaseException):
                if not isinstance(conn, MQClientError | TimeoutError):
                    raise conn
            else:
                row["clients"] = len(conn.connection_set)
                row["consumeType"] = None if conn.consume_type is None else conn.consume_type.name
                row["messageModel"] = None if conn.message_model is None else conn.message_model.name
            return row

        return list(await asyncio.gather(*(summary(g) for g in configs)))

    async def group(self, group: str) -> dict[str, Any]:
        """A group's settings, online clients and subscriptions, lag per queue, the PULL/POP mode
        set for its topics (5.x ``setConsumeMode``) and, for clients that pop, their popped
        queues (5.x ``consumerStatus``'s pop detail); the parts the cluster refuses carry the
        error instead (a group with no client online, say)."""
        configs, progress, conn, modes = await asyncio.gather(
            self.admin.subscription_groups(),
            self.admin.consume_stats(group),
            self.admin.consumer_connection(group),
            self.admin.message_request_modes(),
            return_exceptions=True,
        )
        out: dict[str, Any] = {"group": group}
        if isinstance(configs, BaseException):
            raise configs
        config = configs.get(group)
        if config is None and isinstance(progress, BaseException):
            raise ValidationError(f"consumer group {group!r} not found on any broker")
        out["config"] = _standard(config) if config is not None else None
        for key, answer in (("progress", progress), ("connection", conn), ("requestModes", modes)):
            if isinstance(answer, MQClientError | TimeoutError):
                out[key] = None
                out[f"{key}Error"] = _error_text(answer)
            elif isinstance(answer, BaseException):
                raise answer
        if not isinstance(progress, BaseException):
            out["progress"] = consume_progress_dict(group, progress)
        if not isinstance(modes, BaseException):
            out["requestModes"] = [
                {"topic": topic, "mode": m.mode.name, "popShareQueueNum": m.pop_share_queue_num}
                for topic, groups in sorted(modes.items())
                if (m := groups.get(group)) is not None
            ]
        out["pop"] = []
        if not isinstance(conn, BaseException):
            out["connection"] = connection = _standard(conn)
            for client in connection.get("connectionSet", []):
                if isinstance(client.get("version"), int):
                    client["versionDesc"] = version_desc(client["version"])
            if any(m["mode"] == "POP" for m in out["requestModes"] or ()):  # else none pops
                await self._pop_detail(group, [c.client_id for c in conn.connection_set if c.client_id], out)
        return out

    async def _pop_detail(self, group: str, client_ids: list[str], out: dict[str, Any]) -> None:
        """``out["pop"]``: the popped queues of each online client (its running info's pop
        table: a push consumer the broker has told to pop); ``popErrors`` the clients that did
        not answer."""
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)

        async def running_info(client_id: str) -> Any:
            async with limit:
                return await self.admin.consumer_running_info(group, client_id)

        answers = await asyncio.gather(*(running_info(c) for c in client_ids), return_exceptions=True)
        errors = {}
        for client_id, answer in zip(client_ids, answers, strict=True):
            if isinstance(answer, MQClientError | TimeoutError):
                errors[client_id] = _error_text(answer)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                out["pop"] += pop_process_queue_rows(client_id, answer)
        if errors:
            out["popErrors"] = errors

    async def save_group(
        self,
        group: str,
        settings: Mapping[str, Any],
        *,
        cluster: str | None,
        broker_addr: str | None,
    ) -> dict[str, Any]:
        """Create or update a consumer group's settings on a broker or every master of a cluster
        (rocketmq-dashboard's ``consumerCreateOrUpdate``, mqadmin ``updateSubGroup``).
        ``settings`` are ``SubscriptionGroupConfig`` fields by their Java names (``GROUP_SETTINGS``);
        those left out keep the group's current value, or Java's default for a new group."""
        reason = validate_group(group)
        if reason is not None:
            raise ValidationError(f"group {group!r}: {reason}")
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to write the group to")
        _check_group_settings(settings)
        current = (await self.admin.subscription_groups(cluster or None)).get(group)
        values: dict[str, Any] = {}
        if current is not None:
            values = {name: getattr(current, attr) for name, (attr, _) in GROUP_SETTINGS.items()}
        values.update(settings)
        config = SubscriptionGroupConfig(
            group_name=group, **{GROUP_SETTINGS[name][0]: value for name, value in values.items()}
        )
        brokers = await self.admin.create_subscription_group(
            config, cluster=cluster or None, broker_addr=broker_addr or None
        )
        return {"group": group, "brokers": brokers, "created": current is None, "config": _standard(config)}

    async def delete_group(
        self, group: str, *, cluster: str | None, broker_addr: str | None
    ) -> dict[str, Any]:
        """Delete a consumer group from a broker or every master of a cluster, with (for a
        cluster) its retry and dead-letter topics (mqadmin ``deleteSubGroup``);
        ``SubscriptionGroupNotExistError`` when no broker has it."""
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to delete the group from")
        if group not in await self.admin.subscription_groups(cluster or None):
            raise SubscriptionGroupNotExistError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"consumer group {group!r} not found on any broker"
            )
        brokers = await self.admin.delete_subscription_group(
            group, cluster=cluster or None, broker_addr=broker_addr or None
        )
        return {"group": group, "brokers": brokers, "deleted": True}

    async def reset_offset(self, group: str, topic: str, timestamp: int, force: bool) -> dict[str, Any]:
        """Move the group's offsets of ``topic`` to ``timestamp`` (epoch ms; ``resetOffsetByTime``)."""
        table = await self.admin.reset_offset_by_time(group, topic, timestamp, force=force)
        return {"group": group, "topic": topic, "timestamp": timestamp, "offsets": offset_table_rows(table)}

    # -- messages -----------------------------------------------------------------------------------

    async def messages_by_time(
        self, topic: str, begin: int, end: int, limit: int = MAX_LISTED_MESSAGES
    ) -> dict[str, Any]:
        """The messages of ``topic`` stored in [begin, end] (epoch ms), newest first, without
        bodies, at most ``limit`` (rocketmq-dashboard's ``queryMessageByTopic``)."""
        if end < begin:
            raise ValidationError("the end of the time range is before its beginning")
        consumer = await self._pull_consumer()
        found: list[MessageExt] = []
        truncated = False
        for mq in sorted(await consumer.fetch_subscribe_message_queues(topic)):
            batch, more = await self._read_range(consumer, mq, begin, end, limit - len(found))
            found += batch
            if more or len(found) >= limit:
                truncated = more or len(found) >= limit
                break
        found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset), reverse=True)
        return {"messages": [message_dict(m, body=False) for m in found], "truncated": truncated}

    @staticmethod
    async def _read_range(
        consumer: PullConsumer, mq: MessageQueue, begin: int, end: int, room: int
    ) -> tuple[list[MessageExt], bool]:
        low, high = await asyncio.gather(consumer.search_offset(mq, begin), consumer.search_offset(mq, end))
        high = min(high + 1, await consumer.max_offset(mq))
        out: list[MessageExt] = []
        offset = low
        while offset < high:
            result = await consumer.pull(mq, "*", offset, min(_PULL_BATCH, high - offset))
            if result.pull_status is not PullStatus.FOUND or result.next_begin_offset <= offset:
                break
            for msg in result.msg_found_list:
                if begin <= msg.store_timestamp <= end:
                    if len(out) >= room:
                        return out, True
                    out.append(msg)
            offset = result.next_begin_offset
        return out, False

    async def messages_by_key(self, topic: str, key: str) -> dict[str, Any]:
        """Messages of ``topic`` with ``key`` in their KEYS (or as their id) (``queryMsgByKey``)."""
        if not key:
            raise ValidationError("give a message key")
        found = await self.admin.query_message(topic, key, 64)
        return {"messages": [message_dict(m, body=False) for m in found], "truncated": len(found) >= 64}

    async def message(self, msg_id: str, topic: str | None) -> dict[str, Any]:
        """One message by its offset id (or client id with its topic): fields, properties, body,
        which groups consumed it, and its trace records when tracing was on."""
        msg = await self.admin.view_message(msg_id, topic or None)
        out: dict[str, Any] = {"message": message_dict(msg)}
        tracks, trace = await asyncio.gather(
            self.admin.message_track_detail(msg),
            self.admin.query_msg_trace_by_id(msg.client_msg_id),
            return_exceptions=True,
        )
        for key, answer in (("tracks", tracks), ("trace", trace)):
            if isinstance(answer, MQClientError | TimeoutError):
                out[key] = []
                out[f"{key}Error"] = _error_text(answer)
            elif isinstance(answer, BaseException):
                raise answer
        if not isinstance(tracks, BaseException):
            out["tracks"] = [message_track_dict(t) for t in tracks]
        if not isinstance(trace, BaseException):  # the send first, then each group's records
            order = sorted(trace, key=lambda v: (v.msg_type != "Pub", v.group_name, v.time_stamp, v.msg_type))
            out["trace"] = [trace_view_dict(v) for v in order]
        return out

    async def send(
        self, topic: str, body: str, *, tags: str | None, keys: str | None, trace: bool
    ) -> dict[str, Any]:
        """Send one test message (rocketmq-dashboard's ``sendTopicMessage``)."""
        producer = await self._producer(trace)
        msg = Message.create(topic, body.encode("utf-8"), tags=tags or None, keys=keys or None)
        result = await producer.send(msg)
        return {
            "sendStatus": result.send_status.name,
            "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id,
            "brokerName": result.message_queue.broker_name,
            "queueId": result.message_queue.queue_id,
            "queueOffset": result.queue_offset,
        }

    # -- producers ----------------------------------------------------------------------------------

    async def producer_groups(self) -> list[str]:
        """The producer groups with a member online on some master (GET_ALL_PRODUCER_INFO), to
        pick from; brokers that do not answer are skipped."""
        masters = await self.admin.master_addrs()
        answers = await asyncio.gather(
            *(self.admin.all_producer_info(a) for a in masters.values()), return_exceptions=True
        )
        groups: set[str] = set()
        for answer in answers:
            if isinstance(answer, MQClientError | TimeoutError):
                continue
            if isinstance(answer, BaseException):
                raise answer
            groups.update(answer.data)
        return sorted(groups)

    async def producers(self, topic: str, group: str) -> dict[str, Any]:
        """The online producers of ``group`` as a broker of ``topic`` sees them
        (rocketmq-dashboard's producer page, mqadmin ``producerConnection``): none, with the
        broker's word in ``error``, when the group has no producer there."""
        reason = validate_group(group)
        if reason is not None:
            raise ValidationError(f"producer group {group!r}: {reason}")
        out: dict[str, Any] = {"topic": topic, "group": group, "connections": []}
        try:
            conn = await self.admin.producer_connection(group, topic)
        except MQBrokerError as exc:
            if exc.response_code != ResponseCode.SYSTEM_ERROR:
                raise
            out["error"] = exc.remark or _error_text(exc)  # "the producer group[...] not exist"
            return out
        members = sorted(conn.connection_set, key=lambda c: c.client_id)
        out["connections"] = [_connection_dict(c) for c in members]
        return out

    # -- ACL: 1.0 accounts (plain_acl.yml) and 2.0 users and rules -----------------------------------

    async def acl(self) -> dict[str, Any]:
        """Each master's ACL state: ``acl1`` its ACL 1.0 files and their versions
        (GET_BROKER_CLUSTER_ACL_INFO; ``error`` where ACL 1.0 is off), ``acl2`` its ACL 2.0 users
        (passwords masked) and rules (``error`` where ACL 2.0 is off). ACL 1.0 accounts are not
        listed: RocketMQ 4.9.8 and 5.2 removed the request that read them back
        (GET_BROKER_CLUSTER_ACL_CONFIG), since it sent every secret key over the wire."""
        masters = await self.admin.master_addrs()

        async def one(name: str, addr: str) -> dict[str, Any]:
            row: dict[str, Any] = {"brokerName": name, "brokerAddr": addr}
            files, users, rules = await asyncio.gather(
                self.admin.examine_broker_cluster_acl_version_info(addr),
                self.admin.list_user(addr),
                self.admin.list_acl(addr),
                return_exceptions=True,
            )
            if isinstance(files, MQClientError | TimeoutError):
                row["acl1"] = {"enabled": False, "error": _remark(files)}
            elif isinstance(files, BaseException):
                raise files
            else:
                versions = files.all_acl_config_data_version or {"": files.acl_config_data_version}
                row["acl1"] = {
                    "enabled": True,
                    "files": [
                        {"path": path, "counter": v.counter, "timestamp": v.timestamp}
                        for path, v in sorted(versions.items())
                    ],
                }
            for answer in (users, rules):
                if isinstance(answer, BaseException) and not isinstance(answer, MQClientError | TimeoutError):
                    raise answer
            if isinstance(users, BaseException):
                row["acl2"] = {"enabled": False, "error": _remark(users)}
            elif isinstance(rules, BaseException):
                row["acl2"] = {"enabled": False, "error": _remark(rules)}
            else:
                row["acl2"] = {
                    "enabled": True,
                    "users": [
                        {
                            "username": u.username,
                            "password": mask_secret(u.password),
                            "userType": u.user_type,
                            "userStatus": u.user_status,
                        }
                        for u in sorted(users, key=lambda u: u.username or "")
                    ],
                    "rules": [
                        {
                            "subject": a.subject,
                            "policyType": p.policy_type,
                            "resource": e.resource,
                            "actions": e.actions or [],
                            "sourceIps": e.source_ips or [],
                            "decision": e.decision,
                        }
                        for a in sorted(rules, key=lambda a: a.subject or "")
                        for p in a.policies or ()
                        for e in p.entries or ()
                    ],
                }
            return row

        brokers = await asyncio.gather(*(one(n, a) for n, a in sorted(masters.items())))
        return {"brokers": list(brokers)}

    async def save_acl_account(
        self,
        access_key: str,
        *,
        secret_key: str | None,
        white_remote_address: str | None,
        admin: bool,
        default_topic_perm: str | None,
        default_group_perm: str | None,
        topic_perms: list[str],
        group_perms: list[str],
        cluster: str | None,
        broker_addr: str | None,
    ) -> dict[str, Any]:
        """Create an ACL 1.0 account or change it (what is left out keeps its value) in the ACL
        file of a broker or of every master of a cluster (mqadmin ``updateAclConfig``). The
        answer shows the secret key masked."""
        if len(access_key) <= _ACL_KEY_MIN or (secret_key is not None and len(secret_key) <= _ACL_KEY_MIN):
            raise ValidationError(
                f"the access key and the secret key are longer than {_ACL_KEY_MIN} characters"
            )
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to write the account to")
        for what, perm in (
            ("defaultTopicPerm", default_topic_perm),
            ("defaultGroupPerm", default_group_perm),
        ):
            if perm is not None and not is_perm_string(perm):
                raise ValidationError(f"{what} is one of {_PERMS}, not {perm!r}")
        for what, items in (("topicPerms", topic_perms), ("groupPerms", group_perms)):
            for item in items:
                name, _, perm = item.partition("=")
                if not name.strip() or not is_perm_string(perm):
                    raise ValidationError(
                        f"each of {what} is NAME=PERM with PERM one of {_PERMS}, not {item!r}"
                    )
        brokers = await self.admin.create_and_update_plain_access_config(
            access_key,
            secret_key,
            white_remote_address=white_remote_address,
            admin=admin,
            default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=topic_perms,
            group_perms=group_perms,
            cluster=cluster or None,
            broker_addr=broker_addr or None,
        )
        return {"accessKey": access_key, "secretKey": mask_secret(secret_key), "brokers": brokers}

    async def delete_acl_account(
        self, access_key: str, *, cluster: str | None, broker_addr: str | None
    ) -> dict[str, Any]:
        """Remove an ACL 1.0 account (mqadmin ``deleteAclConfig``)."""
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to delete the account from")
        brokers = await self.admin.delete_plain_access_config(
            access_key, cluster=cluster or None, broker_addr=broker_addr or None
        )
        return {"accessKey": access_key, "brokers": brokers, "deleted": True}

    async def save_user(
        self,
        username: str,
        *,
        password: str | None,
        user_type: str | None,
        user_status: str | None,
        create: bool,
        cluster: str | None,
        broker_addr: str | None,
    ) -> dict[str, Any]:
        """Create an ACL 2.0 user (``create``) or change its password, type or status (mqadmin
        ``createUser``/``updateUser``); the answer shows the password masked."""
        if not _USERNAME.fullmatch(username):
            raise ValidationError(f"a user name is letters, digits, _ or -, not {username!r}")
        if create and not password:
            raise ValidationError("a new user needs a password")
        if user_type is not None and UserType.by_name(user_type) is None:
            raise ValidationError(f"userType is Super or Normal, not {user_type!r}")
        if user_status is not None and UserStatus.by_name(user_status) is None:
            raise ValidationError(f"userStatus is enable or disable, not {user_status!r}")
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to write the user to")
        where = {"cluster": cluster or None, "broker_addr": broker_addr or None}
        if create:
            brokers = await self.admin.create_user(username, password or "", user_type, **where)
        else:
            brokers = await self.admin.update_user(
                username, password or None, user_type, user_status, **where
            )
        return {
            "username": username,
            "password": mask_secret(password),
            "brokers": brokers,
            "created": create,
        }

    async def delete_user(
        self, username: str, *, cluster: str | None, broker_addr: str | None
    ) -> dict[str, Any]:
        """Delete an ACL 2.0 user and its rules (mqadmin ``deleteUser``)."""
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to delete the user from")
        brokers = await self.admin.delete_user(
            username, cluster=cluster or None, broker_addr=broker_addr or None
        )
        return {"username": username, "brokers": brokers, "deleted": True}

    async def save_acl_rule(
        self,
        subject: str,
        *,
        resources: list[str],
        actions: list[str],
        decision: str,
        source_ips: list[str],
        cluster: str | None,
        broker_addr: str | None,
    ) -> dict[str, Any]:
        """Give ``subject`` (``User:name``) an ACL 2.0 entry per resource, replacing one there
        for the same resource (mqadmin ``createAcl``/``updateAcl``)."""
        if not subject.startswith("User:") or not _USERNAME.fullmatch(subject[5:]):
            raise ValidationError(f"the subject is User:NAME, not {subject!r}")
        if not resources or any(Resource.parse(r) is None for r in resources):
            raise ValidationError(
                f"resources are *, Topic:NAME, Topic:PREFIX*, Group:NAME, Group:* ..., not {resources!r}"
            )
        known = [a.java_name for a in Action if a not in (Action.UNKNOWN, Action.ANY)]
        if not actions or any(Action.by_name(a) in (None, Action.UNKNOWN, Action.ANY) for a in actions):
            raise ValidationError(f"actions are some of {', '.join(known)}, not {actions!r}")
        if Decision.by_name(decision) is None:
            raise ValidationError(f"decision is Allow or Deny, not {decision!r}")
        bad = [ip for ip in source_ips if not is_valid_ip_or_cidr(ip)]
        if bad:
            raise ValidationError(f"source IPs are addresses or CIDR blocks, not {bad!r}")
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to write the rule to")
        brokers = await self.admin.create_acl(
            subject,
            resources,
            actions,
            decision,
            source_ips or None,
            cluster=cluster or None,
            broker_addr=broker_addr or None,
            update=True,
        )
        return {"subject": subject, "resources": resources, "brokers": brokers}

    async def delete_acl_rule(
        self, subject: str, resource: str | None, *, cluster: str | None, broker_addr: str | None
    ) -> dict[str, Any]:
        """Delete a subject's ACL 2.0 rules, or only its entry for ``resource`` (mqadmin ``deleteAcl``)."""
        if resource is not None and Resource.parse(resource) is None:
            raise ValidationError(f"not a resource: {resource!r}")
        if not cluster and not broker_addr:
            raise ValidationError("give a cluster or a broker address to delete the rule from")
        brokers = await self.admin.delete_acl(
            subject, resource, cluster=cluster or None, broker_addr=broker_addr or None
        )
        return {"subject": subject, "resource": resource, "brokers": brokers, "deleted": True}

    # -- dead letters -------------------------------------------------------------------------------

    async def dlq_messages(self, group: str, begin: int, end: int) -> dict[str, Any]:
        """The group's dead letters stored in [begin, end]; none when it has no DLQ topic yet
        (rocketmq-dashboard's ``queryDlqMessageByPage``)."""
        topic = dlq_topic(group)
        try:
            await self.admin.topic_route(topic)
        except NoRouteError:
            return {"messages": [], "truncated": False, "topic": topic}
        return {**await self.messages_by_time(topic, begin, end), "topic": topic}

    async def resend_dlq(self, group: str, msg_id: str, client_id: str | None) -> dict[str, Any]:
        """Have an online consumer of ``group`` (``client_id``, or the first one) consume a
        dead letter again, its listener running on it now (rocketmq-dashboard's
        ``batchResendDlqMessage``: ``consumeMessageDirectly`` on the ``%DLQ%`` topic)."""
        if not client_id:
            conn = await self.admin.consumer_connection(group)
            ids = [c.client_id for c in conn.connection_set if c.client_id]
            if not ids:
                raise MQBrokerError(ResponseCode.CONSUMER_NOT_ONLINE, f"no consumer of {group} is online")
            client_id = ids[0]
        result = await self.admin.consume_message_directly(group, client_id, msg_id, dlq_topic(group))
        return {
            "msgId": msg_id,
            "clientId": client_id,
            "consumeResult": None if result.consume_result is None else result.consume_result.name,
            "remark": result.remark,
            "spentTimeMills": result.spent_time_mills,
        }


# The ranges the console accepts (Java checks none: a negative retryQueueNums makes a group no
# client can retry in)
_GROUP_RANGES = {
    "retryQueueNums": (0, 1024),
    "retryMaxTimes": (-1, 10_000),  # -1: the client's maxReconsumeTimes decides (Java 5.x)
    "brokerId": (0, 1024),
    "whichBrokerWhenConsumeSlowly": (0, 1024),
}


def _check_group_settings(settings: Mapping[str, Any]) -> None:
    """``ValidationError`` naming the first unknown setting or bad value."""
    for name, value in settings.items():
        if name not in GROUP_SETTINGS:
            known = ", ".join(GROUP_SETTINGS)
            raise ValidationError(f"unknown group setting {name!r}; the settings are {known}")
        kind = GROUP_SETTINGS[name][1]
        if kind is bool and not isinstance(value, bool):
            raise ValidationError(f"{name} must be true or false, not {value!r}")
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError(f"{name} must be a whole number, not {value!r}")
            low, high = _GROUP_RANGES[name]
            if not low <= value <= high:
                raise ValidationError(f"{name} must be between {low} and {high}, not {value}")


_ACL_KEY_MIN = 6  # Java checkPlainAccessConfig: both keys longer than 6 characters
_PERMS = "PUB, SUB, PUB|SUB or DENY"
_USERNAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def mask_secret(secret: str | None) -> str | None:
    """A secret key or password as the console shows it: its first two characters, then stars
    (all stars when it is short); never in full."""
    if not secret:
        return None
    return secret[:2] + "*" * 6 if len(secret) > 6 else "*" * 6


def _remark(exc: BaseException) -> str:
    """The broker's own words of a refusal, else the error's text."""
    return getattr(exc, "remark", "") or _error_text(exc)


def _connection_dict(c: Connection) -> dict[str, Any]:
    return {
        "clientId": c.client_id,
        "clientAddr": c.client_addr,
        "language": c.language.name,
        "version": c.version,
        "versionDesc": version_desc(c.version),
    }


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
