"""QueryRoute and QueryAssignment (Java ``RouteActivity``)."""

from __future__ import annotations

import ipaddress

from finchmq.protocol.bodies import PermName

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .backend import BrokerQueues
from .context import CallContext
from .state import Service
from .status import GrpcStatusError, ok
from .types import MessageTypeValue, accepted_message_types
from .validate import valid_consumer_group, valid_topic


def _scheme(host: str) -> int:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return pb.DOMAIN_NAME
    return pb.IPv4 if address.version == 4 else pb.IPv6


def _endpoints(svc: Service, queues: BrokerQueues, asked: pb.Endpoints) -> pb.Endpoints:
    """Local mode: the broker's host at this server's gRPC port (Java ``ProxyTopicRouteData``);
    cluster mode: every queue is reached through the endpoints the client used."""
    if not svc.backend.local and asked.addresses:
        return asked
    return pb.Endpoints(scheme=_scheme(queues.host), addresses=[pb.Address(host=queues.host, port=svc.port)])  # type: ignore[arg-type]


def permission(perm: int) -> pb.Permission.ValueType:
    readable, writeable = PermName.is_readable(perm), PermName.is_writeable(perm)
    if readable and writeable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    return pb.WRITE if writeable else pb.NONE


def _queues(
    queues: BrokerQueues, topic: pb.Resource, broker: pb.Broker, types: list[MessageTypeValue]
) -> list[pb.MessageQueue]:
    """Java ``genMessageQueueFromQueueData``: read-only ids first, then write-only, then
    read-write; NONE queues for a topic neither readable nor writeable."""
    r = w = rw = n = 0
    readable, writeable = PermName.is_readable(queues.perm), PermName.is_writeable(queues.perm)
    if readable and writeable:
        rw = min(queues.write_queue_nums, queues.read_queue_nums)
        r, w = queues.read_queue_nums - rw, queues.write_queue_nums - rw
    elif writeable:
        w = queues.write_queue_nums
    elif readable:
        r = queues.read_queue_nums
    else:
        n = max(1, queues.write_queue_nums, queues.read_queue_nums)
    perms = [pb.READ] * r + [pb.WRITE] * w + [pb.READ_WRITE] * rw + [pb.NONE] * n
    return [
        pb.MessageQueue(topic=topic, id=i, permission=p, broker=broker, accept_message_types=types)
        for i, p in enumerate(perms)
    ]


async def _route(svc: Service, topic: str) -> list[BrokerQueues]:
    route = await svc.backend.route(topic)
    if not route:
        raise GrpcStatusError(pb.TOPIC_NOT_FOUND, f"topic {topic} not found")
    return route


async def query_route(svc: Service, ctx: CallContext, req: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
    topic = valid_topic(req.topic)
    route = await _route(svc, topic)
    types = accepted_message_types(await svc.backend.topic_config(topic))
    queues: list[pb.MessageQueue] = []
    for broker_queues in route:
        broker = pb.Broker(
            name=broker_queues.broker_name, id=0, endpoints=_endpoints(svc, broker_queues, req.endpoints)
        )
        queues.extend(_queues(broker_queues, req.topic, broker, types))
    return spb.QueryRouteResponse(status=ok(), message_queues=queues)


async def query_assignment(
    svc: Service, ctx: CallContext, req: spb.QueryAssignmentRequest
) -> spb.QueryAssignmentResponse:
    """One assignment per readable broker, queue id -1 (the broker chooses the queue on each
    POP); a FIFO group (``consumeMessageOrderly``) gets every queue, each on its own."""
    topic = valid_topic(req.topic)
    group = valid_consumer_group(req.group)
    route = await _route(svc, topic)
    config = await svc.backend.group_config(group)
    fifo = config is not None and config.is_consume_message_orderly
    assignments: list[pb.Assignment] = []
    for broker_queues in route:
        if not PermName.is_readable(broker_queues.perm) or broker_queues.read_queue_nums <= 0:
            continue
        broker = pb.Broker(
            name=broker_queues.broker_name, id=0, endpoints=_endpoints(svc, broker_queues, req.endpoints)
        )
        ids = range(broker_queues.read_queue_nums) if fifo else (-1,)
        perm = permission(broker_queues.perm)
        assignments.extend(
            pb.Assignment(
                message_queue=pb.MessageQueue(topic=req.topic, id=i, permission=perm, broker=broker)
            )
            for i in ids
        )
    if not assignments:
        raise GrpcStatusError(pb.FORBIDDEN, "no readable queue")
    return spb.QueryAssignmentResponse(status=ok(), assignments=assignments)
