"""Errors of the sans-IO protocol layer.

Strategy (h11 ``_util.py``): ``ProtocolError`` is abstract and splits by direction.
``LocalProtocolError`` means this side misused the API or tried to encode something invalid;
``RemoteProtocolError`` means the peer sent bytes that cannot be decoded. Internal code raises
Local; the single entry point for peer bytes (``RemotingCodec.next_command``) converts to Remote.
Every error carries the RocketMQ response code a server would answer with.
"""

from __future__ import annotations

from .codes import ResponseCode

__all__ = ["HeaderError", "LocalProtocolError", "ProtocolError", "RemoteProtocolError"]


class ProtocolError(Exception):
    """Base of protocol errors; never instantiated directly.

    ``response_code`` is the RocketMQ code a server answers with when the error is caused by a
    request (``SYSTEM_ERROR`` unless a more precise code applies).
    """

    response_code: ResponseCode

    def __init__(self, msg: str, response_code: ResponseCode = ResponseCode.SYSTEM_ERROR) -> None:
        if type(self) is ProtocolError:
            raise TypeError("ProtocolError is abstract; raise LocalProtocolError or RemoteProtocolError")
        super().__init__(msg)
        self.response_code = response_code

    def _reraise_as_remote(self) -> RemoteProtocolError:
        remote = RemoteProtocolError(str(self), self.response_code)
        remote.__cause__ = self
        return remote


class LocalProtocolError(ProtocolError):
    """This side asked for something the protocol cannot express."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not a valid RocketMQ remoting frame."""


class HeaderError(LocalProtocolError):
    """A request's custom header (extFields) is missing a required field or holds a bad value.

    A server answers it with ``SYSTEM_ERROR`` and the message as remark, as Java's
    ``RemotingCommandException`` does.
    """
