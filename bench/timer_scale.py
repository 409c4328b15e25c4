"""Timer messages at scale: many pending timers over three days, what they cost the broker.

One broker (ours; with ``--servers ours,stock`` also stock 5.3.3's from the Maven cache,
``timerWheelEnable=true``, with its own nameserver; the classpath ``make java-deps`` builds in
tests/interop/java5) and one nameserver on 127.0.0.1, our ``Producer`` with
``--window`` async sends in flight:

1. ``--plain`` plain messages (128 B): the send rate without timers;
2. ``--timers`` timer messages (128 B), ``deliver_time_ms`` spread evenly over
   ``[now + 10 min, now + 3 days - 10 min]``: the send rate with timers, then the wait until
   the broker has moved every one of them into its wheel (runtime info
   ``timerOffsetBehind`` = 0), and a plain round again, with the timers pending;
3. the broker stopped (SIGTERM) and started again over the same store: time from launch to
   the readiness line; then SIGKILLed and started again; after each, the time until the
   first plain send succeeds, and the pending count (``timerCongestNum``) when it has one.

Printed per broker: RSS (and its anonymous part: mapped files' pages are the rest) once ready, after the plain round, after the timers were enqueued,
after each restart; the store's timer files on disk. Nothing is asserted: a run on a
loaded 2-core machine gives that machine's figures (load average printed).

Run: ``python -m aiorocketmq.bench.timer_scale`` (1,000,000 timers; quick:
``--timers 2000 --plain 2000``).
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.bench._procs import ServerProcess, broker_process, namesrv_process
from aiorocketmq.client import Message, Producer
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig

__all__ = ["main", "run_side", "rss_mib", "dir_mib"]

DAY_MS = 24 * 3600 * 1000
MARGIN_MS = 10 * 60 * 1000
TOPIC = "TimerScale"


def rss_mib(pid: int) -> str:
    """VmRSS, and its anonymous part (the heap; the rest is mapped files' pages, which the
    kernel may drop), MiB."""
    fields: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) / 1024
    return (f"{fields.get('VmRSS', 0):,.0f} MiB (anon {fields.get('RssAnon', 0):,.0f}, "
            f"files {fields.get('RssFile', 0):,.0f})")


def dir_mib(path: Path) -> tuple[float, float]:
    """(apparent size, allocated blocks) of a file or a directory tree, MiB."""
    paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    size = blocks = 0
    for p in paths:
        st = p.stat()
        size += st.st_size
        blocks += st.st_blocks * 512
    return size / 2**20, blocks / 2**20


class Side:
    """How to start, stop and find the store of one side's broker."""

    def __init__(self, name: str, tmp: Path, namesrv_addr: str, start: Callable[[], ServerProcess],
                 store: Path) -> None:
        self.name, self.tmp, self.namesrv_addr, self._start, self.store = name, tmp, namesrv_addr, start, store
        self.broker: ServerProcess | None = None

    def start(self) -> tuple[ServerProcess, float]:
        t0 = time.monotonic()
        self.broker = self._start().start(timeout=600)
        return self.broker, time.monotonic() - t0


def ours(tmp: Path, namesrv_addr: str) -> Side:
    conf = {"timerWheelEnable": "true", "brokerName": "broker-a",
            "mappedFileSizeCommitLog": str(256 * 2**20)}

    def start() -> ServerProcess:
        return broker_process(tmp, namesrv_addr, conf=conf)

    return Side("ours", tmp, namesrv_addr, start, tmp / "broker-a" / "store")


def _java5_classpath() -> str:
    """The stock 5.3.3 classpath ``make java-deps`` builds (tests/interop/java5 of a checkout)."""
    java5 = Path(os.environ.get("AIOROCKETMQ_STOCK5_HARNESS")
                 or Path(__file__).resolve().parents[1] / "tests" / "interop" / "java5")
    cp = java5 / "target" / "classpath.txt"
    if not cp.is_file():
        raise SystemExit(f"{cp} is missing: run `make java-deps` for the stock 5.3.3 side")
    return f"{java5 / 'target' / 'classes'}{os.pathsep}{cp.read_text().strip()}"


