"""``MQClientAPI``: every request the client sends, as a typed async call (Java ``MQClientAPIImpl``).

Owns: building request commands from typed headers/bodies, choosing a name server, turning
responses into values (``SendResult``, ``PullResult``, ``TopicRouteData``...) and errors.
Imports: ``finchmq.protocol``, ``finchmq.remoting``, ``finchmq.common`` (properties text).

Strategy:
    Each method takes the target address and a timeout in ms and awaits the answer; a
    non-success code raises ``MQBrokerError.for_code(code)`` with the server's remark, and a
    transport failure raises the ``MQNetworkError`` that ``errors.network_error`` maps it to.
    Name-server calls go to the chosen name server and move to the next one (in a shuffled
    order, Java ``updateNameServerAddressList``) when it cannot be reached, within the deadline.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from finchmq.common import format_properties, parse_properties
from finchmq.protocol import pop
from finchmq.protocol.attributes import format_attribute_modification
from finchmq.protocol.auth import AclInfo, UserInfo
from finchmq.protocol.bodies import (
    BatchAckMessageRequestBody,
    BrokerStatsData,
    CheckClientRequestBody,
    ClusterInfo,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerListByGroupResponseBody,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueueAssignment,
    MessageRequestMode,
    MessageRequestModeSerializeWrapper,
    ProducerConnection,
    ProducerTableInfo,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    SetMessageRequestModeRequestBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
    UnlockBatchRequestBody,
)
from finchmq.protocol.codes import RequestCode, ResponseCode
from finchmq.protocol.command import Body, RemotingCommand
from finchmq.protocol.compression import MAX_DECOMPRESSED_BODY
from finchmq.protocol.errors import ProtocolError
from finchmq.protocol.headers import (
    AckMessageRequestHeader,
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    CloneGroupOffsetRequestHeader,
    CommandHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    CreateAccessConfigRequestHeader,
    CreateAclRequestHeader,
    CreateTopicRequestHeader,
    CreateUserRequestHeader,
    DeleteAccessConfigRequestHeader,
    DeleteAclRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    DeleteUserRequestHeader,
    EndTransactionRequestHeader,
    GetAclRequestHeader,
    GetAllProducerInfoRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetProducerConnectionListRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicStatsInfoRequestHeader,
    GetUserRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    PutKVConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateAclRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    UpdateUserRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from finchmq.protocol.message import MessageExt, MessageQueue
from finchmq.protocol.stored import decode_stored, decode_stored_all
from finchmq.remoting import RemotingClient
from finchmq.remoting.errors import RemotingConnectError, RemotingError

from .errors import MQBrokerError, MQClientError, MQConnectError, MQTimeoutError, network_error
from .results import (
    AckResult,
    AckStatus,
    PopResult,
    PopStatus,
    PullStatus,
    SendResult,
    SendStatus,
    new_send_result,
)

__all__ = ["MAX_DECOMPRESSED_BODY", "MQClientAPI", "PullResultExt"]

log = logging.getLogger(__name__)

# A compressed body never inflates beyond this (zip-bomb guard; Java has no limit).

_SEND_STATUS: Final = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_POP_STATUS: Final = {
    ResponseCode.SUCCESS: PopStatus.FOUND,
    ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
    ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
}
_PULL_STATUS: Final = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResultExt:
    """A pull as it came back: status, offsets and the undecoded body (Java ``PullResultExt``)."""

    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: Body


def _raise_for(response: RemotingCommand, addr: str | None) -> None:
    if response.code != ResponseCode.SUCCESS:
        raise MQBrokerError.from_response(response.code, response.remark, addr)


class MQClientAPI:
    """Typed RPCs over one ``RemotingClient``; see the module docstring."""

    def __init__(self, remoting: RemotingClient, namesrv_addrs: Iterable[str] = ()) -> None:
        self.remoting = remoting
        self._namesrv_addrs: list[str] = []
        self._namesrv_index = random.randrange(1 << 16)
        self._namesrv_chosen: str | None = None
        self.update_name_server_address_list(list(namesrv_addrs))

    # -- name servers -------------------------------------------------------------------------

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Java ``updateNameServerAddressList``: a changed list is shuffled and replaces the old one."""
        if not addrs or sorted(addrs) == sorted(self._namesrv_addrs):
            return
        shuffled = list(addrs)
        random.shuffle(shuffled)
        self._namesrv_addrs = shuffled
        if self._namesrv_chosen not in shuffled:
            self._namesrv_chosen = None

    @property
    def name_server_address_list(self) -> list[str]:
        return list(self._namesrv_addrs)

    async def invoke_namesrv(self, request: RemotingCommand, timeout_millis: int) -> RemotingCommand:
        """Send to the chosen name server, trying the others when it is unreachable.

        Raises:
            MQClientError: no name server is configured.
            MQNetworkError: none could be reached within ``timeout_millis``.
        """
        addrs = self._namesrv_addrs
        if not addrs:
            raise MQClientError('no name server address: set namesrv_addr ("host:port;host:port")')
        deadline = time.monotonic() + timeout_millis / 1000
        order: list[str] = []
        if self._namesrv_chosen is not None:
            order.append(self._namesrv_chosen)
        for _ in range(len(addrs)):
            self._namesrv_index += 1
            candidate = addrs[self._namesrv_index % len(addrs)]
            if candidate not in order:
                order.append(candidate)
        last: RemotingError | None = None
        for addr in order:
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                break
            try:
                response = await self.remoting.invoke(addr, request, remaining)
            except RemotingConnectError as exc:
                log.warning("name server %s unreachable (%s), trying the next one", addr, exc)
                last = exc
                if self._namesrv_chosen == addr:
                    self._namesrv_chosen = None
                continue
            except RemotingError as exc:
                raise network_error(exc, f"request code {request.code} to name server {addr}") from exc
            self._namesrv_chosen = addr
            return response
        if last is not None:
            raise MQConnectError(f"no name server reachable in {addrs}: {last}", last.addr) from last
        raise MQTimeoutError(f"name server request code {request.code} timed out ({timeout_millis}ms)")

    async def _invoke(
        self, addr: str, request: RemotingCommand, timeout_millis: int, what: str
    ) -> RemotingCommand:
        try:
            return await self.remoting.invoke(addr, request, timeout_millis)
        except RemotingError as exc:
            raise network_error(exc, f"{what} ({addr})") from exc

    async def _call(
        self,
        addr: str,
        code: RequestCode,
        header: CommandHeader | None,
        timeout_millis: int,
        body: Body = b"",
    ) -> RemotingCommand:
        request = RemotingCommand.request(code, header.to_ext_fields() if header is not None else None, body)
        response = await self._invoke(addr, request, timeout_millis, code.name)
        _raise_for(response, addr)
        return response

    async def _oneway(self, addr: str, request: RemotingCommand, timeout_millis: int) -> None:
        try:
            await self.remoting.invoke_oneway(addr, request, timeout_millis)
        except RemotingError as exc:
            raise network_error(exc, f"oneway code {request.code} ({addr})") from exc

    # -- routes and cluster -------------------------------------------------------------------

    async def get_topic_route_info_from_name_server(
        self, topic: str, timeout_millis: int, *, allow_topic_not_exist: bool = True
    ) -> TopicRouteData | None:
        """The route of ``topic``; None when the name server has none and that is allowed."""
        header = GetRouteInfoRequestHeader(topic=topic)
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
        response = await self.invoke_namesrv(request, timeout_millis)
        if response.code == ResponseCode.TOPIC_NOT_EXIST and allow_topic_not_exist:
            return None
        _raise_for(response, None)
        if not response.body:
            return None
        return TopicRouteData.from_json(response.body)

    async def get_broker_cluster_info(self, timeout_millis: int) -> ClusterInfo:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        response = await self.invoke_namesrv(request, timeout_millis)
        _raise_for(response, None)
        return ClusterInfo.from_json(response.body)

    async def get_topic_list_from_name_server(self, timeout_millis: int) -> TopicList:
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        response = await self.invoke_namesrv(request, timeout_millis)
        _raise_for(response, None)
        return TopicList.from_json(response.body)

    async def delete_topic_in_name_server(self, addr: str, topic: str, timeout_millis: int) -> None:
        header = DeleteTopicFromNamesrvRequestHeader(topic=topic)
        await self._call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, header, timeout_millis)

    # -- send -------------------------------------------------------------------------------

    async def send_message(
        self,
        addr: str,
        mq: MessageQueue,
        fields: dict[str, str],
        body: Body,
        timeout_millis: int,
        *,
        uniq_id: str,
        batch: bool = False,
        reply: bool = False,
    ) -> SendResult:
        """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (SEND_REPLY_MESSAGE_V2 for a reply to a
        request) to ``mq``'s broker at ``addr``; ``SendResult`` for every storing answer.

        ``fields`` is the ``SendMessageRequestHeaderV2`` in its wire form (``to_ext_fields()``;
        the producer fills a per-topic copy instead of building the dataclass for every message).

        Raises:
            MQBrokerError: the broker refused the message (``BrokerBusyError`` for flow control).
            MQNetworkError: no answer.
        """
        code = (
            RequestCode.SEND_BATCH_MESSAGE
            if batch
            else (RequestCode.SEND_REPLY_MESSAGE_V2 if reply else RequestCode.SEND_MESSAGE_V2)
        )
        request = RemotingCommand.request(code, fields, body)
        try:  # not through _invoke: one coroutine less on the hottest path
            response = await self.remoting.invoke(addr, request, timeout_millis)
        except RemotingError as exc:
            raise network_error(exc, f"send to {mq.broker_name} ({addr})") from exc
        status = _SEND_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError.from_response(response.code, response.remark, addr)
        try:
            answer = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        except ProtocolError as exc:
            raise MQClientError(f"bad send response from {addr}: {exc}") from exc
        topic = fields["b"]
        if answer.queue_id != mq.queue_id or mq.topic != topic:
            mq = MessageQueue(topic, mq.broker_name, answer.queue_id)
        return new_send_result(
            status,
            uniq_id,
            answer.msg_id,
            mq,
            answer.queue_offset,
            answer.transaction_id,
            answer.msg_region,
            answer.trace_on if answer.trace_on is not None else True,
            answer.recall_handle,
        )

    async def send_message_oneway(
        self,
        addr: str,
        fields: dict[str, str],
        body: Body,
        timeout_millis: int,
        *,
        batch: bool = False,
    ) -> None:
        """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE without an answer; ``fields`` as for ``send_message``."""
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        await self._oneway(addr, RemotingCommand.request(code, fields, body), timeout_millis)

    async def consumer_send_message_back(
        self,
        addr: str,
        msg: MessageExt,
        consumer_group: str,
        delay_level: int,
        timeout_millis: int,
        max_reconsume_times: int,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-stores ``msg`` to ``%RETRY%group`` (or the DLQ)."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=consumer_group,
            delay_level=delay_level,
            origin_msg_id=msg.client_msg_id,
            origin_topic=msg.topic,
            max_reconsume_times=max_reconsume_times,
        )
        await self._call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header, timeout_millis)

    # -- pull -------------------------------------------------------------------------------

    async def pull_message(
        self, addr: str, header: PullMessageRequestHeader, timeout_millis: int
    ) -> PullResultExt:
        """PULL_MESSAGE; FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL, else raises."""
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        response = await self._invoke(addr, request, timeout_millis, f"pull {header.topic}:{header.queue_id}")
        return self.process_pull_response(response, addr)

    @staticmethod
    def process_pull_response(response: RemotingCommand, addr: str) -> PullResultExt:
        status = _PULL_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError.from_response(response.code, response.remark, addr)
        try:
            answer = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        except ProtocolError as exc:
            raise MQClientError(f"bad pull response from {addr}: {exc}") from exc
        return PullResultExt(
            status,
            answer.next_begin_offset,
            answer.min_offset,
            answer.max_offset,
            answer.suggest_which_broker_id,
            response.body,
        )

    @staticmethod
    def decode_messages(body: Body, addr: str) -> list[MessageExt]:
        """The stored records of a pull body, bodies inflated (Java ``MessageDecoder.decodes``)."""
        try:
            return decode_stored_all(body, decompress_max_size=MAX_DECOMPRESSED_BODY)
        except ProtocolError as exc:
            raise MQClientError(f"undecodable messages from {addr}: {exc}") from exc

    # -- pop (5.x) -------------------------------------------------------------------------------

    async def pop_message(
        self, broker_name: str, addr: str, header: PopMessageRequestHeader, timeout_millis: int
    ) -> PopResult:
        """POP_MESSAGE to ``broker_name`` at ``addr``: FOUND (every message carries its ``POP_CK``),
        POLLING_NOT_FOUND (nothing came while the broker held it) or POLLING_FULL; else raises
        ``MQBrokerError`` with the broker's code and remark (Java ``popMessageAsync``)."""
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
        what = f"pop {header.topic}@{broker_name}:{header.queue_id}"
        response = await self._invoke(addr, request, timeout_millis, what)
        return self.process_pop_response(broker_name, response, header, addr)

    @classmethod
    def process_pop_response(
        cls, broker_name: str, response: RemotingCommand, header: PopMessageRequestHeader, addr: str
    ) -> PopResult:
        """Java ``processPopResponse``: decode the messages, give each its check-point info
        (``POP_CK``: the start offset of its check point from ``startOffsetInfo``, its own queue
        offset from ``msgOffsetInfo``), its first pop time, the consume count of an orderly pop
        (``orderCountInfo``) as ``reconsume_times``, and the topic asked for (a message popped
        from the pop retry topic shows its original topic; ``POP_CK`` says it was a retry)."""
        status = _POP_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError.from_response(response.code, response.remark, addr)
        try:
            answer = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        except ProtocolError as exc:
            if status is PopStatus.FOUND:
                raise MQClientError(f"bad pop response from {addr}: {exc}") from exc
            return PopResult(pop_status=status)
        if status is not PopStatus.FOUND:
            return PopResult(pop_status=status, rest_num=answer.rest_num)
        msgs = cls.decode_messages(response.body, addr)
        try:
            msgs = pop.with_pop_check_points(broker_name, header, answer, msgs)
        except pop.ExtraInfoError as exc:
            raise MQClientError(f"bad pop response from {addr}: {exc}") from exc
        return PopResult(
            pop_status=status,
            msg_found_list=msgs,
            pop_time=answer.pop_time,
            invisible_time=answer.invisible_time,
            rest_num=answer.rest_num,
        )

    async def ack_message(self, addr: str, header: AckMessageRequestHeader, timeout_millis: int) -> None:
        """ACK_MESSAGE: the message (``header.extra_info``, its ``POP_CK``) was consumed.

        Raises:
            MQBrokerError: the broker refused it (NO_MESSAGE: the offset is no longer in the
                queue; TOPIC_NOT_EXIST...), with its remark. (Java reports ``AckStatus.NO_EXIST``.)
        """
        await self._call(addr, RequestCode.ACK_MESSAGE, header, timeout_millis)

    async def batch_ack_message(
        self, addr: str, body: BatchAckMessageRequestBody, timeout_millis: int
    ) -> None:
        """BATCH_ACK_MESSAGE: several messages of one broker's check points acked at once."""
        await self._call(addr, RequestCode.BATCH_ACK_MESSAGE, None, timeout_millis, body.to_json())

    async def change_invisible_time(
        self, broker_name: str, addr: str, header: ChangeInvisibleTimeRequestHeader, timeout_millis: int
    ) -> AckResult:
        """CHANGE_MESSAGE_INVISIBLETIME: the message becomes visible ``header.invisible_time`` ms
        from now; the result's ``extra_info`` is its new ``POP_CK`` (the old one no longer acks it).

        Raises:
            MQBrokerError: the broker refused it, with its code and remark.
        """
        response = await self._call(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header, timeout_millis)
        try:
            answer = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        except ProtocolError as exc:
            raise MQClientError(f"bad change-invisible-time response from {addr}: {exc}") from exc
        extra = pop.ExtraInfo.build(
            header.offset,
            answer.pop_time,
            answer.invisible_time,
            answer.revive_qid,
            header.topic,
            broker_name,
            header.queue_id,
            header.offset,
        )
        return AckResult(status=AckStatus.OK, extra_info=extra.encode(), pop_time=answer.pop_time)

    # -- queues assigned by the broker (5.x) ----------------------------------------------------

    async def query_assignment(
        self,
        addr: str,
        topic: str,
        consumer_group: str,
        client_id: str,
        strategy_name: str,
        message_model: MessageModel,
        timeout_millis: int,
    ) -> set[MessageQueueAssignment] | None:
        """QUERY_ASSIGNMENT: the queues of ``topic`` this client should read, each PULL or POP;
        None when the broker cannot tell (keep what you have)."""
        body = QueryAssignmentRequestBody(
            topic=topic,
            consumer_group=consumer_group,
            client_id=client_id,
            strategy_name=strategy_name,
            message_model=message_model,
        )
        response = await self._call(addr, RequestCode.QUERY_ASSIGNMENT, None, timeout_millis, body.to_json())
        assignments = QueryAssignmentResponseBody.from_json(response.body).message_queue_assignments
        return None if assignments is None else set(assignments)

    async def set_message_request_mode(
        self,
        addr: str,
        topic: str,
        consumer_group: str,
        mode: MessageRequestMode,
        pop_share_queue_num: int,
        timeout_millis: int,
    ) -> None:
        """SET_MESSAGE_REQUEST_MODE on one broker (mqadmin ``setConsumeMode``)."""
        body = SetMessageRequestModeRequestBody(
            topic=topic, consumer_group=consumer_group, mode=mode, pop_share_queue_num=pop_share_queue_num
        )
        await self._call(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, None, timeout_millis, body.to_json())

    async def get_all_message_request_mode(
        self, addr: str, timeout_millis: int
    ) -> dict[str, dict[str, SetMessageRequestModeRequestBody]]:
        """GET_ALL_MESSAGE_REQUEST_MODE on one broker: every mode set there, topic -> group -> mode."""
        response = await self._call(addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, None, timeout_millis)
        if not response.body:
            return {}
        return MessageRequestModeSerializeWrapper.from_json(response.body).message_request_mode_map

    # -- heartbeats and groups ------------------------------------------------------------------

    async def send_heartbeat(self, addr: str, heartbeat: HeartbeatData, timeout_millis: int) -> int:
        """HEART_BEAT; returns the broker's version."""
        response = await self._call(addr, RequestCode.HEART_BEAT, None, timeout_millis, heartbeat.to_json())
        return response.version

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        producer_group: str | None,
        consumer_group: str | None,
        timeout_millis: int,
    ) -> None:
        header = UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
        )
        await self._call(addr, RequestCode.UNREGISTER_CLIENT, header, timeout_millis)

    async def get_consumer_id_list_by_group(self, addr: str, group: str, timeout_millis: int) -> list[str]:
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        response = await self._call(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header, timeout_millis)
        if not response.body:
            return []
        return list(ConsumerListByGroupResponseBody.from_json(response.body).consumer_id_list)

    # -- offsets ------------------------------------------------------------------------------

    async def query_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, timeout_millis: int
    ) -> int:
        """The committed offset; raises ``QueryNotFoundError`` when the broker has none."""
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(addr, RequestCode.QUERY_CONSUMER_OFFSET, header, timeout_millis)
        return QueryConsumerOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def update_consumer_offset(
        self,
        addr: str,
        group: str,
        mq: MessageQueue,
        offset: int,
        timeout_millis: int,
        *,
        oneway: bool = False,
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        )
        if oneway:
            request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
            await self._oneway(addr, request, timeout_millis)
        else:
            await self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header, timeout_millis)

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout_millis: int) -> int:
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(addr, RequestCode.GET_MAX_OFFSET, header, timeout_millis)
        return GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout_millis: int) -> int:
        header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(addr, RequestCode.GET_MIN_OFFSET, header, timeout_millis)
        return GetMinOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp: int, timeout_millis: int) -> int:
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp)
        response = await self._call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header, timeout_millis)
        return SearchOffsetResponseHeader.from_ext_fields(response.ext_fields).offset

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue, timeout_millis: int) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(addr, RequestCode.GET_EARLIEST_MSG_STORETIME, header, timeout_millis)
        return GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp

    # -- orderly locks --------------------------------------------------------------------------

    async def lock_batch_mq(
        self, addr: str, body: LockBatchRequestBody, timeout_millis: int
    ) -> set[MessageQueue]:
        response = await self._call(addr, RequestCode.LOCK_BATCH_MQ, None, timeout_millis, body.to_json())
        return set(LockBatchResponseBody.from_json(response.body).lock_ok_mq_set)

    async def unlock_batch_mq(
        self, addr: str, body: UnlockBatchRequestBody, timeout_millis: int, *, oneway: bool = False
    ) -> None:
        if oneway:
            request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body.to_json())
            await self._oneway(addr, request, timeout_millis)
        else:
            await self._call(addr, RequestCode.UNLOCK_BATCH_MQ, None, timeout_millis, body.to_json())

    # -- messages -----------------------------------------------------------------------------

    async def view_message(self, addr: str, commit_log_offset: int, timeout_millis: int) -> MessageExt:
        header = ViewMessageRequestHeader(offset=commit_log_offset)
        response = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID, header, timeout_millis)
        try:
            return decode_stored(response.body, decompress_max_size=MAX_DECOMPRESSED_BODY)
        except ProtocolError as exc:
            raise MQClientError(f"undecodable message from {addr}: {exc}") from exc

    async def query_message(
        self, addr: str, topic: str, key: str, max_num: int, begin: int, end: int, timeout_millis: int
    ) -> list[MessageExt]:
        """QUERY_MESSAGE by key (the broker's index); [] when nothing matches."""
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
        )
        request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext_fields())
        response = await self._invoke(addr, request, timeout_millis, "QUERY_MESSAGE")
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        _raise_for(response, addr)
        return self.decode_messages(response.body, addr)

    # -- admin ----------------------------------------------------------------------------------

    async def create_topic(
        self, addr: str, default_topic: str, config: TopicConfig, timeout_millis: int
    ) -> None:
        header = CreateTopicRequestHeader(
            topic=config.topic_name,
            default_topic=default_topic,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type.name,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
            # 5.x: config.attributes holds the signed modification (Java MQClientAPIImpl.createTopic)
            attributes=format_attribute_modification(config.attributes) if config.attributes else None,
        )
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header, timeout_millis)

    async def delete_topic_in_broker(self, addr: str, topic: str, timeout_millis: int) -> None:
        await self._call(
            addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic), timeout_millis
        )

    async def delete_subscription_group(self, addr: str, group: str, timeout_millis: int) -> None:
        header = DeleteSubscriptionGroupRequestHeader(group_name=group)
        await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header, timeout_millis)

    async def get_topic_stats_info(self, addr: str, topic: str, timeout_millis: int) -> TopicStatsTable:
        header = GetTopicStatsInfoRequestHeader(topic=topic)
        response = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO, header, timeout_millis)
        return TopicStatsTable.from_json(response.body)

    async def get_consume_stats(
        self, addr: str, group: str, topic: str | None, timeout_millis: int
    ) -> ConsumeStats:
        header = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic)
        response = await self._call(addr, RequestCode.GET_CONSUME_STATS, header, timeout_millis)
        return ConsumeStats.from_json(response.body)

    async def get_consumer_connection_list(
        self, addr: str, group: str, timeout_millis: int
    ) -> ConsumerConnection:
        header = GetConsumerConnectionListRequestHeader(consumer_group=group)
        response = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header, timeout_millis)
        return ConsumerConnection.from_json(response.body)

    async def get_producer_connection_list(
        self, addr: str, group: str, timeout_millis: int
    ) -> ProducerConnection:
        header = GetProducerConnectionListRequestHeader(producer_group=group)
        response = await self._call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header, timeout_millis)
        return ProducerConnection.from_json(response.body)

    async def query_topic_consume_by_who(self, addr: str, topic: str, timeout_millis: int) -> list[str]:
        header = QueryTopicConsumeByWhoRequestHeader(topic=topic)
        response = await self._call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header, timeout_millis)
        return list(GroupList.from_json(response.body).group_list)

    async def view_broker_stats_data(
        self, addr: str, stats_name: str, stats_key: str, timeout_millis: int
    ) -> BrokerStatsData:
        header = ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key)
        response = await self._call(addr, RequestCode.VIEW_BROKER_STATS_DATA, header, timeout_millis)
        return BrokerStatsData.from_json(response.body)

    async def check_client_in_broker(
        self,
        addr: str,
        group: str,
        client_id: str,
        subscription: SubscriptionData,
        timeout_millis: int = 3000,
    ) -> None:
        """CHECK_CLIENT_CONFIG: raises ``MQBrokerError`` when the broker refuses the subscription."""
        body = CheckClientRequestBody(client_id=client_id, group=group, subscription_data=subscription)
        await self._call(addr, RequestCode.CHECK_CLIENT_CONFIG, None, 3_000, body.to_json())

    async def recall_message(self, addr: str, header: RecallMessageRequestHeader, timeout_millis: int) -> str:
        """RECALL_MESSAGE (5.x): withdraw a timer message; its UNIQ_KEY as the broker answers it.

        Raises:
            MQBrokerError: the broker refused (an invalid or expired handle: ILLEGAL_OPERATION).
        """
        response = await self._call(addr, RequestCode.RECALL_MESSAGE, header, timeout_millis)
        return RecallMessageResponseHeader.from_ext_fields(response.ext_fields).msg_id

    async def end_transaction_oneway(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None, timeout_millis: int
    ) -> None:
        """END_TRANSACTION, oneway (Java ``endTransactionOneway``)."""
        request = RemotingCommand.request(
            RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True, remark=remark
        )
        await self._oneway(addr, request, timeout_millis)

    async def end_transaction(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None, timeout_millis: int
    ) -> None:
        """END_TRANSACTION awaiting the broker's answer, which it sends once the commit (the
        message in its real topic) or the rollback is stored. Raises ``MQBrokerError`` when it
        refuses (no such half message, another group's): then nothing was done.
        Never for ``TRANSACTION_NOT_TYPE``, which the broker does not answer."""
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields(), remark=remark)
        response = await self._invoke(addr, request, timeout_millis, "END_TRANSACTION")
        _raise_for(response, addr)

    async def invoke_broker_to_reset_offset(
        self, addr: str, topic: str, group: str, timestamp: int, is_force: bool, timeout_millis: int
    ) -> dict[MessageQueue, int]:
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=is_force)
        response = await self._call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, timeout_millis)
        if not response.body:
            return {}
        return dict(ResetOffsetBody.from_json(response.body).offset_table)

    async def get_broker_runtime_info(self, addr: str, timeout_millis: int) -> dict[str, str]:
        response = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, None, timeout_millis)
        return dict(KVTable.from_json(response.body).table)

    async def create_subscription_group(
        self, addr: str, config: SubscriptionGroupConfig, timeout_millis: int
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker."""
        await self._call(
            addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, timeout_millis, config.to_json()
        )

    async def get_all_subscription_group(self, addr: str, timeout_millis: int) -> SubscriptionGroupWrapper:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every consumer group's settings on one broker."""
        response = await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None, timeout_millis)
        return SubscriptionGroupWrapper.from_json(response.body)

    async def clone_group_offset(
        self,
        addr: str,
        src_group: str,
        dest_group: str,
        topic: str | None,
        offline: bool,
        timeout_millis: int,
    ) -> None:
        """CLONE_GROUP_OFFSET on one broker."""
        header = CloneGroupOffsetRequestHeader(
            src_group=src_group, dest_group=dest_group, topic=topic, offline=offline
        )
        await self._call(addr, RequestCode.CLONE_GROUP_OFFSET, header, timeout_millis)

    async def get_broker_consume_stats(
        self, addr: str, is_order: bool, timeout_millis: int
    ) -> ConsumeStatsList:
        """GET_BROKER_CONSUME_STATS: every group's consume stats on one broker."""
        header = GetConsumeStatsInBrokerHeader(is_order=is_order)
        response = await self._call(addr, RequestCode.GET_BROKER_CONSUME_STATS, header, timeout_millis)
        return ConsumeStatsList.from_json(response.body)

    async def get_all_topic_config(self, addr: str, timeout_millis: int) -> TopicConfigSerializeWrapper:
        """GET_ALL_TOPIC_CONFIG: every topic's settings on one broker."""
        response = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG, None, timeout_millis)
        return TopicConfigSerializeWrapper.from_json(response.body)

    async def get_system_topic_list_from_broker(self, addr: str, timeout_millis: int) -> TopicList:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the broker's own topics."""
        response = await self._call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, None, timeout_millis)
        return TopicList.from_json(response.body)

    async def get_all_producer_info(self, addr: str, timeout_millis: int) -> ProducerTableInfo:
        """GET_ALL_PRODUCER_INFO: every producer group's members on one broker."""
        header = GetAllProducerInfoRequestHeader()
        response = await self._call(addr, RequestCode.GET_ALL_PRODUCER_INFO, header, timeout_millis)
        return ProducerTableInfo.from_json(response.body)

    async def query_consume_queue(
        self,
        addr: str,
        topic: str,
        queue_id: int,
        index: int,
        count: int,
        consumer_group: str | None,
        timeout_millis: int,
    ) -> QueryConsumeQueueResponseBody:
        """QUERY_CONSUME_QUEUE: ``count`` units of a consume queue from ``index``.

        Raises:
            MQBrokerError: no such queue, or (SUCCESS with no body) no such index; the remark says.
        """
        header = QueryConsumeQueueRequestHeader(
            topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=consumer_group
        )
        response = await self._call(addr, RequestCode.QUERY_CONSUME_QUEUE, header, timeout_millis)
        if not response.body:
            raise MQBrokerError(response.code, response.remark or "no consume queue data", addr)
        return QueryConsumeQueueResponseBody.from_json(response.body)

    async def clean_expired_consume_queue(self, addr: str, timeout_millis: int) -> bool:
        """CLEAN_EXPIRED_CONSUMEQUEUE on one broker; whether it answered SUCCESS (Java's boolean)."""
        request = RemotingCommand.request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        response = await self._invoke(addr, request, timeout_millis, "CLEAN_EXPIRED_CONSUMEQUEUE")
        return response.code == ResponseCode.SUCCESS

    async def clean_unused_topic(self, addr: str, timeout_millis: int) -> bool:
        """CLEAN_UNUSED_TOPIC on one broker; whether it answered SUCCESS."""
        request = RemotingCommand.request(RequestCode.CLEAN_UNUSED_TOPIC)
        response = await self._invoke(addr, request, timeout_millis, "CLEAN_UNUSED_TOPIC")
        return response.code == ResponseCode.SUCCESS

    async def delete_expired_commit_log(self, addr: str, timeout_millis: int) -> bool:
        """DELETE_EXPIRED_COMMITLOG on one broker; whether it answered SUCCESS."""
        request = RemotingCommand.request(RequestCode.DELETE_EXPIRED_COMMITLOG)
        response = await self._invoke(addr, request, timeout_millis, "DELETE_EXPIRED_COMMITLOG")
        return response.code == ResponseCode.SUCCESS

    async def change_write_perm_of_broker(
        self, namesrv_addr: str, broker_name: str, writable: bool, timeout_millis: int
    ) -> int:
        """WIPE_WRITE_PERM_OF_BROKER or ADD_WRITE_PERM_OF_BROKER on one name server; the topic count."""
        if writable:
            response = await self._call(
                namesrv_addr, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                AddWritePermOfBrokerRequestHeader(broker_name=broker_name), timeout_millis,
            )  # fmt: skip
            return AddWritePermOfBrokerResponseHeader.from_ext_fields(response.ext_fields).add_topic_count
        response = await self._call(
            namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
            WipeWritePermOfBrokerRequestHeader(broker_name=broker_name), timeout_millis,
        )  # fmt: skip
        return WipeWritePermOfBrokerResponseHeader.from_ext_fields(response.ext_fields).wipe_topic_count

    async def get_namesrv_config(self, namesrv_addr: str, timeout_millis: int) -> dict[str, str]:
        """GET_NAMESRV_CONFIG: one name server's settings."""
        response = await self._call(namesrv_addr, RequestCode.GET_NAMESRV_CONFIG, None, timeout_millis)
        return parse_properties(bytes(response.body).decode("utf-8"))

    async def update_namesrv_config(
        self, namesrv_addr: str, properties: dict[str, str], timeout_millis: int
    ) -> None:
        """UPDATE_NAMESRV_CONFIG on one name server."""
        body = format_properties(properties).encode("utf-8")
        await self._call(namesrv_addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, timeout_millis, body)

    async def put_kv_config(
        self, namesrv_addr: str, namespace: str, key: str, value: str, timeout_millis: int
    ) -> None:
        """PUT_KV_CONFIG on one name server."""
        header = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value)
        await self._call(namesrv_addr, RequestCode.PUT_KV_CONFIG, header, timeout_millis)

    async def get_kv_config(
        self, namesrv_addr: str, namespace: str, key: str, timeout_millis: int
    ) -> str | None:
        """GET_KV_CONFIG on one name server; None when the item does not exist."""
        header = GetKVConfigRequestHeader(namespace=namespace, key=key)
        request = RemotingCommand.request(RequestCode.GET_KV_CONFIG, header.to_ext_fields())
        response = await self._invoke(namesrv_addr, request, timeout_millis, "GET_KV_CONFIG")
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        _raise_for(response, namesrv_addr)
        return GetKVConfigResponseHeader.from_ext_fields(response.ext_fields).value

    async def delete_kv_config(
        self, namesrv_addr: str, namespace: str, key: str, timeout_millis: int
    ) -> None:
        """DELETE_KV_CONFIG on one name server."""
        header = DeleteKVConfigRequestHeader(namespace=namespace, key=key)
        await self._call(namesrv_addr, RequestCode.DELETE_KV_CONFIG, header, timeout_millis)

    async def get_broker_config(self, addr: str, timeout_millis: int) -> dict[str, str]:
        response = await self._call(addr, RequestCode.GET_BROKER_CONFIG, None, timeout_millis)
        return parse_properties(bytes(response.body).decode("utf-8"))

    async def update_broker_config(
        self, addr: str, properties: dict[str, str], timeout_millis: int
    ) -> str | None:
        """UPDATE_BROKER_CONFIG; returns the broker's remark (e.g. ignored keys)."""
        body = format_properties(properties).encode("utf-8")
        response = await self._call(addr, RequestCode.UPDATE_BROKER_CONFIG, None, timeout_millis, body)
        return response.remark

    # -- ACL (Java MQClientAPIImpl's ACL calls) -------------------------------------------------

    async def create_plain_access_config(
        self, addr: str, header: CreateAccessConfigRequestHeader, timeout_millis: int
    ) -> None:
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header, timeout_millis)

    async def delete_plain_access_config(self, addr: str, access_key: str, timeout_millis: int) -> None:
        header = DeleteAccessConfigRequestHeader(access_key=access_key)
        await self._call(addr, RequestCode.DELETE_ACL_CONFIG, header, timeout_millis)

    async def update_global_white_addrs_config(
        self, addr: str, addresses: str, acl_file_full_path: str | None, timeout_millis: int
    ) -> None:
        header = UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=addresses, acl_file_full_path=acl_file_full_path
        )
        await self._call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header, timeout_millis)

    async def get_broker_cluster_acl_info(
        self, addr: str, timeout_millis: int
    ) -> GetBrokerAclConfigResponseHeader:
        response = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, None, timeout_millis)
        return GetBrokerAclConfigResponseHeader.from_ext_fields(response.ext_fields)

    # -- ACL 2.0: users and ACLs (Java 5.3 MQClientAPIImpl createUser .. listAcl) ------------------

    async def create_user(self, addr: str, user: UserInfo, timeout_millis: int) -> None:
        header = CreateUserRequestHeader(username=user.username)
        await self._call(addr, RequestCode.AUTH_CREATE_USER, header, timeout_millis, user.to_json())

    async def update_user(self, addr: str, user: UserInfo, timeout_millis: int) -> None:
        header = UpdateUserRequestHeader(username=user.username)
        await self._call(addr, RequestCode.AUTH_UPDATE_USER, header, timeout_millis, user.to_json())

    async def delete_user(self, addr: str, username: str, timeout_millis: int) -> None:
        header = DeleteUserRequestHeader(username=username)
        await self._call(addr, RequestCode.AUTH_DELETE_USER, header, timeout_millis)

    async def get_user(self, addr: str, username: str, timeout_millis: int) -> UserInfo | None:
        header = GetUserRequestHeader(username=username)
        response = await self._call(addr, RequestCode.AUTH_GET_USER, header, timeout_millis)
        return UserInfo.from_json(bytes(response.body)) if response.body else None

    async def list_user(self, addr: str, name_filter: str | None, timeout_millis: int) -> list[UserInfo]:
        header = ListUsersRequestHeader(filter=name_filter)
        response = await self._call(addr, RequestCode.AUTH_LIST_USER, header, timeout_millis)
        return UserInfo.list_from_json(bytes(response.body)) if response.body else []

    async def create_acl(self, addr: str, acl: AclInfo, timeout_millis: int) -> None:
        header = CreateAclRequestHeader(subject=acl.subject)
        await self._call(addr, RequestCode.AUTH_CREATE_ACL, header, timeout_millis, acl.to_json())

    async def update_acl(self, addr: str, acl: AclInfo, timeout_millis: int) -> None:
        header = UpdateAclRequestHeader(subject=acl.subject)
        await self._call(addr, RequestCode.AUTH_UPDATE_ACL, header, timeout_millis, acl.to_json())

    async def delete_acl(self, addr: str, subject: str, resource: str | None, timeout_millis: int) -> None:
        header = DeleteAclRequestHeader(subject=subject, resource=resource)
        await self._call(addr, RequestCode.AUTH_DELETE_ACL, header, timeout_millis)

    async def get_acl(self, addr: str, subject: str, timeout_millis: int) -> AclInfo | None:
        header = GetAclRequestHeader(subject=subject)
        response = await self._call(addr, RequestCode.AUTH_GET_ACL, header, timeout_millis)
        return AclInfo.from_json(bytes(response.body)) if response.body else None

    async def list_acl(
        self, addr: str, subject_filter: str | None, resource_filter: str | None, timeout_millis: int
    ) -> list[AclInfo]:
        header = ListAclsRequestHeader(subject_filter=subject_filter, resource_filter=resource_filter)
        response = await self._call(addr, RequestCode.AUTH_LIST_ACL, header, timeout_millis)
        return AclInfo.list_from_json(bytes(response.body)) if response.body else []

    async def get_consumer_running_info(
        self, addr: str, group: str, client_id: str, jstack: bool, timeout_millis: int
    ) -> ConsumerRunningInfo:
        header = GetConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=client_id, jstack_enable=jstack
        )
        response = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header, timeout_millis)
        return ConsumerRunningInfo.from_json(response.body)

    async def consume_message_directly(
        self, addr: str, group: str, client_id: str, msg_id: str, broker_name: str | None, timeout_millis: int
    ) -> ConsumeMessageDirectlyResult:
        header = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=msg_id, broker_name=broker_name
        )
        response = await self._call(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, timeout_millis)
        return ConsumeMessageDirectlyResult.from_json(response.body)
