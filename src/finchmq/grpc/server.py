"""``GrpcServer``: the 5.x endpoint (Java's proxy gRPC port, 8081 by default)."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpclib.server import Server

from .backend import Backend
from .config import GrpcConfig
from .service import MessagingService
from .state import Authorizer
from .transport import GrpclibHandlers

if TYPE_CHECKING:
    from .transport_grpcio import GrpcioServer

log = logging.getLogger(__name__)


class GrpcServer:
    """Serves ``apache.rocketmq.v2.MessagingService`` for the brokers behind ``backend``."""

    def __init__(
        self, backend: Backend, config: GrpcConfig | None = None, authorizer: Authorizer | None = None
    ) -> None:
        self.config = config or GrpcConfig()
        self.service = MessagingService(backend, self.config, authorizer)
        self._server: Server | None = None
        self._grpcio: GrpcioServer | None = None
        self.port = self.config.grpc_server_port

    @property
    def address(self) -> str:
        host = self.config.bind_address
        return f"{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{self.port}"

    def _ssl_context(self) -> ssl.SSLContext | None:
        """TLS (ALPN ``h2``, no client certificates, as Java's ``ClientAuth.NONE``) when configured."""
        if self.config.tls_cert_path is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.config.tls_cert_path, self.config.tls_key_path)
        context.set_alpn_protocols(["h2"])
        return context

    async def start(self) -> None:
        if self.config.grpc_server_impl == "grpcio":
            await self._start_grpcio()
        else:
            server = Server([GrpclibHandlers(self.service)])
            await server.start(
                self.config.bind_address, self.config.grpc_server_port, ssl=self._ssl_context()
            )
            self._server = server
            sockets: Any = getattr(server._server, "sockets", ())  # grpclib keeps asyncio's server there
            if sockets:
                self.port = sockets[0].getsockname()[1]
        self.service.port = self.port
        self.service.tasks.every(10_000, self._sweep, "client-sweeper", initial_delay_ms=10_000)
        log.info("gRPC MessagingService listening on %s", self.address)

    async def _start_grpcio(self) -> None:
        try:
            from .transport_grpcio import GrpcioServer  # noqa: PLC0415 (grpcio is optional)
        except ImportError as exc:
            raise RuntimeError(
                "grpcServerImpl=grpcio needs grpcio: pip install 'finchmq[grpc-fast]'"
            ) from exc
        certificate = key = None
        if self.config.tls_cert_path is not None and self.config.tls_key_path is not None:
            certificate = Path(self.config.tls_cert_path).read_bytes()
            key = Path(self.config.tls_key_path).read_bytes()
        self._grpcio = GrpcioServer(self.service, self.config.grpc_max_inbound_message_size)
        self.port = await self._grpcio.start(
            self.config.bind_address, self.config.grpc_server_port, certificate, key
        )

    async def _sweep(self) -> None:
        for client_id in await self.service.clients.expire_idle():
            log.info("5.x client %s idle: forgotten", client_id)

    async def close(self) -> None:
        if self._grpcio is not None:
            await self._grpcio.close()
            self._grpcio = None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        await self.service.close()
