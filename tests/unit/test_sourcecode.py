"""Lint and types are tests (docs/STYLE.md 7; asyncpg tests/test__sourcecode.py).

Runs the venv's ``ruff check`` and ``mypy`` over the code base, configured by
pyproject.toml, and fails with their output. mypy keeps its cache in ``.mypy_cache``, so
only the first run after a change to many modules is slow.

And the documents the code cites: every ``*.md`` path a tracked file names exists in the
repository (nothing outside it, which a clone would not have), and
every ``PROTOCOL.md N.M`` / ``STYLE.md N`` citation names a section those files have.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
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


# -- the documents the code cites ---------------------------------------------------------

# Text a citation can hide in; captured data (tests/data) and vendored packages are not ours.
_TEXT_SUFFIXES = {".py", ".pyi", ".c", ".h", ".md", ".toml", ".cfg", ".ini", ".txt", ".java",
                  ".js", ".yml", ".yaml", ".sh", ".xml"}
_TEXT_NAMES = {"Makefile", "Dockerfile", "run"}
_NOT_OURS = ("tests/data/", "tests/interop/node_modules/")
_DOC_PATH = re.compile(r"(?<![\w./-])((?:\.\./|\./)*(?:[\w.-]+/)*[\w-][\w.-]*\.md)\b")
_OUTSIDE = re.compile(r"\.\./shared\b")
# "PROTOCOL.md 6.5", "PROTOCOL.md 4.3, 4.4, 6.8", "PROTOCOL.md 4.7-4.9", across one line break
_SECTIONS = r"[ \t]*(?:\n[ \t]*[#*]?[ \t]*)?((?:\d+(?:\.\d+)?)(?:(?:, |-)\d+(?:\.\d+)?)*)"
_CITED = {"PROTOCOL.md": re.compile(r"PROTOCOL\.md" + _SECTIONS),
          "STYLE.md": re.compile(r"STYLE\.md" + _SECTIONS)}
_HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", re.MULTILINE)


def _tracked_text() -> Iterator[tuple[str, str]]:
    proc = run("git", "ls-files", "-z")
    if proc.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {proc.stderr}", pytrace=False)
    for name in proc.stdout.split("\0"):
        path = ROOT / name
        if (not name or name.startswith(_NOT_OURS) or path.is_symlink() or not path.is_file()
                or (path.suffix not in _TEXT_SUFFIXES and path.name not in _TEXT_NAMES)):
            continue
        yield name, path.read_text(encoding="utf-8", errors="replace")


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def test_cited_documents_are_in_the_repository() -> None:
    problems = []
    for name, text in _tracked_text():
        here = (ROOT / name).parent
        for m in _OUTSIDE.finditer(text):
            problems.append(f"{name}:{_line(text, m.start())}: cites {m.group(0)}, outside the "
                            "repository (write the fact into docs/ and cite that)")
        for m in _DOC_PATH.finditer(text):
            cited = m.group(1)
            candidates = [here / cited, ROOT / cited]
            if "/" not in cited:
                candidates.append(ROOT / "docs" / cited)
            if not any(c.resolve().is_relative_to(ROOT) and c.is_file() for c in candidates):
                problems.append(f"{name}:{_line(text, m.start())}: cites {cited}, "
                                "which is not in the repository")
    assert not problems, "\n".join(problems)


def test_cited_sections_exist() -> None:
    sections = {doc: set(_HEADING.findall((ROOT / "docs" / doc).read_text(encoding="utf-8")))
                for doc in _CITED}
    assert {"1", "2.6", "6.5", "7.11", "13.4"} <= sections["PROTOCOL.md"]
    assert {"3", "7"} <= sections["STYLE.md"]
    problems = []
    for name, text in _tracked_text():
        for doc, pattern in _CITED.items():
            for m in pattern.finditer(text):
                for number in re.findall(r"\d+(?:\.\d+)?", m.group(1)):
                    if number not in sections[doc]:
                        problems.append(f"{name}:{_line(text, m.start())}: {doc} has no "
                                        f"section {number} (cited as {m.group(0).strip()!r})")
    assert not problems, "\n".join(problems)


# Which top-level parts each part may import (docs/ARCHITECTURE.md "Layers"): protocol/ is the
# floor, server/ and client/ stand on it side by side, spark_sink/ uses the client.
_MAY_IMPORT = {
    "protocol": {"protocol"},
    "server": {"protocol", "server"},
    "client": {"protocol", "client"},
    "spark_sink": {"protocol", "client", "spark_sink"},
}


def _imported_parts(path: Path, part: str) -> Iterator[tuple[int, str]]:
    """(line, top-level part) of every aiorocketmq import in one module, relative ones too."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    depth_of_file = len(path.relative_to(ROOT / part).parts) - 1  # folders below the part
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = node.level - 1
                if up > depth_of_file:  # climbs out of the part: aiorocketmq.<module>
                    names = [f"aiorocketmq.{node.module or ''}"]
                else:
                    names = [f"aiorocketmq.{part}"]
            elif node.module:
                names = [node.module]
        for name in names:
            bits = name.split(".")
            if bits[0] == "aiorocketmq" and len(bits) > 1 and bits[1] in _MAY_IMPORT:
                yield node.lineno, bits[1]
            elif bits[0] in _MAY_IMPORT and bits[0] != part and not name.startswith("pyspark"):
                yield node.lineno, bits[0]


def test_layers_point_one_way() -> None:
    wrong = []
    for part, allowed in _MAY_IMPORT.items():
        for path in sorted((ROOT / part).rglob("*.py")):
            for line, target in _imported_parts(path, part):
                if target not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}/")
    assert not wrong, "imports that point up or across the layers:\n" + "\n".join(wrong)
