"""Who may make a 5.x call (ACL 1.0 over gRPC): the signature in the ``authorization`` metadata
and the permissions each RPC needs.

The resources an RPC needs are Java 5.2.0's ``PlainAccessResource.parse(GeneratedMessageV3, ..)``
(RecallMessage as 5.3.3's ``DefaultAuthorizationContextBuilder``): SendMessage, EndTransaction and
RecallMessage PUB on the topic; QueryRoute ANY on the topic; a consumer's Heartbeat SUB on its group;
ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
QueryAssignment SUB on the group and the topic; NotifyClientTermination SUB on its group; a
Telemetry settings command PUB on each publishing topic, or SUB on the subscription's group and
topics. The accounts and the check itself are the broker's (``PlainAccessValidator.check_grpc``):
they come in as an ``AccessCheck`` callable, so this package never imports the broker.

Every refusal, a bad signature as much as a missing permission, is answered in the response body
with ``UNAUTHORIZED`` (40100), as Java's 5.3.3 proxy answers both ``AuthenticationException`` and
``AuthorizationException`` (``ResponseBuilder#buildStatus``); the SDKs raise ``UnauthorizedException``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Final

from google.protobuf.message import Message

from finchmq.protocol.acl import (
    ANY,
    PUB,
    SUB,
    V2_AUTHORIZATION,
    V2_DATE_TIME,
    AuthorizationHeaderError,
    parse_v2_authorization,
)
from finchmq.remoting import RequestRefused

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .context import CallContext
from .status import GrpcStatusError

Resource = tuple[str, bool, int]
"""A resource a call needs: (topic or group name, is it a group, ``PUB``/``SUB``/``ANY``)."""

AccessCheck = Callable[[str, str | None, str | None, str | None, Sequence[Resource]], None]
"""``(peer ip, access key, x-mq-date-time, signature hex, resources)``: returns when the call may
go on, raises ``RequestRefused`` (the broker's ``AclError``) when not; the broker's
``PlainAccessValidator.check_grpc``."""

_CONSUMERS: Final = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER)


def _refused(message: str) -> GrpcStatusError:
    return GrpcStatusError(pb.UNAUTHORIZED, message)


def _group_and_topic(group: pb.Resource, topic: pb.Resource) -> Iterator[Resource]:
    yield group.name, True, SUB
    yield topic.name, False, SUB


def _settings_resources(settings: pb.Settings) -> Iterator[Resource]:
    if not settings.HasField("publishing") and not settings.HasField("subscription"):
        raise _refused("settings command doesn't have publishing or subscription")
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            yield topic.name, False, PUB
    if settings.HasField("subscription"):
        subscription = settings.subscription
        yield subscription.group.name, True, SUB
        for entry in subscription.subscriptions:
            yield entry.topic.name, False, SUB


def resources_of(method: str, request: Message) -> list[Resource]:
    """The resources ``request`` of RPC ``method`` needs (see the module docstring); raises
    ``GrpcStatusError`` (UNAUTHORIZED) for a request Java's parse refuses."""
    found: list[Resource] = []
    if isinstance(request, spb.SendMessageRequest):
        # Java refuses mixed topics here; the send refuses them too, so every topic must be PUB
        found.extend((topic, False, PUB) for topic in dict.fromkeys(m.topic.name for m in request.messages))
    elif isinstance(request, spb.EndTransactionRequest | spb.RecallMessageRequest):
        found.append((request.topic.name, False, PUB))
    elif isinstance(request, spb.QueryRouteRequest):
        found.append((request.topic.name, False, ANY))
    elif isinstance(request, spb.HeartbeatRequest):
        if request.client_type in _CONSUMERS:
            if not request.HasField("group"):
                raise _refused("Consumer heartbeat doesn't have group")
            found.append((request.group.name, True, SUB))
    elif isinstance(request, spb.ReceiveMessageRequest):
        found.extend(_group_and_topic(request.group, request.message_queue.topic))
    elif isinstance(
        request,
        spb.AckMessageRequest
        | spb.ChangeInvisibleDurationRequest
        | spb.ForwardMessageToDeadLetterQueueRequest
        | spb.QueryAssignmentRequest,
    ):
        found.extend(_group_and_topic(request.group, request.topic))
    elif isinstance(request, spb.NotifyClientTerminationRequest):
        if request.HasField("group"):  # a producer's has none (Java would then need SUB on "%RETRY%")
            found.append((request.group.name, True, SUB))
    elif isinstance(request, spb.TelemetryCommand) and request.WhichOneof("command") == "settings":
        found.extend(_settings_resources(request.settings))
    return found


class AclAuthorizer:
    """The service's ``Authorizer`` when the broker has ``aclEnable=true``: the caller's signature
    and permissions, checked by ``check`` (the broker's accounts and white lists)."""

    def __init__(self, check: AccessCheck) -> None:
        self.check = check

    async def __call__(self, ctx: CallContext, method: str, request: Message) -> None:
        access_key: str | None = None
        signature: str | None = None
        value = ctx.metadata.get(V2_AUTHORIZATION, "")
        if value:  # none: anonymous, which only a white-listed peer may be
            try:
                parsed = parse_v2_authorization(value)
            except AuthorizationHeaderError as exc:
                raise _refused(str(exc)) from None
            access_key = parsed.access_key or None  # the SDKs send "Credential=" without keys
            signature = parsed.signature
        resources = resources_of(method, request)
        try:
            self.check(ctx.peer_host, access_key, ctx.metadata.get(V2_DATE_TIME), signature, resources)
        except RequestRefused as exc:
            raise _refused(exc.remark) from None
