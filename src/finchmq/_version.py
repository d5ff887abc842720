"""The distribution's version, in the one module every part of finchmq may import for it.

``finchmq.__version__`` re-exports it; the client reports it to brokers (``PROP_CLIENT_VERSION``)
and the command line prints it, without importing the package face ``finchmq``.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
