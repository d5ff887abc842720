"""Build hook: compile finchmq's RocketMQ 5.x ``.proto`` files to Python before packaging.

Everything else is declared in pyproject.toml. ``build_py`` runs for wheels, sdists' builds and
editable installs alike (setuptools runs it in editable mode too), so ``pip install`` (and the
Makefile's ``pip install -e``) always leaves ``finchmq/grpc/_pb/*_pb2.py`` and their ``.pyi`` stubs
next to the ``.proto`` sources. The generated files are not committed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SRC = Path(__file__).parent / "src"
PROTO_DIR = SRC / "finchmq" / "grpc" / "_pb"


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


setup(cmdclass={"build_py": BuildPyWithProtos})
