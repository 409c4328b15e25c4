"""``bench/soak.py``: a long run of mixed traffic, with resource and latency figures every minute.

::

    python -m aiorocketmq.bench.soak [--minutes 30] [--interval 60] [--rate 100]
                                     [--restart-every 300] [--rebalance-every 120] [--keep]

Starts a nameserver and two broker groups (``soak-a``, ``soak-b``: ``mqnamesrv`` /
``mqbroker`` subprocesses on 127.0.0.1, a temporary directory, ``--metrics-port``), creates
``SoakTopic`` (4 queues on each broker) and runs, for ``--minutes``:

* produce: ``--concurrency`` workers paced to ``--rate`` operations a second in all, each a
  sync send (``Producer``) of a ``--size``-byte body keyed ``soak-<seq>``; every tenth one
  with a delay level (1, 5 or 10 s), every tenth a transaction (``TransactionProducer``:
  committed, rolled back, or left UNKNOW for the broker's check-back, which answers from
  the sequence number; the brokers check every 10 s);
* consume: a ``PushConsumer`` of ``soak_consumer`` (CLUSTERING), which answers
  RECONSUME_LATER to the first delivery of every twentieth plain message (so the retry
  topic and the send-back path carry traffic); a second member of the group starts and
  stops every ``--rebalance-every`` seconds (rebalances);
* one broker restart every ``--restart-every`` seconds: ``soak-b`` gets SIGTERM and is
  started again on the same store and port (producers move to ``soak-a`` meanwhile), so
  ``soak-a`` and the nameserver run the whole time.

Every ``--interval`` seconds one row (a Markdown table) gives the window's operations, send
failures and consumed messages, p99 latencies (sync send, transaction, and end to end from
the producer's born timestamp to the listener, for plain first deliveries), and per process
(``a``, ``b``, the nameserver ``ns``, this client ``cl``) anonymous RSS in MiB (``RssAnon``:
heap and stacks, where a leak shows), open file descriptors and asyncio tasks (the
servers' from their ``rocketmq_event_loop_tasks`` gauge); for ``soak-a`` also its
file-backed RSS (``RssFile``), which grows with the store: the commit log and consume
queues are mapped files, every written page of them stays resident until the kernel
needs it back, as with stock's mapped files. At the end
traffic stops, the consumers drain (at most ``--drain-seconds``) and a ``SOAK`` line gives
what was acknowledged and not consumed (``lost``), rolled-back transactions that were
delivered, and send failures outside the restart windows (a window runs from the restart's
SIGTERM to ``--restart-grace`` seconds after the broker is ready again). The exit code is 1
when any of those three is not zero.

This process's own event loop is watched as well (``lag ms``: the most a 100 ms ticker
was late in the window). When the loop could not run for more than
:data:`STALL_SECONDS` (the process starved of CPU on a loaded machine, or blocked), a
``#`` line says so, and send failures from the start of such a stall to a second after it
are counted apart (``failed_in_client_stalls``), not against the brokers: a client that
wakes after its timeouts are due fails requests whose answers already wait in its sockets
(timers run before reads), as a stock client would.

Nothing here imports the repository's ``tests``: the servers are started by the small
:class:`Server` helper below, so the soak runs from an installed wheel. Bookkeeping is one
byte per message (a ``bytearray`` indexed by sequence number), so this process's own RSS
stays flat as well. This is a measuring tool: it asserts no duration.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.runtime import configure_logging, install_uvloop

__all__ = ["main", "Options", "Server", "Soak", "Window", "kind_of", "percentile",
           "tx_final_commit", "tx_local_state"]

NAMESRV_READY = re.compile(r"The Name Server boot success\. serializeType=\w+ address=(\S+)")
BROKER_READY = re.compile(r"The broker\[[^,]+, ([^\]]+)\] boot success")
METRICS_READY = re.compile(r"metrics listening on (\S+)")
TASKS_LINE = re.compile(r"^rocketmq_event_loop_tasks (\d+)", re.MULTILINE)

TOPIC = "SoakTopic"
QUEUES = 4
CONSUMER_GROUP = "soak_consumer"
PRODUCER_GROUP = "soak_producer"
TX_GROUP = "soak_tx_producer"
KEY_PREFIX = "soak-"

# One byte per message (Soak.state), indexed by sequence number.
SENT = 1  # SEND_OK (for a transaction: its half message)
CONSUMED = 2
DUPLICATE = 4  # consumed more than once
FAILED = 8  # the send raised (after the producer's own retries)

TICK = 0.1  # seconds between two ticks of the event-loop lag monitor
STALL_SECONDS = 1.0  # a tick this late is a stall of the client process


def kind_of(seq: int) -> str:
    """``plain``, ``delay`` or ``tx``: what operation ``seq`` is."""
    r = seq % 10
    return "tx" if r == 9 else "delay" if r == 5 else "plain"


def fails_first_delivery(seq: int) -> bool:
    """The listener answers RECONSUME_LATER to this plain message's first delivery."""
    return seq % 20 == 3


