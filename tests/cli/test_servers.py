"""``finchmq server`` / ``broker`` / ``namesrv`` as real processes: start-up time, addresses,
clean shutdown on SIGTERM, recovery on the same data directory, and configuration errors."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from finchmq.client import AdminClient, Message, NoRouteError, Producer
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient, RemotingClientConfig, RemotingError
from finchmq.testing.cluster import free_port_pair
from finchmq.testing.process import ServerProcess
from tests.client.conftest import TEST_BROKER
from tests.waiting import eventually, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.namesrv_port, self.broker_port = free_port(), free_port()
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log = data_dir / f"server-{self.broker_port}.out"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "finchmq.cli", "server", "--data-dir", str(data_dir),
                 "--namesrv-port", str(self.namesrv_port), "--broker-port", str(self.broker_port),
                 "--broker-ip", "127.0.0.1", "--bind", "127.0.0.1", "--console-port", "0", *extra],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> None:
        wait_until(self.ready, what="the server ready")

    def ready(self) -> bool:
        if "ready in" in self.output():
            return True
        assert self.proc.poll() is None, self.output()
        return False

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


async def send_and_read(namesrv_port: int, broker_port: int, bodies: list[bytes]) -> list[bytes]:
    broker = f"127.0.0.1:{broker_port}"
    async with RemotingClient() as client:
        for body in bodies:
            header = SendMessageRequestHeaderV2(
                producer_group="pg", topic="T_cli", default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=0, sys_flag=0, born_timestamp=0, flag=0,
            )  # fmt: skip
            response = await client.invoke(
                broker,
                RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), body),
                5000,
            )
            assert response.code == ResponseCode.SUCCESS
        pull = PullMessageRequestHeader(
            consumer_group="cg", topic="T_cli", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=5,
            commit_offset=len(bodies), suspend_timeout_millis=0, sub_version=0, subscription="*",
        )  # fmt: skip
        response = await client.invoke(
            broker, RemotingCommand.request(RequestCode.PULL_MESSAGE, pull.to_ext_fields()), 5000
        )
        return [m.body for m in decode_stored_all(response.body)]


def test_server_starts_serves_stops_cleanly_and_recovers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Server(data)
    try:
        first.wait_ready()
        out = first.output()
        # says how long it took (no bound here: a loaded machine takes what it takes)
        assert re.search(r"ready in \d+ ms", out), out
        assert f"name server listening on 127.0.0.1:{first.namesrv_port}" in out
        assert f"127.0.0.1:{first.broker_port}" in out
        assert asyncio.run(send_and_read(first.namesrv_port, first.broker_port, [b"a", b"b", b"c"])) == [
            b"a",
            b"b",
            b"c",
        ]
    finally:
        code = first.stop()
    assert code == 0
    assert "shutting down" in first.output()
    assert (data / "store" / "config" / "consumerOffset.json").exists(), "offsets persisted at shutdown"
    assert '"T_cli@cg"' in (data / "store" / "config" / "consumerOffset.json").read_text()
    assert not (data / "store" / "abort").exists(), "a clean shutdown removes the abort file"

    second = Server(data)
    try:
        second.wait_ready()
        bodies = asyncio.run(send_and_read(second.namesrv_port, second.broker_port, [b"d"]))
        assert bodies == [b"a", b"b", b"c", b"d"], "the second start recovered the first one's messages"
    finally:
        assert second.stop() == 0


def test_bad_broker_conf_value_is_a_clear_startup_error(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\nflushDiskType=SOMETIMES\nnoSuchKey=1\n")
    result = subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "broker", "-c", str(conf), "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "flushDiskType" in result.stderr and "SOMETIMES" in result.stderr
    assert "ASYNC_FLUSH" in result.stderr  # says what would be accepted


def test_unknown_broker_conf_key_is_warned_about(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\nnoSuchKey=1\n")
    port = free_port()
    with open(tmp_path / "out", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "finchmq.cli", "broker", "-c", str(conf), "--data-dir", str(tmp_path),
             "--port", str(port), "-n", "127.0.0.1:1"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        started = "broker broker-x (DefaultCluster) ASYNC_MASTER brokerId=0 at"

        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "out").read_text()
            return started in (tmp_path / "out").read_text()

        wait_until(up, what="the broker started")
        assert "unknown broker.conf key 'noSuchKey' ignored" in (tmp_path / "out").read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX only")
def test_namesrv_command_serves_routes(tmp_path: Path) -> None:
    port = free_port()
    with open(tmp_path / "out", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "finchmq.cli", "namesrv", "--port", str(port), "--bind", "127.0.0.1", "--data-dir", str(tmp_path)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "out").read_text()
            return "listening" in (tmp_path / "out").read_text()

        wait_until(up, what="the name server listening")

        async def ask() -> int:
            async with RemotingClient() as client:
                r = await client.invoke(
                    f"127.0.0.1:{port}",
                    RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}),
                    3000,
                )
                return r.code

        assert asyncio.run(ask()) == ResponseCode.TOPIC_NOT_EXIST
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_server_with_two_brokers_spreads_sends_over_both(tmp_path: Path) -> None:
    """``finchmq server --brokers 2``: broker-b is a child process with its own store, both register
    with the embedded name server, a producer's sends land on both, SIGTERM stops both."""
    ns_port, port_a = free_port(), free_port_pair()
    conf = tmp_path / "small.conf"  # broker-b inherits it: small files, not 1.4 GiB per broker
    conf.write_text("".join(f"{k}={v}\n" for k, v in TEST_BROKER.items()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "finchmq.cli", "server", "--data-dir", str(tmp_path), "--bind", "127.0.0.1",
         "--broker-ip", "127.0.0.1", "--namesrv-port", str(ns_port), "--broker-port", str(port_a),
         "--brokers", "2", "--metrics-port", "0", "--console-port", "0", "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "ready in" in line:
                break
        text = "".join(lines)
        assert "finchmq broker broker-b at 127.0.0.1:" in text, text
        assert (tmp_path / "broker-b" / "store" / "commitlog").is_dir()
        namesrv = f"127.0.0.1:{ns_port}"

        async def scenario() -> set[str]:
            async with AdminClient(namesrv_addr=namesrv) as admin:
                await admin.create_topic(
                    "Spread", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2
                )

                async def on_both() -> bool:  # each broker registers the topic in the background
                    try:
                        return len((await admin.topic_route("Spread")).queue_datas) == 2
                    except NoRouteError:
                        return False

                await eventually(on_both, what="the route of Spread to both brokers")
            async with Producer("spread", namesrv_addr=namesrv) as producer:
                return {
                    (await producer.send(Message("Spread", b"x"))).message_queue.broker_name
                    for _ in range(20)
                }

        assert asyncio.run(scenario()) == {"broker-a", "broker-b"}
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert "finchmq server shutting down" in out
    children = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "broker-b")], check=False, capture_output=True, text=True
    )
    assert children.stdout.strip() == "", "broker-b outlived the server"


