"""Master/slave replication against stock Apache RocketMQ 4.9.7, in both directions.

* our master + stock Java slave, and stock Java master + our slave: stock Java producers send
  a mix (three body sizes, batches, delayed, transactional with commits and rollbacks) to the
  master; the slave's commit log becomes byte-identical to the master's (same
  ``mappedFileSizeCommitLog`` on both), its consume queues are byte-identical too, and with the
  master stopped a stock Java push consumer reading only from the slave gets every message.
* SYNC_MASTER with its slave frozen (SIGSTOP) answers FLUSH_SLAVE_TIMEOUT after slaveTimeout,
  and SLAVE_NOT_AVAILABLE once the slave is gone, exactly as the stock broker does.

Sizes are scaled down from the issue's 10k messages so that each test stays well under a
minute on two cores.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.protocol.bodies import SubscriptionGroupConfig, TopicConfigSerializeWrapper
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, send
from tests.integration.test_ha import max_phy
from tests.interop.stock import DriverProcess, JavaServer, free_port, message_key
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SEGMENT = 1024 * 1024
CQ_FILE = 20 * 10000
NAME = "ha-pair"
# 10k messages in all: single sends of three sizes, batches, delayed and transactional ones.
SMALL_COUNT, MEDIUM_COUNT, LARGE_COUNT = 6000, 2000, 400  # body text, 3 KB, 40 KB
BATCH_COUNT = 1500
DELAY_COUNT = 40
TX_COUNT = 40


def role_conf(role: str, broker_id: int) -> dict[str, str]:
    return {"brokerName": NAME, "brokerRole": role, "brokerId": str(broker_id),
            "mappedFileSizeCommitLog": str(SEGMENT), "mappedFileSizeConsumeQueue": str(CQ_FILE),
            "messageDelayLevel": "1s 2s 3s"}


async def wait_slave_attached(client: RemotingClient, master: str, timeout: float = 30) -> None:
    """A SYNC_MASTER answers SLAVE_NOT_AVAILABLE until a slave's HA client has connected
    (the stock HAClient retries every 5 s), then FLUSH_SLAVE_TIMEOUT until it has reported an
    offset (the stock HAClient's first report comes a heartbeat interval, 5 s, after it
    connects)."""
    deadline = time.monotonic() + timeout
    while True:
        r = await send(client, master, "HaProbe", b"probe")
        if r.code == ResponseCode.SUCCESS:
            return
        assert r.code in (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT), \
            (r.code, r.remark)
        assert time.monotonic() < deadline, "no slave attached"
        await asyncio.sleep(0.2)


async def queue_total(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> int:
    total = 0
    for qid in range(queues):
        req = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET,
                                             {"topic": topic, "queueId": str(qid)})
        r = await client.invoke(addr, req, TIMEOUT)
        total += int((r.ext_fields or {}).get("offset", 0)) if r.code == ResponseCode.SUCCESS else 0
    return total


async def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


def produce_mix(java_driver: Callable[..., DriverProcess], namesrv: str) -> None:
    """Stock Java producers, concurrently: topic HaMain gets SMALL_COUNT, MEDIUM_COUNT and
    LARGE_COUNT single sends (text, 3 KB and 40 KB bodies) and BATCH_COUNT in batches of 10;
    HaDelay delayed messages; HaTx transactional ones, half committed, half rolled back."""
    common: dict[str, Any] = dict(namesrv=namesrv, timeout_ms=90000, send_timeout_ms=20000)
    waves = [
        [("produce-sync", dict(topic="HaMain", group="ha-pg1", count=SMALL_COUNT)),
         ("produce-sync", dict(topic="HaMain", group="ha-pg2", count=MEDIUM_COUNT, start=SMALL_COUNT,
                               body_size=3000)),
         ("produce-sync", dict(topic="HaMain", group="ha-pg3", count=LARGE_COUNT,
                               start=SMALL_COUNT + MEDIUM_COUNT,
                               body_size=40000))],
        [("produce-batch", dict(topic="HaMain", group="ha-pg4", count=BATCH_COUNT,
                                start=SMALL_COUNT + MEDIUM_COUNT + LARGE_COUNT,
                                batch_size=10, tags=["TagA", "TagB"])),
         ("produce-delay", dict(topic="HaDelay", group="ha-pg5", count=DELAY_COUNT, delay_level=1)),
         ("transaction", dict(topic="HaTx", group="ha-pg6", count=TX_COUNT,
                              tx_states=["COMMIT_MESSAGE", "ROLLBACK_MESSAGE"], no_wait_checks=True))],
    ]
    for wave in waves:  # three JVMs at a time on two cores
        runs = [java_driver(scenario, **options, **common) for scenario, options in wave]
        for run in runs:
            result = run.wait(120).check()
            assert (result.done or {}).get("notOk", 0) == 0, result.describe()


def tree_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def assert_stores_identical(client: RemotingClient, master: str, slave: str,
                                  master_store: Path, slave_store: Path) -> None:
    for _ in range(3):
        end = await max_phy(client, master)
        await wait_for(lambda end=end: _caught_up(client, master, slave, end), "slave did not catch up")
        m_log, s_log = tree_files(master_store / "commitlog"), tree_files(slave_store / "commitlog")
        if await max_phy(client, master) != end:
            continue  # the master wrote meanwhile (a schedule or check pass): compare again
        assert_same_segments(m_log, s_log, "commit log")
        break
    else:
        pytest.fail("the master kept writing")
    m_cq, s_cq = tree_files(master_store / "consumequeue"), tree_files(slave_store / "consumequeue")
    for topic in ("HaMain", "HaDelay", "HaTx", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"):
        names = [n for n in m_cq if n.startswith(topic + os.sep)]
        assert names, f"no consume queue for {topic} on the master"
        assert_same_segments({n: m_cq[n] for n in names},
                             {n: d for n, d in s_cq.items() if n.startswith(topic + os.sep)},
                             f"{topic} consume queue")


def assert_same_segments(a: dict[str, bytes], b: dict[str, bytes], what: str) -> None:
    """Same bytes in every segment; a segment only one side has must be empty (all zeros):
    the stock store preallocates the next commit-log segment (AllocateMappedFileService)."""
    assert set(a) & set(b), f"no {what} segment in common: {sorted(a)} vs {sorted(b)}"
    for name in sorted(set(a) | set(b)):
        if name in a and name in b:
            assert a[name] == b[name], f"{what} segment {name} differs"
        else:
            data = a.get(name) or b[name]
            assert data.count(0) == len(data), f"{what} segment {name} exists on one side only"


async def _caught_up(client: RemotingClient, master: str, slave: str, end: int) -> bool:
    return await max_phy(client, slave) >= end


async def slave_knows_topic(client: RemotingClient, slave: str, topic: str) -> bool:
    """The slave's SlaveSynchronize copies the master's topics every 10 s; until then it
    answers TOPIC_NOT_EXIST to pulls."""
    r = await client.invoke(slave, RemotingCommand.create_request(RequestCode.GET_ALL_TOPIC_CONFIG), TIMEOUT)
    return topic in TopicConfigSerializeWrapper.decode(r.body or b"").topic_config_table


def consume_from_slave(java_driver: Callable[..., DriverProcess], namesrv: str) -> None:
    total = SMALL_COUNT + MEDIUM_COUNT + LARGE_COUNT + BATCH_COUNT
    result = java_driver("consume-push", namesrv=namesrv, topic="HaMain", group="ha-slave-reader",
                         count=total, timeout_ms=60000).wait(120).check()
    keys = {e["keys"] for e in result.of("received")}
    assert keys == {message_key(i) for i in range(total)}, result.describe()


# AdminBrokerProcessor.validateSlave: what a slave answers to topic and group changes.
SLAVE_REFUSAL = [(ResponseCode.SYSTEM_ERROR,
                  "Can't modify topic or subscription group from slave broker, "
                  "please execute it from master broker.")] * 4


async def slave_admin_answers(client: RemotingClient, slave: str) -> list[tuple[int, str | None]]:
    """Create and delete a topic and a subscription group on a slave; it changes nothing."""
    topic = {"topic": "HaSlaveTopic", "defaultTopic": "TBW102", "readQueueNums": "4",
             "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
             "topicSysFlag": "0", "order": "false"}
    group = SubscriptionGroupConfig(group_name="ha-slave-group").encode()
    requests = [
        RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, topic),
        RemotingCommand.create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "HaMain"}),
        RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group),
        RemotingCommand.create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                       {"groupName": "ha-slave-reader"}),
    ]
    answers = []
    for req in requests:
        r = await client.invoke(slave, req, TIMEOUT)
        answers.append((r.code, r.remark))
    assert not await slave_knows_topic(client, slave, "HaSlaveTopic")
    assert await slave_knows_topic(client, slave, "HaMain")
    return answers


async def test_our_master_and_stock_slave(tmp_path: Path, namesrv: ServerProcess,
                                          server_factory: Callable[[ServerProcess], ServerProcess],
                                          stock_broker: Callable[..., JavaServer],
                                          java_driver: Callable[..., DriverProcess]) -> None:
    # An explicit port: a stock slave calls its master's fast port (listenPort - 2).
    master = server_factory(broker_process(
        tmp_path, namesrv.address, name="ours-master",
        conf=role_conf("SYNC_MASTER", 0) | {"listenPort": str(free_port(offsets=(-2, 0, 1)))}))
    slave = stock_broker(namesrv.address, name="java-slave", conf=role_conf("SLAVE", 1))
    client = RemotingClient()
    try:
        await wait_slave_attached(client, master.address)
        produce_mix(java_driver, namesrv.address)
        await wait_for(lambda: _delivered(client, master.address), "delayed messages not delivered")
        await assert_stores_identical(client, master.address, slave.address,
                                      tmp_path / "ours-master" / "store", slave.home / "store")
        await wait_for(lambda: slave_knows_topic(client, slave.address, "HaMain"),
                       "the slave never copied the topic", timeout=25)
        assert await slave_admin_answers(client, slave.address) == SLAVE_REFUSAL
        assert master.stop() == 0
        consume_from_slave(java_driver, namesrv.address)
    finally:
        await client.close()


async def test_stock_master_and_our_slave(tmp_path: Path, namesrv: ServerProcess,
                                          server_factory: Callable[[ServerProcess], ServerProcess],
                                          stock_broker: Callable[..., JavaServer],
                                          java_driver: Callable[..., DriverProcess]) -> None:
    master = stock_broker(namesrv.address, name="java-master", conf=role_conf("SYNC_MASTER", 0))
    slave = server_factory(broker_process(tmp_path, namesrv.address, name="ours-slave",
                                          conf=role_conf("SLAVE", 1)))
    client = RemotingClient()
    try:
        await wait_slave_attached(client, master.address)
        produce_mix(java_driver, namesrv.address)
        await wait_for(lambda: _delivered(client, master.address), "delayed messages not delivered")
        await assert_stores_identical(client, master.address, slave.address,
                                      master.home / "store", tmp_path / "ours-slave" / "store")
        await wait_for(lambda: slave_knows_topic(client, slave.address, "HaMain"),
                       "the slave never copied the topic", timeout=25)
        assert await slave_admin_answers(client, slave.address) == SLAVE_REFUSAL
        master.stop()  # a JVM exits 143 on SIGTERM
        consume_from_slave(java_driver, namesrv.address)
    finally:
        await client.close()


async def _delivered(client: RemotingClient, master: str) -> bool:
    return (await queue_total(client, master, "HaDelay") >= DELAY_COUNT
            and await queue_total(client, master, "HaTx") >= TX_COUNT // 2)


async def sync_master_answers(client: RemotingClient, master: str, slave: ServerProcess) -> list[tuple[int, str | None]]:
    """What a SYNC_MASTER answers with its slave attached, frozen, then gone."""
    await wait_slave_attached(client, master)
    answers = []
    os.kill(slave.pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        r = await send(client, master, "HaProbe", b"frozen slave")
        waited = time.monotonic() - began
        answers.append((r.code, r.remark))
        assert waited > 2.5, waited  # not answered before slaveTimeout (3 s)
    finally:
        os.kill(slave.pid, signal.SIGCONT)
    slave.stop()
    deadline = time.monotonic() + 15
    while True:
        r = await send(client, master, "HaProbe", b"no slave")
        if r.code != ResponseCode.SUCCESS:
            answers.append((r.code, r.remark))
            break
        assert time.monotonic() < deadline, "the master did not notice its slave left"
        await asyncio.sleep(0.1)
    return answers


async def test_sync_master_without_slave_answers_as_stock(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Callable[[ServerProcess], ServerProcess],
        stock_broker: Callable[..., JavaServer]) -> None:
    client = RemotingClient()
    try:
        stock_master = stock_broker(namesrv.address, name="java-sync", conf=role_conf("SYNC_MASTER", 0)
                                    | {"brokerName": "stock-sync"})
        stock_slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave-of-java",
                                                    conf=role_conf("SLAVE", 1) | {"brokerName": "stock-sync"}))
        stock_answers = await sync_master_answers(client, stock_master.address, stock_slave)
        our_master = server_factory(broker_process(tmp_path, namesrv.address, name="ours-sync",
                                                   conf=role_conf("SYNC_MASTER", 0) | {"brokerName": "our-sync"}))
        our_slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave-of-ours",
                                                  conf=role_conf("SLAVE", 1) | {"brokerName": "our-sync"}))
        our_answers = await sync_master_answers(client, our_master.address, our_slave)
        assert [c for c, _ in stock_answers] == [ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE]
        assert our_answers == stock_answers
    finally:
        await client.close()
