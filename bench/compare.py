"""Our broker and client beside stock Apache RocketMQ 4.9.7, on one machine, in one run.

Starts our nameserver + broker and the stock 4.9.7 nameserver + broker (Maven Central
jars built by ``make java-deps``; ``bench/_stock.py`` starts them), preloads one
backlog topic on each broker with batch sends, then runs every scenario for every
(client, broker) pair, ``--runs`` times, rotating the order of the pairs each round:

* ``sync``: ``--messages`` sends of ``--size`` B, ``--inflight`` (16) senders each waiting
  for its answer (stock: 16 threads; ours: 16 coroutines, ``mqbench.run_producer``);
* ``async``: the same count with at most ``--async-inflight`` unanswered sends;
* ``batch``: the same count in batch sends of ``--batch`` messages, one batch at a time,
  round robin over the topic's queues (stock: ``Bench.java preload``);
* ``consume``: a push consumer of a fresh group draining the ``--backlog`` messages
  preloaded on that broker (the clock starts at the first delivery).

Both clients encode request headers as ``--serialize`` says (default ROCKETMQ, as stock's
benchmark Producer is run to size a broker; JSON headers cost a client more and hide part
of a broker's cost), through ``ROCKETMQ_SERIALIZE_TYPE`` in their environment, which the
stock client and ours both read. Clients are processes of their own: the stock side is ``tests/interop/java/.../Bench.java``
on the stock client, ours is ``python -m aiorocketmq.bench.compare client ...`` (sends through
``mqbench.run_producer``; the consumer's listener only counts, as Bench.java's). Each reports
its own CPU seconds over the measured part; the broker's CPU is read from ``/proc`` around
the client's run. The table gives, per scenario and pair, the median msg/s over the runs,
its ratio to stock-client-on-stock-broker, and CPU microseconds per message of client and
broker (medians), then the ratios the goals are stated in. Machine load (``uptime``) is
printed at the start and the end: on a shared machine, compare ratios within one run.

The stock JVMs get C2 and a 1 GiB heap here (the interop tests run them with C1 only).

Run: ``python -m aiorocketmq.bench.compare --messages 100000 --backlog 300000 --runs 3``
(quick: ``--messages 2000 --backlog 2000 --runs 1``).
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ("sync", "async", "batch", "consume")
CLIENTS = ("stock", "ours")
BROKERS = ("stock", "ours")
# After the harness's defaults (C1 only, small heaps): C2 and room, later flags win.
STOCK_SERVER_JVM = ["-XX:TieredStopAtLevel=4", "-Xms512m", "-Xmx1g", "-XX:MaxDirectMemorySize=1g"]
STOCK_CLIENT_JVM = ["-XX:TieredStopAtLevel=4", "-Xms256m", "-Xmx512m"]
BENCH_MAIN = "io.aiorocketmq.interop.Bench"


def uptime() -> str:
    try:
        with open("/proc/loadavg") as f:
            return "load average " + ", ".join(f.read().split()[:3])
    except OSError:
        return "load average unknown"


def process_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class Sample:
    """One client run: what the client measured, and the broker's CPU around it."""

    count: int
    seconds: float
    client_cpu: float
    broker_cpu: float
    errors: int

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class Broker:
    name: str  # "stock" / "ours"
    namesrv: str
    pid: int
    backlog_topic: str = ""


@dataclass
class Results:
    samples: dict[tuple[str, str, str], list[Sample]] = field(default_factory=dict)

    def add(self, scenario: str, client: str, broker: str, s: Sample) -> None:
        self.samples.setdefault((scenario, client, broker), []).append(s)

    def median(self, scenario: str, client: str, broker: str) -> tuple[float, float, float] | None:
        got = self.samples.get((scenario, client, broker))
        if not got:
            return None
        return (statistics.median(s.rate for s in got),
                statistics.median(s.client_cpu / max(s.count, 1) * 1e6 for s in got),
                statistics.median(s.broker_cpu / max(s.count, 1) * 1e6 for s in got))

    def table(self) -> str:
        lines = [f"{'scenario':<8} {'client':<6} {'broker':<6} {'msg/s':>10} {'x stock':>8} "
                 f"{'client us/msg':>14} {'broker us/msg':>14} {'runs':>5} {'errors':>6}"]
        for scenario in SCENARIOS:
            base = self.median(scenario, "stock", "stock")
            for client in CLIENTS:
                for broker in BROKERS:
                    m = self.median(scenario, client, broker)
                    if m is None:
                        continue
                    got = self.samples[(scenario, client, broker)]
                    ratio = f"{m[0] / base[0]:.2f}x" if base and base[0] else "-"
                    lines.append(f"{scenario:<8} {client:<6} {broker:<6} {m[0]:>10,.0f} "
                                 f"{ratio:>8} {m[1]:>14.1f} {m[2]:>14.1f} {len(got):>5} "
                                 f"{sum(s.errors for s in got):>6}")
        lines.append("")
        lines.append("ratios (medians): ")
        for scenario in SCENARIOS:
            def r(a: tuple[str, str], b: tuple[str, str], sc: str = scenario) -> str:
                x, y = self.median(sc, *a), self.median(sc, *b)
                return f"{x[0] / y[0]:.2f}x" if x and y and y[0] else "-"
            lines.append(
                f"  {scenario:<8} our broker / stock broker (stock client) {r(('stock', 'ours'), ('stock', 'stock'))}"
                f" | our client / stock client (our broker) {r(('ours', 'ours'), ('stock', 'ours'))}"
                f" | (stock broker) {r(('ours', 'stock'), ('stock', 'stock'))}"
                f" | ours-on-ours / stock-on-stock {r(('ours', 'ours'), ('stock', 'stock'))}")
        return "\n".join(lines)


