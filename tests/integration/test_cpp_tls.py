"""The official C++ client (librocketmq 1.2.4, PyPI ``rocketmq==0.4.4``) has no TLS (no OpenSSL in
its source or its binary, nothing in its C API; TLS came in rocketmq-client-cpp 2.2.0, see
docs/tls.md). It connects in the clear, so it uses a port in ``tls.server.mode=permissive``, where
TLS clients are served too. (On an enforcing port its sends fail with "No route info of this
topic" once its own retries are over, about a minute: too slow a test for what it shows.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from finchmq.client import BlockingAdminClient, BlockingPullConsumer, MessageQueue, TlsConfig
from finchmq.testing import EmbeddedServer
from tests.tls_certs import TlsFiles, client_properties, server_properties

from .conftest import produce


def test_the_cpp_client_and_tls_clients_share_a_permissive_port(
    finchmq_server_factory: Callable[..., EmbeddedServer], tls_files: TlsFiles, cpp: Any
) -> None:
    server = finchmq_server_factory({**server_properties(tls_files), "tls.server.mode": "permissive"})
    tls = TlsConfig.from_properties(client_properties(tls_files))
    with BlockingAdminClient(namesrv_addr=server.namesrv_addr, use_tls=True, tls=tls) as admin:
        admin.create_topic("cpp_tls", read_queue_nums=1, write_queue_nums=1)
    sent = produce(cpp, server.namesrv_addr, "cpp_tls", 3, body_prefix="clear-")
    assert [r["status"] for r in sent] == [0] * 3
    with BlockingPullConsumer(
        "cpp_tls_reader", namesrv_addr=server.namesrv_addr, use_tls=True, tls=tls
    ) as reader:
        found = reader.pull(MessageQueue("cpp_tls", "broker-a", 0), "*", 0, 32).msg_found_list
    assert [m.body for m in found] == [b"clear-0", b"clear-1", b"clear-2"]
