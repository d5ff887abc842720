"""TLS on a broker and its name server (both remoting ports; the HA port stays plain, as in
Java 4.9.8), with mutual TLS: finchmq's producer, pull consumer, admin client and ``finchmq
admin --tls`` reach them; a plain client is refused; the broker registers over TLS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from finchmq.cli.__main__ import main
from finchmq.client import AdminClient, MQClientError, Producer, PullConsumer, TlsConfig
from finchmq.protocol import RemotingCommand, RequestCode, ResponseCode
from finchmq.protocol.message import Message
from finchmq.remoting import RemotingClient, RemotingClientConfig
from finchmq.testing import EmbeddedServer
from tests.client.conftest import TEST_BROKER
from tests.tls_certs import TlsFiles, client_properties, server_properties


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[EmbeddedServer]:
    with EmbeddedServer(
        tmp_path_factory.mktemp("tls-broker"), {**TEST_BROKER, **server_properties(tls_files)}
    ) as server:
        yield server


def tls_options(files: TlsFiles) -> dict[str, object]:
    return {"use_tls": True, "tls": TlsConfig.from_properties(client_properties(files))}


async def test_a_tls_client_sends_and_pulls_through_an_enforcing_cluster(
    tls_server: EmbeddedServer, tls_files: TlsFiles
) -> None:
    options = tls_options(tls_files)
    async with AdminClient(namesrv_addr=tls_server.namesrv_addr, **options) as admin:  # type: ignore[arg-type]
        assert list((await admin.cluster_info()).broker_addr_table)  # the broker registered over TLS
        await admin.create_topic("tls_topic", read_queue_nums=1, write_queue_nums=1)
    async with Producer("tls_pg", namesrv_addr=tls_server.namesrv_addr, **options) as producer:  # type: ignore[arg-type]
        sent = await producer.send(Message.create("tls_topic", b"over tls"))
    async with PullConsumer("tls_cg", namesrv_addr=tls_server.namesrv_addr, **options) as consumer:  # type: ignore[arg-type]
        result = await consumer.pull(sent.message_queue, "*", 0, 32)
    assert [m.body for m in result.msg_found_list] == [b"over tls"]


async def test_the_fast_port_serves_tls_too(tls_server: EmbeddedServer, tls_files: TlsFiles) -> None:
    assert tls_server.broker is not None
    fast_port = tls_server.broker.fast_server.port
    tls = TlsConfig.from_properties(client_properties(tls_files))
    async with RemotingClient(RemotingClientConfig(use_tls=True, tls=tls)) as client:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
        answer = await client.invoke(f"127.0.0.1:{fast_port}", request, 5000)
    assert answer.code == ResponseCode.SUCCESS


async def test_a_plain_client_is_refused(tls_server: EmbeddedServer) -> None:
    async with AdminClient(namesrv_addr=tls_server.namesrv_addr, mq_client_api_timeout=2000) as admin:
        with pytest.raises((MQClientError, TimeoutError)):
            await admin.cluster_info()


def test_finchmq_admin_with_tls(
    tls_server: EmbeddedServer, tls_files: TlsFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "tls.properties"  # mqadmin's -Dtls.config.file
    conf.write_text("".join(f"{k}={v}\n" for k, v in client_properties(tls_files).items()))
    argv = ["admin", "clusterList", "-n", tls_server.namesrv_addr, "--json"]
    assert main([*argv, "--tls", "--tls-config", str(conf)]) == 0
    assert "DefaultCluster" in capsys.readouterr().out
    assert main(argv) == 1  # without --tls: refused
    assert "clusterList failed" in capsys.readouterr().err


async def test_the_console_reaches_a_tls_cluster(tls_server: EmbeddedServer, tls_files: TlsFiles) -> None:
    from finchmq.console.service import ConsoleService  # noqa: PLC0415  (the web stack, only here)

    async with ConsoleService(tls_server.namesrv_addr, client_options=tls_options(tls_files)) as service:
        cluster = await service.cluster()
    assert "DefaultCluster" in json.dumps(cluster, default=str)
