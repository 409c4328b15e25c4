"""The broker's other features in DLedger mode: one three-node group of ours, our nameserver.

Each test uses the same group (``enablePropertyFilter`` and ``traceTopicEnable`` on):

* consume queues and the index are built from the DLedger log: ``queryMsgByKey`` through
  our admin API finds a message, and a follower serves it to a pull from its own store;
* a transaction message is held as half until committed through our TransactionProducer;
  a rolled-back one is never delivered;
* a delay-level message reaches its topic only after its delay;
* a SQL92 consumer gets only the messages its expression matches;
* message trace: ``queryMsgTraceById`` finds the Pub record of a traced send;
* ``mqadmin clusterList`` shows the group's master (brokerId 0) and its two followers.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from aiorocketmq.client import (
    LocalTransactionState,
    Message,
    MessageExt,
    MessageSelector,
    Producer,
    PullConsumer,
    PullStatus,
    TransactionProducer,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.protocol.bodies import TopicConfig
from aiorocketmq.protocol.codes import ResponseCode
from aiorocketmq.protocol.errors import RocketMQError
from aiorocketmq.protocol.message import decode_messages
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import pull, pull_header
from tests.integration.test_dledger import Node, make_nodes, node_conf
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP = "RaftNode00"
REPO = str(Path(__file__).resolve().parents[2])


class Group:
    def __init__(self, namesrv: ServerProcess, nodes: list[Node]) -> None:
        self.namesrv = namesrv
        self.nodes = nodes

    @property
    def ns(self) -> str:
        return self.namesrv.address


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    tmp: Path = tmp_path_factory.mktemp("dledger-features")
    started: list[ServerProcess] = []
    try:
        ns = namesrv_process(tmp).start()
        started.append(ns)
        nodes = make_nodes()
        for node in nodes:
            conf = node_conf(node, nodes) | {"enablePropertyFilter": "true",
                                             "traceTopicEnable": "true"}
            node.proc = broker_process(tmp, ns.address, name=f"dledger-{node.self_id}",
                                       conf=conf).start()
            started.append(node.proc)
        yield Group(ns, nodes)
    finally:
        for proc in reversed(started):
            proc.stop()
            print(f"---- {proc.log_path} ----\n{proc.log_tail(100)}")


T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    """Await ``check()`` until it returns something truthy (errors count as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got: T | None = await check()
        except RocketMQError:
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.2)


async def registered(admin: MQAdmin) -> dict[int, str]:
    info = await admin.cluster_info()
    bd = info.broker_addr_table.get(GROUP)
    return dict(bd.broker_addrs) if bd is not None else {}


async def roles(admin: MQAdmin) -> tuple[str, list[str]]:
    """(leader address, follower addresses) once a master and two followers are registered."""
    async def full() -> dict[int, str] | None:
        addrs = await registered(admin)
        return addrs if 0 in addrs and len(addrs) == 3 else None
    addrs = await until(full, 60, "a master and two followers")
    return addrs[0], [a for i, a in addrs.items() if i != 0]


async def make_topic(admin: MQAdmin, leader: str, followers: list[str], topic: str,
                     queues: int = 4) -> None:
    await admin.create_topic(leader, TopicConfig(topic, queues, queues))

    async def everywhere() -> bool:
        return all([await admin.topic_config(a, topic) is not None for a in followers])
    await until(everywhere, 30, f"the followers to learn {topic}")


async def read_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4
                     ) -> list[MessageExt]:
    out: list[MessageExt] = []
    for qid in range(queues):
        offset = 0
        while True:
            r = await pull(client, addr, "DLedgerFeatureAudit", topic, qid, offset, max_nums=32)
            if r.code != ResponseCode.SUCCESS:
                break
            out.extend(decode_messages(r.body))
            offset = pull_header(r).next_begin_offset
    return out


