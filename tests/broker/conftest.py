"""Broker tests: a real name server + broker (``finchmq.testing.EmbeddedServer``, its own thread
and loop) driven over loopback by a ``RemotingClient`` on the test's loop."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from finchmq.protocol import RemotingCommand, RequestCode
from finchmq.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
)
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from finchmq.protocol.message import MessageExt, properties_to_string
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient
from finchmq.store import MessageStoreConfig
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER
from tests.waiting import DEFAULT_TIMEOUT

# Every call's deadline: generous, so that only a broker that never answers reaches it (a loaded
# machine stretches a flooded broker's answers to seconds).
RPC_TIMEOUT_MS = int(DEFAULT_TIMEOUT * 1000)


@dataclass
class Broker:
    """Speaks to the embedded broker like a client would."""

    server: EmbeddedServer
    client: RemotingClient

    @property
    def addr(self) -> str:
        return self.server.broker_addr

    async def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"", addr: str | None = None,
                   timeout: int = RPC_TIMEOUT_MS) -> RemotingCommand:  # fmt: skip
        return await self.client.invoke(
            addr or self.addr, RemotingCommand.request(code, ext or {}, body), timeout
        )

    async def send(
        self, topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None, queue_id: int = -1,
        props: dict[str, str] | None = None, code: int = RequestCode.SEND_MESSAGE_V2, reconsume_times: int | None = None,
    ) -> RemotingCommand:  # fmt: skip
        request = send_request(topic, body, tags=tags, keys=keys, queue_id=queue_id, props=props, code=code,
                               reconsume_times=reconsume_times)  # fmt: skip
        return await self.client.invoke(self.addr, request, RPC_TIMEOUT_MS)

    async def pull(
        self, topic: str, queue_id: int, offset: int, *, group: str = "test_cg", expression: str = "*",
        suspend_ms: int = 0, max_nums: int = 32, commit_offset: int | None = None, timeout: int = RPC_TIMEOUT_MS,
    ) -> tuple[RemotingCommand, list[MessageExt]]:  # fmt: skip
        sys_flag = 4 | (2 if suspend_ms else 0) | (1 if commit_offset is not None else 0)
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_nums,
            sys_flag=sys_flag, commit_offset=commit_offset or 0, suspend_timeout_millis=suspend_ms,
            sub_version=0, subscription=expression,
        )  # fmt: skip
        response = await self.call(RequestCode.PULL_MESSAGE, header.to_ext_fields(), timeout=timeout)
        return response, decode_stored_all(response.body) if response.body else []

    async def heartbeat(self, client_id: str, group: str, topics: dict[str, str], client: RemotingClient | None = None,
                        model: MessageModel = MessageModel.CLUSTERING) -> RemotingCommand:  # fmt: skip
        return await (client or self.client).invoke(
            self.addr, heartbeat_request(client_id, group, topics, model), RPC_TIMEOUT_MS
        )


def send_request(
    topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None, queue_id: int = -1,
    props: dict[str, str] | None = None, code: int = RequestCode.SEND_MESSAGE_V2, reconsume_times: int | None = None,
) -> RemotingCommand:  # fmt: skip
    """A SEND_MESSAGE(_V2) as a producer of group ``test_pg`` sends it (TBW102, 4 queues)."""
    properties = dict(props or {})
    if tags:
        properties["TAGS"] = tags
    if keys:
        properties["KEYS"] = keys
    header = SendMessageRequestHeaderV2(
        producer_group="test_pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string(properties) or None, reconsume_times=reconsume_times,
    )  # fmt: skip
    return RemotingCommand.request(code, header.to_ext_fields(), body)


def heartbeat_request(
    client_id: str, group: str, topics: dict[str, str], model: MessageModel = MessageModel.CLUSTERING
) -> RemotingCommand:
    """A push consumer's HEART_BEAT subscribing ``group`` to ``topics`` (topic -> expression)."""
    data = HeartbeatData(
        client_id=client_id,
        consumer_data_set=(
            ConsumerData(
                group_name=group,
                consume_type=ConsumeType.CONSUME_PASSIVELY,
                message_model=model,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                subscription_data_set=tuple(build_subscription_data(t, e) for t, e in topics.items()),
            ),
        ),
    )
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, data.to_json())


@pytest.fixture
async def broker(finchmq_server_factory: Any, request: pytest.FixtureRequest) -> AsyncIterator[Broker]:
    marker = request.node.get_closest_marker("broker_conf")
    conf = {**TEST_BROKER, **(marker.args[0] if marker else {})}
    server = finchmq_server_factory(conf)
    async with RemotingClient() as client:
        yield Broker(server, client)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "broker_conf(dict): broker.conf settings for the `broker` fixture")


def small_store_config(root: Path) -> MessageStoreConfig:
    """A store under ``root`` with small files (1 MiB commit log), for brokers built in-process."""
    return MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=1024 * 1024,
        mapped_file_size_consume_queue=1000 * 20,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )
