"""``mqbench``: producer, consumer and long-poll benchmarks against a nameserver + broker.

Shaped like upstream's ``benchmark/producer.sh`` / ``consumer.sh``
(``example/.../benchmark/Producer.java`` and ``Consumer.java``)::

    mqbench producer -n NAMESRV [-t TOPIC] [-s SIZE] [-w CONCURRENCY] [-k] [-c TAGS]
                     [--count N | --seconds S] [--mode sync|async|oneway] [--interval S]
    mqbench consumer -n NAMESRV [-t TOPIC] [-g GROUP] [--count N | --seconds S]
    mqbench longpoll -n NAMESRV [-t TOPIC] [--tries N]
    mqbench all --embedded [--seconds S] [--flush ASYNC_FLUSH|SYNC_FLUSH]

Every ``--interval`` seconds (10 by default, as upstream) a line gives the TPS, average
RT and max RT of that window; one ``[Complete]`` line at the end gives TPS, average RT,
max RT, total and failures of the whole run. ``longpoll`` parks a PULL_MESSAGE
(SUSPEND flag) at the end of a queue, sends one message from another connection, and
reports the time from issuing that send to the pull's answer (p50/p90/p99/max over
``--tries``): an upper bound of the broker's wake-up latency, since it also counts the
send's trip to the broker and the store append.

``all --embedded`` starts ``mqnamesrv`` and ``mqbroker`` as subprocesses (port 0, a
temporary store, so client and broker each get a process, as in production) and runs
the three scenarios: sync sends of 128 B with 16 in flight, a consumer draining that
backlog, and long-poll wake-ups. It prints one figure per target. Clients are ours:
``client.Producer``, ``client.PushConsumer`` and, for the bare pull of ``longpoll``,
``MQClientAPI``. Nothing here asserts a duration; this is a measuring tool.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from aiorocketmq.protocol.codes import PullSysFlag
from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.protocol.headers import PullMessageRequestHeader
from aiorocketmq.protocol.runtime import configure_logging, install_uvloop

__all__ = ["main", "Stats", "run_producer", "run_consumer", "run_longpoll", "EmbeddedCluster"]

_NAMESRV_READY = re.compile(r"The Name Server boot success\. serializeType=\w+ address=(\S+)")
_BROKER_READY = re.compile(r"The broker\[[^,]+, ([^\]]+)\] boot success")


# --- statistics ---------------------------------------------------------------------------


class Stats:
    """Counters of one run: successes with their RT sum and max, failures by kind.

    ``window()`` returns the figures since the previous call (the periodic line);
    ``total()`` those since the start (the summary line). RTs are milliseconds.
    """

    __slots__ = ("ok", "send_failed", "response_failed", "rt_sum", "rt_max", "started",
                 "_last_t", "_last_ok", "_last_rt", "_win_max", "_clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.ok = 0
        self.send_failed = 0
        self.response_failed = 0
        self.rt_sum = 0.0
        self.rt_max = 0.0
        self._win_max = 0.0
        self._last_t = self.started
        self._last_ok = 0
        self._last_rt = 0.0

    def success(self, rt_ms: float) -> None:
        self.ok += 1
        self.rt_sum += rt_ms
        if rt_ms > self._win_max:
            self._win_max = rt_ms
            if rt_ms > self.rt_max:
                self.rt_max = rt_ms

    @property
    def failed(self) -> int:
        return self.send_failed + self.response_failed

    def window(self) -> tuple[float, float, float]:
        """(TPS, average RT, max RT) since the previous call."""
        now = self._clock()
        n = self.ok - self._last_ok
        tps = n / (now - self._last_t) if now > self._last_t else 0.0
        avg = (self.rt_sum - self._last_rt) / n if n else 0.0
        peak = self._win_max
        self._last_t, self._last_ok, self._last_rt, self._win_max = now, self.ok, self.rt_sum, 0.0
        return tps, avg, peak

    def total(self, end: float | None = None) -> tuple[float, float, float]:
        """(TPS, average RT, max RT) of the whole run (until ``end``, default now)."""
        elapsed = (end if end is not None else self._clock()) - self.started
        tps = self.ok / elapsed if elapsed > 0 else 0.0
        avg = self.rt_sum / self.ok if self.ok else 0.0
        return tps, avg, self.rt_max


def _now_str() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{int(t * 1000) % 1000:03d}"


async def _report_routine(stats: Stats, interval: float, label: str) -> None:
    while True:
        await asyncio.sleep(interval)  # a reporting period, not a synchronisation
        tps, avg, peak = stats.window()
        print(f"Current Time: {_now_str()} {label} TPS: {tps:.0f} Max RT(ms): {peak:.0f} "
              f"Average RT(ms): {avg:7.3f} {label} Failed: {stats.send_failed} "
              f"Response Failed: {stats.response_failed}", flush=True)


@dataclass(slots=True)
class RunResult:
    """What a producer or consumer run measured (``tps`` over the whole run)."""

    tps: float
    avg_rt_ms: float
    max_rt_ms: float
    total: int
    failures: int
    seconds: float
    client_cpu_us: float = 0.0  # this process's CPU time per message
    server_cpu_us: float | None = None  # the broker's, when its pid is known

    def line(self, label: str) -> str:
        text = (f"[Complete] {label} TPS: {self.tps:.0f} Average RT(ms): {self.avg_rt_ms:7.3f} "
                f"Max RT(ms): {self.max_rt_ms:.0f} {label} Total: {self.total} "
                f"Failures: {self.failures} Seconds: {self.seconds:.1f}")
        # CPU per message does not depend on what else the machine runs: 1e6 / cpu_us is
        # the rate one process could sustain on a core of its own.
        text += f" ClientCPU(us/msg): {self.client_cpu_us:.1f}"
        if self.server_cpu_us is not None:
            text += f" BrokerCPU(us/msg): {self.server_cpu_us:.1f}"
        return text


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _CpuMeter:
    """CPU seconds used by this process and (optionally) the broker between start and stop."""

    __slots__ = ("broker_pid", "_c0", "_b0")

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self._c0 = time.process_time()
        self._b0 = process_cpu_seconds(broker_pid) if broker_pid else None

    def per_message(self, n: int) -> tuple[float, float | None]:
        n = max(n, 1)
        client = (time.process_time() - self._c0) / n * 1e6
        server = None
        if self.broker_pid and self._b0 is not None:
            b1 = process_cpu_seconds(self.broker_pid)
            if b1 is not None:
                server = (b1 - self._b0) / n * 1e6
        return client, server


# --- producer -----------------------------------------------------------------------------


async def run_producer(namesrv: str, topic: str, *, size: int = 128, concurrency: int = 64,
                       keys: bool = False, tags: str | None = None, count: int | None = None,
                       seconds: float | None = None, mode: str = "sync",
                       interval: float = 10.0, group: str = "benchmark_producer",
                       quiet: bool = False, broker_pid: int | None = None) -> RunResult:
    """Send ``size``-byte messages with ``concurrency`` sends in flight until ``count``
    messages or ``seconds`` elapse (whichever is given; default 60 s)."""
    if count is None and seconds is None:
        seconds = 60.0
    body = b"x" * size
    stats = Stats()
    issued = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds if seconds is not None else float("inf")
    clock = time.monotonic

    def may_issue() -> bool:
        nonlocal issued
        if (count is not None and issued >= count) or loop.time() >= deadline:
            return False
        issued += 1
        return True

    def message() -> Message:
        return Message(topic, body, tags=tags, keys=str(int(time.time())) if keys else None)

    producer = Producer(group, namesrv, compress_msg_body_over_howmuch=2**31 - 1)
    await producer.start()
    try:
        # One send outside the clock: the route lookup and topic auto-creation.
        await producer.send(message())

        async def sync_worker() -> None:
            while may_issue():
                begin = clock()
                try:
                    await producer.send(message())
                except MQBrokerError:
                    stats.response_failed += 1
                except Exception:
                    stats.send_failed += 1
                else:
                    stats.success((clock() - begin) * 1000)

        async def oneway_worker() -> None:
            while may_issue():
                begin = clock()
                try:
                    await producer.send_oneway(message())
                except Exception:
                    stats.send_failed += 1
                else:
                    stats.success((clock() - begin) * 1000)

        async def async_driver() -> None:
            permits = asyncio.Semaphore(concurrency)
            idle = asyncio.Event()
            idle.set()
            pending = 0

            def finished(begin: float, result: Any, exc: BaseException | None) -> None:
                nonlocal pending
                if exc is None:
                    stats.success((clock() - begin) * 1000)
                elif isinstance(exc, MQBrokerError):
                    stats.response_failed += 1
                else:
                    stats.send_failed += 1
                permits.release()
                pending -= 1
                if pending == 0:
                    idle.set()

            while True:
                await permits.acquire()
                if not may_issue():
                    permits.release()
                    break
                begin = clock()
                pending += 1
                idle.clear()
                producer.send_async(message(), callback=functools.partial(finished, begin))
            await idle.wait()

        stats.started = stats._last_t = clock()
        meter = _CpuMeter(broker_pid)
        reporter = asyncio.create_task(_report_routine(stats, interval, "Send")) if not quiet else None
        try:
            if mode == "async":
                await async_driver()
            else:
                worker = sync_worker if mode == "sync" else oneway_worker
                await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            end = clock()
            cpu = meter.per_message(stats.ok + stats.failed)
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
    finally:
        await producer.shutdown()
    tps, avg, peak = stats.total(end)
    return RunResult(tps, avg, peak, stats.ok + stats.failed, stats.failed, end - stats.started,
                     *cpu)


# --- consumer -----------------------------------------------------------------------------


async def run_consumer(namesrv: str, topic: str, group: str, *, count: int | None = None,
                       seconds: float | None = None, interval: float = 10.0,
                       consume_threads: int = 20, pull_batch_size: int = 32,
                       consume_batch_size: int = 1, quiet: bool = False,
                       broker_pid: int | None = None) -> RunResult:
    """Consume ``topic`` from its first offset until ``count`` messages or ``seconds``
    (default 60 s). RT is store-to-consumer (upstream's S2C) in milliseconds."""
    if count is None and seconds is None:
        seconds = 60.0
    stats = Stats()
    done = asyncio.Event()
    first = asyncio.Event()
    wall_ms = time.time
    clock = time.monotonic

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        if not first.is_set():
            first.set()
        now = wall_ms() * 1000
        for m in msgs:
            stats.success(max(now - m.store_timestamp, 0.0))
        if count is not None and stats.ok >= count:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                            consume_thread_max=consume_threads, pull_batch_size=pull_batch_size,
                            consume_message_batch_max_size=consume_batch_size)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    reporter: asyncio.Task[None] | None = None
    try:
        # The clock starts with the first delivery: rebalance and offset lookups are setup.
        async with asyncio.timeout(60):
            await first.wait()
        stats.started = stats._last_t = clock()
        ok_at_start = stats.ok
        meter = _CpuMeter(broker_pid)
        if not quiet:
            reporter = asyncio.create_task(_report_routine(stats, interval, "Consume"))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await done.wait()
        end = clock()
        cpu = meter.per_message(stats.ok - ok_at_start)
    finally:
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
        await consumer.shutdown()
    n = stats.ok - ok_at_start
    elapsed = end - stats.started
    _, avg, peak = stats.total(end)
    return RunResult(n / elapsed if elapsed > 0 else 0.0, avg, peak, n, stats.failed, elapsed, *cpu)


