"""The README's 5.x quick start, run as it is written (its endpoint pointed at the test server)
under the official SDK's venv: what it sends, it receives."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

from finchmq.testing import EmbeddedServer
from tests.client.conftest import create_topic

from .conftest import ROOT, v5_python


def quick_start_code() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### 5.x quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "README: no python block in '5.x quick start'"
    return match.group(1)


def test_the_readme_quick_start_sends_and_receives(grpc_server: EmbeddedServer, tmp_path: Path) -> None:
    asyncio.run(create_topic(grpc_server.namesrv_addr, "orders"))
    code = quick_start_code()
    assert '"127.0.0.1:8081"' in code
    script = tmp_path / "quick_start.py"
    script.write_text(code.replace('"127.0.0.1:8081"', f'"127.0.0.1:{grpc_server.grpc_port}"'))
    out = subprocess.run(
        [str(v5_python()), str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert any(line.startswith("sent ") and len(line) > len("sent ") for line in lines), out.stdout
    assert "received b'order-1'" in lines, out.stdout