def stock_namesrv5(tmp: Path) -> ServerProcess:
    from aiorocketmq.bench._stock import (
        NAMESRV_MAIN,
        SERVER_HEAP,
        STOCK_NAMESRV_READY,
        JavaServer,
        free_port,
        jvm_args,
        require_java,
    )

    home = tmp / "stock5-namesrv"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    address = f"127.0.0.1:{port}"
    conf = home / "namesrv.properties"
    conf.write_text(f"listenPort={port}\nkvConfigPath={home / 'kvConfig.json'}\n")
    argv = [require_java().java, *jvm_args(tmp, home, address, heap=SERVER_HEAP), "-cp",
            _java5_classpath(), NAMESRV_MAIN, "-c", str(conf)]
    return JavaServer(argv, STOCK_NAMESRV_READY, address=address, home=home,
                      logs=[home / "logs" / "rocketmqlogs" / "namesrv.log"])


def stock(tmp: Path, namesrv_addr: str) -> Side:
    """Stock 5.3.3's broker with the timing wheel, as tests/interop/stock5.py starts it."""
    from aiorocketmq.bench._procs import BROKER_READY
    from aiorocketmq.bench._stock import BROKER_MAIN, JavaServer, free_port, jvm_args, require_java

    home = tmp / "stock5-broker"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port(offsets=(-2, 0, 1))
    store = home / "store"
    settings = {
        "brokerClusterName": "DefaultCluster", "brokerName": "broker5-a", "brokerId": "0",
        "listenPort": str(port), "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "mappedFileSizeCommitLog": str(256 * 2**20), "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true", "diskMaxUsedSpaceRatio": "95", "timerWheelEnable": "true",
        "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "namesrvAddr": namesrv_addr,
    }
    conf_path = home / "broker.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    heap = ["-Xms256m", "-Xmx1g", "-XX:MaxDirectMemorySize=1g"]
    argv = [require_java().java, *jvm_args(tmp, home, namesrv_addr, heap=heap), "-cp",
            _java5_classpath(), BROKER_MAIN, "-c", str(conf_path), "-n", namesrv_addr]

    def start() -> ServerProcess:
        return JavaServer(argv, BROKER_READY, address=f"127.0.0.1:{port}", home=home,
                          logs=[home / "logs" / "rocketmqlogs" / "broker.log"], startup_seconds_limit=600)

    return Side("stock", tmp, namesrv_addr, start, store)


async def send_round(namesrv_addr: str, count: int, window: int, timers: bool,
                     body: bytes) -> tuple[float, int]:
    """Send ``count`` messages, ``window`` in flight; (messages per second, failures)."""
    producer = Producer(f"TimerScalePG{random.randrange(10**6)}", namesrv_addr, send_msg_timeout_ms=30000)
    await producer.start()
    try:
        await producer.send(Message(TOPIC, body))  # the route, once
        now = int(time.time() * 1000)
        span = 3 * DAY_MS - 2 * MARGIN_MS
        sem = asyncio.Semaphore(window)
        failed: dict[str, int] = {}

        def done(_result: Any, exc: BaseException | None) -> None:
            if exc is not None:
                name = f"{type(exc).__name__}: {str(exc)[:60]}"
                failed[name] = failed.get(name, 0) + 1
            sem.release()

        t0 = time.monotonic()
        for i in range(count):
            msg = Message(TOPIC, body)
            if timers:
                msg.deliver_time_ms = now + MARGIN_MS + span * i // max(count, 1)
            await sem.acquire()
            producer.send_async(msg, callback=done)
        for _ in range(window):
            await sem.acquire()
        if failed:
            print(f"  failures: {failed}", file=sys.stderr, flush=True)
        return count / (time.monotonic() - t0), sum(failed.values())
    finally:
        await producer.shutdown()


async def runtime_info(namesrv_addr: str, addr: str) -> dict[str, str]:
    """The broker's runtime info; a refusal is reported in the table, not raised (stock 5.3.3
    answers SYSTEM_ERROR NoSuchElementException for a while after a restart)."""
    async with MQAdmin(namesrv_addr) as admin:
        try:
            return await admin.broker_runtime_info(addr)
        except Exception as exc:  # noqa: BLE001 - shown in the table
            return {"timerCongestNum": f"refused: {str(exc)[:90]}", "timerOffsetBehind": "0"}


async def create_topic(namesrv_addr: str, addr: str) -> None:
    """The topic, 4 queues, on the broker, and its route at the nameserver (stock 5.x's
    auto-creation waits for a registration round)."""
    async with MQAdmin(namesrv_addr) as admin:
        await admin.create_topic(addr, TopicConfig(TOPIC, 4, 4))
        deadline = time.monotonic() + 60
        while True:
            try:
                await admin.topic_route(TOPIC)
                return
            except Exception:  # noqa: BLE001 - not registered yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)


