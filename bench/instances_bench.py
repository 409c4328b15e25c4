"""Aggregate produce rate of ``mqbroker --instances 1`` against ``--instances 2``, one host.

    python -m aiorocketmq.bench.instances_bench [--messages 100000] [--size 128]
                                                [--inflight 16] [--runs 3] [--client stock|ours]

Starts one name server of ours per configuration and ``mqbroker --instances N`` (N = 1
and 2, ASYNC_MASTER, ASYNC_FLUSH, every instance in its own cluster's group ``inst<N>-<i>``),
creates the topic with 4 queues on every instance (``create_topic_in_cluster``), then,
``--runs`` times alternating which configuration goes first, runs one client process
(stock 4.9.7's client through ``tests/interop/java/.../Bench.java sync``, ROCKETMQ headers,
or ours through ``bench.compare client``) sending ``--messages`` of ``--size`` B with
``--inflight`` senders; the client spreads its sends over every instance's queues. Per run
it reads the CPU seconds of every instance process (``/proc``, the supervisor's children)
and of the client around the run, and prints msg/s, broker CPU µs per message (all
instances together) and the client's, then the medians and the 2 / 1 ratio. The load
average is printed at the start and the end: on a shared machine, compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorocketmq.bench import _procs as procs
from aiorocketmq.bench.compare import Clients, process_cpu_seconds, uptime
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig

TOPIC = "InstBench"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


@dataclass
class Setup:
    n: int
    namesrv: Any
    broker: Any  # the ServerProcess of ``mqbroker`` (the supervisor when n > 1)

    @property
    def pids(self) -> list[int]:
        return _children(self.broker.pid) if self.n > 1 else [self.broker.pid]

    def cpu(self) -> float:
        return sum(process_cpu_seconds(p) for p in self.pids)


class _Target:
    """What ``compare.Clients.run`` needs of a broker: its name server and a pid."""

    def __init__(self, setup: Setup) -> None:
        self.name = f"instances-{setup.n}"
        self.namesrv = setup.namesrv.address
        self.pid = setup.broker.pid


def start(tmp: Path, n: int) -> Setup:
    ns = procs.namesrv_process(tmp, name=f"namesrv-{n}").start()
    conf = {"brokerClusterName": f"Inst{n}", "mappedFileSizeCommitLog": str(256 * 1024 * 1024)}
    broker = procs.broker_process(tmp, ns.address, name=f"inst{n}", conf=conf,
                                  extra=("--instances", str(n), "--log-level", "WARNING"))
    broker.start(timeout=60)
    ready = 1
    assert broker.proc is not None and broker.proc.stdout is not None
    while ready < n:
        line = broker.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"mqbroker --instances {n} ended:\n{broker.log_tail()}")
        if procs.BROKER_READY.search(line):
            ready += 1
    return Setup(n, ns, broker)


async def create_topic(setup: Setup) -> None:
    async with MQAdmin(setup.namesrv.address) as admin:
        for _ in range(100):
            info = await admin.cluster_info()
            if len(info.cluster_addr_table.get(f"Inst{setup.n}", ())) >= setup.n:
                break
            await asyncio.sleep(0.1)
        made = await admin.create_topic_in_cluster(
            f"Inst{setup.n}", TopicConfig(topic_name=TOPIC, read_queue_nums=4, write_queue_nums=4))
        if len(made) != setup.n:
            raise RuntimeError(f"topic created on {made}, expected {setup.n} instances")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="instances_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--client", choices=("stock", "ours"), default="stock")
    parser.add_argument("--serialize", default="ROCKETMQ")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="instances-bench-"))
    setups: list[Setup] = []
    clients = Clients(tmp, args)
    print(f"start: {uptime()}", flush=True)
    try:
        for n in (1, 2):
            setups.append(start(tmp, n))
            asyncio.run(create_topic(setups[-1]))
        rows: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
        for r in range(args.runs):
            for setup in setups if r % 2 == 0 else setups[::-1]:
                b0 = setup.cpu()
                s = clients.run(args.client, "sync", _Target(setup),  # type: ignore[arg-type]
                                {"topic": TOPIC, "count": args.messages, "size": args.size,
                                 "inflight": args.inflight, "group": f"inst-bench-{setup.n}"})
                broker_cpu = setup.cpu() - b0
                if s.errors:
                    raise SystemExit(f"{s.errors} failed sends with {setup.n} instance(s)")
                rate = s.count / s.seconds
                row = (rate, broker_cpu / s.count * 1e6, s.client_cpu / s.count * 1e6)
                rows[setup.n].append(row)
                print(f"instances {setup.n}: {rate:10,.0f} msg/s  broker CPU {row[1]:5.1f} µs/msg  "
                      f"client CPU {row[2]:5.1f} µs/msg  ({uptime()})", flush=True)
        med = {n: tuple(statistics.median(x[i] for x in rs) for i in range(3)) for n, rs in rows.items()}
        for n, m in med.items():
            print(f"median, instances {n}: {m[0]:10,.0f} msg/s  broker CPU {m[1]:5.1f} µs/msg  "
                  f"client CPU {m[2]:5.1f} µs/msg", flush=True)
        print(f"2 / 1: {med[2][0] / med[1][0]:.2f}x", flush=True)
    finally:
        for setup in setups:
            setup.broker.stop()
            setup.namesrv.stop()
        print(f"end: {uptime()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
