"""``Sampler``: the console's own figures over the last hour, for its charts.

Every ``interval`` seconds (10 by default) it reads each broker's message counters
(``msgPutTotalTodayNow``/``msgGetTotalTodayNow``, cumulative since the broker started) and each
consumer group's lag and consume TPS (``consumerProgress``), and keeps them in memory, in a ring
that holds ``window`` seconds (an hour), and, given a ``history`` (``history.SampleFile``), on
disk too, so a restarted console starts with the samples of the window before. A broker's TPS is
the counters' growth between two samples divided by the time between them, so it needs no
history on the broker's side (the first sample after a restart has none).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from finchmq.client import AdminClient, MQClientError, NoRouteError
from finchmq.common.tasks import BackgroundTasks
from finchmq.protocol.topics import is_system_group

__all__ = ["Sample", "Sampler"]

log = logging.getLogger(__name__)

_GROUP_CONCURRENCY = 8


class SampleFile(Protocol):
    """Where a ``Sampler`` keeps its samples across restarts: ``history.SampleFile``."""

    path: Path
    disabled: str | None

    def open(self, since: float, keep: int) -> list[Sample]: ...

    def append(self, sample: Sample, ring: Iterable[Sample], keep: int) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Sample:
    """One round: epoch seconds; per broker (in, out) TPS (None on the first round or after a
    broker restart); per group (lag, consume TPS)."""

    time: float
    brokers: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    groups: dict[str, tuple[int, float]] = field(default_factory=dict)


class Sampler:
    """Samples the cluster every ``interval`` seconds once ``start``-ed; ``close`` stops it."""

    def __init__(
        self,
        admin: AdminClient,
        *,
        interval: float = 10.0,
        window: float = 3600.0,
        history: SampleFile | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval}")
        self.admin = admin
        self.interval = interval
        self.window = window
        self.history = history
        self.samples: deque[Sample] = deque(maxlen=max(int(window / interval), 2))
        self.last_error: str | None = None
        self._counters: dict[str, tuple[float, int, int]] = {}  # broker -> (time, put, get)
        self._tasks = BackgroundTasks("console-sampler")
        self._started = False

    async def restore(self) -> None:
        """Read the samples of the last ``window`` back from the ``history`` file (if any)."""
        if self.history is not None:
            keep = self.samples.maxlen or 0
            kept = await asyncio.to_thread(self.history.open, time.time() - self.window, keep)
            self.samples.extend(kept)

    def start(self) -> None:
        """Sample now and then every ``interval`` seconds, until ``close``."""
        if not self._started:
            self._started = True
            self._tasks.every(self.interval * 1000, self._round, "sample")

    async def close(self) -> None:
        await self._tasks.close()
        if self.history is not None:
            await asyncio.to_thread(self.history.close)

    async def _round(self) -> None:
        try:
            await self.sample_once()
            self.last_error = None
        except (MQClientError, TimeoutError, OSError) as exc:  # shown with the charts
            self.last_error = str(exc) or type(exc).__name__
            log.info("console sampling failed: %s", self.last_error)

    async def sample_once(self) -> Sample:
        """Take one sample now and keep it."""
        brokers = await self._sample_brokers()
        groups = await self._sample_groups()
        sample = Sample(time=time.time(), brokers=brokers, groups=groups)
        self.samples.append(sample)
        if self.history is not None:
            try:
                ring, keep = list(self.samples), self.samples.maxlen or 0
                await asyncio.to_thread(self.history.append, sample, ring, keep)
            except OSError as exc:  # a full disk: the charts go on from memory
                log.warning("console: cannot keep a sample in %s: %s", self.history.path, exc)
        return sample

    async def _sample_brokers(self) -> dict[str, tuple[float | None, float | None]]:
        out: dict[str, tuple[float | None, float | None]] = {}
        now = time.monotonic()
        for broker in await self.admin.cluster_brokers():
            key = broker.broker_name if broker.broker_id == 0 else f"{broker.broker_name}#{broker.broker_id}"
            try:
                put = int(broker.stats["msgPutTotalTodayNow"])
                get = int(broker.stats["msgGetTotalTodayNow"])
            except (KeyError, ValueError):
                continue  # did not answer this round
            previous = self._counters.get(key)
            self._counters[key] = (now, put, get)
            if previous is None or now <= previous[0] or put < previous[1] or get < previous[2]:
                out[key] = (None, None)
                continue
            elapsed = now - previous[0]
            out[key] = ((put - previous[1]) / elapsed, (get - previous[2]) / elapsed)
        return out

    async def _sample_groups(self) -> dict[str, tuple[int, float]]:
        groups = [g for g in await self.admin.subscription_groups() if not is_system_group(g)]
        limit = asyncio.Semaphore(_GROUP_CONCURRENCY)
        out: dict[str, tuple[int, float]] = {}

        async def one(group: str) -> None:
            async with limit:
                try:
                    stats = await self.admin.consume_stats(group)
                except NoRouteError:
                    return  # never consumed: no retry topic, no figures
                except (MQClientError, TimeoutError) as exc:
                    log.debug("console sampling of %s failed: %s", group, exc)
                    return
                out[group] = (stats.compute_total_diff(), stats.consume_tps)

        await asyncio.gather(*(one(g) for g in groups))
        return out

    # -- series for the charts ----------------------------------------------------------------------

    def broker_series(self) -> dict[str, Any]:
        """``{"time": [...], "series": {"<broker> in": [...], "<broker> out": [...]}}`` aligned
        on the samples (None where a broker had no figure)."""
        samples = list(self.samples)
        names = sorted({name for s in samples for name in s.brokers})
        series: dict[str, list[float | None]] = {}
        for name in names:
            series[f"{name} in"] = [s.brokers.get(name, (None, None))[0] for s in samples]
            series[f"{name} out"] = [s.brokers.get(name, (None, None))[1] for s in samples]
        return {"time": [s.time for s in samples], "series": series, **self._meta()}

    def group_series(self, group: str) -> dict[str, Any]:
        """``{"time": [...], "series": {"lag": [...], "consumeTps": [...]}}`` of one group."""
        samples = list(self.samples)
        lag = [s.groups[group][0] if group in s.groups else None for s in samples]
        tps = [s.groups[group][1] if group in s.groups else None for s in samples]
        return {
            "time": [s.time for s in samples],
            "series": {"lag": lag, "consumeTps": tps},
            **self._meta(),
        }

    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"interval": self.interval, "lastError": self.last_error}
        if self.history is not None:  # where the samples are kept, or why they are not
            meta["historyFile"] = None if self.history.disabled else str(self.history.path)
            meta["historyError"] = self.history.disabled
        return meta
