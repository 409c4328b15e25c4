"""How cost grows with topics, stored messages, connections and group size; ours beside stock.

Four measurements, each printed as a table (ours and the stock 4.9.7 servers from the
Maven cache, started by ``bench/_stock.py``, on the same machine, one after the
other):

(a) ``--topics 1000,10000,50000``: one REGISTER_BROKER carrying N topics (8 queues each)
    sent to each nameserver (body size, time to the answer), then GET_ROUTEINFO_BY_TOPIC
    for random topics with 64 in flight for ``--lookup-seconds`` (requests/s); and a
    broker booted over a store whose ``config/topics.json`` holds the N topics: time to
    its readiness line and its RSS once ready.
(b) ``--messages`` (10M for the issue's figure; default 1M) x 128 B preloaded with batch
    sends, then the broker is stopped cleanly and restarted, then SIGKILLed and
    restarted: time from launch to the readiness line (recovery included), and whether
    every queue's max offset survived.
(c) ``--connections`` (10,000) idle clients: one TCP connection each, one HEART_BEAT
    each (a producer of its own group), then ``--idle-seconds`` of nothing: the broker's
    RSS growth and its CPU over the idle window.
(d) ``--members`` (50) of our PushConsumer in one group on a topic of ``--queues``
    (1,000) queues: time from the last member's start until every queue is held by
    exactly one member.

Everything runs on one machine: the figures are wall-clock times on whatever load it
has (printed). Run: ``python -m aiorocketmq.bench.scale`` (quick:
``--topics 100 --messages 2000 --connections 50 --members 3 --queues 12``);
``--only a,b,c,d`` picks parts, ``--servers ours,stock`` picks sides.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.bench.compare import STOCK_SERVER_JVM, Clients, process_cpu_seconds, uptime

SIDES = ("ours", "stock")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title]
    for r in cells:
        lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    return "\n".join(lines)


# -- servers --------------------------------------------------------------------------------


class Side:
    """Start/stop the nameserver and broker of one side with a given store directory."""

    def __init__(self, side: str, tmp: Path) -> None:
        self.side = side
        self.tmp = tmp / side
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.namesrv: Any = None
        self.broker: Any = None

    def start_namesrv(self) -> str:
        if self.side == "ours":
            from aiorocketmq.bench._procs import namesrv_process

            self.namesrv = namesrv_process(self.tmp, "--log-level", "WARNING").start()
        else:
            from aiorocketmq.bench._stock import start_stock_namesrv

            self.namesrv = start_stock_namesrv(self.tmp, jvm_extra=STOCK_SERVER_JVM)
        return str(self.namesrv.address)

    def broker_proc(self, name: str, conf: dict[str, str]) -> Any:
        assert self.namesrv is not None
        conf = {"mappedFileSizeCommitLog": str(256 * 1024 * 1024),
                "autoCreateTopicEnable": "true", **conf}
        if self.side == "ours":
            from aiorocketmq.bench._procs import broker_process

            conf.setdefault("mappedFileSizeConsumeQueue", str(20 * 300_000))
            return broker_process(self.tmp, self.namesrv.address, name=name, conf=conf,
                                  extra=("--log-level", "WARNING"))
        from aiorocketmq.bench._stock import stock_broker_process

        return stock_broker_process(self.tmp, self.namesrv.address, name=name, conf=conf,
                                    jvm_extra=STOCK_SERVER_JVM)

    def store_dir(self, name: str) -> Path:
        return self.tmp / name / "store" if self.side == "ours" else self.tmp / f"stock-{name}" / "store"

    def start_broker(self, name: str, conf: dict[str, str] | None = None) -> tuple[Any, float]:
        proc = self.broker_proc(name, conf or {})
        t0 = time.perf_counter()
        proc.start(timeout=600)
        self.broker = proc
        return proc, time.perf_counter() - t0

    def stop(self) -> None:
        for proc in (self.broker, self.namesrv):
            if proc is not None and proc.alive():
                proc.stop(60)
        self.broker = self.namesrv = None


# -- (a) topics ----------------------------------------------------------------------------


async def _register_and_lookup(addr: str, n: int, seconds: float) -> tuple[int, float, float]:
    from aiorocketmq.bench.namesrv_bench import register_request
    from aiorocketmq.protocol.channel import Channel
    from aiorocketmq.protocol.codes import RequestCode, ResponseCode
    from aiorocketmq.protocol.command import RemotingCommand

    host, _, port = addr.rpartition(":")
    names = [f"ScaleTopic-{i:06d}" for i in range(n)]
    channels = [await Channel.connect(host, int(port)) for _ in range(4)]
    try:
        request = register_request(0, names)
        size = len(request.body or b"")
        t0 = time.perf_counter()
        answer = await channels[0].invoke(request, 120)
        reg = time.perf_counter() - t0
        if answer.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"REGISTER_BROKER answered {answer.code} {answer.remark}")
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + seconds
        count = 0

        async def worker(ch: Channel, seed: int) -> None:
            nonlocal count
            rnd = random.Random(seed)
            while loop.time() < stop_at:
                req = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                     {"topic": rnd.choice(names)})
                got = await ch.invoke(req, 30)
                if got.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"GET_ROUTEINFO_BY_TOPIC answered {got.code}")
                count += 1

        t1 = time.perf_counter()
        await asyncio.gather(*(worker(channels[w % 4], w) for w in range(64)))
        return size, reg, count / (time.perf_counter() - t1)
    finally:
        for ch in channels:
            ch.close()
        for ch in channels:
            await ch.wait_closed()


def _write_topics(store: Path, n: int) -> None:
    from aiorocketmq.protocol.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper

    wrapper = TopicConfigSerializeWrapper(
        {f"ScaleTopic-{i:06d}": TopicConfig(f"ScaleTopic-{i:06d}", 8, 8) for i in range(n)},
        DataVersion(1_700_000_000_000, 1))
    (store / "config").mkdir(parents=True, exist_ok=True)
    (store / "config" / "topics.json").write_bytes(wrapper.encode(standard=True))


def part_a(sides: Sequence[str], tmp: Path, args: argparse.Namespace) -> str:
    rows = []
    for n in [int(x) for x in args.topics.split(",") if x]:
        for side in sides:
            s = Side(side, tmp / f"a{n}")
            try:
                addr = s.start_namesrv()
                size, reg, rate = asyncio.run(_register_and_lookup(addr, n, args.lookup_seconds))
                _write_topics(s.store_dir("broker-topics"), n)
                proc, boot = s.start_broker("broker-topics")
                time.sleep(1.0)
                rss = rss_mib(proc.pid)
                rows.append((n, side, f"{size / 1024:,.0f} KiB", f"{reg * 1000:,.0f} ms",
                             f"{rate:,.0f}", f"{boot:.1f} s", f"{rss:,.0f} MiB"))
            finally:
                s.stop()
            print(f"(a) {n} topics, {side}: done ({uptime()})", flush=True)
    return table("(a) topics: REGISTER_BROKER with N topics, route lookups, a broker booting over them",
                 ["topics", "servers", "register body", "register time", "lookups/s",
                  "broker boot", "broker RSS"], rows)


# -- (b) restart ---------------------------------------------------------------------------


def _max_offsets(namesrv: str, topic: str) -> int:
    from aiorocketmq.client.admin.api import MQAdmin

    async def go() -> int:
        async with MQAdmin(namesrv) as admin:
            stats = await admin.topic_stats(topic)
            return sum(v.max_offset for v in stats.offset_table.values())

    return asyncio.run(go())


def part_b(sides: Sequence[str], tmp: Path, args: argparse.Namespace) -> str:
    rows = []
    clients = Clients(tmp, argparse.Namespace(timeout=3600))
    from aiorocketmq.bench.compare import Broker

    for side in sides:
        s = Side(side, tmp / "b")
        try:
            addr = s.start_namesrv()
            proc, boot = s.start_broker("broker-restart")
            empty_boot = boot
            pre = clients.run("stock", "preload", Broker(side, addr, proc.pid),
                              {"topic": "ScaleRestart", "count": args.messages, "size": 128,
                               "batch": 64, "group": "scale_preload"})
            before = _max_offsets(addr, "ScaleRestart")
            proc.stop(120)
            proc, clean = s.start_broker("broker-restart")
            after_clean = _max_offsets(addr, "ScaleRestart")
            assert proc.proc is not None
            proc.proc.send_signal(signal.SIGKILL)
            proc.proc.wait()
            proc, killed = s.start_broker("broker-restart")
            time.sleep(1.0)
            after_kill = _max_offsets(addr, "ScaleRestart")
            rows.append((side, f"{args.messages:,}", f"{pre.rate:,.0f} msg/s", f"{empty_boot:.1f} s",
                         f"{clean:.1f} s", f"{killed:.1f} s",
                         f"{before}/{after_clean}/{after_kill}"))
        finally:
            s.stop()
        print(f"(b) {side}: done ({uptime()})", flush=True)
    return table(f"(b) store of {args.messages:,} x 128 B: restart to readiness",
                 ["broker", "messages", "preload (stock batch)", "empty boot",
                  "after clean stop", "after SIGKILL", "max offsets before/clean/kill"], rows)


# -- (c) idle connections ------------------------------------------------------------------


async def _idle_clients(addr: str, n: int, idle: float, broker_pid: int) -> tuple[float, float, float]:
    from aiorocketmq.protocol.bodies import HeartbeatData, ProducerData
    from aiorocketmq.protocol.channel import Channel
    from aiorocketmq.protocol.codes import RequestCode
    from aiorocketmq.protocol.command import RemotingCommand

    host, _, port = addr.rpartition(":")
    rss0 = rss_mib(broker_pid)
    channels: list[Channel] = []
    sem = asyncio.Semaphore(200)

    async def one(i: int) -> None:
        async with sem:
            ch = await Channel.connect(host, int(port))
            channels.append(ch)
            hb = HeartbeatData(client_id=f"127.0.0.1@idle-{i}",
                               producer_data_set=[ProducerData(group_name=f"idle_group_{i}")])
            await ch.invoke(RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, hb.encode()),
                            60)

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
        await asyncio.sleep(1.0)  # the broker settles after the burst (a benchmark clock)
        rss1 = rss_mib(broker_pid)
        c0 = process_cpu_seconds(broker_pid)
        await asyncio.sleep(idle)
        cpu = (process_cpu_seconds(broker_pid) - c0) / idle
        return rss1 - rss0, rss1, cpu
    finally:
        for ch in channels:
            ch.close()
        for ch in channels:
            await ch.wait_closed()


def part_c(sides: Sequence[str], tmp: Path, args: argparse.Namespace) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, args.connections + 1024)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    rows = []
    for side in sides:
        s = Side(side, tmp / "c")
        try:
            s.start_namesrv()
            proc, _ = s.start_broker("broker-idle")
            time.sleep(2.0)
            grew, rss, cpu = asyncio.run(_idle_clients(proc.address, args.connections,
                                                       args.idle_seconds, proc.pid))
            rows.append((side, f"{args.connections:,}", f"+{grew:,.0f} MiB", f"{rss:,.0f} MiB",
                         f"{cpu * 100:.1f}% of a core"))
        finally:
            s.stop()
        print(f"(c) {side}: done ({uptime()})", flush=True)
    return table(f"(c) idle clients (one connection + one heartbeat each, then {args.idle_seconds:.0f} s idle)",
                 ["broker", "connections", "RSS growth", "RSS", "CPU while idle"], rows)


# -- (d) rebalance -------------------------------------------------------------------------


async def _rebalance(namesrv: str, broker_addr: str, members: int, queues: int,
                     timeout: float) -> tuple[float, float]:
    from aiorocketmq.client import ConsumeConcurrentlyStatus, PushConsumer
    from aiorocketmq.client.admin.api import MQAdmin
    from aiorocketmq.protocol.bodies import TopicConfig

    topic = "ScaleRebalance"
    async with MQAdmin(namesrv) as admin:
        await admin.create_topic(broker_addr, TopicConfig(topic, queues, queues))
    await asyncio.sleep(1.0)  # route refresh on the nameserver side (a benchmark clock)

    async def listener(msgs: Any, ctx: Any) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumers = []
    try:
        t_first = time.perf_counter()
        for i in range(members):
            c = PushConsumer("scale_rebalance", namesrv, instance_name=f"member-{i}")
            c.subscribe(topic, "*")
            c.register_message_listener(listener)
            await c.start()
            consumers.append(c)
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        def converged() -> bool:
            # every queue held once, and the shares of AllocateMessageQueueAveragely
            counts = []
            held: set[Any] = set()
            for c in consumers:
                if c.rebalance is None:
                    return False
                mine = [mq for mq in c.rebalance.process_queue_table if mq.topic == topic]
                counts.append(len(mine))
                held.update(mine)
            return (sum(counts) == queues and len(held) == queues
                    and max(counts) - min(counts) <= 1)

        while not converged():
            if loop.time() > deadline:
                return -1.0, t0 - t_first
            await asyncio.sleep(0.05)  # polling the members' tables (a benchmark clock)
        return time.perf_counter() - t0, t0 - t_first
    finally:
        await asyncio.gather(*(c.shutdown() for c in consumers), return_exceptions=True)


def part_d(sides: Sequence[str], tmp: Path, args: argparse.Namespace) -> str:
    from aiorocketmq.protocol.runtime import install_uvloop

    install_uvloop()
    rows = []
    for side in sides:
        s = Side(side, tmp / "d")
        try:
            namesrv = s.start_namesrv()
            proc, _ = s.start_broker("broker-rebalance")
            secs, start = asyncio.run(_rebalance(namesrv, proc.address, args.members, args.queues,
                                                 args.rebalance_timeout))
            rows.append((side, "ours", args.members, f"{args.queues:,}", f"{start:.1f} s",
                         "timeout" if secs < 0 else f"{secs:.2f} s"))
        finally:
            s.stop()
        print(f"(d) {side}: done ({uptime()})", flush=True)
    return table(f"(d) one group of {args.members} PushConsumers (ours) on {args.queues:,} queues",
                 ["broker", "clients", "members", "queues", "starting them",
                  "converged after the last start"], rows)


PARTS: dict[str, Callable[[Sequence[str], Path, argparse.Namespace], str]] = {
    "a": part_a, "b": part_b, "c": part_c, "d": part_d}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", default="1000,10000,50000")
    p.add_argument("--lookup-seconds", type=float, default=3.0)
    p.add_argument("--messages", type=int, default=1_000_000, help="(b); 10000000 for the issue")
    p.add_argument("--connections", type=int, default=10_000)
    p.add_argument("--idle-seconds", type=float, default=10.0)
    p.add_argument("--members", type=int, default=50)
    p.add_argument("--queues", type=int, default=1000)
    p.add_argument("--rebalance-timeout", type=float, default=120.0)
    p.add_argument("--only", default="a,b,c,d")
    p.add_argument("--servers", default=",".join(SIDES))
    args = p.parse_args(argv)
    from aiorocketmq.protocol.runtime import configure_logging

    configure_logging("console", "WARNING")
    sides = [x for x in args.servers.split(",") if x]
    print(f"scale: {uptime()} at start", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="scale-"))
    out = []
    try:
        for part in [x for x in args.only.split(",") if x]:
            out.append(PARTS[part](sides, tmp, args))
            print(out[-1], flush=True)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("\n\n".join(out))
    print(f"scale: {uptime()} at the end", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
