"""Replication benchmark: our master/slave pair beside the stock RocketMQ 4.9.7 pair.

    python -m aiorocketmq.bench.ha_bench [--seconds 10] [--size 1024] [--concurrency 16]
                                          [--rounds 1] [--sync-only] [--solo] [--base DIR]
                                          [--catchup-mb 64] [--no-stock]

Both pairs (a SYNC_MASTER and its SLAVE on 127.0.0.1, one nameserver of ours) run at once,
idle but for the one measured. It prints:

* ``sync``: SEND_OK/s and mean round trip of sends that wait for the slave's ack
  (``--concurrency`` in flight, ``--size`` bytes, ``--seconds``), and the CPU each of the
  master, the slave and the client (this process) spent per SEND_OK, in µs. ``--rounds``
  repeats it alternating the pairs (ours first in odd rounds, stock first in even ones) and
  ends with the medians and ours / stock. After each round the slave's commit log must
  reach the end of the last acknowledged message (its offset from the answer's ``msgId``),
  read at once: every SEND_OK is on both, or the benchmark fails. ``--solo`` adds each
  side's master alone (an ASYNC_MASTER without a slave, ``ours-1`` / ``stock-1``) to the
  rounds, under the same load: what replication costs each side; ``--base DIR`` a pair of
  ours started from another checkout (``base``), to measure a change before and after;
* ``lag`` (not with ``--sync-only``): the slave's lag in bytes (master commitLogMaxOffset
  minus the slave's, sampled every 50 ms) while the same load runs with ``WAIT=false``
  (sends do not wait for the slave): p50 / p99 / max;
* ``catch-up`` (not with ``--sync-only``): MB/s at which a slave that was stopped while
  ``--catchup-mb`` were written copies them once restarted.

The stock pair needs Java 17 and the harness ``make java-deps`` builds (``bench/_stock.py``);
``--no-stock`` measures ours only. Nothing here asserts a duration.
"""

# ruff: noqa: ASYNC109, ASYNC110  (polling a remote server is the measurement)

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorocketmq.protocol.bodies import KVTable
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from aiorocketmq.protocol.message import decode_offset_msg_id, encode_properties
from aiorocketmq.protocol.remoting_client import RemotingClient

TOPIC = "HaBench"
SEGMENT = 256 * 1024 * 1024
_TICK = os.sysconf("SC_CLK_TCK")


def _checkout() -> Any:
    """The process helpers: ours (``bench._procs``) and stock's (``bench._stock``)."""
    from aiorocketmq.bench import _procs as procs
    from aiorocketmq.bench import _stock as stock
    return procs, stock


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _send_request(body: bytes, wait: bool, queue_id: int) -> RemotingCommand:
    props = encode_properties({"WAIT": "true" if wait else "false"})
    v1 = SendMessageRequestHeader(producer_group="ha-bench", topic=TOPIC, default_topic="TBW102",
                                  default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                  born_timestamp=int(time.time() * 1000), flag=0, properties=props,
                                  reconsume_times=0)
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2,
                                          SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields(), body)


async def _max_phy(client: RemotingClient, addr: str) -> int:
    """The broker's commitLogMaxOffset; -1 while it cannot answer (a restarting slave)."""
    try:
        r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
    except RocketMQError:
        return -1
    if r.code != ResponseCode.SUCCESS or not r.body:
        return -1
    return int(KVTable.decode(r.body).table["commitLogMaxOffset"])


async def _load(client: RemotingClient, master: str, args: argparse.Namespace, *, wait: bool,
                seconds: float) -> tuple[int, list[float], int]:
    """``(SEND_OK count, round trips, largest acknowledged commit-log offset)``."""
    body = b"x" * args.size
    deadline = time.monotonic() + seconds
    ok = 0
    last = -1
    rts: list[float] = []

    async def worker(w: int) -> None:
        nonlocal ok, last
        i = 0
        while time.monotonic() < deadline:
            began = time.perf_counter()
            r = await client.invoke(master, _send_request(body, wait, (w + i) % 4), 10)
            i += 1
            if r.code == ResponseCode.SUCCESS:
                ok += 1
                rts.append(time.perf_counter() - began)
                assert r.ext_fields is not None
                last = max(last, decode_offset_msg_id(r.ext_fields["msgId"])[1])

    await asyncio.gather(*(worker(w) for w in range(args.concurrency)))
    return ok, rts, last


async def _attached(client: RemotingClient, master: str) -> None:
    deadline = time.monotonic() + 60
    while (await client.invoke(master, _send_request(b"probe", True, 0), 10)).code != ResponseCode.SUCCESS:
        if time.monotonic() > deadline:
            raise SystemExit("ha_bench: the slave never attached")
        await asyncio.sleep(0.2)


