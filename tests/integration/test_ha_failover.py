"""SYNC_MASTER failover: kill -9 the master under concurrent sync sends, a few rounds.

Every send the master answered SEND_OK is readable from the slave (the slave acknowledged
its offset before the answer); a push consumer group keeps consuming from the slave while
the master is down, nothing acknowledged is lost (at-least-once), and it is back on the
master, catching up, after the master restarts on the same store.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConsumer,
    MessageExt,
    PullConsumer,
    PushConsumer,
)
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.message import decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.spark_sink.link import RocketMQLink
from tests.integration.test_broker_send_pull import pull, pull_header, send
from tests.integration.test_ha import GROUP, ha_conf, send_until_ok
from tests.interop.stock import free_port
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(240)

Factory = Callable[[ServerProcess], ServerProcess]
TOPIC = "HaFailover"
QUEUES = 4
ROUNDS = 3
BATCH = 8
CACHED = 2 * BATCH  # the most a queue holds in the consumer: the threshold plus one pull


async def keys_on(client: RemotingClient, addr: str) -> set[str]:
    keys: set[str] = set()
    for qid in range(QUEUES):
        offset = 0
        while True:
            r = await pull(client, addr, "HaAudit", TOPIC, qid, offset)
            if r.code != ResponseCode.SUCCESS:
                break
            keys.update(m.keys or "" for m in decode_messages(r.body))
            offset = pull_header(r).next_begin_offset
    return keys


async def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.05)


async def slave_knows_topic(client: RemotingClient, slave: str) -> None:
    deadline = time.monotonic() + 20
    while (await pull(client, slave, "HaAudit", TOPIC, 0, 0)).code == ResponseCode.TOPIC_NOT_EXIST:
        assert time.monotonic() < deadline, "SlaveSynchronize never copied the topic"
        await asyncio.sleep(0.2)


async def test_kill_9_sync_master_rounds(tmp_path: Path, namesrv: ServerProcess,
                                         server_factory: Factory) -> None:
    # A fixed port, so that the restarted master keeps its HA address (listenPort + 1).
    master_conf = ha_conf("SYNC_MASTER", 0, listenPort=str(free_port(offsets=(-2, 0, 1))))

    def start_master() -> ServerProcess:
        return server_factory(broker_process(tmp_path, namesrv.address, name="master", conf=master_conf))

    master = start_master()
    slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave",
                                          conf=ha_conf("SLAVE", 1)))
    client = RemotingClient()
    received: list[MessageExt] = []
    # Closed shortly before each kill, so that a backlog the consumer has not pulled yet (its
    # flow control holds at most CACHED per queue) is left for it to read from the slave.
    flowing = asyncio.Event()
    flowing.set()

    async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        await flowing.wait()
        received.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("HaFailoverGroup", config=ClientConfig(
                                namesrv_addr=namesrv.address, poll_name_server_interval_ms=500,
                                pull_time_delay_ms_when_exception=300),
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                            pull_batch_size=BATCH, pull_threshold_for_queue=BATCH)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    acked: set[str] = set()
    while_down = 0  # deliveries between a kill and the restart: beyond the cache, from the slave
    rng = random.Random(12)
    try:
        await send_until_ok(client, master.address, TOPIC)
        await slave_knows_topic(client, slave.address)
        await consumer.start()
        for rnd in range(ROUNDS):
            stop = asyncio.Event()

            async def sender(worker: int, rnd: int = rnd, addr: str = master.address,
                             stop: asyncio.Event = stop) -> None:
                i = 0
                while not stop.is_set():
                    key = f"r{rnd}-w{worker}-{i}"
                    i += 1
                    try:
                        r = await send(client, addr, TOPIC, f"body-{key}".encode() * (1 + i % 40),
                                       props={"KEYS": key, "WAIT": "true"}, queue_id=(worker + i) % QUEUES)
                    except RocketMQError:
                        return  # the master is gone
                    if r.code == ResponseCode.SUCCESS:
                        acked.add(key)
                    else:  # only before the slave is back: nothing acknowledged then
                        assert r.code in (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                                          ResponseCode.SYSTEM_BUSY), (r.code, r.remark)

            senders = [asyncio.create_task(sender(w)) for w in range(6)]
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            flowing.clear()
            await asyncio.sleep(0.5)
            master.kill()
            at_kill = len(received)
            stop.set()
            await asyncio.gather(*senders)
            flowing.set()
            assert acked, "no send was acknowledged"

            # Every SEND_OK is on the slave ...
            missing = acked - await keys_on(client, slave.address)
            assert not missing, f"round {rnd}: {len(missing)} acknowledged messages not on the slave"
            # ... and the consumer group gets them from the slave while the master is down.
            await wait_until(lambda: acked <= {m.keys for m in received}, 60,
                             f"round {rnd}: the consumer reading every acknowledged message from the slave")
            while_down += len(received) - at_kill

            master = start_master()
            await send_until_ok(client, master.address, TOPIC)  # the slave is attached again

        assert while_down > ROUNDS * QUEUES * CACHED, f"only {while_down} read while the master was down"
        # Back on the master: new messages reach the group too.
        after = set()
        for i in range(20):
            key = f"after-{i}"
            r = await send(client, master.address, TOPIC, b"after", props={"KEYS": key}, queue_id=i % QUEUES)
            assert r.code == ResponseCode.SUCCESS, r.remark
            after.add(key)
        await wait_until(lambda: (acked | after) <= {m.keys for m in received}, 60,
                         "the consumer catching up on the restarted master")
    finally:
        await consumer.shutdown()
        await client.close()


async def test_pull_lite_pull_and_spark_read_from_the_slave(tmp_path: Path, namesrv: ServerProcess,
                                                           server_factory: Factory) -> None:
    """With the master gone from the route, the pull and lite-pull consumers and the Spark
    source's route view read the slave (findBrokerAddressInSubscribe, any address)."""
    master = server_factory(broker_process(tmp_path, namesrv.address, name="master",
                                           conf=ha_conf("ASYNC_MASTER", 0)))
    slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave",
                                          conf=ha_conf("SLAVE", 1)))
    client = RemotingClient()
    try:
        expected = set()
        for i in range(40):
            r = await send(client, master.address, TOPIC, f"m{i}".encode(), props={"KEYS": f"k{i}"},
                           queue_id=i % QUEUES)
            assert r.code == ResponseCode.SUCCESS
            expected.add(f"k{i}")
        await slave_knows_topic(client, slave.address)
        deadline = time.monotonic() + 20
        while await keys_on(client, slave.address) != expected:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert master.stop() == 0  # unregisters: the route keeps only the slave

        link = RocketMQLink(namesrv.address)
        try:
            view = await link.routes([TOPIC])
            assert view.broker_addrs == {GROUP: slave.address} and not view.missing_brokers
        finally:
            await link.close()

        pc = PullConsumer("HaPullGroup", namesrv.address)
        await pc.start()
        try:
            got = set()
            for mq in await pc.fetch_subscribe_message_queues(TOPIC):
                r = await pc.pull(mq, "*", 0, 32)
                got.update(m.keys for m in r.msg_found_list)
            assert got == expected
        finally:
            await pc.shutdown()

        lite = LitePullConsumer("HaLiteGroup", namesrv.address,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        lite.subscribe(TOPIC, "*")
        await lite.start()
        try:
            seen: set[str] = set()
            deadline = time.monotonic() + 30
            while seen != expected:
                assert time.monotonic() < deadline, f"lite pull got {len(seen)} of {len(expected)}"
                seen.update(m.keys or "" for m in await lite.poll(1.0))
        finally:
            await lite.shutdown()
    finally:
        await client.close()
