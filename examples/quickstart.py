"""``make run``: a nameserver and a broker on an embedded local store, then a short demo.

Starts ``mqnamesrv`` and ``mqbroker`` in this process (store under ``--data-dir``,
default ``./data``), sends messages with a producer (sync with tags and keys, async,
oneway, an ordered batch by key), consumes them with a push consumer, prints what
happened, and stops everything cleanly. Run it twice: the store is durable, so the
second run's consumer group starts after what the first run consumed.

    python -m examples.quickstart --data-dir ./data [--keep-running]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
    SelectMessageQueueByHash,
)
from aiorocketmq.protocol.runtime import configure_logging, install_uvloop
from aiorocketmq.server.broker.config import load_broker_configs
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.namesrv.config import NamesrvConfig
from aiorocketmq.server.namesrv.controller import NamesrvController

TOPIC = "QuickstartTopic"


def say(text: str) -> None:
    print(text, flush=True)


async def run(data_dir: Path, keep_running: bool) -> int:
    """The demo; ``data_dir`` exists already (``main`` makes it before the loop starts)."""
    namesrv = NamesrvController(NamesrvConfig.from_properties({
        "listenPort": "0",
        "kvConfigPath": str(data_dir / "namesrv" / "kvConfig.json"),
        "configStorePath": str(data_dir / "namesrv" / "namesrv.properties"),
    }))
    await namesrv.start()
    say(f"nameserver   listening on {namesrv.address}")

    broker_conf, store_conf = load_broker_configs({
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "listenPort": "0",
        "namesrvAddr": namesrv.address,
        "storePathRootDir": str(data_dir / "broker-a" / "store"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
    })
    broker = BrokerController(broker_conf, store_conf)
    await broker.start()
    say(f"broker       broker-a listening on {broker.broker_addr}, store in {data_dir / 'broker-a'}")

    received: list[str] = []
    expected = 0
    done = asyncio.Event()

    async def on_messages(msgs, context):  # type: ignore[no-untyped-def]
        for m in msgs:
            received.append(m.msg_id)
            say(f"  consumed   queue={m.queue_id} offset={m.queue_offset} tags={m.tags} "
                f"keys={m.keys} body={m.body.decode(errors='replace')!r}")
        if expected and len(received) >= expected:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("QuickstartConsumer", namesrv_addr=namesrv.address,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    producer = Producer("QuickstartProducer", namesrv_addr=namesrv.address)
    try:
        await producer.start()
        stamp = time.strftime("%H:%M:%S")
        say("producing")
        for i in range(4):
            msg = Message(TOPIC, f"hello #{i} at {stamp}".encode(), tags="TagA", keys=f"key-{i}")
            result = await producer.send(msg)
            say(f"  sent sync  {result.status.name} msgId={result.msg_id} "
                f"queue={result.message_queue.queue_id} offset={result.queue_offset}")
        result = await producer.send_async(Message(TOPIC, f"async at {stamp}".encode(), tags="TagB"))
        say(f"  sent async {result.status.name} msgId={result.msg_id}")
        await producer.send_oneway(Message(TOPIC, f"oneway at {stamp}".encode(), tags="TagB"))
        say("  sent oneway (no result by design)")
        for step in ("created", "paid", "shipped"):
            msg = Message(TOPIC, f"order-42 {step}".encode(), tags="Order", keys="order-42")
            result = await producer.send(msg, selector=SelectMessageQueueByHash(), arg="order-42")
            say(f"  sent order {step:<7} queue={result.message_queue.queue_id} "
                f"offset={result.queue_offset}")
        expected = 4 + 1 + 1 + 3

        say("consuming")
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(on_messages)
        await consumer.start()
        try:
            await asyncio.wait_for(done.wait(), timeout=60)
        except TimeoutError:
            say(f"consumed {len(received)} of {expected} messages within 60 s")
            return 1
        say(f"done: produced {expected} messages and consumed {len(received)}; "
            f"data is in {data_dir}")
        if keep_running:
            say(f"nameserver {namesrv.address} and broker {broker.broker_addr} keep running; "
                "Ctrl-C stops them")
            await asyncio.Event().wait()
        return 0
    finally:
        await consumer.shutdown()
        await producer.shutdown()
        await broker.shutdown()
        await namesrv.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="./data", type=Path)
    parser.add_argument("--keep-running", action="store_true",
                        help="keep the servers up after the demo (Ctrl-C to stop)")
    parser.add_argument("--log-level", default="ERROR")
    args = parser.parse_args(argv)
    configure_logging("console", args.log_level)
    install_uvloop()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(run(args.data_dir, args.keep_running))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
