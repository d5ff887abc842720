"""Log lines that repeat per request (a full disk, a failing store, flow control) are rate
limited: the first one of a kind is written at once, the next ones are counted and summed up in
one line at most every ``interval`` seconds. A flood of refused requests costs a few lines, and
nothing is hidden: each line says how many it stands for."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """``log(level, kind, message, *args)``: at most one line per ``kind`` every ``interval`` s.

    Thread-safe (the store logs from its threads). A line written after suppressed ones ends with
    ``(+N similar in the last Ts)``.
    """

    def __init__(self, logger: logging.Logger, interval: float = 5.0) -> None:
        self.logger = logger
        self.interval = interval
        self._lock = threading.Lock()
        self._logged_at: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def log(
        self, level: int, kind: str, message: str, *args: object, exc_info: BaseException | None = None
    ) -> bool:
        """Write the line now or count it; returns True when it was written."""
        now = time.monotonic()
        with self._lock:
            last = self._logged_at.get(kind)
            if last is not None and now - last < self.interval:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return False
            suppressed = self._suppressed.pop(kind, 0)
            self._logged_at[kind] = now
        if suppressed:
            message = f"{message} (+{suppressed} similar in the last {now - (last or now):.0f}s)"
        self.logger.log(level, message, *args, exc_info=exc_info)
        return True

    def error(self, kind: str, message: str, *args: object) -> bool:
        return self.log(logging.ERROR, kind, message, *args)

    def warning(self, kind: str, message: str, *args: object) -> bool:
        return self.log(logging.WARNING, kind, message, *args)
