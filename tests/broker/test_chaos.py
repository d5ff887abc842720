"""A few crash cycles of ``benchmarks/chaos.py`` in each flush mode (the benchmark runs hundreds):
SIGKILL ``finchmq server`` under the official C++ client's sync sends (auto-created and pre-created
topics) and a committing consumer, tear a state file now and then, restart on the same directory.
Nothing acknowledged SEND_OK may be lost or unroutable, and the consumer group may skip nothing."""

from __future__ import annotations

import pytest
from benchmarks.chaos import run_chaos

from tests.integration.conftest import cpp_python

# JVMs and process restarts: generous on a loaded 2-core machine (the default is 120 s)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_crash_cycles_lose_nothing_acknowledged(flush: str) -> None:
    cpp_python()  # fails with what to run when the C++ client is not installed
    result = run_chaos(4, flush, seed=11)
    assert result.cycles == 4
    assert result.acked > 0 and result.consumed > 0, result.line()
    assert result.ok, (
        f"{result.line()}: lost {result.lost[:5]}, unroutable {result.unroutable}, skipped {result.skipped[:5]}"
    )