# -- clients --------------------------------------------------------------------------------


class Clients:
    """Runs one client process per measurement and returns its Sample."""

    def __init__(self, tmp: Path, args: argparse.Namespace) -> None:
        from aiorocketmq.bench._stock import CLIENT_HEAP, jvm_args, require_java

        self.tmp = tmp
        self.args = args
        env = require_java()
        self._java = [env.java]
        self._classpath = env.classpath
        self._jvm_args = jvm_args
        self._heap = CLIENT_HEAP
        self._n = 0

    def _stock_cmd(self, mode: str, namesrv: str, options: dict[str, Any]) -> list[str]:
        self._n += 1
        home = self.tmp / "stock-clients" / f"{mode}-{self._n}"
        return [*self._java, *self._jvm_args(self.tmp, home, namesrv, heap=self._heap),
                *STOCK_CLIENT_JVM, "-cp", self._classpath, BENCH_MAIN, mode, "--namesrv", namesrv,
                *[x for k, v in options.items() for x in (f"--{k}", str(v))]]

    @staticmethod
    def _ours_cmd(mode: str, namesrv: str, options: dict[str, Any]) -> list[str]:
        return [sys.executable, "-m", "aiorocketmq.bench.compare", "client", mode,
                "--namesrv", namesrv, *[x for k, v in options.items() for x in (f"--{k}", str(v))]]

    def run(self, client: str, mode: str, broker: Broker, options: dict[str, Any]) -> Sample:
        cmd = (self._stock_cmd if client == "stock" else self._ours_cmd)(mode, broker.namesrv,
                                                                         options)
        b0 = process_cpu_seconds(broker.pid)
        env = dict(os.environ)
        serialize = getattr(self.args, "serialize", None)  # bench.scale keeps the client default
        if serialize:
            env["ROCKETMQ_SERIALIZE_TYPE"] = serialize
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO), env=env,
                              timeout=self.args.timeout, check=False)
        b1 = process_cpu_seconds(broker.pid)
        line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("{")), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"{client} client {mode} on {broker.name} broker failed "
                               f"(exit {done.returncode}):\n{done.stdout[-2000:]}\n"
                               f"{done.stderr[-3000:]}")
        r = json.loads(line)
        return Sample(int(r["count"]), float(r["seconds"]), float(r["cpu"]), b1 - b0,
                      int(r["errors"]))


async def _ours_client(args: argparse.Namespace) -> dict[str, Any]:
    """Our client's side of one measurement (``compare client MODE``)."""
    from aiorocketmq.bench.mqbench import run_producer

    if args.mode == "preload":
        from aiorocketmq.client import Message, Producer

        producer = Producer(args.group, args.namesrv)
        await producer.start()
        try:
            body = b"x" * args.size
            t0, c0 = time.perf_counter(), time.process_time()
            sent = 0
            while sent < args.count:
                k = min(args.batch, args.count - sent)
                await producer.send([Message(args.topic, body) for _ in range(k)])
                sent += k
            return {"count": sent, "seconds": time.perf_counter() - t0,
                    "cpu": time.process_time() - c0, "errors": 0}
        finally:
            await producer.shutdown()
    if args.mode == "consume":
        return await _ours_consume(args)
    r = await run_producer(args.namesrv, args.topic, size=args.size, concurrency=args.inflight,
                           count=args.count, mode=args.mode, quiet=True, group=args.group)
    return {"count": r.total, "seconds": r.seconds, "cpu": r.client_cpu_us * r.total / 1e6,
            "errors": r.failures}