# --- long polling -------------------------------------------------------------------------


@dataclass(slots=True)
class LatencyResult:
    samples_ms: list[float]

    def percentile(self, p: float) -> float:
        s = sorted(self.samples_ms)
        if not s:
            return 0.0
        return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]

    def line(self) -> str:
        s = self.samples_ms
        return (f"[Complete] Long-poll wake-up (ms) p50: {self.percentile(50):.3f} "
                f"p90: {self.percentile(90):.3f} p99: {self.percentile(99):.3f} "
                f"max: {max(s) if s else 0.0:.3f} tries: {len(s)}")


async def run_longpoll(namesrv: str, topic: str, *, tries: int = 200, group: str = "benchmark_longpoll",
                       park_ms: float = 5.0) -> LatencyResult:
    """Park a pull at the end of queue 0, send one message to that queue, time the answer.

    ``park_ms`` is how long to leave the pull in flight before the send, so that it is
    parked on the broker rather than racing the message (a benchmark's pacing, not a
    synchronisation: a pull that arrives late simply finds the message, and the sample
    is still a valid upper bound).
    """
    sender = Producer(group + "_p", namesrv, instance_name="mqbench-longpoll-sender")
    puller = Producer(group + "_c", namesrv, instance_name="mqbench-longpoll-puller")
    await sender.start()
    await puller.start()
    samples: list[float] = []
    try:
        first = await sender.send(Message(topic, b"warm-up"))
        mq = first.message_queue
        assert puller.instance is not None and sender.instance is not None
        addr = sender.instance.find_broker_address_in_publish(mq.broker_name)
        assert addr is not None, f"no address for {mq.broker_name}"
        api = puller.instance.api
        offset = first.queue_offset + 1
        body = b"w" * 128
        clock = time.monotonic
        for _ in range(tries):
            header = PullMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=mq.queue_id, queue_offset=offset,
                max_msg_nums=32, sys_flag=PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION,
                commit_offset=0, suspend_timeout_millis=15_000, subscription="*", sub_version=0,
                expression_type="TAG")
            pull = asyncio.ensure_future(api.pull_message(addr, header, 30.0))
            await asyncio.sleep(park_ms / 1000)
            begin = clock()
            sent = asyncio.ensure_future(sender.send(Message(topic, body), mq))
            result = await pull
            samples.append((clock() - begin) * 1000)
            await sent
            if result.msg_found_list:
                offset = result.next_begin_offset
            else:
                offset += 1
    finally:
        await puller.shutdown()
        await sender.shutdown()
    return LatencyResult(samples)


