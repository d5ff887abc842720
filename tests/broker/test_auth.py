"""ACL 2.0 (Java 5.3 users and ACLs): the JSON forms against Java's field names, which entry
decides, what each request needs, and a real broker with ``authenticationEnabled`` and
``authorizationEnabled`` driven by finchmq's clients and ``finchmq admin``: the AUTH_* round
trips, a user allowed PUB on ``Topic:orders*`` sends to orders-1 and not to other, DENY beats
ALLOW, a SUPER user skips authorization, a bad signature is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.broker import BrokerConfig
from finchmq.broker.auth import AuthConfigError, build_auth
from finchmq.cli.__main__ import main as cli_main
from finchmq.client import AdminClient, Message, MQBrokerError, Producer, SessionCredentials
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.acl import sign_request
from finchmq.protocol.auth import (
    Acl,
    AclInfo,
    Action,
    Decision,
    Environment,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserInfo,
    UserStatus,
    UserType,
    authorization_contexts,
)
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
)
from finchmq.protocol.filter import build_subscription_data
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER

ROOT = SessionCredentials("rocketmq2", "12345678")  # initAuthenticationUser: a SUPER user
ALICE = SessionCredentials("alice", "alice-password")
CLUSTER = "DefaultCluster"

# -- the JSON forms (Java field names; enums as codes when stored, by name on the wire) ------------


def test_a_user_stored_and_on_the_wire() -> None:
    user = User("alice", "pw", UserType.NORMAL, UserStatus.ENABLE)
    # LocalAuthenticationMetadataProvider: JSON.toJSONBytes(user), fields sorted, enums by code
    assert json.loads(user.to_store_json()) == {
        "password": "pw",
        "subjectType": 1,
        "userStatus": 1,
        "userType": 2,
        "username": "alice",
    }
    assert user.to_store_json() == (
        b'{"password":"pw","subjectType":1,"userStatus":1,"userType":2,"username":"alice"}'
    )
    assert User.from_stored(json.loads(user.to_store_json())) == user
    # UserInfo (the AUTH_*_USER bodies): enums by Java's names
    info = UserInfo.of(user)
    assert json.loads(info.to_json()) == {
        "password": "pw",
        "userStatus": "enable",
        "userType": "Normal",
        "username": "alice",
    }
    assert UserInfo.from_json(b'{"username":"bob","userType":"super"}').to_user() == User(
        "bob", None, UserType.SUPER, None
    )


def test_an_acl_stored_and_on_the_wire() -> None:
    info = AclInfo.single(
        "User:alice", ["Topic:orders*", "Group:*", "*"], ["Pub", "Sub"], ["10.0.0.0/8"], "Allow"
    )
    assert json.loads(info.to_json()) == {
        "policies": [
            {
                "entries": [
                    {
                        "actions": ["Pub", "Sub"],
                        "decision": "Allow",
                        "resource": r,
                        "sourceIps": ["10.0.0.0/8"],
                    }
                    for r in ("Topic:orders*", "Group:*", "*")
                ]
            }
        ],
        "subject": "User:alice",
    }
    acl = info.to_acl()
    acl.policies[0].policy_type = PolicyType.CUSTOM  # what the broker's validation sets
    stored = json.loads(acl.to_store_json())
    assert stored["subject"] == {"subjectType": 1, "username": "alice"}
    [policy] = stored["policies"]
    assert policy["policyType"] == 1
    assert policy["entries"][0] == {
        "actions": [3, 4],
        "decision": 1,
        "environment": {"sourceIps": ["10.0.0.0/8"]},
        "resource": {"resourceName": "orders", "resourcePattern": 3, "resourceType": 4},
    }
    assert policy["entries"][1]["resource"] == {"resourcePattern": 1, "resourceType": 5}
    assert policy["entries"][2]["resource"] == {"resourcePattern": 1, "resourceType": 1}
    assert Acl.from_stored("User:alice", stored) == acl
    back = AclInfo.of(acl)
    assert back.policies is not None and back.policies[0].policy_type == "Custom"
    assert [e.resource for e in back.policies[0].entries or ()] == ["Topic:orders*", "Group:*", "*"]


@pytest.mark.parametrize(
    ("key", "resource"),
    [
        ("Topic:orders", Resource(ResourceType.TOPIC, "orders", ResourcePattern.LITERAL)),
        ("Topic:orders*", Resource(ResourceType.TOPIC, "orders", ResourcePattern.PREFIXED)),
        ("group:*", Resource(ResourceType.GROUP, None, ResourcePattern.ANY)),
        ("*", Resource(ResourceType.ANY, None, ResourcePattern.ANY)),
        ("Cluster:DefaultCluster", Resource(ResourceType.CLUSTER, "DefaultCluster", ResourcePattern.LITERAL)),
        ("Queue:x", None),
        ("", None),
    ],
)
def test_resource_keys(key: str, resource: Resource | None) -> None:
    assert Resource.parse(key) == resource
    if resource is not None and key[0].isupper():
        assert resource.key == key


# -- which entry decides ------------------------------------------------------------------------


def entry(resource: str, decision: Decision, *actions: Action, ips: tuple[str, ...] = ()) -> PolicyEntry:
    parsed = Resource.parse(resource)
    assert parsed is not None
    return PolicyEntry(parsed, actions or (Action.PUB,), Environment(ips), decision)


def decision(acl: Acl, topic: str, ip: str = "192.168.0.1", action: Action = Action.PUB) -> Decision | None:
    found = acl.decide(Resource.of_topic(topic), (action,), ip)
    return None if found is None else found.decision


def test_the_most_specific_entry_decides_and_deny_beats_allow() -> None:
    allow, deny = Decision.ALLOW, Decision.DENY
    acl = Acl("User:test", [Policy(PolicyType.CUSTOM, [
        entry("*", allow), entry("Topic:*", allow), entry("Topic:test*", allow),
        entry("Topic:test_*", deny), entry("Topic:test_001", deny),
    ])])  # fmt: skip
    assert decision(acl, "test_001") is deny
    assert decision(acl, "test_002") is deny  # the longer prefix wins
    assert decision(acl, "testing") is allow
    assert decision(acl, "other") is allow
    assert decision(acl, "other", action=Action.SUB) is None  # no entry covers SUB
    # equally specific: DENY wins
    tie = Acl("User:test", [Policy(PolicyType.CUSTOM, [entry("Topic:a", allow), entry("Topic:a", deny)])])
    assert decision(tie, "a") is deny
    # ALL covers every action; an entry limited to source IPs applies only there
    acl = Acl("User:test", [Policy(PolicyType.CUSTOM, [
        entry("Topic:t", allow, Action.ALL, ips=("10.1.0.0/16", "127.0.0.1")),
    ])])  # fmt: skip
    assert decision(acl, "t", "10.1.2.3", Action.SUB) is allow
    assert decision(acl, "t", "127.0.0.1") is allow
    assert decision(acl, "t", "10.2.0.1") is None
    # the DEFAULT policy is read only when no CUSTOM entry matches
    acl = Acl("User:test", [
        Policy(PolicyType.DEFAULT, [entry("Topic:*", allow)]),
        Policy(PolicyType.CUSTOM, [entry("Topic:secret", deny)]),
    ])  # fmt: skip
    assert decision(acl, "secret") is deny
    assert decision(acl, "open") is allow


# -- what a request needs (Java DefaultAuthorizationContextBuilder) ----------------------------------


def needs(code: int, ext: dict[str, str], body: bytes = b"") -> list[tuple[str, tuple[str, ...]]]:
    request = RemotingCommand.request(code, {"AccessKey": "alice", **ext}, body)
    return [
        (c.resource.key, tuple(a.java_name for a in c.actions))
        for c in authorization_contexts(request, "10.0.0.7:5555", CLUSTER)
    ]


def test_what_requests_need() -> None:
    assert needs(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "orders"}) == [("Topic:orders", ("Pub",))]
    assert needs(RequestCode.SEND_MESSAGE_V2, {"a": "cg", "b": "%RETRY%cg"}) == [("Group:cg", ("Sub",))]
    assert needs(RequestCode.PULL_MESSAGE, {"consumerGroup": "cg", "topic": "orders"}) == [
        ("Topic:orders", ("Sub",)),
        ("Group:cg", ("Sub",)),
    ]
    assert needs(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "cg", "topic": "t"}) == [
        ("Topic:t", ("Sub", "Update")),
        ("Group:cg", ("Sub", "Update")),
    ]
    heartbeat = HeartbeatData(
        client_id="c",
        consumer_data_set=(
            ConsumerData(
                group_name="cg",
                consume_type=ConsumeType.CONSUME_PASSIVELY,
                message_model=MessageModel.CLUSTERING,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                subscription_data_set=(
                    build_subscription_data("orders", "*"),
                    build_subscription_data("%RETRY%cg", "*"),
                ),
            ),
        ),
    )
    assert needs(RequestCode.HEART_BEAT, {}, heartbeat.to_json()) == [
        ("Group:cg", ("Sub",)),
        ("Topic:orders", ("Sub",)),
    ]
    # by the 5.3.3 headers' annotations
    assert needs(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}) == [("Topic:t", ("Create",))]
    assert needs(RequestCode.AUTH_CREATE_USER, {"username": "u"}) == [(f"Cluster:{CLUSTER}", ("Update",))]
    assert needs(RequestCode.AUTH_LIST_ACL, {}) == [(f"Cluster:{CLUSTER}", ("Get",))]
    assert needs(RequestCode.QUERY_CORRECTION_OFFSET, {"filterGroups": "g1,g2", "compareGroup": "g3", "topic": "t"}) == [
        ("Group:g1", ("Get",)), ("Group:g2", ("Get",)), ("Group:g3", ("Get",)), ("Topic:t", ("Get",)),
    ]  # fmt: skip
    assert needs(RequestCode.UPDATE_BROKER_CONFIG, {}) == []  # not annotated in Java 5.3.3
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"AccessKey": "alice", "topic": "t"})
    [context] = authorization_contexts(request, "[::1]:5555", CLUSTER)
    assert (context.subject, context.source_ip) == ("User:alice", "::1")


# -- settings ---------------------------------------------------------------------------------------


def test_settings_the_broker_refuses(tmp_path: Path) -> None:
    assert build_auth(BrokerConfig(), tmp_path) is None
    with pytest.raises(AuthConfigError, match=r"authenticationProvider=com\.example\.Mine is not available"):
        build_auth(
            BrokerConfig(authentication_enabled=True, authentication_provider="com.example.Mine"), tmp_path
        )
    with pytest.raises(AuthConfigError, match="cannot both be on"):
        build_auth(BrokerConfig(acl_enable=True, authorization_enabled=True), tmp_path)
    with pytest.raises(AuthConfigError, match=r"migrateAuthFromV1Enabled=true needs ACL 2\.0 on"):
        build_auth(BrokerConfig(migrate_auth_from_v1_enabled=True), tmp_path)


# -- a real broker ------------------------------------------------------------------------------------

AUTH_BROKER = {
    **TEST_BROKER,
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "initAuthenticationUser": json.dumps({"username": ROOT.access_key, "password": ROOT.secret_key}),
}


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    directory = tmp_path_factory.mktemp("auth-broker")
    with EmbeddedServer(directory, AUTH_BROKER) as server:
        yield server


def producer(server: EmbeddedServer, credentials: SessionCredentials | None) -> Producer:
    return Producer(
        "auth_pg",
        namesrv_addr=server.namesrv_addr,
        session_credentials=credentials,
        instance_name=f"p-{time.monotonic_ns()}",
        retry_times_when_send_failed=0,
    )


async def send(server: EmbeddedServer, credentials: SessionCredentials | None, topic: str) -> str:
    """ "SEND_OK", or the refusal: "<code> <remark>"."""
    async with producer(server, credentials) as p:
        try:
            return (await p.send(Message.create(topic, b"x"))).send_status.name
        except MQBrokerError as exc:
            return f"{exc.response_code} {exc.remark}"


async def test_users_and_acls_round_trip_and_decide(auth_server: EmbeddedServer) -> None:
    broker = auth_server.broker_addr
    async with AdminClient(namesrv_addr=auth_server.namesrv_addr, session_credentials=ROOT) as admin:
        for topic in ("orders-1", "orders-secret", "other"):
            await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        # users
        assert await admin.create_user("alice", ALICE.secret_key, broker_addr=broker) == [broker]
        with pytest.raises(MQBrokerError, match="The user is existed") as caught:
            await admin.create_user("alice", "again", broker_addr=broker)
        assert caught.value.response_code == ResponseCode.NO_PERMISSION
        user = await admin.get_user(broker, "alice")
        assert user == UserInfo(
            username="alice", password=ALICE.secret_key, user_type="Normal", user_status="enable"
        )
        assert await admin.get_user(broker, "nobody") is None
        assert {u.username for u in await admin.list_user(broker)} == {"alice", ROOT.access_key}
        assert [u.username for u in await admin.list_user(broker, "lic")] == ["alice"]

        # no ACL yet: authenticated, not authorized
        refused = await send(auth_server, ALICE, "orders-1")
        assert refused == (
            f"{ResponseCode.NO_PERMISSION} User:alice has no permission to access Topic:orders-1 "
            "from 127.0.0.1, no matched policies."
        )
        await admin.create_acl("User:alice", ["Topic:orders*"], ["Pub"], "Allow", broker_addr=broker)
        await admin.create_acl(
            "User:alice", ["Topic:orders-secret"], ["Pub", "Sub"], "Deny", broker_addr=broker
        )
        acl = await admin.get_acl(broker, "User:alice")
        assert acl is not None and json.loads(acl.to_json()) == {
            "policies": [{"entries": [
                {"actions": ["Pub"], "decision": "Allow", "resource": "Topic:orders*", "sourceIps": []},
                {"actions": ["Pub", "Sub"], "decision": "Deny", "resource": "Topic:orders-secret", "sourceIps": []},
            ], "policyType": "Custom"}],
            "subject": "User:alice",
        }  # fmt: skip
        assert await send(auth_server, ALICE, "orders-1") == "SEND_OK"
        assert "no permission to access Topic:other from 127.0.0.1, no matched policies." in await send(
            auth_server, ALICE, "other"
        )
        assert "Topic:orders-secret from 127.0.0.1, the decision is deny." in await send(
            auth_server, ALICE, "orders-secret"
        )
        # a SUPER user skips authorization
        assert await send(auth_server, ROOT, "other") == "SEND_OK"
        # authentication: a wrong password, an unknown user, no keys, a disabled user
        bad = await send(auth_server, SessionCredentials("alice", "wrong-password"), "orders-1")
        assert bad == f"{ResponseCode.NO_PERMISSION} check signature failed."
        assert "User:mallory is not found." in await send(
            auth_server, SessionCredentials("mallory", "x1234567"), "x"
        )
        assert "username cannot be null." in await send(auth_server, None, "orders-1")

        # updateAcl replaces the entry of a resource already there; deleteAcl -r drops one entry
        await admin.create_acl(
            "User:alice", ["Topic:orders-secret"], ["Pub"], "Allow", broker_addr=broker, update=True
        )
        assert await send(auth_server, ALICE, "orders-secret") == "SEND_OK"
        listed = await admin.list_acl(broker, "alice", "secret")
        assert [[e.resource for e in p.entries or ()] for a in listed for p in a.policies or ()] == [
            ["Topic:orders-secret"]
        ]
        await admin.delete_acl("User:alice", "Topic:orders*", broker_addr=broker)
        assert "no matched policies" in await send(auth_server, ALICE, "orders-1")
        with pytest.raises(MQBrokerError, match=r"The subject of User:nobody is not exist\."):
            await admin.create_acl("User:nobody", ["Topic:x"], ["Pub"], "Allow", broker_addr=broker)
        with pytest.raises(MQBrokerError, match=r"The actions can not be Any\."):
            await admin.create_acl("User:alice", ["Topic:x"], ["Any"], "Allow", broker_addr=broker)
        with pytest.raises(MQBrokerError, match=r"The source ip is invalid\."):
            await admin.create_acl(
                "User:alice", ["Topic:x"], ["Pub"], "Allow", ["10.0.0.300"], broker_addr=broker
            )

        await admin.update_user("alice", user_status="disable", broker_addr=broker)
        assert "User:alice is disabled." in await send(auth_server, ALICE, "orders-secret")
        await admin.update_user("alice", user_status="enable", broker_addr=broker)

    # a normal user: the admin requests need Update on the cluster, and only a super user
    # creates a super user
    async with AdminClient(namesrv_addr=auth_server.namesrv_addr, session_credentials=ALICE) as admin:
        with pytest.raises(MQBrokerError, match=f"Cluster:{CLUSTER} from 127.0.0.1, no matched policies"):
            await admin.create_user("eve", "eve-password", "Super", broker_addr=broker)
    async with AdminClient(namesrv_addr=auth_server.namesrv_addr, session_credentials=ROOT) as admin:
        await admin.create_acl("User:alice", [f"Cluster:{CLUSTER}"], ["Update"], "Allow", broker_addr=broker)
    async with AdminClient(namesrv_addr=auth_server.namesrv_addr, session_credentials=ALICE) as admin:
        with pytest.raises(MQBrokerError, match="The super user can only be create by super user") as caught:
            await admin.create_user("eve", "eve-password", "Super", broker_addr=broker)
        assert caught.value.response_code == ResponseCode.SYSTEM_ERROR
        await admin.create_user("eve", "eve-password", broker_addr=broker)

    async with AdminClient(namesrv_addr=auth_server.namesrv_addr, session_credentials=ROOT) as admin:
        await admin.delete_user("eve", broker_addr=broker)
        assert await admin.get_user(broker, "eve") is None

    # the store: Java's keys and stored values, in config/auth/{users,acls}.json
    store = Path(auth_server.data_dir) / "store" / "config" / "auth"
    users = json.loads((store / "users.json").read_text())
    assert users["alice"] == {
        "password": ALICE.secret_key, "subjectType": 1, "userStatus": 1, "userType": 2, "username": "alice",
    }  # fmt: skip
    assert users[ROOT.access_key]["userType"] == 1
    acls = json.loads((store / "acls.json").read_text())
    assert acls["User:alice"]["subject"] == {"subjectType": 1, "username": "alice"}


def test_a_signed_request_needs_its_user_password() -> None:
    """The signature is ACL 1.0's: keyed with the user's password."""
    request = sign_request(RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t"}), ALICE)
    assert request.ext_fields["AccessKey"] == "alice" and "Signature" in request.ext_fields


def test_auth_admin_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with EmbeddedServer(tmp_path, AUTH_BROKER) as server:
        broker = server.broker_addr

        def admin(*args: str, keys: SessionCredentials = ROOT) -> tuple[int, str, str]:
            login = ["--access-key", keys.access_key, "--secret-key", keys.secret_key]
            code = cli_main(["admin", *args, "-n", server.namesrv_addr, *login])
            out, err = capsys.readouterr()
            return code, out, err

        code, out, err = admin("createUser", "-u", "bob", "-p", "bob-password", "-b", broker)
        assert (code, out.strip()) == (0, f"create user to {broker} success."), err
        code, out, err = admin("getUser", "-u", "bob", "-c", CLUSTER)
        assert code == 0, err
        assert [line.split() for line in out.splitlines()] == [
            ["#UserName", "#Password", "#UserType", "#UserStatus"],
            ["bob", "bob-password", "Normal", "enable"],
        ]
        assert out.splitlines()[1].startswith(f"{'bob':<16}  {'bob-password':<22}  Normal")
        code, out, err = admin("listUser", "-b", broker)
        assert code == 0 and {line.split()[0] for line in out.splitlines()[1:]} == {"bob", ROOT.access_key}
        code, out, err = admin(
            "createAcl", "-s", "User:bob", "-r", "Topic:orders*,Group:g1", "-a", "Pub,Sub",
            "-d", "Allow", "-i", "127.0.0.1,10.0.0.0/8", "-b", broker,
        )  # fmt: skip
        assert (code, out.strip()) == (0, f"create acl to {broker} success."), err
        code, out, err = admin("getAcl", "-s", "User:bob", "-b", broker)
        assert code == 0, err
        assert out.splitlines()[0].split() == [
            "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision",
        ]  # fmt: skip
        assert out.splitlines()[1].split()[:3] == ["User:bob", "Custom", "Topic:orders*"]
        assert "[Pub, Sub]" in out and "[127.0.0.1, 10.0.0.0/8]" in out and "Allow" in out
        code, out, err = admin("listAcl", "-b", broker, "-r", "Group")
        assert code == 0, err
        assert [line.split()[2] for line in out.splitlines()[1:]] == ["Group:g1"]
        code, out, err = admin("getAcl", "-s", "User:bob", "-b", broker, "--json")
        assert json.loads(out)[0]["subject"] == "User:bob"
        code, out, err = admin("deleteAcl", "-s", "User:bob", "-r", "Group:g1", "-b", broker)
        assert (code, out.strip()) == (0, f"delete acl to {broker} success."), err
        code, out, err = admin("updateUser", "-u", "bob", "-s", "disable", "-b", broker)
        assert (code, out.strip()) == (0, f"update user to {broker} success."), err
        code, out, err = admin("getUser", "-u", "bob", "-b", broker)
        assert out.splitlines()[1].split()[3] == "disable"
        # a refusal is an error naming why
        code, out, err = admin("listUser", "-b", broker, keys=SessionCredentials("bob", "bob-password"))
        assert code == 1 and "User:bob is disabled." in err
        code, out, err = admin("deleteUser", "-u", "bob", "-b", broker)
        assert (code, out.strip()) == (0, f"delete user to {broker} success."), err
        code, out, err = admin("getAcl", "-s", "User:bob", "-b", broker)
        assert code == 1 and "The subject of User:bob is not exist." in err
