"""The command line: help, version, argument errors, and the demo really running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from finchmq import __version__
from finchmq.cli.__main__ import main


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "RocketMQ" in out and "demo" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert __version__ in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: finchmq" in capsys.readouterr().out


def test_bad_argument_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--events", "many"])
    assert info.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


def test_demo_help_documents_its_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    """The main job itself runs in tests/cli/test_demo.py (it needs Spark)."""
    with pytest.raises(SystemExit) as info:
        main(["demo", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--events", "--rate", "--output-dir", "--minutes"):
        assert option in out
    assert "Spark Structured Streaming" in out


def test_help_names_the_rocketmq_equivalents(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for equivalent in ("mqnamesrv", "mqbroker", "mqadmin", "producer.sh", "finchmq completion bash"):
        assert equivalent in out


def test_shell_completion_completes_mqadmin_commands(tmp_path: Path) -> None:
    script = subprocess.run(
        [sys.executable, "-m", "finchmq.cli", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "complete" in script and "finchmq" in script
    out = tmp_path / "completions"
    line = "finchmq admin updateS"
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
           "_ARGCOMPLETE_STDOUT_FILENAME": str(out)}  # fmt: skip
    subprocess.run([sys.executable, "-m", "finchmq.cli"], env=env, check=True, capture_output=True)
    assert out.read_text().replace("\v", " ").split() == ["updateSubGroup"]
