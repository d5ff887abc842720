"""Heartbeat, NotifyClientTermination and the Telemetry stream (Java ``ClientActivity``): a 5.x
client's settings, its registration with the brokers as a producer or consumer, and the server's
commands to it (transaction checks, message verification)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable

from finchmq.protocol.bodies import (
    CMResult,
    ConsumeFromWhere,
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerRunningInfo,
    ConsumeType,
    CustomizedRetryPolicy,
    ExponentialRetryPolicy,
    GroupRetryPolicyType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
    SubscriptionGroupConfig,
)
from finchmq.protocol.codes import LanguageCode, MQVersion, RequestCode, ResponseCode
from finchmq.protocol.command import RemotingCommand
from finchmq.protocol.filter import build_subscription_data
from finchmq.protocol.headers import GetConsumerRunningInfoRequestHeader, UnregisterClientRequestHeader

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .clients import ClientSession
from .context import CallContext
from .convert import duration
from .state import Service
from .status import GrpcStatusError, ok, status
from .validate import valid_consumer_group, valid_topic

log = logging.getLogger(__name__)

CONSUMER_TYPES = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER)

# Java CustomizedRetryPolicy's default: the delay levels 3 ("10s") and up, as a group's retry policy.
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def _language(ctx: CallContext) -> LanguageCode:
    return LanguageCode.__members__.get(ctx.language.upper(), LanguageCode.OTHER)


def _version(ctx: CallContext) -> int:
    """Java ``MQVersion.Version`` ordinal of a 5.x client's version (V5_0_0 = 411)."""
    match = _VERSION.match(ctx.client_version)
    if match is None or int(match.group(1)) < 5:
        return int(MQVersion.V4_9_8)
    _major, minor, patch = (int(g) for g in match.groups())
    return 411 + minor * 10 + patch


def subscription_data(entry: pb.SubscriptionEntry) -> SubscriptionData:
    """A 5.x subscription as the broker's ``SubscriptionData`` (TAG or SQL92)."""
    kind = "SQL92" if entry.expression.type == pb.SQL else "TAG"
    try:
        return build_subscription_data(entry.topic.name, entry.expression.expression or "*", kind)
    except ValueError as exc:
        raise GrpcStatusError(pb.ILLEGAL_FILTER_EXPRESSION, str(exc)) from exc


def _heartbeat_data(session: ClientSession, settings: pb.Settings) -> HeartbeatData:
    if settings.HasField("publishing"):
        groups = {topic.name for topic in settings.publishing.topics}
        return HeartbeatData(
            client_id=session.client_id,
            producer_data_set=tuple(ProducerData(group_name=g) for g in sorted(groups)),
        )
    subscription = settings.subscription
    consumer = ConsumerData(
        group_name=subscription.group.name,
        consume_type=(
            ConsumeType.CONSUME_PASSIVELY
            if settings.client_type == pb.PUSH_CONSUMER
            else ConsumeType.CONSUME_ACTIVELY
        ),
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscription_data_set=tuple(subscription_data(e) for e in subscription.subscriptions),
    )
    return HeartbeatData(client_id=session.client_id, consumer_data_set=(consumer,))


async def _register(svc: Service, ctx: CallContext, session: ClientSession) -> None:
    """HEART_BEAT to the brokers for the client: the broker's producer and consumer tables (and
    so ``finchmq admin``/mqadmin) show 5.x clients as they show remoting ones."""
    assert session.settings is not None
    data = _heartbeat_data(session, session.settings)
    request = RemotingCommand.request(
        RequestCode.HEART_BEAT, body=data.to_json(), language=_language(ctx), version=_version(ctx)
    )
    await svc.invoke_ok(ctx, request, "heartbeat")


def _validate_settings(settings: pb.Settings) -> None:
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            valid_topic(topic)
    elif settings.HasField("subscription"):
        valid_consumer_group(settings.subscription.group)
        for entry in settings.subscription.subscriptions:
            valid_topic(entry.topic)
    else:
        raise GrpcStatusError(pb.BAD_REQUEST, "there is no publishing or subscription data in settings")


