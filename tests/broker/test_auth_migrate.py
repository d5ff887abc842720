"""ACL 1.0 accounts migrated to ACL 2.0 users and ACLs (Java 5.3 ``AuthMigrator``): at a broker's
start with ``migrateAuthFromV1Enabled=true``, and with ``finchmq admin migrateAuthFromV1``.

The proof is behavioural: the same ``plain_acl.yml`` serves a broker with ACL 1.0 on and one with
ACL 2.0 and the migration on; finchmq's clients, signing with each account's keys over real
sockets, try every send and pull of a matrix of topics and groups on both, and each attempt is
allowed on one exactly when it is on the other.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.broker.acl import PlainAccessConfig, read_access_configs
from finchmq.broker.auth import v1_user_and_acl
from finchmq.cli.__main__ import main as cli_main
from finchmq.client import (
    AclRefusedError,
    AdminClient,
    Message,
    MQBrokerError,
    Producer,
    PullConsumer,
    SessionCredentials,
)
from finchmq.protocol import ResponseCode
from finchmq.protocol.auth import Action, Decision, PolicyType, ResourcePattern, ResourceType, UserType
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER

ACL_FILE = """\
accounts:
  - accessKey: app_account
    secretKey: app_secret_1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [t_both=PUB|SUB, t_pub=PUB, t_sub=SUB, t_deny=DENY]
    groupPerms: [g_deny=DENY]
  - accessKey: reader_account
    secretKey: reader_secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: [t_pub=DENY]
  - accessKey: writer_account
    secretKey: writer_secret
    defaultTopicPerm: PUB
    groupPerms: [g_ok=SUB]
  - accessKey: admin_account
    secretKey: admin_secret
    admin: true
  - accessKey: keeper_account          # a 2.0 user already: not migrated
    secretKey: keeper_v1_secret
    defaultTopicPerm: PUB
"""
SHORT_KEY = """\
  - accessKey: short                   # refused by 1.0 (keys of 6 characters or less): not migrated
    secretKey: short_secret
"""
TOPICS = ("t_both", "t_pub", "t_sub", "t_deny", "t_other")
GROUPS = ("g_ok", "g_deny", "g_other")
ACCOUNTS = {
    name: SessionCredentials(name, secret)
    for name, secret in (
        ("app_account", "app_secret_1"),
        ("reader_account", "reader_secret"),
        ("writer_account", "writer_secret"),
        ("admin_account", "admin_secret"),
    )
}
ADMIN = ACCOUNTS["admin_account"]
KEEPER_V1 = SessionCredentials("keeper_account", "keeper_v1_secret")
KEEPER_V2 = SessionCredentials("keeper_account", "keeper_v2_secret")
V2_BROKER = {
    **TEST_BROKER,
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    # a 2.0 user by the name of a 1.0 account (created before the migration, as in Java)
    "innerClientAuthenticationCredentials": json.dumps(
        {"accessKey": KEEPER_V2.access_key, "secretKey": KEEPER_V2.secret_key}
    ),
}


def test_an_account_becomes_a_user_and_an_acl_as_java_makes_them(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE + SHORT_KEY, encoding="utf-8")
    accounts, problems = read_access_configs(path)
    assert [a.access_key for a in accounts] == [
        "app_account", "reader_account", "writer_account", "admin_account", "keeper_account",
    ]  # fmt: skip
    assert len(problems) == 1 and "accounts[5]" in problems[0] and "accessKey=short" in problems[0]
    user, acl = v1_user_and_acl(accounts[0])
    assert (user.username, user.password, user.user_type) == ("app_account", "app_secret_1", UserType.NORMAL)
    assert acl is not None and acl.subject == "User:app_account"
    table = [
        (
            p.policy_type,
            e.resource.type if e.resource else None,
            e.resource.name if e.resource else None,
            e.actions,
            e.decision,
            e.environment,
        )
        for p in acl.policies
        for e in p.entries
    ]
    custom, default, topic, group = (
        PolicyType.CUSTOM,
        PolicyType.DEFAULT,
        ResourceType.TOPIC,
        ResourceType.GROUP,
    )
    allow, deny = Decision.ALLOW, Decision.DENY
    assert table == [
        (custom, topic, "t_both", (Action.PUB, Action.SUB), allow, None),
        (custom, topic, "t_pub", (Action.PUB,), allow, None),
        (custom, topic, "t_sub", (Action.SUB,), allow, None),
        (custom, topic, "t_deny", (Action.ALL,), deny, None),
        (custom, group, "g_deny", (Action.ALL,), deny, None),
        (default, topic, None, (Action.ALL,), deny, None),
        (default, group, None, (Action.SUB,), allow, None),
    ]
    assert all(
        e.resource is not None and e.resource.pattern is ResourcePattern.ANY for e in acl.policies[1].entries
    )
    admin_user, admin_acl = v1_user_and_acl(accounts[3])
    assert admin_user.user_type is UserType.SUPER and admin_acl is None
    # whiteRemoteAddress lets a 1.0 peer skip the checks: Java does not migrate it, nor does finchmq
    white = PlainAccessConfig("white_account", "white_secret", white_remote_address="10.0.0.*")
    assert v1_user_and_acl(white)[1] is None


# -- real brokers -----------------------------------------------------------------------------------


def refused(exc: MQBrokerError) -> str:
    """ "refused" for the refusal of ACL 1.0 or 2.0; any other error is the test's failure."""
    if isinstance(exc, AclRefusedError) or exc.response_code == ResponseCode.NO_PERMISSION:
        return "refused"
    raise exc


