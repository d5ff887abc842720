"""Client settings: every default of seed 002 / Java, and every validation range with its message."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from finchmq.client import (
    AllocateMessageQueueAveragely,
    ClientConfig,
    ConsumeFromWhere,
    LitePullConsumerConfig,
    MessageModel,
    ProducerConfig,
    PullConsumerConfig,
    PushConsumerConfig,
)
from finchmq.client.config import parse_consume_timestamp


def test_push_consumer_defaults_are_seed_002s() -> None:
    before = time.time()
    c = PushConsumerConfig(consumer_group="g")
    after = time.time()
    assert c.instance_name == "DEFAULT"
    assert c.message_model is MessageModel.CLUSTERING
    assert c.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert c.consume_thread_min == 20
    assert c.consume_thread_max == 64
    assert c.consume_concurrently_max_span == 2000
    assert c.pull_threshold_for_queue == 1000
    assert c.pull_threshold_size_for_queue == 100
    assert c.pull_threshold_for_topic == -1
    assert c.pull_threshold_size_for_topic == -1
    assert c.pull_interval == 0
    assert c.consume_message_batch_max_size == 1
    assert c.pull_batch_size == 32
    assert c.adjust_thread_pool_nums_threshold == 100_000
    assert c.post_subscription_when_pull is False
    assert c.max_reconsume_times == -1
    assert c.suspend_current_queue_time_millis == 1000
    assert c.consume_timeout == 15
    assert c.pull_time_delay_mills_when_exception == 3000
    assert c.broker_suspend_max_time_millis == 15_000
    assert c.consumer_timeout_millis_when_suspend == 30_000
    assert c.rebalance_lock_interval == 20_000
    assert c.rebalance_lock_max_live_time == 30_000
    assert c.pull_max_idle_time == 120_000
    assert c.max_time_consume_continuously == 60_000
    assert isinstance(c.allocate_message_queue_strategy, AllocateMessageQueueAveragely)
    # consumeTimestamp: half an hour before it was made, yyyyMMddHHmmss (whole seconds)
    assert int(before) - 1800 <= parse_consume_timestamp(c.consume_timestamp) / 1000 <= after - 1800


def test_client_defaults() -> None:
    c = ClientConfig()
    assert (c.poll_name_server_interval, c.heartbeat_broker_interval, c.persist_consumer_offset_interval) == (
        30_000,
        30_000,
        5_000,
    )
    assert c.rebalance_wait_interval == 20_000
    assert c.unit_mode is False
    assert c.build_mq_client_id() == f"{c.client_ip}@DEFAULT"
    assert dataclasses.replace(c, unit_name="u1").build_mq_client_id().endswith("@DEFAULT@u1")
    assert c.with_instance_name_pid().instance_name == str(os.getpid())
    assert ClientConfig(instance_name="x").with_instance_name_pid().instance_name == "x"
    assert ClientConfig(namesrv_addr="a:1; b:2").namesrv_addr_list() == ["a:1", "b:2"]


def test_producer_defaults() -> None:
    p = ProducerConfig(producer_group="pg")
    assert p.send_msg_timeout == 3000
    assert p.retry_times_when_send_failed == 2
    assert p.retry_times_when_send_async_failed == 2
    assert p.retry_another_broker_when_not_store_ok is False
    assert p.compress_msg_body_over_howmuch == 4096
    assert p.max_message_size == 4 * 1024 * 1024
    assert p.default_topic_queue_nums == 4
    assert p.create_topic_key == "TBW102"
    assert p.send_latency_fault_enable is False
    assert p.latency_max == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert p.not_available_duration == (0, 0, 30000, 60000, 120000, 180000, 600000)


def test_lite_pull_and_pull_defaults() -> None:
    lite = LitePullConsumerConfig(consumer_group="g")
    assert (lite.pull_batch_size, lite.pull_thread_nums, lite.auto_commit) == (10, 20, True)
    assert (lite.auto_commit_interval_millis, lite.pull_threshold_for_all, lite.poll_timeout_millis) == (
        5000,
        10000,
        5000,
    )
    pull = PullConsumerConfig(consumer_group="g")
    assert (pull.broker_suspend_max_time_millis, pull.consumer_timeout_millis_when_suspend) == (
        20_000,
        30_000,
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("consume_thread_min", 0, "consumeThreadMin Out of range [1, 1000]"),
        ("consume_thread_min", 1001, "consumeThreadMin Out of range [1, 1000]"),
        ("consume_thread_max", 0, "consumeThreadMax Out of range [1, 1000]"),
        ("consume_thread_max", 1001, "consumeThreadMax Out of range [1, 1000]"),
        ("consume_concurrently_max_span", 0, "consumeConcurrentlyMaxSpan Out of range [1, 65535]"),
        ("consume_concurrently_max_span", 65536, "consumeConcurrentlyMaxSpan Out of range [1, 65535]"),
        ("pull_threshold_for_queue", 0, "pullThresholdForQueue Out of range [1, 65535]"),
        ("pull_threshold_for_queue", 65536, "pullThresholdForQueue Out of range [1, 65535]"),
        ("pull_threshold_for_topic", 0, "pullThresholdForTopic Out of range [1, 6553500]"),
        ("pull_threshold_size_for_queue", 1025, "pullThresholdSizeForQueue Out of range [1, 1024]"),
        ("pull_threshold_size_for_topic", 102401, "pullThresholdSizeForTopic Out of range [1, 102400]"),
        ("pull_interval", -1, "pullInterval Out of range [0, 65535]"),
        ("pull_interval", 65536, "pullInterval Out of range [0, 65535]"),
        ("consume_message_batch_max_size", 0, "consumeMessageBatchMaxSize Out of range [1, 1024]"),
        ("consume_message_batch_max_size", 1025, "consumeMessageBatchMaxSize Out of range [1, 1024]"),
        ("pull_batch_size", 0, "pullBatchSize Out of range [1, 1024]"),
        ("pull_batch_size", 1025, "pullBatchSize Out of range [1, 1024]"),
        (
            "consume_timestamp",
            "2020-01-01",
            "consumeTimestamp is invalid, yyyyMMddHHmmss".replace(
                "consumeTimestamp", "consume_timestamp='2020-01-01'"
            ),
        ),
        ("consume_timeout", 0, "consume_timeout must be > 0"),
        ("max_reconsume_times", -2, "max_reconsume_times must be >= -1"),
    ],
)
def test_push_consumer_validation_names_field_and_value(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        PushConsumerConfig(consumer_group="g", **{field: value})  # type: ignore[arg-type]
    assert repr(value) in str(info.value) or str(value) in str(info.value)


def test_thread_min_above_max_is_refused() -> None:
    with pytest.raises(ValueError, match=r"consumeThreadMin \(30\) is larger than consumeThreadMax \(10\)"):
        PushConsumerConfig(consumer_group="g", consume_thread_min=30, consume_thread_max=10)


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("", "the specified group is blank"),
        ("bad group!", "illegal characters"),
        ("g" * 256, "longer than group max length 255"),
        ("DEFAULT_CONSUMER", "consumerGroup can not equal DEFAULT_CONSUMER"),
    ],
)
def test_consumer_group_validation(group: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PushConsumerConfig(consumer_group=group)


def test_producer_group_validation() -> None:
    with pytest.raises(ValueError, match="producerGroup can not equal DEFAULT_PRODUCER"):
        ProducerConfig(producer_group="DEFAULT_PRODUCER")
    with pytest.raises(ValueError, match=r"compress_level must be in 0\.\.9, got 10"):
        ProducerConfig(producer_group="pg", compress_level=10)


def test_bad_name_server_address() -> None:
    with pytest.raises(ValueError, match="'nohost' is not host:port"):
        ClientConfig(namesrv_addr="127.0.0.1:9876;nohost")


def test_suspend_timeout_must_exceed_broker_hold() -> None:
    with pytest.raises(ValueError, match="must be larger than broker_suspend_max_time_millis"):
        PushConsumerConfig(consumer_group="g", broker_suspend_max_time_millis=30_000)
