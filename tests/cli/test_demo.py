"""The main job (``finchmq demo``) end to end, small: its own server process, Spark, the push
consumer, and a summary that checks itself against the producer's totals and the Parquet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.timeout(400)


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "demo", "--events", "900", "--rate", "600", "--minutes", "3",
         "--output-dir", str(out)],
        capture_output=True, text=True, timeout=380, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    text = run.stdout
    for step in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert step in text
    assert "orders sent: 900/900 (100%)" in text
    windows = len(pq.read_table(out / "parquet").to_pylist())
    assert 18 >= windows >= 12  # 3 minutes x 6 categories (a rare category may skip a minute)
    assert f"check: {windows} (minute, category) windows from 900 orders sent; {windows} read back" in text
    assert "(all equal to the producer's totals)" in text and f"{windows} in Parquet (equal)" in text
    assert "the finchmq server has been stopped." in text
    assert "total" in text and "best minute" in text
    assert (out / "server.log").read_text().count("finchmq server shutting down") == 1
