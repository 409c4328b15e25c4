"""Timer messages (any delivery time, RocketMQ 5.x's timing wheel) on a real ``mqbroker``.

Our producer sets ``delay_sec`` / ``delay_ms`` / ``deliver_time_ms`` (and, as a 4.9 client
would, the TIMER_* user properties); the broker parks each message on
``rmq_sys_wheel_timer`` and puts it back into its topic and queue when due. Checked: the
answers (SEND_OK, code 13 and code 1 with upstream's remarks), the parked and the delivered
records' properties, never early (a lower bound on the store time; the upper one is the
broker's business, not a wall-clock assertion here), and exactly once across graceful
restarts and SIGKILL with timers pending. Every wait is a long-polling pull or a condition
under a deadline.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import Message, Producer, SendStatus
from aiorocketmq.protocol.bodies import MessageQueue
from aiorocketmq.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import MQBrokerError
from aiorocketmq.protocol.headers import SendMessageResponseHeader
from aiorocketmq.protocol.message import (
    MessageExt,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
)
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, pull, pull_header, send, wait_for_route
from tests.procs import ServerProcess, broker_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

Factory = Callable[[ServerProcess], ServerProcess]
CONF = {"mappedFileSizeTimerLog": str(1024 * 1024), "defaultTopicQueueNums": "4"}
LONG_POLL = PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND
ILLEGAL = ("timer message illegal, the delay time should not be bigger than the max delay "
           "259200000ms; or if set del msg, the delay time should be bigger than the current time")


def start_broker(tmp_path: Path, namesrv: ServerProcess, factory: Factory,
                 name: str = "broker-timer", **conf: str) -> ServerProcess:
    return factory(broker_process(tmp_path, namesrv.address, name=name, conf={**CONF, **conf}))


def now_ms() -> int:
    return int(time.time() * 1000)


async def next_messages(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int,
                        *, within: float = 30.0) -> list[MessageExt]:
    """Long-poll ``topic``/``queue_id`` from ``offset`` until something arrives (deadline)."""
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"nothing arrived in {topic}/{queue_id} from offset {offset}"
        r = await pull(client, addr, "TimerReader", topic, queue_id, offset, sys_flag=LONG_POLL,
                       suspend_ms=int(min(left, 5.0) * 1000), timeout=left + TIMEOUT)
        if r.code == ResponseCode.SUCCESS:
            return decode_messages(r.body, decompress=False)


async def find_delivered(client: RemotingClient, addr: str, topic: str, queue_id: int,
                         uniq: str) -> MessageExt:
    """Long-poll ``topic``/``queue_id`` until the message with UNIQ_KEY ``uniq`` is there."""
    offset = 0
    while True:
        for msg in await next_messages(client, addr, topic, queue_id, offset):
            if msg.properties.get("UNIQ_KEY") == uniq:
                return msg
            offset = msg.queue_offset + 1


async def read_all(client: RemotingClient, addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    out: list[MessageExt] = []
    offset = 0
    while True:
        r = await pull(client, addr, "TimerReader", topic, queue_id, offset)
        if r.code != ResponseCode.SUCCESS:
            return out
        out.extend(decode_messages(r.body, decompress=False))
        offset = pull_header(r).next_begin_offset


async def view(client: RemotingClient, addr: str, offset_msg_id: str) -> MessageExt:
    _, offset = decode_offset_msg_id(offset_msg_id)
    r = await client.invoke(addr, RemotingCommand.create_request(
        RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}), TIMEOUT)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return decode_message(r.body or b"")[0]


def assert_never_early(msg: MessageExt, earliest: int, precision: int = 1000) -> None:
    """Delivered no earlier than asked, nor than one precision after its slot."""
    assert msg.store_timestamp >= earliest, (msg.msg_id, msg.store_timestamp, earliest)
    assert msg.store_timestamp >= int(msg.properties["TIMER_OUT_MS"]) + precision


# -- our producer: the three ways, the parked and the delivered records ------------------


async def test_timer_messages_from_our_producer(tmp_path: Path, namesrv: ServerProcess,
                                                server_factory: Factory,
                                                client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    topic = "TimerT"
    route = await wait_for_route(client, namesrv.address, "rmq_sys_wheel_timer")
    [qd] = route.queue_datas
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (1, 1, 6)
    async with Producer("PG_timer", namesrv.address) as producer:
        await producer.send(Message(topic, b"create"))  # the topic, auto-created
        bname = broker.match.group("name") if broker.match else "broker-timer"
        cases: list[tuple[int, Message, int]] = []
        for qid, (kind, value) in enumerate([("sec", 2), ("ms", 1500), ("at", 2500), ("user", 2)]):
            msg = Message(topic, f"timer-{kind}".encode(), tags="TagT", keys=[f"key-{kind}", "k2"])
            msg.put_user_property("color", "blue")
            start = now_ms()
            if kind == "sec":
                msg.delay_sec = value
            elif kind == "ms":
                msg.delay_ms = value
            elif kind == "at":
                msg.deliver_time_ms = start + value
            else:  # what a 4.9 client does: the property itself
                msg.put_user_property("TIMER_DELAY_SEC", str(value))
            assert msg.delay_sec == (value if kind in ("sec", "user") else 0)
            value_ms = value * 1000 if kind in ("sec", "user") else value
            result = await producer.send(msg, MessageQueue(topic, bname, qid))
            assert result.status is SendStatus.SEND_OK
            assert result.msg_id == msg.properties["UNIQ_KEY"]
            parked = await view(client, addr, result.offset_msg_id or "")
            assert parked.topic == "rmq_sys_wheel_timer" and parked.queue_id == 0
            p = parked.properties
            assert p["REAL_TOPIC"] == topic and p["REAL_QID"] == str(qid)
            out = int(p["TIMER_OUT_MS"])
            assert out % 1000 == 0 and start + value_ms - 1000 <= out < parked.store_timestamp + value_ms
            cases.append((qid, msg, start + value_ms))
    for qid, sent, earliest in cases:
        delivered = await find_delivered(client, addr, topic, qid, sent.properties["UNIQ_KEY"])
        assert_never_early(delivered, earliest)
        assert delivered.topic == topic and delivered.queue_id == qid
        assert delivered.msg_id == sent.properties["UNIQ_KEY"] and delivered.body == sent.body
        p = delivered.properties
        assert p["TAGS"] == "TagT" and p["KEYS"] == sent.keys and p["color"] == "blue"
        for key in ("TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS"):
            assert p.get(key) == sent.properties.get(key)
        assert p["REAL_TOPIC"] == topic and p["REAL_QID"] == str(qid)
        assert int(p["TIMER_ENQUEUE_MS"]) <= int(p["TIMER_DEQUEUE_MS"]) <= delivered.store_timestamp
        assert int(p["TIMER_OUT_MS"]) % 1000 == 0


async def test_answers_and_remarks(tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
                                   client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory)
    addr = broker.address
    topic = "TimerCodes"
    for props in ({"TIMER_DELAY_SEC": "abc"}, {"TIMER_DELAY_MS": "1.5"},
                  {"TIMER_DELAY_SEC": str(259200 + 1)},
                  {"TIMER_DELIVER_MS": str(now_ms() + 259200 * 1000 + 60_000)}):
        r = await send(client, addr, topic, b"x", props=props)
        assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL), props
        assert r.ext_fields is not None and r.ext_fields["MSG_REGION"] == "DefaultRegion"
    # Parked: the answer carries 5.3's recall handle (v1 topic broker TIMER_OUT_MS+1 UNIQ_KEY).
    r = await send(client, addr, topic, b"handle", props={"TIMER_DELAY_SEC": "60", "UNIQ_KEY": "U-h"})
    assert r.code == ResponseCode.SUCCESS and r.ext_fields is not None
    parked = await view(client, addr, SendMessageResponseHeader.from_ext_fields(r.ext_fields).msg_id)
    out = int(parked.properties["TIMER_OUT_MS"])
    assert base64.urlsafe_b64decode(r.ext_fields["recallHandle"]).decode() == \
        f"v1 {topic} broker-timer {out + 1} U-h"
    # Due already: a plain message, in its topic at once, TIMER_* kept, nothing added.
    r = await send(client, addr, topic, b"past", props={"TIMER_DELIVER_MS": "1", "UNIQ_KEY": "U-past"})
    assert r.code == ResponseCode.SUCCESS and "recallHandle" not in (r.ext_fields or {})
    h = SendMessageResponseHeader.from_ext_fields(r.ext_fields)
    [plain] = await next_messages(client, addr, topic, h.queue_id, 0, within=5.0)
    assert plain.properties["TIMER_DELIVER_MS"] == "1" and "TIMER_OUT_MS" not in plain.properties
    # A delay level wins: the TIMER_* properties are removed.
    r = await send(client, addr, topic, b"level", props={"DELAY": "1", "TIMER_DELAY_SEC": "100"})
    assert r.code == ResponseCode.SUCCESS
    parked = await view(client, addr, SendMessageResponseHeader.from_ext_fields(r.ext_fields).msg_id)
    assert parked.topic == "SCHEDULE_TOPIC_XXXX" and "TIMER_DELAY_SEC" not in parked.properties
    # Our producer surfaces code 13 (not retried).
    async with Producer("PG_codes", namesrv.address) as producer:
        msg = Message(topic, b"bad")
        msg.delay_sec = 10 * 86400
        with pytest.raises(MQBrokerError) as info:
            await producer.send(msg)
        assert info.value.code == ResponseCode.MESSAGE_ILLEGAL and ILLEGAL in str(info.value)
        with pytest.raises(Exception, match="not supported for batching"):
            await producer.send([msg, Message(topic, b"other")])


async def test_disabled_wheel_answers_code_1(tmp_path: Path, namesrv: ServerProcess,
                                             server_factory: Factory, client: RemotingClient) -> None:
    broker = start_broker(tmp_path, namesrv, server_factory, name="broker-nowheel",
                          timerWheelEnable="false")
    r = await send(client, broker.address, "TimerOff", b"x", props={"TIMER_DELAY_SEC": "3"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "accurate timer message is not enabled, timerWheelEnable is false")
    r = await send(client, broker.address, "TimerOff", b"y", props={"WAIT": "true"})
    assert r.code == ResponseCode.SUCCESS
    assert not (tmp_path / "broker-nowheel" / "store" / "timerwheel").exists()


# -- restarts: graceful, SIGKILL, exactly once ---------------------------------------------


async def test_restart_and_sigkill_rounds_deliver_each_once(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory,
        client: RemotingClient) -> None:
    name = "broker-timer-r"
    broker = start_broker(tmp_path, namesrv, server_factory, name=name)
    topic = "TimerRestart"
    rng = random.Random(7)
    sent: dict[str, tuple[int, int]] = {}  # UNIQ_KEY -> (queue id, earliest delivery)
    for i in range(240):
        delay = rng.randrange(500, 14_000)
        uniq = f"U{i:05d}"
        qid = i % 4
        born = now_ms()
        r = await send(client, broker.address, topic, f"r{i}".encode(), queue_id=qid,
                       props={"TIMER_DELAY_MS": str(delay), "UNIQ_KEY": uniq, "WAIT": "true"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        sent[uniq] = (qid, born + delay)
    store = tmp_path / name / "store"
    assert (store / "timerwheel").exists() and (store / "config" / "timercheck").exists()
    assert any((store / "timerlog").iterdir())
    rounds = [("graceful", 0.5), ("kill", 2.0), ("graceful", 3.0), ("kill", 1.5), ("kill", 2.5)]
    for how, down in rounds:
        if how == "kill":
            broker.kill()
        else:
            assert broker.stop() == 0
        await asyncio.sleep(down)  # timers fall due while it is down
        broker = start_broker(tmp_path, namesrv, server_factory, name=name)
    deadline = time.monotonic() + 60
    while True:
        got = [m for q in range(4) for m in await read_all(client, broker.address, topic, q)]
        if len(got) >= len(sent) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    by_key: dict[str, list[MessageExt]] = {}
    for m in got:
        by_key.setdefault(m.properties["UNIQ_KEY"], []).append(m)
    lost = sorted(set(sent) - set(by_key))
    twice = sorted(k for k, ms in by_key.items() if len(ms) > 1)
    assert lost == [] and twice == [], (lost, twice)
    for uniq, (qid, earliest) in sent.items():
        [m] = by_key[uniq]
        assert m.queue_id == qid
        assert_never_early(m, earliest)


# -- master/slave -----------------------------------------------------------------------------


async def test_master_times_and_slave_replicates(tmp_path: Path, namesrv: ServerProcess,
                                                 server_factory: Factory,
                                                 client: RemotingClient) -> None:
    from tests.integration.test_ha import ha_conf, send_until_ok, wait_caught_up

    master = start_broker(tmp_path, namesrv, server_factory, name="timer-m",
                          **ha_conf("SYNC_MASTER", 0))
    slave = start_broker(tmp_path, namesrv, server_factory, name="timer-s",
                         **ha_conf("SLAVE", 1))
    topic = "TimerHA"
    await send_until_ok(client, master.address, topic)
    sent = {}
    for i in range(6):
        uniq = f"HA{i}"
        born = now_ms()
        r = await send(client, master.address, topic, f"ha{i}".encode(),
                       props={"TIMER_DELAY_MS": str(1000 + 300 * i), "UNIQ_KEY": uniq, "WAIT": "true"})
        assert r.code == ResponseCode.SUCCESS, r.remark
        sent[uniq] = born + 1000 + 300 * i
    for uniq, earliest in sent.items():
        assert_never_early(await find_delivered(client, master.address, topic, 0, uniq), earliest)
    await wait_caught_up(client, master.address, slave.address)
    # The slave learns the new topic from the master's topics.json (every 10 s); then the
    # delivered records, replicated with the log, are there.
    deadline = time.monotonic() + 30
    while True:
        on_slave = {m.properties.get("UNIQ_KEY") for m in await read_all(client, slave.address, topic, 0)}
        if set(sent) <= on_slave or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert set(sent) <= on_slave
    parked = await read_all(client, slave.address, "rmq_sys_wheel_timer", 0)
    assert {m.properties["UNIQ_KEY"] for m in parked} == set(sent)
    assert not (tmp_path / "timer-s" / "store" / "timerwheel").exists()  # no timer on a slave
    r = await send(client, slave.address, topic, b"to-slave", props={"TIMER_DELAY_SEC": "1"})
    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
