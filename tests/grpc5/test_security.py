"""Security of the 5.x endpoint: ACL 1.0 accounts (``aclEnable=true``, ``plain_acl.yml``) checked on
every gRPC call from the SDK's ``authorization`` signature, and TLS on the gRPC port.

Every refusal is in-body ``UNAUTHORIZED`` (40100), as Java's 5.3.3 proxy answers both a failed
authentication and a failed authorization. Without the SDK: the authorizer called directly with a
``CallContext``, and a grpclib client for the in-stream refusal of Telemetry settings.
"""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from grpclib.client import Channel
from grpclib.const import Cardinality

from finchmq.broker.acl import PlainAccessValidator
from finchmq.client import SessionCredentials
from finchmq.client.sync import BlockingAdminClient
from finchmq.grpc._pb import definition_pb2 as pb
from finchmq.grpc._pb import service_pb2 as spb
from finchmq.grpc.auth import AclAuthorizer, resources_of
from finchmq.grpc.context import CallContext
from finchmq.grpc.status import GrpcStatusError
from finchmq.protocol.acl import ANY, PUB, SUB
from finchmq.testing import EmbeddedServer

from .conftest import ServerFactory, grpc_endpoints

ACL_FILE = """\
accounts:
  - accessKey: sdk_account
    secretKey: sdk_secret_1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [sdk_topic=PUB|SUB, sdk_sub_only=SUB]
    groupPerms: [sdk_group=SUB]
  - accessKey: sdk_admin
    secretKey: sdk_admin_secret
    admin: true
"""
GOOD = {"ak": "sdk_account", "sk": "sdk_secret_1"}
UNAUTHORIZED = 40100
TOPICS = ("sdk_topic", "sdk_sub_only")


def keys(ak: str, sk: str) -> list[str]:
    return ["--ak", ak, "--sk", sk]


# -- the authorizer, called directly ----------------------------------------------------------------


def signed(
    ak: str | None, sk: str, *, date: str = "20250101T120000Z", peer: str = "127.0.0.1:5000"
) -> CallContext:
    """A call's context as the SDK signs it (``signature.py``): HMAC-SHA1 of x-mq-date-time."""
    metadata = {"x-mq-client-id": "client-1", "x-mq-date-time": date}
    if ak is not None:
        digest = hmac.new(sk.encode(), date.encode(), hashlib.sha1).hexdigest()
        metadata["authorization"] = (
            f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={digest}"
        )
    return CallContext("QueryRoute", metadata, peer)


@pytest.fixture
def authorizer(tmp_path: Path) -> AclAuthorizer:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE, encoding="utf-8")
    acl = PlainAccessValidator(path)
    acl.load()
    return AclAuthorizer(acl.check_grpc)


