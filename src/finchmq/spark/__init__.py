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
from .workers import WorkerPythonError, check_workers

__all__ = [
    "SCHEMA",
    "DataLossError",
    "OptionError",
    "RocketMQDataSource",
    "SinkError",
    "WorkerPythonError",
    "local_session",
    "register",
]


def register(spark: Any, *, check: bool = True) -> None:
    """Register format ``rocketmq`` with the ``SparkSession`` ``spark``.

    With ``check`` (the default), first make sure Spark's Python workers can import finchmq:
    ``WorkerPythonError`` says what to set when they cannot (``PYSPARK_PYTHON``,
    ``spark.pyspark.python``, or ``spark.archives`` with a packed venv on a cluster).
    """
    if check:
        check_workers(spark)
    spark.dataSource.register(RocketMQDataSource)
