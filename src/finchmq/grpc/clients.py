"""The 5.x clients this server knows: each one's settings, its link to the brokers and the
Telemetry stream that carries the server's commands to it (Java ``GrpcClientSettingsManager`` and
``GrpcChannelManager``)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

from finchmq.protocol.command import RemotingCommand

from ._pb import definition_pb2 as pb
from ._pb import service_pb2 as spb
from .backend import Backend, ClientLink

log = logging.getLogger(__name__)

TelemetryWriter = Callable[[spb.TelemetryCommand], Awaitable[None]]
BrokerRequestRelay = Callable[["ClientSession", RemotingCommand], Awaitable[RemotingCommand | None]]


class ClientSession:
    """One client id's state. ``settings`` is what the client last sent (raw, Java keeps the raw
    settings and merges the server's values in when it answers)."""

    def __init__(self, client_id: str, peer: str, language: str, version: str) -> None:
        self.client_id = client_id
        self.peer = peer
        self.language = language
        self.version = version
        self.settings: pb.Settings | None = None
        self.link: ClientLink | None = None
        self.writer: TelemetryWriter | None = None
        self.last_seen = time.monotonic()
        self._write_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<ClientSession {self.client_id} {self.peer} {self.client_type_name}>"

    @property
    def client_type(self) -> int:
        return self.settings.client_type if self.settings is not None else pb.CLIENT_TYPE_UNSPECIFIED

    @property
    def client_type_name(self) -> str:
        return pb.ClientType.Name(self.client_type)  # type: ignore[arg-type]

    @property
    def group(self) -> str | None:
        if self.settings is None or not self.settings.HasField("subscription"):
            return None
        return self.settings.subscription.group.name

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    async def write(self, command: spb.TelemetryCommand) -> bool:
        """Send ``command`` on the client's Telemetry stream; False when it has none (or the
        write failed: the stream is unbound, as Java's ``GrpcClientChannel`` does)."""
        writer = self.writer
        if writer is None:
            return False
        try:
            async with self._write_lock:
                await writer(command)
        except Exception as exc:  # the stream is gone
            log.debug("telemetry write to %s failed: %r", self.client_id, exc)
            if self.writer is writer:
                self.writer = None
            return False
        return True


class ClientRegistry:
    """Client id → session, created on first sight; idle ones expire."""

    def __init__(self, backend: Backend, relay: BrokerRequestRelay, idle_seconds: float) -> None:
        self._backend = backend
        self._relay = relay
        self._idle_seconds = idle_seconds
        self._sessions: dict[str, ClientSession] = {}
        self._nonces = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def sessions(self) -> list[ClientSession]:
        return list(self._sessions.values())

    def session(self, client_id: str, peer: str, language: str, version: str) -> ClientSession:
        session = self._sessions.get(client_id)
        if session is None:
            session = self._sessions[client_id] = ClientSession(client_id, peer, language, version)
        session.touch()
        return session

    def link(self, session: ClientSession) -> ClientLink:
        """The session's link to the brokers, made on first use."""
        if session.link is None:

            async def on_request(request: RemotingCommand) -> RemotingCommand | None:
                return await self._relay(session, request)

            session.link = self._backend.link(session.client_id, session.peer, on_request)
        return session.link

    def next_nonce(self) -> str:
        return str(next(self._nonces))

    async def remove(self, client_id: str) -> ClientSession | None:
        session = self._sessions.pop(client_id, None)
        if session is not None and session.link is not None:
            await session.link.close()
            session.link = None
        return session

    async def expire_idle(self) -> list[str]:
        """Forget clients silent for longer than the idle time (Java ``grpcClientIdleTimeMills``)."""
        now = time.monotonic()
        idle = [cid for cid, s in self._sessions.items() if now - s.last_seen > self._idle_seconds]
        for client_id in idle:
            await self.remove(client_id)
        return idle

    async def close(self) -> None:
        for client_id in list(self._sessions):
            await self.remove(client_id)
