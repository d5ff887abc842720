"""The console's tests run against a live ``finchmq server`` started as a process with its web
console on a free port (``--console-port``), as a user runs it; the browser tests drive Debian's
chromium through Playwright and skip, saying why, where either is missing. The login's tests run
a ``finchmq console`` process with an accounts file written by ``finchmq console-user``."""

from __future__ import annotations

import http.cookiejar
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import (
    BlockingAdminClient,
    BlockingProducer,
    BlockingPushConsumer,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
)
from finchmq.testing.process import ChildServer, ServerProcess, free_port
from tests.waiting import wait_until

CHROMIUM = Path("/usr/bin/chromium")
BROKER_CONF = {
    "traceTopicEnable": "true",  # the message page shows traces
    "waitTimeMillsInSendQueue": "5000",
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(6000 * 20),
    "maxHashSlotNum": "20000",
    "maxIndexNum": "80000",
}
FAST_CLIENT: dict[str, Any] = {
    "rebalance_wait_interval": 1000,
    "heartbeat_broker_interval": 1000,
    "persist_consumer_offset_interval": 500,
    "poll_name_server_interval": 1000,
}


class Cluster:
    """The live server and HTTP calls to its console's JSON API."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.namesrv = server.namesrv_addr
        self.url = server.console_url

    def call(self, method: str, path: str, body: Any = None, *, json_type: bool = True) -> tuple[int, Any]:
        """``(status, decoded JSON)`` of one API request."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if body is not None and json_type else {}
        request = urllib.request.Request(
            self.url + path.lstrip("/"), data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.call(method, path, body)
        assert status == 200, (status, data)
        return data

    def create_topic(self, topic: str, queues: int = 4) -> None:
        self.ok("POST", "/api/topics", {"topic": topic, "cluster": "DefaultCluster",
                                        "readQueueNums": queues, "writeQueueNums": queues})  # fmt: skip
        with BlockingAdminClient(namesrv_addr=self.namesrv) as admin:
            wait_until(lambda: _has_route(admin, topic), what=f"the route of {topic}")

    def send(self, topic: str, bodies: list[str], *, keys: str | None = None) -> list[str]:
        """Send with finchmq's client; returns the offset message ids."""
        with BlockingProducer(f"PG_{topic}", namesrv_addr=self.namesrv) as producer:
            return [producer.send(Message.create(topic, b.encode(), keys=keys)).offset_msg_id for b in bodies]

    def consumer(
        self,
        group: str,
        topic: str,
        listener: Callable[[list[MessageExt], Any], ConsumeConcurrentlyStatus | None],
        **overrides: Any,
    ) -> BlockingPushConsumer:
        consumer = BlockingPushConsumer(group, namesrv_addr=self.namesrv, **{**FAST_CLIENT, **overrides})
        consumer.subscribe(topic, "*")
        consumer.register_message_listener(listener)
        consumer.start()
        return consumer


def _has_route(admin: BlockingAdminClient, topic: str) -> bool:
    try:
        admin.topic_route(topic)
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One ``finchmq server`` process with its console for all the console's tests (each test
    names its own topics and groups)."""
    with ServerProcess(
        conf=BROKER_CONF, data_dir=tmp_path_factory.mktemp("console-server"), console_port=free_port()
    ) as server:
        assert f"finchmq console at {server.console_url}" in server.log_tail(40), server.log_tail(40)
        yield Cluster(server)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A topic/group-safe name from the test's name."""
    base = re.sub(r"[^a-zA-Z0-9_-]", "_", request.node.name)[:40]
    return f"{base}_{time.monotonic_ns() % 100000}"


