"""5.x subscription group fields (``consumeMessageOrderly``, ``groupRetryPolicy``): carried by
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, served by GET_ALL_SUBSCRIPTIONGROUP_CONFIG and kept in
subscriptionGroup.json across a restart; a group without them keeps 4.9.8's form."""

from __future__ import annotations

import json
from pathlib import Path

from finchmq.broker import BrokerConfig, BrokerController
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.bodies import (
    CustomizedRetryPolicy,
    ExponentialRetryPolicy,
    GroupRetryPolicy,
    GroupRetryPolicyType,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from finchmq.remoting import LocalChannel
from tests.broker.conftest import small_store_config
from tests.waiting import DEFAULT_TIMEOUT


async def _no_peer(request: RemotingCommand) -> RemotingCommand | None:
    return None


async def _call(controller: BrokerController, code: int, body: bytes = b"") -> RemotingCommand:
    channel = LocalChannel(controller.server.dispatcher, "10.0.0.9:50001", _no_peer)
    try:
        return await channel.call(RemotingCommand.request(code, {}, body), DEFAULT_TIMEOUT)
    finally:
        channel.close()


async def _groups(controller: BrokerController) -> dict[str, SubscriptionGroupConfig]:
    answer = await _call(controller, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert answer.code == ResponseCode.SUCCESS
    return SubscriptionGroupWrapper.from_json(answer.body).subscription_group_table


def _broker(root: Path) -> BrokerController:
    return BrokerController(BrokerConfig(listen_port=0, broker_ip1="127.0.0.1"), small_store_config(root))


FIFO = SubscriptionGroupConfig(
    group_name="G_fifo",
    consume_message_orderly=True,
    retry_max_times=4,
    group_retry_policy=GroupRetryPolicy(
        type=GroupRetryPolicyType.EXPONENTIAL,
        exponential_retry_policy=ExponentialRetryPolicy(initial=1000, max=60_000, multiplier=3),
    ),
)
CUSTOM = SubscriptionGroupConfig(
    group_name="G_custom",
    consume_message_orderly=False,
    group_retry_policy=GroupRetryPolicy(customized_retry_policy=CustomizedRetryPolicy(next=(100, 200, 300))),
)
PLAIN = SubscriptionGroupConfig(group_name="G_plain")


async def test_5x_group_fields_are_stored_served_and_kept_across_a_restart(tmp_path: Path) -> None:
    async with _broker(tmp_path) as controller:
        for group in (FIFO, CUSTOM, PLAIN):
            answer = await _call(controller, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, group.to_json())
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        served = await _groups(controller)
        assert (served["G_fifo"], served["G_custom"], served["G_plain"]) == (FIFO, CUSTOM, PLAIN)
    stored = json.loads((tmp_path / "config" / "subscriptionGroup.json").read_bytes())
    table = stored["subscriptionGroupTable"]
    assert table["G_fifo"]["consumeMessageOrderly"] is True
    assert table["G_fifo"]["groupRetryPolicy"] == {
        "type": "EXPONENTIAL",
        "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 3},
    }
    assert table["G_custom"]["groupRetryPolicy"] == {
        "type": "CUSTOMIZED",
        "customizedRetryPolicy": {"next": [100, 200, 300]},
    }
    assert "consumeMessageOrderly" not in table["G_plain"] and "groupRetryPolicy" not in table["G_plain"]

    async with _broker(tmp_path) as restarted:
        served = await _groups(restarted)
        assert (served["G_fifo"], served["G_custom"], served["G_plain"]) == (FIFO, CUSTOM, PLAIN)
        assert served["G_fifo"].is_consume_message_orderly
        assert not served["G_plain"].is_consume_message_orderly
        assert served["G_plain"].effective_group_retry_policy.retry_policy == CustomizedRetryPolicy()
