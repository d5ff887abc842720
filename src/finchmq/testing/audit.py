"""Reading back what a broker stored, for crash tests and the chaos benchmark: every message
body of a topic, pulled queue by queue from offset 0 (PULL_MESSAGE with the subscription in
the request, so no consumer group needs to exist)."""

from __future__ import annotations

from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.headers import PullMessageRequestHeader, PullSysFlag
from finchmq.protocol.stored import decode_stored_all
from finchmq.remoting import RemotingClient

__all__ = ["stored_bodies"]


async def stored_bodies(broker_addr: str, topic: str, *, queues: int = 16) -> list[bytes]:
    """The bodies of every message of ``topic`` on the broker, queue by queue in offset order
    (queue ids ``0..queues-1``; a queue that does not exist ends at once)."""
    bodies: list[bytes] = []
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
                bodies.extend(m.body for m in decode_stored_all(reply.body))
                offset = int(reply.ext_fields["nextBeginOffset"])
    return bodies
