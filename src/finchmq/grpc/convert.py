"""Messages between the two protocols: a stored ``MessageExt`` as a 5.x ``Message`` and a 5.x
``Message`` as the properties and header of a remoting send (Java ``GrpcConverter``)."""

from __future__ import annotations

from ._pb import definition_pb2 as pb


def message_from_stored(body: bytes) -> pb.Message:
    """The first stored record of ``body`` as a 5.x message."""
    raise NotImplementedError
