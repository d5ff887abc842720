"""POP_MESSAGE (Java 5.3.3 ``PopMessageProcessor``, the default, revive-topic path).

Checks, in Java's order and words: not ``timeout too much`` (the client's deadline has passed),
broker readable, at most 32 messages, topic, queue id (-1: every queue), subscription group, the
expression. Then, under each queue's lock (``QueueLockManager``), messages are read from the
group's pop offset; a check point of what was handed out goes to the buffer (``add_ck``) or to
the revive topic at once (``add_ck_just_offset``), and the offset moves on in memory only. With
probability ``popFromRetryProbability`` % the group's pop retry topic is read first, else after
the topic when the answer is not full. An orderly pop writes no check point: it records the
messages in the ``ConsumerOrderInfoManager`` and keeps the queue blocked until they are acked.
Nothing found: the request is held (``PopLongPollingService``) and run again when a message
arrives; else answered POLLING_FULL or POLLING_TIMEOUT.

finchmq refuses an ``invisibleTime`` outside 0 .. 3 days with INVALID_PARAMETER: Java's timer
refuses to deliver such a check point (``timerMaxDelaySec``), which leaves the messages popped
and never revived.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from typing import Final

from finchmq.broker.context import BrokerContext
from finchmq.broker.pop.long_polling import PollingResult
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.errors import MessageDecodeError
from finchmq.protocol.headers import PopMessageRequestHeader, PopMessageResponseHeader
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import (
    POP_ORDER_REVIVE_QUEUE,
    ConsumeInitMode,
    ExtraInfo,
    PopCheckPoint,
    build_polling_key,
    build_pop_retry_topic,
    build_pop_retry_topic_v1,
    msg_offset_info_item,
    start_offset_info_item,
)
from finchmq.protocol.stored import decode_stored, encode_message_ext
from finchmq.protocol.topics import RETRY_GROUP_TOPIC_PREFIX
from finchmq.remoting import Answer, ExecutorName, Later, RemotingContext, RequestExecutor, handles
from finchmq.store import GetMessageStatus, MessageFilter

from ._base import BrokerProcessor
from ._pop_common import (
    check_broker_readable,
    check_group,
    check_topic,
    message_filter,
    min_offset,
    run_again_when_woken,
    with_born_time,
    with_header,
)

__all__ = ["MAX_INVISIBLE_TIME", "MAX_POP_NUMS", "PopMessageProcessor"]

log = logging.getLogger(__name__)

MAX_POP_NUMS: Final = 32
# Java MessageStoreConfig.timerMaxDelaySec (3 days): the longest a check point can wait to be revived
MAX_INVISIBLE_TIME: Final = 259_200 * 1000  # ms
_TIMEOUT_TOO_MUCH_MS: Final = 500
_ZERO_HEADER: Final = PopMessageResponseHeader(
    pop_time=0, invisible_time=0, revive_qid=0, rest_num=0
).to_ext_fields()


@dataclasses.dataclass(slots=True)
class _Popped:
    """What one POP collects across queues (Java's GetMessageResult and StringBuilders)."""

    header: PopMessageRequestHeader
    client_host: str
    revive_qid: int
    pop_time: int
    message_filter: MessageFilter
    body: list[bytes] = dataclasses.field(default_factory=list)
    count: int = 0
    start_offset_info: list[str] = dataclasses.field(default_factory=list)
    msg_offset_info: list[str] = dataclasses.field(default_factory=list)
    order_count_info: list[str] = dataclasses.field(default_factory=list)

    @property
    def room(self) -> int:
        return self.header.max_msg_nums - self.count


def invisible_time_problem(invisible_time: int) -> str | None:
    """Why ``invisible_time`` (ms) cannot be kept track of, or None."""
    if not 0 <= invisible_time <= MAX_INVISIBLE_TIME:
        return f"invisibleTime {invisible_time} ms is out of range 0..{MAX_INVISIBLE_TIME}"
    return None


class PopMessageProcessor(BrokerProcessor):
    executor = ExecutorName.PULL

    def __init__(self, context: BrokerContext, pull_executor: RequestExecutor) -> None:
        super().__init__(context)
        self.pop = context.pop
        self.pop.long_polling.wakeup = run_again_when_woken(pull_executor, self, self._woken)
        self._random = random.Random()

    @handles(RequestCode.POP_MESSAGE)
    def pop_message(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        answer = self._pop_message(ctx, request)
        if isinstance(answer, RemotingCommand):
            return with_header(answer, _ZERO_HEADER)
        return answer

    def _pop_message(self, ctx: RemotingContext, request: RemotingCommand) -> Answer:
        c = self.context
        pop = self.pop
        request = with_born_time(request, pop.now())
        header = PopMessageRequestHeader.from_ext_fields(request.ext_fields)
        ip = c.config.broker_ip1
        if pop.now() - header.born_time - header.poll_time > _TIMEOUT_TOO_MUCH_MS:
            return request.make_response(
                ResponseCode.POLLING_TIMEOUT, f"the broker[{ip}] pop message is timeout too much"
            )
        refused = check_broker_readable(c, request, "pop")
        if refused is not None:
            return refused
        if header.max_msg_nums > MAX_POP_NUMS:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER, f"the broker[{ip}] pop message's num is greater than 32"
            )
        if header.max_msg_nums <= 0:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER, f"maxMsgNums {header.max_msg_nums} must be 1..{MAX_POP_NUMS}"
            )
        problem = invisible_time_problem(header.invisible_time)
        if problem is not None:
            return request.make_response(ResponseCode.INVALID_PARAMETER, problem)
        refused, topic_config = check_topic(c, request, header.topic, header.queue_id, ctx)
        if refused is not None:
            return refused
        if header.queue_id < 0:  # every queue (Java reads all for any negative id)
            header = dataclasses.replace(header, queue_id=-1)
        refused = check_group(c, request, header.consumer_group)
        if refused is not None:
            return refused
        try:
            matcher = message_filter(header.topic, header.exp, header.exp_type)
        except ValueError as exc:
            log.warning("pop of %s: expression %r does not parse: %s", header.consumer_group, header.exp, exc)
            return request.make_response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
            )
        assert topic_config is not None
        return Later(lambda: self._pop(ctx, request, header, topic_config.read_queue_nums, matcher))

    async def _woken(self, ctx: RemotingContext, request: RemotingCommand) -> RemotingCommand | None:
        """A held pop, run again (Java ``PopLongPollingService.wakeUp``)."""
        if not ctx.channel.is_open:
            return None
        answer = self.process(ctx, request)
        return await answer.resume() if isinstance(answer, Later) else answer

    async def _pop(
        self,
        ctx: RemotingContext,
        request: RemotingCommand,
        header: PopMessageRequestHeader,
        read_queue_nums: int,
        matcher: MessageFilter,
    ) -> RemotingCommand | None:
        c = self.context
        pop = self.pop
        cfg = c.config
        order = bool(header.order)
        random_q = self._random.randrange(100)
        revive_qid = POP_ORDER_REVIVE_QUEUE if order else pop.next_revive_qid()
        popped = _Popped(header, ctx.remote_addr, revive_qid, pop.now(), matcher)
        need_retry = random_q < cfg.pop_from_retry_probability
        need_retry_v1 = (
            cfg.enable_retry_topic_v2 and cfg.retrieve_message_from_pop_retry_topic_v1 and random_q % 2 == 0
        )
        retry_topic = (
            build_pop_retry_topic_v1(header.topic, header.consumer_group)
            if need_retry_v1
            else build_pop_retry_topic(header.topic, header.consumer_group, cfg.enable_retry_topic_v2)
        )
        rest_num = 0
        if need_retry and not order:
            rest_num = await self._pop_from_topic(retry_topic, True, popped, random_q, rest_num)
        if header.queue_id < 0:
            for i in range(read_queue_nums):
                queue_id = (random_q + i) % read_queue_nums
                rest_num = await self._pop_from_queue(header.topic, False, popped, queue_id, rest_num)
        else:
            rest_num = await self._pop_from_queue(header.topic, False, popped, header.queue_id, rest_num)
        if not need_retry and popped.room > 0 and not order:
            rest_num = await self._pop_from_topic(retry_topic, True, popped, random_q, rest_num)

        if popped.count:
            code = ResponseCode.SUCCESS
            status = GetMessageStatus.FOUND
            if rest_num > 0:  # another held pop of the key may take the rest
                pop.long_polling.notify_message_arriving(header.topic, header.queue_id, header.consumer_group)
        else:
            polling = pop.long_polling.polling(
                ctx,
                request,
                topic=header.topic,
                group=header.consumer_group,
                queue_id=header.queue_id,
                born_time=header.born_time,
                poll_time=header.poll_time,
                message_filter=matcher,
            )
            if polling is PollingResult.POLLING_SUC:
                if rest_num > 0:
                    pop.long_polling.notify_message_arriving(
                        header.topic, header.queue_id, header.consumer_group
                    )
                return None
            code = (
                ResponseCode.POLLING_FULL
                if polling is PollingResult.POLLING_FULL
                else ResponseCode.POLLING_TIMEOUT
            )
            status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        response_header = PopMessageResponseHeader(
            pop_time=popped.pop_time,
            invisible_time=header.invisible_time,
            revive_qid=revive_qid,
            rest_num=rest_num,
            start_offset_info=";".join(popped.start_offset_info),
            msg_offset_info=";".join(popped.msg_offset_info),
            order_count_info=";".join(popped.order_count_info) if order else None,
        )
        body = b"".join(popped.body) if code == ResponseCode.SUCCESS else b""
        return request.make_response(code, status.name, response_header.to_ext_fields(), body)

    async def _pop_from_topic(
        self, topic: str, is_retry: bool, popped: _Popped, random_q: int, rest_num: int
    ) -> int:
        topic_config = self.context.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            return rest_num
        queues = topic_config.read_queue_nums
        for i in range(queues):
            rest_num = await self._pop_from_queue(topic, is_retry, popped, (random_q + i) % queues, rest_num)
        return rest_num

    async def _pop_from_queue(
        self, topic: str, is_retry: bool, popped: _Popped, queue_id: int, rest_num: int
    ) -> int:
        """Java ``popMsgFromQueue``: take what the answer has room for from one queue; returns
        the messages left behind (``restNum``) so far."""
        c = self.context
        pop = self.pop
        header = popped.header
        group = header.consumer_group
        order = bool(header.order)
        store = c.store
        lock_key = build_polling_key(topic, group, queue_id)
        offset = self.get_pop_offset(topic, group, queue_id, header.init_mode, init=False, lock_key=lock_key)
        if not pop.queue_lock.try_lock(lock_key):
            if not order:
                rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
            return rest_num
        try:
            cfg = c.config
            if cfg.enable_pop_message_threshold and (
                pop.inflight.get(topic, group, queue_id) > cfg.pop_inflight_message_threshold
            ):
                log.warning(
                    "too many messages unacked, stop popping: topic=%s group=%s queue=%d",
                    topic,
                    group,
                    queue_id,
                )
                return rest_num + store.get_max_offset_in_queue(topic, queue_id) - offset
            offset = self.get_pop_offset(
                topic, group, queue_id, header.init_mode, init=True, lock_key=lock_key
            )
            if order:
                if pop.order_info.check_block(
                    header.attempt_id, topic, group, queue_id, header.invisible_time
                ):
                    return rest_num  # the queue's messages are out with another consumer
                pop.inflight.clear(topic, group, queue_id)
            if popped.room <= 0:
                return rest_num + store.get_max_offset_in_queue(topic, queue_id) - offset
            result = store.get_message(group, topic, queue_id, offset, popped.room, popped.message_filter)
            if result.status in (
                GetMessageStatus.OFFSET_TOO_SMALL,
                GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                GetMessageStatus.OFFSET_FOUND_NULL,
            ):
                # the stored offset is wrong: start again where the store says (Java commits it)
                log.warning(
                    "pop %s: offset %d of %s is %s, moving to %d",
                    lock_key,
                    offset,
                    topic,
                    result.status.name,
                    result.next_begin_offset,
                )
                result.release()
                c.consumer_offset_manager.commit_offset(
                    popped.client_host, group, topic, queue_id, result.next_begin_offset
                )
                offset = result.next_begin_offset
                result = store.get_message(group, topic, queue_id, offset, popped.room, popped.message_filter)
            try:
                records = [bytes(b) for b in result.buffers]
                queue_offsets = list(result.queue_offsets)
            finally:
                result.release()
            if records:
                size = sum(map(len, records))
                c.stats.record_pull(group, topic, len(records), size)
                if order:
                    popped.order_count_info.extend(
                        pop.order_info.update(
                            header.attempt_id,
                            topic,
                            group,
                            queue_id,
                            popped.pop_time,
                            header.invisible_time,
                            queue_offsets,
                        )
                    )
                    c.consumer_offset_manager.commit_offset(
                        popped.client_host, group, topic, queue_id, offset
                    )
                elif not await self._append_check_point(
                    topic, queue_id, offset, queue_offsets, popped, result.next_begin_offset
                ):
                    return rest_num + len(records)
                popped.start_offset_info.append(start_offset_info_item(topic, queue_id, offset))
                popped.msg_offset_info.append(msg_offset_info_item(topic, queue_id, queue_offsets))
            elif (
                result.status
                in (
                    GetMessageStatus.NO_MATCHED_MESSAGE,
                    GetMessageStatus.OFFSET_FOUND_NULL,
                    GetMessageStatus.MESSAGE_WAS_REMOVING,
                    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
                )
                and result.next_begin_offset > -1
            ):
                if order:
                    c.consumer_offset_manager.commit_offset(
                        popped.client_host, group, topic, queue_id, result.next_begin_offset
                    )
                else:
                    pop.buffer_merge.add_ck_mock(
                        group,
                        topic,
                        queue_id,
                        offset,
                        header.invisible_time,
                        popped.pop_time,
                        popped.revive_qid,
                        result.next_begin_offset,
                        cfg.broker_name,
                    )
            rest_num += result.max_offset - result.next_begin_offset
            self._add_messages(popped, topic, is_retry, offset, records, queue_offsets)
            pop.inflight.increment(topic, group, queue_id, len(records))
            return rest_num
        finally:
            pop.queue_lock.unlock(lock_key)

    def _add_messages(
        self,
        popped: _Popped,
        topic: str,
        is_retry: bool,
        start_offset: int,
        records: list[bytes],
        offsets: list[int],
    ) -> None:
        """Retry messages are answered as messages of the topic popped, with their check-point
        info in POP_CK (Java), unless ``popResponseReturnActualRetryTopic``."""
        popped.count += len(records)
        if not is_retry or self.context.config.pop_response_return_actual_retry_topic:
            popped.body.extend(records)
            return
        header = popped.header
        broker_name = self.context.config.broker_name
        for record, queue_offset in zip(records, offsets, strict=True):
            try:
                msg = decode_stored(record)
            except MessageDecodeError as exc:
                log.error("pop: retry message of %s at %d is undecodable: %s", topic, queue_offset, exc)
                continue
            info = ExtraInfo.build(
                start_offset,
                popped.pop_time,
                header.invisible_time,
                popped.revive_qid,
                msg.topic,
                broker_name,
                msg.queue_id,
                queue_offset,
            )
            properties = dict(msg.properties)
            properties.setdefault(MessageConst.PROPERTY_POP_CK, info.encode())
            popped.body.append(
                encode_message_ext(dataclasses.replace(msg, topic=header.topic, properties=properties))
            )

    async def _append_check_point(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        queue_offsets: list[int],
        popped: _Popped,
        next_begin_offset: int,
    ) -> bool:
        """Java ``appendCheckPoint``: the buffer keeps the check point, or it is written now."""
        header = popped.header
        ck = PopCheckPoint(
            bit_map=0,
            num=len(queue_offsets),
            pop_time=popped.pop_time,
            invisible_time=header.invisible_time,
            start_offset=offset,
            cid=header.consumer_group,
            topic=topic,
            queue_id=queue_id,
            broker_name=self.context.config.broker_name,
            queue_offset_diff=tuple(o - offset for o in queue_offsets),
        )
        self.pop.record_ck(header.consumer_group, header.topic)
        self.pop.note_check_point(topic, header.consumer_group, queue_id, popped.pop_time)
        buffer = self.pop.buffer_merge
        if buffer.add_ck(ck, popped.revive_qid, -1, next_begin_offset):
            return True
        return await buffer.add_ck_just_offset(ck, popped.revive_qid, -1, next_begin_offset)

    def get_pop_offset(
        self, topic: str, group: str, queue_id: int, init_mode: int, *, init: bool, lock_key: str
    ) -> int:
        """Where the group pops the queue from: its offset, or the buffer's newest one."""
        offset = self.context.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = self.get_init_offset(topic, group, queue_id, init_mode, init=init)
        buffer_offset = self.pop.buffer_merge.get_latest_offset(lock_key)
        return offset if buffer_offset < 0 else max(buffer_offset, offset)

    def get_init_offset(self, topic: str, group: str, queue_id: int, init_mode: int, *, init: bool) -> int:
        """Where a group that never consumed the queue starts (Java ``getInitOffset``): the
        queue's first message for ``initMode`` MIN and retry topics; for MAX, its last message,
        or its first when ``initPopOffsetByCheckMsgInMem`` and the whole queue is still in
        memory. ``init`` commits it."""
        store = self.context.store
        if init_mode == ConsumeInitMode.MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = min_offset(store, topic, queue_id)
        elif (
            self.context.config.init_pop_offset_by_check_msg_in_mem
            and min_offset(store, topic, queue_id) <= 0
            and store.get_max_offset_in_queue(topic, queue_id) > 0
            and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)
        ):
            offset = 0
        else:
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        if init:
            self.context.consumer_offset_manager.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset
