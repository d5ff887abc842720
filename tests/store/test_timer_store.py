"""``TimerMessageStore`` on real files (a store in ``tmp_path``, 100 ms precision): delivery in time
order and never early, rolls through the wheel, recall markers, the timer log's recovery, and the
replay after a crash that delivers nothing twice."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.protocol.message import MessageExt
from finchmq.protocol.stored import decode_stored
from finchmq.protocol.topics import TIMER_TOPIC
from finchmq.store import (
    DefaultMessageStore,
    MessageExtBrokerInner,
    PutMessageStatus,
    stored_properties_string,
)
from finchmq.store.timer import TimerMessageStore, TimerWheel, build_delete_key
from tests.waiting import wait_until

from .conftest import small_config

PRECISION = 100


def now_ms() -> int:
    return int(time.time() * 1000)


class Timer:
    """A store and its timer, opened (and reopened) on one directory."""

    def __init__(self, root: Path, **overrides: object) -> None:
        self.root = root
        self.overrides = {"timer_precision_ms": PRECISION, "mapped_file_size_timer_log": 52 * 40, **overrides}
        self.store: DefaultMessageStore | None = None
        self.timer: TimerMessageStore | None = None
        self._uniq = 0

    def open(self) -> TimerMessageStore:
        self.store = DefaultMessageStore(small_config(self.root, **self.overrides))
        self.store.load()
        self.store.start()
        self.timer = TimerMessageStore(self.store)
        self.timer.load()
        self.timer.start()
        return self.timer

    def close(self) -> None:
        if self.timer is not None:
            self.timer.shutdown()
        if self.store is not None:
            self.store.shutdown()
        self.timer = self.store = None

    def put(self, body: bytes, deliver_ms: int, topic: str = "T", **extra: str) -> str:
        """Store a timer message as the broker's hook leaves it; returns its UNIQ_KEY."""
        assert self.store is not None
        out = deliver_ms - PRECISION if deliver_ms % PRECISION == 0 else deliver_ms // PRECISION * PRECISION
        self._uniq += 1
        uniq = extra.pop("UNIQ_KEY", f"U{self._uniq:08d}")
        props = {"TIMER_DELIVER_MS": str(deliver_ms), "TIMER_OUT_MS": str(out), "REAL_TOPIC": topic,
                 "REAL_QID": "0", "UNIQ_KEY": uniq, **extra}  # fmt: skip
        inner = MessageExtBrokerInner(
            TIMER_TOPIC, body, 0, properties=props, properties_string=stored_properties_string(props)
        )
        assert self.store.put_message(inner).status is PutMessageStatus.PUT_OK
        return uniq

    def delivered(self, topic: str = "T") -> list[MessageExt]:
        assert self.store is not None
        found: list[MessageExt] = []
        offset = 0
        while True:
            result = self.store.get_message("inspector", topic, 0, offset, 32)
            with result:
                found += [decode_stored(b) for b in result.buffers]
                if not result.buffers:
                    return found
                offset = result.next_begin_offset

    def wait_delivered(self, count: int, topic: str = "T") -> list[MessageExt]:
        return wait_until(
            lambda: (m := self.delivered(topic)) and len(m) >= count and m, what=f"{count} delivered"
        )


@pytest.fixture
def timer(tmp_path: Path) -> Iterator[Timer]:
    t = Timer(tmp_path / "store")
    t.open()
    yield t
    t.close()


def test_timers_arrive_in_time_order_and_never_early(timer: Timer) -> None:
    base = now_ms() + 800
    offsets = [700, 0, 300, 1100, 200, 200, 900]
    for i, offset in enumerate(offsets):
        timer.put(b"m%d" % i, base + offset)
    found = timer.wait_delivered(len(offsets))
    assert len(found) == len(offsets)
    times = [int(m.properties["TIMER_DELIVER_MS"]) for m in found]
    assert all(m.store_timestamp >= t for m, t in zip(found, times, strict=True)), "none early"
    outs = [int(m.properties["TIMER_OUT_MS"]) for m in found]
    assert outs == sorted(outs), "slot by slot"
    assert {m.body for m in found} == {b"m%d" % i for i in range(len(offsets))}


def test_a_time_past_the_window_rolls_and_arrives_on_time(tmp_path: Path) -> None:
    t = Timer(tmp_path / "store", timer_roll_window_slot=3)  # 300 ms of wheel ahead
    t.open()
    try:
        deliver = now_ms() + 1500
        t.put(b"far", deliver)
        [m] = t.wait_delivered(1)
        assert m.store_timestamp >= deliver
        assert int(m.properties["TIMER_ROLL_TIMES"]) >= 2
        assert t.store.get_max_offset_in_queue(TIMER_TOPIC, 0) >= 3, "each roll went back through the topic"  # type: ignore[union-attr]
    finally:
        t.close()


