"""ACL 1.0 (plain_acl.yml) in the broker: the file's checks, the check of each request (fuzzed), and
a real broker with ``aclEnable=true`` driven by finchmq's own clients: good keys send and consume;
a wrong secret, a missing permission, a peer outside the white lists and an admin-only request
from a non-admin are refused, each saying why; the file reloads while the broker runs."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.broker import BrokerConfig
from finchmq.broker.acl import AclConfigError, AclError, PlainAccessValidator, find_acl_files
from finchmq.cli.__main__ import main as cli_main
from finchmq.client import (
    AclRefusedError,
    AdminClient,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
    SessionCredentials,
)
from finchmq.client.sync import BlockingAdminClient, BlockingProducer
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.acl import ACCESS_KEY, ACL_EXCEPTION, ANY, PUB, SIGNATURE, SUB, sign_request
from finchmq.protocol.codec import decode_frame, encode_command
from finchmq.remoting import LocalChannel
from finchmq.testing import EmbeddedServer
from tests.broker.conftest import send_request
from tests.client.conftest import FAST_CLIENT, TEST_BROKER
from tests.waiting import eventually

ACL_FILE = """\
globalWhiteRemoteAddresses:
  - 10.250.250.*            # never the tests' 127.0.0.1
accounts:
  - accessKey: app_account
    secretKey: app_secret_1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - acl_both=PUB|SUB
      - acl_sub_only=SUB
      - acl_denied=DENY
    groupPerms:
      - acl_group=SUB
  - accessKey: reader_account
    secretKey: reader_secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: admin_account
    secretKey: 12345678       # YAML reads a number: Java takes it as the string "12345678"
    admin: true
  - accessKey: local_account
    secretKey: local_secret
    whiteRemoteAddress: 127.0.0.*     # the tests' address: the signature is not checked
    defaultTopicPerm: PUB
  - accessKey: remote_account
    secretKey: remote_secret
    whiteRemoteAddress: 192.168.1.{1,2}
    defaultTopicPerm: PUB