# --- embedded cluster ---------------------------------------------------------------------


class EmbeddedCluster:
    """``mqnamesrv`` + ``mqbroker`` subprocesses on 127.0.0.1 (port 0) over a temp store."""

    def __init__(self, *, flush_disk_type: str = "ASYNC_FLUSH", keep_dir: bool = False) -> None:
        self.flush_disk_type = flush_disk_type
        self.keep_dir = keep_dir
        self.dir = Path(tempfile.mkdtemp(prefix="mqbench-"))
        self.procs: list[subprocess.Popen[str]] = []
        self.namesrv_addr = ""
        self.broker_addr = ""
        self.broker_pid: int | None = None

    def _spawn(self, argv: list[str], ready: re.Pattern[str], log_name: str,
               timeout: float = 60.0) -> tuple[subprocess.Popen[str], str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with (self.dir / log_name).open("ab") as log:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log,
                                    stdin=subprocess.DEVNULL, text=True, env=env,
                                    cwd=str(Path(__file__).resolve().parents[1]))
        self.procs.append(proc)
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"{argv[2]} not ready in {timeout}s; log: {self.dir / log_name}")
                if not sel.select(left):
                    continue
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"{argv[2]} exited early; log: {self.dir / log_name}")
                m = ready.search(line)
                if m:
                    return proc, m.group(1)

    def start(self) -> EmbeddedCluster:
        py = sys.executable
        _, self.namesrv_addr = self._spawn(
            [py, "-m", "aiorocketmq.server.namesrv.main", "--port", "0", "--log-level", "WARNING",
             "--kv-path", str(self.dir / "namesrv" / "kvConfig.json")],
            _NAMESRV_READY, "namesrv.log")
        conf = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-bench", "brokerId": "0",
            "listenPort": "0", "storePathRootDir": str(self.dir / "store"),
            "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
            "flushDiskType": self.flush_disk_type, "autoCreateTopicEnable": "true",
        }
        conf_path = self.dir / "broker.conf"
        conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        broker, self.broker_addr = self._spawn(
            [py, "-m", "aiorocketmq.server.broker.main", "-n", self.namesrv_addr, "-c", str(conf_path),
             "--log-level", "WARNING"], _BROKER_READY, "broker.log")
        self.broker_pid = broker.pid
        print(f"embedded nameserver {self.namesrv_addr} (pid {self.procs[0].pid}), broker "
              f"{self.broker_addr} (pid {broker.pid}, {self.flush_disk_type}), store {self.dir}",
              flush=True)
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs.clear()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def _cluster_or_address(args: argparse.Namespace) -> Iterator[tuple[str, int | None]]:
    """(nameserver address, broker pid when we started the broker, else ``--broker-pid``)."""
    if getattr(args, "embedded", False):
        with EmbeddedCluster(flush_disk_type=args.flush, keep_dir=args.keep_store) as cluster:
            yield cluster.namesrv_addr, cluster.broker_pid
    else:
        if not args.namesrv:
            raise SystemExit("mqbench: -n NAMESRV is required without --embedded")
        yield args.namesrv, args.broker_pid


