"""A raw POP "client" for the broker tests: the requests Java 5.x's client sends (POP_MESSAGE,
ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, PEEK_MESSAGE, NOTIFICATION,
POLLING_INFO), and what it makes of a POP answer (Java ``MQClientAPIImpl.processPopResponse``):
each message gets its extra info in POP_CK, from ``startOffsetInfo``/``msgOffsetInfo``, unless the
broker set it (a message from the pop retry topic)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import BatchAck, BatchAckMessageRequestBody, JavaBitSet, KVTable
from finchmq.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from finchmq.protocol.message import MessageExt
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import (
    ExtraInfo,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    queue_offset_map_key,
    start_offset_map_key,
)
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient
from tests.waiting import eventually

RPC_TIMEOUT_MS = 30_000


@dataclass
class Popped:
    """A message as a pop consumer holds it."""

    msg: MessageExt
    extra: ExtraInfo
    consumed: int = 0  # orderly: how often handed out before (orderCountInfo)

    @property
    def body(self) -> bytes:
        return self.msg.body

    @property
    def ck(self) -> str:
        return self.msg.properties[MessageConst.PROPERTY_POP_CK]


@dataclass
class PopAnswer:
    response: RemotingCommand
    header: PopMessageResponseHeader | None
    messages: list[Popped] = field(default_factory=list)

    @property
    def code(self) -> int:
        return self.response.code


@dataclass
class PopClient:
    """Speaks POP to one broker as group ``group``."""

    client: RemotingClient
    addr: str
    group: str
    broker_name: str = "broker-a"

    async def call(self, code: int, ext: dict[str, str], body: bytes = b"", timeout: int = RPC_TIMEOUT_MS
                   ) -> RemotingCommand:  # fmt: skip
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout)

    async def pop(
        self, topic: str, *, queue_id: int = -1, max_nums: int = 32, invisible_ms: int = 60_000, poll_ms: int = 0,
        init_mode: int = 0, exp: str | None = None, exp_type: str | None = None, order: bool = False,
        attempt_id: str | None = None, born_time: int | None = None,
    ) -> PopAnswer:  # fmt: skip
        header = PopMessageRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=queue_id, max_msg_nums=max_nums,
            invisible_time=invisible_ms, poll_time=poll_ms,
            born_time=int(time.time() * 1000) if born_time is None else born_time, init_mode=init_mode,
            exp_type=exp_type, exp=exp, order=order, attempt_id=attempt_id, broker_name=self.broker_name,
        )  # fmt: skip
        timeout = max(RPC_TIMEOUT_MS, poll_ms + 10_000)
        response = await self.call(RequestCode.POP_MESSAGE, header.to_ext_fields(), timeout=timeout)
        return self.parse(topic, response, order=order)

    def parse(self, topic: str, response: RemotingCommand, *, order: bool = False) -> PopAnswer:
        """Java ``processPopResponse``."""
        if response.code not in (
            ResponseCode.SUCCESS, ResponseCode.POLLING_FULL, ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND,
        ):  # fmt: skip
            return PopAnswer(response, None)
        header = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        answer = PopAnswer(response, header)
        if response.code != ResponseCode.SUCCESS:
            return answer
        starts = parse_start_offset_info(header.start_offset_info) or {}
        parse_msg_offset_info(header.msg_offset_info)  # must parse, as Java's client parses it
        counts = parse_order_count_info(header.order_count_info) or {}
        for msg in decode_stored_all(response.body):
            pop_ck = msg.properties.get(MessageConst.PROPERTY_POP_CK)
            if pop_ck is not None:
                extra = ExtraInfo.parse(pop_ck)
            else:
                key = start_offset_map_key(msg.topic, msg.queue_id)
                extra = ExtraInfo.build(
                    starts[key], header.pop_time, header.invisible_time, header.revive_qid, msg.topic,
                    self.broker_name, msg.queue_id, msg.queue_offset,
                )  # fmt: skip
                msg.properties[MessageConst.PROPERTY_POP_CK] = extra.encode()
            consumed = 0
            if order:
                key = start_offset_map_key(msg.topic, msg.queue_id)
                consumed = counts.get(
                    queue_offset_map_key(msg.topic, msg.queue_id, msg.queue_offset), counts.get(key, 0)
                )
            answer.messages.append(Popped(msg, extra, consumed))
        return answer

    def _target(self, popped: Popped, topic: str | None = None) -> tuple[str, int, int]:
        extra = popped.extra
        assert extra.queue_id is not None and extra.queue_offset is not None
        return extra.real_topic(topic or popped.msg.topic, self.group), extra.queue_id, extra.queue_offset

    async def ack(self, popped: Popped, *, extra_info: str | None = None) -> RemotingCommand:
        topic, queue_id, offset = self._target(popped)
        header = AckMessageRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=queue_id, offset=offset,
            extra_info=extra_info if extra_info is not None else popped.extra.encode(),
        )  # fmt: skip
        return await self.call(RequestCode.ACK_MESSAGE, header.to_ext_fields())

    async def batch_ack(self, messages: list[Popped]) -> RemotingCommand:
        """One BatchAck per check point (the messages of one pop of one queue)."""
        by_ck: dict[tuple[int, int, int, str, int], list[Popped]] = {}
        for popped in messages:
            e = popped.extra
            by_ck.setdefault(
                (e.ck_queue_offset, e.pop_time, e.queue_id or 0, e.retry, e.revive_qid), []
            ).append(popped)
        acks = []
        for (start, pop_time, queue_id, retry, revive_qid), group in by_ck.items():
            acks.append(
                BatchAck(
                    consumer_group=self.group, topic=group[0].msg.topic, retry=retry, start_offset=start,
                    queue_id=queue_id, revive_queue_id=revive_qid, pop_time=pop_time,
                    invisible_time=group[0].extra.invisible_time,
                    bit_set=JavaBitSet((p.extra.queue_offset or 0) - start for p in group),
                )
            )  # fmt: skip
        body = BatchAckMessageRequestBody(broker_name=self.broker_name, acks=tuple(acks))
        return await self.call(RequestCode.BATCH_ACK_MESSAGE, {}, body.to_json())

    async def change_invisible_time(self, popped: Popped, invisible_ms: int) -> RemotingCommand:
        """Change it; on success ``popped.extra`` is the new extra info (as Java's client builds it)."""
        topic, queue_id, offset = self._target(popped)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=queue_id, offset=offset,
            extra_info=popped.extra.encode(), invisible_time=invisible_ms,
        )  # fmt: skip
        response = await self.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields())
        if response.code == ResponseCode.SUCCESS:
            answer = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
            e = popped.extra
            popped.extra = ExtraInfo(
                offset if not e.is_order else e.ck_queue_offset, answer.pop_time, answer.invisible_time,
                answer.revive_qid, e.retry, e.broker_name, e.queue_id, e.queue_offset,
            )  # fmt: skip
        return response

    async def peek(
        self, topic: str, *, queue_id: int = -1, max_nums: int = 32
    ) -> tuple[RemotingCommand, list[MessageExt]]:
        header = PeekMessageRequestHeader(
            topic=topic, queue_id=queue_id, max_msg_nums=max_nums, consumer_group=self.group
        )
        response = await self.call(RequestCode.PEEK_MESSAGE, header.to_ext_fields())
        return response, decode_stored_all(response.body) if response.body else []

    async def notification(self, topic: str, *, queue_id: int = -1, poll_ms: int = 0, order: bool = False
                           ) -> tuple[RemotingCommand, NotificationResponseHeader | None]:  # fmt: skip
        header = NotificationRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=queue_id, poll_time=poll_ms,
            born_time=int(time.time() * 1000), order=order,
        )  # fmt: skip
        response = await self.call(
            RequestCode.NOTIFICATION, header.to_ext_fields(), timeout=max(RPC_TIMEOUT_MS, poll_ms + 10_000)
        )
        if response.code != ResponseCode.SUCCESS:
            return response, None
        return response, NotificationResponseHeader.from_ext_fields(response.ext_fields)

    async def revive_settled(self) -> bool:
        """Every check point the broker wrote was read, and each acked or revived (nothing
        pending), as its runtime info says."""
        response = await self.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        info = KVTable.from_json(response.body).table
        return (
            info["popRevivePendingCheckPoints"] == "0"
            and info["popReviveBehindMessages"] == "0"
            and info["popOffsetBufferSize"] == "0"
        )

    async def polling_info(self, topic: str, *, queue_id: int = -1) -> int:
        header = PollingInfoRequestHeader(consumer_group=self.group, topic=topic, queue_id=queue_id)
        response = await self.call(RequestCode.POLLING_INFO, header.to_ext_fields())
        assert response.code == ResponseCode.SUCCESS, response.remark
        return PollingInfoResponseHeader.from_ext_fields(response.ext_fields).polling_num


async def pop_until(
    client: PopClient, topic: str, want: int, *, what: str, **options: object
) -> list[Popped]:
    """Pop (long polling) until ``want`` messages came; returns them."""
    got: list[Popped] = []

    async def more() -> bool:
        answer = await client.pop(topic, poll_ms=1000, **options)  # type: ignore[arg-type]
        assert answer.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), answer.response.remark
        got.extend(answer.messages)
        return len(got) >= want

    await eventually(more, what=what)
    return got
