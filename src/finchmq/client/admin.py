"""``AdminClient``: operate a cluster (Java ``DefaultMQAdminExt`` / ``MQAdminImpl``): topics,
routes, clusters, brokers, consumer progress and connections, offset resets, message queries.

Imports: ``finchmq.protocol`` and the client's modules. The ``finchmq admin`` commands are thin
printers over these calls (``finchmq.cli.admin``).

Strategy: every call resolves the brokers it needs from the name server (a topic's route, or the
cluster table) and asks each master, concurrently; per-broker answers are merged (queue tables)
the way mqadmin merges them.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from finchmq.protocol._json import java_concurrent_hash_order, java_hash_order
from finchmq.protocol.attributes import TopicAttributeError, parse_attribute_modification
from finchmq.protocol.auth import AclInfo, UserInfo
from finchmq.protocol.bodies import (
    MASTER_ID,
    BrokerData,
    BrokerStatsData,
    ClusterInfo,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    ConsumeType,
    DataVersion,
    MessageRequestMode,
    OffsetWrapper,
    PermName,
    ProducerConnection,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    SetMessageRequestModeRequestBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    TopicStatsTable,
    java_key_hash,
)
from finchmq.protocol.codes import ResponseCode
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.headers import CreateAccessConfigRequestHeader
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.protocol.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DEFAULT_CONSUMER_GROUP,
    DEFAULT_PRODUCER_GROUP,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRACE_TOPIC,
    SYSTEM_GROUPS,
    dlq_topic,
    retry_topic,
    validate_topic,
)
from finchmq.protocol.trace import TraceView, trace_views

from .config import ClientConfig, make_config
from .errors import MQBrokerError, MQClientError, NoRouteError, ValidationError
from .instance import ClientService, MQClientInstance, ServiceState

__all__ = ["AdminClient", "ClusterAclVersionInfo", "ClusterBroker", "MessageTrack", "TrackType"]

log = logging.getLogger(__name__)

_TIMEOUT_MS = 5_000

_SYS_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"  # Java MixAll.isSysConsumerGroup
# Java DefaultMQAdminExtImpl.SYSTEM_GROUP_SET: the broker's groups and the producer groups of its tools
_ADMIN_SYSTEM_GROUPS = frozenset(
    (*SYSTEM_GROUPS, DEFAULT_CONSUMER_GROUP, DEFAULT_PRODUCER_GROUP, "SELF_TEST_P_GROUP")
)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ClusterAclVersionInfo:
    """A broker's ACL files and their versions (Java ``ClusterAclVersionInfo``)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    acl_config_data_version: DataVersion  # the main plain_acl.yml's
    all_acl_config_data_version: dict[str, DataVersion] = field(default_factory=dict)  # by file path


def _java_client_order(table: Mapping[str, object]) -> list[str]:
    """The keys of a table a broker sent, in the order Java's client iterates them: fastjson
    fills a new ``ConcurrentHashMap`` (16 buckets at first) in the order of the body."""
    return java_concurrent_hash_order(list(table))


class TrackType(enum.Enum):
    """Java ``TrackType``: whether a consumer group has consumed a message."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class MessageTrack:
    """One group's track of a message (Java ``MessageTrack``); ``str()`` is Java's ``toString``."""

    consumer_group: str
    track_type: TrackType
    exception_desc: str | None = None

    def __str__(self) -> str:
        desc = "null" if self.exception_desc is None else self.exception_desc
        return (
            f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type.value}, "
            f"exceptionDesc={desc}]"
        )


@dataclass(frozen=True, slots=True)
class ClusterBroker:
    """One broker of ``clusterList``: where it is and its runtime statistics (``brokerStatus``),
    or the error that kept them from being read (``stats`` is then empty)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    stats: dict[str, str] = field(default_factory=dict)
    error: str | None = None