async def merged_settings(svc: Service, session: ClientSession) -> pb.Settings:
    """The client's settings with the server's values (Java ``GrpcClientSettingsManager``)."""
    assert session.settings is not None
    config = svc.config
    settings = pb.Settings()
    settings.CopyFrom(session.settings)
    if settings.HasField("publishing"):
        backoff = settings.backoff_policy
        backoff.max_attempts = config.grpc_client_producer_max_attempts
        backoff.exponential_backoff.initial.CopyFrom(
            duration(config.grpc_client_producer_backoff_initial_millis)
        )
        backoff.exponential_backoff.max.CopyFrom(duration(config.grpc_client_producer_backoff_max_millis))
        backoff.exponential_backoff.multiplier = config.grpc_client_producer_backoff_multiplier
        settings.publishing.validate_message_type = config.enable_topic_message_type_check
        settings.publishing.max_body_size = config.max_message_size
    elif settings.HasField("subscription"):
        group = await svc.backend.group_config(settings.subscription.group.name)
        _merge_group(
            svc, settings, group or SubscriptionGroupConfig(group_name=settings.subscription.group.name)
        )
    settings.metric.on = False
    return settings


def _merge_group(svc: Service, settings: pb.Settings, group: SubscriptionGroupConfig) -> None:
    config = svc.config
    subscription = settings.subscription
    subscription.receive_batch_size = config.grpc_client_consumer_long_polling_batch_size
    subscription.long_polling_timeout.CopyFrom(
        duration(config.grpc_client_consumer_max_long_polling_timeout_millis)
    )
    subscription.fifo = group.is_consume_message_orderly
    backoff = settings.backoff_policy
    backoff.max_attempts = group.retry_max_times + 1
    policy = group.effective_group_retry_policy
    if policy.type is GroupRetryPolicyType.EXPONENTIAL:  # the proxy's own default when absent
        exponential = policy.exponential_retry_policy or ExponentialRetryPolicy()
        backoff.exponential_backoff.initial.CopyFrom(duration(exponential.initial))
        backoff.exponential_backoff.max.CopyFrom(duration(exponential.max))
        backoff.exponential_backoff.multiplier = exponential.multiplier
    else:
        customized = policy.customized_retry_policy or CustomizedRetryPolicy()
        backoff.customized_backoff.next.extend(duration(ms) for ms in customized.next)


# -- unary RPCs ---------------------------------------------------------------------------------