"""

APP = SessionCredentials("app_account", "app_secret_1")
READER = SessionCredentials("reader_account", "reader_secret")
ADMIN = SessionCredentials("admin_account", "12345678")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def validator(tmp_path: Path, text: str = ACL_FILE) -> PlainAccessValidator:
    acl = PlainAccessValidator(write(tmp_path / "plain_acl.yml", text))
    acl.load()
    return acl


# -- the file -------------------------------------------------------------------------------------


def test_the_file_is_found_where_java_looks(tmp_path: Path) -> None:
    config = BrokerConfig(acl_enable=True)
    assert find_acl_files(config, {"ROCKETMQ_HOME": "/opt/rmq"}) == (
        Path("/opt/rmq/conf/plain_acl.yml"),
        Path("/opt/rmq/conf/acl"),
    )
    env = {"ROCKETMQ_HOME": "/opt/rmq", "ROCKETMQ_ACL_PLAIN_FILE": "conf/other.yml"}
    assert find_acl_files(config, env)[0] == Path("/opt/rmq/conf/other.yml")
    own = BrokerConfig(acl_enable=True, acl_file_path=str(tmp_path / "acl.yml"))
    assert find_acl_files(own, {"ROCKETMQ_HOME": "/opt/rmq"}) == (tmp_path / "acl.yml", None)
    with pytest.raises(AclConfigError, match=r"set aclFilePath in broker\.conf, or ROCKETMQ_HOME"):
        find_acl_files(config, {})


def test_a_missing_file_stops_start_up(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match=r"the ACL file .*missing\.yml does not exist"):
        PlainAccessValidator(tmp_path / "missing.yml").load()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("accounts:\n  - accessKey: shorty\n    secretKey: 12345678\n",
         r"accounts\[0\]: The accessKey=shorty and secretKey \(of 8 characters\) cannot be null and length should longer than 6"),
        ("accounts:\n  - accessKey: long_enough\n    secretKey: short\n", r"accounts\[0\].*secretKey \(of 5 characters\)"),
        ("accounts:\n  - accessKey: long_enough\n", r"accounts\[0\].*secretKey \(of 0 characters\)"),
        ("accounts:\n  - accessKey: long_enough\n    secretKey: 12345678\n    topicPerms: [topicA=PUBB]\n",
         r"accounts\[0\]: Parse permission error for topic:topicA='PUBB'.*'SUB', 'PUB'"),
        ("accounts:\n  - accessKey: long_enough\n    secretKey: 12345678\n    groupPerms: [groupA]\n",
         r"Parse resource permission failed for group:groupA.*'Res=Perm'"),
        ("accounts:\n  - accessKey: long_enough\n    secretKey: 12345678\n    defaultTopicPerm: sub\n",
         r"defaultTopicPerm='sub'"),
        ("accounts:\n  - accessKey: long_enough\n    secretKey: 12345678\n    whiteRemoteAddress: 1.2.3\n",
         r"accounts\[0\]: whiteRemoteAddress: Netaddress examine Exception netaddress is 1.2.3"),
        ("accounts:\n  - accessKey: long_enough\n    secretKey: 12345678\n    admin: maybe\n", "admin must be true or false"),
        ("globalWhiteRemoteAddresses: [10.1.*.5]\n", r"globalWhiteRemoteAddresses\[0\]: Netaddress examine"),
        ("accounts: {accessKey: x}\n", "accounts must be a list"),
        ("accounts:\n  - just a string\n", r"accounts\[0\]: an account must be a mapping"),
        ("- a list\n", "the top level must be a mapping"),
        ("accounts: [\n", "not valid YAML"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_saying_where(tmp_path: Path, text: str, error: str) -> None:
    path = write(tmp_path / "plain_acl.yml", text)
    with pytest.raises(AclConfigError, match=error) as caught:
        PlainAccessValidator(path).load()
    assert str(path) in str(caught.value)
    assert "12345678" not in str(caught.value)  # secrets are not shown


def test_a_repeated_access_key_keeps_its_first_definition(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = (
        "accounts:\n"
        "  - {accessKey: twice_key, secretKey: first_secret, admin: true}\n"
        "  - {accessKey: twice_key, secretKey: second_secret}\n"
    )
    with caplog.at_level(logging.WARNING, "finchmq.broker.acl"):
        acl = validator(tmp_path, text)
    assert acl.accounts["twice_key"].secret_key == "first_secret"
    assert "accounts[1]: accessKey twice_key is defined again" in caplog.text


def test_files_in_conf_acl_are_read_too(tmp_path: Path) -> None:
    """Java 4.9.8 reads every yml under $ROCKETMQ_HOME/conf/acl; a key keeps its first definition."""
    conf = tmp_path / "conf"
    (conf / "acl" / "team").mkdir(parents=True)
    write(conf / "plain_acl.yml", "globalWhiteRemoteAddresses: [10.1.1.1]\naccounts:\n  - {accessKey: main_key, secretKey: main_secret}\n  - {accessKey: both_key, secretKey: main_secret}\n")  # fmt: skip
    write(conf / "acl" / "team" / "team.yaml", "globalWhiteRemoteAddresses: [10.2.2.2]\naccounts:\n  - {accessKey: both_key, secretKey: team_secret}\n")  # fmt: skip
    write(conf / "acl" / "notes.txt", "not an acl file")
    acl = PlainAccessValidator(
        *find_acl_files(BrokerConfig(acl_enable=True), {"ROCKETMQ_HOME": str(tmp_path)})
    )
    acl.load()
    assert set(acl.accounts) == {"main_key", "both_key"}
    assert acl.accounts["both_key"].secret_key == "team_secret"
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    acl.check("10.2.2.2:1", request)  # a global white address of the other file
    acl.check("10.1.1.1:1", request)


# -- the check, without a network -------------------------------------------------------------------


def send_v2(topic: str, credentials: SessionCredentials | None, body: bytes = b"body") -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": topic, "e": "-1"}, body)
    return request if credentials is None else sign_request(request, credentials)


def refusal(acl: PlainAccessValidator, addr: str, request: RemotingCommand) -> str:
    with pytest.raises(AclError) as caught:
        acl.check(addr, request)
    assert caught.value.remark.startswith(f"{ACL_EXCEPTION}: ")
    return caught.value.message


def test_the_check(tmp_path: Path) -> None:
    acl = validator(tmp_path)
    here = "127.0.0.1:40000"
    acl.check(here, send_v2("acl_both", APP))
    assert refusal(acl, here, send_v2("acl_both", SessionCredentials("app_account", "wrong_secret"))) == (
        "Check signature failed for accessKey=app_account"
    )
    assert refusal(acl, here, send_v2("acl_sub_only", APP)) == (
        "No default permission for topic:acl_sub_only (needs PUB, accessKey=app_account has SUB)"
    )
    assert "topic:acl_denied" in refusal(acl, here, send_v2("acl_denied", APP))
    assert "topic:other_topic (needs PUB, accessKey=app_account has DENY)" in refusal(
        acl, here, send_v2("other_topic", APP)
    )
    assert refusal(acl, here, send_v2("acl_both", None)) == "No accessKey is configured"
    assert (
        refusal(acl, here, send_v2("acl_both", SessionCredentials("nobody_key", "x")))
        == "No acl config for nobody_key"
    )
    # a changed body or field after signing breaks the signature
    signed = send_v2("acl_both", APP)
    tampered = RemotingCommand.request(signed.code, {**signed.ext_fields, "b": "acl_sub_only"}, signed.body)
    assert "Check signature failed" in refusal(acl, here, tampered)
    # the global white list lets anything through, the account's white list skips the signature
    acl.check("10.250.250.7:1", send_v2("anything", None))
    acl.check(here, send_v2("t", SessionCredentials("local_account", "not_the_secret")))
    assert "Check signature failed" in refusal(
        acl, here, send_v2("t", SessionCredentials("remote_account", "not_the_secret"))
    )
    acl.check("192.168.1.2:9", send_v2("t", SessionCredentials("remote_account", "not_the_secret")))
    # admin-only codes
    create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"})
    assert refusal(acl, here, sign_request(create, READER)) == (
        "Need admin permission for request code=17, but accessKey=reader_account is not"
    )
    acl.check(here, sign_request(create, ADMIN))
    # Java skips the permissions of a send to the trace topic
    acl.check(here, send_v2("RMQ_SYS_TRACE_TOPIC", APP))


def test_the_grpc_check(tmp_path: Path) -> None:
    """RocketMQ 5.x gRPC calls (ACL 1.0): the signature over x-mq-date-time, then the resources."""
    acl = validator(tmp_path)
    date = "20250101T120000Z"

    def sig(secret: str) -> str:
        return hmac.new(secret.encode(), date.encode(), hashlib.sha1).hexdigest()

    def grpc_refusal(
        ip: str, key: str | None, signature: str | None, resources: list[tuple[str, bool, int]]
    ) -> str:
        with pytest.raises(AclError) as caught:
            acl.check_grpc(ip, key, date, signature, resources)
        assert caught.value.remark.startswith(f"{ACL_EXCEPTION}: ")
        return caught.value.message

    here = "127.0.0.1"
    good = sig("app_secret_1")
    acl.check_grpc(here, "app_account", date, good, [("acl_both", False, PUB), ("acl_group", True, SUB)])
    acl.check_grpc(here, "app_account", date, good, [("acl_sub_only", False, ANY)])  # QueryRoute
    assert (
        grpc_refusal(here, "app_account", sig("wrong"), [])
        == "Check signature failed for accessKey=app_account"
    )
    assert "Check signature failed" in grpc_refusal(here, "app_account", None, [])
    assert grpc_refusal(here, None, None, [("acl_both", False, PUB)]) == "No accessKey is configured"
    assert grpc_refusal(here, "nobody", good, []) == "No acl config for nobody"
    assert grpc_refusal(here, "app_account", good, [("acl_sub_only", False, PUB)]) == (
        "No default permission for topic:acl_sub_only (needs PUB, accessKey=app_account has SUB)"
    )
    assert "group:other_group (needs SUB" in grpc_refusal(
        here, "app_account", good, [("other_group", True, SUB)]
    )
    # white lists: the global one lets anything through, the account's skips the signature
    acl.check_grpc("10.250.250.7", None, None, None, [("anything", False, PUB)])
    acl.check_grpc(here, "local_account", date, sig("not_the_secret"), [("t", False, PUB)])


def test_javas_unique_key_query_flag(tmp_path: Path) -> None:
    """Java's client signs _UNIQUE_KEY_QUERY, Java's broker leaves it out: both are accepted."""
    acl = validator(tmp_path)
    query = RemotingCommand.request(
        RequestCode.QUERY_MESSAGE, {"topic": "acl_both", "key": "k", "maxNum": "32"}
    )
    client_signed = sign_request(
        RemotingCommand.request(query.code, {**query.ext_fields, "_UNIQUE_KEY_QUERY": "true"}), APP
    )
    acl.check("127.0.0.1:1", client_signed)
    broker_signed = sign_request(query, APP)
    acl.check(
        "127.0.0.1:1",
        RemotingCommand.request(query.code, {**broker_signed.ext_fields, "_UNIQUE_KEY_QUERY": "true"}),
    )


_TEXT = st.text(max_size=40) | st.sampled_from(["", "app_account", "admin_account", " ", "\u00e9\U0001f600"])
_FIELDS = st.dictionaries(
    st.sampled_from(["a", "b", "topic", "consumerGroup", "group", "x"]) | st.text(max_size=8),
    _TEXT,
    max_size=6,
)
_SIGNATURES = (
    st.none()
    | st.text(max_size=60)
    | st.binary(max_size=20).map(lambda b: __import__("base64").b64encode(b).decode())
    | st.just("!" * 100_000)
)
_CODES = st.sampled_from([int(c) for c in RequestCode] + [0, -1, 9999])
_ADDRS = st.sampled_from(["127.0.0.1:1", "::1:5", "?", "", "[::1]:9", "192.168.1.9:1", "not-an-ip:80"])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    code=_CODES,
    fields=_FIELDS,
    access_key=st.none() | _TEXT | st.just("k" * 100_000),
    signature=_SIGNATURES,
    body=st.binary(max_size=64) | st.just(b'{"consumerDataSet": 5}') | st.just(b"\xff" * 10),
    addr=_ADDRS,
)
def test_malformed_requests_are_refused_cleanly(
    tmp_path_factory: pytest.TempPathFactory, code: int, fields: dict[str, str], access_key: str | None,
    signature: str | None, body: bytes, addr: str,
) -> None:  # fmt: skip
    """Whatever arrives, the check refuses with an AclError (never another exception): nothing the
    fuzzer makes can carry a valid signature and no peer here is on a white list."""
    acl = _fuzz_validator(tmp_path_factory)
    ext = dict(fields)
    if access_key is not None:
        ext[ACCESS_KEY] = access_key
    if signature is not None:
        ext[SIGNATURE] = signature
    with pytest.raises(AclError) as caught:
        acl.check(addr, RemotingCommand.request(code, ext, body))
    assert caught.value.remark.startswith(ACL_EXCEPTION)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fields=st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=8), body=st.binary(max_size=64)
)
def test_a_signed_request_survives_the_wire(
    tmp_path_factory: pytest.TempPathFactory, fields: dict[str, str], body: bytes
) -> None:
    """Any fields (unicode keys included) signed by the client verify on the broker after the codec."""
    acl = _fuzz_validator(tmp_path_factory)
    fields = {k: v for k, v in fields.items() if k not in (ACCESS_KEY, SIGNATURE, "_UNIQUE_KEY_QUERY")}
    signed = sign_request(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, fields, body), ADMIN)
    try:
        frame = encode_command(signed)
    except Exception:  # a lone surrogate cannot travel; that is the codec's business
        return
    acl.check("127.0.0.1:1", decode_frame(frame))


_fuzz_acl: dict[str, PlainAccessValidator] = {}


def _fuzz_validator(factory: pytest.TempPathFactory) -> PlainAccessValidator:
    if "acl" not in _fuzz_acl:
        directory = factory.mktemp("acl-fuzz")
        _fuzz_acl["acl"] = validator(directory, ACL_FILE.replace("127.0.0.*", "10.9.9.9"))
    return _fuzz_acl["acl"]


# -- a real broker ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    directory = tmp_path_factory.mktemp("acl-broker")
    acl_file = write(directory / "plain_acl.yml", ACL_FILE)
    with EmbeddedServer(
        directory, {**TEST_BROKER, "aclEnable": "true", "aclFilePath": str(acl_file)}
    ) as server:
        with BlockingAdminClient(namesrv_addr=server.namesrv_addr, session_credentials=ADMIN) as admin:
            for topic in ("acl_both", "acl_sub_only", "acl_denied", "local_topic"):
                admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
        yield server


def producer(server: EmbeddedServer, credentials: SessionCredentials | None, **kwargs: Any) -> Producer:
    return Producer(
        "acl_pg",
        namesrv_addr=server.namesrv_addr,
        session_credentials=credentials,
        instance_name=f"p-{time.monotonic_ns()}",
        retry_times_when_send_failed=0,
        **kwargs,
    )


async def refused_send(server: EmbeddedServer, credentials: SessionCredentials | None, topic: str) -> str:
    async with producer(server, credentials) as p:
        with pytest.raises(AclRefusedError) as caught:
            await p.send(Message.create(topic, b"x"))
    return caught.value.remark


async def test_good_keys_send_and_consume(acl_server: EmbeddedServer) -> None:
    got: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "acl_group",
        namesrv_addr=acl_server.namesrv_addr,
        session_credentials=APP,
        instance_name=f"c-{time.monotonic_ns()}",
        **FAST_CLIENT,
    )
    consumer.subscribe("acl_both")
    consumer.register_message_listener(listener)
    async with producer(acl_server, APP) as p:
        results = [await p.send(Message.create("acl_both", f"m{i}".encode())) for i in range(3)]
        assert {r.send_status.name for r in results} == {"SEND_OK"}
        async with consumer:
            await eventually(
                lambda: {m.body for m in got} == {b"m0", b"m1", b"m2"}, what="the 3 messages consumed"
            )


async def test_a_wrong_secret_is_refused(acl_server: EmbeddedServer) -> None:
    remark = await refused_send(acl_server, SessionCredentials("app_account", "wrong_secret"), "acl_both")
    assert remark == f"{ACL_EXCEPTION}: Check signature failed for accessKey=app_account"


async def test_a_missing_permission_is_refused(acl_server: EmbeddedServer) -> None:
    remark = await refused_send(acl_server, APP, "acl_sub_only")
    assert "No default permission for topic:acl_sub_only (needs PUB, accessKey=app_account has SUB)" in remark
    assert "topic:acl_denied" in await refused_send(acl_server, APP, "acl_denied")
    # a group without SUB cannot pull, even from a topic it may read
    async with PullConsumer(
        "group_without_perm", namesrv_addr=acl_server.namesrv_addr, session_credentials=APP,
        instance_name=f"c-{time.monotonic_ns()}",
    ) as consumer:  # fmt: skip
        [mq, *_] = sorted(await consumer.fetch_subscribe_message_queues("acl_both"))
        with pytest.raises(AclRefusedError, match="No default permission for group:group_without_perm"):
            await consumer.pull(mq, "*", 0, 1)


async def test_peers_outside_the_white_lists(acl_server: EmbeddedServer) -> None:
    # no keys: only a global white address (10.250.250.*) would do
    assert (await refused_send(acl_server, None, "acl_both")).endswith("No accessKey is configured")
    # 127.0.0.1 is not in remote_account's white list: its (wrong) signature is checked
    remark = await refused_send(acl_server, SessionCredentials("remote_account", "wrong_secret"), "any_topic")
    assert remark.endswith("Check signature failed for accessKey=remote_account")
    # ... but it is in local_account's: a wrong secret passes there, as in Java
    async with producer(acl_server, SessionCredentials("local_account", "wrong_secret")) as p:
        assert (await p.send(Message.create("local_topic", b"x"))).send_status.name == "SEND_OK"


async def test_admin_requests_need_an_admin(acl_server: EmbeddedServer) -> None:
    async with AdminClient(namesrv_addr=acl_server.namesrv_addr, session_credentials=READER) as admin:
        with pytest.raises(AclRefusedError, match="Need admin permission for request code=17, but accessKey=reader_account is not"):  # fmt: skip
            await admin.create_topic("acl_created", read_queue_nums=1, write_queue_nums=1)
    async with AdminClient(namesrv_addr=acl_server.namesrv_addr, session_credentials=ADMIN) as admin:
        await admin.create_topic("acl_created", read_queue_nums=1, write_queue_nums=1)


def test_a_trusted_local_channel_skips_the_acl(acl_server: EmbeddedServer) -> None:
    """Java's local proxy calls the processors directly: a trusted ``LocalChannel`` (the gRPC front
    end, which authenticated its caller) is served without a signature, an untrusted one is not."""

    async def no_peer(request: RemotingCommand) -> RemotingCommand | None:
        return None

    async def send(trusted: bool) -> RemotingCommand:
        dispatcher = acl_server.broker.server.dispatcher
        channel = LocalChannel(dispatcher, "10.0.0.7:50001", no_peer, trusted=trusted)
        try:
            return await channel.call(send_request("acl_both", b"local", queue_id=0), 10.0)
        finally:
            channel.close()

    refused = acl_server.call(send(trusted=False))
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert refused.remark == f"{ACL_EXCEPTION}: No accessKey is configured"
    served = acl_server.call(send(trusted=True))
    assert served.code == ResponseCode.SUCCESS, served.remark


def replace_file(path: Path, text: str) -> None:
    """Write ``path`` as editors do: a new file renamed over the old one."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


