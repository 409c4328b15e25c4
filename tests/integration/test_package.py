"""The distribution as a user installs it: one wheel, one top-level import name.

Builds the wheel from this checkout, installs it into a fresh venv outside the repository,
and checks that it exposes exactly ``aiorocketmq`` (an application's own ``client.py`` or
``server/`` can neither shadow us nor be shadowed), that the documented imports and the
console scripts work there, and that the old top-level names do not exist.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(600)


def run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                          timeout=540)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT, cwd=out)
    (whl,) = out.glob("aiorocketmq-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", home / "v", cwd=home)
    run(home / "v" / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
        wheel, cwd=home)
    return home / "v"


def test_wheel_has_one_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        declared = zf.read(top_level).decode().split()
        metadata = zf.read(top_level.replace("top_level.txt", "METADATA")).decode()
    assert top == {"aiorocketmq"}
    assert declared == ["aiorocketmq"]
    # Every part of the package is in the wheel as files, not as links to the checkout.
    for part in ("protocol", "server", "client", "spark_sink", "bench"):
        assert f"aiorocketmq/{part}/__init__.py" in names, part
    assert "aiorocketmq/server/broker/controller.py" in names
    assert "aiorocketmq/protocol/py.typed" in names
    assert "aiorocketmq/py.typed" in names  # PEP 561 for the whole package, not one part
    assert "License-Expression: Apache-2.0" in metadata
    # The C modules (setup.py) are compiled into the wheel (a C compiler is part of the
    # toolchain here), each with its type stub; the C sources are not shipped.
    for module in (
        "protocol/_message", "spark_sink/_records", "server/store/_units", "protocol/_command",
    ):
        assert any(n.startswith(f"aiorocketmq/{module}.") and n.endswith(".so")
                   for n in names), [n for n in names if module in n]
        assert f"aiorocketmq/{module}.pyi" in names
        assert f"aiorocketmq/{module}.c" not in names


def test_installed_package_imports_as_documented(venv: Path, tmp_path: Path) -> None:
    py = venv / "bin" / "python"
    code = (
        "import aiorocketmq, aiorocketmq.server.broker.controller, aiorocketmq.server.namesrv.main\n"
        "from aiorocketmq import Producer, PushConsumer, LitePullConsumer, Message\n"
        "from aiorocketmq.client import Producer as P\n"
        "assert Producer is P\n"
        "assert Message(topic='T', body=b'x').topic == 'T'\n"
        "import sys\n"
        "assert 'aiorocketmq.server' in sys.modules\n"
        "print(aiorocketmq.__file__)\n"
    )
    proc = run(py, "-c", code, cwd=tmp_path)
    assert str(venv) in proc.stdout, proc.stdout  # the installed copy, not the checkout


def test_the_top_level_names_load_on_first_use(venv: Path, tmp_path: Path) -> None:
    code = ("import sys, aiorocketmq\n"
            "print('aiorocketmq.client' in sys.modules)\n"
            "aiorocketmq.PushConsumer\n"
            "print('aiorocketmq.client' in sys.modules, 'PushConsumer' in dir(aiorocketmq))\n")
    proc = run(venv / "bin" / "python", "-c", code, cwd=tmp_path)
    assert proc.stdout.split() == ["False", "True", "True"]


@pytest.mark.parametrize("name", ["client", "server", "protocol", "spark_sink", "bench"])
def test_old_top_level_names_do_not_exist(venv: Path, tmp_path: Path, name: str) -> None:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {name}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"No module named '{name}'" in proc.stderr


def test_an_application_with_its_own_client_module_is_not_shadowed(venv: Path,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text("WHO = 'the application'\n")
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "__init__.py").write_text("WHO = 'the application'\n")
    code = ("import client, server\n"
            "from aiorocketmq.client import Producer\n"
            "from aiorocketmq.server.broker.config import BrokerConfig\n"
            "print(client.WHO, server.WHO, Producer.__module__, BrokerConfig.__module__)\n")
    proc = run(venv / "bin" / "python", "-c", code, cwd=tmp_path)
    assert proc.stdout.split() == [
        "the", "application", "the", "application",
        "aiorocketmq.client.producer", "aiorocketmq.server.broker.config"]


@pytest.mark.parametrize("script", ["mqnamesrv", "mqbroker", "mqadmin", "mqbench"])
def test_console_scripts(venv: Path, tmp_path: Path, script: str) -> None:
    proc = run(venv / "bin" / script, "--help", cwd=tmp_path)
    # mqadmin answers --help with the stock tool's command list, the servers with argparse's usage
    assert ("usage" in proc.stdout.lower()
            or "The most commonly used mqadmin commands are:" in proc.stdout), proc.stdout


def test_an_application_type_checks_against_the_installed_package(venv: Path,
                                                                 tmp_path: Path) -> None:
    # Without aiorocketmq/py.typed mypy skipped the package: "module is installed, but
    # missing library stubs or py.typed marker [import-untyped]", every name Any.
    app = tmp_path / "app.py"
    app.write_text("from aiorocketmq import Message\n"
                   "from aiorocketmq.client import Producer\n"
                   "from aiorocketmq.server.broker.config import BrokerConfig\n"
                   "m: Message = Message(topic='T', body=b'x')\n"
                   "n: int = m.topic  # a str: mypy must see the real type\n"
                   "p: type[Producer] = Producer\n"
                   "c: BrokerConfig = BrokerConfig()\n")
    mypy = Path(sys.executable).parent / "mypy"
    proc = subprocess.run([str(mypy), "--no-incremental", "--python-executable",
                           str(venv / "bin" / "python"), "--follow-imports=silent", str(app)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=540)
    out = proc.stdout + proc.stderr
    assert "import-untyped" not in out and "py.typed" not in out, out
    # The one deliberate error, found because the package's types were read.
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' \
        in out, out
    assert "Found 1 error" in out, out


def test_mqdashboard_without_its_extra_says_how_to_install_it(venv: Path, tmp_path: Path) -> None:
    # The wheel's own dependencies leave out aiohttp (the dashboard extra). The hint used to
    # be "pip install 'aiorocketmq[dashboard]'", which no package index can satisfy.
    proc = subprocess.run([str(venv / "bin" / "mqdashboard"), "-n", "127.0.0.1:9876"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("mqdashboard: aiohttp is missing: pip install 'aiohttp>=3.9'"), line
    assert "'.[dashboard]'" in line, line
    assert "aiorocketmq[dashboard]" not in line, line


def _readme_commands() -> list[str]:
    """Shell commands of README.md: lines of its bash code blocks and ``$ `` lines."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("$ ")]
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S):
        commands += [line.split("  #", 1)[0].strip() for line in block.splitlines()
                     if line.strip() and not line.strip().startswith(("#", "$"))]
    return commands


