"""Spark's Python workers must import finchmq: ``register`` checks it and, when they cannot, says
what to set instead of letting every read fail deep inside a Spark stack trace."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

import finchmq.spark

# JVMs and process restarts: generous on a loaded 2-core machine (the default is 120 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = """
import sys
from pyspark.sql import SparkSession
import finchmq.spark
spark = (SparkSession.builder.master("local[1]").config("spark.pyspark.python", sys.argv[1])
         .config("spark.ui.enabled", "false").config("spark.log.level", "ERROR").getOrCreate())
try:
    finchmq.spark.register(spark)
except finchmq.spark.WorkerPythonError as exc:
    print("WorkerPythonError:", exc)
else:
    print("registered")
spark.stop()
"""


def worker_python_without_finchmq(root: Path) -> Path:
    """A venv whose Python sees pyspark (this venv's site-packages, as a plain path) but not the
    editable finchmq install (its .pth hook is processed only in a real site directory)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next((root / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = root / "bin" / "python"
    probe = "import importlib.util as u; print(bool(u.find_spec('pyspark')), bool(u.find_spec('finchmq')))"
    assert subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True, env=_without_pythonpath()
    ).stdout.split() == [
        "True",
        "False",
    ]
    return python


def _without_pythonpath() -> dict[str, str]:
    """This environment but PYTHONPATH: a PYTHONPATH naming finchmq's tree (a checkout's src, the
    compiled build) would reach the workers too, and they would import finchmq after all."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


CONNECT_SCRIPT = """
from pyspark.sql import SparkSession
import finchmq.spark
spark = SparkSession.builder.remote("local[1]").getOrCreate()  # a Spark Connect server, local
try:
    finchmq.spark.register(spark)
except finchmq.spark.WorkerPythonError as exc:
    print("WorkerPythonError:", exc)
else:
    print("registered")
spark.stop()
"""


@pytest.mark.parametrize("script", [SCRIPT, CONNECT_SCRIPT], ids=["classic", "connect"])
def test_register_says_what_to_set_when_workers_lack_finchmq(tmp_path: Path, script: str) -> None:
    if script is CONNECT_SCRIPT:
        pytest.importorskip("grpc", reason="Spark Connect needs the connect extra")
    python = worker_python_without_finchmq(tmp_path / "bare")
    # SPARK_TESTING: a local Connect server takes a free port (not 15002), so two suites can run
    env = {
        **_without_pythonpath(),
        "PYSPARK_PYTHON": str(python),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_TESTING": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(python)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert "WorkerPythonError:" in done.stdout, done.stdout + done.stderr[-3000:]
    for advice in ("PYSPARK_PYTHON", "spark.pyspark.python", "spark.archives", str(python)):
        assert advice in done.stdout


def test_register_passes_when_workers_import_finchmq(spark: Any) -> None:
    finchmq.spark.register(spark)  # the suite's session runs workers on this interpreter
