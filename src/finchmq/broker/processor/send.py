"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK (Java
``SendMessageProcessor`` + ``AbstractSendMessageProcessor``).

Strategy: validate in Java's order (``msgCheck``: broker and topic permissions, topic name,
auto-creation through the default topic, queue id), turn retry sends past their limit into
dead letters, move delayed messages to SCHEDULE_TOPIC_XXXX (queue = level - 1, REAL_TOPIC and
REAL_QID kept), then hand the message to the writer thread and map the store's status to
RocketMQ's response code and remark. ``reject_request`` refuses all sends while the page cache
is busy or the transient store pool has no free buffer (seed 000).

Batch decision (spec §3.2.1): the header's ``batch`` flag decides, and ``"1"`` counts as true,
so the C++ client's batches (code 10, ``batch:"1"``) are stored as their separate messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future

from finchmq.broker.context import BrokerContext
from finchmq.broker.put_service import settled
from finchmq.broker.timer import (
    TIMER_PROPERTIES,
    attach_recall_handle,
    handle_schedule_message,
    timer_status_response,
)
from finchmq.broker.transaction import to_half_message
from finchmq.common.logs import RateLimitedLog
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import PermName, TopicFilterType
from finchmq.protocol.codes import LanguageCode, MQVersion
from finchmq.protocol.compression import decompress_body
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    ReplyMessageRequestHeader,
    SendMessageFields,
    decode_send_fields,
)
from finchmq.protocol.hosts import pack_host, unpack_host
from finchmq.protocol.message import PROPERTY_SEPARATOR, properties_to_string, string_to_properties
from finchmq.protocol.message_const import MessageConst, MessageSysFlag
from finchmq.protocol.topics import (
    TIMER_TOPIC,
    dlq_topic,
    is_not_allowed_send_topic,
    is_retry_topic,
    retry_topic,
    validate_topic,
)
from finchmq.remoting import Answer, ExecutorName, Later, RemotingContext, RemotingError, handles
from finchmq.store import (
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageResult,
    PutMessageStatus,
    stored_properties_string,
)

from ._base import BrokerProcessor, now_ms

__all__ = ["SendMessageProcessor", "pack_born_host", "put_status_response"]

log = logging.getLogger(__name__)
limited = RateLimitedLog(log)  # per-request failures (a full disk): a few lines, with counts

DLQ_NUMS_PER_GROUP = 1
_CHECKED_TOPICS_MAX = 100_000
_MAX_BATCH_INFLATED = 64 * 1024 * 1024  # bytes a compressed batch may inflate to
_FAQ = " see http://rocketmq.apache.org/docs/faq/"
_DISK_FULL_REMARK = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full [{}], messages are put to the slave, message store has been shut down, etc."
)
_ILLEGAL_REMARK = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit {}B, msg properties length limit 32KiB."
)
PC_SYNCHRONIZED_REMARK = "[PC_SYNCHRONIZED]broker busy, start flow control for a while"

# A topic that passed msgCheck: (topic configs' data version, broker permission, write queues,
# valid queue ids, MULTI_TAG filter type)
_CheckedTopic = tuple[object, int, int, int, bool]
_RETRY_PREFIX = "%RETRY%"
_PREPARED = MessageConst.PROPERTY_TRANSACTION_PREPARED
_DELAY = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_CLUSTER = MessageConst.PROPERTY_CLUSTER
_PROPERTY_SEPARATOR = PROPERTY_SEPARATOR
_PUT_OK = PutMessageStatus.PUT_OK
_SUCCESS = ResponseCode.SUCCESS
_MULTI_TAGS_FLAG = MessageSysFlag.MULTI_TAGS_FLAG
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)

# put results whose message was stored (and is counted and answered with its ids)
_STORED_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)

_OK_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


def _send_header(request: RemotingCommand) -> SendMessageFields:
    """The long-name header of SEND_MESSAGE / SEND_REPLY_MESSAGE, else the short-name V2 one."""
    code = request.code
    long_names = code == RequestCode.SEND_MESSAGE or code == RequestCode.SEND_REPLY_MESSAGE  # noqa: PLR1714
    return decode_send_fields(request.ext_fields, short_keys=not long_names)


