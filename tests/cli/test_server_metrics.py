"""``finchmq server``/``namesrv`` with metrics: the URL printed at start-up serves both servers'
figures on the configured port (a free one: never the default 5557 in tests)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.cli.test_servers import Server, free_port
from tests.waiting import wait_until


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return str(answer.read().decode())


def node_types(text: str) -> set[str]:
    return {
        sample.labels["node_type"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "node_type" in sample.labels
    }


def test_server_prints_and_serves_metrics_on_the_chosen_port(tmp_path: Path) -> None:
    port = free_port()
    server = Server(tmp_path / "data", "--metrics-port", str(port))
    try:
        server.wait_ready()
        url = f"http://127.0.0.1:{port}/metrics"
        assert f"metrics at {url}" in server.output()
        text = fetch(url)
        assert node_types(text) == {"broker", "nameserver"}  # one endpoint for both servers
        assert "rocketmq_topic_number{" in text and "finchmq_namesrv_live_brokers{" in text
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
            raise AssertionError("/ must be 404")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
    finally:
        assert server.stop() == 0


def test_server_with_metrics_off_serves_none(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--metrics-port", "0")
    try:
        server.wait_ready()
        assert "metrics at" not in server.output()
    finally:
        assert server.stop() == 0


def test_a_chosen_port_that_is_taken_stops_start_up(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = Server(tmp_path / "data", "--metrics-port", str(port))
        assert server.proc.wait(60) == 1
        assert f"cannot listen on 127.0.0.1:{port}" in server.output()


def test_namesrv_serves_its_metrics_when_asked(tmp_path: Path) -> None:
    port, metrics = free_port(), free_port()
    out = tmp_path / "out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "finchmq.cli", "namesrv", "--port", str(port), "--bind", "127.0.0.1",
             "--data-dir", str(tmp_path), "--metrics-port", str(metrics)],
            stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def up() -> bool:
            assert proc.poll() is None, out.read_text()
            return "metrics at" in out.read_text()

        wait_until(up, what="the name server serving its metrics")
        assert f"metrics at http://127.0.0.1:{metrics}/metrics" in out.read_text()
        assert node_types(fetch(f"http://127.0.0.1:{metrics}/metrics")) == {"nameserver"}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
