"""docs/security.md's worked example, run as it is written: its certificate commands, its
``plain_acl.yml``, ``broker.conf`` and ``client.properties``, its ``finchmq console-user`` and
``finchmq server`` command lines, its ``finchmq admin`` command and its Python client. Only
``/etc/finchmq`` and ``/var/lib/finchmq`` move under a temporary directory, the host becomes
127.0.0.1 and the server's ports free ones. Then: the application sends and receives over mutual
TLS with its ACL keys; a plain client, a TLS client without keys and a visitor without a console
login are refused with messages that say why; the gRPC port speaks TLS with the server's
certificate."""

from __future__ import annotations

import os
import re
import shlex
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from finchmq.client import BlockingProducer, Message, MQClientError, TlsConfig
from finchmq.testing.process import ChildServer, free_port
from tests.console.conftest import WebClient

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
HOST = "mq.example.org"
CONSOLE_USERS = {"ops": "ops-console-pw-1", "oncall": "oncall-console-pw-2"}

pytestmark = pytest.mark.timeout(300)


def blocks(heading: str, language: str) -> list[str]:
    """The ``language`` code blocks of the section whose ``## `` heading starts with ``heading``."""
    text = DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    section = next((p for p in parts if p.startswith(heading)), None)
    assert section is not None, f"docs/security.md: no section '## {heading}'"
    found = re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert found, f"docs/security.md '## {heading}': no {language} block"
    return found