def test_readme_installs_from_a_checkout_or_a_wheel() -> None:
    # No package index has aiorocketmq: every pip install of it names a path.
    installs = [c for c in _readme_commands() if re.match(r"(\S*/)?pip3? install ", c)]
    assert len(installs) >= 3, installs
    for command in installs:
        args = [a for a in shlex.split(command.replace("$(ls dist/aiorocketmq-*.whl)",
                                                       "dist/aiorocketmq.whl"), comments=True)[2:]
                if not a.startswith("-")]
        assert args, command
        for arg in args:
            assert arg.startswith((".", "/", "dist/")) or arg.split("[")[0].endswith(".whl"), \
                f"{command!r} installs {arg!r} from a package index"


def test_the_readme_wheel_install_with_an_extra_resolves(wheel: Path, tmp_path: Path) -> None:
    # pip install "<wheel>[dashboard]" (README, Two commands) asks for the extra's aiohttp.
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
                           "--disable-pip-version-check", f"{wheel}[dashboard]"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "aiohttp" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_nothing_in_the_wheel_imports_the_test_suite(wheel: Path) -> None:
    # The benchmarks used to import tests.procs, tests.interop.stock and tests.vectors,
    # which a wheel does not have: they failed from an installed package.
    import ast

    offenders = []
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if not name.endswith(".py"):
                continue
            for node in ast.walk(ast.parse(zf.read(name), name)):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] if isinstance(node, ast.ImportFrom)
                           and node.level == 0 else [])
                offenders += [f"{name}:{node.lineno} {m}" for m in modules
                              if m == "tests" or m.startswith("tests.")]
        assert "aiorocketmq/bench/data/frames.jsonl" in zf.namelist()
    assert offenders == []


BENCH_HELPERS = '''
import sys, tempfile
from pathlib import Path
from aiorocketmq.bench import _procs, _stock
from aiorocketmq.bench._frames import frame_bytes, frames_where

assert frame_bytes(frames_where(code=310, is_response=False, serialize="JSON")[0]["id"])
tmp = Path(tempfile.mkdtemp())
ns = _procs.namesrv_process(tmp).start()
try:
    broker = _procs.broker_process(tmp, ns.address).start()
    print("broker", broker.address)
    print("stopped", broker.stop())
finally:
    ns.stop()
try:
    _stock.require_java()
except _stock.StockHarnessError as exc:
    print("stock:", exc)
else:
    print("stock: found", _stock.JAVA_DIR)
'''


def test_the_benchmarks_run_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    py = venv / "bin" / "python"
    codec = run(py, "-m", "aiorocketmq.bench.codec_bench", cwd=tmp_path)
    assert "decode SEND_MESSAGE_V2 request" in codec.stdout, codec.stdout
    # The process helpers the benchmarks start servers with, from the installed package.
    proc = run(py, "-c", BENCH_HELPERS, cwd=tmp_path)
    assert re.search(r"broker 127\.0\.0\.1:\d+", proc.stdout), proc.stdout
    assert "stopped 0" in proc.stdout, proc.stdout
    # The stock side needs the harness a checkout builds, and says how to point at it.
    assert "stock: " in proc.stdout and "AIOROCKETMQ_STOCK_HARNESS" in proc.stdout, proc.stdout
