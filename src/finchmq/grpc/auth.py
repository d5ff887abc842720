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

ACL 2.0 (the broker's ``authenticationEnabled``/``authorizationEnabled``): ``AuthAuthorizer``
authenticates the caller as a 2.0 user (the same ``authorization`` signature, keyed with the
user's password) and authorizes what the call needs against the user's ACL, both by the broker's
``AuthChecker.check_grpc``. What a call needs is Java 5.3.3's
``DefaultAuthorizationContextBuilder.build(Metadata, GeneratedMessageV3)``
(``authorization_contexts``): SendMessage, RecallMessage and EndTransaction ``Pub`` on the topic;
QueryRoute ``Pub`` or ``Sub`` on the topic; a consumer's Heartbeat, ChangeInvisibleDuration and
NotifyClientTermination (with a group) ``Sub`` on the group; ReceiveMessage, AckMessage,
ForwardMessageToDeadLetterQueue and QueryAssignment ``Sub`` on the group and the topic; a
Telemetry settings command ``Pub`` on each publishing topic, or ``Sub`` on the subscription's
group and topics.

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
from finchmq.protocol.auth import Action, AuthorizationContext
from finchmq.protocol.auth import Resource as AuthResource
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

AuthCheck = Callable[[str, str, str | None, str | None, str | None, Sequence[AuthorizationContext]], None]
"""``(peer ip, the request's protobuf name, username, x-mq-date-time, signature hex, contexts)``:
returns when the call may go on, raises ``RequestRefused`` (the broker's ``AuthError``) when not;
the broker's ``AuthChecker.check_grpc`` (ACL 2.0)."""

_CONSUMERS: Final = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER)
_V2_CONSUMERS: Final = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER)


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


def _name(resource: pb.Resource, what: str) -> str:
    if not resource.name.strip():
        raise _refused(f"{what} is null.")
    return resource.name


def authorization_contexts(
    request: Message, username: str | None, source_ip: str
) -> list[AuthorizationContext]:
    """What ``request`` needs under ACL 2.0 (see the module docstring; Java's messages for a
    request it cannot build contexts for, raised as ``GrpcStatusError`` UNAUTHORIZED)."""
    out: list[AuthorizationContext] = []

    def need(resource: AuthResource, *actions: Action) -> None:
        out.append(AuthorizationContext(username, resource, actions, source_ip, 0))

    def pub(topic: pb.Resource) -> None:
        need(AuthResource.of_topic(_name(topic, "topic")), Action.PUB)

    def sub(group: pb.Resource | None, topic: pb.Resource | None) -> None:
        if group is not None:
            need(AuthResource.of_group(_name(group, "group")), Action.SUB)
        if topic is not None:
            need(AuthResource.of_topic(_name(topic, "topic")), Action.SUB)

    if isinstance(request, spb.SendMessageRequest):
        if not request.messages:
            raise _refused("message is null.")
        # Java checks the first message's topic; a send refuses mixed topics, so check each
        for name in dict.fromkeys(m.topic.name for m in request.messages):
            pub(pb.Resource(name=name))
    elif isinstance(request, spb.RecallMessageRequest | spb.EndTransactionRequest):
        pub(request.topic)
    elif isinstance(request, spb.HeartbeatRequest):
        if request.client_type in _V2_CONSUMERS:
            sub(request.group, None)
    elif isinstance(request, spb.ReceiveMessageRequest):
        if not request.HasField("message_queue"):
            raise _refused("messageQueue is null.")
        sub(request.group, request.message_queue.topic)
    elif isinstance(
        request,
        spb.AckMessageRequest | spb.ForwardMessageToDeadLetterQueueRequest | spb.QueryAssignmentRequest,
    ):
        sub(request.group, request.topic)
    elif isinstance(request, spb.NotifyClientTerminationRequest):
        if request.group.name.strip():
            sub(request.group, None)
    elif isinstance(request, spb.ChangeInvisibleDurationRequest):
        sub(request.group, None)
    elif isinstance(request, spb.QueryRouteRequest):
        need(AuthResource.of_topic(_name(request.topic, "topic")), Action.PUB, Action.SUB)
    elif isinstance(request, spb.TelemetryCommand) and request.WhichOneof("command") == "settings":
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise _refused("settings command doesn't have publishing or subscription.")
        for published in settings.publishing.topics if settings.HasField("publishing") else ():
            pub(published)
        if settings.HasField("subscription"):
            sub(settings.subscription.group, None)
            for entry in settings.subscription.subscriptions:
                sub(None, entry.topic)
    return out


def _credentials(ctx: CallContext) -> tuple[str | None, str | None]:
    """(access key, signature hex) of the ``authorization`` metadata, ``None`` for what is absent."""
    value = ctx.metadata.get(V2_AUTHORIZATION, "")
    if not value:  # none: anonymous
        return None, None
    try:
        parsed = parse_v2_authorization(value)
    except AuthorizationHeaderError as exc:
        raise _refused(str(exc)) from None
    return parsed.access_key or None, parsed.signature  # the SDKs send "Credential=" without keys


class AuthAuthorizer:
    """The service's ``Authorizer`` when the broker runs ACL 2.0: the caller authenticated as a
    user and what the call needs authorized by its ACL, both by ``check`` (the broker's
    ``AuthChecker.check_grpc``)."""

    def __init__(self, check: AuthCheck) -> None:
        self.check = check

    async def __call__(self, ctx: CallContext, method: str, request: Message) -> None:
        username, signature = _credentials(ctx)
        contexts = authorization_contexts(request, username, ctx.peer_host)
        rpc_code = request.DESCRIPTOR.full_name
        try:
            self.check(ctx.peer_host, rpc_code, username, ctx.metadata.get(V2_DATE_TIME), signature, contexts)
        except RequestRefused as exc:
            raise _refused(exc.remark) from None


class AclAuthorizer:
    """The service's ``Authorizer`` when the broker has ``aclEnable=true``: the caller's signature
    and permissions, checked by ``check`` (the broker's accounts and white lists)."""

    def __init__(self, check: AccessCheck) -> None:
        self.check = check

    async def __call__(self, ctx: CallContext, method: str, request: Message) -> None:
        access_key, signature = _credentials(ctx)  # anonymous: only a white-listed peer may be
        resources = resources_of(method, request)
        try:
            self.check(ctx.peer_host, access_key, ctx.metadata.get(V2_DATE_TIME), signature, resources)
        except RequestRefused as exc:
            raise _refused(exc.remark) from None
