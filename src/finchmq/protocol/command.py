"""``RemotingCommand``: one request or response of the RocketMQ remoting protocol.

A command is an immutable value (h11 events). Requests are built with ``RemotingCommand.request``
and answered with ``request.make_response`` so a response always echoes the request's opaque and
serialize type. Choosing opaques is the transport's job (``with_opaque``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from .codes import LanguageCode, MQVersion, SerializeType

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "Body",
    "RemotingCommand",
]

FLAG_RESPONSE = 0b01  # Java RemotingCommand.RPC_TYPE bit
FLAG_ONEWAY = 0b10  # Java RemotingCommand.RPC_ONEWAY bit
_V4_9_8 = int(MQVersion.V4_9_8)
_JAVA = LanguageCode.JAVA

Body: TypeAlias = bytes | bytearray | memoryview
"""A command body: any bytes-like object, so stored messages can be sent without a copy."""


# Not frozen on purpose: a frozen dataclass's __init__ costs 1.6 us against 0.57 us here, and a
# command is built at least twice per round trip. Treat instances as immutable all the same.
# The __init__ is written out (dataclass keeps it) so the codec can pass arguments by position,
# twice as fast as keywords on the per-request path.
@dataclass(slots=True)
class RemotingCommand:
    """A remoting frame's content; a value, never modified after it is built.

    ``code`` is a ``RequestCode`` for requests and a ``ResponseCode`` for responses, kept as a
    plain ``int`` so frames with codes this version does not know still decode. ``ext_fields``
    holds the custom header, every value a string (as Java's ``HashMap<String,String>``).
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = _V4_9_8
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: Body = b""
    serialize_type: SerializeType = SerializeType.JSON

    def __init__(
        self,
        code: int,
        language: LanguageCode = LanguageCode.JAVA,
        version: int = _V4_9_8,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields = {} if ext_fields is None else ext_fields
        self.body = body
        self.serialize_type = serialize_type

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        oneway: bool = False,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = int(MQVersion.V4_9_8),
        serialize_type: SerializeType = SerializeType.JSON,
        remark: str | None = None,
    ) -> RemotingCommand:
        """A request; the transport assigns its opaque when it is sent."""
        return cls(
            code=code,
            language=language,
            version=version,
            flag=FLAG_ONEWAY if oneway else 0,
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=serialize_type,
        )

    def make_response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
    ) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, RESPONSE flag set."""
        return RemotingCommand(
            code, _JAVA, _V4_9_8, self.opaque, FLAG_RESPONSE, remark, ext_fields, body, self.serialize_type
        )

    def with_opaque(self, opaque: int, *, oneway: bool = False) -> RemotingCommand:
        """A copy with another opaque (the transport numbers requests as it sends them),
        optionally marked oneway."""
        return RemotingCommand(
            code=self.code,
            language=self.language,
            version=self.version,
            opaque=opaque,
            flag=self.flag | FLAG_ONEWAY if oneway else self.flag,
            remark=self.remark,
            ext_fields=self.ext_fields,
            body=self.body,
            serialize_type=self.serialize_type,
        )

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} body={len(self.body)}B)"
        )
