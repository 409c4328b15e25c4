"""Replication benchmark: our master/slave pair beside the stock RocketMQ 4.9.7 pair.

    python -m aiorocketmq.bench.ha_bench [--seconds 10] [--size 1024] [--concurrency 16]
                                          [--catchup-mb 64] [--no-stock]

For each pair (a SYNC_MASTER and its SLAVE on 127.0.0.1, one nameserver of ours) it prints:

* ``sync``: SEND_OK/s and mean round trip of sends that wait for the slave's ack
  (``--concurrency`` in flight, ``--size`` bytes, ``--seconds``);
* ``lag``: the slave's lag in bytes (master commitLogMaxOffset minus the slave's, sampled
  every 50 ms) while the same load runs with ``WAIT=false`` (sends do not wait for the slave):
  p50 / p99 / max;
* ``catch-up``: MB/s at which a slave that was stopped while ``--catchup-mb`` were written
  copies them once restarted.

The stock pair needs Java 17 and the harness ``make java-deps`` builds (``bench/_stock.py``);
``--no-stock`` measures ours only. Nothing here asserts a duration.
"""

# ruff: noqa: ASYNC109, ASYNC110  (polling a remote server is the measurement)

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiorocketmq.client.remoting import RemotingClient
from aiorocketmq.protocol.bodies import KVTable
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from aiorocketmq.protocol.message import encode_properties

TOPIC = "HaBench"
SEGMENT = 256 * 1024 * 1024


def _checkout() -> Any:
    """The process helpers: ours (``bench._procs``) and stock's (``bench._stock``)."""
    from aiorocketmq.bench import _procs as procs
    from aiorocketmq.bench import _stock as stock
    return procs, stock


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
                seconds: float) -> tuple[int, list[float]]:
    body = b"x" * args.size
    deadline = time.monotonic() + seconds
    ok = 0
    rts: list[float] = []

    async def worker(w: int) -> None:
        nonlocal ok
        i = 0
        while time.monotonic() < deadline:
            began = time.perf_counter()
            r = await client.invoke(master, _send_request(body, wait, (w + i) % 4), 10)
            i += 1
            if r.code == ResponseCode.SUCCESS:
                ok += 1
                rts.append(time.perf_counter() - began)

    await asyncio.gather(*(worker(w) for w in range(args.concurrency)))
    return ok, rts


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


async def measure(label: str, master: str, slave_addr: Callable[[], str],
                  restart_slave: Callable[[], None], stop_slave: Callable[[], None],
                  args: argparse.Namespace) -> None:
    client = RemotingClient()
    try:
        await _attached(client, master)
        ok, rts = await _load(client, master, args, wait=True, seconds=args.seconds)
        print(f"{label:6s} sync     {ok / args.seconds:10,.0f} SEND_OK/s  mean RT "
              f"{statistics.fmean(rts) * 1000 if rts else 0:6.2f} ms  ({args.size} B, "
              f"{args.concurrency} in flight)", flush=True)

        lags: list[int] = []
        load = asyncio.ensure_future(_load(client, master, args, wait=False, seconds=args.seconds))
        while not load.done():
            lags.append(max(await _max_phy(client, master) - await _max_phy(client, slave_addr()), 0))
            await asyncio.sleep(0.05)
        ok, _ = await load
        lags.sort()
        print(f"{label:6s} lag      p50 {lags[len(lags) // 2]:>10,} B  p99 {lags[int(len(lags) * 0.99)]:>10,} B"
              f"  max {lags[-1]:>10,} B  (under {ok / args.seconds:,.0f} msg/s without waiting)", flush=True)

        await _caught_up(client, master, slave_addr())
        stop_slave()
        body = b"y" * (256 * 1024)
        for i in range(args.catchup_mb * 4):
            await client.invoke(master, _send_request(body, False, i % 4), 30)
        target = await _max_phy(client, master)
        began = time.monotonic()
        restart_slave()
        first = -1
        while (now := await _max_phy(client, slave_addr())) < target:
            if first < 0 <= now:
                first, answering = now, time.monotonic()
            await asyncio.sleep(0.01)
        done = time.monotonic()
        if first < 0:
            first, answering = now, done
        copied = (target - first) / 1024 / 1024
        print(f"{label:6s} catch-up {copied / max(done - answering, 1e-3):10,.1f} MB/s  ({copied:.1f} MB "
              f"copied in {done - answering:.2f} s once the slave answered; restart to caught up "
              f"{done - began:.2f} s)", flush=True)
    finally:
        await client.close()


def conf(role: str, broker_id: int, name: str) -> dict[str, str]:
    return {"brokerName": name, "brokerRole": role, "brokerId": str(broker_id),
            "mappedFileSizeCommitLog": str(SEGMENT)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ha_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--catchup-mb", type=int, default=64)
    parser.add_argument("--no-stock", action="store_true")
    args = parser.parse_args(argv)
    procs, stock = _checkout()
    tmp = Path(tempfile.mkdtemp(prefix="ha-bench-"))
    servers: list[Any] = []
    try:
        ns = procs.namesrv_process(tmp).start()
        servers.append(ns)

        def ours(role: str, bid: int, name: str, port: int) -> Any:
            c = conf(role, bid, "ours") | {"listenPort": str(port)}
            return procs.broker_process(tmp, ns.address, name=name, conf=c,
                                        extra=("--log-level", "WARNING")).start()

        port = stock.free_port(offsets=(-2, 0, 1))
        master = ours("SYNC_MASTER", 0, "ours-master", port)
        servers.append(master)
        slave_port = stock.free_port(offsets=(-2, 0, 1))
        holder = {"slave": ours("SLAVE", 1, "ours-slave", slave_port)}
        servers.append(holder["slave"])

        def restart() -> None:
            holder["slave"] = ours("SLAVE", 1, "ours-slave", slave_port)
            servers.append(holder["slave"])

        asyncio.run(measure("ours", master.address, lambda: holder["slave"].address, restart,
                            lambda: holder["slave"].stop(), args))
        if args.no_stock:
            return 0
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
            sholder["slave"] = s.start()
            servers.append(s)

        asyncio.run(measure("stock", smaster.address, lambda: sholder["slave"].address, restart_j,
                            lambda: sholder["slave"].stop(), args))
    finally:
        for s in reversed(servers):
            s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
