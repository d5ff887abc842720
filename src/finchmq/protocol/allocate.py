"""Queue allocation strategies (Java ``client/consumer/rebalance/*``): pure functions of their input.

Owns: ``AllocateMessageQueueStrategy``, Java 4.9.8's six strategies, and ``MachineRoomResolver``.
Imports: ``.message``.
They are part of what members of a group agree on without talking, like a wire format, and both
ends run them: the clients' rebalancing (``finchmq.client`` re-exports them) and, since 5.x, the
broker answering QUERY_ASSIGNMENT (it allocates by the strategy name the client sends).

Each strategy answers "which of ``mq_all`` does ``current_cid`` consume?" given every member's
client id. Every member sorts both lists the same way (RebalanceImpl does it before calling),
so each computes the same disjoint split without talking to the others; the results equal
Java 4.9's (and the C++ client's), so mixed groups agree.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from .message import MessageQueue

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "MachineRoomResolver",
]


@runtime_checkable
class AllocateMessageQueueStrategy(Protocol):
    """Java ``AllocateMessageQueueStrategy``."""

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """The queues ``current_cid`` consumes; ``ValueError`` for an empty argument."""
        ...

    def get_name(self) -> str:
        """The strategy's Java name (``AVG``, ``AVG_BY_CIRCLE``, ``CONSISTENT_HASH``, ``CONFIG``,
        ``MACHINE_ROOM``, ``MACHINE_ROOM_NEARBY-<the inner strategy's name>``)."""
        ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """Java ``AbstractAllocateMessageQueueStrategy.check``: False when the client is not a member."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Contiguous blocks; the first ``len(mq) % len(cid)`` members take one more.

    8 queues, 3 members: ``[q0 q1 q2] [q3 q4 q5] [q6 q7]``. (Java 4.x; the 3.x formula in seed 002,
    ``Lists.partition`` by ``ceil(mq/cid)``, differs for e.g. 4 queues and 3 members and would
    disagree with Java and C++ members of the same group.)
    """

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        n_mq, n_cid = len(mq_all), len(cid_all)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average = 1
        elif mod > 0 and index < mod:
            average = n_mq // n_cid + 1
        else:
            average = n_mq // n_cid
        start = index * average if mod > 0 and index < mod else index * average + mod
        size = min(average, n_mq - start)
        return [mq_all[(start + i) % n_mq] for i in range(max(size, 0))]

    def get_name(self) -> str:
        return "AVG"


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Round robin: member ``i`` takes queues ``i, i + n, i + 2n...``."""

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]

    def get_name(self) -> str:
        return "AVG_BY_CIRCLE"


def _md5_hash(key: str) -> int:
    """Java ``ConsistentHashRouter.MD5Hash``: the first 4 digest bytes as an unsigned number."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4], "big")


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """A hash ring of ``virtual_node_cnt`` virtual nodes per member (``"<cid>-<i>"``); each
    queue (by ``str(mq)``, Java's ``MessageQueue.toString``) goes to the next node clockwise.
    Few queues move when a member joins or leaves."""

    def __init__(self, virtual_node_cnt: int = 10) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"virtual_node_cnt must be >= 0, got {virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(self.virtual_node_cnt):
                ring[_md5_hash(f"{cid}-{i}")] = cid  # TreeMap.put: a later collision wins
        if not ring:
            return []
        keys = sorted(ring)
        result = []
        for mq in mq_all:
            pos = bisect.bisect_left(keys, _md5_hash(str(mq)))
            if ring[keys[pos % len(keys)]] == current_cid:
                result.append(mq)
        return result

    def get_name(self) -> str:
        return "CONSISTENT_HASH"


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """Every member consumes exactly the configured queues (whatever the group looks like)."""

    def __init__(self, message_queue_list: Iterable[MessageQueue]) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)

    def get_name(self) -> str:
        return "CONFIG"