@dataclass
class Deployment:
    """Where the example's files went and where its server listens."""

    root: Path
    namesrv_port: int
    broker_port: int
    grpc_port: int
    console_port: int

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def localize(self, text: str) -> str:
        """The example's text with this deployment's paths and address."""
        return (
            text.replace("/etc/finchmq", str(self.etc))
            .replace("/var/lib/finchmq", str(self.root / "data"))
            .replace(f"{HOST}:9876", self.namesrv)
        )

    def command(self, line: str) -> tuple[dict[str, str], list[str]]:
        """A shell line of the example (``VAR=value ... finchmq ARGS``) as (environment, argv)
        running this tree's finchmq."""
        words = shlex.split(self.localize(line))
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        while "=" in words[0]:
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        assert words[0] == "finchmq", line
        return env, [sys.executable, "-m", "finchmq.cli", *words[1:]]

    def run(self, line: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env, argv = self.command(line)
        return subprocess.run(
            argv, env=env, input=stdin, capture_output=True, text=True, timeout=120, check=False
        )

    def client_tls(self) -> TlsConfig:
        return TlsConfig.from_properties({"tls.config.file": str(self.etc / "tls" / "client.properties")})


class ExampleServer(ChildServer):
    """The example's ``finchmq server`` command line, on the deployment's ports."""

    name = "finchmq server (docs/security.md)"
    ready_timeout_seconds = 60.0

    def __init__(self, deployment: Deployment, line: str) -> None:
        super().__init__(deployment.root / "data", "finchmq-secure-", deployment.root / "server.log")
        self.deployment = deployment
        self.line = line

    def start(self) -> ExampleServer:
        d = self.deployment
        env, argv = d.command(self.line)
        argv += [
            "--namesrv-port", str(d.namesrv_port), "--broker-port", str(d.broker_port),
            "--grpc-port", str(d.grpc_port), "--console-port", str(d.console_port),
            "--metrics-port", "0", "--bind", "127.0.0.1", "--broker-ip", "127.0.0.1",
        ]  # fmt: skip
        ready = lambda: "ready in" in self.log_path.read_text(errors="replace")  # noqa: E731
        self._spawn(argv, None, ready, "get ready", env)
        return self


def deploy(root: Path, acl_2: bool = False) -> ExampleServer:
    """Steps 1 to 4 under ``root`` and step 5's server (to start); with ``acl_2`` the broker.conf's ACL 1.0 lines are replaced by
    the ACL 2.0 ones of the last section."""
    d = Deployment(root, free_port(), free_port(), free_port(), free_port())
    # 1. certificates
    [certificates] = blocks("1. Certificates", "sh")
    subprocess.run(
        ["bash", "-e", "-c", d.localize(certificates)], check=True, capture_output=True, timeout=120
    )
    # 2., 3.: the broker's files; 6.: the clients' TLS settings
    [acl] = blocks("2. Accounts: `/etc/finchmq/plain_acl.yml`", "yaml")
    (d.etc / "plain_acl.yml").write_text(d.localize(acl), encoding="utf-8")
    [conf] = blocks("3. The broker: `/etc/finchmq/broker.conf`", "properties")
    if acl_2:
        acl_1 = "# ACL 1.0\naclEnable=true\naclFilePath=/etc/finchmq/plain_acl.yml\n"
        assert acl_1 in conf
        conf = conf.replace(acl_1, blocks("ACL 2.0 instead of 1.0", "properties")[0])
    (d.etc / "broker.conf").write_text(d.localize(conf), encoding="utf-8")
    client_properties = blocks("6. Clients", "properties")[0]
    assert "`/etc/finchmq/tls/client.properties`" in DOC.read_text(encoding="utf-8")
    (d.etc / "tls" / "client.properties").write_text(d.localize(client_properties), encoding="utf-8")
    # 4. console accounts (each command reads its password from standard input)
    [users] = blocks("4. Console accounts", "sh")
    for line in users.strip().splitlines():
        name = shlex.split(line)[3]
        result = d.run(line, stdin=CONSOLE_USERS[name] + "\n")
        assert result.returncode == 0, result.stderr
    # 5. start
    [start] = blocks("5. Start", "sh")
    return ExampleServer(d, start.strip())  # started by its with statement


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deploy(tmp_path_factory.mktemp("secure")) as server:
        yield server.deployment


def run_application(d: Deployment) -> None:
    """Step 6's Python client: it prints what it received."""
    [client] = blocks("6. Clients", "python")
    script = d.root / "client.py"
    script.write_text(d.localize(client), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "received b'order-1'" in out.stdout.splitlines(), out.stdout


def test_the_application_sends_and_receives_over_mutual_tls_with_its_keys(deployment: Deployment) -> None:
    create_topic = blocks("6. Clients", "sh")[0].strip()
    result = deployment.run(create_topic)
    assert result.returncode == 0, result.stderr
    run_application(deployment)


def test_a_plain_client_and_a_client_without_keys_are_refused_saying_why(deployment: Deployment) -> None:
    plain = deployment.run(f"finchmq admin clusterList -n {HOST}:9876")
    assert plain.returncode == 1
    assert "tls.server.mode=enforcing" in plain.stderr, plain.stderr
    with (
        BlockingProducer(
            "anonymous", namesrv_addr=deployment.namesrv, use_tls=True, tls=deployment.client_tls()
        ) as producer,
        pytest.raises(MQClientError, match="No accessKey is configured"),
    ):
        producer.send(Message.create("orders", b"unsigned"))


def test_the_console_needs_a_login_and_signs_with_the_operators_account(deployment: Deployment) -> None:
    web = WebClient(f"http://127.0.0.1:{deployment.console_port}/")
    assert web.call("GET", "/api/cluster")[0] == 401
    assert web.login("ops", CONSOLE_USERS["ops"])[0] == 303
    status, cluster = web.call("GET", "/api/cluster")
    assert status == 200
    [broker] = cluster["brokers"]
    assert not broker.get("error"), broker  # the broker's ACL let the console's requests in


def test_the_grpc_port_speaks_tls_with_the_servers_certificate(deployment: Deployment) -> None:
    context = ssl.create_default_context(cafile=str(deployment.etc / "tls" / "ca.pem"))
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", deployment.grpc_port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,  # verifies the name too
    ):
        assert tls.selected_alpn_protocol() == "h2"
        assert dict(x[0] for x in tls.getpeercert()["subject"])["commonName"] == HOST


def test_acl_2_instead_of_1(tmp_path: Path) -> None:
    """The last section: ACL 2.0's keys in broker.conf, the operator's commands making the
    application's user and its ACL; then the same application runs unchanged."""
    with deploy(tmp_path, acl_2=True) as server:
        d = server.deployment
        env_line, *commands = blocks("ACL 2.0 instead of 1.0", "sh")[0].strip().splitlines()
        assert env_line.startswith("export ")
        exports = env_line.removeprefix("export ")
        for command in [blocks("6. Clients", "sh")[0].strip(), *commands]:
            line = command if command.startswith("ROCKETMQ_") else f"{exports} {command}"
            result = d.run(line)
            assert result.returncode == 0, (line, result.stdout, result.stderr)
        run_application(d)
