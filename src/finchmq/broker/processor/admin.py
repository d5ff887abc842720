"""Operator and client admin requests (Java ``AdminBrokerProcessor``): topics, groups, offsets,
statistics, broker config, queue locks, and the calls the broker forwards to a consumer."""

from __future__ import annotations

import json
import logging
import time

from finchmq.broker.acl import AclConfigError, PlainAccessConfig
from finchmq.common import config_to_properties, format_properties, parse_properties
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.attributes import (
    TOPIC_MESSAGE_TYPE_ATTRIBUTE,
    TopicAttributeError,
    TopicMessageType,
    alter_topic_attributes,
    parse_attribute_modification,
)
from finchmq.protocol.bodies import (
    BrokerStatsData,
    BrokerStatsItem,
    Connection,
    ConsumeQueueData,
    ConsumerConnection,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicFilterType,
    TopicList,
    TopicOffset,
    TopicStatsTable,
    UnlockBatchRequestBody,
)
from finchmq.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateAccessConfigRequestHeader,
    CreateTopicRequestHeader,
    DeleteAccessConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from finchmq.protocol.message import MessageQueue
from finchmq.protocol.msg_id import decode_offset_msg_id
from finchmq.protocol.topics import is_system_topic, validate_topic
from finchmq.remoting import ExecutorName, RemotingContext, RemotingError, handles

from ._base import BrokerProcessor

__all__ = ["AdminBrokerProcessor"]

log = logging.getLogger(__name__)