async def sends(p: Producer, topic: str) -> bool:
    try:
        await p.send(Message.create(topic, b"x"))
    except AclRefusedError:
        return False
    return True


async def test_the_file_reloads(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    acl_file = write(tmp_path / "plain_acl.yml", ACL_FILE)
    server = EmbeddedServer(tmp_path, {**TEST_BROKER, "aclEnable": "true", "aclFilePath": str(acl_file)})
    await asyncio.to_thread(server.start)
    try:
        async with producer(server, APP) as p, producer(server, None) as unsigned:
            assert not await sends(p, "acl_sub_only")
            replace_file(acl_file, ACL_FILE.replace("acl_sub_only=SUB", "acl_sub_only=PUB|SUB"))
            await eventually(lambda: sends(p, "acl_sub_only"), what="the new permission in force")

            # a broken file is logged and the last good content stays
            caplog.set_level(logging.ERROR, "finchmq.broker.acl")
            replace_file(acl_file, "accounts: [\n")
            await eventually(
                lambda: "not reloaded, the last good content stays" in caplog.text,
                what="the broken file logged",
            )
            assert await sends(p, "acl_sub_only")

            # the global white list grows: a client without keys gets in
            assert not await sends(unsigned, "acl_denied")
            write(acl_file, ACL_FILE.replace("10.250.250.*", "127.0.0.1"))  # written in place this time
            await eventually(lambda: sends(unsigned, "acl_denied"), what="the new white list in force")
    finally:
        await asyncio.to_thread(server.stop)


# -- ACL admin requests (mqadmin updateAclConfig & co.) --------------------------------------------


def blocking_send(server: EmbeddedServer, credentials: SessionCredentials | None, topic: str) -> str:
    """ "SEND_OK", or the refusal's remark."""
    with BlockingProducer(
        "acl_pg", namesrv_addr=server.namesrv_addr, session_credentials=credentials,
        instance_name=f"p-{time.monotonic_ns()}", retry_times_when_send_failed=0,
    ) as p:  # fmt: skip
        try:
            return p.send(Message.create(topic, b"x")).send_status.name
        except AclRefusedError as exc:
            return exc.remark


def test_acl_admin_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    acl_file = write(tmp_path / "plain_acl.yml", ACL_FILE)
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with EmbeddedServer(
        tmp_path, {**TEST_BROKER, "aclEnable": "true", "aclFilePath": str(acl_file)}
    ) as server:
        broker = server.broker_addr

        def admin(*args: str, keys: SessionCredentials | None = ADMIN) -> tuple[int, str, str]:
            login = ["--access-key", keys.access_key, "--secret-key", keys.secret_key] if keys else []
            code = cli_main(["admin", *args, "-n", server.namesrv_addr, *login])
            out, err = capsys.readouterr()
            return code, out, err

        new = SessionCredentials("new_account", "new_secret_1")
        assert "No acl config for new_account" in blocking_send(server, new, "new_topic")
        code, out, err = admin("updateAclConfig", "-a", "new_account", "-s", "new_secret_1",
                               "-t", "new_topic=PUB,other=SUB", "-i", "DENY", "-b", broker)  # fmt: skip
        assert code == 0, err
        assert f"create or update plain access config to {broker} success." in out
        assert blocking_send(server, new, "new_topic") == "SEND_OK"  # in force at once
        assert "topic:other" in blocking_send(server, new, "other")
        assert "new_account" in acl_file.read_text()

        # only an admin account may edit the file
        code, _, err = admin(
            "updateAclConfig", "-a", "reader_account", "-m", "true", "-b", broker, keys=READER
        )
        assert code == 1
        assert "Need admin permission for request code=50, but accessKey=reader_account is not" in err
        code, _, err = admin("updateAclConfig", "-a", "bad_account", "-s", "short", "-b", broker)
        assert code == 1 and "secretKey (of 5 characters)" in err

        code, out, err = admin("clusterAclConfigVersion", "-c", "DefaultCluster")
        assert code == 0, err
        [row] = [line for line in out.splitlines() if str(acl_file) in line]
        assert row.split()[:3] == ["DefaultCluster", "broker-a", broker]
        assert row.split()[4] == "1"  # one edit so far

        assert "No accessKey is configured" in blocking_send(server, None, "new_topic")
        code, out, err = admin("updateGlobalWhiteAddr", "-g", "10.9.9.*,127.0.0.1", "-b", broker)
        assert code == 0, err
        assert blocking_send(server, None, "new_topic") == "SEND_OK"

        code, out, err = admin("deleteAccessConfig", "-a", "new_account", "-b", broker)
        assert code == 0, err
        code, out, err = admin("updateGlobalWhiteAddr", "-g", "10.9.9.*", "-b", broker)
        assert "No acl config for new_account" in blocking_send(server, new, "new_topic")

        # mqadmin's $ROCKETMQ_HOME/conf/tools.yml gives the keys when the options do not
        (tmp_path / "home" / "conf").mkdir(parents=True)
        write(tmp_path / "home" / "conf" / "tools.yml", "accessKey: admin_account\nsecretKey: 12345678\n")
        monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path / "home"))
        code, out, err = admin("clusterAclConfigVersion", "-b", broker, keys=None)
        assert code == 0, err
        assert row.split()[4] != out.splitlines()[1].split()[4]  # three more edits since
