"""finchmq.protocol: the RocketMQ 4.x remoting protocol, sans-IO (bytes in, typed objects out).

Imports: the standard library only (orjson is used when installed, see ``_json``). No sockets,
no asyncio, no files: the transport (``finchmq.remoting``) and the store own all I/O.
"""

from __future__ import annotations

from .codec import CLOSED, DEFAULT_MAX_FRAME_SIZE, NEED_DATA, CodecState, RemotingCodec, Signal
from .codes import LanguageCode, MQVersion, RequestCode, ResponseCode, SerializeType
from .command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from .errors import HeaderError, LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "CLOSED",
    "DEFAULT_MAX_FRAME_SIZE",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "NEED_DATA",
    "CodecState",
    "HeaderError",
    "LanguageCode",
    "LocalProtocolError",
    "MQVersion",
    "ProtocolError",
    "RemoteProtocolError",
    "RemotingCodec",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "Signal",
]
