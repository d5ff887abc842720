"""The timer's files byte for byte as Java 5.x lays them out: the wheel's 32-byte slots, the timer
log's 52-byte units and blank, the checkpoint's 56 bytes (and finchmq's record after them), the
metrics JSON; round trips, golden bytes, and decoders that only ever answer a value or a clear
error whatever the bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finchmq.store import StoreCorruptedError
from finchmq.store.timer import (
    BLANK_MAGIC_CODE,
    UNIT_SIZE,
    Slot,
    TimerCheckpoint,
    TimerCheckpointData,
    TimerLog,
    TimerLogUnit,
    TimerMetrics,
    TimerWheel,
    decode_slot,
    decode_unit,
    encode_slot,
)

i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
SLOTS = 604_800  # Java: 7 days of 1 s slots, whatever the precision


def test_java_constants() -> None:
    # Java: TimerLog.BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8, UNIT_SIZE 52, Slot.SIZE 32
    assert struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ (1880681586 + 8)))[0] == BLANK_MAGIC_CODE
    assert UNIT_SIZE == 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8


# -- the wheel --------------------------------------------------------------------------------------


@given(st.integers(0, 2**40), i64, i64, i32, i32, st.sampled_from([100, 200, 500, 1000]))
def test_slot_round_trip(
    time_units: int, first: int, last: int, num: int, magic: int, precision: int
) -> None:
    slot = Slot(time_units * precision, first, last, num, magic)
    data = encode_slot(slot, precision)
    assert len(data) == 32
    assert data[:8] == struct.pack(">q", time_units), "Java stores the time divided by the precision"
    assert decode_slot(data, precision) == slot


@given(st.binary(max_size=80))
def test_slot_decoder_takes_32_bytes_or_says_why_not(data: bytes) -> None:
    if len(data) == 32:
        assert isinstance(decode_slot(data, 1000), Slot)
    else:
        with pytest.raises(StoreCorruptedError, match="slot is 32 bytes"):
            decode_slot(data, 1000)


def test_wheel_file_layout_and_turns(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    wheel = TimerWheel(path, SLOTS, 1000)
    assert path.stat().st_size == SLOTS * 2 * 32
    wheel.put_slot(5_000, 52, 104, 2, 0)
    assert wheel.get_slot(5_000) == Slot(5_000, 52, 104, 2, 0)
    assert wheel.get_slot(5_999) == Slot(5_000, 52, 104, 2, 0), "the same 1 s slot"
    other_turn = 5_000 + SLOTS * 2 * 1000
    assert wheel.get_slot(other_turn) == Slot(-1, -1, -1), "the same index, another turn: empty"
    assert wheel.get_raw_slot(other_turn).time_ms == 5_000
    wheel.shutdown()
    raw = path.read_bytes()
    assert raw[5 * 32 : 6 * 32] == struct.pack(">qqqii", 5, 52, 104, 2, 0)
    reopened = TimerWheel(path, SLOTS, 1000)
    assert reopened.get_slot(5_000).num == 2 and reopened.nums == {5_000: 2}
    reopened.shutdown()


def test_wheel_of_another_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    path.write_bytes(b"\0" * 64)
    with pytest.raises(StoreCorruptedError, match="Timer wheel length:64 != expected"):
        TimerWheel(path, SLOTS, 1000)


def test_revise_slot_and_scans(tmp_path: Path) -> None:
    wheel = TimerWheel(tmp_path / "timerwheel", SLOTS, 100)
    wheel.revise_slot(1_000, -2, 52, force=False)
    assert wheel.get_slot(1_000).time_ms == -1, "not forced: another time's slot stays"
    wheel.revise_slot(1_000, -2, 52, force=True)
    assert wheel.get_slot(1_000) == Slot(1_000, 52, 52, 0, 0)
    wheel.revise_slot(1_000, -2, 156, force=True)
    assert wheel.get_slot(1_000) == Slot(1_000, 52, 156, 0, 0), "IGNORE keeps the first position"
    wheel.put_slot(1_100, 208, 260, 3)
    wheel.put_slot(900, 0, 0, 7)
    assert wheel.get_all_num(1_000) == 3, "slots before the read time do not count"
    assert wheel.check_phy_pos(1_000, 200) == 208, "the slot pointing past the log's end"
    assert wheel.check_phy_pos(1_000, 10_000) == 2**63 - 1
    wheel.shutdown()


# -- the log ----------------------------------------------------------------------------------------


units = st.builds(
    TimerLogUnit, i64, st.integers(0, 15), i64, i32, i64, i32, i32, size=st.just(UNIT_SIZE), reserved=i64
)


@given(units)
def test_unit_round_trip(unit: TimerLogUnit) -> None:
    data = unit.encode()
    assert len(data) == UNIT_SIZE
    assert decode_unit(data) == unit
    assert decode_unit(b"xx" + data, 2) == unit


def test_unit_golden_bytes() -> None:
    unit = TimerLogUnit(prev_pos=-1, magic=1, enqueue_time=1_700_000_000_000, delay=1500, offset_py=4096,
                        size_py=210, hash_topic=2598919)  # fmt: skip
    assert unit.encode() == struct.pack(
        ">iqiqiqiiq", 52, -1, 1, 1_700_000_000_000, 1500, 4096, 210, 2598919, 0
    )
    assert unit.delayed_time == 1_700_000_001_500


@given(st.binary(max_size=120), st.integers(-4, 70))
@settings(max_examples=300)
def test_unit_decoder_answers_a_unit_or_a_clear_error(data: bytes, pos: int) -> None:
    try:
        unit = decode_unit(data, pos, path="timerlog/0")
    except StoreCorruptedError as exc:
        assert exc.path == "timerlog/0" and exc.offset == pos
        assert "timer log unit" in str(exc)
    else:
        assert unit.size == UNIT_SIZE and (unit.magic | 0xF) == 0xF


def test_log_fills_a_segment_with_a_blank_and_goes_on(tmp_path: Path) -> None:
    size = 200  # 3 units + a 44-byte tail: the 4th unit would leave less than 16 bytes spare
    log = TimerLog(tmp_path / "timerlog", size)
    unit = TimerLogUnit(-1, 1, 0, 0, 0, 10, 0).encode()
    positions = [log.append(unit) for _ in range(4)]
    assert positions == [0, 52, 104, 200]
    first = (tmp_path / "timerlog" / f"{0:020d}").read_bytes()
    assert struct.unpack_from(">iqi", first, 156) == (44, 0, BLANK_MAGIC_CODE)
    assert (tmp_path / "timerlog" / f"{200:020d}").exists()
    assert log.read_unit(200) == decode_unit(unit)
    assert log.get_offset_for_last_unit() == 104, "Java getOffsetForLastUnit"
    log.shutdown()


# -- the checkpoint ---------------------------------------------------------------------------------


@given(st.tuples(i64, i64, i64, i64, i64, i64, i64))
def test_checkpoint_round_trip(fields: tuple[int, ...]) -> None:
    data = TimerCheckpointData(*fields)
    encoded = data.encode()
    assert encoded == struct.pack(">7q", *fields), "Java TimerCheckpoint.encode"
    assert TimerCheckpointData.decode(encoded) == data


@given(st.binary(max_size=100))
def test_checkpoint_decoder_takes_java_s_lengths_only(data: bytes) -> None:
    if len(data) in (32, 56):
        assert isinstance(TimerCheckpointData.decode(data), TimerCheckpointData)
    else:
        with pytest.raises(StoreCorruptedError, match="timer checkpoint is 56 or 32 bytes"):
            TimerCheckpointData.decode(data)


def test_checkpoint_file_is_java_s_page_with_finchmq_s_record_after(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    cp = TimerCheckpoint(path)
    cp.data = TimerCheckpointData(1000, 52, 7, 7, 0, 1234, 3)
    cp.replay_commit_log_offset, cp.replay_timer_log_offset = 4096, 104
    cp.shutdown()
    raw = path.read_bytes()
    assert len(raw) == 4096
    assert raw[:56] == struct.pack(">7q", 1000, 52, 7, 7, 0, 1234, 3)
    assert raw[64:88] == b"FINCHTM1" + struct.pack(">qq", 4096, 104)
    again = TimerCheckpoint(path)
    assert again.data == TimerCheckpointData(1000, 52, 7, 7, 0, 1234, 3)
    assert (again.replay_commit_log_offset, again.replay_timer_log_offset) == (4096, 104)
    again.shutdown()
    path.write_bytes(raw[:56] + bytes(4040))  # as Java leaves it: no finchmq record
    java = TimerCheckpoint(path)
    assert java.replay_commit_log_offset is None and java.data.last_read_time_ms == 1000
    java.shutdown()


# -- the metrics ------------------------------------------------------------------------------------


def test_metrics_json_is_java_s_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timermetrics"
    metrics = TimerMetrics(path)
    metrics.add_and_get("T", 1)
    metrics.add_and_get("T", 1)
    metrics.add_and_get("U", -1)
    metrics.persist()
    again = TimerMetrics(path)
    again.load()
    assert again.counts() == {"T": 2, "U": -1}
    tree = __import__("json").loads(path.read_text())
    assert set(tree) == {"dataVersion", "timingCount"}
    assert set(tree["dataVersion"]) == {"counter", "stateVersion", "timestamp"}
    assert set(tree["timingCount"]["T"]) == {"count", "timeStamp"} and tree["timingCount"]["T"]["count"] == 2
    again.clean_metrics(["T"])
    assert again.counts() == {"T": 2}
