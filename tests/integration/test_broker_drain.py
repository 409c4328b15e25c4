"""BrokerController.shutdown drains: a SYNC_FLUSH send in flight at shutdown is answered.

In-process nameserver and broker on 127.0.0.1 (port 0) and a raw Channel as the producer.
The store's I/O threads are held busy so the send's group commit cannot complete until
shutdown has begun; the send must still get its SUCCESS answer instead of a closed
connection. Waits are on events, futures, or conditions polled under a deadline.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from aiorocketmq.protocol.message import encode_properties
from aiorocketmq.server.broker.config import load_broker_configs
from aiorocketmq.server.broker.controller import BrokerController
from aiorocketmq.server.namesrv.config import NamesrvConfig
from aiorocketmq.server.namesrv.controller import NamesrvController

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def send_request(topic: str) -> RemotingCommand:
    v1 = SendMessageRequestHeader(
        producer_group="PG_drain", topic=topic, default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=0, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"WAIT": "true"}), reconsume_times=0, batch=False)
    return RemotingCommand.create_request(
        RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(v1).to_ext_fields(),
        b"sent just before shutdown")


async def test_sync_flush_send_in_flight_is_answered_at_shutdown(tmp_path: Path) -> None:
    namesrv = NamesrvController(NamesrvConfig.from_properties({
        "listenPort": "0",
        "kvConfigPath": str(tmp_path / "namesrv" / "kvConfig.json"),
        "configStorePath": str(tmp_path / "namesrv" / "namesrv.properties"),
    }))
    await namesrv.start()
    broker_conf, store_conf = load_broker_configs({
        "brokerName": "broker-drain", "listenPort": "0", "namesrvAddr": namesrv.address,
        "storePathRootDir": str(tmp_path / "store"), "flushDiskType": "SYNC_FLUSH",
        "mappedFileSizeCommitLog": str(1024 * 1024), "syncFlushTimeout": "20000",
    })
    broker = BrokerController(broker_conf, store_conf)
    gate = threading.Event()
    channel: Channel | None = None
    try:
        await broker.start()
        host, port = broker.broker_addr.rsplit(":", 1)
        channel = await Channel.connect(host, int(port), timeout=5)
        # Warm-up: the topic exists and the store has flushed once.
        first = await channel.invoke(send_request("DrainTopic"), timeout=10)
        assert first.code == ResponseCode.SUCCESS

        executor = broker.store._executor
        assert executor is not None
        for _ in range(executor._max_workers):  # no fsync can run until the gate opens
            executor.submit(gate.wait, 60)
        in_flight = asyncio.ensure_future(channel.invoke(send_request("DrainTopic"), timeout=30))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not any(ch.handler_tasks for ch in broker.server.channels):
            assert loop.time() < deadline, "the send never reached its flush wait"
            await asyncio.sleep(0.01)

        stopping = asyncio.ensure_future(broker.shutdown())
        deadline = loop.time() + 20
        while broker.server.is_accepting and not stopping.done():
            await asyncio.sleep(0.01)  # poll: the listener is closed at the start of shutdown
            assert loop.time() < deadline
        with pytest.raises(OSError):
            await asyncio.open_connection(host, int(port))
        gate.set()
        response = await in_flight
        assert response.code == ResponseCode.SUCCESS, response
        assert response.ext_fields and response.ext_fields["queueOffset"] == "1"
        await stopping
    finally:
        gate.set()
        if channel is not None:
            channel.close()
            await channel.wait_closed()
        await broker.shutdown()
        await namesrv.stop()
