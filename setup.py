"""The optional compiled build: mypyc turns finchmq's hot modules into C extensions.

pyproject.toml holds the metadata; this file only adds the extension modules. The pure-Python
package is always the fallback, never a failure (see docs/compiled.md):

- ``FINCHMQ_PURE=1``, an editable install (``pip install -e .``, whose extensions would land in
  ``src/`` and shadow the ``.py`` files being edited), or no mypyc: no extensions.
- mypyc or the C compiler fails: a message, then the pure package (every compiled module has its
  ``.py`` next to it, so nothing is missing).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The send path's modules (docs/compiled.md says why these). Each is compiled with the others:
# calls between them are native calls.
COMPILED = [
    "protocol/command.py",
    "protocol/codec.py",
    "protocol/message.py",
    "remoting/connection.py",
    "remoting/processor.py",
    "store/commit_log.py",
    "store/mapped_file.py",
    "store/consume_queue.py",
    "store/dispatch.py",
    "store/message_store.py",
    "store/inner.py",
    "broker/put_service.py",
    "broker/processor/send.py",
    "broker/processor/pull.py",
    "client/producer.py",
    "client/api.py",
]


def _say(message: str) -> None:
    print(f"finchmq: {message}", file=sys.stderr, flush=True)


def _wanted() -> bool:
    if os.environ.get("FINCHMQ_PURE", "") not in ("", "0"):
        _say("FINCHMQ_PURE is set: building the pure-Python package")
        return False
    if any(arg in ("editable_wheel", "develop") for arg in sys.argv):
        _say("editable install: pure Python (compiled modules in src/ would shadow the .py files)")
        return False
    return True


def _ext_modules() -> list[Any]:
    if not _wanted():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _say("mypyc is not installed: building the pure-Python package")
        return []
    # Errors in the modules they import (not compiled) are mypy's business in `make typecheck`.
    paths = ["--follow-imports=silent", *(os.path.join("src", "finchmq", path) for path in COMPILED)]
    try:
        return list(mypycify(paths, opt_level="3", debug_level="0", group_name="finchmq"))
    except BaseException as exc:  # mypyc reports type errors by SystemExit
        _say(f"mypyc could not compile the hot modules ({exc!r}): building the pure-Python package")
        return []


class OptionalBuildExt(build_ext):
    """``build_ext`` that falls back to the pure package when the C compiler fails."""

    def run(self) -> None:
        try:
            super().run()
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._drop_outputs()
            _say(f"compiling the C extensions failed ({exc!r}): installing the pure-Python package")

    def _drop_outputs(self) -> None:
        # A half-built set is worse than none: the modules' shims need their shared library.
        for path in self.get_outputs():
            if os.path.exists(path):
                os.remove(path)
        self.extensions = []


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
