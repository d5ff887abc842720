"""5.x topic attributes: Java's ``AttributeParser``/``AttributeUtil`` rules and the message type."""

from __future__ import annotations

import pytest

from finchmq.protocol.attributes import (
    TopicAttributeError,
    TopicMessageType,
    alter_topic_attributes,
    format_attribute_modification,
    message_type_of_properties,
    parse_attribute_modification,
    topic_message_type,
)
from finchmq.protocol.bodies import TopicConfig


def test_modification_strings() -> None:
    assert parse_attribute_modification(None) == parse_attribute_modification("") == {}
    parsed = parse_attribute_modification("+message.type=FIFO,-queue.type")
    assert parsed == {"+message.type": "FIFO", "-queue.type": ""}
    assert format_attribute_modification(parsed) == "+message.type=FIFO,-queue.type"
    for bad, words in [
        ("message.type=FIFO", "add/alter attribute format is wrong"),
        ("+message.type=", "add/alter attribute format is wrong"),
        ("queue.type", "delete attribute format is wrong"),
        ("+a=1,+a=2", "key duplication"),
    ]:
        with pytest.raises(TopicAttributeError, match=words):
            parse_attribute_modification(bad)


def test_alter_follows_java_attribute_util() -> None:
    created = alter_topic_attributes(True, {}, {"+message.type": "FIFO", "+queue.type": "BatchCQ"})
    assert created == {"message.type": "FIFO", "queue.type": "BatchCQ"}
    assert alter_topic_attributes(False, created, {"+message.type": "DELAY"})["message.type"] == "DELAY"
    assert alter_topic_attributes(False, created, {"-message.type": ""}) == {"queue.type": "BatchCQ"}
    assert alter_topic_attributes(False, created, {}) == created
    for create, current, change, words in [
        (True, {}, {"-message.type": ""}, "only add attribute is supported while creating"),
        (False, {}, {"-message.type": ""}, "attempt to delete a nonexistent key"),
        (False, created, {"+queue.type": "SimpleCQ"}, "unchangeable attribute"),
        (True, {}, {"+nope": "1"}, "unsupported key: nope"),
        (True, {}, {"+message.type": "LIFO"}, "value is not in set"),
        (True, {}, {"+reserve.time": "-2"}, "not in range"),
        (True, {}, {"+a-b": "1"}, "kv string format wrong"),
    ]:
        with pytest.raises(TopicAttributeError, match=words):
            alter_topic_attributes(create, current, change)


def test_topic_message_type() -> None:
    assert topic_message_type(TopicConfig(topic_name="T")) is TopicMessageType.NORMAL
    for value in ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"):
        config = TopicConfig(topic_name="T", attributes={"message.type": value})
        assert topic_message_type(config) == value
    assert topic_message_type(TopicConfig(attributes={"message.type": "x"})) is TopicMessageType.UNSPECIFIED
    assert message_type_of_properties({}) is TopicMessageType.NORMAL
    assert message_type_of_properties({"TRAN_MSG": "true", "DELAY": "3"}) is TopicMessageType.TRANSACTION
    assert (
        message_type_of_properties({"TIMER_DELIVER_MS": "1", "__SHARDINGKEY": "g"}) is TopicMessageType.DELAY
    )
    assert message_type_of_properties({"__SHARDINGKEY": "g"}) is TopicMessageType.FIFO


def test_topic_config_attributes_json_and_encoded_forms() -> None:
    plain = TopicConfig(topic_name="T")
    assert b"attributes" not in plain.to_json()  # 4.9.8's form stays as it was
    assert TopicConfig.from_json(plain.to_json()).attributes is None
    typed = TopicConfig(topic_name="T", attributes={"message.type": "FIFO"})
    assert b'"attributes":{"message.type":"FIFO"}' in typed.to_json()
    assert TopicConfig.from_json(typed.to_json()) == typed
    assert typed.encode() == 'T 16 16 6 SINGLE_TAG {"message.type":"FIFO"}'  # Java 5.x's encode
    assert TopicConfig.decode(typed.encode()) == typed
    assert TopicConfig.decode("T 16 16 6 SINGLE_TAG {}").attributes == {}
    assert TopicConfig.decode("T 16 16 6 SINGLE_TAG not-json").attributes is None  # Java ignores it
