"""The console's login over HTTP (no browser): a ``finchmq console`` process with an accounts file
written by ``finchmq console-user``, against the live cluster. Without a session nothing but the
login page answers; a wrong password, a forged or missing CSRF token and a read-only user's change
are refused, each logged once; sessions expire and end at logout; account changes apply live."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from finchmq.testing.process import free_port
from tests.waiting import wait_until

from .conftest import ADMIN_USER, READ_ONLY_USER, Cluster, ConsoleProcess, WebClient, console_user

MUTATIONS = [  # every route that changes something, with a body it would accept
    ("POST", "/api/topics", {"topic": "T_forbidden", "cluster": "DefaultCluster"}),
    ("DELETE", "/api/topics/TBW102", {}),
    ("POST", "/api/groups/G_any/reset-offset", {"topic": "TBW102", "timestamp": 0}),
    ("POST", "/api/groups/G_any/dlq/resend", {"msgId": "00"}),
    ("POST", "/api/messages", {"topic": "TBW102", "body": "x"}),
]


def logged_in(console: ConsoleProcess, user: tuple[str, str, str]) -> WebClient:
    client = WebClient(console.url)
    status, headers, _ = client.login(user[0], user[1])
    assert status == 303 and headers["Location"] == "/", status
    return client


def test_without_a_session_only_the_login_page_answers(login_console: ConsoleProcess) -> None:
    client = WebClient(login_console.url)
    status, data = client.call("GET", "/api/cluster")
    assert status == 401 and "log in first" in data["error"]
    assert client.call("POST", "/api/topics", {"topic": "T_nosession"})[0] == 401
    status, headers, _ = client.request("GET", "/")
    assert status == 303 and headers["Location"] == "/login?next=/"
    status, _, page = client.request("GET", "/login")
    assert status == 200 and 'id="login-submit"' in page
    assert client.request("GET", "/static/style.css")[0] == 200  # the login page's look
    assert "finchmq console at http://localhost:" in login_console.log_tail()  # on every address


def test_wrong_password_or_unknown_user_is_refused_and_logged_once(login_console: ConsoleProcess) -> None:
    # the console is shared: count this test's lines (another test may have failed a login before)
    admin_line, mallory_line = f"failed login as '{ADMIN_USER[0]}'", "failed login as 'mallory'"
    admin_before, mallory_before = login_console.log_count(admin_line), login_console.log_count(mallory_line)
    client = WebClient(login_console.url)
    status, _, page = client.login(ADMIN_USER[0], "not-the-password")
    assert status == 401 and "Wrong user name or password." in page
    assert client.session_cookie() is None
    assert client.login("mallory", "whatever-it-is")[0] == 401
    assert client.call("GET", "/api/cluster")[0] == 401
    wait_until(lambda: login_console.log_count(mallory_line) == mallory_before + 1, what="the log line")
    assert login_console.log_count(admin_line) == admin_before + 1


def test_a_login_form_from_elsewhere_is_refused(login_console: ConsoleProcess) -> None:
    client = WebClient(login_console.url)  # no login page fetched: no login cookie, a made-up token
    form = f"csrf=made-up&next=/&username={ADMIN_USER[0]}&password={ADMIN_USER[1]}".encode()
    status, _, page = client.request(
        "POST", "/login", form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 403 and "The login form expired" in page
    assert client.session_cookie() is None


def test_admin_logs_in_with_a_strict_cookie_and_changes_the_cluster(
    login_console: ConsoleProcess, cluster: Cluster, name: str
) -> None:
    client = WebClient(login_console.url)
    status, headers, _ = client.login(ADMIN_USER[0], ADMIN_USER[1])
    assert status == 303
    [cookie] = [c for c in headers.get_all("Set-Cookie") if c.startswith("finchmq-console-session=")]
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes and "secure" not in attributes  # http
    status, me = client.call("GET", "/api/session")
    assert status == 200 and me["login"] is True and (me["user"], me["role"]) == ("alice", "admin")
    assert client.call("GET", "/api/cluster")[0] == 200
    status, created = client.call("POST", "/api/topics", {"topic": name, "cluster": "DefaultCluster"})
    assert status == 200 and created["topic"] == name, created
    assert client.call("DELETE", f"/api/topics/{name}?cluster=DefaultCluster", {})[0] == 200


def test_forged_or_missing_csrf_token_is_refused_and_logged_once(
    login_console: ConsoleProcess, name: str
) -> None:
    admin = logged_in(login_console, ADMIN_USER)
    other = logged_in(login_console, READ_ONLY_USER)
    assert other.csrf != admin.csrf  # a token is bound to its session
    before = login_console.log_count("a wrong CSRF token"), login_console.log_count("no CSRF token")
    for token in ("forged-token", other.csrf):
        status, data = admin.call(
            "POST", "/api/topics", {"topic": name, "cluster": "DefaultCluster"}, csrf=token
        )
        assert status == 403 and "a wrong CSRF token" in data["error"], data
    status, data = admin.call("POST", "/api/topics", {"topic": name, "cluster": "DefaultCluster"}, csrf="")
    assert status == 403 and "no CSRF token" in data["error"], data
    assert admin.call("GET", f"/api/topics/{name}")[0] == 404  # nothing was created
    wait_until(
        lambda: (
            (login_console.log_count("a wrong CSRF token"), login_console.log_count("no CSRF token"))
            == (before[0] + 2, before[1] + 1)
        ),
        what="one log line per refused request",
    )


def test_read_only_sees_everything_and_changes_nothing(
    login_console: ConsoleProcess, cluster: Cluster
) -> None:
    client = logged_in(login_console, READ_ONLY_USER)
    status, me = client.call("GET", "/api/session")
    assert (me["user"], me["role"]) == ("bob", "read-only")
    for path in ("/api/cluster", "/api/topics", "/api/groups", "/api/topics/TBW102", "/api/series/brokers"):
        assert client.call("GET", path)[0] == 200, path
    for method, path, body in MUTATIONS:
        status, data = client.call(method, path, body)
        assert status == 403 and "bob is a read-only account" in data["error"], (method, path, data)
    assert client.call("GET", "/api/topics/T_forbidden")[0] == 404
    assert client.call("GET", "/api/topics/TBW102")[0] == 200  # not deleted


def test_logout_ends_the_session_on_the_server(login_console: ConsoleProcess) -> None:
    client = logged_in(login_console, READ_ONLY_USER)  # a read-only user may log out
    token = client.session_cookie()
    assert client.call("POST", "/logout", csrf="")[0] == 403  # logging someone out needs the token too
    status, data = client.call("POST", "/logout")
    assert status == 200 and data == {"loggedOut": "bob"}
    assert client.session_cookie() is None
    replay = WebClient(login_console.url)  # the old cookie, kept by someone
    status, _ = replay.call("GET", "/api/cluster")
    assert status == 401
    status, _, _ = replay.request(
        "GET", "/api/cluster", headers={"Cookie": f"finchmq-console-session={token}"}
    )
    assert status == 401


def test_a_session_expires_after_its_timeout(cluster: Cluster, users_file: Path, tmp_path: Path) -> None:
    with ConsoleProcess(cluster.namesrv, users_file, tmp_path, "--session-timeout", "0.5") as console:
        client = logged_in(console, ADMIN_USER)
        # polled less often than the timeout: each request finds the session expired
        wait_until(
            lambda: client.call("GET", "/api/cluster")[0] == 401, what="the session to expire", interval=1.0
        )
        status, data = client.call("GET", "/api/session")
        assert status == 401 and "log in first" in data["error"]
        assert client.call("POST", "/api/topics", {"topic": "T_expired"})[0] == 401


def test_account_changes_apply_without_a_restart(cluster: Cluster, users_file: Path, tmp_path: Path) -> None:
    users = tmp_path / "users.properties"
    users.write_text(users_file.read_text())
    with ConsoleProcess(cluster.namesrv, users, tmp_path / "console") as console:
        carol = ("carol", "carol-secret-3", "read-only")
        assert WebClient(console.url).login(carol[0], carol[1])[0] == 401
        assert console_user(users, "add", carol[0], password=carol[1]).returncode == 0
        client = logged_in(console, carol)
        assert client.call("POST", "/api/topics", {"topic": "T_carol"})[0] == 403
        assert console_user(users, "role", "carol", "--role", "admin").returncode == 0
        status, data = client.call("POST", "/api/topics", {"topic": "no spaces"})
        assert status == 400, data  # past the guard: the cluster's own check
        assert console_user(users, "passwd", "carol", password="carol-new-secret").returncode == 0
        assert WebClient(console.url).login(carol[0], carol[1])[0] == 401
        assert console_user(users, "delete", "carol").returncode == 0
        assert client.call("GET", "/api/cluster")[0] == 401  # a deleted account's session ends
    listed = console_user(users, "list")
    assert listed.stdout.split() == ["alice", "admin", "bob", "read-only"], listed


def test_console_user_command_errors(tmp_path: Path) -> None:
    users = tmp_path / "users.properties"
    short = console_user(users, "add", "dave", password="short")
    assert short.returncode == 2 and "at least 8 characters" in short.stderr
    assert not users.exists()
    assert console_user(users, "add", "dave", "--role", "admin", password="dave-secret").returncode == 0
    assert oct(users.stat().st_mode & 0o777) == "0o600"
    again = console_user(users, "add", "dave", password="dave-secret")
    assert again.returncode == 2 and "already in" in again.stderr
    missing = console_user(users, "passwd", "erin", password="erin-secret")
    assert missing.returncode == 2 and "no account 'erin'" in missing.stderr
    line = users.read_text().splitlines()[-1]
    assert line.startswith("dave=scrypt$") and line.endswith(",1") and "dave-secret" not in line


def console_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "console", "--namesrv", "127.0.0.1:1", "--port", str(free_port()),
         *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "example.org"])
def test_a_network_address_needs_accounts(bind: str) -> None:
    result = console_command("--bind", bind)
    assert result.returncode == 2, result
    assert f"refusing to serve the console on {bind}: without a login" in result.stderr


def test_bad_accounts_files_are_refused_at_start(tmp_path: Path) -> None:
    dashboard = tmp_path / "users.properties"  # rocketmq-dashboard's, passwords in clear
    dashboard.write_text("# Define Admin\nsuper=admin,1\nuser1=user\n")
    result = console_command("--users", str(dashboard))
    assert result.returncode == 2 and "the password of 'super' is not hashed" in result.stderr, result
    assert "finchmq console-user passwd super" in result.stderr
    empty = tmp_path / "empty.properties"
    empty.write_text("# nobody\n")
    result = console_command("--users", str(empty))
    assert result.returncode == 2 and "has no account" in result.stderr, result
    result = console_command("--users", str(tmp_path / "missing"))
    assert result.returncode == 2 and "cannot read the console's accounts file" in result.stderr, result


def test_cookies_are_secure_behind_an_https_proxy(login_console: ConsoleProcess) -> None:
    """A proxy on this machine saying https (``X-Forwarded-Proto``) makes the cookies ``Secure``."""
    client = WebClient(login_console.url)
    status, headers, _ = client.request("GET", "/login", headers={"X-Forwarded-Proto": "https"})
    [cookie] = headers.get_all("Set-Cookie")
    assert status == 200 and "secure" in {a.strip().lower() for a in cookie.split(";")}, cookie