class AdminClient(ClientService):
    """``AdminClient(namesrv_addr="127.0.0.1:9876")``; ``async with`` or ``start``/``close``.

    With ``namespace="X"`` (``ClientConfig.namespace``, as the clients') the topics and the
    consumer and producer groups given to its calls are wrapped ``X%name`` (``%RETRY%X%group``
    for a retry topic), except system topics and groups and names already in ``X``; queues given
    (``update_consume_offsets``, ``queue_offsets``) have their topic wrapped. Java's
    ``DefaultMQAdminExt`` has the setting (it is a ``ClientConfig``) but does not apply it; this
    is a finchmq addition. What the calls return (topic lists, routes, stats, group tables,
    messages) names topics and groups as the broker stores them, ``X%name``. Names inside other
    strings (``view_broker_stats_data``'s key, ACL resources) and KV config namespaces are sent
    as given.
    """

    _KIND = "admin client"

    def __init__(self, config: ClientConfig | None = None, /, **overrides: object) -> None:
        base = config if config is not None else ClientConfig(instance_name=f"admin-{time.time_ns()}")
        self.config: ClientConfig = make_config(ClientConfig, base, "instance_name", overrides)
        self._state = ServiceState.CREATE_JUST
        self._instance: MQClientInstance | None = None

    async def start(self) -> None:
        if self._running_already():
            return
        instance = MQClientInstance.get_or_create(self.config)
        instance.admin_count += 1
        try:
            await instance.start()
        except BaseException:
            instance.admin_count -= 1
            await instance.shutdown()
            raise
        self._instance = instance
        self._state = ServiceState.RUNNING

    async def close(self) -> None:
        if self._state is not ServiceState.RUNNING or self._instance is None:
            self._state = ServiceState.SHUTDOWN_ALREADY
            return
        self._state = ServiceState.SHUTDOWN_ALREADY
        self._instance.admin_count -= 1
        await self._instance.shutdown()

    @property
    def _api_timeout(self) -> int:
        return self.config.mq_client_api_timeout

    def _ns(self, name: str) -> str:
        """A topic or group given by the caller, as the broker knows it in this namespace."""
        return self.config.with_namespace(name)

    # -- cluster and brokers ----------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """Every broker of every cluster (mqadmin ``clusterList``)."""
        return await self.instance.api.get_broker_cluster_info(self._api_timeout)

    async def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """``broker_name -> master address``, of one cluster or of all."""
        info = await self.cluster_info()
        names: Iterable[str]
        if cluster is None:
            names = info.broker_addr_table.keys()
        else:
            if cluster not in info.cluster_addr_table:
                raise ValidationError(
                    f"cluster {cluster!r} not found; known: {sorted(info.cluster_addr_table)}"
                )
            names = info.cluster_addr_table[cluster]
        out: dict[str, str] = {}
        for name in names:
            data = info.broker_addr_table.get(name)
            if data is not None and MASTER_ID in data.broker_addrs:
                out[name] = data.broker_addrs[MASTER_ID]
        return out

    async def broker_runtime_stats(self, broker_addr: str) -> dict[str, str]:
        """A broker's runtime statistics (mqadmin ``brokerStatus``)."""
        return await self.instance.api.get_broker_runtime_info(broker_addr, _TIMEOUT_MS)

    async def cluster_brokers(self) -> list[ClusterBroker]:
        """Every broker of every cluster with its runtime statistics, read concurrently (mqadmin
        ``clusterList``), by cluster, broker name and id. A broker that does not answer is listed
        with the error instead of statistics."""
        info = await self.cluster_info()
        where = [
            (cluster, name, bid, addr)
            for cluster, names in sorted(info.cluster_addr_table.items())
            for name in sorted(names)
            if (data := info.broker_addr_table.get(name)) is not None
            for bid, addr in sorted(data.broker_addrs.items())
        ]
        answers = await asyncio.gather(
            *(self.broker_runtime_stats(addr) for *_, addr in where), return_exceptions=True
        )
        out = []
        for (cluster, name, bid, addr), answer in zip(where, answers, strict=True):
            if isinstance(answer, MQClientError | TimeoutError):
                error = str(answer) or type(answer).__name__
                out.append(ClusterBroker(cluster, name, bid, addr, error=error))
            elif isinstance(answer, BaseException):
                raise answer
            else:
                out.append(ClusterBroker(cluster, name, bid, addr, stats=answer))
        return out

    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        """A broker's settings (mqadmin ``getBrokerConfig``)."""
        return await self.instance.api.get_broker_config(broker_addr, _TIMEOUT_MS)

    async def update_broker_config(self, broker_addr: str, properties: dict[str, str]) -> str | None:
        """Change broker settings at run time (mqadmin ``updateBrokerConfig``); returns the remark."""
        return await self.instance.api.update_broker_config(broker_addr, properties, _TIMEOUT_MS)

    # -- topics -------------------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = PermName.READ | PermName.WRITE,
        order: bool = False,
        cluster: str | None = None,
        broker_addr: str | None = None,
        attributes: str | None = None,
    ) -> list[str]:
        """Create or update ``topic`` on one broker or on every master of a cluster (mqadmin
        ``updateTopic``); returns the broker addresses written.

        ``attributes`` is mqadmin 5.x's ``-a`` modification, e.g. ``"+message.type=FIFO"``
        (``-key`` deletes one on an update); a malformed one raises ``ValidationError``.
        """
        topic = self._ns(topic)
        problem = validate_topic(topic)
        if problem is not None:
            raise ValidationError(f"topic {topic!r}: {problem}")
        try:
            modification = parse_attribute_modification(attributes.strip() if attributes else None)
        except TopicAttributeError as exc:
            raise ValidationError(f"topic {topic!r}: attributes {attributes!r}: {exc}") from None
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
            attributes=modification or None,
        )
        addrs = [broker_addr] if broker_addr else list((await self.master_addrs(cluster)).values())
        if not addrs:
            raise MQClientError("no master broker to create the topic on")
        api = self.instance.api
        await asyncio.gather(
            *(api.create_topic(a, AUTO_CREATE_TOPIC_KEY_TOPIC, config, _TIMEOUT_MS) for a in addrs)
        )
        return addrs

    async def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Delete ``topic`` from the brokers (of the cluster) and from every name server."""
        topic = self._ns(topic)
        api = self.instance.api
        addrs = list((await self.master_addrs(cluster)).values())
        await asyncio.gather(*(api.delete_topic_in_broker(a, topic, _TIMEOUT_MS) for a in addrs))
        await asyncio.gather(
            *(api.delete_topic_in_name_server(ns, topic, _TIMEOUT_MS) for ns in api.name_server_address_list)
        )

    # -- subscription groups, broker permission, name-server settings --------------------------

    async def _brokers(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        addrs = [broker_addr] if broker_addr else list((await self.master_addrs(cluster)).values())
        if not addrs:
            raise MQClientError("no master broker found (give a cluster or a broker address)")
        return addrs

    async def create_subscription_group(
        self, config: SubscriptionGroupConfig, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Create or update a consumer group's settings on one broker or on every master of a
        cluster (mqadmin ``updateSubGroup``); returns the broker addresses written."""
        config = replace(config, group_name=self._ns(config.group_name))
        addrs = await self._brokers(cluster, broker_addr)
        api = self.instance.api
        await asyncio.gather(*(api.create_subscription_group(a, config, _TIMEOUT_MS) for a in addrs))
        return addrs

    async def delete_subscription_group(
        self, group: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Delete a consumer group from the brokers, and (with a cluster) its retry and DLQ topics
        from the cluster and the name servers (mqadmin ``deleteSubGroup``); returns the brokers."""
        group = self._ns(group)
        addrs = await self._brokers(cluster, broker_addr)
        api = self.instance.api
        await asyncio.gather(*(api.delete_subscription_group(a, group, _TIMEOUT_MS) for a in addrs))
        if cluster is not None:
            for topic in (retry_topic(group), dlq_topic(group)):
                await self.delete_topic(topic, cluster)
        return addrs

    async def set_message_request_mode(
        self,
        topic: str,
        group: str,
        mode: MessageRequestMode,
        pop_share_queue_num: int = 0,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """How ``group``'s push consumers that let the broker assign queues read ``topic``: PULL or
        POP (5.x mqadmin ``setConsumeMode``), on one broker or every master of a cluster;
        returns the brokers set. In POP mode, ``pop_share_queue_num`` > 0 has each member pop
        its share of queues and those of the next N members (else every member pops every queue).

        Raises:
            MQBrokerError: a broker refused (a retry topic, an unknown topic or group).
        """
        topic, group = self._ns(topic), self._ns(group)
        addrs = await self._brokers(cluster, broker_addr)
        api = self.instance.api
        await asyncio.gather(
            *(
                api.set_message_request_mode(a, topic, group, mode, pop_share_queue_num, _TIMEOUT_MS)
                for a in addrs
            )
        )
        return addrs

    async def message_request_modes(
        self, cluster: str | None = None
    ) -> dict[str, dict[str, SetMessageRequestModeRequestBody]]:
        """Every PULL/POP mode set on the masters (of the cluster), topic -> group -> mode, read
        concurrently (GET_ALL_MESSAGE_REQUEST_MODE); a topic and group not listed is read PULL.
        Where brokers disagree, the first broker by name wins."""
        masters = await self.master_addrs(cluster)
        api = self.instance.api
        tables = await asyncio.gather(
            *(api.get_all_message_request_mode(masters[n], _TIMEOUT_MS) for n in sorted(masters))
        )
        out: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}
        for table in tables:
            for topic, groups in table.items():
                for group, mode in groups.items():
                    out.setdefault(topic, {}).setdefault(group, mode)
        return out

    async def subscription_groups(self, cluster: str | None = None) -> dict[str, SubscriptionGroupConfig]:
        """Every consumer group's settings on the masters (of the cluster), by name; a group on
        several brokers is listed once, with the first broker's settings (Java
        ``getAllSubscriptionGroup`` on each broker, as rocketmq-dashboard lists groups)."""
        api = self.instance.api
        masters = await self.master_addrs(cluster)
        wrappers = await asyncio.gather(
            *(api.get_all_subscription_group(a, _TIMEOUT_MS) for _, a in sorted(masters.items()))
        )
        groups: dict[str, SubscriptionGroupConfig] = {}
        for wrapper in wrappers:
            for name, config in wrapper.subscription_group_table.items():
                groups.setdefault(name, config)
        return dict(sorted(groups.items()))

    async def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, *, offline: bool = False
    ) -> None:
        """Copy ``src_group``'s offsets of ``topic`` to ``dest_group`` on every broker of the topic
        (mqadmin ``cloneGroupOffset``)."""
        src_group, dest_group, topic = self._ns(src_group), self._ns(dest_group), self._ns(topic)
        masters = await self._topic_masters(topic)
        api = self.instance.api
        await asyncio.gather(
            *(
                api.clone_group_offset(a, src_group, dest_group, topic, offline, _TIMEOUT_MS)
                for a in masters.values()
            )
        )

    # -- ACL: the brokers' plain_acl.yml (mqadmin updateAclConfig, deleteAclConfig, ...) -----------

    async def create_and_update_plain_access_config(
        self,
        access_key: str,
        secret_key: str | None = None,
        *,
        white_remote_address: str | None = None,
        admin: bool = False,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: Sequence[str] = (),
        group_perms: Sequence[str] = (),
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Create an account or change it (fields left out keep their value; ``admin`` is always
        set) in the ACL file of one broker or of every master of a cluster (mqadmin
        ``updateAclConfig``); ``topic_perms`` like ``["topicA=PUB", "topicB=SUB|PUB"]``. Needs an
        admin account. Returns the broker addresses written."""
        header = CreateAccessConfigRequestHeader(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=white_remote_address,
            admin=admin,
            default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=",".join(topic_perms) or None,
            group_perms=",".join(group_perms) or None,
        )
        addrs = await self._brokers(cluster, broker_addr)
        api = self.instance.api
        await asyncio.gather(*(api.create_plain_access_config(a, header, _TIMEOUT_MS) for a in addrs))
        return addrs

    async def delete_plain_access_config(
        self, access_key: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Remove an account from the ACL file of one broker or of every master of a cluster
        (mqadmin ``deleteAclConfig``); returns the broker addresses written."""
        addrs = await self._brokers(cluster, broker_addr)
        api = self.instance.api
        await asyncio.gather(*(api.delete_plain_access_config(a, access_key, _TIMEOUT_MS) for a in addrs))
        return addrs

    async def update_global_white_addr_config(
        self,
        addresses: Sequence[str],
        *,
        acl_file_full_path: str | None = None,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Replace ``globalWhiteRemoteAddresses`` in the brokers' main ACL file (or the file
        ``acl_file_full_path``) (mqadmin ``updateGlobalWhiteAddr``); returns the brokers."""
        addrs = await self._brokers(cluster, broker_addr)
        api = self.instance.api
        text = ",".join(addresses)
        await asyncio.gather(
            *(api.update_global_white_addrs_config(a, text, acl_file_full_path, _TIMEOUT_MS) for a in addrs)
        )
        return addrs

    async def examine_broker_cluster_acl_version_info(self, broker_addr: str) -> ClusterAclVersionInfo:
        """A broker's ACL files and their data versions (mqadmin ``clusterAclConfigVersion``)."""
        header = await self.instance.api.get_broker_cluster_acl_info(broker_addr, _TIMEOUT_MS)
        files = json.loads(header.all_acl_file_version or "{}")
        return ClusterAclVersionInfo(
            broker_name=header.broker_name,
            broker_addr=header.broker_addr,
            cluster_name=header.cluster_name,
            acl_config_data_version=DataVersion.from_json(header.version),
            all_acl_config_data_version={
                path: DataVersion(timestamp=int(v.get("timestamp", 0)), counter=int(v.get("counter", 0)))
                for path, v in files.items()
            },
        )

    # -- ACL 2.0: users and ACLs (mqadmin createUser .. listAcl; Java 5.3 MQAdminExt) ---------------

    async def _each_broker(
        self, cluster: str | None, broker_addr: str | None, call: Callable[[str], Awaitable[object]]
    ) -> list[str]:
        addrs = await self._brokers(cluster, broker_addr)
        await asyncio.gather(*(call(a) for a in addrs))
        return addrs

    async def create_user(
        self,
        username: str,
        password: str,
        user_type: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Create a user (``user_type``: ``Super`` or ``Normal``, the default) on one broker or
        every master of a cluster (mqadmin ``createUser``); returns the brokers written. Only a
        super user may create a super user."""
        info = UserInfo(username=username, password=password, user_type=user_type)
        api = self.instance.api
        return await self._each_broker(cluster, broker_addr, lambda a: api.create_user(a, info, _TIMEOUT_MS))

    async def update_user(
        self,
        username: str,
        password: str | None = None,
        user_type: str | None = None,
        user_status: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Change a user's password, type or status (``enable``/``disable``); what is left out
        keeps its value (mqadmin ``updateUser``)."""
        info = UserInfo(username=username, password=password, user_type=user_type, user_status=user_status)
        api = self.instance.api
        return await self._each_broker(cluster, broker_addr, lambda a: api.update_user(a, info, _TIMEOUT_MS))

    async def delete_user(
        self, username: str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Delete a user and its ACL (mqadmin ``deleteUser``); deleting a missing user succeeds."""
        api = self.instance.api
        return await self._each_broker(
            cluster, broker_addr, lambda a: api.delete_user(a, username, _TIMEOUT_MS)
        )

    async def get_user(self, broker_addr: str, username: str) -> UserInfo | None:
        """A user of a broker, ``None`` when there is none (mqadmin ``getUser``)."""
        return await self.instance.api.get_user(broker_addr, username, _TIMEOUT_MS)

    async def list_user(self, broker_addr: str, name_filter: str | None = None) -> list[UserInfo]:
        """A broker's users whose name contains ``name_filter`` (mqadmin ``listUser``)."""
        return await self.instance.api.list_user(broker_addr, name_filter, _TIMEOUT_MS)

    async def create_acl(
        self,
        subject: str,
        resources: Sequence[str],
        actions: Sequence[str],
        decision: str,
        source_ips: Sequence[str] | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        update: bool = False,
    ) -> list[str]:
        """Give ``subject`` (``User:<name>``) an entry per resource (``Topic:orders``,
        ``Topic:orders*``, ``Group:*``, ``*``) with ``actions`` (``Pub``, ``Sub``, ``Create``,
        ``Update``, ``Delete``, ``Get``, ``List``, ``All``), ``decision`` (``Allow``/``Deny``) and
        ``source_ips`` (addresses or CIDRs); an entry for a resource already there is replaced
        (mqadmin ``createAcl``; ``update=True``: ``updateAcl``, which Java treats alike)."""
        info = AclInfo.single(subject, resources, actions, source_ips, decision)
        return await self.put_acl(info, cluster=cluster, broker_addr=broker_addr, update=update)

    async def put_acl(
        self,
        acl: AclInfo,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        update: bool = False,
    ) -> list[str]:
        """Send a whole ACL (any number of policies and entries) as AUTH_CREATE_ACL (or, with
        ``update``, AUTH_UPDATE_ACL) to one broker or every master of a cluster; returns the
        brokers written. The broker merges it into the subject's ACL."""
        api = self.instance.api
        call = api.update_acl if update else api.create_acl
        return await self._each_broker(cluster, broker_addr, lambda a: call(a, acl, _TIMEOUT_MS))

    async def delete_acl(
        self,
        subject: str,
        resource: str | None = None,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """Delete a subject's ACL, or only its entry for ``resource`` (mqadmin ``deleteAcl``)."""
        api = self.instance.api
        return await self._each_broker(
            cluster, broker_addr, lambda a: api.delete_acl(a, subject, resource, _TIMEOUT_MS)
        )

    async def get_acl(self, broker_addr: str, subject: str) -> AclInfo | None:
        """A subject's ACL on a broker, ``None`` when it has none (mqadmin ``getAcl``)."""
        return await self.instance.api.get_acl(broker_addr, subject, _TIMEOUT_MS)

    async def list_acl(
        self, broker_addr: str, subject_filter: str | None = None, resource_filter: str | None = None
    ) -> list[AclInfo]:
        """A broker's ACLs, filtered by subject and resource substrings (mqadmin ``listAcl``)."""
        return await self.instance.api.list_acl(broker_addr, subject_filter, resource_filter, _TIMEOUT_MS)

    async def broker_consume_stats(self, broker_addr: str, *, is_order: bool = False) -> ConsumeStatsList:
        """Every group's consume stats on a broker (mqadmin ``brokerConsumeStats``)."""
        return await self.instance.api.get_broker_consume_stats(broker_addr, is_order, _TIMEOUT_MS)

    async def create_and_update_topic_config(self, broker_addr: str, config: TopicConfig) -> None:
        """Write a topic's settings to one broker as given (Java ``createAndUpdateTopicConfig``:
        mqadmin ``updateTopicPerm`` keeps the route's queue numbers and system flag)."""
        config = replace(config, topic_name=self._ns(config.topic_name))
        await self.instance.api.create_topic(broker_addr, AUTO_CREATE_TOPIC_KEY_TOPIC, config, _TIMEOUT_MS)

    async def examine_subscription_group_config(
        self, broker_addr: str, group: str
    ) -> SubscriptionGroupConfig | None:
        """A consumer group's settings on one broker, None if it has none (mqadmin ``getConsumerConfig``)."""
        wrapper = await self.instance.api.get_all_subscription_group(broker_addr, _TIMEOUT_MS)
        return wrapper.subscription_group_table.get(self._ns(group))

    async def user_subscription_groups(self, broker_addr: str) -> SubscriptionGroupWrapper:
        """A broker's consumer groups, its own and its tools' left out (Java
        ``getUserSubscriptionGroup``, mqadmin ``exportMetadata``), in the order Java's client
        holds them."""
        wrapper = await self.instance.api.get_all_subscription_group(broker_addr, _TIMEOUT_MS)
        table = {
            name: wrapper.subscription_group_table[name]
            for name in _java_client_order(wrapper.subscription_group_table)
            if not name.startswith(_SYS_CONSUMER_GROUP_PREFIX) and name not in _ADMIN_SYSTEM_GROUPS
        }
        return SubscriptionGroupWrapper(subscription_group_table=table, data_version=wrapper.data_version)

    async def user_topic_configs(
        self, broker_addr: str, *, special_topic: bool = False
    ) -> TopicConfigSerializeWrapper:
        """A broker's topics without its system topics, and without retry and DLQ topics unless
        ``special_topic`` (Java ``getUserTopicConfig``, mqadmin ``exportMetadata``), in the order
        Java's client holds them."""
        api = self.instance.api
        wrapper = await api.get_all_topic_config(broker_addr, _TIMEOUT_MS)
        system = set((await api.get_system_topic_list_from_broker(broker_addr, _TIMEOUT_MS)).topic_list)
        table = {
            name: wrapper.topic_config_table[name]
            for name in _java_client_order(wrapper.topic_config_table)
            if name not in system
            and (special_topic or not name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)))
        }
        return TopicConfigSerializeWrapper(topic_config_table=table, data_version=wrapper.data_version)

    async def all_producer_info(self, broker_addr: str) -> ProducerTableInfo:
        """Every producer group's members on one broker (GET_ALL_PRODUCER_INFO, mqadmin ``producer``)."""
        return await self.instance.api.get_all_producer_info(broker_addr, _TIMEOUT_MS)

    async def query_consume_queue(
        self,
        broker_addr: str,
        topic: str,
        queue_id: int,
        index: int,
        count: int,
        consumer_group: str | None = None,
    ) -> QueryConsumeQueueResponseBody:
        """``count`` units of a consume queue from ``index`` (QUERY_CONSUME_QUEUE, mqadmin ``queryCq``)."""
        group = self._ns(consumer_group) if consumer_group else consumer_group
        return await self.instance.api.query_consume_queue(
            broker_addr, self._ns(topic), queue_id, index, count, group, _TIMEOUT_MS
        )

    async def cluster_broker_addrs(self, cluster: str | None = None) -> list[str]:
        """Every broker address, masters and slaves, of one cluster or of all (Java
        ``ClusterInfo.retrieveAllAddrByCluster``)."""
        info = await self.cluster_info()
        clusters = [cluster] if cluster else sorted(info.cluster_addr_table)
        addrs: list[str] = []
        for name in clusters:
            for broker_name in sorted(info.cluster_addr_table.get(name, ())):
                data = info.broker_addr_table.get(broker_name)
                if data is not None:
                    addrs.extend(addr for _, addr in sorted(data.broker_addrs.items()))
        return addrs

    async def clean_expired_consume_queue(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, bool]:
        """Have one broker, or every broker of a cluster (of all clusters), destroy the consume
        queues whose records are all gone (mqadmin ``cleanExpiredCQ``); broker -> succeeded."""
        return await self._on_each_broker(self.instance.api.clean_expired_consume_queue, cluster, broker_addr)

    async def clean_unused_topic(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, bool]:
        """Have brokers destroy the consume queues of topics they no longer have (mqadmin
        ``cleanUnusedTopic``); broker -> succeeded."""
        return await self._on_each_broker(self.instance.api.clean_unused_topic, cluster, broker_addr)

    async def delete_expired_commit_log(
        self, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, bool]:
        """Have brokers delete their expired commit-log files now (mqadmin
        ``deleteExpiredCommitLog``); broker -> succeeded."""
        return await self._on_each_broker(self.instance.api.delete_expired_commit_log, cluster, broker_addr)

    async def _on_each_broker(
        self,
        call: Callable[[str, int], Awaitable[bool]],
        cluster: str | None,
        broker_addr: str | None,
    ) -> dict[str, bool]:
        addrs = [broker_addr] if broker_addr else await self.cluster_broker_addrs(cluster)
        results = await asyncio.gather(*(call(a, _TIMEOUT_MS) for a in addrs))
        return dict(zip(addrs, results, strict=True))

    async def change_write_perm(self, broker_name: str, *, writable: bool) -> dict[str, int]:
        """Wipe (or add back) a broker's write permission on every name server (mqadmin
        ``wipeWritePerm``/``addWritePerm``); returns name server -> topics changed."""
        api = self.instance.api
        counts = await asyncio.gather(
            *(
                api.change_write_perm_of_broker(ns, broker_name, writable, _TIMEOUT_MS)
                for ns in api.name_server_address_list
            )
        )
        return dict(zip(api.name_server_address_list, counts, strict=True))

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Every name server's settings (mqadmin ``getNamesrvConfig``)."""
        api = self.instance.api
        configs = await asyncio.gather(
            *(api.get_namesrv_config(ns, _TIMEOUT_MS) for ns in api.name_server_address_list)
        )
        return dict(zip(api.name_server_address_list, configs, strict=True))

    async def update_namesrv_config(self, properties: dict[str, str]) -> None:
        """Change settings on every name server (mqadmin ``updateNamesrvConfig``)."""
        api = self.instance.api
        await asyncio.gather(
            *(api.update_namesrv_config(ns, properties, _TIMEOUT_MS) for ns in api.name_server_address_list)
        )

    async def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """Set a KV config item on every name server (mqadmin ``updateKvConfig``)."""
        api = self.instance.api
        await asyncio.gather(
            *(
                api.put_kv_config(ns, namespace, key, value, _TIMEOUT_MS)
                for ns in api.name_server_address_list
            )
        )

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """A KV config item from the first name server that has it, else None."""
        api = self.instance.api
        for ns in api.name_server_address_list:
            value = await api.get_kv_config(ns, namespace, key, _TIMEOUT_MS)
            if value is not None:
                return value
        return None

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """Delete a KV config item on every name server (mqadmin ``deleteKvConfig``)."""
        api = self.instance.api
        await asyncio.gather(
            *(api.delete_kv_config(ns, namespace, key, _TIMEOUT_MS) for ns in api.name_server_address_list)
        )

    async def topic_list(self) -> list[str]:
        """Every topic the name servers know (mqadmin ``topicList``), in the name server's order
        (Java's: its HashSet's)."""
        topics = (await self.instance.api.get_topic_list_from_name_server(self._api_timeout)).topic_list
        return list(dict.fromkeys(topics))

    async def topic_route(self, topic: str) -> TopicRouteData:
        """mqadmin ``topicRoute``; ``NoRouteError`` if the topic is unknown."""
        topic = self._ns(topic)
        route = await self.instance.api.get_topic_route_info_from_name_server(topic, self._api_timeout)
        if route is None:
            raise NoRouteError(topic)
        return route

    async def _topic_masters(self, topic: str) -> dict[str, str]:
        route = await self.topic_route(topic)
        return {
            bd.broker_name: bd.broker_addrs[MASTER_ID]
            for bd in route.broker_datas
            if MASTER_ID in bd.broker_addrs
        }

    async def topic_status(self, topic: str) -> TopicStatsTable:
        """Min/max offset and last update of each queue (mqadmin ``topicStatus``)."""
        topic = self._ns(topic)
        api = self.instance.api
        masters = await self._topic_masters(topic)
        tables = await asyncio.gather(
            *(api.get_topic_stats_info(a, topic, _TIMEOUT_MS) for a in masters.values())
        )
        merged = {}
        for table in tables:
            merged.update(table.offset_table)
        return TopicStatsTable(offset_table=dict(sorted(merged.items())))

    # -- consumer groups ----------------------------------------------------------------------------

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """Broker and consumer offset of every queue the group consumes (mqadmin
        ``consumerProgress``); ``compute_total_diff()`` is the lag."""
        group, topic = self._ns(group), self._ns(topic) if topic else topic
        api = self.instance.api
        masters = await self._topic_masters(topic if topic else retry_topic(group))
        results = await asyncio.gather(
            *(api.get_consume_stats(a, group, topic, _TIMEOUT_MS) for a in masters.values())
        )
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for stats in results:
            table.update(stats.offset_table)
            tps += stats.consume_tps
        return ConsumeStats(offset_table=dict(sorted(table.items())), consume_tps=tps)

    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """The group's online clients and subscriptions (mqadmin ``consumerConnection``), from
        ``broker_addr`` or the first master of the group's retry topic that answers."""
        group = self._ns(group)
        api = self.instance.api
        if broker_addr:
            return await api.get_consumer_connection_list(broker_addr, group, _TIMEOUT_MS)
        return await self._first_answer(
            retry_topic(group), lambda addr: api.get_consumer_connection_list(addr, group, _TIMEOUT_MS)
        )

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """The producers of ``group`` on a broker serving ``topic`` (mqadmin ``producerConnection``)."""
        group, topic = self._ns(group), self._ns(topic)
        api = self.instance.api
        return await self._first_answer(
            topic, lambda addr: api.get_producer_connection_list(addr, group, _TIMEOUT_MS)
        )

    async def _first_answer(self, topic: str, ask: Callable[[str], Awaitable[_T]]) -> _T:
        """``ask`` the masters of ``topic`` in turn until one answers (not with an error)."""
        masters = await self._topic_masters(topic)
        last: MQClientError | None = None
        for addr in masters.values():
            try:
                return await ask(addr)
            except MQBrokerError as exc:
                last = exc
        raise last if last is not None else NoRouteError(topic)

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move the group's offsets of ``topic`` to the first message at/after ``timestamp``
        (epoch ms; -1: the end); online consumers restart there (mqadmin ``resetOffsetByTime``)."""
        group, topic = self._ns(group), self._ns(topic)
        api = self.instance.api
        masters = await self._topic_masters(topic)
        results = await asyncio.gather(
            *(
                api.invoke_broker_to_reset_offset(a, topic, group, timestamp, force, _TIMEOUT_MS)
                for a in masters.values()
            )
        )
        merged: dict[MessageQueue, int] = {}
        for table in results:
            merged.update(table)
        return dict(sorted(merged.items()))

    async def update_consume_offsets(self, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Store ``group``'s consumed offsets on each queue's master (Java
        ``DefaultMQAdminExt.updateConsumeOffset``), without joining the group: monitoring
        (``consume_stats``) then shows the lag of a consumer that keeps its offsets elsewhere."""
        group = self._ns(group)
        offsets = {self.config.queue_with_namespace(mq): offset for mq, offset in offsets.items()}
        masters: dict[str, dict[str, str]] = {}
        for topic in sorted({mq.topic for mq in offsets}):
            masters[topic] = await self._topic_masters(topic)
        calls = []
        for mq, offset in offsets.items():
            addr = masters[mq.topic].get(mq.broker_name)
            if addr is None:
                raise MQClientError(f"The broker[{mq.broker_name}] of {mq} has no master")
            calls.append(self.instance.api.update_consumer_offset(addr, group, mq, offset, _TIMEOUT_MS))
        await asyncio.gather(*calls)

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> ConsumerRunningInfo:
        """A consumer's own view: settings, queues, statistics (through a broker)."""
        group = self._ns(group)
        addr = next(iter((await self._topic_masters(retry_topic(group))).values()), None)
        if addr is None:
            raise NoRouteError(retry_topic(group))
        return await self.instance.api.get_consumer_running_info(addr, group, client_id, jstack, _TIMEOUT_MS)

    async def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> ConsumeMessageDirectlyResult:
        """Have one consumer consume one stored message now (its listener runs). ``msg_id`` is
        an offset id, or with ``topic`` also a client id (UNIQ_KEY) looked up in that topic (Java
        ``consumeMessageDirectly(group, clientId, topic, msgId)``: rocketmq-dashboard's resend of
        a dead-letter message, given its ``%DLQ%`` topic)."""
        group = self._ns(group)
        if topic is not None:
            msg_id = (await self.view_message(msg_id, topic)).msg_id
        try:
            broker = decode_offset_msg_id(msg_id)
        except ProtocolError as exc:
            raise ValidationError(f"{msg_id!r} is not an offset message id: {exc}") from exc
        addr = f"{broker.host}:{broker.port}"
        return await self.instance.api.consume_message_directly(
            addr, group, client_id, msg_id, None, _TIMEOUT_MS
        )

    # -- messages -----------------------------------------------------------------------------------

    async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """A message by its offset id (the broker's), or by its client id (UNIQ_KEY) given
        the ``topic`` (mqadmin ``queryMsgById``)."""
        try:
            where = decode_offset_msg_id(msg_id)
        except ProtocolError:
            where = None
        if where is not None:
            try:
                return await self.instance.api.view_message(
                    f"{where.host}:{where.port}", where.commit_log_offset, _TIMEOUT_MS
                )
            except MQClientError:
                if topic is None:
                    raise
        if topic is None:
            raise ValidationError(f"{msg_id!r} is not an offset message id; give the topic to look it up")
        found = [m for m in await self.query_message(topic, msg_id) if m.unique_key == msg_id]
        if not found:
            raise MQClientError(f"message {msg_id} not found in topic {topic}")
        return found[0]

    async def query_message(
        self, topic: str, key: str, max_num: int = 64, begin: int = 0, end: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS (or UNIQ_KEY) contain ``key``, stored in
        [begin, end] epoch ms (mqadmin ``queryMsgByKey``)."""
        topic = self._ns(topic)
        api = self.instance.api
        end = end if end is not None else int(time.time() * 1000) + 60_000
        masters = await self._topic_masters(topic)
        results = await asyncio.gather(
            *(api.query_message(a, topic, key, max_num, begin, end, _TIMEOUT_MS) for a in masters.values())
        )
        found = [m for batch in results for m in batch if key in m.key_list or m.unique_key == key]
        found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))
        return found[:max_num]

    async def query_msg_trace_by_id(self, msg_id: str, trace_topic: str | None = None) -> list[TraceView]:
        """A message's trace records (its send, each group's consumption) from the trace topic
        (mqadmin ``queryMsgTraceById``), in the order they were stored."""
        traces = await self.query_message(trace_topic or RMQ_SYS_TRACE_TOPIC, msg_id, 64, 0)
        return [
            view
            for trace in traces
            for view in trace_views(msg_id, trace.body.decode("utf-8", "replace"), trace.born_host.host)
        ]

    async def message_track_detail(self, msg: MessageExt) -> list[MessageTrack]:
        """For each group consuming the message's topic, whether it consumed the message (Java
        ``DefaultMQAdminExtImpl.messageTrackDetail``, groups in its HashSet's order)."""
        tracks = []
        brokers: dict[str, BrokerData] | None = None  # the cluster's, read once if a group needs it
        for group in java_hash_order(await self.examine_topic_consume_by_who(msg.topic), java_key_hash):
            track, desc = TrackType.UNKNOWN, None
            try:
                conn = await self.consumer_connection(group)
                if conn.consume_type is ConsumeType.CONSUME_ACTIVELY:
                    track = TrackType.PULL
                elif conn.consume_type is ConsumeType.CONSUME_PASSIVELY:
                    track = TrackType.NOT_CONSUME_YET
                    if brokers is None:
                        brokers = dict((await self.cluster_info()).broker_addr_table)
                    if await self._consumed(msg, group, brokers):
                        track = TrackType.CONSUMED
                        sub = conn.subscription_table.get(msg.topic)
                        if (
                            sub is not None
                            and sub.tags_set
                            and "*" not in sub.tags_set
                            and msg.tags not in sub.tags_set
                        ):
                            track = TrackType.CONSUMED_BUT_FILTERED
            except MQBrokerError as exc:
                if exc.response_code == ResponseCode.CONSUMER_NOT_ONLINE:
                    track = TrackType.NOT_ONLINE
                desc = f"CODE:{exc.response_code} DESC:{exc.remark}"
            except MQClientError as exc:
                desc = f"{type(exc).__name__}: {exc}"
            tracks.append(MessageTrack(group, track, desc))
        return tracks

    async def _consumed(self, msg: MessageExt, group: str, brokers: dict[str, BrokerData]) -> bool:
        """Java ``DefaultMQAdminExtImpl.consumed``: the group's offset of the message's queue, on
        the master that stored it, is past the message."""
        stats = await self.consume_stats(group)
        for mq, offsets in stats.offset_table.items():
            if mq.topic != msg.topic or mq.queue_id != msg.queue_id:
                continue
            data = brokers.get(mq.broker_name)
            master = data.broker_addrs.get(MASTER_ID) if data is not None else None
            if master == str(msg.store_host) and offsets.consumer_offset > msg.queue_offset:
                return True
        return False

    async def examine_topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups that consume ``topic`` on any of its masters (mqadmin ``topicStatus`` helpers)."""
        topic = self._ns(topic)
        api = self.instance.api
        masters = await self._topic_masters(topic)
        groups: set[str] = set()
        for result in await asyncio.gather(
            *(api.query_topic_consume_by_who(a, topic, _TIMEOUT_MS) for a in masters.values())
        ):
            groups.update(result)
        return sorted(groups)

    async def view_broker_stats_data(
        self, broker_addr: str, stats_name: str, stats_key: str
    ) -> BrokerStatsData:
        """One broker statistic over the last minute, hour and day: ``TOPIC_PUT_NUMS`` by topic,
        ``GROUP_GET_NUMS`` by ``topic@group`` (mqadmin ``statsAll``). Raises ``MQBrokerError``
        (SYSTEM_ERROR) when the broker has never counted it."""
        return await self.instance.api.view_broker_stats_data(broker_addr, stats_name, stats_key, _TIMEOUT_MS)

    async def queue_offsets(self, mq: MessageQueue) -> tuple[int, int]:
        """(min, max) offset of ``mq``."""
        mq = self.config.queue_with_namespace(mq)
        instance = self.instance
        await instance.update_topic_route_info_from_name_server(mq.topic)
        return await instance.min_offset(mq), await instance.max_offset(mq)