def tx_local_state(seq: int) -> LocalTransactionState:
    """What the local transaction of ``seq`` answers (a tenth of the transactions each way
    besides commit)."""
    r = (seq // 10) % 10
    if r == 0:
        return LocalTransactionState.ROLLBACK_MESSAGE
    if r == 1:
        return LocalTransactionState.UNKNOW
    return LocalTransactionState.COMMIT_MESSAGE


def tx_final_commit(seq: int) -> bool:
    """Whether transaction ``seq`` ends committed (its local state, else the check's answer)."""
    state = tx_local_state(seq)
    if state is LocalTransactionState.UNKNOW:
        return (seq // 100) % 2 == 0
    return state is LocalTransactionState.COMMIT_MESSAGE


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile (0 for no samples)."""
    if not samples:
        return 0.0
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


# --- processes ----------------------------------------------------------------------------


def free_port(offsets: Iterable[int] = (0,)) -> int:
    """A port P such that P + each offset is free on 127.0.0.1 right now (a broker binds
    listenPort, listenPort + 1 for HA and listenPort - 2 for its fast channel)."""
    offsets = tuple(offsets)
    for _ in range(200):
        port = random.randrange(20000, 40000)
        ok = True
        for off in offsets:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + off))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError(f"no free port with offsets {offsets}")


class Server:
    """One ``mqnamesrv`` / ``mqbroker`` subprocess: started (and restarted) with the same argv,
    ready once its boot line (and, with ``--metrics-port``, its metrics line) is printed;
    stderr goes to ``log_path``."""

    def __init__(self, name: str, argv: list[str], ready: re.Pattern[str], log_path: Path,
                 *, metrics: bool = True) -> None:
        self.name = name
        self.argv = argv
        self.ready = ready
        self.log_path = log_path
        self.metrics = metrics
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.metrics_address: str | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self, timeout: float = 60.0) -> Server:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL, env=env, bufsize=0)
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        self.address, self.metrics_address = "", None
        deadline = time.monotonic() + timeout
        pending = b""
        # Raw reads, split here: a buffered readline could swallow the second line into a
        # buffer that select() does not see.
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not self.address or (self.metrics and self.metrics_address is None):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise RuntimeError(f"{self.name} not ready in {timeout}s; log: {self.log_path}")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    code = self.proc.wait()
                    raise RuntimeError(f"{self.name} exited with {code} before ready; "
                                       f"log: {self.log_path}")
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    m = self.ready.search(line)
                    if m:
                        self.address = m.group(1)
                    m = METRICS_READY.search(line)
                    if m:
                        self.metrics_address = m.group(1)
        return self

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait (SIGKILL at ``timeout``); the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()


def namesrv_server(workdir: Path) -> Server:
    d = workdir / "namesrv"
    d.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "aiorocketmq.server.namesrv.main", "--port", "0",
            "--log-level", "WARNING", "--kv-path", str(d / "kvConfig.json"), "--metrics-port", "0"]
    return Server("namesrv", argv, NAMESRV_READY, d / "namesrv.log")


def broker_server(workdir: Path, name: str, namesrv: str) -> Server:
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    conf = {
        "brokerClusterName": "SoakCluster", "brokerName": name, "brokerId": "0",
        "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "listenPort": str(free_port((-2, 0, 1))), "storePathRootDir": str(d / "store"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        "mappedFileSizeConsumeQueue": str(20 * 100000),
        "maxHashSlotNum": "500000", "maxIndexNum": "2000000",
        "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true",
        "transactionCheckInterval": "10000",
    }
    conf_path = d / "broker.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    argv = [sys.executable, "-m", "aiorocketmq.server.broker.main", "-n", namesrv, "-c",
            str(conf_path), "--log-level", "WARNING", "--metrics-port", "0"]
    return Server(name, argv, BROKER_READY, d / "broker.log")


def rss_mib(pid: int | None) -> tuple[float | None, float | None]:
    """(anonymous, file-backed) resident MiB of ``pid`` (``RssAnon``, ``RssFile``)."""
    if pid is None:
        return None, None
    found: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:")):
                    found[line.split(":")[0]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return found.get("RssAnon"), found.get("RssFile")


def open_fds(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


async def scrape_tasks(metrics_address: str | None, timeout: float = 5.0) -> int | None:
    """The ``rocketmq_event_loop_tasks`` value a server's /metrics shows (None: no answer)."""
    if metrics_address is None:
        return None
    host, _, port = metrics_address.rpartition(":")
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                writer.write(f"GET /metrics HTTP/1.0\r\nHost: {metrics_address}\r\n\r\n".encode())
                data = await reader.read()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return None
    m = TASKS_LINE.search(data.decode(errors="replace"))
    return int(m.group(1)) if m else None


# --- the run --------------------------------------------------------------------------------


@dataclass
class Window:
    """What one report interval saw."""

    ops: int = 0
    failed: int = 0
    consumed: int = 0
    redelivered: int = 0
    send_ms: list[float] = field(default_factory=list)
    tx_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    lag_ms: float = 0.0


@dataclass
class Options:
    minutes: float = 30.0
    interval: float = 60.0
    rate: float = 100.0
    concurrency: int = 8
    size: int = 256
    restart_every: float = 300.0
    restart_grace: float = 45.0
    rebalance_every: float = 120.0
    drain_seconds: float = 180.0
    keep: bool = False


COLUMNS = ("t", "ops", "fail", "cons", "send p99 ms", "tx p99 ms", "e2e p99 ms", "lag ms",
           "a anon MiB", "a file MiB", "a fd", "a tasks", "b anon MiB", "b fd", "b tasks",
           "ns anon MiB", "ns fd", "ns tasks", "cl anon MiB", "cl fd", "cl tasks")


def _fmt(v: float | int | None, digits: int = 0) -> str:
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


class Soak:
    """One soak run over ``workdir`` (see the module docstring)."""

    def __init__(self, options: Options, workdir: Path) -> None:
        self.o = options
        self.workdir = workdir
        self.state = bytearray()
        self.seq = 0
        self.window = Window()
        self.failures: list[float] = []  # monotonic times of failed sends
        self.restarts: list[tuple[float, float]] = []  # (SIGTERM at, ready at)
        self.restarting_since: float | None = None
        self.stalls: list[tuple[float, float]] = []  # (from, to) the client loop did not run
        self.began = 0.0
        self.body = b"s" * options.size
        self.namesrv: Server | None = None
        self.brokers: dict[str, Server] = {}
        self.rows = 0
        self.stopping = asyncio.Event()
        # Acknowledged messages the consumers should get and have not yet: the drain's end.
        self.outstanding = 0
        self.traffic_done = False
        self.drained = asyncio.Event()

    # -- bookkeeping --------------------------------------------------------------------

    def _next_seq(self) -> int:
        seq = self.seq
        self.seq += 1
        self.state.append(0)
        return seq

    @staticmethod
    def _expected(seq: int) -> bool:
        return kind_of(seq) != "tx" or tx_final_commit(seq)

    def _settle(self, delta: int) -> None:
        self.outstanding += delta
        if self.traffic_done and self.outstanding <= 0:
            self.drained.set()

    def _seq_of(self, msg: MessageExt) -> int | None:
        keys = msg.keys
        if keys is not None and keys.startswith(KEY_PREFIX):
            try:
                return int(keys[len(KEY_PREFIX):])
            except ValueError:
                return None
        return None

    # -- traffic ------------------------------------------------------------------------

    async def _operation(self, producer: Producer, tx: TransactionProducer) -> None:
        seq = self._next_seq()
        kind = kind_of(seq)
        msg = Message(TOPIC, self.body, tags=kind, keys=f"{KEY_PREFIX}{seq}")
        began = time.monotonic()
        w = self.window
        w.ops += 1
        try:
            if kind == "tx":
                result = await tx.send_message_in_transaction(msg, seq)
                ok = result.send_result.status is SendStatus.SEND_OK
                w.tx_ms.append((time.monotonic() - began) * 1000)
            else:
                if kind == "delay":
                    msg.delay_time_level = 1 + seq % 3
                res = await producer.send(msg)
                ok = res.status is SendStatus.SEND_OK
                w.send_ms.append((time.monotonic() - began) * 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.state[seq] |= FAILED
            w.failed += 1
            self.failures.append(time.monotonic())
            return
        if ok:
            st = self.state[seq]
            self.state[seq] = st | SENT
            if not st & CONSUMED and self._expected(seq):
                self._settle(1)

    async def _worker(self, producer: Producer, tx: TransactionProducer, end: float) -> None:
        period = self.o.concurrency / self.o.rate
        loop = asyncio.get_running_loop()
        next_at = loop.time() + random.random() * period
        while not self.stopping.is_set():
            now = loop.time()
            if now >= end:
                return
            if next_at > now:
                await asyncio.sleep(next_at - now)  # pacing to --rate
            await self._operation(producer, tx)
            # Never more than a second of backlog: a stalled send is not made up in a burst.
            next_at = max(next_at + period, loop.time() - 1.0)

    async def _listener(self, msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        # A coroutine function: it runs on the event loop (a plain one would run on the
        # consumer's threads), so the bookkeeping needs no lock.
        now_ms = time.time() * 1000
        w = self.window
        for m in msgs:
            seq = self._seq_of(m)
            if seq is None or seq >= len(self.state):
                continue
            kind = kind_of(seq)
            if kind == "plain" and m.reconsume_times == 0 and fails_first_delivery(seq):
                w.redelivered += 1
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
        for m in msgs:
            seq = self._seq_of(m)
            if seq is None or seq >= len(self.state):
                continue
            w.consumed += 1
            st = self.state[seq]
            self.state[seq] = st | (DUPLICATE if st & CONSUMED else CONSUMED)
            if not st & CONSUMED and st & SENT and self._expected(seq):
                self._settle(-1)
            if kind_of(seq) == "plain" and m.reconsume_times == 0:
                w.e2e_ms.append(max(now_ms - m.born_timestamp, 0.0))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def _check(self, msg: MessageExt) -> LocalTransactionState:
        seq = self._seq_of(msg)
        if seq is None:
            return LocalTransactionState.ROLLBACK_MESSAGE
        return (LocalTransactionState.COMMIT_MESSAGE if tx_final_commit(seq)
                else LocalTransactionState.ROLLBACK_MESSAGE)

    def _consumer(self, namesrv: str, instance: str) -> PushConsumer:
        c = PushConsumer(CONSUMER_GROUP, namesrv, instance_name=instance,
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        c.subscribe(TOPIC, "*")
        c.register_message_listener(self._listener)
        return c

    # -- faults -------------------------------------------------------------------------

    async def _restarts(self, end: float) -> None:
        loop = asyncio.get_running_loop()
        broker = self.brokers["soak-b"]
        while True:
            wake = min(end, loop.time() + self.o.restart_every)
            await asyncio.sleep(max(0.0, wake - loop.time()))
            if loop.time() >= end - 1.0:
                return
            t0 = time.monotonic()
            self.restarting_since = t0
            code = await asyncio.to_thread(broker.stop)
            stopped = time.monotonic()
            await asyncio.to_thread(broker.start)
            ready = time.monotonic()
            self.restarts.append((t0, ready))
            self.restarting_since = None
            print(f"# {self._clock()} restart soak-b: exit {code} after {stopped - t0:.1f}s, "
                  f"ready again after {ready - stopped:.1f}s", flush=True)

    async def _rebalances(self, namesrv: str, end: float) -> None:
        loop = asyncio.get_running_loop()
        second: PushConsumer | None = None
        try:
            while True:
                wake = min(end, loop.time() + self.o.rebalance_every)
                await asyncio.sleep(max(0.0, wake - loop.time()))
                if loop.time() >= end - 1.0:
                    return
                if second is None:
                    second = self._consumer(namesrv, "soak-consumer-2")
                    await second.start()
                    what = "joins"
                else:
                    await second.shutdown()
                    second = None
                    what = "leaves"
                print(f"# {self._clock()} rebalance: a second consumer {what} the group", flush=True)
        finally:
            if second is not None:
                await second.shutdown()

    # -- reports ------------------------------------------------------------------------

    def _clock(self) -> str:
        s = int(time.monotonic() - self.began)
        return f"{s // 60:02d}:{s % 60:02d}"

    async def _report(self) -> None:
        w, self.window = self.window, Window()
        a, b = self.brokers["soak-a"], self.brokers["soak-b"]
        ns = self.namesrv
        assert ns is not None
        tasks = await asyncio.gather(scrape_tasks(a.metrics_address if a.pid else None),
                                     scrape_tasks(b.metrics_address if b.pid else None),
                                     scrape_tasks(ns.metrics_address))
        me = os.getpid()
        a_anon, a_file = rss_mib(a.pid)
        cells = [
            self._clock(), str(w.ops), str(w.failed), str(w.consumed),
            _fmt(percentile(w.send_ms, 99), 1), _fmt(percentile(w.tx_ms, 99), 1),
            _fmt(percentile(w.e2e_ms, 99), 1), _fmt(w.lag_ms, 1),
            _fmt(a_anon, 1), _fmt(a_file, 1), _fmt(open_fds(a.pid)), _fmt(tasks[0]),
            _fmt(rss_mib(b.pid)[0], 1), _fmt(open_fds(b.pid)), _fmt(tasks[1]),
            _fmt(rss_mib(ns.pid)[0], 1), _fmt(open_fds(ns.pid)), _fmt(tasks[2]),
            _fmt(rss_mib(me)[0], 1), _fmt(open_fds(me)), _fmt(len(asyncio.all_tasks())),
        ]
        self.rows += 1
        print("| " + " | ".join(cells) + " |", flush=True)

    async def _reporter(self, end: float) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + self.o.interval
        while next_at <= end + 0.5:
            await asyncio.sleep(max(0.0, next_at - loop.time()))  # a reporting period
            await self._report()
            next_at += self.o.interval

    async def _lag_monitor(self) -> None:
        """How late a 100 ms ticker runs: the window's worst, and stalls."""
        while True:
            due = time.monotonic() + TICK
            await asyncio.sleep(TICK)
            now = time.monotonic()
            late = now - due
            w = self.window
            w.lag_ms = max(w.lag_ms, late * 1000)
            if late > STALL_SECONDS:
                self.stalls.append((due, now))
                print(f"# {self._clock()} the client's event loop did not run for {late:.1f}s",
                      flush=True)

    # -- the whole run ------------------------------------------------------------------

    def _failures(self) -> tuple[int, int]:
        """(failed sends outside restart windows and client stalls, failed in stalls)."""
        grace = self.o.restart_grace
        windows = list(self.restarts)
        if self.restarting_since is not None:
            windows.append((self.restarting_since, float("inf")))
        outside = in_stalls = 0
        for t in self.failures:
            if any(t0 <= t <= ready + grace for t0, ready in windows):
                continue
            if any(t0 <= t <= t1 + 1.0 for t0, t1 in self.stalls):
                in_stalls += 1
            else:
                outside += 1
        return outside, in_stalls

    def _verdict(self) -> tuple[int, int, int, int, int]:
        """(acknowledged and expected, lost, duplicates, rolled back yet delivered, failed)."""
        expected = lost = dups = rolled_back = failed = 0
        for seq, st in enumerate(self.state):
            if st & FAILED:
                failed += 1
            if st & DUPLICATE:
                dups += 1
            if not st & SENT:
                continue
            if kind_of(seq) == "tx" and not tx_final_commit(seq):
                if st & CONSUMED:
                    rolled_back += 1
                continue
            expected += 1
            if not st & CONSUMED:
                lost += 1
        return expected, lost, dups, rolled_back, failed

    async def run(self) -> int:
        o = self.o
        self.namesrv = ns = await asyncio.to_thread(namesrv_server(self.workdir).start)
        for name in ("soak-a", "soak-b"):
            self.brokers[name] = await asyncio.to_thread(
                broker_server(self.workdir, name, ns.address).start)
        print(f"# soak: {o.minutes:g} min, {o.rate:g} ops/s ({o.concurrency} workers, "
              f"{o.size} B), a report every {o.interval:g} s, soak-b restarted every "
              f"{o.restart_every:g} s, a consumer joins or leaves every {o.rebalance_every:g} s; "
              f"work dir {self.workdir}", flush=True)
        print(f"# nameserver {ns.address} (pid {ns.pid}), soak-a {self.brokers['soak-a'].address} "
              f"(pid {self.brokers['soak-a'].pid}), soak-b {self.brokers['soak-b'].address}",
              flush=True)
        async with MQAdmin(ns.address) as admin:
            for broker in self.brokers.values():
                await admin.create_topic(broker.address, TopicConfig(
                    topic_name=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
        producer = Producer(PRODUCER_GROUP, ns.address, compress_msg_body_over_howmuch=2**31 - 1)
        tx = TransactionProducer(TX_GROUP, ns.address,
                                 execute_local_transaction=lambda m, seq: tx_local_state(seq),
                                 check_local_transaction=self._check)
        consumer = self._consumer(ns.address, "soak-consumer-1")
        await producer.start()
        await tx.start()
        await consumer.start()
        loop = asyncio.get_running_loop()
        self.began = time.monotonic()
        end = loop.time() + o.minutes * 60
        print("| " + " | ".join(COLUMNS) + " |", flush=True)
        print("|" + "---|" * len(COLUMNS), flush=True)
        background = [asyncio.create_task(self._lag_monitor(), name="soak-lag"),
                      asyncio.create_task(self._reporter(end), name="soak-reporter"),
                      asyncio.create_task(self._restarts(end), name="soak-restarts"),
                      asyncio.create_task(self._rebalances(ns.address, end), name="soak-rebalances")]
        try:
            await asyncio.gather(*(self._worker(producer, tx, end) for _ in range(o.concurrency)))
            await asyncio.gather(*background[1:])
            # Drain: wait for every acknowledged message the consumers should get.
            self.traffic_done = True
            self._settle(0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.drained.wait(), o.drain_seconds)
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await consumer.shutdown()
            await tx.shutdown()
            await producer.shutdown()
        expected, lost, dups, rolled_back, failed = self._verdict()
        outside, in_stalls = self._failures()
        print(f"SOAK ops={self.seq} acknowledged={expected} lost={lost} duplicates={dups} "
              f"rolled_back_delivered={rolled_back} failed={failed} "
              f"failed_outside_restarts={outside} failed_in_client_stalls={in_stalls} "
              f"client_stalls={len(self.stalls)} restarts={len(self.restarts)} "
              f"reports={self.rows}", flush=True)
        return 0 if lost == 0 and rolled_back == 0 and outside == 0 else 1

    def stop_servers(self) -> None:
        for server in [*self.brokers.values(), *([self.namesrv] if self.namesrv else [])]:
            server.stop()


def _parser() -> argparse.ArgumentParser:
    d = Options()
    p = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--minutes", type=float, default=d.minutes, help="length of the traffic phase")
    p.add_argument("--interval", type=float, default=d.interval, help="seconds between report rows")
    p.add_argument("--rate", type=float, default=d.rate, help="operations a second in all")
    p.add_argument("--concurrency", type=int, default=d.concurrency, help="paced workers")
    p.add_argument("--size", type=int, default=d.size, help="body size in bytes")
    p.add_argument("--restart-every", type=float, default=d.restart_every,
                   help="seconds between two restarts of soak-b")
    p.add_argument("--restart-grace", type=float, default=d.restart_grace,
                   help="seconds after a restarted broker is ready in which failed sends are "
                        "counted as the restart's")
    p.add_argument("--rebalance-every", type=float, default=d.rebalance_every,
                   help="seconds between a second consumer joining or leaving the group")
    p.add_argument("--drain-seconds", type=float, default=d.drain_seconds,
                   help="at most this long for the consumers to catch up at the end")
    p.add_argument("--keep", action="store_true", help="keep the work dir (stores and logs)")
    p.add_argument("--log-level", default="ERROR",
                   help="this process's (the clients') log level, to stderr (default ERROR)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    options = Options(**{k: v for k, v in vars(args).items() if k != "log_level"})
    if options.rate <= 0 or options.concurrency <= 0 or options.interval <= 0:
        raise SystemExit("soak: --rate, --concurrency and --interval must be positive")
    configure_logging("console", args.log_level)
    install_uvloop()
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    soak = Soak(options, workdir)
    try:
        return asyncio.run(soak.run())
    except KeyboardInterrupt:
        return 130
    finally:
        soak.stop_servers()
        if options.keep:
            print(f"# work dir kept: {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