async def heartbeat(svc: Service, ctx: CallContext, req: spb.HeartbeatRequest) -> spb.HeartbeatResponse:
    session = svc.session(ctx)
    if session.settings is None:
        raise GrpcStatusError(pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
    if session.client_type == pb.PRODUCER:
        await _register(svc, ctx, session)
    elif session.client_type in CONSUMER_TYPES:
        valid_consumer_group(req.group)
        await _register(svc, ctx, session)
    else:
        raise GrpcStatusError(pb.UNRECOGNIZED_CLIENT_TYPE, f"{session.client_type_name} is not supported")
    return spb.HeartbeatResponse(status=ok())


async def notify_client_termination(
    svc: Service, ctx: CallContext, req: spb.NotifyClientTerminationRequest
) -> spb.NotifyClientTerminationResponse:
    """The client is shutting down: unregister it from the brokers and forget it."""
    session = svc.clients.get(ctx.require_client_id())
    if session is None or session.settings is None:
        raise GrpcStatusError(pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
    settings = session.settings
    headers: list[UnregisterClientRequestHeader] = []
    if settings.HasField("publishing"):
        headers = [
            UnregisterClientRequestHeader(client_id=session.client_id, producer_group=t.name)
            for t in settings.publishing.topics
        ]
    elif settings.HasField("subscription"):
        group = req.group.name if req.HasField("group") else settings.subscription.group.name
        headers = [UnregisterClientRequestHeader(client_id=session.client_id, consumer_group=group)]
    try:
        for header in headers:
            await svc.invoke(
                ctx, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())
            )
    finally:
        await svc.clients.remove(session.client_id)
    return spb.NotifyClientTerminationResponse(status=ok())


# -- Telemetry ----------------------------------------------------------------------------------


async def telemetry(
    svc: Service,
    ctx: CallContext,
    inbound: AsyncIterator[spb.TelemetryCommand],
    send: Callable[[spb.TelemetryCommand], Awaitable[None]],
) -> None:
    """Serve one Telemetry stream until the client half-closes it. Settings are registered and
    answered with the merged settings; the stream becomes the client's command channel."""
    session = svc.session(ctx)
    try:
        async for command in inbound:
            session.touch()
            if svc.authorizer is not None:
                try:
                    await svc.authorizer(ctx, "Telemetry", command)
                except GrpcStatusError as exc:  # Java: the refusal in a command, the stream goes on
                    await send(spb.TelemetryCommand(status=status(exc.code, exc.message)))
                    continue
            kind = command.WhichOneof("command")
            if kind == "settings":
                _validate_settings(command.settings)
                session.settings = command.settings
                try:
                    await _register(svc, ctx, session)
                except GrpcStatusError:
                    raise
                except Exception as exc:  # the broker unreachable, the client terminated meanwhile
                    log.debug("telemetry settings of %s not registered: %r", session.client_id, exc)
                    raise GrpcStatusError(
                        pb.INTERNAL_SERVER_ERROR, f"settings not registered: {exc}"
                    ) from exc
                session.writer = send  # the latest stream wins (Java GrpcChannelManager)
                answer = spb.TelemetryCommand(status=ok(), settings=await merged_settings(svc, session))
                await session.write(answer)
            elif kind in ("thread_stack_trace", "verify_message_result"):
                nonce = getattr(command, kind).nonce
                future = svc.pending_replies.pop(nonce, None)
                if future is not None and not future.done():
                    future.set_result(command)
            else:
                log.debug("telemetry from %s: %s ignored", session.client_id, kind)
    finally:
        if session.writer is send:
            session.writer = None


async def relay_broker_request(
    svc: Service, session: ClientSession, request: RemotingCommand
) -> RemotingCommand | None:
    """What the broker asks of a 5.x client, as a telemetry command (Java ``ProxyChannel``)."""
    if request.code == RequestCode.CHECK_TRANSACTION_STATE:
        from .producer import relay_transaction_check  # noqa: PLC0415 (producer imports this module)

        await relay_transaction_check(svc, session, request)
        return None
    if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
        return await _verify_message(svc, session, request)
    if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        return await _running_info(svc, session, request)
    return None  # NOTIFY_CONSUMER_IDS_CHANGED and the rest: nothing for a 5.x client


async def _ask(
    svc: Service, session: ClientSession, command: Callable[[str], spb.TelemetryCommand]
) -> spb.TelemetryCommand | str:
    """Write ``command(nonce)`` to the client and wait for the command that answers that nonce
    (Java ``GrpcChannelManager``'s response futures, ``grpcProxyRelayRequestTimeoutInSeconds``);
    the reason when there is none."""
    nonce = svc.clients.next_nonce()
    future: asyncio.Future[spb.TelemetryCommand] = asyncio.get_running_loop().create_future()
    svc.pending_replies[nonce] = future
    try:
        if not await session.write(command(nonce)):
            return f"client {session.client_id} has no telemetry stream"
        try:
            async with asyncio.timeout(svc.config.grpc_proxy_relay_request_timeout_in_seconds):
                return await future
        except TimeoutError:
            return f"client {session.client_id} ({session.language} {session.version}) did not answer in time"
    finally:
        svc.pending_replies.pop(nonce, None)


async def _running_info(svc: Service, session: ClientSession, request: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO: with ``jstackEnable`` the client's thread stacks (a
    ``PrintThreadStackTraceCommand``); a 5.x client reports nothing else. Java writes nothing
    without ``jstackEnable`` and lets the broker's call time out; finchmq says so at once."""
    header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
    if not header.jstack_enable:
        return request.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"the 5.x client {session.client_id} reports only its thread stacks (ask with jstack)",
        )
    reply = await _ask(
        svc,
        session,
        lambda nonce: spb.TelemetryCommand(
            print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
        ),
    )
    if isinstance(reply, str):
        return request.make_response(ResponseCode.SYSTEM_ERROR, reply)
    if reply.status.code not in (pb.CODE_UNSPECIFIED, pb.OK):
        return request.make_response(ResponseCode.SYSTEM_ERROR, "verify message failed")  # Java's words
    info = ConsumerRunningInfo(jstack=reply.thread_stack_trace.thread_stack_trace)
    return request.make_response(ResponseCode.SUCCESS, body=info.to_json())


_VERIFY_RESULTS = {
    pb.OK: CMResult.CR_SUCCESS,
    pb.FAILED_TO_CONSUME_MESSAGE: CMResult.CR_LATER,
    pb.MESSAGE_CORRUPTED: CMResult.CR_RETURN_NULL,
}


async def _verify_message(svc: Service, session: ClientSession, request: RemotingCommand) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY: the message to the client's listener (``VerifyMessageCommand``);
    its ``VerifyMessageResult`` as Java's ``buildConsumeMessageDirectlyResult`` reads it."""
    from .convert import message_from_stored  # noqa: PLC0415

    message = message_from_stored(bytes(request.body))
    reply = await _ask(
        svc,
        session,
        lambda nonce: spb.TelemetryCommand(
            verify_message_command=spb.VerifyMessageCommand(nonce=nonce, message=message)
        ),
    )
    if isinstance(reply, str):
        return request.make_response(ResponseCode.SYSTEM_ERROR, reply)
    result = ConsumeMessageDirectlyResult(
        consume_result=_VERIFY_RESULTS.get(reply.status.code), remark="from gRPC client"
    )
    return request.make_response(ResponseCode.SUCCESS, body=result.to_json())
