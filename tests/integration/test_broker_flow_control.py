"""The send path's flow control under overload, on real broker processes (processors/send.py).

* A burst of sends written while the broker is stopped (SIGSTOP) and read at once after
  SIGCONT, with ``waitTimeMillsInSendQueue=1``: the sends whose handler starts 1 ms or more
  after their loop iteration's reads began are answered SYSTEM_BUSY with upstream's
  ``[TIMEOUT_CLEAN_QUEUE]`` remark and are not stored; every other one is stored.
* ``osPageCacheBusyTimeOutMills=0`` (every put counts as a long one): sends read before
  the end of a put are answered ``[PCBUSY_CLEAN_QUEUE]`` and not stored.
* A SYNC_MASTER whose slave is stopped (SIGSTOP), so every stored send waits for an ack:
  at ``sendThreadPoolQueueCapacity`` waiting sends the rest of a flood is answered
  ``[OVERLOAD]`` and not stored, the broker's memory stays flat, and the waiting sends are
  answered SUCCESS once the slave runs again.
* Our producer treats SYSTEM_BUSY as upstream's does: not a retry code, the broker is marked
  faulty, and with the latency fault strategy the next sends go to another broker.

``tests/interop/test_stock_flow_control.py`` runs the first scenario against stock 4.9.7.
"""

# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aiorocketmq.client.producer import Producer
from aiorocketmq.protocol.bodies import KVTable
from aiorocketmq.protocol.channel import Channel
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import SystemBusyError
from aiorocketmq.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from aiorocketmq.protocol.message import Message, decode_messages, encode_properties
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, pull, pull_header, wait_for_route
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(180)

Factory = Callable[[ServerProcess], ServerProcess]

# BrokerFastFailure's remarks (rocketmq-all-4.9.7), and NettyRemotingAbstract's for a full queue.
CLEAN_QUEUE = re.compile(r"\[(TIMEOUT|PCBUSY)_CLEAN_QUEUE\]broker busy, start flow control for a "
                         r"while, period in queue: (\d+)ms, size of queue: (\d+)")
OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"


# -- helpers (also used by tests/interop/test_stock_flow_control.py) -----------------------


def send_request(topic: str, body: bytes, *, queue_id: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="FlowPG", topic=topic, default_topic="TBW102", default_topic_queue_nums=1,
        queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"WAIT": "true"}), reconsume_times=0)
    return RemotingCommand.create_request(
        RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(header).to_ext_fields(), body)