async def _caught_up(client: RemotingClient, master: str, slave: str) -> None:
    target = await _max_phy(client, master)
    while await _max_phy(client, slave) < target:
        await asyncio.sleep(0.02)


@dataclass
class Pair:
    label: str
    master: Any  # a ServerProcess
    slave: Callable[[], Any] | None  # None: a master alone (--solo)
    restart_slave: Callable[[], None] | None


@dataclass
class SyncRound:
    rate: float
    rt_ms: float
    master_us: float
    slave_us: float
    client_us: float

    def line(self, label: str, args: argparse.Namespace) -> str:
        return (f"{label:8s} sync     {self.rate:10,.0f} SEND_OK/s  mean RT {self.rt_ms:6.2f} ms  CPU µs/msg "
                f"master {self.master_us:5.1f} slave {self.slave_us:5.1f} client {self.client_us:5.1f}  "
                f"({args.size} B, {args.concurrency} in flight)")


async def measure_sync(pair: Pair, args: argparse.Namespace) -> SyncRound:
    client = RemotingClient()
    master = pair.master.address
    try:
        await _attached(client, master)
        slave = pair.slave() if pair.slave is not None else None

        def cpu() -> tuple[float, float, float]:
            return (cpu_seconds(pair.master.pid), cpu_seconds(slave.pid) if slave is not None else 0.0,
                    time.process_time())

        cpu0 = cpu()
        ok, rts, last = await _load(client, master, args, wait=True, seconds=args.seconds)
        cpu1 = cpu()
        on_slave = await _max_phy(client, slave.address) if slave is not None else last + 1
        if last >= 0 and on_slave <= last:
            raise SystemExit(f"ha_bench: {pair.label}: a SEND_OK at commit-log offset {last} is not "
                             f"on the slave (its log ends at {on_slave})")
        per = [(b - a) / max(ok, 1) * 1e6 for a, b in zip(cpu0, cpu1, strict=True)]
        return SyncRound(ok / args.seconds, statistics.fmean(rts) * 1000 if rts else 0.0, *per)
    finally:
        await client.close()


async def measure_lag_and_catchup(pair: Pair, args: argparse.Namespace) -> None:
    assert pair.slave is not None and pair.restart_slave is not None
    client = RemotingClient()
    label, master = pair.label, pair.master.address
    try:
        lags: list[int] = []
        load = asyncio.ensure_future(_load(client, master, args, wait=False, seconds=args.seconds))
        while not load.done():
            lags.append(max(await _max_phy(client, master) - await _max_phy(client, pair.slave().address), 0))
            await asyncio.sleep(0.05)
        ok, _, _ = await load
        lags.sort()
        print(f"{label:8s} lag      p50 {lags[len(lags) // 2]:>10,} B  p99 {lags[int(len(lags) * 0.99)]:>10,} B"
              f"  max {lags[-1]:>10,} B  (under {ok / args.seconds:,.0f} msg/s without waiting)", flush=True)

        await _caught_up(client, master, pair.slave().address)
        pair.slave().stop()
        body = b"y" * (256 * 1024)
        for i in range(args.catchup_mb * 4):
            await client.invoke(master, _send_request(body, False, i % 4), 30)
        target = await _max_phy(client, master)
        began = time.monotonic()
        pair.restart_slave()
        first = -1
        while (now := await _max_phy(client, pair.slave().address)) < target:
            if first < 0 <= now:
                first, answering = now, time.monotonic()
            await asyncio.sleep(0.01)
        done = time.monotonic()
        if first < 0:
            first, answering = now, done
        copied = (target - first) / 1024 / 1024
        print(f"{label:8s} catch-up {copied / max(done - answering, 1e-3):10,.1f} MB/s  ({copied:.1f} MB "
              f"copied in {done - answering:.2f} s once the slave answered; restart to caught up "
              f"{done - began:.2f} s)", flush=True)
    finally:
        await client.close()


def conf(role: str, broker_id: int, name: str) -> dict[str, str]:
    return {"brokerName": name, "brokerRole": role, "brokerId": str(broker_id),
            "mappedFileSizeCommitLog": str(SEGMENT)}