# --- command line -------------------------------------------------------------------------


async def _all(namesrv: str, broker_pid: int | None, args: argparse.Namespace) -> int:
    topic = args.topic
    print(f"== sync send: {args.size} B, {args.concurrency} in flight, {args.seconds:.0f} s "
          "(target >= 20000 msg/s)", flush=True)
    sent = await run_producer(namesrv, topic, size=args.size, concurrency=args.concurrency,
                              seconds=args.seconds, mode="sync", interval=args.interval,
                              broker_pid=broker_pid)
    print(sent.line("Send"), flush=True)
    backlog = sent.total - sent.failures + 1
    print(f"== consume a backlog of {backlog} messages (target >= 50000 msg/s)", flush=True)
    consumed = await run_consumer(namesrv, topic, args.group, count=backlog,
                                  seconds=max(args.seconds * 4, 60.0), interval=args.interval,
                                  broker_pid=broker_pid)
    print(consumed.line("Consume"), flush=True)
    print(f"== long-poll wake-up over {args.tries} tries (target < 5 ms)", flush=True)
    lp = await run_longpoll(namesrv, topic + "_LP", tries=args.tries)
    print(lp.line(), flush=True)
    print(f"SUMMARY sync_send_tps={sent.tps:.0f} consume_tps={consumed.tps:.0f} "
          f"longpoll_p50_ms={lp.percentile(50):.3f} longpoll_p99_ms={lp.percentile(99):.3f} "
          f"send_cpu_us_per_msg(client/broker)={sent.client_cpu_us:.1f}/{sent.server_cpu_us or 0:.1f} "
          f"consume_cpu_us_per_msg(client/broker)={consumed.client_cpu_us:.1f}/"
          f"{consumed.server_cpu_us or 0:.1f}", flush=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqbench", description="aiorocketmq benchmarks")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, *, topic: str = "BenchmarkTest") -> None:
        sp.add_argument("-n", "--namesrv", help="name server address, e.g. 127.0.0.1:9876")
        sp.add_argument("-t", "--topic", default=topic,
                        help=f"topic (default {topic}; note that a broker with "
                             "autoCreateTopicEnable predefines BenchmarkTest with 1024 queues)")
        sp.add_argument("--interval", type=float, default=10.0,
                        help="seconds between progress lines (default 10)")
        sp.add_argument("--embedded", action="store_true",
                        help="start a nameserver + broker on a temporary store first")
        sp.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"),
                        help="embedded broker's flushDiskType")
        sp.add_argument("--keep-store", action="store_true", help="keep the embedded store dir")
        sp.add_argument("--broker-pid", type=int, default=None,
                        help="pid of a broker on this machine: also report its CPU per message")

    pr = sub.add_parser("producer", help="send messages (upstream benchmark Producer)")
    common(pr)
    pr.add_argument("-s", "--size", type=int, default=128, help="body size in bytes")
    pr.add_argument("-w", "--concurrency", type=int, default=64, help="sends in flight")
    pr.add_argument("-k", "--keys", action="store_true", help="set a key on every message")
    pr.add_argument("-c", "--tags", default=None, help="tag of every message")
    pr.add_argument("--mode", choices=("sync", "async", "oneway"), default="sync")
    g = pr.add_mutually_exclusive_group()
    g.add_argument("--count", type=int)
    g.add_argument("--seconds", type=float)

    co = sub.add_parser("consumer", help="consume a topic (upstream benchmark Consumer)")
    common(co)
    co.add_argument("-g", "--group", default="benchmark_consumer")
    co.add_argument("-w", "--consume-threads", type=int, default=20)
    co.add_argument("--pull-batch-size", type=int, default=32)
    co.add_argument("--consume-batch-size", type=int, default=1)
    g = co.add_mutually_exclusive_group()
    g.add_argument("--count", type=int)
    g.add_argument("--seconds", type=float)

    lp = sub.add_parser("longpoll", help="wake-up latency of a parked pull")
    common(lp)
    lp.add_argument("--tries", type=int, default=200)

    al = sub.add_parser("all", help="the three scenarios, as `make bench` shows them")
    # An auto-created topic (4 queues), not the predefined 1024-queue BenchmarkTest.
    common(al, topic="MQBenchTopic")
    al.add_argument("-s", "--size", type=int, default=128)
    al.add_argument("-w", "--concurrency", type=int, default=16)
    al.add_argument("-g", "--group", default="benchmark_consumer")
    al.add_argument("--seconds", type=float, default=10.0, help="length of the send phase")
    al.add_argument("--tries", type=int, default=200)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging("console", "WARNING")
    install_uvloop()

    async def go(namesrv: str, broker_pid: int | None) -> int:
        if args.command == "producer":
            print(f"topic: {args.topic} concurrency: {args.concurrency} messageSize: {args.size} "
                  f"keyEnable: {args.keys} tags: {args.tags} mode: {args.mode}", flush=True)
            r = await run_producer(namesrv, args.topic, size=args.size,
                                   concurrency=args.concurrency, keys=args.keys, tags=args.tags,
                                   count=args.count, seconds=args.seconds, mode=args.mode,
                                   interval=args.interval, broker_pid=broker_pid)
            print(r.line("Send"), flush=True)
            return 0 if r.failures == 0 else 1
        if args.command == "consumer":
            print(f"topic: {args.topic} group: {args.group} consumeThreads: "
                  f"{args.consume_threads}", flush=True)
            r = await run_consumer(namesrv, args.topic, args.group, count=args.count,
                                   seconds=args.seconds, interval=args.interval,
                                   consume_threads=args.consume_threads,
                                   pull_batch_size=args.pull_batch_size,
                                   consume_batch_size=args.consume_batch_size,
                                   broker_pid=broker_pid)
            print(r.line("Consume"), flush=True)
            return 0
        if args.command == "longpoll":
            lp = await run_longpoll(namesrv, args.topic, tries=args.tries)
            print(lp.line(), flush=True)
            return 0
        return await _all(namesrv, broker_pid, args)

    try:
        with _cluster_or_address(args) as (namesrv, broker_pid):
            return asyncio.run(go(namesrv, broker_pid))
    except KeyboardInterrupt:
        return 130

if __name__ == "__main__":
    sys.exit(main())
