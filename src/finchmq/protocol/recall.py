"""The recall handle of a timer message (Java 5.x ``common/producer/RecallMessageHandle``).

Imports: the standard library and the protocol's errors.

A send of a timer message is answered with ``recallHandle``: URL-safe base64 (with padding, as
Java's ``Base64.getUrlEncoder()``) of ``"v1 <topic> <brokerName> <timestamp> <UNIQ_KEY>"``, where
the timestamp is the message's TIMER_OUT_MS + 1. RECALL_MESSAGE with it stores a marker that
drops the message from its slot before it is delivered.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

from .codes import ResponseCode
from .errors import RemoteProtocolError

__all__ = ["RecallHandleError", "RecallMessageHandle"]

_VERSION_1: Final = "v1"
_SEPARATOR: Final = " "
_URL_BASE64: Final = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class RecallHandleError(RemoteProtocolError):
    """A recall handle that does not decode (Java's ``DecoderException``); the message is
    Java's text, the broker's remark (ILLEGAL_OPERATION)."""

    def __init__(self, message: str = "recall handle is invalid") -> None:
        super().__init__(message, ResponseCode.ILLEGAL_OPERATION)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallMessageHandle:
    """Java ``RecallMessageHandle.HandleV1``."""

    topic: str
    broker_name: str
    timestamp_str: str
    message_id: str  # the message's UNIQ_KEY
    version: str = _VERSION_1

    def encode(self) -> str:
        """Java ``HandleV1.buildHandle`` (no check of the parts, as Java)."""
        raw = _SEPARATOR.join((_VERSION_1, self.topic, self.broker_name, self.timestamp_str, self.message_id))
        return base64.urlsafe_b64encode(raw.encode()).decode("ascii")

    @classmethod
    def decode(cls, handle: str | None) -> RecallMessageHandle:
        """Java ``RecallMessageHandle.decodeHandle``. Raises ``RecallHandleError("recall handle is
        invalid")`` for an empty handle, one that is not URL-safe base64, or not a v1 handle of
        five space-separated parts."""
        if not handle:
            raise RecallHandleError()
        if not _URL_BASE64.fullmatch(handle) or len(handle.rstrip("=")) % 4 == 1:
            raise RecallHandleError()
        padded = handle.rstrip("=") + "=" * (-len(handle.rstrip("=")) % 4)  # Java accepts it unpadded
        try:
            raw = base64.urlsafe_b64decode(padded).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            raise RecallHandleError() from None
        items = raw.split(_SEPARATOR)
        while items and not items[-1]:  # Java's split drops trailing empty strings
            items.pop()
        if not items or items[0] != _VERSION_1 or len(items) < 5:
            raise RecallHandleError()
        return cls(topic=items[1], broker_name=items[2], timestamp_str=items[3], message_id=items[4])
