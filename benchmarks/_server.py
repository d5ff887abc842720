"""Benchmarks start their servers with ``finchmq.testing.process``; ``ROOT`` is the checkout."""

from __future__ import annotations

from pathlib import Path

from finchmq.testing.process import ChildServer, ServerProcess, cpu_seconds, free_port, rss_mib

__all__ = ["ROOT", "ChildServer", "ServerProcess", "cpu_seconds", "free_port", "rss_mib"]

ROOT = Path(__file__).resolve().parents[1]
