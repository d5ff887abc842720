"""Reading back what a broker stored, for crash tests and the chaos benchmark: every message
(or body) of a topic, pulled queue by queue from offset 0 (PULL_MESSAGE with the subscription in
the request, so no consumer group needs to exist)."""

from __future__ import annotations

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from finchmq.protocol.message import MessageExt
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient

__all__ = ["stored_bodies", "stored_messages"]


async def stored_bodies(broker_addr: str, topic: str, *, queues: int = 16) -> list[bytes]:
    """The bodies of :func:`stored_messages`."""
    return [m.body for m in await stored_messages(broker_addr, topic, queues=queues)]


async def stored_messages(broker_addr: str, topic: str, *, queues: int = 16) -> list[MessageExt]:
    """Every message of ``topic`` on the broker, queue by queue in offset order (queue ids
    ``0..queues-1``; a queue that does not exist ends at once)."""
    found: list[MessageExt] = []
    async with RemotingClient() as client:
        for queue_id in range(queues):
            offset = 0
            while True:
                header = PullMessageRequestHeader(
                    consumer_group="finchmq_auditor", topic=topic, queue_id=queue_id, queue_offset=offset,
                    max_msg_nums=32, sys_flag=int(PullSysFlag.SUBSCRIPTION), commit_offset=0,
                    suspend_timeout_millis=0, sub_version=0, subscription="*",
                )  # fmt: skip
                request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
                reply = await client.invoke(broker_addr, request, 10_000)
                if reply.code != ResponseCode.SUCCESS:
                    break
                found += decode_stored_all(reply.body)
                offset = int(reply.ext_fields["nextBeginOffset"])
    return found