def test_server_process_with_two_brokers_knows_both() -> None:
    """``ServerProcess(brokers=2)`` (the benchmarks' way to run ``--brokers N``): both brokers'
    ports take connections, ``pids`` has both processes, and stopping it stops both."""
    server = ServerProcess(conf=TEST_BROKER, metrics=False, brokers=2)
    with server:
        assert len(set(server.pids)) == 2
        for port in server.broker_ports:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert server.cpu_seconds() > 0
    for pid in server.pids:
        assert not Path(f"/proc/{pid}").exists(), f"pid {pid} outlived the server"


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX only")
def test_namesrv_config_file_turns_tls_on(tmp_path: Path) -> None:
    """``finchmq namesrv -c namesrv.conf`` with ``tls.server.mode=enforcing`` (Java's test mode: a
    self-signed certificate): a TLS client is answered, a plain one refused."""
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text("tls.server.mode=enforcing\norderMessageEnable=true\n")
    with open(tmp_path / "out", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "finchmq.cli", "namesrv", "-c", str(conf), "--port", str(port),
             "--bind", "127.0.0.1", "--data-dir", str(tmp_path)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def up() -> bool:
            assert proc.poll() is None, (tmp_path / "out").read_text()
            return "listening" in (tmp_path / "out").read_text()

        wait_until(up, what="the name server listening")
        assert "(TLS enforcing)" in (tmp_path / "out").read_text()

        async def ask(use_tls: bool) -> int:
            config = RemotingClientConfig(use_tls=use_tls)
            async with RemotingClient(config) as client:
                request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"})
                return (await client.invoke(f"127.0.0.1:{port}", request, 5000)).code

        assert asyncio.run(ask(True)) == ResponseCode.TOPIC_NOT_EXIST
        with pytest.raises(RemotingError):
            asyncio.run(ask(False))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_tls_without_a_certificate_is_a_clear_startup_error(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("tls.server.mode=enforcing\ntls.test.mode.enable=false\n")
    result = subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "broker", "-c", str(conf), "--data-dir", str(tmp_path),
         "--port", str(free_port()), "-n", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "tls.server.certPath" in result.stderr
    conf.write_text("tls.server.mode=strict\n")
    result = subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "broker", "-c", str(conf), "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "tls.server.mode" in result.stderr, result.stderr


def test_server_process_picks_new_ports_when_one_was_taken_before_it_bound() -> None:
    """A port picked free can be taken by another test before the server binds it; the first
    start then picks new ports (a restart keeps its own)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ServerProcess(conf=TEST_BROKER)
        server.metrics_port = taken.getsockname()[1]  # as if someone took it meanwhile
        with server:
            assert server.metrics_port != taken.getsockname()[1]
            socket.create_connection(("127.0.0.1", server.broker_port), timeout=5).close()
            data_dir = server.data_dir
    assert not data_dir.exists()
