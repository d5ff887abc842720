"""``finchmq bench``: producer, consumer and e2e really run against an embedded server, print
RocketMQ's progress labels or JSON lines, and the messages they count really are on the broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from finchmq.cli.__main__ import main
from finchmq.cli.bench import LatencyHistogram, stamp_body, stamped_latency_ms
from finchmq.client import BlockingAdminClient
from finchmq.testing import EmbeddedServer
from finchmq.testing.plugin import ServerFactory
from tests.waiting import wait_until


@pytest.fixture
def server(finchmq_server_factory: ServerFactory) -> EmbeddedServer:
    """The embedded broker shares this process (and its GIL) with the benchmark's client: on a
    busy machine it would shed sends ([OVERLOAD]) and the counts would vary, so its fast failure
    is off; these tests check the tool, the broker's flow control has its own."""
    return finchmq_server_factory({"brokerFastFailureEnable": "false"})


def _json_lines(out: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, out
    assert lines[-1]["type"] == "summary", lines[-1]
    assert all(line["type"] == "progress" for line in lines[:-1])
    return lines[:-1], lines[-1]


def _stored(server: EmbeddedServer, topic: str) -> int:
    with BlockingAdminClient(namesrv_addr=server.namesrv_addr) as admin:
        table = admin.topic_status(topic).offset_table
    return sum(o.max_offset - o.min_offset for o in table.values())


def test_producer_json_counts_what_the_broker_stored(
    server: EmbeddedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "producer", "-n", server.namesrv_addr, "-t", "BenchJson"]
    # progress every 0.05 s of a 2 s run: at least one line, unless the loop stalls ~2 s
    assert main([*argv, "-d", "2", "--interval", "0.05", "-w", "4", "--json"]) == 0
    progress, summary = _json_lines(capsys.readouterr().out)
    assert progress
    for line in progress:
        assert {
            "tps",
            "avg_ms",
            "max_ms",
            "p50_ms",
            "p99_ms",
            "p999_ms",
            "send_failed",
            "response_failed",
        } <= set(line)
    assert summary["command"] == "producer"
    assert summary["send_failed"] == summary["response_failed"] == 0
    assert summary["messages"] > 0 and summary["tps"] > 0
    assert 0 < summary["p50_ms"] <= summary["p99_ms"] <= summary["p999_ms"] <= summary["max_ms"]
    assert _stored(server, "BenchJson") == summary["messages"]


def test_producer_text_uses_rocketmq_labels_and_batches(
    server: EmbeddedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "producer", "-n", server.namesrv_addr, "-b", "10", "-w", "2", "-s", "1024"]
    assert main([*argv, "-t", "BenchText", "-d", "1.5", "--interval", "0.05"]) == 0  # progress lines: labels
    out = capsys.readouterr().out
    assert "created topic BenchText with 8 queues" in out
    labels = (
        "Send TPS:",
        "Max RT(ms):",
        "Average RT(ms):",
        "p99.9(ms):",
        "Send Failed: 0",
        "Response Failed: 0",
    )
    for label in labels:
        assert label in out
    assert "Summary (producer): batches of 10 x 1024 B to BenchText, 2 concurrent senders (sync)" in out
    stored = _stored(server, "BenchText")
    assert stored > 0 and stored % 10 == 0
    assert f"{stored:,} messages in" in out
    assert main([*argv, "-t", "BenchCount", "-q", "200", "-d", "0"]) == 0
    assert _stored(server, "BenchCount") == 200  # -q stops at exactly 200 (20 batches)


@pytest.mark.parametrize("mode", ["async", "oneway"])
def test_producer_async_and_oneway_modes(
    server: EmbeddedServer, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    topic = f"BenchMode{mode}"
    argv = ["bench", "producer", "-n", server.namesrv_addr, "-t", topic, "-m", mode, "-w", "4"]
    assert main([*argv, "-d", "1", "--json"]) == 0
    _, summary = _json_lines(capsys.readouterr().out)
    assert summary["mode"] == mode and summary["messages"] > 0
    # a oneway send that never suspends would keep the run going: a deadline only a hang reaches
    assert summary["elapsed"] < 60
    if mode == "async":
        assert _stored(server, topic) == summary["messages"]
    else:  # written to the socket; a broker whose send queue is full drops oneway requests unanswered
        wait_until(lambda: _stored(server, topic) > 0, what="oneway sends stored")
        assert _stored(server, topic) <= summary["messages"]


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_consumer_drains_the_backlog(
    server: EmbeddedServer, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    addr = server.namesrv_addr
    assert main(["bench", "producer", "-n", addr, "-t", "BenchDrain", "-q", "500", "-w", "8", "--json"]) == 0
    _, sent = _json_lines(capsys.readouterr().out)
    assert sent["messages"] == _stored(server, "BenchDrain") == 500
    argv = ["bench", "consumer", "-n", addr, "-t", "BenchDrain", "-g", f"drain_{mode}", "-m", mode]
    assert main([*argv, "--from", "first", "-q", "500", "-d", "30", "--json"]) == 0
    _, summary = _json_lines(capsys.readouterr().out)
    assert summary["messages"] == 500
    assert summary["mode"] == mode
    assert summary["mib_per_s"] > 0
    assert summary["s2c_max_ms"] <= summary["max_ms"] + 1  # stored after it was born


def test_e2e_receives_every_message_sent_at_the_fixed_rate(
    server: EmbeddedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # progress every 0.05 s (labels below), stragglers waited for as long as they take
    argv = [
        "bench",
        "e2e",
        "-n",
        server.namesrv_addr,
        "-r",
        "200",
        "-d",
        "2",
        "--interval",
        "0.05",
        "--drain",
        "60",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Max E2E RT(ms):" in out and "Send TPS:" in out
    assert "lost 0, duplicates 0" in out
    assert main([*argv, "--json"]) == 0
    _, summary = _json_lines(capsys.readouterr().out)
    # 200/s for 2 s, on schedule: never ahead of it (how close it kept up is the machine's business)
    assert 0 < summary["sent"] <= 401
    assert summary["messages"] == summary["sent"] and summary["lost"] == 0
    assert 0 < summary["p50_ms"] <= summary["p99_ms"] <= summary["max_ms"]
    assert summary["send_rt"]["messages"] == summary["sent"]


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["bench", "producer", "-n", "127.0.0.1:9876", "-w", "0"])
    assert info.value.code == 2
    assert "must be > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["bench"])
    assert info.value.code == 2


def test_histogram_percentiles_within_one_percent() -> None:
    h = LatencyHistogram()
    for i in range(1, 10_001):
        h.record(i / 100)  # 0.01 .. 100 ms, uniform
    assert h.count == 10_000 and h.max == 100.0
    assert h.mean == pytest.approx(50.005)
    assert h.percentile(50) == pytest.approx(50, rel=0.01)
    assert h.percentile(99) == pytest.approx(99, rel=0.01)
    assert h.percentile(99.9) == pytest.approx(99.9, rel=0.01)
    assert h.percentile(100) == 100.0
    assert LatencyHistogram().percentile(99) == 0.0


def test_stamped_body_round_trip() -> None:
    body = stamp_body(128, 42)
    assert len(body) == 128
    stamped = stamped_latency_ms(body)
    assert stamped is not None
    ms, seq = stamped
    assert seq == 42 and 0 <= ms < 1000
    assert stamped_latency_ms(b"short") is None
