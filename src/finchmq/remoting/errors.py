"""Transport errors. Each says which address and what went wrong; none are protocol errors."""

from __future__ import annotations

__all__ = [
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
]


class RemotingError(Exception):
    """Base of transport errors (Java ``RemotingException``)."""

    retriable = True

    def __init__(self, msg: str, addr: str | None = None) -> None:
        super().__init__(msg)
        self.addr = addr


class RemotingConnectError(RemotingError):
    """Could not connect to ``addr``, or the connection closed before the answer arrived."""


class RemotingSendRequestError(RemotingError):
    """The request could not be written to ``addr``."""


class RemotingTimeoutError(RemotingError):
    """No answer from ``addr`` within the request's timeout."""


class RemotingTooMuchRequestError(RemotingError):
    """Too many async or oneway requests in flight (``clientAsyncSemaphoreValue``...)."""