async def mqadmin(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.client.admin.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_index_and_follower_pull(group: Group) -> None:
    topic = "DLedgerIndexed"
    async with MQAdmin(group.ns) as admin, Producer("PG_dl_index", group.ns) as producer:
        leader, followers = await roles(admin)
        await make_topic(admin, leader, followers, topic)
        sent = await producer.send(Message(topic, b"indexed", keys="dl-key-1"))

        async def by_key() -> list[MessageExt]:
            return [m for m in await admin.query_message_by_key(topic, "dl-key-1")
                    if m.msg_id == sent.msg_id]
        [found] = await until(by_key, 30, "queryMsgByKey to find the message")
        assert found.body == b"indexed"
        client = RemotingClient()
        try:
            for follower in followers:
                async def served(addr: str = follower) -> list[MessageExt]:
                    return [m for m in await read_topic(client, addr, topic)
                            if m.keys == "dl-key-1"]
                [m] = await until(served, 30, f"{follower} to serve it")
                assert m.body == b"indexed" and m.commit_log_offset == found.commit_log_offset
        finally:
            await client.close()


async def test_transaction_commit_and_rollback(group: Group) -> None:
    topic = "DLedgerTx"
    decided = {b"rollback": LocalTransactionState.ROLLBACK_MESSAGE,
               b"commit": LocalTransactionState.COMMIT_MESSAGE}
    producer = TransactionProducer(
        "PG_dl_tx", group.ns, execute_local_transaction=lambda msg, arg: decided[msg.body],
        check_local_transaction=lambda msg: LocalTransactionState.ROLLBACK_MESSAGE)
    client = RemotingClient()
    async with MQAdmin(group.ns) as admin:
        leader, followers = await roles(admin)
        await make_topic(admin, leader, followers, topic)
        try:
            await producer.start()
            # The half message is stored but not in the topic until the commit.
            for body in decided:
                result = await producer.send_message_in_transaction(Message(topic, body))
                assert result.local_transaction_state is decided[body]

            async def committed() -> list[bytes]:
                return [m.body for m in await read_topic(client, leader, topic)]
            await until(committed, 30, "the committed message")
            # Checked after the commit, which the producer ended after the rollback.
            assert [m.body for m in await read_topic(client, leader, topic)] == [b"commit"]
            for follower in followers:
                async def on_follower(addr: str = follower) -> list[bytes]:
                    return [m.body for m in await read_topic(client, addr, topic)]
                assert await until(on_follower, 30, f"{follower} to serve it") == [b"commit"]
        finally:
            await producer.shutdown()
            await client.close()


async def test_delay_level_message(group: Group) -> None:
    topic = "DLedgerDelay"
    client = RemotingClient()
    async with MQAdmin(group.ns) as admin, Producer("PG_dl_delay", group.ns) as producer:
        leader, followers = await roles(admin)
        await make_topic(admin, leader, followers, topic)
        try:
            msg = Message(topic, b"later", keys="dl-delay")
            msg.delay_time_level = 2  # 5 s
            sent_at_ms = int(time.time() * 1000)
            await producer.send(msg)

            async def delivered() -> list[MessageExt]:
                return await read_topic(client, leader, topic)
            [m] = await until(delivered, 60, "the delayed message")
            assert m.body == b"later"
            assert m.store_timestamp >= sent_at_ms + 5000 - 50, (m.store_timestamp, sent_at_ms)
            assert m.properties.get("DELAY") == "2"
        finally:
            await client.close()


async def test_sql92_consumer(group: Group) -> None:
    topic = "DLedgerSql"
    async with MQAdmin(group.ns) as admin, Producer("PG_dl_sql", group.ns) as producer:
        leader, followers = await roles(admin)
        await make_topic(admin, leader, followers, topic)
        for i in range(6):
            await producer.send(Message(topic, f"m{i}".encode(), properties={"a": str(i)}))
    want = {b"m3", b"m4", b"m5"}
    async with PullConsumer("CG_dl_sql", group.ns) as consumer:
        got: list[bytes] = []
        for mq in await consumer.fetch_subscribe_message_queues(topic):
            offset = 0
            while True:
                result = await consumer.pull(mq, MessageSelector.by_sql("a >= 3"), offset, 32)
                if result.status is not PullStatus.FOUND:
                    assert result.status in (PullStatus.NO_MATCHED_MSG, PullStatus.NO_NEW_MSG)
                    if result.status is PullStatus.NO_NEW_MSG:
                        break
                else:
                    got.extend(m.body for m in result.msg_found_list)
                offset = result.next_begin_offset
        assert sorted(got) == sorted(want)


async def test_message_trace(group: Group) -> None:
    topic = "DLedgerTraced"
    async with MQAdmin(group.ns) as admin:
        leader, followers = await roles(admin)
        await make_topic(admin, leader, followers, topic)
    async with Producer("PG_dl_traced", group.ns, enable_msg_trace=True) as producer:
        sent = await producer.send(Message(topic, b"traced", keys="dl-traced"))
    assert sent.msg_id

    async def pub_line() -> str | None:
        code, out, _ = await mqadmin("queryMsgTraceById", "-n", group.ns, "-i", sent.msg_id or "")
        lines = [line.split() for line in out.splitlines()] if code == 0 else []
        pubs = [ln for ln in lines if ln and ln[0] == "Pub"]
        return " ".join(pubs[0]) if pubs else None
    line = await until(pub_line, 60, "the Pub trace record")
    fields = line.split()
    assert fields[1] == "PG_dl_traced" and fields[-1] == "success", line


async def test_cluster_list_shows_roles(group: Group) -> None:
    async with MQAdmin(group.ns) as admin:
        leader, followers = await roles(admin)
    by_addr = {n.addr: n for n in group.nodes}
    code, out, err = await mqadmin("clusterList", "-n", group.ns)
    assert code == 0, err
    rows = {(f[2], f[3]) for f in (line.split() for line in out.splitlines())
            if len(f) > 3 and f[1] == GROUP}
    want = {("0", leader)} | {(str(by_addr[a].follower_id), a) for a in followers}
    assert rows == want, out


@pytest.mark.spark
async def test_spark_source_reads_the_group(group: Group) -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from aiorocketmq.spark_sink import register

    topic = "DLedgerSpark"
    bodies = [f"s{i}".encode() for i in range(20)]
    async with MQAdmin(group.ns) as admin, Producer("PG_dl_spark", group.ns) as producer:
        leader, followers = await roles(admin)
        await make_topic(admin, leader, followers, topic)
        for body in bodies:
            await producer.send(Message(topic, body))

    def read() -> list[tuple[bytes, str]]:
        # getOrCreate hands back the worker's shared session when a Spark test module ran
        # in this process before (tests/spark/conftest.py): stop only a session made here.
        from pyspark import SparkContext

        made_here = SparkContext._active_spark_context is None
        session = (SparkSession.builder.master("local[2]").appName("aiorocketmq-dledger")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        try:
            session.sparkContext.setLogLevel("ERROR")
            register(session)
            df = session.read.format("rocketmq").option("nameServer", group.ns).option(
                "topic", topic).load()
            return [(bytes(r.body), r.brokerName)
                    for r in df.select("body", "brokerName").collect()]
        finally:
            if made_here:
                session.stop()

    rows = await asyncio.to_thread(read)
    assert sorted(b for b, _ in rows) == sorted(bodies)
    assert {name for _, name in rows} == {GROUP}