def topic(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def settings_command(**fields: Any) -> spb.TelemetryCommand:
    return spb.TelemetryCommand(settings=pb.Settings(**fields))


async def refusal(authorizer: AclAuthorizer, ctx: CallContext, method: str, request: Message) -> str:
    with pytest.raises(GrpcStatusError) as caught:
        await authorizer(ctx, method, request)
    assert caught.value.code == pb.UNAUTHORIZED
    return caught.value.message


def test_what_each_rpc_needs() -> None:
    group = pb.Resource(name="g")
    t = topic("t")
    queue = pb.MessageQueue(topic=t)
    assert resources_of(
        "SendMessage", spb.SendMessageRequest(messages=[pb.Message(topic=t), pb.Message(topic=topic("u"))])
    ) == [("t", False, PUB), ("u", False, PUB)]
    assert resources_of("EndTransaction", spb.EndTransactionRequest(topic=t)) == [("t", False, PUB)]
    assert resources_of("RecallMessage", spb.RecallMessageRequest(topic=t)) == [("t", False, PUB)]
    assert resources_of("QueryRoute", spb.QueryRouteRequest(topic=t)) == [("t", False, ANY)]
    both = [("g", True, SUB), ("t", False, SUB)]
    assert resources_of("ReceiveMessage", spb.ReceiveMessageRequest(group=group, message_queue=queue)) == both
    for method, request in [
        ("AckMessage", spb.AckMessageRequest(group=group, topic=t)),
        ("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(group=group, topic=t)),
        ("ForwardMessageToDeadLetterQueue", spb.ForwardMessageToDeadLetterQueueRequest(group=group, topic=t)),
        ("QueryAssignment", spb.QueryAssignmentRequest(group=group, topic=t)),
    ]:
        assert resources_of(method, request) == both, method
    assert resources_of("Heartbeat", spb.HeartbeatRequest(client_type=pb.PRODUCER)) == []
    assert resources_of("Heartbeat", spb.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER, group=group)) == [
        ("g", True, SUB)
    ]
    assert resources_of("NotifyClientTermination", spb.NotifyClientTerminationRequest()) == []
    assert resources_of("NotifyClientTermination", spb.NotifyClientTerminationRequest(group=group)) == [
        ("g", True, SUB)
    ]
    publishing = settings_command(publishing=pb.Publishing(topics=[t, topic("u")]))
    assert resources_of("Telemetry", publishing) == [("t", False, PUB), ("u", False, PUB)]
    subscription = pb.Subscription(group=group, subscriptions=[pb.SubscriptionEntry(topic=t)])
    assert resources_of("Telemetry", settings_command(subscription=subscription)) == both
    assert resources_of("Telemetry", spb.TelemetryCommand(thread_stack_trace=spb.ThreadStackTrace())) == []


async def test_the_authorizer(authorizer: AclAuthorizer) -> None:
    route = spb.QueryRouteRequest(topic=topic("sdk_sub_only"))
    await authorizer(signed("sdk_account", "sdk_secret_1"), "QueryRoute", route)  # ANY: SUB is enough
    await authorizer(
        signed("sdk_account", "sdk_secret_1"),
        "ReceiveMessage",
        spb.ReceiveMessageRequest(
            group=pb.Resource(name="sdk_group"), message_queue=pb.MessageQueue(topic=topic("sdk_topic"))
        ),
    )
    await authorizer(signed("sdk_admin", "sdk_admin_secret"), "QueryRoute", route)
    assert "Check signature failed for accessKey=sdk_account" in await refusal(
        authorizer, signed("sdk_account", "not_the_secret"), "QueryRoute", route
    )
    assert "No acl config for nobody" in await refusal(authorizer, signed("nobody", "x"), "QueryRoute", route)
    assert "No accessKey is configured" in await refusal(authorizer, signed(None, ""), "QueryRoute", route)
    assert "No accessKey is configured" in await refusal(authorizer, signed("", ""), "QueryRoute", route)
    send = spb.SendMessageRequest(messages=[pb.Message(topic=topic("sdk_sub_only"))])
    assert "topic:sdk_sub_only (needs PUB" in await refusal(
        authorizer, signed("sdk_account", "sdk_secret_1"), "SendMessage", send
    )
    bad_header = CallContext(
        "QueryRoute", {"x-mq-date-time": "20250101T120000Z", "authorization": "garbage"}, "127.0.0.1:1"
    )
    assert "authentication header is incorrect" in await refusal(authorizer, bad_header, "QueryRoute", route)
    assert "doesn't have publishing or subscription" in await refusal(
        authorizer, signed("sdk_account", "sdk_secret_1"), "Telemetry", settings_command()
    )
    assert "doesn't have group" in await refusal(
        authorizer,
        signed("sdk_account", "sdk_secret_1"),
        "Heartbeat",
        spb.HeartbeatRequest(client_type=pb.PUSH_CONSUMER),
    )


# -- a broker with aclEnable=true, driven by the SDK -------------------------------------------------


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    directory = tmp_path_factory.mktemp("grpc-acl")
    acl_file = directory / "plain_acl.yml"
    acl_file.write_text(ACL_FILE, encoding="utf-8")
    with EmbeddedServer(
        directory, {"aclEnable": "true", "aclFilePath": str(acl_file)}, grpc_port=0
    ) as server:
        admin_keys = SessionCredentials("sdk_admin", "sdk_admin_secret")
        with BlockingAdminClient(namesrv_addr=server.namesrv_addr, session_credentials=admin_keys) as admin:
            for name in TOPICS:
                admin.create_topic(name, read_queue_nums=4, write_queue_nums=4)
        yield server


def refusals(server: EmbeddedServer) -> Any:
    assert server.broker is not None and server.broker.acl is not None
    return server.broker.acl.refusals


def test_good_keys_route_and_are_not_refused_a_send(acl_server: EmbeddedServer, sdk: Any) -> None:
    endpoints = grpc_endpoints(acl_server)
    records = sdk("route", "--endpoints", endpoints, "--topic", "sdk_topic", *keys(**GOOD)).finish()
    assert {"started": True} in records, records
    routes = [r["route"] for r in records if "route" in r]
    assert routes and {q["topic"] for q in routes[0]} == {"sdk_topic"}, records
    # the account has SUB only on sdk_sub_only: QueryRoute needs ANY
    records = sdk("route", "--endpoints", endpoints, "--topic", "sdk_sub_only", *keys(**GOOD)).finish()
    assert [r for r in records if "route" in r], records
    before = dict(refusals(acl_server))
    process = sdk("produce", "--endpoints", endpoints, "--topic", "sdk_topic", "--count", "1", *keys(**GOOD))
    process.finish()
    # SendMessage itself may not be served yet on this branch: whatever it answers, not the ACL's
    assert all(e.get("code") != UNAUTHORIZED for e in process.errors()), process.errors()
    assert dict(refusals(acl_server)) == before


@pytest.mark.parametrize(
    ("credentials", "why"),
    [
        ({"ak": "sdk_account", "sk": "not_the_secret"}, "signature"),
        ({"ak": "nobody", "sk": "sdk_secret_1"}, "unknown-account"),
        ({"ak": "", "sk": ""}, "no-access-key"),  # no credentials: the SDK still sends "Credential="
    ],
)
def test_bad_credentials_are_refused(
    acl_server: EmbeddedServer, sdk: Any, credentials: dict[str, str], why: str
) -> None:
    seen = refusals(acl_server)[why]
    records = sdk(
        "route", "--endpoints", grpc_endpoints(acl_server), "--topic", "sdk_topic", *keys(**credentials)
    ).finish()
    errors = [r for r in records if "error" in r]
    assert errors and errors[0]["code"] == UNAUTHORIZED, records
    assert not [r for r in records if "route" in r]
    assert refusals(acl_server)[why] > seen


def test_a_send_without_pub_is_refused(acl_server: EmbeddedServer, sdk: Any) -> None:
    seen = refusals(acl_server)["permission"]
    process = sdk(
        "produce",
        "--endpoints",
        grpc_endpoints(acl_server),
        "--topic",
        "sdk_sub_only",
        "--count",
        "1",
        "--undeclared",  # a declared topic would be refused in the settings, silently for the SDK
        *keys(**GOOD),
    )
    records = process.finish()
    errors = process.errors()
    assert errors and errors[0].get("code") == UNAUTHORIZED, records
    assert "sdk_sub_only" in errors[0]["message"]
    assert records[-1]["done"] == 0
    assert refusals(acl_server)["permission"] > seen


async def test_telemetry_settings_are_refused_in_the_stream(acl_server: EmbeddedServer) -> None:
    """Java writes the refusal as a TelemetryCommand status and keeps the stream."""
    date = time.strftime("%Y%m%dT%H%M%SZ")

    def metadata(sk: str) -> dict[str, str]:
        digest = hmac.new(sk.encode(), date.encode(), hashlib.sha1).hexdigest()
        return {
            "x-mq-client-id": f"grpclib-{uuid.uuid4()}",
            "x-mq-date-time": date,
            "x-mq-language": "PYTHON",
            "x-mq-client-version": "5.1.2",
            "authorization": f"MQv2-HMAC-SHA1 Credential=sdk_account, SignedHeaders=x-mq-date-time, "
            f"Signature={digest}",
        }

    publishing = settings_command(
        client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[topic("sdk_sub_only")])
    )
    allowed = settings_command(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[topic("sdk_topic")]))
    async with (
        Channel("127.0.0.1", acl_server.grpc_port) as channel,
        channel.request(
            "/apache.rocketmq.v2.MessagingService/Telemetry",
            Cardinality.STREAM_STREAM,
            spb.TelemetryCommand,
            spb.TelemetryCommand,
            metadata=metadata("sdk_secret_1"),
        ) as stream,
    ):
        await stream.send_message(publishing)
        answer = await stream.recv_message()
        assert answer is not None and answer.status.code == pb.UNAUTHORIZED, answer
        assert not answer.HasField("settings")
        await stream.send_message(allowed)  # the stream goes on
        answer = await stream.recv_message()
        assert answer is not None and answer.status.code == pb.OK, answer
        assert answer.HasField("settings")
        await stream.end()


