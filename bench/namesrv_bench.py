"""GET_ROUTEINFO_BY_TOPIC requests per second against a real ``mqnamesrv`` process.

Setup: a nameserver process on 127.0.0.1, port 0 (``python -m aiorocketmq.server.namesrv.main``,
readiness line parsed for the port); four brokers (``broker-0..3``, one cluster) each
register the same 1,000 topics (8 queues each), so every route names four brokers,
as a topic spread over a small cluster does. Then ``--concurrency`` workers (64) spread
over ``--connections`` Channels (8) each send one GET_ROUTEINFO_BY_TOPIC (version 409, so
standard JSON) for a random topic and await the answer, in a loop, for ``--duration``
seconds after a short warm-up. Every answer is checked to be SUCCESS with a body.

The client runs in this process on uvloop, the server in its own process, so on a small
machine the figure is bounded by whichever of the two saturates its core first; the
client's share is reported (CPU seconds per request) to show which.
Run: ``.venv/bin/python -m aiorocketmq.bench.namesrv_bench``. Prints; asserts nothing.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiorocketmq.protocol.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand

READY = re.compile(r"The Name Server boot success\. serializeType=\w+ address=(\S+)")
REPO = Path(__file__).resolve().parents[1]


def start_namesrv(workdir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiorocketmq.server.namesrv.main", "--port", "0", "--kv-path",
         str(workdir / "kvConfig.json"), "--log-level", "WARNING"],
        cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    for line in proc.stdout:
        m = READY.search(line)
        if m:
            return proc, m.group(1)
    raise RuntimeError(f"nameserver exited with {proc.wait()} before it was ready")


def register_request(index: int, topics: list[str]) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper(
        {t: TopicConfig(t, 8, 8) for t in topics}, DataVersion(1_700_000_000_000, 1))
    body = RegisterBrokerBody(wrapper, []).encode()
    addr = f"127.0.0.{index + 1}:10911"
    ext = {"brokerName": f"broker-{index}", "brokerAddr": addr, "clusterName": "BenchCluster",
           "haServerAddr": f"127.0.0.{index + 1}:10912", "brokerId": "0",
           "compressed": "false", "bodyCrc32": "0"}
    return RemotingCommand.create_request(RequestCode.REGISTER_BROKER, ext, body)


async def run(addr: str, *, topics: int, brokers: int, concurrency: int, connections: int,
              duration: float, warmup: float) -> None:
    host, _, port = addr.rpartition(":")
    names = [f"BenchTopic-{i:04d}" for i in range(topics)]
    channels = [await Channel.connect(host, int(port)) for _ in range(connections)]
    try:
        for i in range(brokers):
            # The registering connections stay open: closing one would unregister its broker.
            answer = await channels[i % connections].invoke(register_request(i, names), 10)
            assert answer.code == ResponseCode.SUCCESS, answer
        loop = asyncio.get_running_loop()
        counting = False
        count = 0
        stop_at = 0.0
        body_bytes = 0

        async def worker(channel: Channel, seed: int) -> None:
            nonlocal count, body_bytes
            rnd = random.Random(seed)
            while loop.time() < stop_at:
                request = RemotingCommand.create_request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": rnd.choice(names)})
                answer = await channel.invoke(request, 10)
                if answer.code != ResponseCode.SUCCESS or not answer.body:
                    raise RuntimeError(f"unexpected answer {answer!r}")
                if counting:
                    count += 1
                    body_bytes += len(answer.body)

        stop_at = loop.time() + warmup + duration
        tasks = [asyncio.create_task(worker(channels[w % connections], w))
                 for w in range(concurrency)]
        await asyncio.sleep(warmup)  # the benchmark's own clock, not a test synchronisation
        counting = True
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        rate = count / elapsed
        print(f"GET_ROUTEINFO_BY_TOPIC: {rate:,.0f} requests/s "
              f"({count} in {elapsed:.2f}s; concurrency {concurrency} over {connections} "
              f"connections; {topics} topics x {brokers} brokers; "
              f"avg body {body_bytes // max(count, 1)} B; "
              f"client CPU {1e6 * client_cpu / max(count, 1):.1f} us/request)")
    finally:
        for channel in channels:
            channel.close()
        for channel in channels:
            await channel.wait_closed()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--brokers", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:  # pragma: no cover
        pass
    with tempfile.TemporaryDirectory(prefix="namesrv-bench-") as tmp:
        proc, addr = start_namesrv(Path(tmp))
        try:
            asyncio.run(run(addr, topics=args.topics, brokers=args.brokers,
                            concurrency=args.concurrency, connections=args.connections,
                            duration=args.duration, warmup=args.warmup))
        finally:
            proc.terminate()
            code = proc.wait(15)
            if proc.stdout is not None:
                proc.stdout.close()
            print(f"nameserver exited with {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