async def _ours_consume(args: argparse.Namespace) -> dict[str, Any]:
    """Bench.java's consume, on our PushConsumer: a listener that only counts, the clock
    (and CPU) from the first delivery to the count-th message, every message counted."""
    from aiorocketmq.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer

    received = 0
    first = (0.0, 0.0)
    done = asyncio.Event()

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        nonlocal received, first
        if not received:
            first = (time.perf_counter(), time.process_time())
        received += len(msgs)
        if received >= args.count:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(args.group, args.namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(args.topic, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    errors = 0
    try:
        async with asyncio.timeout(args.timeout):
            await done.wait()
    except TimeoutError:
        errors = 1
    finally:
        end = (time.perf_counter(), time.process_time())
        await consumer.shutdown()
    return {"count": received, "seconds": end[0] - first[0], "cpu": end[1] - first[1],
            "errors": errors}


def client_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="compare client")
    p.add_argument("mode", choices=("sync", "async", "consume", "preload"))
    p.add_argument("--namesrv", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--inflight", type=int, default=16)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--group", default="compare_ours")
    p.add_argument("--timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    from aiorocketmq.protocol.runtime import configure_logging, install_uvloop

    configure_logging("console", "WARNING")
    install_uvloop()
    print(json.dumps(asyncio.run(_ours_client(args))), flush=True)
    return 0


# -- servers --------------------------------------------------------------------------------


@contextmanager
def brokers(tmp: Path, args: argparse.Namespace) -> Iterator[dict[str, Broker]]:
    from aiorocketmq.bench._procs import broker_process, namesrv_process
    from aiorocketmq.bench._stock import start_stock_broker, start_stock_namesrv, stop_all

    started: list[Any] = []
    try:
        ns = namesrv_process(tmp, "--log-level", "WARNING").start()
        started.append(ns)
        ours = broker_process(tmp, ns.address, name="broker-ours", extra=("--log-level", "WARNING"),
                              conf={"mappedFileSizeCommitLog": str(256 * 1024 * 1024),
                                    "mappedFileSizeConsumeQueue": str(20 * 300_000),
                                    "autoCreateTopicEnable": "true"}).start()
        started.append(ours)
        sns = start_stock_namesrv(tmp, jvm_extra=STOCK_SERVER_JVM)
        started.append(sns)
        sb = start_stock_broker(tmp, sns.address, name="broker-stock", jvm_extra=STOCK_SERVER_JVM,
                                conf={"mappedFileSizeCommitLog": str(256 * 1024 * 1024)})
        started.append(sb)
        yield {"ours": Broker("ours", ns.address, ours.pid),
               "stock": Broker("stock", sns.address, sb.pid)}
    finally:
        stop_all(reversed(started))


def _rotations(pairs: list[tuple[str, str]], run: int) -> list[tuple[str, str]]:
    k = run % len(pairs)
    order = pairs[k:] + pairs[:k]
    return order if run % 2 == 0 else order[::-1]


def compare_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000, help="sends per sync/async run")
    p.add_argument("--backlog", type=int, default=300_000, help="messages each consume run drains")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--inflight", type=int, default=16, help="sync senders")
    p.add_argument("--async-inflight", type=int, default=128, help="unanswered async sends")
    p.add_argument("--batch", type=int, default=64, help="messages per batch send")
    p.add_argument("--serialize", choices=("ROCKETMQ", "JSON"), default="ROCKETMQ",
                   help="request header encoding of both clients (default ROCKETMQ)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--brokers", default=",".join(BROKERS))
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per client run")
    p.add_argument("--keep", action="store_true", help="keep the stores and logs")
    args = p.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    pairs = [(c, b) for c in args.clients.split(",") for b in args.brokers.split(",")]
    print(f"compare: {uptime()} at start; messages={args.messages} backlog={args.backlog} "
          f"size={args.size} runs={args.runs} serialize={args.serialize}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="compare-"))
    results = Results()
    try:
        with brokers(tmp, args) as running:
            clients = Clients(tmp, args)
            if "consume" in scenarios:
                for b in {b for _, b in pairs}:
                    broker = running[b]
                    broker.backlog_topic = f"CmpBacklog_{b}"
                    s = clients.run("stock", "preload", broker,
                                    {"topic": broker.backlog_topic, "count": args.backlog,
                                     "size": args.size, "batch": 64, "group": "compare_preload"})
                    print(f"preloaded {s.count} x {args.size} B on the {b} broker with stock batch "
                          f"sends in {s.seconds:.1f} s ({s.rate:,.0f} msg/s)", flush=True)
            for run in range(args.runs):
                for scenario in scenarios:
                    for client, b in _rotations(pairs, run):
                        broker = running[b]
                        group = f"cmp_{scenario}_{client}_{run}"
                        mode = scenario
                        if scenario == "consume":
                            options: dict[str, Any] = {"topic": broker.backlog_topic,
                                                       "count": args.backlog, "group": group}
                        elif scenario == "batch":
                            mode = "preload"
                            options = {"topic": f"Cmp_{scenario}_{client}_{run}",
                                       "count": args.messages, "size": args.size, "group": group,
                                       "batch": args.batch}
                        else:
                            options = {"topic": f"Cmp_{scenario}_{client}_{run}",
                                       "count": args.messages, "size": args.size, "group": group,
                                       "inflight": args.inflight if scenario == "sync"
                                       else args.async_inflight}
                        s = clients.run(client, mode, broker, options)
                        results.add(scenario, client, b, s)
                        print(f"run {run} {scenario:<7} {client:>5} client, {b:>5} broker: "
                              f"{s.count} in {s.seconds:6.2f} s = {s.rate:>9,.0f} msg/s, cpu us/msg "
                              f"client {s.client_cpu / max(s.count, 1) * 1e6:6.1f} broker "
                              f"{s.broker_cpu / max(s.count, 1) * 1e6:6.1f}, errors {s.errors}",
                              flush=True)
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    print(flush=True)
    print(results.table())
    print(f"compare: {uptime()} at the end", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["client"]:
        return client_main(argv[1:])
    return compare_main(argv)


if __name__ == "__main__":
    sys.exit(main())
