"""A property of POP's bookkeeping (check points, acks, the buffer, revive), over any interleaving
of pops, acks, changes of invisible time, revive scans and the passing of time.

The broker's processors run on a ``BrokerContext`` over a store in a temporary directory (as
``test_processors.py``), with pop's clock replaced by one the test moves; revive scans run when
the test says. Properties:

- a message acked in time (before its delivery's invisible time ends) is never handed out again,
  and a message not acked is not handed out again before that time;
- in the end (time moves on, revive runs, everything is popped and acked), the last delivery of
  every message was acked (an ack after the invisible time still counts if it came before the
  revive, as in Java); nothing is lost and nothing stays behind (revive has nothing pending, the
  pop offsets reach the end of the queues).
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.broker import BrokerConfig
from finchmq.broker.broker2client import Broker2Client
from finchmq.broker.context import BrokerContext, build_broker_context
from finchmq.broker.processor import (
    AckMessageProcessor,
    ChangeInvisibleTimeProcessor,
    PopMessageProcessor,
    SendMessageProcessor,
)
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import TopicConfig
from finchmq.protocol.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    SendMessageRequestHeaderV2,
)
from finchmq.protocol.message_const import MessageConst
from finchmq.protocol.pop import ExtraInfo, parse_start_offset_info, start_offset_map_key
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import (
    ExecutorName,
    LocalChannel,
    RemotingContext,
    RemotingServer,
    RemotingServerConfig,
    RequestDispatcher,
    RequestExecutor,
)
from finchmq.store import MessageStoreConfig

TOPIC, GROUP = "T_prop", "G_prop"
MESSAGES = 6
MARGIN = 2000  # ms: revive waits ackTimeInterval + 1 s past a check point's revive time


class Clock:
    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


@dataclass
class Delivery:
    body: bytes
    at: int
    deadline: int  # ms: the end of its invisible time
    extra: ExtraInfo
    topic: str  # the topic the message was popped from (a pop retry topic for a redelivery)
    acked: bool = False  # acked at all: late, it may still have stopped the revive
    acked_in_time: bool = False


@dataclass
class World:
    context: BrokerContext
    clock: Clock
    pop: PopMessageProcessor
    ack: AckMessageProcessor
    change: ChangeInvisibleTimeProcessor
    deliveries: list[Delivery] = field(default_factory=list)
    # messages whose invisible time was changed after it ended: the old check point may be revived
    # as well as the new one, so a second copy may come back at any time (at least once, still)
    loose: set[bytes] = field(default_factory=set)
    peer: RemotingContext = field(
        default_factory=lambda: RemotingContext(LocalChannel(RequestDispatcher(), "127.0.0.1:40001"))
    )

    async def call(self, processor: object, code: int, ext: dict[str, str]) -> RemotingCommand:
        response = await processor.process_request(self.peer, RemotingCommand.request(code, ext))  # type: ignore[attr-defined]
        assert response is not None
        return response

    async def do_pop(self, max_nums: int, invisible: int) -> None:
        now = self.clock()
        header = PopMessageRequestHeader(
            consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=max_nums, invisible_time=invisible,
            poll_time=0, born_time=now, init_mode=0,
        )  # fmt: skip
        response = await self.call(self.pop, RequestCode.POP_MESSAGE, header.to_ext_fields())
        if response.code != ResponseCode.SUCCESS:
            assert response.code == ResponseCode.POLLING_TIMEOUT, response.remark
            return
        answer = PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        starts = parse_start_offset_info(answer.start_offset_info) or {}
        for msg in decode_stored_all(response.body):
            pop_ck = msg.properties.get(MessageConst.PROPERTY_POP_CK)
            if pop_ck is not None:
                extra = ExtraInfo.parse(pop_ck)
            else:
                extra = ExtraInfo.build(
                    starts[start_offset_map_key(msg.topic, msg.queue_id)], answer.pop_time, answer.invisible_time,
                    answer.revive_qid, msg.topic, "broker-a", msg.queue_id, msg.queue_offset,
                )  # fmt: skip
            for earlier in self.deliveries:
                if earlier.body != msg.body or earlier.body in self.loose:
                    continue
                assert not earlier.acked_in_time, f"{msg.body!r} handed out again after an ack in time"
                assert now >= earlier.deadline, f"{msg.body!r} handed out again while still invisible"
            self.deliveries.append(
                Delivery(msg.body, now, now + invisible, extra, extra.real_topic(TOPIC, GROUP))
            )

    def _ext(self, delivery: Delivery) -> dict[str, str]:
        extra = delivery.extra
        return {
            "consumerGroup": GROUP, "topic": delivery.topic, "queueId": str(extra.queue_id),
            "offset": str(extra.queue_offset), "extraInfo": extra.encode(),
        }  # fmt: skip

    async def do_ack(self, index: int) -> None:
        if not self.deliveries:
            return
        delivery = self.deliveries[index % len(self.deliveries)]
        ext = self._ext(delivery)
        header = AckMessageRequestHeader(
            consumer_group=GROUP, topic=ext["topic"], queue_id=int(ext["queueId"]), offset=int(ext["offset"]),
            extra_info=ext["extraInfo"],
        )  # fmt: skip
        response = await self.call(self.ack, RequestCode.ACK_MESSAGE, header.to_ext_fields())
        assert response.code == ResponseCode.SUCCESS, response.remark
        delivery.acked = True
        if self.clock() < delivery.deadline:
            delivery.acked_in_time = True

    async def do_change(self, index: int, invisible: int) -> None:
        if not self.deliveries:
            return
        delivery = self.deliveries[index % len(self.deliveries)]
        if delivery.acked_in_time:
            return  # a client changes only what it has not acked
        ext = self._ext(delivery)
        now = self.clock()
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=GROUP, topic=ext["topic"], queue_id=int(ext["queueId"]), offset=int(ext["offset"]),
            extra_info=ext["extraInfo"], invisible_time=invisible,
        )  # fmt: skip
        response = await self.call(
            self.change, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields()
        )
        assert response.code == ResponseCode.SUCCESS, response.remark
        answer = ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        if now >= delivery.deadline:
            self.loose.add(delivery.body)
        extra = delivery.extra
        delivery.extra = replace(
            extra, ck_queue_offset=extra.queue_offset or 0, pop_time=answer.pop_time,
            invisible_time=answer.invisible_time,
        )  # fmt: skip
        delivery.deadline = now + invisible

    async def do_revive(self) -> None:
        pop = self.context.pop
        await pop.buffer_merge.scan()
        for service in pop.revive_services:
            await service.revive_once()
        await pop.buffer_merge.scan()

    async def drain(self) -> None:
        """Move time on, revive, pop and ack everything until nothing comes back."""
        quiet = 0
        for _ in range(60):
            self.clock.now += 70_000
            await self.do_revive()
            before = len(self.deliveries)
            await self.do_pop(32, 60_000)
            for index in range(before, len(self.deliveries)):
                await self.do_ack(index)
            quiet = quiet + 1 if len(self.deliveries) == before else 0
            if quiet >= 3:
                return
        raise AssertionError("messages kept coming back")


@asynccontextmanager
async def world(merge: bool) -> AsyncIterator[World]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store_config = MessageStoreConfig(
            store_path_root_dir=root, mapped_file_size_commit_log=1024 * 1024,
            mapped_file_size_consume_queue=1000 * 20, max_hash_slot_num=1000, max_index_num=4000,
        )  # fmt: skip
        server = RemotingServer(RemotingServerConfig(listen_port=0), name="unit")  # never started
        broker2client = Broker2Client(server, lambda coro, name: coro.close())
        config = BrokerConfig(enable_pop_buffer_merge=merge, revive_queue_num=2)
        context = build_broker_context(config, store_config, broker2client)
        clock = Clock()
        context.pop.clock = clock
        context.store.load()
        context.store.start()
        context.put_service.start()
        context.topic_config_manager.update_topic_config(
            TopicConfig(topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2)
        )
        pull = RequestExecutor(ExecutorName.PULL, workers=1, capacity=10)
        pop = PopMessageProcessor(context, pull)
        pop._random = random.Random(0)  # where a pop starts: one answer per example, for shrinking
        try:
            yield World(
                context, clock, pop, AckMessageProcessor(context), ChangeInvisibleTimeProcessor(context)
            )
        finally:
            context.put_service.close()
            context.store.shutdown()


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(1, 4), st.sampled_from([1000, 4000, 20_000])),
        st.tuples(st.just("ack"), st.integers(0, 50)),
        st.tuples(st.just("change"), st.integers(0, 50), st.sampled_from([0, 1000, 8000])),
        st.tuples(st.just("time"), st.sampled_from([300, 1500, 5000])),
        st.tuples(st.just("revive")),
    ),
    max_size=80,
)


# 500 examples per suite run (about 15 s); the change-invisible fix was found and checked with 5000
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS, merge=st.booleans())
@pytest.mark.timeout(600)
async def test_every_message_ends_acked_and_is_never_handed_out_while_invisible_or_acked(
    operations: list[tuple[object, ...]], merge: bool
) -> None:
    async with world(merge) as w:
        send = SendMessageProcessor(w.context)
        for i in range(MESSAGES):
            header = SendMessageRequestHeaderV2(
                producer_group="pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=2,
                queue_id=i % 2, sys_flag=0, born_timestamp=w.clock(), flag=0,
            )  # fmt: skip
            request = RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), f"m{i}".encode()
            )
            sent = await send.process_request(w.peer, request)
            assert sent is not None and sent.code == ResponseCode.SUCCESS
        for operation in operations:
            kind = operation[0]
            if kind == "pop":
                await w.do_pop(int(operation[1]), int(operation[2]))  # type: ignore[call-overload]
            elif kind == "ack":
                await w.do_ack(int(operation[1]))  # type: ignore[call-overload]
            elif kind == "change":
                await w.do_change(int(operation[1]), int(operation[2]))  # type: ignore[call-overload]
            elif kind == "time":
                w.clock.now += int(operation[1])  # type: ignore[call-overload]
            else:
                await w.do_revive()
        await w.drain()
        last: dict[bytes, Delivery] = {}
        for delivery in w.deliveries:
            last[delivery.body] = delivery
        assert sorted(last) == [f"m{i}".encode() for i in range(MESSAGES)], "a message was never handed out"
        lost = sorted(body for body, delivery in last.items() if not delivery.acked)
        assert not lost, f"handed out, not acked, never back: {lost}"
        pop = w.context.pop
        assert all(not s.pending and not s.orphans for s in pop.revive_services), "revive kept a check point"
        offsets = w.context.consumer_offset_manager
        for queue_id in range(2):
            end = w.context.store.get_max_offset_in_queue(TOPIC, queue_id)
            assert offsets.query_offset(GROUP, TOPIC, queue_id) == end, "the pop offset did not reach the end"
