"""Errors of the sans-IO protocol layer.

Strategy (h11 ``_util.py``): ``ProtocolError`` is abstract and splits by direction.
``LocalProtocolError`` means this side misused the API or tried to encode something invalid;
``RemoteProtocolError`` means the peer sent bytes that cannot be decoded. Internal code raises
Local; the single entry point for peer bytes (``RemotingCodec.next_command``) converts to Remote.
Every error carries the RocketMQ response code a server would answer with.
"""

from __future__ import annotations

from typing import Final

from .codes import ResponseCode

__all__ = [
    "HeaderError",
    "LocalProtocolError",
    "MessageDecodeError",
    "MessageEncodeError",
    "ProtocolError",
    "RemoteProtocolError",
]


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


_INT32_RANGE: Final = range(-(2**31), 2**31)
_INT64_RANGE: Final = range(-(2**63), 2**63)


class MessageDecodeError(RemoteProtocolError):
    """Bytes that are not a valid stored record, batch body, zlib body or message id.

    ``offset`` is the byte position of the bad record or batch item in the buffer given to the
    decoder (None when no buffer is involved), ``field`` the layout field at fault (``"TOTALSIZE"``,
    ``"BODYCRC"``...) and ``index`` the batch item number. A broker answers ``MESSAGE_ILLEGAL``.
    """

    offset: int | None
    field: str | None
    index: int | None

    def __init__(
        self,
        msg: str,
        *,
        offset: int | None = None,
        field: str | None = None,
        index: int | None = None,
        response_code: ResponseCode = ResponseCode.MESSAGE_ILLEGAL,
    ) -> None:
        super().__init__(msg, response_code)
        self.offset = offset
        self.field = field
        self.index = index


class MessageEncodeError(LocalProtocolError):
    """A message that the layout cannot hold (too long, a value that does not fit, bad separators).

    ``field`` names the offending field or property, ``index`` the batch item number.
    """

    field: str | None
    index: int | None

    def __init__(
        self,
        msg: str,
        *,
        field: str | None = None,
        index: int | None = None,
        response_code: ResponseCode = ResponseCode.MESSAGE_ILLEGAL,
    ) -> None:
        super().__init__(msg, response_code)
        self.field = field
        self.index = index

    @classmethod
    def out_of_range(cls, exc: Exception, **fields: object) -> MessageEncodeError:
        """The error for a ``struct.error`` (``exc``) raised packing ``fields``, naming the first
        that is not an int or does not fit its Java type: a long (int64) for names ending in
        ``offset`` or ``timestamp``, else an int (int32). Slow path only."""
        for name, value in fields.items():
            wide = name.endswith(("offset", "timestamp"))
            valid = _INT64_RANGE if wide else _INT32_RANGE
            if not isinstance(value, int):
                return cls(f"{name}={value!r} is not an int", field=name)
            if value not in valid:
                kind = "long (int64)" if wide else "int (int32)"
                return cls(f"{name}={value} does not fit a Java {kind}", field=name)
        return cls(f"cannot encode stored record: {exc}")
