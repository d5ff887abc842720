"""5.x topic attributes (``message.type``): UPDATE_AND_CREATE_TOPIC's ``attributes`` modification,
stored by real key, served by GET_ALL_TOPIC_CONFIG and kept in topics.json across a restart."""

from __future__ import annotations

from pathlib import Path

from finchmq.broker import BrokerConfig, BrokerController
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.attributes import TopicMessageType, topic_message_type
from finchmq.protocol.bodies import TopicConfigSerializeWrapper
from finchmq.remoting import LocalChannel
from tests.broker.conftest import small_store_config
from tests.waiting import DEFAULT_TIMEOUT

CREATE = {
    "topic": "T_attr", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
    "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
}  # fmt: skip


async def _no_peer(request: RemotingCommand) -> RemotingCommand | None:
    return None


async def _call(
    controller: BrokerController, code: int, ext: dict[str, str] | None = None
) -> RemotingCommand:
    channel = LocalChannel(controller.server.dispatcher, "10.0.0.9:50001", _no_peer)
    try:
        return await channel.call(RemotingCommand.request(code, ext or {}), DEFAULT_TIMEOUT)
    finally:
        channel.close()


async def _configs(controller: BrokerController) -> TopicConfigSerializeWrapper:
    answer = await _call(controller, RequestCode.GET_ALL_TOPIC_CONFIG)
    assert answer.code == ResponseCode.SUCCESS
    return TopicConfigSerializeWrapper.from_json(answer.body)


def _broker(root: Path) -> BrokerController:
    return BrokerController(BrokerConfig(listen_port=0, broker_ip1="127.0.0.1"), small_store_config(root))


async def test_message_type_is_stored_served_and_kept_across_a_restart(tmp_path: Path) -> None:
    async with _broker(tmp_path) as controller:
        plain = await _call(controller, RequestCode.UPDATE_AND_CREATE_TOPIC, {**CREATE, "topic": "T_plain"})
        assert plain.code == ResponseCode.SUCCESS
        created = await _call(
            controller, RequestCode.UPDATE_AND_CREATE_TOPIC, {**CREATE, "attributes": "+message.type=FIFO"}
        )
        assert created.code == ResponseCode.SUCCESS, created.remark
        table = (await _configs(controller)).topic_config_table
        assert table["T_attr"].attributes == {"message.type": "FIFO"}
        assert topic_message_type(table["T_attr"]) == TopicMessageType.FIFO
        assert table["T_plain"].attributes is None  # 4.9.8's form: no attributes key at all
        assert topic_message_type(table["T_plain"]) == TopicMessageType.NORMAL

        # refused: a delete on creation, an unknown key, a value outside the set, MIXED (off by default)
        for attributes, code, words in [
            ("-message.type", ResponseCode.SYSTEM_ERROR, "only add attribute"),
            ("+no.such=1", ResponseCode.SYSTEM_ERROR, "unsupported key"),
            ("+message.type=LIFO", ResponseCode.SYSTEM_ERROR, "value is not in set"),
            ("+message.type=MIXED", ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported"),
            ("message.type=FIFO", ResponseCode.SYSTEM_ERROR, "format is wrong"),
        ]:
            bad = await _call(
                controller,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {**CREATE, "topic": "T_new", "attributes": attributes},
            )
            assert bad.code == code and words in (bad.remark or ""), (attributes, bad.code, bad.remark)
        assert "T_new" not in (await _configs(controller)).topic_config_table

        # an update without attributes keeps them; one with a change alters them
        again = await _call(controller, RequestCode.UPDATE_AND_CREATE_TOPIC, {**CREATE, "readQueueNums": "4"})
        assert again.code == ResponseCode.SUCCESS
        assert (await _configs(controller)).topic_config_table["T_attr"].attributes == {
            "message.type": "FIFO"
        }
        changed = await _call(
            controller, RequestCode.UPDATE_AND_CREATE_TOPIC, {**CREATE, "attributes": "+message.type=DELAY"}
        )
        assert changed.code == ResponseCode.SUCCESS, changed.remark
        root_config = tmp_path / "config" / "topics.json"
    async with _broker(tmp_path) as restarted:
        table = (await _configs(restarted)).topic_config_table
        assert topic_message_type(table["T_attr"]) == TopicMessageType.DELAY
        assert table["T_plain"].attributes is None
        assert b'"message.type":"DELAY"' in root_config.read_bytes()
        deleted = await _call(
            restarted, RequestCode.UPDATE_AND_CREATE_TOPIC, {**CREATE, "attributes": "-message.type"}
        )
        assert deleted.code == ResponseCode.SUCCESS, deleted.remark
        table = (await _configs(restarted)).topic_config_table
        assert table["T_attr"].attributes is None
        assert topic_message_type(table["T_attr"]) == TopicMessageType.NORMAL
