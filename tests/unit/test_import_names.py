"""One name per module, and the switch that turns the C modules off.

* The parts live at the top of the repository (``protocol/``, ``server/``, ...) and are
  linked from ``aiorocketmq/``; with the repository root on ``sys.path`` each could also be
  imported by its folder name, which would load every module twice, with two copies of
  each class (``except RocketMQError`` missing the other copy's errors). Each part's
  ``__init__`` refuses the folder name.
* ``AIOROCKETMQ_NO_EXTENSIONS=1`` makes every module use its Python path though the C one
  is built (``aiorocketmq.refuse_extension``); unset or ``0``, the built C modules are used.

Each check runs in a fresh interpreter, since both are decided at import time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("protocol", "server", "client", "spark_sink", "bench")

# Which implementation each optional import chose: True = the C module.
_CHOICES = """
import json
from aiorocketmq.protocol import command, message
from aiorocketmq.server.store import message_store
from aiorocketmq.spark_sink import columnar, pullwire
import aiorocketmq
print(json.dumps({
    "switch": aiorocketmq.NO_EXTENSIONS,
    "command": command._c_decode_rocketmq is not None and command._c_encode_rocketmq is not None,
    "message": message._decode_records is not None,
    "units": message_store._scan_units is not message_store.scan_units,
    "records": columnar.NATIVE,
    "pull": pullwire.NATIVE,
}))
"""


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "AIOROCKETMQ_NO_EXTENSIONS"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**environ, **env})


@pytest.mark.parametrize("part", PARTS)
def test_a_part_refuses_its_folder_name(part: str) -> None:
    proc = _python(f"import {part}")
    assert proc.returncode != 0
    assert f"ImportError: import aiorocketmq.{part}, not {part}:" in proc.stderr


def test_only_the_package_name_loads() -> None:
    proc = _python("""
import sys
import aiorocketmq.protocol.errors as errors
try:
    import protocol.errors
except ImportError:
    pass
else:
    raise SystemExit("protocol.errors loaded under its folder name")
assert errors.RocketMQError.__module__ == "aiorocketmq.protocol.errors"
assert not [m for m in sys.modules if m.split(".")[0] in {"protocol", "server", "client",
                                                          "spark_sink", "bench"}]
print("ok")
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize("value, switched", [("1", True), ("yes", True), ("0", False),
                                             ("", False), (None, False)])
def test_no_extensions_switch(value: str | None, switched: bool) -> None:
    env = {} if value is None else {"AIOROCKETMQ_NO_EXTENSIONS": value}
    proc = _python(_CHOICES, **env)
    assert proc.returncode == 0, proc.stderr
    choices = json.loads(proc.stdout)
    assert choices.pop("switch") is switched
    # Unswitched, every C module is used: they are all built here (setup.py, a C compiler).
    assert choices == dict.fromkeys(choices, not switched)
