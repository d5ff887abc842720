"""Errors of the client, one tree (aiokafka ``errors.py`` style).

Owns: ``MQClientError`` and its subclasses. Imports: ``finchmq.protocol`` and ``finchmq.remoting``.

Strategy:
    Every error says what failed and the values involved, and carries ``response_code`` (the
    RocketMQ code, ``None`` when no broker answered) and ``retriable`` (a later attempt may
    succeed: the caller may retry after a back-off; the producer itself retries only what Java's
    ``DefaultMQProducer.retryResponseCodes`` retries, see ``producer.py``). Broker answers map to
    classes through ``MQBrokerError.for_code(code)``. Transport failures from ``finchmq.remoting``
    are translated once, in ``api.py``, by ``network_error`` (always ``raise ... from exc``).
"""

from __future__ import annotations

from typing import ClassVar, Final

from finchmq.protocol.acl import ACL_EXCEPTION
from finchmq.protocol.codes import ResponseCode
from finchmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)

__all__ = [
    "AclRefusedError",
    "BrokerBusyError",
    "BrokerSystemError",
    "ClientStateError",
    "ConsumerNotOnlineError",
    "InvalidReceiptHandleError",
    "MQBrokerError",
    "MQClientError",
    "MQConnectError",
    "MQNetworkError",
    "MQTimeoutError",
    "MQTooManyRequestsError",
    "MessageIllegalError",
    "NoPermissionError",
    "NoRouteError",
    "PollingFullError",
    "QueryNotFoundError",
    "RequestCodeNotSupportedError",
    "RequestTimeoutError",
    "ServiceNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "TopicNotExistError",
    "ValidationError",
    "network_error",
]


class MQClientError(Exception):
    """Base of every client error (Java ``MQClientException``).

    ``response_code`` is the RocketMQ response code involved, or ``None``; ``retriable`` says
    whether the same call may succeed later.
    """

    retriable: ClassVar[bool] = False

    def __init__(self, message: str, *, response_code: int | None = None) -> None:
        super().__init__(message)
        self.response_code = response_code


class ClientStateError(MQClientError):
    """The object is not started, or closed (httpx wording: it cannot be reopened)."""


class ValidationError(MQClientError, ValueError):
    """A message, topic, group or argument the client refuses before sending anything
    (Java ``Validators``); ``response_code`` is ``MESSAGE_ILLEGAL`` for message problems and
    ``INVALID_PARAMETER`` for a pop argument out of range (an invisible duration, a batch size)."""


class NoRouteError(MQClientError):
    """The name server knows no route for a topic (Java ``No route info of this topic``)."""

    retriable = True

    def __init__(self, topic: str, detail: str = "") -> None:
        super().__init__(
            f"No route info of this topic: {topic}{(', ' + detail) if detail else ''}",
            response_code=ResponseCode.TOPIC_NOT_EXIST,
        )
        self.topic = topic


# -- transport ----------------------------------------------------------------------------------


class MQNetworkError(MQClientError):
    """A broker or name server could not be reached or did not answer in time."""

    retriable = True

    def __init__(self, message: str, addr: str | None = None) -> None:
        super().__init__(message)
        self.addr = addr


class MQConnectError(MQNetworkError):
    """Connecting failed, or the connection broke before the answer came."""


class MQTimeoutError(MQNetworkError, TimeoutError):
    """No answer within the call's deadline."""


class RequestTimeoutError(MQClientError, TimeoutError):
    """A request was sent, but its reply did not come in time (Java ``RequestTimeoutException``)."""


class MQTooManyRequestsError(MQNetworkError):
    """Too many async/oneway calls in flight (``client_async_semaphore_value``)."""


def network_error(exc: RemotingError, what: str) -> MQNetworkError:
    """Translate a transport error; ``what`` names the call (``"send to broker-a"``)."""
    addr = exc.addr
    text = f"{what} failed: {exc}"
    if isinstance(exc, RemotingTimeoutError):
        return MQTimeoutError(text, addr)
    if isinstance(exc, RemotingTooMuchRequestError):
        return MQTooManyRequestsError(text, addr)
    if isinstance(exc, RemotingConnectError | RemotingSendRequestError):
        return MQConnectError(text, addr)
    return MQNetworkError(text, addr)


# -- broker answers -----------------------------------------------------------------------------

_BY_CODE: dict[int, type[MQBrokerError]] = {}


