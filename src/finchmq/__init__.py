"""finchmq: a RocketMQ-compatible messaging system in Python.

The package root only names the version; the public client API lives in ``finchmq.client``
(and is re-exported here once it exists). See the README for the tour.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
