"""``mqbroker --instances N``: N broker groups from one configuration, supervised.

A real name server and one ``mqbroker --instances 2`` process: both instances register
as their own group (``<name>-0``, ``<name>-1``, ports ``listenPort`` and ``listenPort +
step``, stores under ``instance-<i>``), a producer's sends spread over both, an instance
killed with SIGKILL is started again by the supervisor and serves its store, and SIGTERM
stops everything with exit 0. A configuration that cannot be split is refused in one line.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiorocketmq.client import Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from tests.procs import BROKER_READY, SPAWN_LOCK, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = str(Path(__file__).resolve().parents[2])


class Supervisor:
    """``mqbroker --instances`` with its stdout read line by line on a thread."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        with SPAWN_LOCK, log.open("ab") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                                         stdin=subprocess.DEVNULL, cwd=REPO,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.log = log
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def ready(self, count: int, timeout: float = 60.0) -> dict[str, str]:
        """Wait for ``count`` readiness lines; brokerName -> address."""
        got: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while len(got) < count:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"{len(got)} of {count} instances ready:\n"
                                     f"{self.log.read_text(errors='replace')[-3000:]}") from None
            m = BROKER_READY.search(line)
            if m:
                got[m.group("name")] = m.group("addr")
        return got

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except FileNotFoundError:
        return []


def _cmdline(pid: int) -> str:
    """The process's command line, "" once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _free_port_pair_base() -> int:
    import socket

    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + 12 > 65000:
            continue
        ok = True
        for port in (base, base + 1, base + 10, base + 11):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[str]:
    ns = namesrv_process(tmp_path).start()
    try:
        yield ns.address
    finally:
        ns.stop()


def _conf(tmp_path: Path, **extra: str) -> Path:
    settings = {
        "brokerClusterName": "InstCluster", "brokerName": "inst", "brokerId": "0",
        "storePathRootDir": str(tmp_path / "store"),
        "mappedFileSizeCommitLog": str(4 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(20 * 10000),
        "maxHashSlotNum": "50000", "maxIndexNum": "200000", "autoCreateTopicEnable": "true",
        **extra,
    }
    path = tmp_path / "base.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


async def _send(namesrv: str, topic: str, count: int) -> dict[str, int]:
    per_broker: dict[str, int] = {}
    async with Producer("InstProducer", namesrv_addr=namesrv) as producer:
        for i in range(count):
            r = await producer.send(Message(topic, b"m-%d" % i))
            name = r.message_queue.broker_name
            per_broker[name] = per_broker.get(name, 0) + 1
    return per_broker


async def test_two_instances_serve_restart_and_stop(tmp_path: Path, namesrv: str) -> None:
    base = _free_port_pair_base()
    conf = _conf(tmp_path, listenPort=str(base))
    sup = Supervisor([sys.executable, "-m", "aiorocketmq.server.broker.main", "-n", namesrv,
                      "-c", str(conf), "--instances", "2"], tmp_path / "supervisor.log")
    try:
        ready = await asyncio.to_thread(sup.ready, 2)
        assert ready == {"inst-0": f"127.0.0.1:{base}", "inst-1": f"127.0.0.1:{base + 10}"}
        for i in range(2):
            written = (tmp_path / "store" / f"instance-{i}" / "broker.conf").read_text()
            assert f"brokerName=inst-{i}\n" in written
            assert (tmp_path / "store" / f"instance-{i}" / "lock").exists()  # its store
        # A topic created on the cluster lives on both groups; sends spread over them.
        async with MQAdmin(namesrv) as admin:
            await admin.create_topic_in_cluster(
                "InstCluster", TopicConfig(topic_name="InstTopic", read_queue_nums=4, write_queue_nums=4))
            info = await admin.cluster_info()
        assert set(info.broker_addr_table) >= {"inst-0", "inst-1"}
        first = await _send(namesrv, "InstTopic", 40)
        assert set(first) == {"inst-0", "inst-1"}, first

        # SIGKILL one instance: the supervisor starts it again on the same store and port.
        children = _children(sup.proc.pid)
        assert len(children) == 2
        victim = next(p for p in children if "instance-1" in _cmdline(p))
        os.kill(victim, signal.SIGKILL)
        again = await asyncio.to_thread(sup.ready, 1)
        assert again == {"inst-1": f"127.0.0.1:{base + 10}"}
        assert victim not in _children(sup.proc.pid)
        async with MQAdmin(namesrv) as admin:
            stats = await admin.topic_stats("InstTopic")
        stored = sum(o.max_offset for mq, o in stats.offset_table.items()
                     if mq.broker_name == "inst-1")
        assert stored == first["inst-1"]  # its store came back whole
    finally:
        code = await asyncio.to_thread(sup.stop)
    assert code == 0
    assert not any(_cmdline(p) for p in children)


async def test_a_configuration_that_cannot_be_split_is_refused(tmp_path: Path, namesrv: str) -> None:
    conf = _conf(tmp_path, listenPort="0", storePathCommitLog=str(tmp_path / "one-log"))
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "aiorocketmq.server.broker.main", "-n", namesrv,
                         "-c", str(conf), "--instances", "3"],
        capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "mqbroker: bad configuration: storePathCommitLog names one path; "
        "with --instances set storePathRootDir only")