def _delay_level(properties: Mapping[str, str]) -> int:
    try:
        return int(properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL) or 0)
    except ValueError:
        return 0


def put_status_response(
    status: PutMessageStatus,
    *,
    max_message_size: int,
    disk_full: bool,
    store_config: MessageStoreConfig | None = None,
) -> tuple[ResponseCode, str | None]:
    """Java ``handlePutMessageResult``: the response code and remark for a store status (the
    timer's refusals quote ``store_config``'s limits)."""
    if status in _OK_CODES:
        return _OK_CODES[status], None
    if status in _TIMER_STATUSES:
        return timer_status_response(status, store_config or MessageStoreConfig())
    if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
        return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
    if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
        return ResponseCode.MESSAGE_ILLEGAL, _ILLEGAL_REMARK.format(max_message_size)
    if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
        return ResponseCode.SERVICE_NOT_AVAILABLE, _DISK_FULL_REMARK.format("true" if disk_full else "false")
    if status is PutMessageStatus.OS_PAGECACHE_BUSY:
        return ResponseCode.SYSTEM_BUSY, PC_SYNCHRONIZED_REMARK
    if status is PutMessageStatus.UNKNOWN_ERROR:
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


_TIMER_STATUSES = frozenset(
    {
        PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
        PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL,
        PutMessageStatus.WHEEL_TIMER_NOT_ENABLE,
    }
)
_TIMER_PROPERTIES = frozenset(TIMER_PROPERTIES)