class AllocateMessageQueueByMachineRoom(AllocateMessageQueueStrategy):
    """Only the queues of brokers named ``<room>@<name>`` whose room is one of ``consumeridcs``,
    divided into contiguous blocks; the first ``len(queues) % len(cid)`` members each take one
    more, from the tail (Java: "Alipay logic room"). Brokers not named so are not consumed.

    10 queues, 5 on ``room1@broker-a``, ``consumeridcs={"room1"}``, 2 members: ``[0 1 4] [2 3]``.
    """

    def __init__(self, consumeridcs: Iterable[str] = ()) -> None:
        self.consumeridcs: set[str] = set(consumeridcs)

    def set_consumeridcs(self, consumeridcs: Iterable[str]) -> None:
        """Java ``setConsumeridcs``: the machine rooms whose brokers this group consumes."""
        self.consumeridcs = set(consumeridcs)

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        mine = [mq for mq in mq_all if _room_of_broker_name(mq.broker_name) in self.consumeridcs]
        n_cid = len(cid_all)
        mod, rem = divmod(len(mine), n_cid)
        result = mine[mod * index : mod * index + mod]
        if rem > index:
            result.append(mine[index + mod * n_cid])
        return result

    def get_name(self) -> str:
        return "MACHINE_ROOM"


def _room_of_broker_name(broker_name: str) -> str | None:
    """The room of a broker named ``<room>@<name>``, else None. As Java's ``split("@")``, which
    drops trailing empty parts: ``"a@b@"`` is room ``a``, ``"a@"`` has none."""
    parts = broker_name.split("@")
    while parts and not parts[-1]:
        parts.pop()
    return parts[0] if len(parts) == 2 else None


@runtime_checkable
class MachineRoomResolver(Protocol):
    """Java ``AllocateMachineRoomNearby.MachineRoomResolver``: the machine room a broker (by one
    of its queues) and a client (by its client id) are deployed in. Neither may answer empty."""

    def broker_deploy_in(self, message_queue: MessageQueue) -> str:
        """The room of the broker holding ``message_queue`` (Java ``brokerDeployIn``)."""
        ...

    def consumer_deploy_in(self, client_id: str) -> str:
        """The room of the client ``client_id`` (Java ``consumerDeployIn``)."""
        ...


class AllocateMachineRoomNearby(AllocateMessageQueueStrategy):
    """Machine-room-nearby allocation around another strategy (Java ``AllocateMachineRoomNearby``).

    A room's queues go to the members in the same room (divided by ``strategy``) while any is
    alive there; the queues of a room without members are divided by ``strategy`` among all
    members. ``resolver`` says which room each broker and client is in.

        AllocateMachineRoomNearby(AllocateMessageQueueAveragely(), resolver)   # "MACHINE_ROOM_NEARBY-AVG"
    """

    def __init__(self, strategy: AllocateMessageQueueStrategy, resolver: MachineRoomResolver) -> None:
        if not isinstance(strategy, AllocateMessageQueueStrategy):
            raise ValueError(f"allocateMessageQueueStrategy is null: {strategy!r} is not a strategy")
        if not isinstance(resolver, MachineRoomResolver):
            raise ValueError(f"machineRoomResolver is null: {resolver!r} is not a MachineRoomResolver")
        self.allocate_message_queue_strategy = strategy
        self.machine_room_resolver = resolver

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        resolver, strategy = self.machine_room_resolver, self.allocate_message_queue_strategy
        room_queues: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {mq}")
            room_queues.setdefault(room, []).append(mq)
        room_members: dict[str, list[str]] = {}
        for cid in cid_all:
            room = resolver.consumer_deploy_in(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            room_members.setdefault(room, []).append(cid)
        result: list[MessageQueue] = []
        # 1. the queues of this member's room, among the members there
        current_room = resolver.consumer_deploy_in(current_cid)
        here = room_queues.pop(current_room, None)
        if here:
            result.extend(strategy.allocate(consumer_group, current_cid, here, room_members[current_room]))
        # 2. the queues of each room without members (in room order, as Java's TreeMap), among all
        for room in sorted(room_queues):
            if room not in room_members:
                result.extend(strategy.allocate(consumer_group, current_cid, room_queues[room], cid_all))
        return result

    def get_name(self) -> str:
        return f"MACHINE_ROOM_NEARBY-{self.allocate_message_queue_strategy.get_name()}"
