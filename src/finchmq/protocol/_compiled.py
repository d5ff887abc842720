"""The one switch between finchmq's pure-Python modules and their optional compiled (Cython) twins.

Some pure modules have a compiled twin beside them (``codec.py`` and ``_codec_c.pyx``), built by
``setup.py`` where a C compiler and Python's headers are present. A pure module asks ``load`` for
its twin once, at import, and binds the compiled functions in place of its own; the pure
functions stay the reference (the compiled ones hand anything unusual back to them, and the
differential tests demand the same bytes and errors from both).

``FINCHMQ_NO_EXTENSIONS`` set to anything but ``""`` selects the pure package even where the
extensions are built (as aiohttp's ``AIOHTTP_NO_EXTENSIONS``); so does a missing or stale build.
It lives in ``protocol`` because protocol is the bottom layer: every package may import it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Final

__all__ = ["NO_EXTENSIONS", "load", "loaded"]

NO_EXTENSIONS: Final = bool(os.environ.get("FINCHMQ_NO_EXTENSIONS"))

_loaded: dict[str, ModuleType] = {}


def load(name: str) -> ModuleType | None:
    """The compiled module ``name`` (``"finchmq.protocol._codec_c"``), or ``None`` when the pure
    package is selected or the extension is not built."""
    if NO_EXTENSIONS:
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    _loaded[name] = module
    return module


def loaded() -> list[str]:
    """The compiled modules in use in this process, for ``finchmq --version`` and the tests."""
    return sorted(_loaded)
