"""Build hooks: the RocketMQ 5.x ``.proto`` files compiled to Python, and the optional compiled
(Cython) twins of finchmq's hottest pure functions (issue 29).

Everything else is declared in pyproject.toml.

- ``build_py`` runs for wheels, sdists' builds and editable installs alike (setuptools runs it in
  editable mode too), so ``pip install`` (and the Makefile's ``pip install -e``) always leaves
  ``finchmq/grpc/_pb/*_pb2.py`` and their ``.pyi`` stubs next to the ``.proto`` sources. The
  generated files are not committed.
- ``build_ext`` builds each ``.pyx`` listed in ``EXTENSIONS`` into an extension module beside the
  pure module it speeds up, where Cython, a C compiler and Python's headers are present. Where any
  of them is missing, or ``FINCHMQ_NO_EXTENSIONS`` is set, it installs the pure package with a
  one-line warning instead of failing (as aiohttp, yarl and frozenlist do). The pure package is
  complete either way; at run time ``finchmq.protocol._compiled`` chooses (and
  ``FINCHMQ_NO_EXTENSIONS=1`` forces the pure path).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

SRC = Path(__file__).parent / "src"
PROTO_DIR = SRC / "finchmq" / "grpc" / "_pb"

# One entry per compiled twin: module name -> its .pyx, beside the pure module it accelerates.
EXTENSIONS = {
    "finchmq.protocol._codec_c": "src/finchmq/protocol/_codec_c.pyx",
    "finchmq.protocol._headers_c": "src/finchmq/protocol/_headers_c.pyx",
    "finchmq.protocol._message_c": "src/finchmq/protocol/_message_c.pyx",
    "finchmq.protocol._stored_c": "src/finchmq/protocol/_stored_c.pyx",
}


def compile_protos() -> None:
    from grpc_tools import protoc  # build requirement (pyproject.toml [build-system])

    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    sources = sorted(str(p.relative_to(SRC)) for p in PROTO_DIR.glob("*.proto"))
    args = ["protoc", f"-I{SRC}", f"-I{include}", f"--python_out={SRC}"]
    plugin = shutil.which("protoc-gen-mypy") or str(Path(sys.executable).parent / "protoc-gen-mypy")
    if Path(plugin).exists():
        args += [f"--plugin=protoc-gen-mypy={plugin}", f"--mypy_out={SRC}"]
    if protoc.main([*args, *sources]) != 0:
        raise SystemExit(f"protoc failed on {sources}")


class BuildPyWithProtos(build_py):
    def run(self) -> None:
        compile_protos()
        super().run()


def _warn(what: str) -> None:
    print(f"finchmq: {what}; installing the pure-Python package (slower, same behaviour)", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """``build_ext`` that falls back to the pure package instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no headers: all mean "pure"
            _warn(f"the C extensions could not be built ({exc})")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _warn(f"{ext.name} could not be built ({exc})")


def _extensions() -> list[Extension]:
    if os.environ.get("FINCHMQ_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize  # noqa: PLC0415 - optional: its absence means "pure"
    except ImportError:
        _warn("Cython is not installed")
        return []
    modules = [Extension(name, [source], extra_compile_args=["-O2"]) for name, source in EXTENSIONS.items()]
    try:
        return list(cythonize(modules, language_level=3, quiet=True))
    except Exception as exc:  # a Cython error must not block the pure install
        _warn(f"Cython could not translate the extensions ({exc})")
        return []


setup(ext_modules=_extensions(), cmdclass={"build_py": BuildPyWithProtos, "build_ext": OptionalBuildExt})
