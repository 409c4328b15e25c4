"""``make run`` installs the package alone; ``make test`` (and ``make venv``) every extra.

``make run`` used to build the full 1.2 GB venv (dev tools, pyspark, aiohttp) for a demo
that needs none of them. ``make -n`` prints what each target would run, in a fresh venv
directory, without running it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dry_run(target: str, venv: Path) -> list[str]:
    make = shutil.which("make")
    if make is None:  # pragma: no cover - make is part of the toolchain here
        pytest.fail("make is not on PATH")
    proc = subprocess.run([make, "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def pip_installs(lines: list[str]) -> list[str]:
    return [ln for ln in lines if "/bin/pip install" in ln and "--upgrade pip" not in ln]


def test_make_run_installs_no_extra(tmp_path: Path) -> None:
    lines = dry_run("run", tmp_path / "v")
    installs = pip_installs(lines)
    assert installs == [f"{tmp_path / 'v'}/bin/pip install -q -e ."], lines
    assert any("examples.quickstart" in ln for ln in lines), lines


def test_make_test_installs_every_extra(tmp_path: Path) -> None:
    installs = pip_installs(dry_run("test", tmp_path / "v"))
    assert any(ln.endswith("install -q -e '.[dev,spark,dashboard]'") for ln in installs), installs
    installs = pip_installs(dry_run("venv", tmp_path / "v"))
    assert any("[dev,spark,dashboard]" in ln for ln in installs), installs