# -- TLS ------------------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A test CA and a server certificate it signed, for 127.0.0.1 and localhost (EC P-256)."""
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=finchmq test CA", cwd=d)  # fmt: skip
    openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n", encoding="ascii"
    )
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d)  # fmt: skip
    return {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key"}


@pytest.fixture
def tls_server(grpc_server_factory: ServerFactory, certificates: dict[str, Path]) -> EmbeddedServer:
    server = grpc_server_factory(
        None, {"tlsCertPath": str(certificates["cert"]), "tlsKeyPath": str(certificates["key"])}
    )
    with BlockingAdminClient(namesrv_addr=server.namesrv_addr) as admin:
        admin.create_topic("tls_topic", read_queue_nums=4, write_queue_nums=4)
    return server


def test_tls(tls_server: EmbeddedServer, sdk: Any, certificates: dict[str, Path]) -> None:
    endpoints = grpc_endpoints(tls_server)
    route = ["route", "--endpoints", endpoints, "--topic", "tls_topic"]
    records = sdk(*route, "--tls", "--ca", str(certificates["ca"])).finish()
    routes = [r["route"] for r in records if "route" in r]
    assert routes and {q["topic"] for q in routes[0]} == {"tls_topic"}, records
    # a plaintext client, or one that does not trust the CA: an error, no route, no hang
    for extra, words in (([], "Socket closed"), (["--tls"], "CERTIFICATE_VERIFY_FAILED")):
        process = sdk(*route, *extra)
        records = process.finish()
        errors = process.errors()
        assert errors and errors[0].get("grpc_status") == "UNAVAILABLE", (extra, records)
        assert words in errors[0]["message"]
        assert not [r for r in records if "route" in r] and records[-1] == {"done": 0}
