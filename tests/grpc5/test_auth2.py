"""The 5.x endpoint under ACL 2.0 (``authenticationEnabled``/``authorizationEnabled``): the SDK's
signed calls authenticated as 2.0 users and authorized by their ACLs, as Java 5.3.3's proxy does,
every refusal in-body ``UNAUTHORIZED`` (40100).

With the official SDK (``sdk_driver.py``) against a broker with users and ACLs made with the
``AUTH_*`` requests; without it, the authorizer called directly with a ``CallContext``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.broker import BrokerConfig
from finchmq.broker.auth import AuthChecker, AuthMetadataManager, build_auth
from finchmq.client import AdminClient, SessionCredentials
from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.grpc.auth import AuthAuthorizer, authorization_contexts
from finchmq.protocol.auth import User, UserStatus, UserType
from finchmq.testing import EmbeddedServer

from .conftest import grpc_endpoints, produce, simple
from .test_security import UNAUTHORIZED, keys, refusal, settings_command, signed, topic

ROOT = SessionCredentials("rocketmq2", "12345678")
USER = {"ak": "sdk_user", "sk": "sdk_user_password"}
TOPIC, SUB_ONLY, GROUP = "auth2_topic", "auth2_sub_only", "auth2_group"


# -- what each call needs, and the authorizer called directly ----------------------------------------


def needs(request: Any) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (c.resource.key, tuple(a.java_name for a in c.actions))
        for c in authorization_contexts(request, "u", "10.0.0.1")
    ]


def test_what_each_rpc_needs_under_acl_2() -> None:
    group, t = pb.Resource(name="g"), topic("t")
    pub, sub = ("Pub",), ("Sub",)
    send = spb.SendMessageRequest(messages=[pb.Message(topic=t), pb.Message(topic=topic("u"))])
    assert needs(send) == [("Topic:t", pub), ("Topic:u", pub)]
    assert needs(spb.EndTransactionRequest(topic=t)) == [("Topic:t", pub)]
    assert needs(spb.RecallMessageRequest(topic=t)) == [("Topic:t", pub)]
    assert needs(spb.QueryRouteRequest(topic=t)) == [("Topic:t", ("Pub", "Sub"))]
    both = [("Group:g", sub), ("Topic:t", sub)]
    assert needs(spb.ReceiveMessageRequest(group=group, message_queue=pb.MessageQueue(topic=t))) == both
    for request in (
        spb.AckMessageRequest(group=group, topic=t),
        spb.ForwardMessageToDeadLetterQueueRequest(group=group, topic=t),
        spb.QueryAssignmentRequest(group=group, topic=t),
    ):
        assert needs(request) == both, request
    # Java 5.3.3 asks only the group of ChangeInvisibleDuration, and of a pull consumer's heartbeat too
    assert needs(spb.ChangeInvisibleDurationRequest(group=group, topic=t)) == [("Group:g", sub)]
    assert needs(spb.HeartbeatRequest(client_type=pb.PULL_CONSUMER, group=group)) == [("Group:g", sub)]
    assert needs(spb.HeartbeatRequest(client_type=pb.PRODUCER)) == []
    assert needs(spb.NotifyClientTerminationRequest()) == []
    publishing = settings_command(publishing=pb.Publishing(topics=[t, topic("u")]))
    assert needs(publishing) == [("Topic:t", pub), ("Topic:u", pub)]
    subscription = pb.Subscription(group=group, subscriptions=[pb.SubscriptionEntry(topic=t)])
    assert needs(settings_command(subscription=subscription)) == both
    contexts = authorization_contexts(spb.QueryRouteRequest(topic=t), "u", "10.0.0.1")
    assert contexts[0].username == "u" and contexts[0].source_ip == "10.0.0.1"


@pytest.fixture
def checker(tmp_path: Path) -> AuthChecker:
    config = BrokerConfig(
        authentication_enabled=True,
        authorization_enabled=True,
        authorization_whitelist="apache.rocketmq.v2.EndTransactionRequest",
    )
    built = build_auth(config, tmp_path)
    assert built is not None
    manager: AuthMetadataManager = built[0]
    manager.store.put_user_now(User("sdk_user", "sdk_user_password", UserType.NORMAL, UserStatus.ENABLE))
    manager.store.put_user_now(User("off_user", "off_user_password", UserType.NORMAL, UserStatus.DISABLE))
    return built[1]


async def test_the_authorizer_under_acl_2(checker: AuthChecker) -> None:
    authorizer = AuthAuthorizer(checker.check_grpc)
    route = spb.QueryRouteRequest(topic=topic(TOPIC))
    good = signed("sdk_user", "sdk_user_password")
    message = await refusal(authorizer, good, "QueryRoute", route)  # a user without an ACL
    assert (
        message
        == f"User:sdk_user has no permission to access Topic:{TOPIC} from 127.0.0.1, no matched policies."
    )
    assert (
        await refusal(authorizer, signed("sdk_user", "wrong"), "QueryRoute", route)
        == "check signature failed."
    )
    assert (
        await refusal(authorizer, signed("nobody", "x"), "QueryRoute", route) == "User:nobody is not found."
    )
    assert (
        await refusal(authorizer, signed("off_user", "off_user_password"), "QueryRoute", route)
        == "User:off_user is disabled."
    )
    assert await refusal(authorizer, signed(None, ""), "QueryRoute", route) == "username cannot be null."
    assert await refusal(authorizer, signed("", ""), "QueryRoute", route) == "username cannot be null."
    assert await refusal(authorizer, good, "QueryRoute", spb.QueryRouteRequest()) == "topic is null."
    # the whitelists name 5.x requests by their protobuf names, as Java's rpc codes
    await authorizer(good, "EndTransaction", spb.EndTransactionRequest(topic=topic("anything")))
    assert checker.refusals["authentication"] == 5


# -- the SDK against a broker -----------------------------------------------------------------------------


async def set_up(server: EmbeddedServer) -> None:
    broker = server.broker_addr
    async with AdminClient(namesrv_addr=server.namesrv_addr, session_credentials=ROOT) as admin:
        for name in (TOPIC, SUB_ONLY):
            await admin.create_topic(name, read_queue_nums=2, write_queue_nums=2)
        await admin.create_user(USER["ak"], USER["sk"], broker_addr=broker)
        subject = f"User:{USER['ak']}"
        await admin.create_acl(subject, [f"Topic:{TOPIC}"], ["Pub", "Sub"], "Allow", broker_addr=broker)
        await admin.create_acl(
            subject, [f"Topic:{SUB_ONLY}", f"Group:{GROUP}"], ["Sub"], "Allow", broker_addr=broker
        )


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    props = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": ROOT.access_key, "password": ROOT.secret_key}),
    }
    with EmbeddedServer(tmp_path_factory.mktemp("grpc-auth2"), props, grpc_port=0) as server:
        asyncio.run(set_up(server))
        yield server


def refusals(server: EmbeddedServer) -> Any:
    assert server.broker is not None and server.broker.auth_checker is not None
    return server.broker.auth_checker.refusals


def test_a_user_sends_and_receives_what_its_acl_allows(auth_server: EmbeddedServer, sdk: Any) -> None:
    endpoints = grpc_endpoints(auth_server)
    before = dict(refusals(auth_server))
    produce(sdk, endpoints, TOPIC, 3, **USER)
    consumer = simple(sdk, endpoints, TOPIC, GROUP, expect=3, **USER)
    records = consumer.finish()
    assert not consumer.errors(), records
    assert len(consumer.of("received")) == 3 and records[-1]["done"] == 3
    assert dict(refusals(auth_server)) == before


def test_a_wrong_password_is_refused(auth_server: EmbeddedServer, sdk: Any) -> None:
    seen = refusals(auth_server)["authentication"]
    records = sdk(
        "route", "--endpoints", grpc_endpoints(auth_server), "--topic", TOPIC, *keys(USER["ak"], "not-it")
    ).finish()
    errors = [r for r in records if "error" in r]
    assert errors and errors[0]["code"] == UNAUTHORIZED, records
    assert "check signature failed" in errors[0]["message"]
    assert not [r for r in records if "route" in r]
    assert refusals(auth_server)["authentication"] > seen


def test_a_send_without_pub_is_refused(auth_server: EmbeddedServer, sdk: Any) -> None:
    seen = refusals(auth_server)["authorization"]
    process = sdk(
        "produce", "--endpoints", grpc_endpoints(auth_server), "--topic", SUB_ONLY, "--count", "1",
        "--undeclared",  # a declared topic would be refused in the settings, silently for the SDK
        *keys(**USER),
    )  # fmt: skip
    records = process.finish()
    errors = process.errors()
    assert errors and errors[0].get("code") == UNAUTHORIZED, records
    assert f"User:sdk_user has no permission to access Topic:{SUB_ONLY}" in errors[0]["message"]
    assert records[-1]["done"] == 0
    assert refusals(auth_server)["authorization"] > seen