class AdminBrokerProcessor(BrokerProcessor):
    """The broker's default processor: every code not routed elsewhere lands here."""

    executor = ExecutorName.ADMIN

    # -- topics -----------------------------------------------------------------------------

    @handles(RequestCode.UPDATE_AND_CREATE_TOPIC)
    def update_and_create_topic(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        problem = validate_topic(header.topic)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem)
        if header.topic == c.config.broker_cluster_name:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"the topic[{header.topic}] is conflict with system reserved words.",
            )
        try:
            filter_type = TopicFilterType[header.topic_filter_type]
        except KeyError:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"unknown topicFilterType {header.topic_filter_type!r}"
            )
        if header.read_queue_nums <= 0 or header.write_queue_nums <= 0:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "readQueueNums and writeQueueNums must be > 0"
            )
        existing = c.topic_config_manager.select_topic_config(header.topic)
        try:
            modification = parse_attribute_modification(header.attributes)
            if (
                not c.config.enable_mixed_message_type
                and modification.get("+" + TOPIC_MESSAGE_TYPE_ATTRIBUTE.name) == TopicMessageType.MIXED
            ):
                return request.make_response(
                    ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."
                )
            current = (existing.attributes if existing is not None else None) or {}
            attributes = alter_topic_attributes(existing is None, current, modification)
        except TopicAttributeError as exc:  # Java: the catch-all's SYSTEM_ERROR with the message
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        c.topic_config_manager.update_topic_config(
            TopicConfig(
                topic_name=header.topic,
                read_queue_nums=header.read_queue_nums,
                write_queue_nums=header.write_queue_nums,
                perm=header.perm,
                topic_filter_type=filter_type,
                topic_sys_flag=header.topic_sys_flag or 0,
                order=header.order,
                attributes=attributes or None,  # none: absent, as in 4.9.8's topics.json
            )
        )
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.DELETE_TOPIC_IN_BROKER)
    def delete_topic(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        c.topic_config_manager.delete_topic_config(header.topic)
        c.consumer_offset_manager.remove_topic(header.topic)
        c.store.delete_topics([header.topic])
        if c.timer_message_store is not None:  # 5.x: its timer count goes too
            c.timer_message_store.timer_metrics.remove_timing_count(header.topic)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_TOPIC_CONFIG)
    def get_all_topic_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self.context.topic_config_manager.encode())

    @handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    def get_system_topic_list(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        topics = [t for t in self.context.topic_config_manager.topic_names() if is_system_topic(t)]
        return request.make_response(ResponseCode.SUCCESS, body=TopicList(topic_list=tuple(topics)).to_json())

    @handles(RequestCode.GET_TOPIC_STATS_INFO)
    def get_topic_stats_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields)
        topic_config = c.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        table: dict[MessageQueue, TopicOffset] = {}
        for queue_id in range(topic_config.write_queue_nums):
            max_offset = max(c.store.get_max_offset_in_queue(header.topic, queue_id), 0)
            min_offset = max(c.store.get_min_offset_in_queue(header.topic, queue_id), 0)
            last = (
                c.store.get_message_store_timestamp(header.topic, queue_id, max_offset - 1)
                if max_offset > 0
                else 0
            )
            table[MessageQueue(header.topic, c.config.broker_name, queue_id)] = TopicOffset(
                min_offset=min_offset, max_offset=max_offset, last_update_timestamp=max(last, 0)
            )
        return request.make_response(ResponseCode.SUCCESS, body=TopicStatsTable(offset_table=table).to_json())

    # -- offsets and times ------------------------------------------------------------------

    @handles(RequestCode.GET_MAX_OFFSET)
    def get_max_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.context.store.get_max_offset_in_queue(header.topic, header.queue_id)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=GetMaxOffsetResponseHeader(offset=max(offset, 0)).to_ext_fields()
        )

    @handles(RequestCode.GET_MIN_OFFSET)
    def get_min_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.context.store.get_min_offset_in_queue(header.topic, header.queue_id)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=GetMinOffsetResponseHeader(offset=max(offset, 0)).to_ext_fields()
        )

    @handles(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)
    def search_offset_by_timestamp(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.context.store.get_offset_in_queue_by_time(
            header.topic, header.queue_id, header.timestamp
        )
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=SearchOffsetResponseHeader(offset=offset).to_ext_fields()
        )

    @handles(RequestCode.GET_EARLIEST_MSG_STORETIME)
    def get_earliest_msg_storetime(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields)
        timestamp = self.context.store.get_earliest_message_time(header.topic, header.queue_id)
        return request.make_response(
            ResponseCode.SUCCESS,
            ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp=max(timestamp, 0)).to_ext_fields(),
        )

    @handles(RequestCode.GET_ALL_CONSUMER_OFFSET)
    def get_all_consumer_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        table = self.context.consumer_offset_manager.offset_table
        body = ConsumerOffsetSerializeWrapper(offset_table={k: dict(v) for k, v in table.items()}).to_json()
        return request.make_response(ResponseCode.SUCCESS, body=body)

    @handles(RequestCode.GET_TIMER_CHECK_POINT)
    def get_timer_check_point(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """5.x: the timer checkpoint's 56 bytes (a 5.x slave syncs its timer from them)."""
        timer = self.context.timer_message_store
        if timer is None:
            log.error(
                "AdminBrokerProcessor#getTimerCheckPoint: checkpoint is null, caller=%s", ctx.remote_addr
            )
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        return request.make_response(ResponseCode.SUCCESS, body=timer.checkpoint_data())

    @handles(RequestCode.GET_TIMER_METRICS)
    def get_timer_metrics(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """5.x: the timer's waiting messages per topic (``config/timermetrics``'s JSON)."""
        timer = self.context.timer_message_store
        if timer is None:
            log.error("The timer message store is null, client: %s", ctx.remote_addr)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        return request.make_response(ResponseCode.SUCCESS, body=timer.timer_metrics.encode())

    @handles(RequestCode.GET_ALL_DELAY_OFFSET)
    def get_all_delay_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.SUCCESS, body=self.context.schedule_message_service.offsets.encode()
        )

    # -- consumer groups --------------------------------------------------------------------

    @handles(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
    def update_and_create_subscription_group(
        self, ctx: RemotingContext, request: RemotingCommand
    ) -> RemotingCommand:
        config = SubscriptionGroupConfig.from_json(request.body)
        if not config.group_name:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "subscription group config has no groupName"
            )
        self.context.subscription_group_manager.update_subscription_group_config(config)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    def get_all_subscription_group(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.SUCCESS, body=self.context.subscription_group_manager.encode()
        )

    @handles(RequestCode.DELETE_SUBSCRIPTIONGROUP)
    def delete_subscription_group(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        c = self.context
        c.subscription_group_manager.delete_subscription_group_config(header.group_name)
        if request.ext_fields.get("cleanOffset", "").lower() == "true":
            c.consumer_offset_manager.remove_offsets(header.group_name)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_CONSUMER_CONNECTION_LIST)
    def get_consumer_connection_list(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        group = self.context.consumer_manager.get(header.consumer_group)
        if group is None:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{header.consumer_group}] not online"
            )
        body = ConsumerConnection(
            connection_set=tuple(
                Connection(
                    client_id=i.client_id, client_addr=i.client_addr, language=i.language, version=i.version
                )
                for i in group.channels.values()
            ),
            subscription_table=dict(group.subscriptions),
            consume_type=group.consume_type,
            message_model=group.message_model,
            consume_from_where=group.consume_from_where,
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.GET_PRODUCER_CONNECTION_LIST)
    def get_producer_connection_list(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        members = self.context.producer_manager.groups.get(header.producer_group)
        if not members:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producer_group}] not exist"
            )
        body = ProducerConnection(
            connection_set=tuple(
                Connection(
                    client_id=i.client_id, client_addr=i.client_addr, language=i.language, version=i.version
                )
                for i in members.values()
            )
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.GET_ALL_PRODUCER_INFO)
    def get_all_producer_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Every producer group's members (Java ``ProducerManager.getProducerTable``, mqadmin
        ``producer``)."""
        table = ProducerTableInfo(
            data={
                group: tuple(
                    ProducerInfo(
                        client_id=i.client_id,
                        remote_ip=f"/{i.client_addr}",  # Netty's SocketAddress.toString
                        language=i.language,
                        version=i.version,
                        last_update_timestamp=i.last_update_timestamp,
                    )
                    for i in members.values()
                )
                for group, members in self.context.producer_manager.groups.items()
            }
        )
        return request.make_response(ResponseCode.SUCCESS, body=table.to_json())

    def _consume_stats(self, group: str, topic: str, queue_nums: int) -> ConsumeStats:
        c = self.context
        table: dict[MessageQueue, OffsetWrapper] = {}
        for queue_id in range(queue_nums):
            broker_offset = max(c.store.get_max_offset_in_queue(topic, queue_id), 0)
            consumer_offset = max(c.consumer_offset_manager.query_offset(group, topic, queue_id), 0)
            last = (
                c.store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
                if consumer_offset > 0
                else 0
            )
            table[MessageQueue(topic, c.config.broker_name, queue_id)] = OffsetWrapper(
                broker_offset=broker_offset, consumer_offset=consumer_offset, last_timestamp=max(last, 0)
            )
        _, get_tps = c.stats.tps()
        return ConsumeStats(offset_table=table, consume_tps=get_tps)

    @handles(RequestCode.GET_CONSUME_STATS)
    def get_consume_stats(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        topics = (
            [header.topic]
            if header.topic
            else sorted(c.consumer_offset_manager.which_topics_by_consumer(header.consumer_group))
        )
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for topic in topics:
            topic_config = c.topic_config_manager.select_topic_config(topic)
            if topic_config is not None:
                stats = self._consume_stats(header.consumer_group, topic, topic_config.read_queue_nums)
                table.update(stats.offset_table)
                tps = stats.consume_tps
        body = ConsumeStats(offset_table=table, consume_tps=tps)
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.CLONE_GROUP_OFFSET)
    def clone_group_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """mqadmin ``cloneGroupOffset``: copy a group's offsets (of one topic, or of all it has) to
        another group; unless ``offline``, only topics the online source group subscribes to."""
        c = self.context
        header = CloneGroupOffsetRequestHeader.from_ext_fields(request.ext_fields)
        topics = (
            {header.topic}
            if header.topic
            else c.consumer_offset_manager.which_topics_by_consumer(header.src_group)
        )
        group_info = c.consumer_manager.get(header.src_group)
        for topic in sorted(topics):
            if c.topic_config_manager.select_topic_config(topic) is None:
                log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
                continue
            online = not header.offline and group_info is not None and bool(group_info.subscriptions)
            if online and group_info is not None and topic not in group_info.subscriptions:
                continue  # the online source group no longer subscribes to it
            c.consumer_offset_manager.clone_offset(header.src_group, header.dest_group, topic)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_BROKER_CONSUME_STATS)
    def get_broker_consume_stats(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """mqadmin ``brokerConsumeStats``: every group's consume stats on this broker (Java
        ``fetchAllConsumeStatsInBroker``; ``isOrder`` keeps only order topics)."""
        c = self.context
        header = GetConsumeStatsInBrokerHeader.from_ext_fields(request.ext_fields)
        per_group: list[dict[str, tuple[ConsumeStats, ...]]] = []
        total_diff = 0
        for group in list(c.subscription_group_manager.table):
            stats_list = []
            for topic in sorted(c.consumer_offset_manager.which_topics_by_consumer(group)):
                topic_config = c.topic_config_manager.select_topic_config(topic)
                if topic_config is None or (header.is_order and not topic_config.order):
                    continue
                group_info = c.consumer_manager.get(group)
                if (
                    group_info is not None
                    and group_info.subscriptions
                    and topic not in group_info.subscriptions
                ):
                    continue  # Java: the online group no longer subscribes to it
                stats = self._consume_stats(group, topic, topic_config.write_queue_nums)
                total_diff += stats.compute_total_diff()
                stats_list.append(stats)
            per_group.append({group: tuple(stats_list)})
        body = ConsumeStatsList(
            consume_stats_list=tuple(per_group), broker_addr=c.broker_addr, total_diff=total_diff
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO)
    def query_topic_consume_by_who(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields)
        c = self.context
        groups = c.consumer_manager.query_topic_consume_by_who(
            header.topic
        ) | c.consumer_offset_manager.which_groups_by_topic(header.topic)
        return request.make_response(
            ResponseCode.SUCCESS, body=GroupList(group_list=tuple(sorted(groups))).to_json()
        )

    @handles(RequestCode.VIEW_BROKER_STATS_DATA)
    def view_broker_stats_data(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """One stats item (``TOPIC_PUT_NUMS`` by topic, ``GROUP_GET_NUMS`` by ``topic@group``...)
        over the last minute, hour and day (``mqadmin statsAll``)."""
        header = ViewBrokerStatsDataRequestHeader.from_ext_fields(request.ext_fields)
        item = self.context.stats.stats_item(header.stats_name, header.stats_key)
        if item is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
            )
        minute, hour, day = item.minute(), item.hour(), item.day()
        body = BrokerStatsData(
            stats_minute=BrokerStatsItem(sum=minute.sum, tps=minute.tps, avgpt=minute.avgpt),
            stats_hour=BrokerStatsItem(sum=hour.sum, tps=hour.tps, avgpt=hour.avgpt),
            stats_day=BrokerStatsItem(sum=day.sum, tps=day.tps, avgpt=day.avgpt),
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    @handles(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)
    def reset_offset(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET: compute the offsets for a time, tell the group's clients."""
        header = ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        c = self.context
        topic_config = c.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"[reset-offset] topic {header.topic} not exist"
            )
        offsets: dict[MessageQueue, int] = {}
        for queue_id in range(topic_config.write_queue_nums):
            if header.timestamp == -1:
                offset = c.store.get_max_offset_in_queue(header.topic, queue_id)
            else:
                offset = c.store.get_offset_in_queue_by_time(header.topic, queue_id, header.timestamp)
            current = c.consumer_offset_manager.query_offset(header.group, header.topic, queue_id)
            if header.is_force or current < 0 or offset < current:
                offsets[MessageQueue(header.topic, c.config.broker_name, queue_id)] = offset
        for mq, offset in offsets.items():
            c.consumer_offset_manager.commit_offset(
                ctx.remote_addr, header.group, mq.topic, mq.queue_id, offset
            )
        group = c.consumer_manager.get(header.group)
        if group is not None:
            c.broker2client.reset_offset_on_clients(group, header, offsets)
        return request.make_response(
            ResponseCode.SUCCESS, body=ResetOffsetBody(offset_table=offsets).to_json()
        )

    @handles(RequestCode.LOCK_BATCH_MQ)
    def lock_batch_mq(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(request.body)
        locked = self.context.rebalance_lock_manager.try_lock_batch(
            body.consumer_group, body.mq_set, body.client_id
        )
        return request.make_response(
            ResponseCode.SUCCESS, body=LockBatchResponseBody(lock_ok_mq_set=tuple(sorted(locked))).to_json()
        )

    @handles(RequestCode.UNLOCK_BATCH_MQ)
    def unlock_batch_mq(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(request.body)
        self.context.rebalance_lock_manager.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(ResponseCode.SUCCESS)

    # -- broker -----------------------------------------------------------------------------

    @handles(RequestCode.GET_BROKER_CONFIG)
    def get_broker_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        values = {**config_to_properties(c.store.config), **config_to_properties(c.config)}
        header = GetBrokerConfigResponseHeader(version=c.config_data_version.to_json().decode())
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields=header.to_ext_fields(), body=format_properties(values).encode()
        )

    @handles(RequestCode.UPDATE_BROKER_CONFIG)
    async def update_broker_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"))
            unknown = await self.context.update_config(props)
        except (UnicodeDecodeError, ValueError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"update broker config failed: {exc}")
        if unknown:
            return request.make_response(
                ResponseCode.SUCCESS, f"ignored unknown keys: {', '.join(sorted(unknown))}"
            )
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_BROKER_RUNTIME_INFO)
    def get_broker_runtime_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.SUCCESS, body=KVTable(table=self.context.runtime_info()).to_json()
        )

    @handles(RequestCode.TRIGGER_DELETE_FILES, RequestCode.DELETE_EXPIRED_COMMITLOG)
    def trigger_delete_files(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Delete the expired commit-log segments now (Java ``executeDeleteFilesManually``,
        mqadmin ``deleteExpiredCommitLog``), the consume queues and index files they cover too."""
        log.warning("invoke deleteExpiredCommitLog start.")
        deleted = self.context.store.clean_once(manual=True)
        log.warning("invoke deleteExpiredCommitLog end: %d commit-log segment(s) deleted", deleted)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
    def clean_expired_consume_queue(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Destroy the consume queues whose records are all gone from the commit log (mqadmin
        ``cleanExpiredCQ``)."""
        log.warning("invoke cleanExpiredConsumeQueue start.")
        destroyed = self.context.store.clean_expired_consumer_queue()
        log.warning("invoke cleanExpiredConsumeQueue end: %d consume queue(s) destroyed", destroyed)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.CLEAN_UNUSED_TOPIC)
    def clean_unused_topic(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Destroy the consume queues of topics the broker no longer has (mqadmin ``cleanUnusedTopic``)."""
        log.warning("invoke cleanUnusedTopic start.")
        c = self.context
        destroyed = c.store.clean_unused_topic(c.topic_config_manager.topic_names())
        log.warning("invoke cleanUnusedTopic end: %d consume queue(s) destroyed", destroyed)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.QUERY_CONSUME_QUEUE)
    def query_consume_queue(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """``count`` units of a consume queue from ``index``, its index range, and (given a
        group) the group's subscription of the topic (Java ``queryConsumeQueue``, mqadmin
        ``queryCq``). The filter data is null: finchmq keeps no ``ConsumerFilterData`` (its
        SQL92 filter reads the stored properties) and no consume-queue extension, so ``eval``,
        ``bitMap`` and ``extendDataJson`` stay unset, as Java leaves them for plain units."""
        header = QueryConsumeQueueRequestHeader.from_ext_fields(request.ext_fields)
        c = self.context
        cq = c.store.get_consume_queue(header.topic, header.queue_id)
        if cq is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"{header.queue_id}@{header.topic} is not exist!"
            )
        subscription = None
        filter_data = None
        if header.consumer_group is not None:
            subscription = c.consumer_manager.find_subscription(header.consumer_group, header.topic)
            filter_data = (
                f"{header.consumer_group}@{header.topic} is not online!" if subscription is None else "null"
            )
        units = cq.get_units(header.index, header.count)
        if units is None:
            return request.make_response(
                ResponseCode.SUCCESS,
                f"Index {header.index} of {header.queue_id}@{header.topic} is not exist!",
            )
        body = QueryConsumeQueueResponseBody(
            subscription_data=subscription,
            filter_data=filter_data,
            queue_data=tuple(
                ConsumeQueueData(physic_offset=o, physic_size=n, tags_code=t) for o, n, t in units
            ),
            max_queue_index=cq.get_max_offset_in_queue(),
            min_queue_index=cq.get_min_offset_in_queue(),
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    # -- ACL (Java's ACL admin codes; the ACL check lets only admin accounts call them) ------

    _ACL_OFF = "ACL is not enabled on this broker (aclEnable=false)"

    @handles(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG)
    async def update_and_create_acl_config(
        self, ctx: RemotingContext, request: RemotingCommand
    ) -> RemotingCommand:
        acl = self.context.acl
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if acl is None:
            return request.make_response(failed, self._ACL_OFF)
        header = CreateAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        config = PlainAccessConfig(
            access_key=header.access_key,
            secret_key=header.secret_key or "",
            white_remote_address=header.white_remote_address,
            admin=header.admin,
            default_topic_perm=header.default_topic_perm,
            default_group_perm=header.default_group_perm,
            topic_perms=tuple(p for p in (header.topic_perms or "").split(",") if p),
            group_perms=tuple(p for p in (header.group_perms or "").split(",") if p),
        )
        try:
            await acl.update_access_config(config)
        except (AclConfigError, OSError) as exc:
            log.warning("UPDATE_AND_CREATE_ACL_CONFIG of %s failed: %s", header.access_key, exc)
            return request.make_response(failed, str(exc))
        log.info("ACL account %s created or updated by %s", header.access_key, ctx.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.DELETE_ACL_CONFIG)
    async def delete_acl_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        acl = self.context.acl
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        if acl is None:
            return request.make_response(failed, self._ACL_OFF)
        header = DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        try:
            deleted = await acl.delete_access_config(header.access_key)
        except (AclConfigError, OSError) as exc:
            return request.make_response(failed, str(exc))
        if not deleted:  # Java's wording
            return request.make_response(
                failed,
                f"The accesskey[{header.access_key}] corresponding to accessConfig has been deleted failed.",
            )
        log.info("ACL account %s deleted by %s", header.access_key, ctx.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
    async def update_global_white_addrs_config(
        self, ctx: RemotingContext, request: RemotingCommand
    ) -> RemotingCommand:
        acl = self.context.acl
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if acl is None:
            return request.make_response(failed, self._ACL_OFF)
        header = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(request.ext_fields)
        addresses = [a.strip() for a in header.global_white_addrs.split(",") if a.strip()]
        try:
            await acl.update_global_white_addrs(addresses, header.acl_file_full_path)
        except (AclConfigError, OSError) as exc:
            return request.make_response(failed, str(exc))
        log.info("ACL global white addresses set to %s by %s", addresses, ctx.remote_addr)
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
    def get_broker_cluster_acl_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        if c.acl is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, self._ACL_OFF)
        versions = {path: json.loads(v.to_json()) for path, v in c.acl.data_versions().items()}
        header = GetBrokerAclConfigResponseHeader(
            version=c.acl.main_data_version().to_json().decode(),
            all_acl_file_version=json.dumps(versions, separators=(",", ":")),
            broker_name=c.config.broker_name,
            broker_addr=c.broker_addr,
            cluster_name=c.config.broker_cluster_name,
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields=header.to_ext_fields())

    # -- forwarded to a consumer ------------------------------------------------------------

    @handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
    async def get_consumer_running_info(
        self, ctx: RemotingContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        return await self._call_consumer(request, header.consumer_group, header.client_id)

    @handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
    async def consume_message_directly(
        self, ctx: RemotingContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        if not header.msg_id or not header.client_id:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "msgId and clientId are required")
        try:
            offset = decode_offset_msg_id(header.msg_id).commit_log_offset
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad msgId {header.msg_id!r}: {exc}")
        view = self.context.store.select_one_message_by_offset(offset)
        if view is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"no message with msgId {header.msg_id}")
        with view:
            body = bytes(view)
        forwarded = RemotingCommand.request(request.code, dict(request.ext_fields), body)
        return await self._call_consumer(forwarded, header.consumer_group, header.client_id, original=request)

    async def _call_consumer(
        self, request: RemotingCommand, group: str, client_id: str, original: RemotingCommand | None = None
    ) -> RemotingCommand:
        original = original or request
        c = self.context
        group_info = c.consumer_manager.get(group)
        info = group_info.find_channel(client_id) if group_info is not None else None
        if info is None:
            return original.make_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        forwarded = RemotingCommand.request(request.code, dict(request.ext_fields), request.body)
        began = time.monotonic()
        try:
            answer = await c.broker2client.call_client(info.channel, forwarded, 5000)
        except RemotingError as exc:
            return original.make_response(
                ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> failed: {exc}"
            )
        log.debug("called consumer %s of %s in %.1f ms", client_id, group, (time.monotonic() - began) * 1000)
        return original.make_response(answer.code, answer.remark, dict(answer.ext_fields), answer.body)
