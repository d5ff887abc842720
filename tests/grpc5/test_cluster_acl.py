"""``finchmq proxy`` (cluster mode) in front of brokers with an ACL: with
``enableAclRpcHookForClusterMode=true`` it signs its remoting calls with
``innerClientAuthenticationCredentials`` (ACL 2.0: the brokers create that SUPER user), or else with
the keys of ``$ROCKETMQ_HOME/conf/tools.yml`` (here an ACL 1.0 admin account), as Java's 5.3.3
proxy does (``DefaultMessagingProcessor.createForClusterMode``). The official SDK produces and
consumes through the proxy process; an unsigned proxy is refused by the broker.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import AdminClient, SessionCredentials
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER

from .conftest import _Process, produce, simple

INNER = SessionCredentials("proxy_inner", "proxy-inner-secret")
ADMIN_V1 = SessionCredentials("admin_account", "admin_secret")
TOPIC, GROUP = "ProxyAclTopic", "GProxyAcl"


async def create_topic(server: EmbeddedServer, keys: SessionCredentials) -> None:
    async with AdminClient(namesrv_addr=server.namesrv_addr, session_credentials=keys) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)


@pytest.fixture(scope="module")
def v2_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    props = {
        **TEST_BROKER,
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "innerClientAuthenticationCredentials": json.dumps(
            {"accessKey": INNER.access_key, "secretKey": INNER.secret_key}
        ),
    }
    with EmbeddedServer(tmp_path_factory.mktemp("proxy-acl2"), props) as server:
        asyncio.run(create_topic(server, INNER))
        yield server


def start_proxy(directory: Path, namesrv: str, *options: str, env: dict[str, str] | None = None) -> Any:
    proxy = _Process(
        directory / "proxy.out", "proxy", "--namesrv", namesrv, "--grpc-port", "0", "--bind", "127.0.0.1",
        *options, env=env,
    )  # fmt: skip
    endpoint = proxy.wait_for(r"at (127\.0\.0\.1:\d+) in front of").group(1)
    return proxy, endpoint


def produce_and_consume(sdk: Any, endpoint: str) -> None:
    produce(sdk, endpoint, TOPIC, 3)
    consumer = simple(sdk, endpoint, TOPIC, GROUP, expect=3)
    records = consumer.finish()
    assert not consumer.errors(), records
    assert len(consumer.of("received")) == 3 and records[-1]["done"] == 3


def test_a_proxy_signing_as_the_inner_user_serves_the_sdk(
    v2_broker: EmbeddedServer, sdk: Any, tmp_path: Path
) -> None:
    config = tmp_path / "rmq-proxy.json"
    config.write_text(
        json.dumps(
            {
                "enableAclRpcHookForClusterMode": True,
                # as Java's AuthConfig holds it: a string of JSON
                "innerClientAuthenticationCredentials": json.dumps(
                    {"accessKey": INNER.access_key, "secretKey": INNER.secret_key}
                ),
                "rocketMQClusterName": "DefaultCluster",
            }
        )
    )
    proxy, endpoint = start_proxy(tmp_path, v2_broker.namesrv_addr, "-pc", str(config))
    try:
        assert f"signing as {INNER.access_key}" in proxy.output()
        assert "ignoring keys finchmq's proxy does not use: rocketMQClusterName" in proxy.output()
        produce_and_consume(sdk, endpoint)
    finally:
        proxy.stop()


def test_an_unsigned_proxy_is_refused(v2_broker: EmbeddedServer, sdk: Any, tmp_path: Path) -> None:
    assert v2_broker.broker is not None and v2_broker.broker.auth_checker is not None
    refusals = v2_broker.broker.auth_checker.refusals
    seen = refusals["authentication"]
    proxy, endpoint = start_proxy(tmp_path, v2_broker.namesrv_addr)
    try:
        process = sdk("produce", "--endpoints", endpoint, "--topic", TOPIC, "--count", "1")
        records = process.finish()
        assert process.errors() and records[-1]["done"] == 0, records
        assert refusals["authentication"] > seen
    finally:
        proxy.stop()


def test_a_proxy_signs_with_tools_yml_in_front_of_acl_1(
    tmp_path_factory: pytest.TempPathFactory, sdk: Any, tmp_path: Path
) -> None:
    directory = tmp_path_factory.mktemp("proxy-acl1")
    acl_file = directory / "plain_acl.yml"
    acl_file.write_text(
        f"accounts:\n  - accessKey: {ADMIN_V1.access_key}\n    secretKey: {ADMIN_V1.secret_key}\n    admin: true\n"
    )
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text(
        f"accessKey: {ADMIN_V1.access_key}\nsecretKey: {ADMIN_V1.secret_key}\n"
    )
    config = tmp_path / "rmq-proxy.json"
    config.write_text(json.dumps({"enableAclRpcHookForClusterMode": True}))
    props = {**TEST_BROKER, "aclEnable": "true", "aclFilePath": str(acl_file)}
    with EmbeddedServer(directory, props) as server:
        asyncio.run(create_topic(server, ADMIN_V1))
        proxy, endpoint = start_proxy(
            tmp_path, server.namesrv_addr, "-pc", str(config), env={"ROCKETMQ_HOME": str(home)}
        )
        try:
            assert f"signing as {ADMIN_V1.access_key}" in proxy.output()
            produce_and_consume(sdk, endpoint)
        finally:
            proxy.stop()
