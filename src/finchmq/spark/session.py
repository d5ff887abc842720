"""``local_session``: a local-mode SparkSession sized for a small machine, with ``rocketmq``
registered. Used by the demo, the tests and the benchmark; any other session works too.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (default: ``python3`` on the PATH, which
may not have finchmq installed), so this sets it to the running interpreter unless it is set.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .source import RocketMQDataSource

__all__ = ["local_session"]


def local_session(
    app_name: str = "finchmq",
    *,
    cores: int = 2,
    task_attempts: int = 1,
    log_level: str = "ERROR",
    conf: dict[str, str] | None = None,
) -> Any:
    """``SparkSession`` on ``local[cores,task_attempts]``: UI off, ``spark.sql.shuffle.partitions``
    = ``cores``, UTC, ``rocketmq`` registered. ``conf`` adds Spark settings.
    """
    from pyspark.sql import SparkSession  # noqa: PLC0415 - Spark is imported only when asked for

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.sql.session.timeZone": "UTC",
        "spark.log.level": log_level,
        **(conf or {}),
    }
    builder = SparkSession.builder.master(f"local[{cores},{task_attempts}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.dataSource.register(RocketMQDataSource)
    return spark
