"""The console's ACL page against live ``finchmq server`` processes, one with ACL 1.0
(``aclEnable``, a ``plain_acl.yml``) and one with ACL 2.0 (``authenticationEnabled`` and
``authorizationEnabled``), each with a ``finchmq console`` signing as the cluster's admin: over
HTTP (accounts, users and rules created, changed and deleted; secrets never shown in full; bad
input 400; read-only users and bad CSRF tokens 403) and in a real browser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import BlockingAdminClient, SessionCredentials
from finchmq.testing.process import ServerProcess

from .conftest import ADMIN_USER, BROKER_CONF, READ_ONLY_USER, ConsoleProcess, WebClient

ACL1_ADMIN = SessionCredentials("console_admin", "console-secret-1")
ACL2_ROOT = SessionCredentials("rocketmq2", "root-password-1")
ACL1_FILE = f"""\
accounts:
  - accessKey: {ACL1_ADMIN.access_key}
    secretKey: {ACL1_ADMIN.secret_key}
    admin: true
"""


class AclCluster:
    """A server with ACL on and a console (with logins) signing as its admin."""

    def __init__(
        self, server: ServerProcess, console: ConsoleProcess, credentials: SessionCredentials
    ) -> None:
        self.server = server
        self.console = console
        self.credentials = credentials
        self.admin = WebClient(console.url)
        assert self.admin.login(ADMIN_USER[0], ADMIN_USER[1])[0] == 303

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.server.broker_port}"

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.admin.call(method, path, body)
        assert status == 200, (status, data)
        return data

    def state(self) -> dict[str, Any]:
        [broker] = self.ok("GET", "/api/acl")["brokers"]
        assert broker["brokerAddr"] == self.broker
        return broker  # type: ignore[no-any-return]


def acl_cluster(
    tmp: Path, users_file: Path, conf: dict[str, str], credentials: SessionCredentials
) -> Iterator[AclCluster]:
    with ServerProcess(conf={**BROKER_CONF, **conf}, data_dir=tmp / "server", metrics=False) as server:
        options = ("--access-key", credentials.access_key, "--secret-key", credentials.secret_key)
        with ConsoleProcess(server.namesrv_addr, users_file, tmp / "console", *options) as console:
            yield AclCluster(server, console, credentials)


@pytest.fixture(scope="module")
def acl1(tmp_path_factory: pytest.TempPathFactory, users_file: Path) -> Iterator[AclCluster]:
    tmp = tmp_path_factory.mktemp("acl1")
    (tmp / "plain_acl.yml").write_text(ACL1_FILE)
    conf = {"aclEnable": "true", "aclFilePath": str(tmp / "plain_acl.yml")}
    yield from acl_cluster(tmp, users_file, conf, ACL1_ADMIN)


@pytest.fixture(scope="module")
def acl2(tmp_path_factory: pytest.TempPathFactory, users_file: Path) -> Iterator[AclCluster]:
    conf = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps(
            {"username": ACL2_ROOT.access_key, "password": ACL2_ROOT.secret_key}
        ),
    }
    yield from acl_cluster(tmp_path_factory.mktemp("acl2"), users_file, conf, ACL2_ROOT)


def acl1_file(cluster: AclCluster) -> str:
    return (cluster.server.data_dir.parent / "plain_acl.yml").read_text()


def test_acl1_accounts_created_changed_deleted(acl1: AclCluster) -> None:
    state = acl1.state()
    assert state["acl1"]["enabled"] and state["acl1"]["files"][0]["path"].endswith("plain_acl.yml")
    assert not state["acl2"]["enabled"] and "ACL 2.0 is not enabled" in state["acl2"]["error"]
    saved = acl1.ok("POST", "/api/acl/accounts", {
        "accessKey": "app_account", "secretKey": "app-secret-99", "cluster": "DefaultCluster",
        "defaultTopicPerm": "SUB", "topicPerms": ["orders=PUB|SUB"], "groupPerms": "g1=SUB,g2=DENY",
        "whiteRemoteAddress": "192.168.0.*",
    })  # fmt: skip
    assert saved == {"accessKey": "app_account", "secretKey": "ap******", "brokers": [acl1.broker]}
    text = acl1_file(acl1)
    assert "app-secret-99" in text and "orders=PUB|SUB" in text and "g2=DENY" in text
    version = acl1.state()["acl1"]["files"][0]["counter"]
    assert version > state["acl1"]["files"][0]["counter"]
    changed = acl1.ok(
        "POST", "/api/acl/accounts", {"accessKey": "app_account", "admin": True, "cluster": "DefaultCluster"}
    )
    assert changed["secretKey"] is None  # none given: the file keeps it
    text = acl1_file(acl1)
    assert "app-secret-99" in text and "admin: true" in text.split("app_account")[1]
    deleted = acl1.ok("DELETE", "/api/acl/accounts/app_account", {"cluster": "DefaultCluster"})
    assert deleted == {"accessKey": "app_account", "brokers": [acl1.broker], "deleted": True}
    assert "app_account" not in acl1_file(acl1)
    status, error = acl1.admin.call("DELETE", "/api/acl/accounts/app_account", {"cluster": "DefaultCluster"})
    assert status == 502 and error["codeName"] == "DELETE_ACL_CONFIG_FAILED"


def test_acl2_users_and_rules(acl2: AclCluster) -> None:
    state = acl2.state()
    assert not state["acl1"]["enabled"] and "not enabled" in state["acl1"]["error"]
    [root] = state["acl2"]["users"]
    assert root == {
        "username": "rocketmq2",
        "password": "ro******",
        "userType": "Super",
        "userStatus": "enable",
    }
    created = acl2.ok(
        "POST",
        "/api/acl/users",
        {"username": "alice", "password": "alice-password", "cluster": "DefaultCluster"},
    )
    assert created == {"username": "alice", "password": "al******", "brokers": [acl2.broker], "created": True}
    users = {u["username"]: u for u in acl2.state()["acl2"]["users"]}
    assert users["alice"] == {
        "username": "alice",
        "password": "al******",
        "userType": "Normal",
        "userStatus": "enable",
    }
    acl2.ok("POST", "/api/acl/users/alice", {"userStatus": "disable", "cluster": "DefaultCluster"})
    assert {u["username"]: u for u in acl2.state()["acl2"]["users"]}["alice"]["userStatus"] == "disable"

    rule = acl2.ok("POST", "/api/acl/rules", {
        "subject": "User:alice", "resources": ["Topic:orders*", "Group:g1"], "actions": "Pub,Sub",
        "decision": "Allow", "sourceIps": ["10.0.0.0/8"], "cluster": "DefaultCluster",
    })  # fmt: skip
    assert rule["brokers"] == [acl2.broker]
    rules = acl2.state()["acl2"]["rules"]
    assert [(r["subject"], r["resource"], r["actions"], r["sourceIps"], r["decision"]) for r in rules] == [
        ("User:alice", "Topic:orders*", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow"),
        ("User:alice", "Group:g1", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow"),
    ]
    acl2.ok(
        "DELETE",
        "/api/acl/rules",
        {"subject": "User:alice", "resource": "Group:g1", "cluster": "DefaultCluster"},
    )
    assert [r["resource"] for r in acl2.state()["acl2"]["rules"]] == ["Topic:orders*"]
    acl2.ok("DELETE", "/api/acl/users/alice", {"cluster": "DefaultCluster"})
    state = acl2.state()["acl2"]
    assert [u["username"] for u in state["users"]] == ["rocketmq2"] and state["rules"] == []
    with BlockingAdminClient(namesrv_addr=acl2.server.namesrv_addr, session_credentials=ACL2_ROOT) as admin:
        assert admin.get_user(acl2.broker, "alice") is None


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/api/acl/accounts", {"accessKey": "short", "secretKey": "long-enough-1"}, "longer than 6 characters"),
        ("/api/acl/accounts", {"accessKey": "long_enough", "secretKey": "12345"}, "longer than 6 characters"),
        ("/api/acl/accounts", {"accessKey": "long_enough"}, "give a cluster or a broker address"),
        ("/api/acl/accounts", {"accessKey": "long_enough", "cluster": "DefaultCluster", "defaultTopicPerm": "ALL"},
         "defaultTopicPerm is one of PUB, SUB, PUB|SUB or DENY, not 'ALL'"),
        ("/api/acl/accounts", {"accessKey": "long_enough", "cluster": "DefaultCluster", "topicPerms": ["orders"]},
         "each of topicPerms is NAME=PERM"),
        ("/api/acl/accounts", {"accessKey": "long_enough", "cluster": "DefaultCluster", "admin": "yes"},
         "admin must be true or false"),
        ("/api/acl/accounts", {"accessKey": "long_enough", "cluster": "DefaultCluster", "groupPerms": 7},
         "groupPerms must be a list of text"),
        ("/api/acl/users", {"username": "bad name", "password": "pw-123456"}, "a user name is letters"),
        ("/api/acl/users", {"username": "carol", "cluster": "DefaultCluster"}, "a new user needs a password"),
        ("/api/acl/users", {"username": "carol", "password": "pw-1234567", "userType": "Boss"}, "userType is Super or Normal"),
        ("/api/acl/users/carol", {"userStatus": "paused"}, "userStatus is enable or disable"),
        ("/api/acl/rules", {"subject": "alice", "resources": "Topic:a", "actions": "Pub", "decision": "Allow"},
         "the subject is User:NAME"),
        ("/api/acl/rules", {"subject": "User:alice", "resources": "Queue:a", "actions": "Pub", "decision": "Allow"},
         "resources are *, Topic:NAME"),
        ("/api/acl/rules", {"subject": "User:alice", "resources": "Topic:a", "actions": "Fly", "decision": "Allow"},
         "actions are some of All, Pub, Sub"),
        ("/api/acl/rules", {"subject": "User:alice", "resources": "Topic:a", "actions": "Pub", "decision": "Maybe"},
         "decision is Allow or Deny"),
        ("/api/acl/rules", {"subject": "User:alice", "resources": "Topic:a", "actions": "Pub", "decision": "Allow",
                            "sourceIps": "10.0.0.300"}, "source IPs are addresses or CIDR blocks"),
    ],
)  # fmt: skip
def test_bad_acl_input_is_400(acl2: AclCluster, path: str, body: dict[str, Any], error: str) -> None:
    status, data = acl2.admin.call("POST", path, body)
    assert status == 400 and error in data["error"], data


MUTATIONS = [
    ("POST", "/api/acl/accounts", {"accessKey": "forbidden_key", "secretKey": "forbidden-1", "cluster": "DefaultCluster"}),
    ("DELETE", "/api/acl/accounts/forbidden_key", {"cluster": "DefaultCluster"}),
    ("POST", "/api/acl/users", {"username": "mallory", "password": "mallory-pw-1", "cluster": "DefaultCluster"}),
    ("POST", "/api/acl/users/rocketmq2", {"password": "taken-over-1", "cluster": "DefaultCluster"}),
    ("DELETE", "/api/acl/users/rocketmq2", {"cluster": "DefaultCluster"}),
    ("POST", "/api/acl/rules", {"subject": "User:mallory", "resources": "*", "actions": "All", "decision": "Allow",
                                "cluster": "DefaultCluster"}),
    ("DELETE", "/api/acl/rules", {"subject": "User:rocketmq2", "cluster": "DefaultCluster"}),
]  # fmt: skip


def test_read_only_users_and_bad_csrf_tokens_change_no_acl(acl2: AclCluster) -> None:
    reader = WebClient(acl2.console.url)
    assert reader.login(READ_ONLY_USER[0], READ_ONLY_USER[1])[0] == 303
    assert reader.call("GET", "/api/acl")[0] == 200  # reading is allowed, secrets masked
    for method, path, body in MUTATIONS:
        status, data = reader.call(method, path, body)
        assert status == 403 and "bob is a read-only account" in data["error"], (method, path, data)
        for token, why in (("forged-token", "a wrong CSRF token"), ("", "no CSRF token")):
            status, data = acl2.admin.call(method, path, body, csrf=token)
            assert status == 403 and why in data["error"], (method, path, data)
    assert [u["username"] for u in acl2.state()["acl2"]["users"]] == ["rocketmq2"]


def test_no_secret_in_full_anywhere(acl1: AclCluster, acl2: AclCluster) -> None:
    acl1.ok(
        "POST",
        "/api/acl/accounts",
        {"accessKey": "masked_key", "secretKey": "do-not-show-me", "cluster": "DefaultCluster"},
    )
    acl2.ok(
        "POST",
        "/api/acl/users",
        {"username": "dave", "password": "do-not-show-me", "cluster": "DefaultCluster"},
    )
    for cluster in (acl1, acl2):
        text = json.dumps(cluster.ok("GET", "/api/acl"))
        assert "do-not-show-me" not in text and ACL2_ROOT.secret_key not in text
    acl1.ok("DELETE", "/api/acl/accounts/masked_key", {"cluster": "DefaultCluster"})
    acl2.ok("DELETE", "/api/acl/users/dave", {"cluster": "DefaultCluster"})


# -- in a browser ------------------------------------------------------------------------------------

from .test_browser import browser as browser  # noqa: E402, PLC0414  (the module's chromium fixture)
from .test_browser import checked_page  # noqa: E402
from .test_browser_login import log_in  # noqa: E402

pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is missing (pip install -e '.[dev]')"
)
from playwright.sync_api import Browser, Page, expect  # noqa: E402


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    yield from checked_page(browser)


def open_acl(page: Page, cluster: AclCluster, user: tuple[str, str, str] = ADMIN_USER) -> None:
    page.goto(cluster.console.url)
    log_in(page, user[0], user[1])
    page.wait_for_function("document.body.dataset.loaded")
    page.click("nav >> text=ACL")
    expect(page.locator("nav a.active")).to_have_text("ACL")
    page.wait_for_function("document.body.dataset.loaded")
    expect(page.locator("main h1")).to_have_text("ACL")


def test_browser_acl2_user_and_rule(page: Page, acl2: AclCluster) -> None:
    open_acl(page, acl2)
    expect(page.locator(".acl1-off")).to_contain_text("not enabled")
    page.fill("#user-name", "erin")
    page.fill("#user-password", "erin-password-1")
    page.click("#user-submit")
    expect(page.locator("#user-result")).to_contain_text(f"Created erin (password er******) on {acl2.broker}")
    state = page.locator("#acl-state")
    expect(state).to_contain_text("erin")
    expect(state).not_to_contain_text("erin-password-1")
    page.fill("#rule-subject", "User:erin")
    page.fill("#rule-resources", "Topic:pay*")
    page.fill("#rule-actions", "Pub")
    page.click("#rule-submit")
    expect(page.locator("#rule-result")).to_contain_text("Saved User:erin on Topic:pay*")
    expect(state.locator("tr", has_text="Topic:pay*")).to_contain_text("Allow")
    page.fill("#rule-actions", "Launch")
    page.click("#rule-submit")
    expect(page.locator("#error-text")).to_contain_text("actions are some of")
    page.click("#error-close")
    page.on("dialog", lambda dialog: dialog.accept())
    state.locator("tr", has_text="Topic:pay*").locator(".rule-delete").click()
    expect(state.locator("tr", has_text="Topic:pay*")).to_have_count(0)
    state.locator("tr", has_text="erin").locator(".user-delete").click()
    expect(state.locator("tr", has_text="erin")).to_have_count(0)


def test_browser_acl1_account(page: Page, acl1: AclCluster) -> None:
    open_acl(page, acl1)
    expect(page.locator(".acl2-off")).to_contain_text("ACL 2.0 is not enabled")
    page.fill("#acl1-accessKey", "browser_key")
    page.fill("#acl1-secretKey", "browser-secret-1")
    page.select_option("#acl1-defaultTopicPerm", "PUB")
    page.fill("#acl1-topicPerms", "orders=SUB")
    page.click("#acl1-submit")
    expect(page.locator("#acl1-result")).to_contain_text(
        f"Saved browser_key (secret br******) on {acl1.broker}"
    )
    assert "browser-secret-1" in acl1_file(acl1) and "orders=SUB" in acl1_file(acl1)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#acl1-delete")
    expect(page.locator("#acl1-result")).to_contain_text(f"Deleted browser_key on {acl1.broker}")
    assert "browser_key" not in acl1_file(acl1)


def test_browser_read_only_user_has_no_acl_forms(page: Page, acl2: AclCluster) -> None:
    open_acl(page, acl2, READ_ONLY_USER)
    expect(page.locator("#acl-state")).to_contain_text("rocketmq2")
    for form in ("#user-submit", "#rule-submit", "#acl1-submit", ".user-delete"):
        expect(page.locator(form)).to_have_count(0)
