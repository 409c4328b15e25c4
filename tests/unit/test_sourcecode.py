"""Lint and types are tests (STYLE.md 7; asyncpg tests/test__sourcecode.py).

Runs the venv's ``ruff check`` and ``mypy`` over the code base, configured by
pyproject.toml, and fails with their output. mypy keeps its cache in ``.mypy_cache``, so
only the first run after a change to many modules is slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# aiorocketmq/ links to the package folders: ruff reads each folder once, by its own name;
# mypy reads the package by its import name, the way every module imports the others.
RUFF_PATHS = ("aiorocketmq/__init__.py", "aiorocketmq/logs.py", "protocol", "server", "client",
              "spark_sink", "bench", "tests", "examples")
MYPY_PATHS = ("aiorocketmq", "examples")

pytestmark = pytest.mark.timeout(600)


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():  # pragma: no cover - the dev extra installs both
        pytest.fail(f"{name} is not installed next to {sys.executable} (pip install -e .[dev])")
    return str(path)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=540,
                          env={**os.environ, "NO_COLOR": "1"})


def test_ruff() -> None:
    proc = run(tool("ruff"), "check", "--no-fix", *RUFF_PATHS)
    if proc.returncode != 0:
        pytest.fail(f"ruff check found problems:\n{proc.stdout}{proc.stderr}", pytrace=False)


def test_mypy() -> None:
    proc = run(tool("mypy"), *MYPY_PATHS)
    if proc.returncode != 0:
        pytest.fail(f"mypy found problems:\n{proc.stdout}{proc.stderr}", pytrace=False)
