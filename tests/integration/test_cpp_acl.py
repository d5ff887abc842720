"""ACL 1.0 with the official C++ client (``set_session_credentials``): its signature verifies on
finchmq, so good keys send and consume; a wrong secret is refused and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from finchmq.client import SessionCredentials
from finchmq.client.sync import BlockingAdminClient
from finchmq.testing import EmbeddedServer

from .conftest import body, consume_all, produce

ACL_FILE = """\
globalWhiteRemoteAddresses: [10.250.250.*]
accounts:
  - accessKey: cpp_account
    secretKey: cpp_secret_1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [cpp_topic=PUB|SUB, cpp_read_only=SUB]
    groupPerms: [cpp_push=SUB, cpp_pull=SUB]
  - accessKey: cpp_admin
    secretKey: cpp_admin_secret
    admin: true
"""
KEYS = {"access_key": "cpp_account", "secret_key": "cpp_secret_1"}


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    directory = tmp_path_factory.mktemp("cpp-acl")
    acl_file = directory / "plain_acl.yml"
    acl_file.write_text(ACL_FILE, encoding="utf-8")
    with EmbeddedServer(directory, {"aclEnable": "true", "aclFilePath": str(acl_file)}) as server:
        admin_keys = SessionCredentials("cpp_admin", "cpp_admin_secret")
        with BlockingAdminClient(namesrv_addr=server.namesrv_addr, session_credentials=admin_keys) as admin:
            for topic in ("cpp_topic", "cpp_read_only"):
                admin.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
        yield server


def stored_count(server: EmbeddedServer, topic: str) -> int:
    assert server.broker is not None
    return sum(max(server.broker.store.get_max_offset_in_queue(topic, q), 0) for q in range(4))


def test_good_keys_send_and_consume(acl_server: EmbeddedServer, cpp: Any) -> None:
    namesrv = acl_server.namesrv_addr
    sent = produce(cpp, namesrv, "cpp_topic", 6, body_prefix="sync-", tags="TagA", keys_prefix="k", **KEYS)
    assert [r["status"] for r in sent] == [0] * 6
    produce(cpp, namesrv, "cpp_topic", 4, mode="batch", body_prefix="batch-", batch_size=2, **KEYS)
    produce(cpp, namesrv, "cpp_topic", 2, mode="oneway", body_prefix="oneway-", **KEYS)
    expected = (
        {f"sync-{i}" for i in range(6)} | {f"batch-{i}" for i in range(4)} | {f"oneway-{i}" for i in range(2)}
    )
    pushed = consume_all(cpp, "push", namesrv, "cpp_topic", "cpp_push", expect=12, timeout=60, **KEYS)
    assert {body(r) for r in pushed} >= expected
    pulled = consume_all(cpp, "pull", namesrv, "cpp_topic", "cpp_pull", expect=12, timeout=60, **KEYS)
    assert {body(r) for r in pulled} == expected


def test_a_wrong_secret_or_a_missing_permission_is_refused(acl_server: EmbeddedServer, cpp: Any) -> None:
    namesrv = acl_server.namesrv_addr
    assert acl_server.broker is not None and acl_server.broker.acl is not None
    refusals = acl_server.broker.acl.refusals
    before = stored_count(acl_server, "cpp_topic")
    for topic, keys, why in [
        ("cpp_topic", {"access_key": "cpp_account", "secret_key": "not_the_secret"}, "signature"),
        ("cpp_read_only", KEYS, "permission"),
        ("cpp_topic", {}, "unknown-account"),  # librocketmq sends an empty AccessKey without keys
    ]:
        seen = refusals[why]
        # a send timeout no refusal takes: the driver ends once the broker has refused (and counted)
        records = cpp(
            "produce", "--namesrv", namesrv, "--topic", topic, "--count", "1", "--timeout-ms", "30000",
            *[f"--{k.replace('_', '-')}={v}" for k, v in keys.items()],
        ).finish()  # fmt: skip
        # librocketmq reports a send that failed on every attempt as "No route info of this topic"
        assert records[-1] == {"done": True, "errors": 1}, records
        assert "error" in records[0], records
        assert refusals[why] > seen, (why, refusals)
    assert stored_count(acl_server, "cpp_topic") == before
    assert stored_count(acl_server, "cpp_read_only") == 0
