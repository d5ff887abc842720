"""HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG (Java ``ClientManageProcessor``)."""

from __future__ import annotations

import logging

from finchmq.broker.client_manager import ClientChannelInfo
from finchmq.broker.filter import compiled_sql92
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import CheckClientRequestBody, HeartbeatData, PermName, SubscriptionData
from finchmq.protocol.filter import EXPRESSION_TYPE_TAG, build_subscription_data, is_tag_type
from finchmq.protocol.headers import UnregisterClientRequestHeader
from finchmq.protocol.sql92 import SQLSyntaxError
from finchmq.protocol.topics import retry_topic
from finchmq.remoting import ExecutorName, RemotingContext, handles

from ._base import BrokerProcessor, now_ms

__all__ = ["ClientManageProcessor"]

log = logging.getLogger(__name__)

_UNIT_SUB_FLAG = 0b10  # Java TopicSysFlag.buildSysFlag(false, true)


def _normalised(sub: SubscriptionData) -> SubscriptionData:
    """Recompute tag hash codes from the expression: the C++ client sends atoi(tag) in codeSet."""
    if (sub.expression_type or EXPRESSION_TYPE_TAG).upper() != EXPRESSION_TYPE_TAG or sub.class_filter_mode:
        return sub
    return build_subscription_data(sub.topic, sub.sub_string, sub.expression_type, sub.sub_version)


class ClientManageProcessor(BrokerProcessor):
    executor = ExecutorName.CLIENT_MANAGE

    @handles(RequestCode.HEART_BEAT, executor=ExecutorName.HEARTBEAT)
    async def heart_beat(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        data = HeartbeatData.from_json(request.body)
        info = ClientChannelInfo(
            channel=ctx.channel,
            client_id=data.client_id,
            language=request.language,
            version=request.version,
            client_addr=ctx.remote_addr,
            last_update_timestamp=now_ms(),
        )
        for consumer in data.consumer_data_set:
            group_config = c.subscription_group_manager.find_subscription_group_config(consumer.group_name)
            notify = True
            if group_config is not None:
                notify = group_config.notify_consumer_ids_changed_enable
                c.topic_config_manager.create_topic_in_send_message_back_method(
                    retry_topic(consumer.group_name),
                    group_config.retry_queue_nums,
                    PermName.READ | PermName.WRITE,
                    _UNIT_SUB_FLAG if consumer.unit_mode else 0,
                )
            changed = c.consumer_manager.register_consumer(
                consumer.group_name,
                info,
                consumer.consume_type,
                consumer.message_model,
                consumer.consume_from_where,
                [_normalised(s) for s in consumer.subscription_data_set],
                notify=notify and c.config.notify_consumer_ids_changed_enable,
            )
            if changed:
                log.info(
                    "registerConsumer info changed: group %s client %s from %s",
                    consumer.group_name,
                    data.client_id,
                    ctx.remote_addr,
                )
        for producer in data.producer_data_set:
            c.producer_manager.register_producer(producer.group_name, info)
        await c.flush_metadata()  # a group or retry topic created here is on disk once answered
        await c.wait_registered()  # and routable
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.UNREGISTER_CLIENT)
    def unregister_client(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        c = self.context
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if header.producer_group:
            c.producer_manager.unregister_producer(header.producer_group, ctx.channel)
        if header.consumer_group:
            group_config = c.subscription_group_manager.find_subscription_group_config(header.consumer_group)
            notify = group_config.notify_consumer_ids_changed_enable if group_config is not None else True
            c.consumer_manager.unregister_consumer(
                header.consumer_group,
                ctx.channel,
                notify=notify and c.config.notify_consumer_ids_changed_enable,
            )
        return request.make_response(ResponseCode.SUCCESS)

    @handles(RequestCode.CHECK_CLIENT_CONFIG)
    def check_client_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Java ``checkClientConfig``: an SQL92 subscription needs enablePropertyFilter and an
        expression that compiles (the remark names the error's position)."""
        subscription = (
            CheckClientRequestBody.from_json(request.body).subscription_data if request.body else None
        )
        if subscription is None or is_tag_type(subscription.expression_type):
            return request.make_response(ResponseCode.SUCCESS)
        if not self.context.config.enable_property_filter:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {subscription.expression_type}",
            )
        try:
            compiled_sql92(subscription.sub_string)
        except SQLSyntaxError as exc:
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return request.make_response(ResponseCode.SUCCESS)
