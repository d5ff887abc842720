"""TLS on the remoting protocol: ``tls.server.mode`` (disabled, permissive: TLS and plain on one
port, enforcing), mutual TLS, the client's ``tls.client.*``, and Java's settings' names, on real
sockets with certificates made by the test."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from finchmq.protocol import RemotingCommand, ResponseCode
from finchmq.remoting import (
    ExecutorName,
    RemotingClient,
    RemotingClientConfig,
    RemotingConnectError,
    RemotingServer,
    RequestExecutor,
)
from finchmq.remoting.tls import TlsConfig, TlsConfigError, TlsMode
from tests.remoting.conftest import ECHO, Echo, addr, by_name, server_config
from tests.tls_certs import TlsFiles

Start = Callable[[TlsConfig], Awaitable[RemotingServer]]


def _server_tls(files: TlsFiles, mode: TlsMode, **more: str) -> TlsConfig:
    props = {
        "tls.server.mode": mode.value,
        "tls.test.mode.enable": "false",
        "tls.server.certPath": str(files.server_cert),
        "tls.server.keyPath": str(files.server_key),
        **more,
    }
    return TlsConfig.from_properties(props)


def _client(tls: TlsConfig | None = None) -> RemotingClient:
    return RemotingClient(
        RemotingClientConfig(use_tls=tls is not None, tls=tls or TlsConfig(), connect_timeout_millis=5000)
    )


def _client_tls(files: TlsFiles | None = None, *, cert: bool = True, stranger: bool = False) -> TlsConfig:
    if files is None:
        return TlsConfig()  # Java's test mode: trust any server, no client certificate
    cert_path, key_path = (
        (files.stranger_cert, files.stranger_key) if stranger else (files.client_cert, files.client_key)
    )
    props = {
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(files.ca_cert),
    }
    if cert:
        props |= {"tls.client.certPath": str(cert_path), "tls.client.keyPath": str(key_path)}
    return TlsConfig.from_properties(props)


@pytest.fixture
async def start_server() -> AsyncIterator[Start]:
    servers: list[RemotingServer] = []

    async def start(tls: TlsConfig) -> RemotingServer:
        server = RemotingServer(server_config(tls=tls))
        server.register_processor(
            Echo(), by_name(RequestExecutor(ExecutorName.SEND, workers=2, capacity=100))
        )
        servers.append(server)
        await server.start()
        return server

    yield start
    for server in servers:
        await server.close()


async def _echo(client: RemotingClient, server: RemotingServer, text: str) -> str:
    response = await client.invoke(addr(server), RemotingCommand.request(ECHO, {"say": text}), 5000)
    assert response.code == ResponseCode.SUCCESS
    return response.ext_fields["say"]


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and text in r.getMessage()]


async def test_enforcing_serves_tls_and_refuses_a_plain_client_with_one_warning(
    start_server: Start, tls_files: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(_server_tls(tls_files, TlsMode.ENFORCING))
    async with _client(_client_tls(tls_files)) as tls_client, _client() as plain:
        assert await _echo(tls_client, server, "secret") == "secret"
        # the client cannot know why the server hung up; its error says what would explain it
        with pytest.raises(RemotingConnectError, match=r"without answering: .*tls.server.mode=enforcing"):
            await _echo(plain, server, "in the clear")
        assert len(_warnings(caplog, "tls.server.mode=enforcing")) == 1
        assert await _echo(tls_client, server, "still served") == "still served"  # nothing else disturbed


async def test_permissive_serves_tls_and_plain_clients_on_one_port(
    start_server: Start, tls_files: TlsFiles
) -> None:
    server = await start_server(_server_tls(tls_files, TlsMode.PERMISSIVE))
    async with _client(_client_tls(tls_files)) as tls_client, _client() as plain:
        assert await _echo(tls_client, server, "over tls") == "over tls"
        assert await _echo(plain, server, "plain") == "plain"
        tls_conn = next(iter(tls_client._connections.values()))
        plain_conn = next(iter(plain._connections.values()))
        assert (
            tls_conn._transport is not None and tls_conn._transport.get_extra_info("ssl_object") is not None
        )
        assert (
            plain_conn._transport is not None and plain_conn._transport.get_extra_info("ssl_object") is None
        )
    assert len(server.connections) <= 2


async def test_disabled_refuses_a_tls_client_and_serves_plain(
    start_server: Start, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(TlsConfig(server_mode=TlsMode.DISABLED))
    async with _client(_client_tls()) as tls_client, _client() as plain:
        with pytest.raises(RemotingConnectError):
            await _echo(tls_client, server, "x")
        assert len(_warnings(caplog, "tls.server.mode=disabled")) == 1
        assert await _echo(plain, server, "plain") == "plain"


async def test_test_mode_uses_a_self_signed_certificate_the_client_trusts(
    start_server: Start,
) -> None:
    server = await start_server(TlsConfig(server_mode=TlsMode.ENFORCING))
    async with _client(TlsConfig()) as client:  # Java's defaults: tls.test.mode.enable=true
        assert await _echo(client, server, "test mode") == "test mode"


async def test_mutual_tls_admits_only_clients_signed_by_the_trusted_ca(
    start_server: Start, tls_files: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    tls = _server_tls(
        tls_files,
        TlsMode.ENFORCING,
        **{
            "tls.server.need.client.auth": "require",
            "tls.server.authClient": "true",
            "tls.server.trustCertPath": str(tls_files.ca_cert),
        },
    )
    server = await start_server(tls)
    async with _client(_client_tls(tls_files)) as client:
        assert await _echo(client, server, "mutual") == "mutual"
    for bad in (_client_tls(tls_files, cert=False), _client_tls(tls_files, stranger=True)):
        caplog.clear()
        async with _client(bad) as client:
            with pytest.raises(RemotingConnectError):
                await _echo(client, server, "no")
        assert len(_warnings(caplog, "TLS handshake with")) == 1
    async with _client(_client_tls(tls_files)) as client:
        assert await _echo(client, server, "still") == "still"


async def test_a_client_that_verifies_the_server_refuses_an_unknown_certificate(
    start_server: Start, tls_files: TlsFiles
) -> None:
    server = await start_server(TlsConfig(server_mode=TlsMode.ENFORCING))
    async with _client(_client_tls(tls_files, cert=False)) as client:  # self-signed server: not our CA
        with pytest.raises(RemotingConnectError, match="TLS"):
            await _echo(client, server, "x")


def test_settings_take_javas_names_and_the_config_file_wins(tmp_path: Path) -> None:
    file = tmp_path / "tls.properties"
    file.write_text(
        "tls.test.mode.enable=false\ntls.server.certPath=/from/file.pem\ntls.server.mode=disabled\n"
    )
    tls = TlsConfig.from_properties(
        {
            "tls.server.mode": "enforcing",
            "tls.server.certPath": "/from/props.pem",
            "tls.server.keyPath": "/k.pem",
            "tls.client.authServer": "TRUE",
            "tls.enable": "true",
            "tls.config.file": str(file),
            "listenPort": "10911",
        }
    )
    assert tls.server_mode is TlsMode.ENFORCING  # Java reads the mode from system properties only
    assert tls.server_cert_path == "/from/file.pem"
    assert tls.server_key_path == "/k.pem"
    assert tls.test_mode_enable is False
    assert tls.client_auth_server is True and tls.enable is True
    default = TlsConfig()  # Java's defaults
    assert default.server_mode is TlsMode.PERMISSIVE and default.test_mode_enable and default.enable is None
    # a broker's client to its name servers: tls.enable if given, else mode == enforcing (BrokerStartup)
    assert not default.broker_client_uses_tls
    assert TlsConfig(server_mode=TlsMode.ENFORCING).broker_client_uses_tls
    assert not TlsConfig(server_mode=TlsMode.ENFORCING, enable=False).broker_client_uses_tls
    with pytest.raises(TlsConfigError, match=r"tls\.server\.mode"):
        TlsConfig.from_properties({"tls.server.mode": "strict"})
    with pytest.raises(TlsConfigError, match="does not exist"):
        TlsConfig.from_properties({"tls.config.file": str(tmp_path / "missing")})
    with pytest.raises(TlsConfigError, match=r"tls\.server\.certPath"):
        tls.server_context()


async def test_a_server_without_its_certificate_does_not_start() -> None:
    tls = TlsConfig(server_mode=TlsMode.ENFORCING, test_mode_enable=False)
    server = RemotingServer(server_config(tls=tls))
    with pytest.raises(TlsConfigError, match=r"tls\.server\.certPath"):
        await server.start()
    await server.close()
