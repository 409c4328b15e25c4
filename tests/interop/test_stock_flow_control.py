"""The send-queue timeout of stock 4.9.7's broker (``BrokerFastFailure``) beside ours.

One scenario for both brokers, ``waitTimeMillsInSendQueue=1``: a burst of sends written on
one connection while the broker is stopped (SIGSTOP), found all at once when it runs again
(SIGCONT). Both answer part of the burst SYSTEM_BUSY with the remark
``[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: Nms,
size of queue: M`` (N >= 1), the rest SUCCESS, and store exactly the SUCCESS ones.

A stock broker with ``sendThreadPoolQueueCapacity=1`` answers such a burst partly with
``[OVERLOAD]system busy, start flow control for a while``: the text our broker answers when
its sends waiting for the store reach the capacity (tests/integration/test_broker_flow_control.py;
ours reaches it only under SYNC_FLUSH or SYNC_MASTER, where sends wait).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_flow_control import (
    burst,
    check_answers,
    create_topic,
    stored_bodies,
)
from tests.interop.stock import JavaServer
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]


async def test_timeout_clean_queue_like_stock(
        tmp_path: Path, stock_namesrv: Callable[..., JavaServer],
        stock_broker: Callable[..., JavaServer], namesrv: ServerProcess,
        server_factory: Callable[[ServerProcess], ServerProcess]) -> None:
    conf = {"waitTimeMillsInSendQueue": "1"}
    stock_ns = stock_namesrv()
    stock = stock_broker(stock_ns.address, conf=conf)
    ours = server_factory(broker_process(tmp_path, namesrv.address, conf=conf))
    client = RemotingClient()
    seen = []
    try:
        for name, broker in (("stock", stock), ("ours", ours)):
            await create_topic(client, broker.address, "FlowTimeout")
            answers = await burst(broker.address, "FlowTimeout", 2000, pause_pid=broker.pid)
            stored = await stored_bodies(client, broker.address, "FlowTimeout")
            counts = check_answers(answers, stored, tags={"TIMEOUT"}, wait_ms=1)
            remarks = [r.remark for _, r in answers if r.remark and r.remark.startswith("[")]
            seen.append(f"{name}: {dict(counts)}, e.g. {remarks[-1:]}")
            assert counts["TIMEOUT"] > 0, seen[-1]
        # Stock's full send queue: the executor's RejectedExecutionException -> [OVERLOAD].
        narrow = stock_broker(stock_ns.address, name="broker-b",
                              conf={"sendThreadPoolQueueCapacity": "1", "sendMessageThreadPoolNums": "1"})
        await create_topic(client, narrow.address, "FlowOverload")
        answers = await burst(narrow.address, "FlowOverload", 2000, pause_pid=narrow.pid)
        stored = await stored_bodies(client, narrow.address, "FlowOverload")
        counts = check_answers(answers, stored, tags={"OVERLOAD", "TIMEOUT"})
        seen.append(f"stock, sendThreadPoolQueueCapacity=1: {dict(counts)}")
        assert counts["OVERLOAD"] > 0, seen[-1]
    finally:
        await client.close()
        print("\n".join(seen))