class SendMessageProcessor(BrokerProcessor):
    executor = ExecutorName.SEND

    def __init__(self, context: BrokerContext) -> None:
        super().__init__(context)
        self._checked_topics: dict[str, _CheckedTopic] = {}
        self._born_hosts: dict[str, bytes] = {}

    def reject_request(self) -> bool:
        store = self.context.store
        return bool(store.is_os_page_cache_busy() or store.is_transient_store_pool_deficient())

    @handles(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
    def send(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        """The one entrance of a send, single or batch; the header is decoded here, once.

        A send that needs no waiting is answered here, on the loop, without the executor's
        queue or a coroutine: to a topic already checked, not a retry topic, appended on the
        loop. That is nearly every send, and it is why the path is synchronous: ~4 µs of the
        ~45 µs the broker spends per send went into the worker hand-off and the coroutines
        (``remoting/processor.py``). The rest (a topic to check or create, metadata to write,
        appends moved to the writer thread) is ``Later``, run on the send executor with what
        was decoded here.
        """
        header = _send_header(request)
        c = self.context
        start = c.config.start_accept_send_request_time_stamp
        if start and now_ms() < start:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"broker unable to service, until {start}"
            )
        batch = header.batch or request.code == _SEND_BATCH
        checked = self._checked(header.topic, header.queue_id)
        if checked is None or (not batch and header.topic.startswith(_RETRY_PREFIX)):
            return Later(lambda: self._check_then_send(ctx, request, header, batch))
        put_service = c.put_service
        if batch:
            messages = self._prepare_batch(ctx, request, header, checked[2])
            if isinstance(messages, RemotingCommand):
                return messages
            outcome = put_service.try_append(messages)
            batch_respond = self._batch_responder(request, messages)
            if outcome is None:
                return Later(lambda: self._put_and_respond(ctx, request, messages, batch_respond))
            return self._answer_put(ctx, request, outcome, batch_respond)
        prepared = self._prepare_message(ctx, request, header, checked[2], checked[4])
        if isinstance(prepared, RemotingCommand):
            return prepared
        inner, topic, queue_id, recall = prepared
        outcome = put_service.try_append(inner)
        if outcome is not None and outcome.pending is None:  # final: the usual case, no closure made
            return self._send_response(request, outcome, topic, queue_id, len(inner.body), 1, recall)
        size = len(inner.body)

        def respond(result: PutMessageResult) -> RemotingCommand:
            return self._send_response(request, result, topic, queue_id, size, 1, recall)

        if outcome is None:
            return Later(lambda: self._put_and_respond(ctx, request, inner, respond))
        return self._answer_put(ctx, request, outcome, respond)

    async def _check_then_send(
        self, ctx: RemotingContext, request: RemotingCommand, header: SendMessageFields, batch: bool
    ) -> RemotingCommand | None:
        """A send whose topic must be checked first (Java ``msgCheck``, which may create it)."""
        error, write_queue_nums = await self._msg_check(ctx, request, header)
        if error is not None:
            return error
        if batch:
            messages = self._prepare_batch(ctx, request, header, write_queue_nums)
            if isinstance(messages, RemotingCommand):
                return messages
            return await self._put_and_respond(
                ctx, request, messages, self._batch_responder(request, messages)
            )
        checked = self._checked(header.topic, header.queue_id)
        prepared = self._prepare_message(
            ctx, request, header, write_queue_nums, checked[4] if checked is not None else None
        )
        if isinstance(prepared, RemotingCommand):
            return prepared
        inner, topic, queue_id, recall = prepared
        size = len(inner.body)
        return await self._put_and_respond(
            ctx, request, inner, lambda r: self._send_response(request, r, topic, queue_id, size, 1, recall)
        )

    # -- checks -----------------------------------------------------------------------------

    async def _msg_check(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        header: SendMessageFields,
    ) -> tuple[RemotingCommand | None, int]:
        """Java ``msgCheck``: an error response, or None and the topic's queue count.

        A topic that passed is remembered (``_checked``) under the topic configs' data version
        and the broker's permission, so the next send to it skips the checks."""
        c = self.context
        topic = header.topic
        checked = self._checked(topic, header.queue_id)
        if checked is not None:
            return None, checked[2]
        if not PermName.is_writeable(c.broker_permission) and c.topic_config_manager.is_order_topic(topic):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{c.broker_addr}] sending message is forbidden"
            ), 0
        problem = validate_topic(topic)
        if problem is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, problem), 0
        if is_not_allowed_send_topic(topic):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            ), 0
        topic_config = c.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            sys_flag = (0b10 if is_retry_topic(topic) else 0b01) if header.unit_mode else 0
            log.warning("the topic %s not exist, producer: %s", topic, ctx.remote_addr)
            topic_config = c.topic_config_manager.create_topic_in_send_message_method(
                topic, header.default_topic, header.default_topic_queue_nums, sys_flag
            )
            if topic_config is None and is_retry_topic(topic):
                topic_config = c.topic_config_manager.create_topic_in_send_message_back_method(
                    topic, 1, PermName.WRITE | PermName.READ, sys_flag
                )
            if topic_config is None:
                return request.make_response(
                    ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ}"
                ), 0
            await c.flush_metadata()
            await c.wait_registered()
        if not PermName.is_writeable(topic_config.perm):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            ), 0
        valid = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if header.queue_id >= valid:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, {topic_config} Producer: {ctx.remote_addr}",
            ), 0
        if len(self._checked_topics) > _CHECKED_TOPICS_MAX:
            self._checked_topics.clear()
        self._checked_topics[topic] = (
            c.topic_config_manager.data_version,
            c.broker_permission,
            topic_config.write_queue_nums,
            valid,
            topic_config.topic_filter_type is TopicFilterType.MULTI_TAG,
        )
        return None, topic_config.write_queue_nums

    def _checked(self, topic: str, queue_id: int) -> _CheckedTopic | None:
        """What ``_msg_check`` remembered of ``topic``, if still valid and ``queue_id`` is in range."""
        checked = self._checked_topics.get(topic)
        if (
            checked is not None
            and checked[0] is self.context.topic_config_manager.data_version
            and checked[1] == self.context.broker_permission
            and queue_id < checked[3]
        ):
            return checked
        return None

    # -- single messages --------------------------------------------------------------------

    def _prepare_message(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        header: SendMessageFields,
        write_queue_nums: int,
        multi_tag: bool | None,
    ) -> RemotingCommand | tuple[MessageExtBrokerInner, str, int, str | None]:
        """A single send past ``msgCheck``, up to the message to store: an error response, or the
        message with the topic it is counted in, the queue it is answered with and a timer
        message's recall handle. ``multi_tag``: whether the topic filters by several tags, None
        if not known yet. Changes nothing unless the topic is a retry topic (which may make a
        DLQ topic)."""
        c = self.context
        topic = header.topic
        queue_id = header.queue_id if header.queue_id >= 0 else random.randrange(write_queue_nums)
        properties = string_to_properties(header.properties) if header.properties else {}
        reconsume_times = header.reconsume_times or 0

        if topic.startswith(_RETRY_PREFIX):
            group = topic[len(_RETRY_PREFIX) :]
            group_config = c.subscription_group_manager.find_subscription_group_config(group)
            if group_config is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}{_FAQ}"
                )
            max_reconsume = group_config.retry_max_times
            if request.version > MQVersion.V3_4_9 and header.max_reconsume_times is not None:
                max_reconsume = header.max_reconsume_times
            if reconsume_times >= max_reconsume:
                if c.metrics is not None:  # Java 5.x labels it with the producer group and topic
                    c.metrics.record_dlq(header.producer_group, header.topic)
                topic = dlq_topic(group)
                queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
                c.topic_config_manager.create_topic_in_send_message_back_method(
                    topic, DLQ_NUMS_PER_GROUP, PermName.WRITE | PermName.READ
                )
                properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
                multi_tag = None

        # Java: a prepared message, unless it is a retry of one being delayed
        prepared_value = properties.get(_PREPARED)
        prepared = (
            prepared_value is not None
            and prepared_value.lower() == "true"
            and not (reconsume_times > 0 and _delay_level(properties) > 0)
        )
        if prepared and c.config.reject_transaction_message:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{c.broker_addr}] sending transaction message is forbidden",
            )

        sys_flag = header.sys_flag
        if multi_tag is None:
            config = c.topic_config_manager.select_topic_config(topic)
            multi_tag = config is not None and config.topic_filter_type is TopicFilterType.MULTI_TAG
        if multi_tag:
            sys_flag |= _MULTI_TAGS_FLAG

        answer_queue_id = queue_id
        recall = None
        # a half message's delay and timer apply when it is committed
        if not prepared and (_DELAY in properties or not _TIMER_PROPERTIES.isdisjoint(properties)):
            status, topic, queue_id = handle_schedule_message(
                c.timer_message_store, c.store.config.timer_wheel_enable, c.schedule_message_service,
                topic, queue_id, properties, header.sys_flag,
            )  # fmt: skip
            if status is not None:
                return self._refused(request, status)
            if topic == TIMER_TOPIC:  # answered with its own queue, as Java (the hook runs in the store)
                recall = attach_recall_handle(properties, c.config.broker_name)
            else:
                answer_queue_id = queue_id
        cluster = c.config.broker_cluster_name
        properties[_CLUSTER] = cluster
        # Parsed properties are writable; so are the delay's (a topic name, numbers): only the
        # cluster name from broker.conf needs a look.
        trusted = bool(cluster) and _PROPERTY_SEPARATOR not in cluster
        body = request.body if type(request.body) is bytes else bytes(request.body)
        inner = MessageExtBrokerInner(
            topic,
            body,
            queue_id,
            header.flag,
            properties,
            stored_properties_string(properties, trusted=trusted),
            None,
            sys_flag,
            header.born_timestamp,
            self._born_host(ctx),
            c.store_host,
            reconsume_times,
        )
        if prepared:  # stored as a half message until END_TRANSACTION (broker/transaction.py)
            inner = to_half_message(inner)
        return inner, topic, answer_queue_id, recall

    def _refused(self, request: RemotingCommand, status: PutMessageStatus) -> RemotingCommand:
        """The answer to a message the schedule hook refused (a timer message)."""
        c = self.context
        c.stats.record_put_failed()
        code, remark = put_status_response(
            status, max_message_size=c.store.config.max_message_size, disk_full=c.store.is_disk_full(),
            store_config=c.store.config,
        )  # fmt: skip
        return request.make_response(code, remark)

    def _born_host(self, ctx: RemotingContext) -> bytes:
        addr = ctx.remote_addr
        packed = self._born_hosts.get(addr)
        if packed is None:
            if len(self._born_hosts) > _CHECKED_TOPICS_MAX:
                self._born_hosts.clear()
            packed = self._born_hosts[addr] = pack_born_host(ctx)
        return packed

    async def _put_and_respond(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        message: MessageExtBrokerInner | MessageExtBatch,
        respond: Callable[[PutMessageResult], RemotingCommand],
    ) -> RemotingCommand | None:
        """Append through the writer thread; answer now, or when a SYNC_FLUSH completes (the
        executor's worker does not wait for the flush, as Java's asyncSendMessage)."""
        if self.context.metadata_unwritten:  # a retry group or DLQ topic made for this message
            await self.context.flush_metadata()
        outcome = await self.context.put_service.append(message)
        return self._answer_put(ctx, request, outcome, respond)

    def _answer_put(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        outcome: PutMessageResult,
        respond: Callable[[PutMessageResult], RemotingCommand],
    ) -> RemotingCommand | None:
        """The answer to a put: now for a final ``outcome``, else None and the answer is written
        when its flush (or slave) completes."""
        pending = outcome.pending
        if pending is None:
            return respond(outcome)
        loop = asyncio.get_running_loop()
        began = time.monotonic()  # metrics time a late answer from here (the queue wait is missed)

        def flushed(f: Future[PutMessageResult]) -> None:
            with contextlib.suppress(RuntimeError):  # loop closed: shutting down
                loop.call_soon_threadsafe(self._answer_late, ctx, request, respond, f, began)

        pending.add_done_callback(flushed)
        return None

    def _answer_late(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        respond: Callable[[PutMessageResult], RemotingCommand],
        future: Future[PutMessageResult],
        began: float,
    ) -> None:
        exc = future.exception()
        if exc is not None:
            limited.error("put-failed", "store put failed after the append: %s", exc)
            response = request.make_response(ResponseCode.SYSTEM_ERROR, f"store error: {exc}")
        else:
            response = respond(future.result())
        if not request.is_oneway and ctx.channel.is_open:
            ctx.write_response(response)
            metrics = self.context.metrics
            if metrics is not None:
                metrics.rpc.observe(request.code, response.code, began, False, "success")

    def _send_response(
        self,
        request: RemotingCommand,
        result: PutMessageResult,
        topic: str,
        queue_id: int,
        size: int,
        count: int = 1,
        recall_handle: str | None = None,
    ) -> RemotingCommand:
        c = self.context
        append = result.append_message_result
        if result.status is _PUT_OK and append is not None:  # the usual case, decided at once
            code: ResponseCode = _SUCCESS
            remark = None
        else:
            store = c.store
            code, remark = put_status_response(
                result.status, max_message_size=store.config.max_message_size, disk_full=store.is_disk_full()
            )
            if code not in _STORED_CODES or append is None:
                c.stats.record_put_failed()
                if code == ResponseCode.SYSTEM_BUSY:
                    c.flow_control.record("PC_SYNCHRONIZED")
                return request.make_response(code, remark)
        c.stats.record_put(topic, count, size)
        config = c.config
        # SendMessageResponseHeader's extFields, built directly: this runs for every send.
        ext = {
            "msgId": append.msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(append.logics_offset),
            "MSG_REGION": config.region_id,
            "TRACE_ON": "true" if config.trace_on else "false",
        }
        if recall_handle is not None:
            ext["recallHandle"] = recall_handle
        return request.make_response(code, remark, ext)

    # -- batches ----------------------------------------------------------------------------

    def _prepare_batch(
        self, ctx: RemotingContext, request: RemotingCommand, header: SendMessageFields, write_queue_nums: int
    ) -> RemotingCommand | MessageExtBatch:
        """A batch send past ``msgCheck``, up to the batch to store, or an error response."""
        c = self.context
        topic = header.topic
        if len(topic.encode()) > 127:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}"
            )
        if topic.startswith(_RETRY_PREFIX):
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}"
            )
        queue_id = header.queue_id if header.queue_id >= 0 else random.randrange(write_queue_nums)
        properties = string_to_properties(header.properties) if header.properties else {}
        properties[_CLUSTER] = c.config.broker_cluster_name
        body = request.body
        sys_flag = header.sys_flag
        if sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            # The C++ client zlib-compresses a whole batch over 4 KiB (a Java broker would store
            # the blob as one message); unpack it so consumers get the separate messages.
            try:
                body = decompress_body(body, _MAX_BATCH_INFLATED)
            except MessageDecodeError as exc:
                return request.make_response(ResponseCode.MESSAGE_ILLEGAL, f"compressed batch body: {exc}")
            sys_flag &= ~MessageSysFlag.COMPRESSED_FLAG
        return MessageExtBatch(
            topic=topic,
            body=body,
            queue_id=queue_id,
            properties=properties,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=self._born_host(ctx),
            store_host=c.store_host,
        )

    def _batch_responder(
        self, request: RemotingCommand, batch: MessageExtBatch
    ) -> Callable[[PutMessageResult], RemotingCommand]:
        def respond(result: PutMessageResult) -> RemotingCommand:
            append = result.append_message_result
            count = append.msg_num if append else 0
            return self._send_response(request, result, batch.topic, batch.queue_id, len(request.body), count)

        return respond

    # -- consumer send back -----------------------------------------------------------------

    # -- request-reply --------------------------------------------------------------------------

    @handles(RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
    async def send_reply_message(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """Java ``ReplyMessageProcessor``: push the reply to the client waiting for it
        (REPLY_TO_CLIENT, PUSH_REPLY_MESSAGE_TO_CLIENT) and, with storeReplyMessageEnable, store
        it in the reply topic. The answer says whether the push reached the requester."""
        header = _send_header(request)
        c = self.context
        error, write_queue_nums = await self._msg_check(ctx, request, header)
        if error is not None:
            return error
        queue_id = header.queue_id if header.queue_id >= 0 else random.randrange(write_queue_nums)
        properties = string_to_properties(header.properties or "")
        body = request.body if isinstance(request.body, bytes) else bytes(request.body)
        pushed, remark = await self._push_reply(ctx, header, properties, body)
        ext = {"MSG_REGION": c.config.region_id, "TRACE_ON": "true" if c.config.trace_on else "false"}
        answer = {"msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}  # Java: "avoid decoding errors"
        if c.config.store_reply_message_enable:
            inner = MessageExtBrokerInner(
                topic=header.topic,
                body=body,
                queue_id=queue_id,
                flag=header.flag,
                properties=properties,
                properties_string=header.properties or "",
                born_timestamp=header.born_timestamp,
                born_host=self._born_host(ctx),
                store_host=c.store_host,
                reconsume_times=header.reconsume_times or 0,
            )
            result = await settled(await c.put_service.append(inner))
            append = result.append_message_result
            if result.status in _OK_CODES and append is not None:
                c.stats.record_put(header.topic, 1, len(body))
                answer = {
                    "msgId": append.msg_id,
                    "queueId": str(queue_id),
                    "queueOffset": str(append.logics_offset),
                }
        if not pushed:
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark, ext)
        return request.make_response(ResponseCode.SUCCESS, None, {**ext, **answer})

    async def _push_reply(
        self,
        ctx: RemotingContext,
        header: SendMessageFields,
        properties: dict[str, str],
        body: bytes,
    ) -> tuple[bool, str | None]:
        """Java ``pushReplyMessage``: (delivered, why not)."""
        c = self.context
        sender = properties.get(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            return False, f"reply message properties[{MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = c.producer_manager.find_channel(sender)
        if channel is None:
            limited.warning("reply-no-channel", "push reply message fail, channel of <%s> not found.", sender)
            return False, f"push reply message fail, channel of <{sender}> not found."
        pushed = {**properties, MessageConst.PROPERTY_PUSH_REPLY_TIME: str(int(time.time() * 1000))}
        store_host = unpack_host(c.store_host)
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            properties=properties_to_string(pushed),
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
            born_host=ctx.remote_addr,
            store_host=f"{store_host.host}:{store_host.port}",
            store_timestamp=int(time.time() * 1000),
        )
        push = RemotingCommand.request(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
            push_header.to_ext_fields(),
            body,
            language=LanguageCode.JAVA,
        )
        try:
            response = await c.broker2client.call_client(channel, push, 10_000)
        except (RemotingError, RuntimeError, TimeoutError) as exc:
            log.warning("push reply message to <%s> fail: %s", sender, exc)
            return False, f"push reply message to {sender}fail."  # sic, Java's text
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "push reply message to <%s> return fail, response remark: %s", sender, response.remark
            )
            return False, f"push reply message to {sender}fail."
        return True, None

    @handles(RequestCode.CONSUMER_SEND_MSG_BACK)
    async def consumer_send_msg_back(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand:
        """A consumer gives a message back (spec §3.2.7 / §4.10): retry later, or dead letter."""
        c = self.context
        header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        group_config = c.subscription_group_manager.find_subscription_group_config(header.group)
        if group_config is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {header.group}{_FAQ}",
            )
        if not PermName.is_writeable(c.broker_permission):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{c.broker_addr}] sending message is forbidden"
            )
        if group_config.retry_queue_nums <= 0:
            return request.make_response(ResponseCode.SUCCESS)
        new_topic = retry_topic(header.group)
        queue_id = random.randrange(group_config.retry_queue_nums)
        topic_sys_flag = 0b10 if header.unit_mode else 0
        retry_config = c.topic_config_manager.create_topic_in_send_message_back_method(
            new_topic, group_config.retry_queue_nums, PermName.WRITE | PermName.READ, topic_sys_flag
        )
        if not PermName.is_writeable(retry_config.perm):
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
            )
        msg = c.store.look_message_by_offset(header.offset)
        if msg is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        properties = dict(msg.properties)
        if MessageConst.PROPERTY_RETRY_TOPIC not in properties:
            properties[MessageConst.PROPERTY_RETRY_TOPIC] = msg.topic
        properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        delay_level = header.delay_level
        max_reconsume = group_config.retry_max_times
        if request.version > MQVersion.V3_4_9 and header.max_reconsume_times is not None:
            max_reconsume = header.max_reconsume_times
        if msg.reconsume_times >= max_reconsume or delay_level < 0:
            if c.metrics is not None:
                c.metrics.record_dlq(header.group, properties[MessageConst.PROPERTY_RETRY_TOPIC])
            new_topic = dlq_topic(header.group)
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            c.topic_config_manager.create_topic_in_send_message_back_method(
                new_topic, DLQ_NUMS_PER_GROUP, PermName.WRITE | PermName.READ, 0
            )
            properties.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
        else:
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
            properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        if MessageConst.PROPERTY_ORIGIN_MESSAGE_ID not in properties:
            properties[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = header.origin_msg_id or msg.msg_id
        status, topic, queue_id = handle_schedule_message(
            c.timer_message_store, c.store.config.timer_wheel_enable, c.schedule_message_service,
            new_topic, queue_id, properties, msg.sys_flag,
        )  # fmt: skip
        if status is not None:
            code, remark = put_status_response(
                status, max_message_size=c.store.config.max_message_size, disk_full=False,
                store_config=c.store.config,
            )  # fmt: skip
            return request.make_response(code, remark)
        inner = MessageExtBrokerInner(
            topic=topic,
            body=msg.body,
            queue_id=queue_id,
            flag=msg.flag,
            properties=properties,
            properties_string=stored_properties_string(properties),
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=pack_host(msg.born_host.host, msg.born_host.port),
            store_host=c.store_host,
            reconsume_times=msg.reconsume_times + 1,
        )
        result = await settled(await c.put_service.append(inner))
        code, remark = put_status_response(
            result.status, max_message_size=c.store.config.max_message_size, disk_full=c.store.is_disk_full()
        )
        if code == ResponseCode.SUCCESS:
            c.stats.record_put(topic, 1, len(inner.body))
            return request.make_response(ResponseCode.SUCCESS)
        return request.make_response(code, remark)


def pack_born_host(ctx: RemotingContext) -> bytes:
    """The client's address as a stored BORNHOST."""
    host, _, port = ctx.remote_addr.rpartition(":")
    try:
        packed = pack_host(host, int(port))
    except ValueError:
        return pack_host("127.0.0.1", 0)
    # The C++ client reads 8-byte hosts only (spec §4.1): an IPv6 peer gets a placeholder.
    return packed if len(packed) == 8 else pack_host("127.0.0.1", int(port))
