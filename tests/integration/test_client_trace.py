"""Message trace with our producer and push consumer against our broker (traceTopicEnable),
read back by ``mqadmin queryMsgTraceById`` (client/trace, server/broker/topic_config.py)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.client.trace.data import TraceType, decode
from tests.procs import ServerProcess, namesrv_and_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPO = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("trace")
    with namesrv_and_broker(tmp, conf={"traceTopicEnable": "true"}) as servers:
        yield servers


async def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``cond`` (in-memory, cheap) until true; AssertionError after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def mqadmin(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.client.admin.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def trace_records(namesrv: str, msg_id: str, topic: str = "RMQ_SYS_TRACE_TOPIC",
                        want: set[TraceType] | None = None) -> list[tuple[TraceType, str]]:
    """(type, group) of the trace records about ``msg_id``, polled until ``want`` are there."""
    want = want or {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    async with MQAdmin(namesrv) as admin:
        while True:
            found: list[tuple[TraceType, str]] = []
            try:
                msgs = await admin.query_message_by_key(topic, msg_id)
            except Exception:
                msgs = []
            for m in msgs:
                for ctx in decode(m.body.decode()):
                    if ctx.beans[0].msg_id == msg_id:
                        found.append((ctx.trace_type, ctx.group_name))
            if want <= {t for t, _ in found} or loop.time() > deadline:
                return found
            await asyncio.sleep(0.2)


async def test_trace_of_produce_and_consume(servers: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv = servers[0].address
    topic = "TracedTopic"
    async with Producer("PG_traced", namesrv, enable_msg_trace=True) as producer:
        result = await producer.send(Message(topic, b"hello", tags="TagT", keys="order-1"))
        untraced = await producer.send(Message(topic, b"second"))
    assert result.msg_id is not None
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("CG_traced", namesrv, enable_msg_trace=True,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        await wait_until(lambda: len(got) >= 2, 60, "both messages")
        assert {m.body for m in got} == {b"hello", b"second"}
    finally:
        await consumer.shutdown()  # flushes the consumer's trace records
    records = await trace_records(namesrv, result.msg_id)
    assert (TraceType.Pub, "PG_traced") in records
    assert (TraceType.SubBefore, "CG_traced") in records
    assert (TraceType.SubAfter, "CG_traced") in records
    # ... also findable by the message's key
    assert await trace_records(namesrv, untraced.msg_id or "", want={TraceType.Pub})

    code, out, err = await mqadmin("queryMsgTraceById", "-n", namesrv, "-i", result.msg_id)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime",
                                "#CostTimes", "#Status"]
    pub = lines[1].split()
    assert pub[0] == "Pub" and pub[1] == "PG_traced" and pub[-1] == "success"
    assert pub[-2].endswith("ms")
    header = [line.split() for line in lines].index(
        ["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"])
    sub = lines[header + 1].split()
    assert sub[0] == "Sub" and sub[1] == "CG_traced" and sub[-1] == "success"


async def test_custom_trace_topic_and_end_transaction(
        servers: tuple[ServerProcess, ServerProcess]) -> None:
    namesrv = servers[0].address
    producer = TransactionProducer(
        "PG_tx_traced", namesrv, enable_msg_trace=True, trace_topic="MyTraceTopic",
        execute_local_transaction=lambda msg, arg: LocalTransactionState.COMMIT_MESSAGE,
        check_local_transaction=lambda msg: LocalTransactionState.COMMIT_MESSAGE)
    async with producer:
        sent = await producer.send_message_in_transaction(Message("TxTraced", b"tx"))
    msg_id = sent.send_result.msg_id or ""
    records = await trace_records(namesrv, msg_id, "MyTraceTopic",
                                  want={TraceType.Pub, TraceType.EndTransaction})
    assert {t for t, _ in records} >= {TraceType.Pub, TraceType.EndTransaction}
    code, out, _ = await mqadmin("queryMsgTraceById", "-n", namesrv, "-i", msg_id,
                                 "-t", "MyTraceTopic")
    assert code == 0 and "PG_tx_traced" in out
