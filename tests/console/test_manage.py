"""The console's operator pages over HTTP (no browser) against a live ``finchmq server``: a
producer group's online producers, consumer groups created, updated and deleted, and what is
refused: bad settings (400 saying which), a read-only user's change and a forged or missing
CSRF token (403)."""

from __future__ import annotations

from typing import Any

import pytest

from finchmq.client import BlockingAdminClient, BlockingProducer, Message
from tests.waiting import wait_until

from .conftest import ADMIN_USER, READ_ONLY_USER, Cluster, ConsoleProcess, WebClient

# Every route this file's pages add that changes something, with a body it would accept
MUTATIONS = [
    ("POST", "/api/groups", {"group": "G_forbidden", "cluster": "DefaultCluster"}),
    ("DELETE", "/api/groups/G_forbidden", {"cluster": "DefaultCluster"}),
]


def logged_in(console: ConsoleProcess, user: tuple[str, str, str]) -> WebClient:
    client = WebClient(console.url)
    assert client.login(user[0], user[1])[0] == 303
    return client


def test_producers_of_a_group_on_a_topic(cluster: Cluster, name: str) -> None:
    cluster.create_topic(name, queues=1)
    group = f"PG_{name}"
    with BlockingProducer(group, namesrv_addr=cluster.namesrv, heartbeat_broker_interval=1000) as producer:
        producer.send(Message.create(name, b"hello"))
        client_id = producer.producer.instance.client_id
        assert group in wait_until(
            lambda: group in (g := cluster.ok("GET", "/api/producer-groups")) and g,
            what="the group among the online producer groups",
        )
        found = cluster.ok("GET", f"/api/producers?topic={name}&group={group}")
        assert found["topic"] == name and found["group"] == group and "error" not in found
        [member] = found["connections"]
        assert member["clientId"] == client_id
        assert member["language"] == "PYTHON" and member["clientAddr"].startswith("127.0.0.1:")
        assert member["versionDesc"].startswith("V")
    gone = wait_until(
        lambda: (
            (p := cluster.ok("GET", f"/api/producers?topic={name}&group={group}"))["connections"] == [] and p
        ),
        what="the producer to unregister",
    )
    assert "not exist" in gone["error"]


def test_producers_bad_input(cluster: Cluster, name: str) -> None:
    status, error = cluster.call("GET", f"/api/producers?topic={name}")
    assert status == 400 and "'group'" in error["error"]
    status, error = cluster.call("GET", f"/api/producers?topic={name}&group=bad%20group!")
    assert status == 400 and "illegal characters" in error["error"]
    status, error = cluster.call("GET", f"/api/producers?topic={name}&group=PG_x")
    assert status == 404 and error["codeName"] == "TOPIC_NOT_EXIST"


def broker_config(cluster: Cluster, group: str) -> Any:
    with BlockingAdminClient(namesrv_addr=cluster.namesrv) as admin:
        return admin.subscription_groups().get(group)


def test_group_create_update_delete(cluster: Cluster, name: str) -> None:
    group = f"G_{name}"
    created = cluster.ok(
        "POST", "/api/groups",
        {"group": group, "cluster": "DefaultCluster", "retryMaxTimes": 3, "consumeBroadcastEnable": False},
    )  # fmt: skip
    assert created["created"] is True
    assert created["brokers"] == [f"127.0.0.1:{cluster.server.broker_port}"]
    config = broker_config(cluster, group)
    assert (config.retry_max_times, config.consume_broadcast_enable) == (3, False)
    assert (config.retry_queue_nums, config.consume_enable) == (1, True), "Java's defaults for the rest"
    shown = cluster.ok("GET", f"/api/groups/{group}")["config"]
    assert shown["retryMaxTimes"] == 3 and shown["consumeBroadcastEnable"] is False

    updated = cluster.ok(
        "POST", "/api/groups",
        {"group": group, "cluster": "DefaultCluster", "consumeEnable": False, "whichBrokerWhenConsumeSlowly": 0,
         "consumeMessageOrderly": True},
    )  # fmt: skip
    assert updated["created"] is False
    config = broker_config(cluster, group)
    assert (config.consume_enable, config.which_broker_when_consume_slowly) == (False, 0)
    assert config.consume_message_orderly is True
    assert config.retry_max_times == 3 and config.consume_broadcast_enable is False, "left out: kept"

    deleted = cluster.ok("DELETE", f"/api/groups/{group}", {"cluster": "DefaultCluster"})
    assert deleted == {
        "group": group,
        "brokers": [f"127.0.0.1:{cluster.server.broker_port}"],
        "deleted": True,
    }
    assert broker_config(cluster, group) is None
    status, error = cluster.call("DELETE", f"/api/groups/{group}", {"cluster": "DefaultCluster"})
    assert status == 404 and error["codeName"] == "SUBSCRIPTION_GROUP_NOT_EXIST" and group in error["error"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, "missing field 'group'"),
        ({"group": "bad group!"}, "illegal characters"),
        ({"group": "G_ok"}, "give a cluster or a broker address"),
        (
            {"group": "G_ok", "cluster": "DefaultCluster", "retryQueueNums": -1},
            "retryQueueNums must be between 0",
        ),
        (
            {"group": "G_ok", "cluster": "DefaultCluster", "retryMaxTimes": "3"},
            "retryMaxTimes must be a whole",
        ),
        (
            {"group": "G_ok", "cluster": "DefaultCluster", "consumeEnable": "yes"},
            "consumeEnable must be true or",
        ),
        ({"group": "G_ok", "cluster": "DefaultCluster", "brokerId": 1.5}, "brokerId must be a whole number"),
        (
            {"group": "G_ok", "cluster": "DefaultCluster", "retryTimes": 2},
            "unknown group setting 'retryTimes'",
        ),
        ({"group": "G_ok", "cluster": "NoSuchCluster"}, "NoSuchCluster"),
    ],
)
def test_group_bad_settings_are_400(cluster: Cluster, body: dict[str, Any], error: str) -> None:
    status, data = cluster.call("POST", "/api/groups", body)
    assert status == 400 and error in data["error"], data
    assert broker_config(cluster, "G_ok") is None


def test_group_delete_bad_input(cluster: Cluster, name: str) -> None:
    status, data = cluster.call("DELETE", f"/api/groups/G_{name}", {})
    assert status == 400 and "give a cluster or a broker address" in data["error"]
    status, data = cluster.call(
        "DELETE", f"/api/groups/G_{name}", {"cluster": "DefaultCluster"}, json_type=False
    )
    assert status == 400 and "application/json" in data["error"]


def test_read_only_user_and_bad_csrf_tokens_are_refused(
    login_console: ConsoleProcess, cluster: Cluster
) -> None:
    reader = logged_in(login_console, READ_ONLY_USER)
    admin = logged_in(login_console, ADMIN_USER)
    for method, path, body in MUTATIONS:
        status, data = reader.call(method, path, body)
        assert status == 403 and "bob is a read-only account" in data["error"], (method, path, data)
        for token, why in (("forged-token", "a wrong CSRF token"), ("", "no CSRF token")):
            status, data = admin.call(method, path, body, csrf=token)
            assert status == 403 and why in data["error"], (method, path, data)
    assert broker_config(cluster, "G_forbidden") is None
    status, data = admin.call("GET", "/api/producers?topic=TBW102&group=PG_none")
    assert status == 200 and data["connections"] == []  # reading needs no token
