"""``finchmq.compat.rocketmq``: the official Python client's API (2.x names, 0.4.x spellings) on
finchmq, driven as an application written for ``rocketmq.client`` would drive it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from finchmq.client import MQClientError
from finchmq.client.sync import BlockingAdminClient
from finchmq.compat import rocketmq
from finchmq.compat.rocketmq import (
    ConsumeStatus,
    Message,
    MessageModel,
    MessageProperty,
    MessageSelector,
    Producer,
    ProducerException,
    ProducerSendSyncFailed,
    PullConsumer,
    PushConsumer,
    RecvMessage,
    SendStatus,
    TransactionMQProducer,
    TransactionStatus,
)
from finchmq.protocol.stored import decode_stored_all
from finchmq.protocol.topics import RMQ_SYS_TRANS_OP_HALF_TOPIC
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER
from tests.waiting import wait_until

FAST = {"messageDelayLevel": "1s 1s 1s 1s 1s", "waitTimeMillsInSendQueue": "5000", **TEST_BROKER}


def make_message(topic: str, i: int) -> Message:
    msg = Message(topic)
    msg.set_keys(f"key-{i}")
    msg.set_tags("TagA")
    msg.set_body(f"body-{i}")
    msg.set_property("color", f"red{i}")
    return msg


def test_the_official_names_exist() -> None:
    for name in (
        "Producer",
        "PushConsumer",
        "PullConsumer",
        "Message",
        "RecvMessage",
        "SendStatus",
        "ConsumeStatus",
        "MessageModel",
        "SendResult",
    ):
        assert hasattr(rocketmq, name)
    assert (SendStatus.OK, ConsumeStatus.CONSUME_SUCCESS, ConsumeStatus.RECONSUME_LATER) == (0, 0, 1)
    assert (MessageModel.BROADCASTING, MessageModel.CLUSTERING) == (0, 1)


def test_producer_and_push_consumer_round_trip(finchmq_server_factory: object) -> None:
    server: EmbeddedServer = finchmq_server_factory(FAST)  # type: ignore[operator]
    topic = "CompatTopic"
    producer = Producer("compat_pg", timeout=5000, compress_level=5, max_message_size=1024 * 1024)
    producer.set_name_server_address(server.namesrv_addr)
    with pytest.raises(ProducerException):
        producer.send_sync(make_message(topic, 0))
    producer.start()
    try:
        results = [producer.send_sync(make_message(topic, i)) for i in range(6)]
        assert all(r.status == SendStatus.OK and len(r.msg_id) == 32 for r in results)
        producer.send_oneway(make_message(topic, 6))
        orderly = [
            producer.send_orderly_with_sharding_key(make_message(topic, 7 + i), "shard-1") for i in range(2)
        ]
        assert [r.status for r in orderly] == [SendStatus.OK] * 2
        called = threading.Event()
        producer.send_async(make_message(topic, 9), lambda r: called.set(), None)
        wait_until(called.is_set, what="the async send's callback")
        assert producer.send_batch([make_message(topic, 10), make_message(topic, 11)]).status == SendStatus.OK
        with pytest.raises(ProducerSendSyncFailed, match="the message body size over max value") as info:
            big = Message(topic)
            big.set_body(b"x" * (2 * 1024 * 1024))
            producer.send_sync(big)
        assert info.value.__cause__ is not None
    finally:
        producer.shutdown()

    received: list[RecvMessage] = []
    attempts: dict[bytes, int] = {}
    lock = threading.Lock()

    def callback(msg: RecvMessage) -> ConsumeStatus:
        with lock:
            attempts[msg.body] = attempts.get(msg.body, 0) + 1
            if msg.body == b"body-1" and attempts[msg.body] == 1:
                return ConsumeStatus.RECONSUME_LATER
            if msg.body == b"body-2" and attempts[msg.body] == 1:
                raise RuntimeError("a failing callback means RECONSUME_LATER")
            received.append(msg)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("compat_cg")
    consumer.set_namesrv_addr(server.namesrv_addr)  # the 0.4.x spelling
    consumer.set_thread_count(2)
    consumer.subscribe(topic, callback)
    consumer.start()
    try:
        expected = {f"body-{i}".encode() for i in range(12)}
        wait_until(lambda: {m.body for m in received} >= expected, what="the 12 messages consumed")
    finally:
        consumer.shutdown()
    by_body = {m.body: m for m in received}
    m = by_body[b"body-3"]
    assert isinstance(m.topic, str) and m.topic == topic
    assert (m.tags, m.keys) == (b"TagA", b"key-3")
    assert m.get_property("color") == b"red3" and m[MessageProperty.KEYS] == b"key-3"
    assert isinstance(m.id, str) and len(m.id) == 32
    assert str(m) == "body-3" and bytes(m) == b"body-3"
    assert by_body[b"body-1"].reconsume_times == 1 and by_body[b"body-2"].reconsume_times == 1
    assert {"body-7", "body-8"} <= {str(x) for x in received}


def test_orderly_push_consumer_keeps_the_sharding_key_order(finchmq_server_factory: object) -> None:
    server: EmbeddedServer = finchmq_server_factory(FAST)  # type: ignore[operator]
    topic = "CompatOrderly"
    producer = Producer("compat_pg_orderly", orderly=True)
    producer.set_name_server_address(server.namesrv_addr)
    producer.start()
    try:
        for i in range(10):
            producer.send_orderly_with_sharding_key(make_message(topic, i), "the-only-key")
    finally:
        producer.shutdown()
    seen: list[str] = []
    consumer = PushConsumer("compat_orderly", orderly=True, message_model=MessageModel.CLUSTERING)
    consumer.set_name_server_address(server.namesrv_addr)
    consumer.set_instance_name("compat-orderly")
    consumer.subscribe(topic, lambda msg: seen.append(str(msg)))  # returns None: success, as in 0.4.x
    with consumer:
        wait_until(lambda: len(seen) >= 10, what="the 10 messages consumed")
    assert seen == [f"body-{i}" for i in range(10)], "one sharding key: one queue, consumed in order"


def test_pull_consumer_walks_every_queue_from_its_offsets(finchmq_server_factory: object) -> None:
    server: EmbeddedServer = finchmq_server_factory(FAST)  # type: ignore[operator]
    topic = "CompatPull"
    producer = Producer("compat_pg_pull")
    producer.set_namesrv_addr(server.namesrv_addr)
    with producer:
        for i in range(12):
            producer.send_sync(make_message(topic, i))
    consumer = PullConsumer("compat_pull")
    consumer.set_name_server_address(server.namesrv_addr)
    consumer.start()
    try:
        bodies = sorted(str(m) for m in consumer.pull(topic, max_num=5))
        assert bodies == sorted(f"body-{i}" for i in range(12))
        assert list(consumer.pull(topic)) == [], "offsets remembered: nothing twice"
        queues = consumer.get_message_queues(topic)
        assert sum(consumer.get_message_queue_offset(q) for q in queues) == 12
    finally:
        consumer.shutdown()


def test_unsupported_name_server_domain_says_so() -> None:
    producer = Producer("compat_pg_domain")
    with pytest.raises(rocketmq.RocketMQException, match="name server domains are not supported"):
        producer.set_name_server_domain("example.com")


def test_transaction_producer_commits_rolls_back_and_answers_checks(finchmq_server_factory: object) -> None:
    """The official ``TransactionMQProducer``: ``local_execute`` decides, or leaves it UNKNOWN
    for ``checker_callback`` to decide when the broker asks."""
    # The broker checks a half message once it is transactionTimeOut old and still undecided; the
    # decided ones' END_TRANSACTION is oneway. No check until those are recorded (below).
    server: EmbeddedServer = finchmq_server_factory(  # type: ignore[operator]
        {**FAST, "transactionCheckInterval": "300", "transactionTimeOut": str(24 * 3600 * 1000)}
    )
    assert server.broker is not None
    store = server.broker.store
    topic = "CompatTx"
    checked: list[bytes] = []

    def checker(msg: RecvMessage) -> TransactionStatus:
        checked.append(msg.body)
        return TransactionStatus.COMMIT

    producer = TransactionMQProducer("compat_tx", checker)
    producer.set_name_server_address(server.namesrv_addr)
    producer.start()
    try:
        decisions = {b"commit": TransactionStatus.COMMIT, b"rollback": TransactionStatus.ROLLBACK}
        for body in (b"commit", b"rollback", b"unknown"):
            msg = Message(topic)
            msg.set_body(body)
            result = producer.send_message_in_transaction(
                msg, lambda m, args: decisions.get(m.body, TransactionStatus.UNKNOWN), None
            )
            assert result.status == SendStatus.OK
        wait_until(
            lambda: store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) >= 2,
            what="the broker recorded the commit and the rollback",
        )
        with BlockingAdminClient(namesrv_addr=server.namesrv_addr) as admin:
            admin.update_broker_config(server.broker_addr, {"transactionTimeOut": "500"})
        wait_until(lambda: b"unknown" in checked, what="the broker checked the unknown transaction")
        # only the unknown one is ever checked (a slow commit may get it checked twice)
        assert set(checked) == {b"unknown"}, checked
    finally:
        producer.shutdown()

    def stored() -> int:
        return sum(store.get_max_offset_in_queue(topic, q) for q in range(4))

    wait_until(lambda: stored() >= 2, what="the committed and the checked message stored")
    assert stored() == 2


def test_push_consumer_takes_an_sql92_selector(finchmq_server_factory: object) -> None:
    """Beyond the official API: ``subscribe(topic, callback, MessageSelector.by_sql(...))``."""
    server: EmbeddedServer = finchmq_server_factory({**FAST, "enablePropertyFilter": "true"})  # type: ignore[operator]
    topic = "CompatSql"
    producer = Producer("compat_sql_pg")
    producer.set_name_server_address(server.namesrv_addr)
    producer.start()
    try:
        for i in range(6):
            producer.send_sync(make_message(topic, i))  # property color=red<i>
        # then a matching end marker in every queue, after everything else
        for q in range(4):
            end = make_message(topic, 4)
            end.set_body(f"end-{q}")
            producer.send_orderly(end, q)
    finally:
        producer.shutdown()
    assert server.broker is not None
    markers: dict[int, int] = {}  # queue id -> the marker's offset
    for q in range(4):
        with server.broker.store.get_message("test", topic, q, 0, 32) as result:
            markers.update(
                (m.queue_id, m.queue_offset)
                for m in decode_stored_all(result.body())
                if m.body.startswith(b"end-")
            )
    assert sorted(markers) == [0, 1, 2, 3]
    got: list[bytes] = []
    consumer = PushConsumer("compat_sql_g")
    consumer.set_name_server_address(server.namesrv_addr)
    consumer.subscribe(topic, lambda m: got.append(m.body) or ConsumeStatus.CONSUME_SUCCESS,
                       MessageSelector.by_sql("color IN ('red1', 'red4')"))  # fmt: skip
    consumer.start()
    try:
        with BlockingAdminClient(namesrv_addr=server.namesrv_addr) as admin:

            def past_the_markers() -> bool:
                """The consumer's offset of every queue is past its marker (its own view, in
                memory): whatever the broker let through before the marker has been consumed."""
                try:
                    [client] = admin.consumer_connection("compat_sql_g").connection_set
                    table = admin.consumer_running_info("compat_sql_g", client.client_id).mq_table
                except MQClientError:  # not registered yet
                    return False
                progress = {
                    mq.queue_id: info.commit_offset for mq, info in table.items() if mq.topic == topic
                }
                return all(progress.get(q, -1) > offset for q, offset in markers.items())

            wait_until(past_the_markers, what="the consumer consumed up to every end marker", interval=0.2)
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted([b"body-1", b"body-4"] + [f"end-{q}".encode() for q in range(4)])


def test_session_credentials_sign_requests(finchmq_server_factory: object, tmp_path: Path) -> None:
    """set_session_credentials signs every request for the broker's ACL (plain_acl.yml)."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(
        "accounts:\n"
        "  - {accessKey: compat_account, secretKey: compat_secret, defaultTopicPerm: PUB|SUB, defaultGroupPerm: SUB}\n"
    )
    server: EmbeddedServer = finchmq_server_factory(  # type: ignore[operator]
        {**FAST, "aclEnable": "true", "aclFilePath": str(acl_file)}
    )
    for secret, works in [("compat_secret", True), ("wrong_secret", False)]:
        producer = Producer(f"compat_acl_pg_{works}")
        producer.set_name_server_address(server.namesrv_addr)
        producer.set_session_credentials("compat_account", secret, "ALIYUN")
        producer.start()
        try:
            if works:
                assert producer.send_sync(make_message("CompatAcl", 0)).status == SendStatus.OK
            else:
                with pytest.raises(
                    ProducerSendSyncFailed, match="Check signature failed for accessKey=compat_account"
                ):
                    producer.send_sync(make_message("CompatAcl", 1))
        finally:
            producer.shutdown()
    received: list[RecvMessage] = []
    consumer = PushConsumer("compat_acl_cg")
    consumer.set_name_server_address(server.namesrv_addr)
    consumer.set_session_credentials("compat_account", "compat_secret", "ALIYUN")
    consumer.subscribe("CompatAcl", received.append)
    consumer.start()
    try:
        wait_until(lambda: received, what="the message sent with the right secret consumed")
    finally:
        consumer.shutdown()
    assert [m.body for m in received] == [b"body-0"], "the one refused was never stored"


