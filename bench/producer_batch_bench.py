"""Client CPU per message of our Producer's batch sends, against a real broker.

One nameserver and one broker (bench/_procs.py, a temporary directory) are started; each
run is a fresh client process that sends ``--batches`` batches of ``--batch`` messages of
``--body-size`` bytes to one topic with ``Producer.send(list)`` (one SEND_BATCH_MESSAGE
each, awaited), after one warm-up batch, and reports its own CPU seconds
(``time.process_time``) and wall time over the sends. ``--properties N`` gives each
message N user properties (the Spark sink's messages carry four ``spark.*`` ones).

``--tree NAME=DIR`` (repeatable) runs the client with DIR first on ``PYTHONPATH`` (DIR is
a checkout, e.g. ``git worktree add`` of another commit with the built ``.so`` files
copied in; it holds the ``aiorocketmq`` package directory): the trees
are run alternately, ``--runs`` times each, on the same broker, so that before and after
see the same machine load. Without ``--tree`` the installed package runs alone.

Run: ``.venv/bin/python -m aiorocketmq.bench.producer_batch_bench --runs 5``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CLIENT = r"""
import asyncio, json, sys, time
from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.message import Message

ns, topic, batches, batch, size, nprops = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
pad = b"x" * size
props = {f"spark.k{i}": f"value-{i:06d}" for i in range(nprops)}

def msgs():
    out = []
    for _ in range(batch):
        m = Message(topic, pad)
        if props:
            m.properties.update(props)
        out.append(m)
    return out

async def run():
    p = Producer("bench-batch-producer", ns)
    await p.start()
    try:
        await p.send(msgs())
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(batches):
            await p.send(msgs())
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    finally:
        await p.shutdown()
    import aiorocketmq
    print(json.dumps({"cpu": cpu, "wall": wall, "package": aiorocketmq.__file__}))

asyncio.run(run())
"""


def _client(ns: str, args: argparse.Namespace, tree: str | None, cwd: str
            ) -> dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if "PYTHONPATH" in env else "")
    out = subprocess.run(
        [sys.executable, "-c", _CLIENT, ns, args.topic, str(args.batches), str(args.batch),
         str(args.body_size), str(args.properties)],
        env=env, cwd=cwd, check=True, capture_output=True, text=True, timeout=600)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--body-size", type=int, default=128)
    ap.add_argument("--properties", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--topic", default="BenchBatchTopic")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    args = ap.parse_args(argv)
    from aiorocketmq.bench._procs import namesrv_and_broker

    trees: list[tuple[str, str | None]] = [
        (t.split("=", 1)[0], t.split("=", 1)[1]) for t in args.tree] or [("installed", None)]
    n = args.batches * args.batch
    per: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory() as tmp, namesrv_and_broker(
            Path(tmp), conf={"autoCreateTopicEnable": "true"}) as (ns, _br):
        for run in range(args.runs):
            for name, tree in trees:
                r = _client(ns.address, args, tree, tmp)
                us, rate = r["cpu"] / n * 1e6, n / r["wall"]
                per[name].append((us, rate))
                print(f"run {run} {name:>10}: {us:6.2f} client CPU us/msg, {rate:>9,.0f} msg/s "
                      f"({r['package']})", flush=True)
    for name, rows in per.items():
        print(f"{name:>10}: median {statistics.median(u for u, _ in rows):.2f} client CPU "
              f"us/msg, {statistics.median(m for _, m in rows):,.0f} msg/s over {len(rows)} runs "
              f"of {n} x {args.body_size} B in batches of {args.batch}, {args.properties} "
              "properties each")


if __name__ == "__main__":
    main()
