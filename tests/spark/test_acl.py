"""The ``rocketmq`` source and sink against a broker with ``aclEnable=true``: the ``accessKey`` and
``secretKey`` options sign every request the driver and the Python workers send."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from finchmq.client import BlockingAdminClient, SessionCredentials
from finchmq.testing import EmbeddedServer

from .conftest import BROKER, error_of, read

pytestmark = pytest.mark.timeout(300)

ACL_FILE = """\
accounts:
  - accessKey: spark_account
    secretKey: spark_secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [SparkAcl=PUB|SUB]
  - accessKey: spark_admin
    secretKey: spark_admin_secret
    admin: true
"""
KEYS = {"accessKey": "spark_account", "secretKey": "spark_secret"}


def test_keys_sign_reads_and_writes(
    spark: Any, finchmq_server_factory: Callable[..., EmbeddedServer], tmp_path: Path
) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_FILE, encoding="utf-8")
    server = finchmq_server_factory({**BROKER, "aclEnable": "true", "aclFilePath": str(acl_file)})
    namesrv = server.namesrv_addr
    admin_keys = SessionCredentials("spark_admin", "spark_admin_secret")
    with BlockingAdminClient(namesrv_addr=namesrv, session_credentials=admin_keys) as admin:
        admin.create_topic("SparkAcl", read_queue_nums=2, write_queue_nums=2)

    df = spark.createDataFrame([(f"row {i}",) for i in range(10)], ["body"])
    writer = df.write.format("rocketmq").option("nameServer", namesrv).option("topic", "SparkAcl")
    assert "No accessKey is configured" in error_of(lambda: writer.mode("append").save())
    for key, value in KEYS.items():
        writer = writer.option(key, value)
    writer.mode("append").save()

    assert "No accessKey is configured" in error_of(lambda: read(spark, namesrv, "SparkAcl").collect())
    rows = read(spark, namesrv, "SparkAcl", **KEYS).collect()
    assert sorted(r.body.decode() for r in rows) == [f"row {i}" for i in range(10)]
