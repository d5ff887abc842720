"""finchmq.spark: the PySpark data source, format ``rocketmq`` (batch and Structured Streaming,
read and write), built on PySpark 4.2+'s Python Data Source API: no JVM code.

    import finchmq.spark
    finchmq.spark.register(spark)
    df = (spark.read.format("rocketmq")
          .option("nameServer", "127.0.0.1:9876").option("topic", "Orders").load())

Install with ``pip install 'finchmq[spark]'`` (pyspark and pyarrow; Spark needs Java 17+).
Options, columns and delivery guarantees: ``docs/spark.md``. Imports: ``finchmq.client`` only
(import-linter forbids the servers, the store and the transport).
"""

from __future__ import annotations

from typing import Any

from ._read import SCHEMA, DataLossError
from ._write import SinkError
from .options import OptionError
from .session import local_session
from .source import RocketMQDataSource

__all__ = [
    "SCHEMA",
    "DataLossError",
    "OptionError",
    "RocketMQDataSource",
    "SinkError",
    "local_session",
    "register",
]


def register(spark: Any) -> None:
    """Register format ``rocketmq`` with the ``SparkSession`` ``spark``; nothing else is needed."""
    spark.dataSource.register(RocketMQDataSource)
