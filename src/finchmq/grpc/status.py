"""5.x status codes in responses (Java ``ResponseBuilder``): errors travel inside the response body,
with gRPC status OK; only Telemetry and unimplemented methods end with a gRPC status."""

from __future__ import annotations

from typing import Final

from finchmq.protocol.codes import ResponseCode

from ._pb import definition_pb2 as pb

Code = pb.Code

# Java ResponseBuilder.RESPONSE_CODE_MAPPING; every other remoting code is INTERNAL_SERVER_ERROR.
_REMOTING_TO_CODE: Final[dict[int, int]] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
}


class GrpcStatusError(Exception):
    """A request refused with a 5.x ``Code`` (answered in the response's ``status``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{pb.Code.Name(pb.Code.ValueType(code))}: {message}")
        self.code = code
        self.message = message


def ok() -> pb.Status:
    return pb.Status(code=pb.OK, message="OK")


def status(code: int, message: str) -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


def code_of_remoting(remoting_code: int) -> int:
    """The 5.x ``Code`` for a broker's remoting response code (Java's mapping, see above)."""
    return _REMOTING_TO_CODE.get(remoting_code, pb.INTERNAL_SERVER_ERROR)


def remoting_error(remoting_code: int, remark: str | None, what: str) -> GrpcStatusError:
    """A broker's refusal as the error the 5.x client sees: its mapped code, the broker's remark."""
    return GrpcStatusError(code_of_remoting(remoting_code), f"{what}: {remark or f'code {remoting_code}'}")
