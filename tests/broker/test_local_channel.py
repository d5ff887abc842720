"""The broker's processors driven from a channel that is not a socket (``remoting.LocalChannel``),
as RocketMQ 5.x's proxy drives them in local mode: the same routes, executors and answers, and
the broker's own requests (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO) reach the
in-process peer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from finchmq.broker import BrokerConfig, BrokerController
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import GetConsumerRunningInfoRequestHeader, PullMessageRequestHeader
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import LocalChannel, RemotingClient
from finchmq.store import MessageStoreConfig
from tests.broker.conftest import RPC_TIMEOUT_MS, heartbeat_request, send_request
from tests.waiting import DEFAULT_TIMEOUT, eventually

TIMEOUT = DEFAULT_TIMEOUT


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[BrokerController]:
    store = MessageStoreConfig(
        store_path_root_dir=tmp_path,
        mapped_file_size_commit_log=1024 * 1024,
        mapped_file_size_consume_queue=1000 * 20,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )
    async with BrokerController(BrokerConfig(listen_port=0, broker_ip1="127.0.0.1"), store) as broker:
        yield broker


class Peer:
    """The in-process client behind a ``LocalChannel``: records what the broker asks of it."""

    def __init__(self) -> None:
        self.asked: list[RemotingCommand] = []

    async def on_request(self, request: RemotingCommand) -> RemotingCommand | None:
        self.asked.append(request)
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS, body=b"peer-answer")


async def test_send_pull_and_the_brokers_calls_back_through_a_local_channel(
    controller: BrokerController,
) -> None:
    peer = Peer()
    channel = LocalChannel(controller.server.dispatcher, "10.0.0.7:50001", peer.on_request)
    try:
        sent = await channel.call(send_request("T_local", b"in-process", queue_id=0), TIMEOUT)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert sent.ext_fields["queueOffset"] == "0"
        again = await channel.call(send_request("T_local", b"second", queue_id=0), TIMEOUT)  # the fast path
        assert again.code == ResponseCode.SUCCESS and again.ext_fields["queueOffset"] == "1"

        client_id = "10.0.0.7@local"
        joined = await channel.call(heartbeat_request(client_id, "G_local", {"T_local": "*"}), TIMEOUT)
        assert joined.code == ResponseCode.SUCCESS
        group = controller.consumer_manager.get("G_local")
        assert group is not None and channel in group.channels

        # a second member joins over a socket: the broker tells every member, the local one too
        async with RemotingClient() as socket_client:
            await socket_client.invoke(
                controller.broker_addr,
                heartbeat_request("10.0.0.8@tcp", "G_local", {"T_local": "*"}),
                RPC_TIMEOUT_MS,
            )
            await eventually(
                lambda: any(r.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED for r in peer.asked),
                what="the local member notified of the group change",
            )

        # the broker calls the peer and gets its answer (Java Broker2Client.callClient)
        ask = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            GetConsumerRunningInfoRequestHeader(
                consumer_group="G_local", client_id=client_id
            ).to_ext_fields(),
        )
        answer = await controller.broker2client.call_client(channel, ask, RPC_TIMEOUT_MS)
        assert answer.body == b"peer-answer"

        pull = await channel.call(_pull_request("T_local", "G_local"), TIMEOUT)
        assert pull.code == ResponseCode.SUCCESS, pull.remark
        assert [m.body for m in decode_stored_all(pull.body)] == [b"in-process", b"second"]

        unknown = await channel.call(RemotingCommand.request(99_999, {}), TIMEOUT)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        channel.close()
    assert not channel.is_open
    # the channel is gone: the broker forgets it as it forgets a closed connection
    controller.forget_channel(channel)
    group = controller.consumer_manager.get("G_local")
    assert group is None or channel not in group.channels


def _pull_request(topic: str, group: str) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=4,
        commit_offset=0, suspend_timeout_millis=0, sub_version=0, subscription="*",
    )  # fmt: skip
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
