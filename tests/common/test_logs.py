"""``RateLimitedLog``: repeated per-request failures cost a few lines, each saying what it stands for."""

from __future__ import annotations

import logging

import pytest

from finchmq.common.logs import RateLimitedLog


def test_repeats_are_counted_into_the_next_line(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimitedLog(logging.getLogger("finchmq.test.limited"), interval=0.0)
    quiet = RateLimitedLog(logging.getLogger("finchmq.test.limited"), interval=3600)
    with caplog.at_level(logging.WARNING, logger="finchmq.test.limited"):
        assert quiet.error("disk", "put refused: %s", "disk full")
        assert not any(quiet.error("disk", "put refused: %s", "disk full") for _ in range(999))
        assert quiet.error("other", "another kind is not held back")
        assert limited.error("x", "first") and limited.error("x", "second")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["put refused: disk full", "another kind is not held back", "first", "second"]
    quiet.interval = 0.0
    with caplog.at_level(logging.WARNING, logger="finchmq.test.limited"):
        quiet.error("disk", "put refused")
    assert caplog.records[-1].getMessage().startswith("put refused (+999 similar in the last")