def _median_line(label: str, rounds: list[SyncRound]) -> SyncRound:
    def med(f: Callable[[SyncRound], float]) -> float:
        return statistics.median(f(r) for r in rounds)
    return SyncRound(med(lambda r: r.rate), med(lambda r: r.rt_ms), med(lambda r: r.master_us),
                     med(lambda r: r.slave_us), med(lambda r: r.client_us))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ha_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sync-only", action="store_true")
    parser.add_argument("--catchup-mb", type=int, default=64)
    parser.add_argument("--no-stock", action="store_true")
    parser.add_argument("--solo", action="store_true",
                        help="also measure each side's master alone (ASYNC_MASTER, no slave) in the "
                             "sync rounds: what replication costs each")
    parser.add_argument("--base", metavar="DIR",
                        help="also measure a pair of ours run from another checkout (its root, "
                             "holding aiorocketmq/): before / after a change, in the same run")
    args = parser.parse_args(argv)
    procs, stock = _checkout()
    tmp = Path(tempfile.mkdtemp(prefix="ha-bench-"))
    servers: list[Any] = []
    pairs: list[Pair] = []
    try:
        ns = procs.namesrv_process(tmp).start()
        servers.append(ns)

        def ours(role: str, bid: int, name: str, port: int, group: str = "ours",
                 cwd: Path | None = None) -> Any:
            c = conf(role, bid, group) | {"listenPort": str(port)}
            s = procs.broker_process(tmp, ns.address, name=name, conf=c, extra=("--log-level", "WARNING"))
            s.cwd = cwd
            servers.append(s.start())
            return s

        master = ours("SYNC_MASTER", 0, "ours-master", stock.free_port(offsets=(-2, 0, 1)))
        slave_port = stock.free_port(offsets=(-2, 0, 1))
        holder = {"slave": ours("SLAVE", 1, "ours-slave", slave_port)}

        def restart() -> None:
            holder["slave"] = ours("SLAVE", 1, "ours-slave", slave_port)

        pairs.append(Pair("ours", master, lambda: holder["slave"], restart))
        if args.solo:
            pairs.append(Pair("ours-1", ours("ASYNC_MASTER", 0, "ours-solo",
                                            stock.free_port(offsets=(-2, 0, 1))), None, None))
        if args.base:
            base_dir = Path(args.base).resolve()
            bmaster = ours("SYNC_MASTER", 0, "base-master", stock.free_port(offsets=(-2, 0, 1)), "base", base_dir)
            bslave_port = stock.free_port(offsets=(-2, 0, 1))
            bholder = {"slave": ours("SLAVE", 1, "base-slave", bslave_port, "base", base_dir)}

            def restart_b() -> None:
                bholder["slave"] = ours("SLAVE", 1, "base-slave", bslave_port, "base", base_dir)

            pairs.append(Pair("base", bmaster, lambda: bholder["slave"], restart_b))
        if not args.no_stock:
            stock.require_java()
            smaster = stock.start_stock_broker(tmp, ns.address, name="java-master",
                                               conf=conf("SYNC_MASTER", 0, "stock"))
            servers.append(smaster)
            sholder = {"slave": stock.start_stock_broker(tmp, ns.address, name="java-slave",
                                                         conf=conf("SLAVE", 1, "stock"))}
            servers.append(sholder["slave"])
            slave_port_j = sholder["slave"].port

            def restart_j() -> None:
                s = stock.stock_broker_process(tmp, ns.address, name="java-slave",
                                               conf=conf("SLAVE", 1, "stock"), port=slave_port_j)
                servers.append(s)
                sholder["slave"] = s.start()

            pairs.append(Pair("stock", smaster, lambda: sholder["slave"], restart_j))
            if args.solo:
                solo = stock.start_stock_broker(tmp, ns.address, name="java-solo",
                                                conf=conf("ASYNC_MASTER", 0, "stock-solo"))
                servers.append(solo)
                pairs.append(Pair("stock-1", solo, None, None))

        results: dict[str, list[SyncRound]] = {p.label: [] for p in pairs}
        for r in range(args.rounds):
            for pair in pairs if r % 2 == 0 else pairs[::-1]:
                got = asyncio.run(measure_sync(pair, args))
                results[pair.label].append(got)
                print(got.line(pair.label, args), flush=True)
        if args.rounds > 1 or len(pairs) > 1:
            medians = {label: _median_line(label, rs) for label, rs in results.items()}
            for label, m in medians.items():
                print(m.line(f"{label}~", args) + f"  median of {len(results[label])}", flush=True)
            if "stock" in medians:
                print(f"ours / stock: {medians['ours'].rate / medians['stock'].rate:.2f}x", flush=True)
            if "base" in medians:
                print(f"ours / base: {medians['ours'].rate / medians['base'].rate:.2f}x", flush=True)
            if "stock-1" in medians:
                print(f"masters alone, ours / stock: {medians['ours-1'].rate / medians['stock-1'].rate:.2f}x; "
                      f"pair / master alone: ours {medians['ours'].rate / medians['ours-1'].rate:.2f}, "
                      f"stock {medians['stock'].rate / medians['stock-1'].rate:.2f}", flush=True)
        if not args.sync_only:
            for pair in pairs:
                if pair.slave is not None:
                    asyncio.run(measure_lag_and_catchup(pair, args))
    finally:
        for s in reversed(servers):
            s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