def test_a_recall_marker_in_the_slot_drops_the_message(timer: Timer) -> None:
    deliver = now_ms() + 1000
    uniq = timer.put(b"recalled", deliver)
    timer.put(b"kept", deliver)
    timer.put(
        b"0", deliver + 1, UNIQ_KEY=uniq, TIMER_DEL_UNIQKEY=build_delete_key("T", uniq), TAGS="_RECALL_TAG_"
    )
    timer.put(b"after", deliver + 300)
    found = timer.wait_delivered(2)
    assert [m.body for m in found] == [b"kept", b"after"]
    assert timer.timer is not None
    wait_until(lambda: timer.timer.timer_metrics.counts().get("T") == 0, what="the topic's count back to 0")  # type: ignore[union-attr]


def test_pending_timers_survive_a_clean_restart(tmp_path: Path) -> None:
    t = Timer(tmp_path / "store")
    t.open()
    deliver = now_ms() + 1500
    for i in range(20):
        t.put(b"m%d" % i, deliver + i * 20)
    wait_until(lambda: t.timer.get_enqueue_behind_messages() == 0, what="all enqueued")  # type: ignore[union-attr]
    t.close()
    t.open()
    found = t.wait_delivered(20)
    t.close()
    assert sorted(m.body for m in found) == sorted(b"m%d" % i for i in range(20))
    assert all(m.store_timestamp >= int(m.properties["TIMER_DELIVER_MS"]) for m in found)


def test_a_crash_after_a_checkpoint_delivers_nothing_twice(tmp_path: Path) -> None:
    """The checkpoint a crash leaves is older than the work done: recovery starts from it, and
    the units already in the timer log and the deliveries already in the commit log past it
    are recognised."""
    t = Timer(tmp_path / "store")
    t.open()
    deliver = now_ms() + 1500
    for i in range(30):
        t.put(b"early%d" % i, deliver + (i % 5) * 100)
    timer = t.timer
    assert timer is not None
    wait_until(lambda: timer.get_enqueue_behind_messages() == 0, what="the first half enqueued")
    timer.flush()
    checkpoint = tmp_path / "checkpoint-then"
    shutil.copy(timer.timer_checkpoint.path, checkpoint)  # type: ignore[union-attr]
    for i in range(30):
        t.put(b"late%d" % i, deliver + 600 + (i % 5) * 100)
    t.wait_delivered(60)
    t.close()
    # the crash: the flushed checkpoint is the one from before half of the work
    shutil.copy(checkpoint, tmp_path / "store" / "config" / "timercheck")
    timer = t.open()
    # 30 + 30 deliveries past the checkpoint, and the 30 units of the late ones not enqueued again
    wait_until(lambda: timer.replay_skipped >= 90, what="the replay recognised everything done")
    t.put(b"sentinel", now_ms() + 200)
    found = t.wait_delivered(61)
    skipped = timer.replay_skipped
    t.close()
    assert skipped == 90
    counts = Counter(m.body for m in found)
    assert counts[b"sentinel"] == 1
    assert [body for body, n in counts.items() if n != 1] == [], "delivered twice"
    assert len(counts) == 61


def test_a_torn_unit_ends_the_log_and_the_wheel_is_revised(tmp_path: Path) -> None:
    t = Timer(tmp_path / "store", mapped_file_size_timer_log=52 * 1000)
    timer = t.open()
    deliver = now_ms() + 60_000
    for i in range(5):
        t.put(b"m%d" % i, deliver)
    wait_until(lambda: timer.get_enqueue_behind_messages() == 0, what="enqueued")
    t.close()
    segment = tmp_path / "store" / "timerlog" / f"{0:020d}"
    data = bytearray(segment.read_bytes())
    data[5 * 52 : 5 * 52 + 16] = b"\x00\x00\x00\x34" + b"\xff" * 12  # a unit with a bad magic
    segment.write_bytes(bytes(data))
    timer = t.open()
    assert timer.timer_log.get_max_offset() == 5 * 52, "truncated at the torn unit"
    slot = timer.timer_wheel.get_slot(deliver - deliver % PRECISION)  # type: ignore[union-attr]
    assert slot.last_pos == 4 * 52
    t.close()


def test_the_wheel_is_java_s_size_whatever_the_precision(timer: Timer) -> None:
    path = timer.root / "timerwheel"
    assert path.stat().st_size == 7 * 86_400 * 2 * 32
    assert isinstance(timer.timer.timer_wheel, TimerWheel)  # type: ignore[union-attr]