async def wait_enqueued(namesrv_addr: str, addr: str, deadline_s: float) -> float:
    """Seconds until ``timerOffsetBehind`` is 0 (every parked timer in the wheel)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        info = await runtime_info(namesrv_addr, addr)
        if info.get("timerOffsetBehind", "0") == "0":
            return time.monotonic() - t0
        await asyncio.sleep(0.5)
    return float("nan")


async def first_send(namesrv_addr: str) -> float:
    """Seconds until one plain send succeeds."""
    t0 = time.monotonic()
    producer = Producer(f"TimerScaleProbe{random.randrange(10**6)}", namesrv_addr)
    await producer.start()
    try:
        while True:
            try:
                await producer.send(Message(TOPIC, b"probe"))
                return time.monotonic() - t0
            except Exception:  # noqa: BLE001 - not ready yet
                await asyncio.sleep(0.1)
    finally:
        await producer.shutdown()


def run_side(side: Side, args: argparse.Namespace) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    body = b"x" * 128
    broker, boot = side.start()
    rows.append(("boot (empty store)", f"{boot:.2f} s"))
    rows.append(("RSS ready", rss_mib(broker.pid)))
    asyncio.run(create_topic(side.namesrv_addr, broker.address))
    rate, failed = asyncio.run(send_round(side.namesrv_addr, args.plain, args.window, False, body))
    rows.append((f"plain sends ({args.plain:,})", f"{rate:,.0f} msg/s, {failed} failed"))
    rows.append(("RSS after plain", rss_mib(broker.pid)))
    rate, failed = asyncio.run(send_round(side.namesrv_addr, args.timers, args.window, True, body))
    rows.append((f"timer sends ({args.timers:,}, 3 days)", f"{rate:,.0f} msg/s, {failed} failed"))
    waited = asyncio.run(wait_enqueued(side.namesrv_addr, broker.address, args.deadline))
    rows.append(("wheel caught up after the sends", f"{waited:.1f} s"))
    rows.append(("RSS with the timers pending", rss_mib(broker.pid)))
    rate, failed = asyncio.run(send_round(side.namesrv_addr, args.plain, args.window, False, body))
    rows.append(("plain sends, timers pending", f"{rate:,.0f} msg/s, {failed} failed"))
    info = asyncio.run(runtime_info(side.namesrv_addr, broker.address))
    rows.append(("pending (timerCongestNum)", info.get("timerCongestNum", "-")))
    for name in ("timerwheel", "timerlog", "commitlog"):
        path = side.store / name
        if path.exists():
            size, used = dir_mib(path)
            rows.append((f"disk {name}", f"{size:,.0f} MiB ({used:,.0f} MiB allocated)"))
    for how in ("SIGTERM", "SIGKILL"):
        if how == "SIGTERM":
            broker.stop(timeout=120)
        else:
            broker.kill()
        broker, boot = side.start()
        rows.append((f"restart after {how}: ready", f"{boot:.2f} s"))
        rows.append((f"restart after {how}: first send", f"{asyncio.run(first_send(side.namesrv_addr)):.2f} s"))
        rows.append((f"RSS after {how} restart", rss_mib(broker.pid)))
        info = asyncio.run(runtime_info(side.namesrv_addr, broker.address))
        rows.append((f"pending after {how} restart", info.get("timerCongestNum", "-")))
    broker.stop(timeout=120)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", type=int, default=1_000_000)
    parser.add_argument("--plain", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--deadline", type=float, default=1800.0,
                        help="seconds to wait for the wheel to catch up")
    parser.add_argument("--servers", default="ours")
    parser.add_argument("--tmp", default=None, help="directory for stores and logs (kept)")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    for name in args.servers.split(","):
        with tempfile.TemporaryDirectory(prefix="timer_scale_", dir=args.tmp) as d:
            tmp = Path(d)
            ns = (namesrv_process(tmp) if name == "ours" else stock_namesrv5(tmp)).start()
            try:
                side = (ours if name == "ours" else stock)(tmp, ns.address)
                try:
                    rows = run_side(side, args)
                finally:
                    if side.broker is not None:
                        side.broker.stop(timeout=120)
                        print(f"---- {name} broker log tail ----\n{side.broker.log_tail(15)}", file=sys.stderr)
            finally:
                ns.stop()
        width = max(len(k) for k, _ in rows)
        print(f"\n{name} broker, {args.timers:,} timers, {args.plain:,} plain, window {args.window}")
        for key, value in rows:
            print(f"  {key:<{width}}  {value}")
    print(f"load average {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
