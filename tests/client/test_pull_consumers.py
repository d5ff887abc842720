"""The low-level pull API (``PullConsumer``) and the ``LitePullConsumer`` (subscribe or assign,
poll, seek, pause, commit)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from finchmq.client import (
    AdminClient,
    ClientStateError,
    ConsumeFromWhere,
    LitePullConsumer,
    MessageQueue,
    PullConsumer,
    PullStatus,
    ValidationError,
)
from finchmq.protocol.stored import iter_stored
from finchmq.testing import EmbeddedServer
from tests.waiting import DEFAULT_TIMEOUT, eventually

from .conftest import FAST_CLIENT, create_topic, produce


def pull_consumer(namesrv: str, group: str = "pull_group") -> PullConsumer:
    return PullConsumer(group, namesrv_addr=namesrv, instance_name=f"pc-{time.monotonic_ns()}")


async def test_pull_statuses_and_offsets(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    began = int(time.time() * 1000)
    await produce(namesrv, name, 5, tags="TagA")
    stored = int(time.time() * 1000)  # every message is stored by now
    mq = MessageQueue(name, "broker-a", 0)
    async with pull_consumer(namesrv) as c:
        assert await c.fetch_subscribe_message_queues(name) == {mq}
        found = await c.pull(mq, "*", 0, 3)
        assert found.pull_status is PullStatus.FOUND
        assert [m.body for m in found.msg_found_list] == [b"m0", b"m1", b"m2"]
        assert (found.next_begin_offset, found.min_offset, found.max_offset) == (3, 0, 5)
        assert found.msg_found_list[0].properties["MAX_OFFSET"] == "5"
        assert (await c.pull(mq, "*", 5, 32)).pull_status is PullStatus.NO_NEW_MSG
        illegal = await c.pull(mq, "*", 50, 32)
        # Java's rule for an offset past the end: restart at the min offset when it is 0
        assert illegal.pull_status is PullStatus.OFFSET_ILLEGAL and illegal.next_begin_offset == 0
        other = await c.pull(mq, "TagB || TagC", 0, 32)
        assert other.pull_status is PullStatus.NO_MATCHED_MSG and other.next_begin_offset == 5
        tagged = await c.pull(mq, "TagA", 0, 32)
        assert len(tagged.msg_found_list) == 5
        assert (await c.min_offset(mq), await c.max_offset(mq)) == (0, 5)
        earliest = await c.earliest_msg_store_time(mq)
        assert began <= earliest <= stored
        assert await c.search_offset(mq, stored + 60_000) in (4, 5)
        with pytest.raises(ValidationError, match="maxNums 0 out of range"):
            await c.pull(mq, "*", 0, 0)


async def test_committed_offsets_reach_the_broker(server: EmbeddedServer, namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    mq = MessageQueue(name, "broker-a", 1)
    async with pull_consumer(namesrv, "pull_commit") as c:
        c.update_consume_offset(mq, 7)
        assert await c.fetch_consume_offset(mq, from_store=False) == 7
    async with pull_consumer(namesrv, "pull_commit") as c:
        assert await c.fetch_consume_offset(mq, from_store=True) == 7, "persisted by close()"
    assert server.broker is not None
    assert server.broker.consumer_offset_manager.query_offset("pull_commit", name, 1) == 7


async def test_blocking_pull_wakes_when_a_message_arrives(
    server: EmbeddedServer, namesrv: str, name: str
) -> None:
    await create_topic(namesrv, name, 1)
    assert server.broker is not None
    hold = server.broker.pull_hold_service
    mq = MessageQueue(name, "broker-a", 0)
    async with pull_consumer(namesrv) as c:
        pulling = asyncio.get_running_loop().create_task(c.pull_block_if_not_found(mq, "*", 0, 32))
        await eventually(lambda: (name, 0) in hold._table, what="the pull held by the broker")
        assert not pulling.done()
        wakeups = dict(hold.wakeups)
        await produce(namesrv, name, 1)
        result = await pulling
    assert result.pull_status is PullStatus.FOUND
    # woken by the arrival, not by the suspend timeout
    assert hold.wakeups == {"arrival": wakeups["arrival"] + 1, "timeout": wakeups["timeout"]}


def lite(namesrv: str, group: str, **kwargs: object) -> LitePullConsumer:
    settings = {
        **FAST_CLIENT,
        "instance_name": f"lp-{time.monotonic_ns()}",
        "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **kwargs,
    }
    return LitePullConsumer(group, namesrv_addr=namesrv, **settings)


async def poll_all(c: LitePullConsumer, count: int, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """Poll until ``count`` bodies came (or ``timeout`` s passed: the caller's assertion shows)."""
    bodies: list[str] = []
    deadline = time.monotonic() + timeout
    while len(bodies) < count and time.monotonic() < deadline:
        bodies.extend(m.body.decode() for m in await c.poll(500))
    return bodies


async def test_lite_pull_subscribe_poll_and_commit(server: EmbeddedServer, namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 4)
    await produce(namesrv, name, 40, tags="TagA")
    await produce(namesrv, name, 10, tags="TagB", prefix="b")
    group = f"g_{name}"
    c = lite(namesrv, group, auto_commit=False, pull_batch_size=5)
    c.subscribe(name, "TagA")
    async with c:
        bodies = await poll_all(c, 40)
        assert sorted(bodies) == sorted(f"m{i}" for i in range(40))

        async def committed() -> dict[MessageQueue, int] | None:
            await c.commit_sync()
            offsets = {mq: await c.committed(mq) for mq in c.assignment()}
            return offsets if sum(offsets.values()) == 50 else None

        # the TagB messages were skipped, not left behind: the positions pass them (a pull that
        # finds none of TagA moves them), and nothing is left to poll
        assert await eventually(committed, what="committed offsets at 50")
        assert await c.poll(300) == [], "nothing left: poll times out empty"
    assert server.broker is not None
    assert sum(server.broker.consumer_offset_manager.query_offset(group, name, q) for q in range(4)) == 50
    c = lite(namesrv, group)
    c.subscribe(name, "TagA")
    async with c:
        await produce(namesrv, name, 3, tags="TagA", prefix="again")
        assert sorted(await poll_all(c, 3)) == ["again0", "again1", "again2"], "resumed at the commits"


async def test_lite_pull_assign_seek_and_pause(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    mq0, mq1 = MessageQueue(name, "broker-a", 0), MessageQueue(name, "broker-a", 1)
    await produce(namesrv, name, 20)
    c = lite(namesrv, f"g_{name}")
    c.assign([mq0])
    with pytest.raises(ClientStateError, match="mutually exclusive"):
        c.subscribe(name)
    async with c:
        first = await poll_all(c, 10)
        assert len(first) >= 1 and all(b in {f"m{i}" for i in range(20)} for b in first)
        count0 = await c.instance.max_offset(mq0)
        first += await poll_all(c, count0 - len(first))
        assert len(first) == count0, "only the assigned queue"
        await c.seek(mq0, 0)
        again = await poll_all(c, count0)
        assert again == first, "seek replays the queue in order"
        with pytest.raises(ValidationError, match="Seek offset illegal"):
            await c.seek(mq0, count0 + 5)
        api = c._pull_api
        assert api is not None
        send = api.pull_kernel_raw
        paused: set[MessageQueue] = set()
        sent_while_paused: list[MessageQueue] = []

        def watched_send(mq: MessageQueue, *args: Any) -> Any:
            if mq in paused:
                sent_while_paused.append(mq)
            return send(mq, *args)

        api.pull_kernel_raw = watched_send  # type: ignore[method-assign]
        c.pause([mq0])
        paused.add(mq0)
        # The seek restarts the queue's pull task; its first step runs as soon as this coroutine
        # waits: a pull it sent despite the pause would be recorded before the poll below ends.
        await c.seek_to_begin(mq0)
        assert await c.poll(700) == [], "paused"
        assert sent_while_paused == [], "no pull of a paused queue"
        c.resume([mq0])
        paused.clear()
        assert len(await poll_all(c, count0)) == count0
        c.assign([mq1])
        assert c.assignment() == {mq1}
        assert len(await poll_all(c, 20 - count0)) == 20 - count0


async def test_lite_pull_members_share_the_queues(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 4)
    group = f"g_{name}"
    a = lite(namesrv, group, instance_name="lite-A")
    b = lite(namesrv, group, instance_name="lite-B")
    a.subscribe(name)
    b.subscribe(name)
    async with a, b:
        await eventually(
            lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, what="two queues each"
        )
        assert a.assignment().isdisjoint(b.assignment())
        await produce(namesrv, name, 40)
        got_a: list[str] = []
        got_b: list[str] = []

        async def both_poll() -> bool:
            polled_a, polled_b = await asyncio.gather(a.poll(100), b.poll(100))
            got_a.extend(m.body.decode() for m in polled_a)
            got_b.extend(m.body.decode() for m in polled_b)
            return len(got_a) + len(got_b) >= 40

        await eventually(both_poll, what="the 40 messages polled by the two members")
    assert sorted(got_a + got_b) == sorted(f"m{i}" for i in range(40))
    assert got_a and got_b


async def test_pull_raw_returns_the_stored_records_undecoded(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 1)
    await produce(namesrv, name, 4, tags="TagA")
    mq = MessageQueue(name, "broker-a", 0)
    async with pull_consumer(namesrv) as c:
        raw = await c.pull_raw(mq, "*", 1, 32)
        decoded = await c.pull(mq, "*", 1, 32)
    assert raw.pull_status is PullStatus.FOUND and raw.next_begin_offset == decoded.next_begin_offset == 4
    records = list(iter_stored(raw.body))
    assert [r.body for r in records] == [m.body for m in decoded.msg_found_list] == [b"m1", b"m2", b"m3"]


async def test_admin_stores_offsets_for_a_group_that_keeps_them_elsewhere(namesrv: str, name: str) -> None:
    await create_topic(namesrv, name, 2)
    await produce(namesrv, name, 10)
    group = f"g_{name}"
    mqs = [MessageQueue(name, "broker-a", q) for q in (0, 1)]
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.update_consume_offsets(group, {mqs[0]: 2, mqs[1]: 3})
        stats = await admin.consume_stats(group, name)
    assert {mq: w.consumer_offset for mq, w in stats.offset_table.items()} == {mqs[0]: 2, mqs[1]: 3}
    assert stats.compute_total_diff() == 5