async def _send(server: EmbeddedServer, keys: SessionCredentials, outcomes: dict[str, str]) -> None:
    async with Producer(
        "migrate_pg",
        namesrv_addr=server.namesrv_addr,
        session_credentials=keys,
        instance_name=f"p-{time.monotonic_ns()}",
        retry_times_when_send_failed=0,
    ) as producer:
        for topic in TOPICS:
            try:
                await producer.send(Message.create(topic, b"x"))
                outcomes[f"send {topic}"] = "ok"
            except MQBrokerError as exc:
                outcomes[f"send {topic}"] = refused(exc)


async def _pull(server: EmbeddedServer, keys: SessionCredentials, outcomes: dict[str, str]) -> None:
    for group in GROUPS:
        async with PullConsumer(
            group,
            namesrv_addr=server.namesrv_addr,
            session_credentials=keys,
            instance_name=f"c-{time.monotonic_ns()}",
        ) as consumer:
            for topic in TOPICS:
                [mq, *_] = sorted(await consumer.fetch_subscribe_message_queues(topic))
                try:
                    await consumer.pull(mq, "*", 0, 1)
                    outcomes[f"pull {topic} as {group}"] = "ok"
                except MQBrokerError as exc:
                    outcomes[f"pull {topic} as {group}"] = refused(exc)


async def what_each_may_do(server: EmbeddedServer, *credentials: SessionCredentials) -> dict[str, Any]:
    """Every account's outcome ("ok"/"refused") of a send to each topic and a pull of each topic
    as each group."""
    everything: dict[str, Any] = {}
    for keys in credentials:
        outcomes: dict[str, str] = {}
        await _send(server, keys, outcomes)
        await _pull(server, keys, outcomes)
        everything[f"{keys.access_key}/{keys.secret_key}"] = outcomes
    return everything


async def create_topics(server: EmbeddedServer, keys: SessionCredentials) -> None:
    async with AdminClient(namesrv_addr=server.namesrv_addr, session_credentials=keys) as admin:
        for topic in TOPICS:
            await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)


