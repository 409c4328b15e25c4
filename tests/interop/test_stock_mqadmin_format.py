"""Our ``mqadmin`` prints what the stock 4.9.7 ``mqadmin`` (MQAdminStartup, Maven Central) prints.

Both tools run against the same servers (ours) for updateTopic, updateSubGroup,
queryMsgByUniqueKey and queryMsgById, and their stdout is compared line by line. Nothing
differs legitimately here: the same message is shown by both (same timestamps, hosts,
offsets, and the same body file under /tmp/rocketmq/msgbodys), so the only normalisation
is the trailing newline the stock tool leaves out after ``TopicConfig [...]`` and the
message tracks.

queryMsgById with a unique key: the stock 4.9.7 tool cannot (MQAdminImpl.viewMessage gives
up with NO_MESSAGE, "query message by id finished, but no message."); ours looks the id up
as a unique key, as 5.x does. That case is checked on our side only.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.procs import ServerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

REPO = str(Path(__file__).resolve().parents[2])
TOPIC, GROUP = "StockFormatTopic", "StockFormatGroup"


def ours(namesrv: str, command: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "aiorocketmq.client.admin.cli", command,
                           "-n", namesrv, *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert done.returncode == 0, f"ours {command}: {done.stdout}\n{done.stderr}"
    return done.stdout


def stock(mqadmin: Callable[..., Any], namesrv: str, command: str, *args: str) -> str:
    result = mqadmin(namesrv, command, *args)
    assert result.returncode == 0 and "Exception" not in result.stdout + result.stderr, \
        result.describe()
    return str(result.stdout)


def lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def test_text_format_matches_the_stock_tool(namesrv: ServerProcess, broker: ServerProcess,
                                            mqadmin: Callable[..., Any]) -> None:
    ns = namesrv.address
    args = ("-b", broker.address, "-t", TOPIC, "-r", "2", "-w", "2")
    assert lines(ours(ns, "updateTopic", *args)) == lines(stock(mqadmin, ns, "updateTopic", *args))

    args = ("-b", broker.address, "-g", GROUP, "-r", "5", "-q", "2")
    assert lines(ours(ns, "updateSubGroup", *args)) == \
        lines(stock(mqadmin, ns, "updateSubGroup", *args))

    sent = ours(ns, "sendMessage", "-t", TOPIC, "-p", "format body", "-c", "TagF",
                "-k", "fkey1 fkey2")
    uniq = sent.splitlines()[1].split()[-1]
    args = ("-t", TOPIC, "-i", uniq)
    our_text = ours(ns, "queryMsgByUniqueKey", *args)
    assert lines(our_text) == lines(stock(mqadmin, ns, "queryMsgByUniqueKey", *args))

    # A unique key: the stock tool fails (its stack trace, exit 0), ours finds the message.
    failed = mqadmin(ns, "queryMsgById", "-i", uniq)
    assert "query message by id finished, but no message" in failed.stdout + failed.stderr
    offset_id = next(ln.split()[1] for ln in ours(ns, "queryMsgById", "-i", uniq).splitlines()
                     if ln.startswith("OffsetID:"))
    our_text = ours(ns, "queryMsgById", "-i", offset_id)
    assert lines(our_text) == lines(stock(mqadmin, ns, "queryMsgById", "-i", offset_id))
    assert "Message Body Path:" in our_text and "Properties:" in our_text
