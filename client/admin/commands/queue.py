"""Consume-queue commands (upstream ``tools/command/queue``): queryCq."""

from __future__ import annotations

import argparse

from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.fastjson import dumps_pretty

from ..api import MQAdmin
from .base import Output, UsageError, command, opt

_SEP = "======================================\n"


def _int(text: str, name: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"{name}: not a number: '{text}'") from None


@command("queryCq", "Query cq command.",
         opt("-t", "--topic", required=True, help="topic name"),
         opt("-q", "--queue", required=True, help="queue num, ie. 1"),
         opt("-i", "--index", required=True, help="start queue index."),
         opt("-c", "--count", help="how many."),
         opt("-b", "--broker", help="broker addr."),
         opt("-g", "--consumer", help="consumer group."))
async def query_cq(admin: MQAdmin, args: argparse.Namespace) -> Output:
    """``QueryConsumeQueueCommand``: ``-c`` (10) units of one consume queue from ``-i``, on
    ``-b`` or the master of the topic route's first broker; with ``-g`` the group's
    subscription and filter on that broker too."""
    topic = args.topic.strip()
    queue_id = _int(args.queue, "-q")
    index = _int(args.index, "-i")
    count = _int(args.count, "-c") if args.count is not None else 10
    broker = args.broker.strip() if args.broker is not None else ""
    group = args.consumer.strip() if args.consumer is not None else None
    if not broker:
        route = await admin.topic_route(topic)
        addr = route.broker_datas[0].broker_addrs.get(MixAll.MASTER_ID) if route.broker_datas else None
        if addr is None:
            raise MQClientError("No topic route data!")
        broker = addr
    body = await admin.query_consume_queue(broker, topic, queue_id, index, count, group)
    parts: list[str] = []
    if body.subscription_data is not None:
        parts.append(f"Subscription data: \n{dumps_pretty(body.subscription_data)}\n{_SEP}")
    if body.filter_data is not None:
        parts.append(f"Filter data: \n{body.filter_data}\n{_SEP}")
    parts.append(f"Queue data: \nmax: {body.max_queue_index}, min: {body.min_queue_index}\n{_SEP}")
    for i, unit in enumerate(body.queue_data or (), start=index):
        parts.append(f"idx: {i}\n{unit}\n{_SEP}")
    return Output({"broker": broker, **body.to_json()}, "".join(parts))
