"""Spark's Python workers must import finchmq: check it when the source is registered.

Spark starts its Python workers with ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` (default:
``python3`` on the PATH), not with the driver's interpreter. When that interpreter lacks finchmq,
every read fails deep inside a Spark stack trace (``ModuleNotFoundError: No module named
'finchmq'``, SQLSTATE 38000). ``check_workers`` runs one tiny task on a worker first and turns
that into an error that says what to set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerPythonError", "check_workers"]


class WorkerPythonError(RuntimeError):
    """Spark's Python workers cannot import finchmq (the message says what to set)."""


def _advice(detail: str) -> str:
    return (
        f"Spark's Python workers cannot import finchmq ({detail}). Point them at an interpreter that "
        f"has it: PYSPARK_PYTHON={sys.executable} (or the Spark setting spark.pyspark.python), "
        "as finchmq.spark.local_session() does; on a cluster, install finchmq on every executor or "
        "ship a packed virtual environment with spark.archives (venv-pack) and set "
        "spark.pyspark.python to its interpreter. See docs/spark.md."
    )


def check_workers(spark: Any) -> None:
    """Run one tiny task on a Python worker of ``spark``; raise ``WorkerPythonError`` if it cannot
    import finchmq (or cannot run at all). A classic session runs it as an RDD task; a Spark
    Connect session, which has no RDD API, as a Python UDF on the server's workers."""
    probe = _local_probe()
    try:
        try:
            context = spark.sparkContext
        except Exception:  # Spark Connect
            results = _run_as_udf(spark, probe)
        else:
            results = context.parallelize([0], 1).mapPartitions(lambda _: iter([probe()])).collect()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WorkerPythonError(_advice(f"the probe task failed: {first[:300]}")) from exc
    for importable, executable in results:
        if not importable:
            raise WorkerPythonError(_advice(f"the worker runs {executable}"))


def _local_probe() -> Callable[[], tuple[bool, str]]:
    # A local function: cloudpickle ships it by value, so the worker need not import finchmq to
    # run it (a module-level one would be pickled by reference, as finchmq.spark.workers).
    def probe() -> tuple[bool, str]:
        import importlib.util  # noqa: PLC0415
        import sys  # noqa: PLC0415

        return importlib.util.find_spec("finchmq") is not None, sys.executable

    return probe


def _run_as_udf(spark: Any, probe: Callable[[], tuple[bool, str]]) -> list[tuple[bool, str]]:
    from pyspark.sql.functions import udf  # noqa: PLC0415

    def as_text() -> str:
        importable, executable = probe()
        return ("1" if importable else "0") + executable

    [row] = spark.range(1).select(udf(as_text, "string")().alias("probe")).collect()
    return [(row.probe[0] == "1", row.probe[1:])]