class MQBrokerError(MQClientError):
    """A broker or name server answered with an error code (Java ``MQBrokerException``).

    ``remark`` is the server's text, ``broker_addr`` who said it. Use ``for_code`` to get the
    class of a code; unknown codes map to ``MQBrokerError`` itself.
    """

    code: ClassVar[int | None] = None
    code_name: ClassVar[str | None] = None  # a 5.x name for a number 4.9.8 gave another meaning

    def __init__(self, response_code: int, remark: str | None, broker_addr: str | None = None) -> None:
        name = self.code_name or _code_name(response_code)
        where = f" from {broker_addr}" if broker_addr else ""
        super().__init__(
            f"CODE: {response_code} ({name}) DESC: {remark or ''}{where}", response_code=response_code
        )
        self.remark = remark or ""
        self.broker_addr = broker_addr

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code is not None:
            _BY_CODE[cls.code] = cls

    @staticmethod
    def for_code(code: int) -> type[MQBrokerError]:
        """The error class for a response code (aiokafka ``for_code``)."""
        return _BY_CODE.get(code, MQBrokerError)

    @classmethod
    def from_response(cls, code: int, remark: str | None, broker_addr: str | None = None) -> MQBrokerError:
        """An instance of the class registered for ``code`` (``AclRefusedError`` for an ACL refusal)."""
        if remark is not None and remark.startswith(ACL_EXCEPTION):
            return AclRefusedError(code, remark, broker_addr)
        return MQBrokerError.for_code(code)(code, remark, broker_addr)


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "UNKNOWN"


class BrokerSystemError(MQBrokerError):
    code = ResponseCode.SYSTEM_ERROR
    retriable = True


class AclRefusedError(MQBrokerError):
    """The broker's ACL refused the request: a missing or unknown AccessKey, a wrong secret key
    (``Check signature failed``), a missing permission (``No default permission for topic:T``) or
    an admin-only request. ``remark`` says which. Java's broker answers SYSTEM_ERROR with
    ``org.apache.rocketmq.acl.common.AclException: ...``; the same call fails again until the
    keys or the broker's ``plain_acl.yml`` change."""


class BrokerBusyError(MQBrokerError):
    """SYSTEM_BUSY: the broker's flow control refused the request (``remark`` says which:
    ``[TIMEOUT_CLEAN_QUEUE]``, ``[PCBUSY_CLEAN_QUEUE]``, ``[OVERLOAD]``, ``[REJECTREQUEST]``).
    Back off and retry; the producer does not resend on its own (seed 000)."""

    code = ResponseCode.SYSTEM_BUSY
    retriable = True


class RequestCodeNotSupportedError(MQBrokerError):
    code = ResponseCode.REQUEST_CODE_NOT_SUPPORTED


class MessageIllegalError(MQBrokerError):
    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(MQBrokerError):
    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermissionError(MQBrokerError):
    code = ResponseCode.NO_PERMISSION
    retriable = True  # Java retries it on another broker (a broker being drained is read-only)


class TopicNotExistError(MQBrokerError):
    code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class QueryNotFoundError(MQBrokerError):
    code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionParseFailedError(MQBrokerError):
    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionNotExistError(MQBrokerError):
    code = ResponseCode.SUBSCRIPTION_NOT_EXIST
    retriable = True  # the heartbeat carrying it has not arrived yet


class SubscriptionNotLatestError(MQBrokerError):
    code = ResponseCode.SUBSCRIPTION_NOT_LATEST
    retriable = True


class SubscriptionGroupNotExistError(MQBrokerError):
    code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class ConsumerNotOnlineError(MQBrokerError):
    code = ResponseCode.CONSUMER_NOT_ONLINE


# -- POP (5.x) ------------------------------------------------------------------------------------


class PollingFullError(MQBrokerError):
    """POLLING_FULL: the broker already holds as many long-polling pops as it allows
    (``maxPopPollingSize``). Back off and receive again. (Code 209, which 4.9.8 calls
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED: not registered by code, made where a pop answers.)"""

    code_name = "POLLING_FULL"
    retriable = True


class InvalidReceiptHandleError(MQClientError):
    """A popped message's receipt handle (its ``POP_CK``) cannot ack it or change its invisible
    time any more: its invisible time is over, so the broker makes it visible again and delivers
    it again (ack that new delivery), or the broker no longer has it (``response_code``
    NO_MESSAGE), or the handle is not one (it does not parse). The 5.x proxy's
    INVALID_RECEIPT_HANDLE; ``receipt_handle`` is the handle refused."""

    def __init__(self, message: str, receipt_handle: str | None, *, response_code: int | None = None) -> None:
        super().__init__(message, response_code=response_code)
        self.receipt_handle = receipt_handle


# Java DefaultMQProducer.retryResponseCodes: answers after which a send moves to another broker.
PRODUCER_RETRY_RESPONSE_CODES: Final = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
