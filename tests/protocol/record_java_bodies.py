"""Record the bodies Apache RocketMQ 4.9.8 writes (fastjson 1.2.69) for the golden tests.

Compiles ``tests/protocol/java/GoldenBodies.java`` against ``../shared/java-rocketmq`` and runs it;
it writes ``tests/protocol/data/java/bodies/<name>.json``, Java's exact bytes for each body
(default ``encode()`` form, and the BrowserCompatible route form as ``*.standard.json``).

    python tests/protocol/record_java_bodies.py [path/to/java-rocketmq]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def java_home(argv: list[str]) -> Path:
    if len(argv) > 1:
        return Path(argv[1])
    return Path(os.environ.get("FINCHMQ_JAVA_ROCKETMQ", REPO.parent / "shared" / "java-rocketmq"))


def main(argv: list[str]) -> int:
    home = java_home(argv)
    classpath_file = Path(os.environ.get("TMPDIR", "/tmp")) / "rocketmq-java.classpath"
    if not classpath_file.exists():
        subprocess.run([str(home / "setup.sh")], check=True)
    classpath = classpath_file.read_text().strip()
    with tempfile.TemporaryDirectory() as classes:
        subprocess.run(
            ["javac", "-cp", classpath, "-d", classes, str(HERE / "java" / "GoldenBodies.java")], check=True
        )
        out = HERE / "data" / "java" / "bodies"
        subprocess.run(["java", "-cp", f"{classpath}:{classes}", "GoldenBodies", str(out)], check=True)
    print(f"recorded {len(list(out.glob('*.json')))} bodies into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
