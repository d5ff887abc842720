"""Prometheus metrics, hand-written: cheap histograms for hot paths and a text-format writer.

Strategy:
    Hot paths only add to plain numbers (a ``dict`` counter, a ``Histogram``'s bucket list);
    everything else, gauges included, is read from existing state when ``/metrics`` is scraped
    and written by ``Exposition`` in the Prometheus text format 0.0.4. Measured against
    ``prometheus_client`` 0.26 on this code base's hardware: ``labels(...).inc()`` 1.3 us and
    ``labels(...).observe()`` 1.6 us per call, against 60 ns for a dict counter and 0.2 us for
    ``Histogram.observe``; hence no dependency. Samples of one family from several collectors
    (the broker's and the name server's in one process) are merged under one ``# TYPE`` line.

Threading: ``Histogram.observe`` may run on a store thread while a scrape reads it on the
event loop; each update is a few GIL-atomic list operations, so a scrape sees a count and a sum
at most one observation apart, which Prometheus tolerates.
"""

from __future__ import annotations

import enum
import math
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Mapping, Sequence

__all__ = [
    "CONTENT_TYPE",
    "Exposition",
    "Histogram",
    "HistogramSet",
    "MetricFamily",
    "MetricsExporterType",
    "format_value",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = Mapping[str, str]


class MetricsExporterType(enum.Enum):
    """Java 5.x ``MetricsExporterType`` (``metricsExporterType``); finchmq serves DISABLE and
    PROM (docs/metrics.md)."""

    DISABLE = 0
    OTLP_GRPC = 1
    PROM = 2
    LOG = 3


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it: integers without a point, ``+Inf``, ``NaN``."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items()) + "}"


class Histogram:
    """Cumulative-on-read histogram: ``counts[i]`` observations ``<= bounds[i]`` (and above the
    previous bound), the last slot for ``+Inf``; plus the sum. ``observe`` is one bisect."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Counts ``<= bound`` for every bound and ``+Inf``, as the ``_bucket`` samples need."""
        out = []
        running = 0
        for c in self.counts:
            running += c
            out.append(running)
        return out

    def count_between(self, low: float, high: float) -> int:
        """Observations in ``(low, high]``; ``low``/``high`` must be bounds (or +-inf)."""
        total = 0
        previous = -math.inf
        for bound, c in zip((*self.bounds, math.inf), self.counts, strict=True):
            if previous >= low and bound <= high:
                total += c
            previous = bound
        return total


class HistogramSet:
    """Histograms by a key (a label value, or a tuple of them), made on first use."""

    __slots__ = ("bounds", "by_key")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.by_key: dict[Hashable, Histogram] = {}

    def observe(self, key: Hashable, value: float) -> None:
        histogram = self.by_key.get(key)
        if histogram is None:
            histogram = self.by_key[key] = Histogram(self.bounds)
        histogram.counts[bisect_left(self.bounds, value)] += 1  # Histogram.observe, inlined: hot path
        histogram.sum += value


Sample = tuple[Labels, float]


class MetricFamily:
    """One family as collected: its name, kind (``gauge``, ``counter`` or ``histogram``), help,
    and samples (labels with a number, or with a ``Histogram`` for a histogram family). The
    Prometheus text and the OTLP export are both written from these."""

    __slots__ = ("help", "kind", "name", "samples")

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text
        self.samples: list[tuple[Labels, float | Histogram]] = []


class Exposition:
    """Collects metric families and writes the text format. ``common`` labels (cluster,
    node_type, node_id ...) go first on every sample; a family named twice (by two collectors)
    keeps one header and all samples, so the output never repeats a ``# TYPE`` line.
    ``families()`` gives the collection to other exporters (finchmq.common.otlp)."""

    def __init__(self) -> None:
        self._families: dict[str, MetricFamily] = {}

    def _family(self, name: str, kind: str, help_text: str) -> MetricFamily:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = MetricFamily(name, kind, help_text)
        elif family.kind != kind:
            raise ValueError(f"metric {name} written as {family.kind} and as {kind}")
        return family

    def families(self) -> list[MetricFamily]:
        """The families collected so far, in the order they were first written."""
        return list(self._families.values())

    def declare(self, name: str, kind: str, help_text: str) -> None:
        """Write the family's header even when it has no samples yet (so it is discoverable)."""
        self._family(name, kind, help_text)

    def gauge(self, name: str, help_text: str, value: float, labels: Labels | None = None) -> None:
        self._family(name, "gauge", help_text).samples.append((labels or {}, value))

    def gauges(self, name: str, help_text: str, samples: Iterable[Sample]) -> None:
        self._family(name, "gauge", help_text).samples.extend(samples)

    def counter(self, name: str, help_text: str, value: float, labels: Labels | None = None) -> None:
        """``name`` must end in ``_total``; in the 0.0.4 text format the ``# TYPE`` line names
        the family with it, as Prometheus' own clients write it."""
        self.counters(name, help_text, [(labels or {}, value)])

    def counters(self, name: str, help_text: str, samples: Iterable[Sample]) -> None:
        if not name.endswith("_total"):
            raise ValueError(f"counter {name} must end in _total")
        self._family(name, "counter", help_text).samples.extend(samples)

    def histogram(
        self, name: str, help_text: str, histogram: Histogram, labels: Labels | None = None
    ) -> None:
        self.histograms(name, help_text, [(labels or {}, histogram)])

    def histograms(self, name: str, help_text: str, samples: Iterable[tuple[Labels, Histogram]]) -> None:
        self._family(name, "histogram", help_text).samples.extend(samples)

    def render(self) -> bytes:
        """The Prometheus text format 0.0.4."""
        out: list[str] = []
        for family in self._families.values():
            name = family.name
            out.append(f"# HELP {name} {_escape_help(family.help)}")
            out.append(f"# TYPE {name} {family.kind}")
            for labels, value in family.samples:
                if isinstance(value, Histogram):
                    counts = value.cumulative()
                    base = _label_text(labels)
                    prefix = base[:-1] + "," if base else "{"
                    for bound, count in zip((*value.bounds, math.inf), counts, strict=True):
                        out.append(f'{name}_bucket{prefix}le="{format_value(float(bound))}"}} {count}')
                    out.append(f"{name}_sum{base} {format_value(value.sum)}")
                    out.append(f"{name}_count{base} {counts[-1]}")
                else:
                    out.append(f"{name}{_label_text(labels)} {format_value(value)}")
        out.append("")
        return "\n".join(out).encode()
