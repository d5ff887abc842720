"""Client errors: response codes map to classes (``for_code``), retriability, transport translation."""

from __future__ import annotations

from finchmq.client.errors import (
    PRODUCER_RETRY_RESPONSE_CODES,
    BrokerBusyError,
    BrokerSystemError,
    MQBrokerError,
    MQConnectError,
    MQTimeoutError,
    MQTooManyRequestsError,
    QueryNotFoundError,
    TopicNotExistError,
    network_error,
)
from finchmq.protocol.codes import ResponseCode
from finchmq.remoting import RemotingConnectError, RemotingTimeoutError, RemotingTooMuchRequestError


def test_for_code_maps_to_typed_errors() -> None:
    assert MQBrokerError.for_code(ResponseCode.SYSTEM_BUSY) is BrokerBusyError
    assert MQBrokerError.for_code(ResponseCode.TOPIC_NOT_EXIST) is TopicNotExistError
    assert MQBrokerError.for_code(ResponseCode.QUERY_NOT_FOUND) is QueryNotFoundError
    assert MQBrokerError.for_code(9999) is MQBrokerError


def test_broker_error_carries_code_remark_and_address() -> None:
    error = MQBrokerError.from_response(2, "[TIMEOUT_CLEAN_QUEUE]broker busy", "127.0.0.1:10911")
    assert isinstance(error, BrokerBusyError) and error.retriable
    assert error.response_code == 2 and error.remark.startswith("[TIMEOUT_CLEAN_QUEUE]")
    assert "SYSTEM_BUSY" in str(error) and "127.0.0.1:10911" in str(error)
    assert BrokerSystemError(1, "x").retriable
    assert not MQBrokerError.from_response(ResponseCode.MESSAGE_ILLEGAL, "bad").retriable


def test_producer_retries_what_java_retries() -> None:
    assert ResponseCode.SYSTEM_ERROR in PRODUCER_RETRY_RESPONSE_CODES
    assert ResponseCode.SYSTEM_BUSY not in PRODUCER_RETRY_RESPONSE_CODES  # flow control: seed 000


def test_transport_errors_are_translated() -> None:
    assert isinstance(network_error(RemotingTimeoutError("t", "a:1"), "send"), MQTimeoutError)
    assert isinstance(network_error(RemotingConnectError("c", "a:1"), "send"), MQConnectError)
    error = network_error(RemotingTooMuchRequestError("x", "a:1"), "send")
    assert isinstance(error, MQTooManyRequestsError) and error.retriable and error.addr == "a:1"
    assert isinstance(network_error(RemotingTimeoutError("t"), "x"), TimeoutError)
