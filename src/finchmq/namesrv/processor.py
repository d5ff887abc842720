"""``DefaultRequestProcessor``: every request a name server answers (Java namesrv
``DefaultRequestProcessor``), over a ``RouteInfoManager`` and a ``KVConfigManager``."""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import replace

from finchmq.common import config_from_properties, config_to_properties, format_properties, parse_properties
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
)
from finchmq.protocol.codes import MQVersion
from finchmq.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from finchmq.remoting import ExecutorName, RemotingContext, RequestProcessor, handles

from .config import NamesrvConfig
from .kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from .route_info import RouteInfoManager

__all__ = ["DefaultRequestProcessor"]

log = logging.getLogger(__name__)

_FAQ_APPLY_TOPIC = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
_SUCCESS = ResponseCode.SUCCESS


def _now_ms() -> int:
    return int(time.time() * 1000)


class DefaultRequestProcessor(RequestProcessor):
    """Answers name-server requests; all state lives in the two managers."""

    executor = ExecutorName.NAMESRV

    def __init__(self, config: NamesrvConfig, routes: RouteInfoManager, kv: KVConfigManager) -> None:
        super().__init__()
        self.config = config
        self.routes = routes
        self.kv = kv

    # -- broker permission and the name server's settings ----------------------------------

    @handles(RequestCode.WIPE_WRITE_PERM_OF_BROKER)
    def _wipe_write_perm(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.change_write_perm(header.broker_name, writable=False)
        answer = WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count)
        return request.make_response(_SUCCESS, ext_fields=answer.to_ext_fields())

    @handles(RequestCode.ADD_WRITE_PERM_OF_BROKER)
    def _add_write_perm(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.change_write_perm(header.broker_name, writable=True)
        answer = AddWritePermOfBrokerResponseHeader(add_topic_count=count)
        return request.make_response(_SUCCESS, ext_fields=answer.to_ext_fields())

    @handles(RequestCode.GET_NAMESRV_CONFIG)
    def _get_namesrv_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        body = format_properties(config_to_properties(self.config)).encode("utf-8")
        return request.make_response(_SUCCESS, body=body)

    @handles(RequestCode.UPDATE_NAMESRV_CONFIG)
    def _update_namesrv_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: settings read per request change at once (e.g. orderMessageEnable);
        listening ones take effect at the next start. A bad or unknown key changes nothing."""
        properties = parse_properties(bytes(request.body).decode("utf-8"))
        try:
            config, unknown = config_from_properties(self.config, properties)
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        if unknown:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"unknown name server settings: {sorted(unknown)}"
            )
        self.config = config
        log.info("name server config updated: %s", properties)
        return request.make_response(_SUCCESS)

    # -- KV config --------------------------------------------------------------------------

    @handles(RequestCode.PUT_KV_CONFIG)
    def _put_kv_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.put(header.namespace, header.key, header.value)
        return request.make_response(_SUCCESS)

    @handles(RequestCode.GET_KV_CONFIG)
    def _get_kv_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv.get(header.namespace, header.key)
        if value is None:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return request.make_response(
            _SUCCESS, ext_fields=GetKVConfigResponseHeader(value=value).to_ext_fields()
        )

    @handles(RequestCode.DELETE_KV_CONFIG)
    def _delete_kv_config(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.delete(header.namespace, header.key)
        return request.make_response(_SUCCESS)

    @handles(RequestCode.GET_KVLIST_BY_NAMESPACE)
    def _get_kv_list(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        table = self.kv.namespace(header.namespace)
        if not table:
            return request.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return request.make_response(_SUCCESS, body=KVTable(table=table).to_json())

    # -- brokers ----------------------------------------------------------------------------

    @handles(RequestCode.REGISTER_BROKER)
    def _register_broker(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body
        if header.body_crc32 and body and zlib.crc32(body) & 0x7FFFFFFF != header.body_crc32:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper: TopicConfigSerializeWrapper | None
        filter_servers: tuple[str, ...] = ()
        if request.version >= MQVersion.V3_0_11:
            registration = (
                RegisterBrokerBody.decode(body, header.compressed) if body else RegisterBrokerBody()
            )
            wrapper = registration.topic_config_serialize_wrapper
            filter_servers = registration.filter_server_list
        else:
            wrapper = TopicConfigSerializeWrapper.from_json(body) if body else None
        result = self.routes.register_broker(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers,
            channel=ctx.channel,
            now_ms=_now_ms(),
        )
        order_conf = self.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return request.make_response(
            _SUCCESS,
            ext_fields=RegisterBrokerResponseHeader(
                ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
            ).to_ext_fields(),
            body=KVTable(table=order_conf).to_json() if order_conf else b"",
        )

    @handles(RequestCode.UNREGISTER_BROKER)
    def _unregister_broker(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.unregister_broker(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
        )
        return request.make_response(_SUCCESS)

    @handles(RequestCode.QUERY_DATA_VERSION)
    def _query_data_version(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        data_version = DataVersion.from_json(request.body) if request.body else DataVersion()
        changed = self.routes.is_broker_topic_config_changed(header.broker_addr, data_version)
        if not changed:
            self.routes.update_broker_info_update_timestamp(header.broker_addr, _now_ms())
        live = self.routes.broker_live_table.get(header.broker_addr)
        return request.make_response(
            _SUCCESS,
            ext_fields=QueryDataVersionResponseHeader(changed=changed).to_ext_fields(),
            body=live.data_version.to_json() if live is not None else b"",
        )

    # -- routes -----------------------------------------------------------------------------

    @handles(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    def _get_route_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.routes.pickup_topic_route_data(header.topic)
        if route is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}{_FAQ_APPLY_TOPIC}",
            )
        if self.config.order_message_enable:
            order_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
            if order_conf:
                route = replace(route, order_topic_conf=order_conf)
        # Java answers by the client's version: standard JSON from 4.9.4 on (or when asked for it),
        # fastjson's default form before, the bytes those clients were written against ({0:"addr"}).
        standard = request.version >= MQVersion.V4_9_4 or bool(header.accept_standard_json_only)
        return request.make_response(_SUCCESS, body=route.to_json(standard=standard))

    @handles(RequestCode.GET_BROKER_CLUSTER_INFO)
    def _get_cluster_info(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(_SUCCESS, body=self.routes.get_all_cluster_info().to_json())

    @handles(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    def _get_all_topic_list(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(_SUCCESS, body=self.routes.get_all_topic_list().to_json())

    @handles(RequestCode.GET_TOPICS_BY_CLUSTER)
    def _get_topics_by_cluster(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return request.make_response(
            _SUCCESS, body=self.routes.get_topics_by_cluster(header.cluster).to_json()
        )

    @handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    def _get_system_topics(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(_SUCCESS, body=self.routes.get_system_topic_list().to_json())

    @handles(RequestCode.DELETE_TOPIC_IN_NAMESRV)
    def _delete_topic(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.delete_topic(header.topic)
        return request.make_response(_SUCCESS)
