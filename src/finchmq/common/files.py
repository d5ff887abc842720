"""Config files written so that a crash never leaves a torn or empty file behind.

Strategy (Java ``MixAll.string2File``, made crash-safe): write ``<name>.tmp``, fsync it, keep the
current file as ``<name>.bak``, rename the temp file over the original and fsync the directory.
Reading falls back to the ``.bak`` copy when the main file is missing or unreadable, as Java's
``ConfigManager.load`` does.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["read_config_file", "write_atomically"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def write_atomically(path: Path, data: bytes, *, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; the previous content stays in ``path.bak``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if keep_backup and path.exists():
        bak = path.with_name(path.name + ".bak")
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, bak)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def read_config_file(path: Path, parse: Callable[[bytes], _T]) -> _T | None:
    """Parse ``path``, or its ``.bak`` copy if the main file is missing or does not parse.

    Returns None when neither exists. Raises the parser's error when both exist and are bad.
    """
    bak = path.with_name(path.name + ".bak")
    error: Exception | None = None
    for candidate in (path, bak):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        try:
            value = parse(data)
        except Exception as exc:
            log.warning("config file %s is unreadable (%s); trying its backup", candidate, exc)
            error = exc
            continue
        if candidate is bak:
            log.warning("loaded %s from its backup %s", path, bak)
        return value
    if error is not None:
        raise error
    return None