class DeadLetter:
    """A group whose online consumer sent one message ("poison") to its dead-letter queue; it
    accepts the message once ``healed`` is set."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.group = f"G_{topic}"
        self.healed = threading.Event()
        self.calls: list[tuple[str, str]] = []
        cluster.create_topic(topic, queues=1)
        self.consumer = cluster.consumer(self.group, topic, self._listen, max_reconsume_times=0)
        cluster.send(topic, ["poison"])
        self.letter = wait_until(
            lambda: cluster.ok("GET", f"/api/groups/{self.group}/dlq?begin=0")["messages"],
            what="the dead letter",
        )[0]

    def _listen(self, msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        self.calls.extend((m.topic, m.body.decode()) for m in msgs)
        if self.healed.is_set():
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        return ConsumeConcurrentlyStatus.RECONSUME_LATER


class ConsumedGroup:
    """A group that consumed ``count`` messages of a fresh topic and went offline (lag 0)."""

    def __init__(self, cluster: Cluster, topic: str, count: int) -> None:
        self.group = f"G_{topic}"
        cluster.create_topic(topic, queues=2)
        self.before = int(time.time() * 1000) - 60_000
        cluster.send(topic, [f"m{i}" for i in range(count)])
        seen: list[str] = []
        self.consumer = cluster.consumer(
            self.group, topic, lambda msgs, ctx: seen.extend(m.msg_id for m in msgs)
        )
        try:
            wait_until(lambda: len(seen) >= count, what=f"the consumer to read {count} messages")
            wait_until(
                lambda: (
                    (p := cluster.ok("GET", f"/api/groups/{self.group}")["progress"]) and p["diffTotal"] == 0
                ),
                what="the group's offsets to reach the end",
            )
        finally:
            self.consumer.shutdown()


# The accounts of the login's tests: (name, password, role)
ADMIN_USER = ("alice", "alice-secret-1", "admin")
READ_ONLY_USER = ("bob", "bob-secret-22", "read-only")


def console_user(users: Path, *args: str, password: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``finchmq console-user ARGS --users USERS``, the password on standard input."""
    return subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "console-user", *args, "--users", str(users)],
        input=None if password is None else password + "\n",
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


class ConsoleProcess(ChildServer):
    """``finchmq console`` for the cluster at ``namesrv`` with the accounts in ``users`` (and more
    ``options``), on a free port; ``url`` is its loopback address."""

    name = "finchmq console"

    def __init__(self, namesrv: str, users: Path, data_dir: Path, *options: str) -> None:
        super().__init__(data_dir, "finchmq-console-")
        self.namesrv = namesrv
        self.users = users
        self.port = free_port()
        self.options = options
        self.url = f"http://127.0.0.1:{self.port}/"

    def start(self) -> ConsoleProcess:
        args = [sys.executable, "-m", "finchmq.cli", "console", "--namesrv", self.namesrv,
                "--port", str(self.port), "--users", str(self.users),
                "--data-dir", str(self.data_dir / "console"), *self.options]  # fmt: skip
        self._spawn(args, None, lambda: "finchmq console at" in self.log_path.read_text(), "serve")
        return self

    def log_count(self, text: str) -> int:
        return self.log_path.read_text(errors="replace").count(text)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the tests look at the redirect itself


class WebClient:
    """A browser without a browser: HTTP with a cookie jar, no redirects followed, and the
    session's CSRF token (read from /api/session after logging in) sent with every change."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect)
        self.csrf: str | None = None

    def request(
        self, method: str, path: str, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, str]:
        """``(status, headers, body text)``."""
        request = urllib.request.Request(self.url + path.lstrip("/"), data=data, method=method,
                                         headers=headers or {})  # fmt: skip
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.headers, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read().decode()

    def login(self, user: str, password: str) -> tuple[int, Any, str]:
        """Fill the login form as a browser does; the answer to its POST."""
        status, _, page = self.request("GET", "/login")
        assert status == 200, page
        match = re.search(r'name="csrf" value="([^"]+)"', page)
        assert match, page
        form = urllib.parse.urlencode(
            {"csrf": match.group(1), "next": "/", "username": user, "password": password}
        )
        answer = self.request(
            "POST", "/login", form.encode(), {"Content-Type": "application/x-www-form-urlencoded"}
        )
        if answer[0] == 303:
            self.csrf = self.call("GET", "/api/session")[1]["csrfToken"]
        return answer

    def call(self, method: str, path: str, body: Any = None, *, csrf: str | None = None) -> tuple[int, Any]:
        """``(status, decoded JSON)`` of one API request; ``csrf`` overrides the session's token
        ("" sends none)."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        token = self.csrf if csrf is None else csrf
        if method != "GET" and token:
            headers["X-CSRF-Token"] = token
        status, _, text = self.request(
            method, path, None if body is None else json.dumps(body).encode(), headers
        )
        return status, json.loads(text)

    def session_cookie(self) -> str | None:
        return next((c.value for c in self.jar if c.name == "finchmq-console-session"), None)


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An accounts file with an admin and a read-only user, written by ``finchmq console-user``."""
    users = tmp_path_factory.mktemp("console-users") / "users.properties"
    for name, password, role in (ADMIN_USER, READ_ONLY_USER):
        result = console_user(users, "add", name, "--role", role, password=password)
        assert result.returncode == 0, result
    return users


@pytest.fixture(scope="session")
def login_console(
    cluster: Cluster, users_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    """``finchmq console`` with a login, listening on every address (allowed: it has accounts)."""
    with ConsoleProcess(
        cluster.namesrv, users_file, tmp_path_factory.mktemp("login-console"), "--bind", "0.0.0.0"
    ) as console:
        yield console
