"""``SampleFile``: the sampler's samples on disk, so a restarted console draws the hour before.

Strategy: one append-only file, ``samples.jsonl`` in the console's data directory, a JSON
object a line (``{"t": epoch s, "b": {broker: [in, out]}, "g": {group: [lag, tps]}}``), each
line written whole and flushed as the sampler takes it. It is bounded two ways: lines older than
the sampler's window are dropped when the file is read, and once the file holds twice the
samples the window keeps, or grows past ``max_bytes``, it is rewritten (atomically, through a
temporary file) with the newest samples that fit in half of ``max_bytes``. A file cut short by a
crash, or with a line that does not parse, is read up to the first bad line: that line and what
follows are dropped (the file is truncated there), with one warning in the log. An exclusive
``flock`` keeps a second console from writing the same file; that console keeps its samples in
memory only, and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from finchmq.common.files import write_atomically

from .sampler import Sample

__all__ = ["DEFAULT_MAX_BYTES", "FILE_NAME", "SampleFile"]

log = logging.getLogger(__name__)

FILE_NAME = "samples.jsonl"
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


def _line(sample: Sample) -> bytes:
    tree = {
        "t": sample.time,
        "b": {name: list(rates) for name, rates in sample.brokers.items()},
        "g": {name: list(figures) for name, figures in sample.groups.items()},
    }
    return json.dumps(tree, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _sample(line: bytes) -> Sample:
    """The sample of one line; ``ValueError`` (or ``KeyError``/``TypeError``) if it is not one."""
    tree = json.loads(line)
    if not isinstance(tree, dict) or not isinstance(tree["b"], dict) or not isinstance(tree["g"], dict):
        raise ValueError("not a sample")
    moment = _number(tree["t"])
    if moment is None:
        raise ValueError("a sample without a time")
    brokers = {str(k): (_number(v[0]), _number(v[1])) for k, v in tree["b"].items()}
    groups: dict[str, tuple[int, float]] = {}
    for k, v in tree["g"].items():
        lag, tps = _number(v[0]), _number(v[1])
        if lag is None or tps is None:
            raise ValueError("a group without figures")
        groups[str(k)] = (int(lag), tps)
    return Sample(time=moment, brokers=brokers, groups=groups)


class SampleFile:
    """The samples file in ``directory`` (created if missing), at most ``max_bytes`` (about:
    the file is compacted when it passes the bound). Blocking: the sampler calls it off the
    event loop. ``open`` returns the samples kept; ``append`` adds one; ``close`` releases it."""

    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 4096:
            raise ValueError(f"max_bytes must be at least 4096, not {max_bytes}")
        self.path = directory / FILE_NAME
        self.max_bytes = max_bytes
        self._lock: IO[bytes] | None = None
        self._file: IO[bytes] | None = None
        self._lines = 0
        self._size = 0
        self.disabled: str | None = None  # why samples stay in memory only, if they do

    def open(self, since: float, keep: int) -> list[Sample]:
        """Lock the file, read the samples taken at or after ``since`` (epoch s), the newest
        ``keep`` of them, and get ready to append; ``[]`` (and ``disabled`` says why) when the
        directory cannot be used or another console has it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_name(FILE_NAME + ".lock"), "ab")  # noqa: SIM115  (held until close)
        except OSError as exc:
            return self._disable(f"cannot use {self.path.parent}: {exc.strerror}")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            return self._disable(f"another console keeps its samples in {self.path.parent}")
        self._lock = lock
        try:
            samples = self._read()
        except OSError as exc:
            self.close()
            return self._disable(f"cannot read {self.path}: {exc.strerror}")
        kept = [s for s in samples if s.time >= since][-keep:] if keep > 0 else []
        if len(kept) != len(samples):
            self._rewrite(kept)
        self._file = open(self.path, "ab")  # noqa: SIM115  (appended to until close)
        return kept

    def _disable(self, why: str) -> list[Sample]:
        self.disabled = why
        log.warning("console: the charts' samples stay in memory only (lost at a restart): %s", why)
        return []

    def _read(self) -> list[Sample]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        samples: list[Sample] = []
        good = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # cut short by a crash
            try:
                samples.append(_sample(line))
            except (ValueError, KeyError, TypeError, IndexError):
                break
            good += len(line)
        if good < len(data):
            log.warning(
                "console: %s is damaged at byte %d: the %d bytes from there are dropped (%d samples kept)",
                self.path, good, len(data) - good, len(samples),
            )  # fmt: skip
            with open(self.path, "r+b") as handle:
                handle.truncate(good)
        self._lines, self._size = len(samples), good
        return samples

    def _rewrite(self, samples: Iterable[Sample]) -> None:
        lines = [_line(s) for s in samples]
        size, start = 0, len(lines)
        while start > 0 and size + len(lines[start - 1]) <= self.max_bytes // 2:
            start -= 1
            size += len(lines[start])
        write_atomically(self.path, b"".join(lines[start:]), keep_backup=False)
        self._lines, self._size = len(lines) - start, size

    def append(self, sample: Sample, ring: Iterable[Sample], keep: int) -> None:
        """Add ``sample``; compact the file to the ``ring`` (the samples in memory, ``sample``
        the newest) when it holds more than twice ``keep`` samples or passes ``max_bytes``."""
        if self._file is None:
            return
        line = _line(sample)
        self._file.write(line)
        self._file.flush()
        self._lines += 1
        self._size += len(line)
        if self._lines > 2 * keep or self._size > self.max_bytes:
            self._file.close()
            self._rewrite(ring)
            self._file = open(self.path, "ab")  # noqa: SIM115  (appended to until close)

    def close(self) -> None:
        """Stop appending and release the lock (idempotent)."""
        for handle in (self._file, self._lock):
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()
        self._file = self._lock = None
