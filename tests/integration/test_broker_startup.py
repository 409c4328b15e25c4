"""``mqbroker`` start-up as an operator meets it: one-line errors, warnings that name the key,
``NAMESRV_ADDR``, and a port that accepts connections only once the broker can answer.

Each failing start runs the real entry point as a subprocess and checks its stderr: one
line naming the cause (no traceback) and a non-zero exit code, as ``mqnamesrv`` does.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aiorocketmq.server.broker.config import BrokerConfig
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.message_store import MessageStore
from tests.procs import BROKER_READY, ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = str(Path(__file__).resolve().parents[2])


def write_conf(tmp: Path, **extra: str) -> Path:
    settings = {"brokerName": "broker-s", "listenPort": "0",
                "storePathRootDir": str(tmp / "store"),
                "mappedFileSizeCommitLog": str(1024 * 1024),
                "mappedFileSizeConsumeQueue": str(20 * 1000)}
    settings.update(extra)
    path = tmp / "broker.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
    return path


def mqbroker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "aiorocketmq.server.broker.main", *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO, env=full_env)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("mqbroker")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_config_file_is_one_line(tmp_path: Path) -> None:
    result = mqbroker("-c", str(tmp_path / "nope.conf"))
    assert_one_line_error(result, "nope.conf", "No such file")
    assert result.returncode == 2


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = mqbroker("-c", str(write_conf(tmp_path, listenPort=str(port))))
    assert_one_line_error(result, f"127.0.0.1:{port}", "address already in use")


def test_store_locked_by_another_broker_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    fd = os.open(tmp_path / "store" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = mqbroker("-c", str(write_conf(tmp_path)))
    finally:
        os.close(fd)
    assert_one_line_error(result, str(tmp_path / "store"), "in use")
    assert result.returncode == 1


def test_store_directory_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    # The store's parent is a file. The broker used to print four tracebacks (~90 lines: it
    # wrote its never-started metadata files while stopping) before its one-line error.
    (tmp_path / "not-a-dir").write_text("")
    store = tmp_path / "not-a-dir" / "store"
    result = mqbroker("-c", str(write_conf(tmp_path, storePathRootDir=str(store))))
    assert_one_line_error(result, "cannot start", "not-a-dir")
    assert result.returncode == 1
    assert "shutdown_step_failed" not in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) < 10, result.stderr


def test_unknown_log_level_is_refused(tmp_path: Path) -> None:
    result = mqbroker("-c", str(write_conf(tmp_path)), "--log-level", "VERBOSE")
    assert result.returncode == 2
    assert "VERBOSE" in result.stderr and "Traceback" not in result.stderr


def test_unknown_config_key_is_named_and_namesrv_addr_comes_from_env(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, listenPrt="20921", sendMessageThreadPoolNums="16",
                      useEpollNativeSelector="true")
    argv = [sys.executable, "-m", "aiorocketmq.server.broker.main", "-c", str(conf)]
    proc = ServerProcess(argv, BROKER_READY, tmp_path / "broker.log",
                         env={"NAMESRV_ADDR": "127.0.0.1:1"})
    proc.start()
    try:
        assert proc.match is not None
        assert proc.stdout_lines[-1].rstrip().endswith("name server is 127.0.0.1:1")
    finally:
        proc.stop()
    log = proc.log_path.read_text(encoding="utf-8")
    warning = [ln for ln in log.splitlines() if "broker.config_unknown_key" in ln]
    assert len(warning) == 1 and "listenPrt" in warning[0] and "listenPort" in warning[0]
    # Stock keys we accept and do not implement are not "unknown": one line names them.
    not_used = [ln for ln in log.splitlines() if "broker.config_keys_not_used" in ln]
    assert len(not_used) == 1, log
    assert "sendMessageThreadPoolNums" in not_used[0] and "useEpollNativeSelector" in not_used[0]


async def test_port_accepts_connections_only_once_ready(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The store's recovery is held at a gate: while it is held, the bound port refuses
    # connections (it used to accept them and answer SYSTEM_BUSY for seconds).
    gate = asyncio.Event()
    recovering = asyncio.Event()
    real_start = MessageStore.start

    async def gated_start(self: MessageStore) -> None:
        recovering.set()
        await gate.wait()
        await real_start(self)

    monkeypatch.setattr(MessageStore, "start", gated_start)
    config = BrokerConfig(broker_name="broker-g", listen_port=0, namesrv_addr=None)
    store = MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"),
                               mapped_file_size_commit_log=1024 * 1024,
                               mapped_file_size_consume_queue=20 * 1000)
    broker = BrokerController(config, store)
    starting = asyncio.create_task(broker.start())
    try:
        await asyncio.wait_for(recovering.wait(), 10)
        port = broker.server.port
        assert port != 0
        with pytest.raises(ConnectionRefusedError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
        gate.set()
        await asyncio.wait_for(starting, 30)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await writer.wait_closed()
    finally:
        gate.set()
        if not starting.done():
            starting.cancel()
        await broker.shutdown()