@pytest.fixture(scope="module")
def acl_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("migrate-acl") / "plain_acl.yml"
    path.write_text(ACL_FILE, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def under_v1(tmp_path_factory: pytest.TempPathFactory, acl_file: Path) -> Iterator[dict[str, Any]]:
    """What each account may do under ACL 1.0."""

    directory = tmp_path_factory.mktemp("migrate-v1")
    with EmbeddedServer(
        directory, {**TEST_BROKER, "aclEnable": "true", "aclFilePath": str(acl_file)}
    ) as server:
        keys = (*ACCOUNTS.values(), SessionCredentials("app_account", "not_the_secret"), KEEPER_V1)

        async def run() -> dict[str, Any]:
            await create_topics(server, ADMIN)
            return await what_each_may_do(server, *keys)

        yield asyncio.run(run())


def normalized(users: list[Any], acls: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Users and ACLs as mqadmin lists them, without what only the wire form adds (empty source
    IP lists)."""
    user_rows = sorted((u.username, u.password, u.user_type, u.user_status) for u in users)
    acl_rows = {
        a.subject: [
            (p.policy_type, e.resource, tuple(e.actions or ()), e.decision)
            for p in a.policies or ()
            for e in p.entries or ()
        ]
        for a in acls
    }
    return user_rows, acl_rows


async def listing(server: EmbeddedServer, keys: SessionCredentials) -> tuple[list[Any], dict[str, Any]]:
    async with AdminClient(namesrv_addr=server.namesrv_addr, session_credentials=keys) as admin:
        return normalized(await admin.list_user(server.broker_addr), await admin.list_acl(server.broker_addr))


async def test_migrated_at_start_each_user_may_do_what_it_could(
    tmp_path: Path, acl_file: Path, under_v1: dict[str, Any]
) -> None:
    props = {**V2_BROKER, "migrateAuthFromV1Enabled": "true", "aclFilePath": str(acl_file)}
    keys = (*ACCOUNTS.values(), SessionCredentials("app_account", "not_the_secret"), KEEPER_V1)
    with EmbeddedServer(tmp_path, props) as server:
        await create_topics(server, ADMIN)  # admin_account is a SUPER user now
        under_v2 = await what_each_may_do(server, *keys)
        # the 1.0 accounts may do exactly what they could; keeper_account keeps its 2.0 password
        v1_keeper = under_v1.pop(f"{KEEPER_V1.access_key}/{KEEPER_V1.secret_key}")
        v2_keeper = under_v2.pop(f"{KEEPER_V1.access_key}/{KEEPER_V1.secret_key}")
        assert under_v2 == under_v1
        assert "ok" in v1_keeper.values() and set(v2_keeper.values()) == {"refused"}
        assert set(
            (await what_each_may_do(server, KEEPER_V2))[f"keeper_account/{KEEPER_V2.secret_key}"].values()
        ) == {"ok"}
        # sanity: the matrix has both answers for the ordinary accounts
        assert {"ok", "refused"} <= set(under_v1["app_account/app_secret_1"].values())
        users, acls = await listing(server, ADMIN)
        assert [u[0] for u in users] == sorted([*ACCOUNTS, "keeper_account"])
        assert "User:keeper_account" not in acls
        async with AdminClient(namesrv_addr=server.namesrv_addr, session_credentials=ADMIN) as admin:
            await admin.delete_acl("User:writer_account", broker_addr=server.broker_addr)
        store = tmp_path / "store" / "config" / "auth"
        before = (store / "users.json").read_bytes(), (store / "acls.json").read_bytes()
    # again at the next start: nothing changes, not even the ACL deleted since
    with EmbeddedServer(tmp_path, props) as server:
        assert ((store / "users.json").read_bytes(), (store / "acls.json").read_bytes()) == before
        users_again, acls_again = await listing(server, ADMIN)
        assert users_again == users and "User:writer_account" not in acls_again


def test_the_admin_command_migrates_a_running_broker(
    tmp_path: Path, acl_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = SessionCredentials("rocketmq2", "12345678")
    props = {
        **V2_BROKER,
        "initAuthenticationUser": json.dumps({"username": "rocketmq2", "password": "12345678"}),
    }
    with EmbeddedServer(tmp_path / "by-command", props) as server:

        def migrate() -> tuple[int, str, str]:
            login = ["--access-key", root.access_key, "--secret-key", root.secret_key]
            args = ["admin", "migrateAuthFromV1", "-f", str(acl_file), "-b", server.broker_addr]
            code = cli_main([*args, "-n", server.namesrv_addr, *login])
            out, err = capsys.readouterr()
            return code, out, err

        code, out, err = migrate()
        assert code == 0, err
        lines = out.splitlines()
        for name in ACCOUNTS:
            assert f"migrate user {name} to {server.broker_addr} success." in lines
        assert f"user keeper_account exists on {server.broker_addr}, left alone." in lines
        by_command = asyncio.run(listing(server, root))
        code, out, err = migrate()  # again: every account is a user now
        assert code == 0 and "success" not in out, out
        assert out.count("left alone.") == len(ACCOUNTS) + 1
        assert asyncio.run(listing(server, root)) == by_command
    # the same users (but the broker's own) and ACLs as the migration at start-up makes
    props_at_start = {**V2_BROKER, "migrateAuthFromV1Enabled": "true", "aclFilePath": str(acl_file)}
    with EmbeddedServer(tmp_path / "at-start", props_at_start) as server:
        at_start = asyncio.run(listing(server, ADMIN))
    users, acls = by_command
    assert ([u for u in users if u[0] != "rocketmq2"], acls) == at_start