async def create_topic(client: RemotingClient, addr: str, topic: str) -> None:
    """One read and one write queue, so every send of a test goes to queue 0."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    r = await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.UPDATE_AND_CREATE_TOPIC, ext), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS, r.remark


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process ``pid`` is stopped (SIGSTOP) inside the block, continued on the way out."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def burst(addr: str, topic: str, count: int, *, size: int = 200, pause_pid: int | None = None,
                paused: float = 1.0) -> list[tuple[bytes, RemotingCommand]]:
    """``count`` sends pipelined on one connection without waiting for answers; with
    ``pause_pid`` the broker is stopped while they are written and for ``paused`` seconds
    more, so it finds the whole burst waiting when it runs again. Each body with its answer."""
    host, port = addr.rsplit(":", 1)
    channel = await Channel.connect(host, int(port))
    try:
        bodies = [f"{topic}-{i:06d}-".encode().ljust(size, b"x") for i in range(count)]
        futures: list[asyncio.Future[RemotingCommand]] = []

        async def write_all() -> None:
            for body in bodies:
                futures.append(await channel.invoke_async(send_request(topic, body), 60.0))

        if pause_pid is None:
            await write_all()
        else:
            with stopped(pause_pid):
                await write_all()
                await asyncio.sleep(paused)
        return list(zip(bodies, await asyncio.gather(*futures), strict=True))
    finally:
        channel.close()
        await channel.wait_closed()


async def stored_bodies(client: RemotingClient, addr: str, topic: str) -> list[bytes]:
    """Every body stored in queue 0 of ``topic``, in queue order."""
    bodies: list[bytes] = []
    offset = 0
    while True:
        r = await pull(client, addr, "FlowCheckGroup", topic, 0, offset, max_nums=32)
        if r.code != ResponseCode.SUCCESS:
            assert r.code == ResponseCode.PULL_NOT_FOUND, (r.code, r.remark)
            return bodies
        bodies += [m.body for m in decode_messages(r.body or b"")]
        offset = pull_header(r).next_begin_offset


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.GET_BROKER_RUNTIME_INFO),
                            TIMEOUT)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return KVTable.decode(r.body or b"").table


def check_answers(answers: list[tuple[bytes, RemotingCommand]], stored: list[bytes], *,
                  tags: set[str], wait_ms: int = 0) -> Counter[str]:
    """Each answer SUCCESS or SYSTEM_BUSY with upstream's remark for one of ``tags``
    (``TIMEOUT``, ``PCBUSY``: the clean-queue remarks, period >= ``wait_ms``; ``OVERLOAD``),
    and the stored bodies are exactly the SUCCESS ones. Counts by tag and ``SUCCESS``."""
    counts: Counter[str] = Counter()
    ok: set[bytes] = set()
    for body, r in answers:
        if r.code == ResponseCode.SUCCESS:
            ok.add(body)
            counts["SUCCESS"] += 1
            continue
        assert r.code == ResponseCode.SYSTEM_BUSY, (r.code, r.remark)
        assert not (r.ext_fields or {}).get("msgId"), r.ext_fields
        if r.remark == OVERLOAD:
            tag = "OVERLOAD"
        else:
            m = CLEAN_QUEUE.fullmatch(r.remark or "")
            assert m, r.remark
            tag = m.group(1)
            assert int(m.group(2)) >= wait_ms, r.remark
        assert tag in tags, r.remark
        counts[tag] += 1
    assert len(stored) == len(set(stored)), "a body stored twice"
    assert set(stored) == ok, (f"{len(set(stored) - ok)} stored but not answered SUCCESS, "
                               f"{len(ok - set(stored))} answered SUCCESS but not stored")
    return counts


def rss_anon_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError(f"no RssAnon in /proc/{pid}/status")


# -- the tests ------------------------------------------------------------------------------


async def test_sends_queued_past_wait_time_are_refused_and_not_stored(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = server_factory(broker_process(tmp_path, namesrv.address,
                                           conf={"waitTimeMillsInSendQueue": "1"}))
    await create_topic(client, broker.address, "FlowTimeout")
    answers = await burst(broker.address, "FlowTimeout", 800, pause_pid=broker.pid)
    stored = await stored_bodies(client, broker.address, "FlowTimeout")
    counts = check_answers(answers, stored, tags={"TIMEOUT"}, wait_ms=1)
    assert counts["TIMEOUT"] > 0, "no send of the burst waited 1 ms"
    print(f"{counts['SUCCESS']} stored, {counts['TIMEOUT']} refused [TIMEOUT_CLEAN_QUEUE]")
    # The knob is live (UPDATE_BROKER_CONFIG): at 60 s nothing of a burst waits that long.
    update = RemotingCommand.create_request(RequestCode.UPDATE_BROKER_CONFIG, None,
                                            b"waitTimeMillsInSendQueue=60000\n")
    assert (await client.invoke(broker.address, update, TIMEOUT)).code == ResponseCode.SUCCESS
    answers = await burst(broker.address, "FlowTimeout", 300)
    assert {r.code for _, r in answers} == {ResponseCode.SUCCESS}


async def test_sends_read_before_a_long_put_ended_are_refused_pcbusy(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    broker = server_factory(broker_process(tmp_path, namesrv.address, conf={
        "osPageCacheBusyTimeOutMills": "0", "waitTimeMillsInSendQueue": "60000"}))
    await create_topic(client, broker.address, "FlowPcBusy")
    answers = await burst(broker.address, "FlowPcBusy", 300, pause_pid=broker.pid, paused=0.2)
    stored = await stored_bodies(client, broker.address, "FlowPcBusy")
    counts = check_answers(answers, stored, tags={"PCBUSY"})
    # Each loop iteration's reads store their first send only: it ends a "long" put.
    assert counts["SUCCESS"] > 0 and counts["PCBUSY"] > 0, counts


async def test_flood_while_slave_stalls_is_bounded_by_queue_capacity(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    capacity = 16
    common = {"brokerName": "broker-fc", "haSendHeartbeatInterval": "1000"}
    master = server_factory(broker_process(tmp_path, namesrv.address, name="master", conf={
        **common, "brokerRole": "SYNC_MASTER", "brokerId": "0", "slaveTimeout": "60000",
        "waitTimeMillsInSendQueue": "60000", "sendThreadPoolQueueCapacity": str(capacity)}))
    slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave", conf={
        **common, "brokerRole": "SLAVE", "brokerId": "1"}))
    await create_topic(client, master.address, "FlowFlood")
    while True:  # SLAVE_NOT_AVAILABLE until the slave has attached
        probe = await client.invoke(master.address, send_request("FlowFlood", b"probe"), TIMEOUT)
        if probe.code == ResponseCode.SUCCESS:
            break
        assert probe.code == ResponseCode.SLAVE_NOT_AVAILABLE, (probe.code, probe.remark)
        await asyncio.sleep(0.1)
    info = await runtime_info(client, master.address)
    assert info["sendThreadPoolQueueCapacity"] == str(capacity)
    assert info["sendThreadPoolQueueSize"] == "0"
    before = rss_anon_kib(master.pid)
    size, count = 32 * 1024, 3000  # ~94 MiB of bodies
    bodies = [f"flood-{i:06d}-".encode().ljust(size, b"f") for i in range(count)]
    host, port = master.address.rsplit(":", 1)
    channel = await Channel.connect(host, int(port))
    try:
        answered = 0
        refusals_answered = asyncio.Event()

        def on_answer(_: object) -> None:
            nonlocal answered
            answered += 1
            if answered == count - capacity:
                refusals_answered.set()

        with stopped(slave.pid):
            futures = []
            for body in bodies:
                futures.append(await channel.invoke_async(send_request("FlowFlood", body), 120.0))
                futures[-1].add_done_callback(on_answer)
            # Every send beyond the capacity is refused at once; the others wait for the
            # slave (60 s, slaveTimeout: unbounded, they would all have waited that long).
            await refusals_answered.wait()
            waiting = {b for b, f in zip(bodies, futures, strict=True) if not f.done()}
            assert len(waiting) == capacity
            info = await runtime_info(client, master.address)
            assert info["sendThreadPoolQueueSize"] == str(capacity)
            grown_mib = (rss_anon_kib(master.pid) - before) / 1024
        # The slave runs again: the waiting sends are acknowledged and answered SUCCESS.
        answers = list(zip(bodies, await asyncio.gather(*futures), strict=True))
    finally:
        channel.close()
        await channel.wait_closed()
    stored = [b for b in await stored_bodies(client, master.address, "FlowFlood") if b != b"probe"]
    counts = check_answers(answers, stored, tags={"OVERLOAD"})
    assert counts == {"SUCCESS": capacity, "OVERLOAD": count - capacity}
    assert {b for b, r in answers if r.code == ResponseCode.SUCCESS} == waiting
    print(f"master RssAnon grew {grown_mib:.1f} MiB over a flood of {size * count >> 20} MiB")
    assert grown_mib < 32, f"the master holds {grown_mib:.1f} MiB more after the flood"
    assert (await runtime_info(client, master.address))["sendThreadPoolQueueSize"] == "0"


async def test_producer_treats_system_busy_as_upstream(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    busy = server_factory(broker_process(tmp_path, namesrv.address, name="broker-busy",
                                         conf={"waitTimeMillsInSendQueue": "0"}))
    calm = server_factory(broker_process(tmp_path, namesrv.address, name="broker-calm"))
    for broker in (busy, calm):
        await create_topic(client, broker.address, "FlowRetry")
    while True:  # both brokers in the route
        if len((await wait_for_route(client, namesrv.address, "FlowRetry")).broker_datas) == 2:
            break
        await asyncio.sleep(0.1)
    producer = Producer("FlowRetryPG", namesrv_addr=namesrv.address, send_latency_fault_enable=True)
    await producer.start()
    try:
        # waitTimeMillsInSendQueue=0: broker-busy refuses every send. Upstream's producer
        # does not retry SYSTEM_BUSY (DefaultMQProducer.retryResponseCodes): it raises at
        # once, and marks the broker faulty, so that later sends go to the other one.
        refusals = 0
        for i in range(8):
            try:
                result = await producer.send(Message("FlowRetry", f"m{i}".encode()))
            except SystemBusyError as exc:
                refusals += 1
                assert CLEAN_QUEUE.fullmatch(exc.remark or ""), exc.remark
                assert exc.addr == busy.address
                break
            assert result.message_queue.broker_name == "broker-calm"
        assert refusals == 1
        for i in range(20):
            result = await producer.send(Message("FlowRetry", f"after{i}".encode()))
            assert result.message_queue.broker_name == "broker-calm"
    finally:
        await producer.shutdown()