def test_a_namespace_wraps_topic_and_group_on_the_broker(finchmq_server_factory: object) -> None:
    server: EmbeddedServer = finchmq_server_factory(FAST)  # type: ignore[operator]
    topic = "CompatNsTopic"
    with BlockingAdminClient(namesrv_addr=server.namesrv_addr) as admin:
        admin.create_topic(f"compat_ns%{topic}", read_queue_nums=2, write_queue_nums=2)
    producer = Producer("compat_ns_pg")
    producer.set_name_server_address(server.namesrv_addr)
    producer.set_namespace("compat_ns")
    with producer:
        producer.send_sync(make_message(topic, 0))
        producer.send_orderly_with_sharding_key(make_message(topic, 1), "shard")
    received: list[RecvMessage] = []
    consumer = PushConsumer("compat_ns_cg")
    consumer.set_name_server_address(server.namesrv_addr)
    consumer.set_namespace("compat_ns")
    consumer.subscribe(topic, lambda m: received.append(m) or ConsumeStatus.CONSUME_SUCCESS)
    with consumer:
        wait_until(lambda: len(received) >= 2, what="both messages consumed")
    assert {m.topic for m in received} == {topic}
    assert server.broker is not None
    store = server.broker.store
    assert sum(store.get_max_offset_in_queue(f"compat_ns%{topic}", q) for q in range(2)) == 2
