"""``TimerMessageStore`` on a real ``MessageStore`` driven by a hand-moved clock: what is parked
and what refused, when it comes back and with which properties, rolls, deletes, messages already
due when read, and restarts, including a process that died between a put back and its mark.

Upstream: ``store/timer/TimerMessageStore.java``, ``broker/util/HookUtils.java``.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.protocol.codes import MessageSysFlag, ResponseCode
from aiorocketmq.protocol.message import MessageExt
from aiorocketmq.server.store.config import MessageStoreConfig
from aiorocketmq.server.store.inner import MessageExtBrokerInner, PutMessageStatus
from aiorocketmq.server.store.message_store import MessageStore
from aiorocketmq.server.store.timer import TIMER_TOPIC, TimerMessageStore, TimerWheel, refusal
from aiorocketmq.server.store.timer.timer_store import LONG_MAX, parse_java_long

T0 = 1_700_000_000_123


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Node:
    """A store and its timer store on one directory, with a shared clock."""

    def __init__(self, root: Path, clock: Clock, **overrides: Any) -> None:
        self.root = root
        self.clock = clock
        self.overrides = overrides
        self.store: MessageStore
        self.timer: TimerMessageStore

    def config(self) -> MessageStoreConfig:
        settings: dict[str, Any] = dict(
            store_path_root_dir=str(self.root), mapped_file_size_commit_log=1 << 20,
            mapped_file_size_consume_queue=20 * 1000, max_hash_slot_num=100, max_index_num=400,
            mapped_file_size_timer_log=64 * 1024, message_delay_level="1s 2s")
        settings.update(self.overrides)
        return MessageStoreConfig(**settings)

    async def open(self) -> Node:
        cfg = self.config()
        self.store = MessageStore(cfg, store_host="127.0.0.1:10911", clock_ms=self.clock)
        await self.store.start()
        self.timer = TimerMessageStore(self.store, cfg)
        self.store.put_message_hooks.append(self.timer.check_and_transform)
        if cfg.timer_wheel_enable:
            self.timer.load()
        return self

    async def close(self, *, crash: bool = False) -> None:
        if crash:
            self.timer.close()  # no final flush: what the mappings hold is all there is
        else:
            await self.timer.shutdown()
        await self.store.shutdown()

    async def put(self, topic: str = "T", queue_id: int = 1, body: bytes = b"b", **props: str
                  ) -> tuple[PutMessageStatus, MessageExtBrokerInner]:
        inner = MessageExtBrokerInner(topic=topic, queue_id=queue_id, body=body,
                                      properties={"UNIQ_KEY": f"U-{body.decode()}", **props},
                                      born_timestamp=self.clock.now)
        result = await self.store.put_message(inner)
        return result.status, inner

    def delivered(self, topic: str = "T", queue_id: int = 1) -> list[MessageExt]:
        cq = self.store.find_consume_queue(topic, queue_id)
        if cq is None:
            return []
        out = []
        for i in range(cq.min_offset, cq.max_offset):
            unit = cq.get_unit(i)
            assert unit is not None
            msg = self.store.look_message_by_offset(unit[0])
            assert msg is not None
            out.append(msg)
        return out

    async def advance(self, to: int, step: int = 100) -> None:
        """Move the clock to ``to`` in steps, running a pass at each (the routine's wake-ups)."""
        while self.clock.now < to:
            self.clock.now = min(self.clock.now + step, to)
            assert await self.timer.run_once()


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n = await Node(tmp_path / "store", Clock()).open()
    yield n
    await n.close()


# -- accepting --------------------------------------------------------------------------


@pytest.mark.parametrize("props, deliver", [
    ({"TIMER_DELAY_SEC": "3"}, T0 + 3000),
    ({"TIMER_DELAY_MS": "2500"}, T0 + 2500),
    ({"TIMER_DELIVER_MS": str(T0 + 4000)}, T0 + 4000),
    ({"TIMER_DELAY_SEC": "2", "TIMER_DELAY_MS": "9000", "TIMER_DELIVER_MS": "1"}, T0 + 2000),
    ({"TIMER_DELAY_MS": "1500", "TIMER_DELIVER_MS": "1"}, T0 + 1500),
])
async def test_timer_message_is_parked_with_its_slot_time(node: Node, props: dict[str, str],
                                                          deliver: int) -> None:
    status, inner = await node.put(**props)
    assert status is PutMessageStatus.PUT_OK
    assert inner.topic == TIMER_TOPIC and inner.queue_id == 0
    p = inner.properties
    assert p["REAL_TOPIC"] == "T" and p["REAL_QID"] == "1"
    assert int(p["TIMER_OUT_MS"]) == (deliver // 1000) * 1000  # floored to the precision
    parked = node.store.look_message_by_offset(inner.commit_log_offset)
    assert parked is not None and parked.topic == TIMER_TOPIC
    assert parked.properties["TIMER_OUT_MS"] == p["TIMER_OUT_MS"]
    assert all(parked.properties[k] == v for k, v in props.items())


@pytest.mark.parametrize("props", [
    {"TIMER_DELAY_SEC": "abc"}, {"TIMER_DELAY_SEC": "1.5"}, {"TIMER_DELAY_MS": " 5"},
    {"TIMER_DELIVER_MS": ""}, {"TIMER_DELAY_SEC": "99999999999999999999"},
    {"TIMER_DELAY_SEC": str(3 * 86400 + 1)}, {"TIMER_DELAY_MS": str(3 * 86400 * 1000 + 1)},
    {"TIMER_DELIVER_MS": str(T0 + 3 * 86400 * 1000 + 1)},
    {"TIMER_DELIVER_MS": str(T0 - 1), "TIMER_DEL_UNIQKEY": "T+U"},
])
async def test_illegal_timer_messages_are_refused(node: Node, props: dict[str, str]) -> None:
    status, inner = await node.put(**props)
    assert status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    assert inner.topic == "T" and node.store.commit_log.max_offset == 0
    code, remark = refusal(status, node.store.config)
    assert code == ResponseCode.MESSAGE_ILLEGAL
    assert remark == ("timer message illegal, the delay time should not be bigger than the max "
                      "delay 259200000ms; or if set del msg, the delay time should be bigger than "
                      "the current time")


async def test_the_max_delay_itself_is_accepted(node: Node) -> None:
    status, inner = await node.put(TIMER_DELAY_SEC=str(3 * 86400))
    assert status is PutMessageStatus.PUT_OK and inner.topic == TIMER_TOPIC


@pytest.mark.parametrize("props", [
    {"TIMER_DELAY_SEC": "0"}, {"TIMER_DELAY_SEC": "-5"}, {"TIMER_DELAY_MS": "0"},
    {"TIMER_DELIVER_MS": str(T0)}, {"TIMER_DELIVER_MS": "1"},
    # Java's int64 arithmetic: sec * 1000 wraps negative, so the time is in the past.
    {"TIMER_DELAY_SEC": str((1 << 63) // 1000 + 1)},
])
async def test_due_already_is_a_plain_message(node: Node, props: dict[str, str]) -> None:
    status, inner = await node.put(**props)
    assert status is PutMessageStatus.PUT_OK
    assert inner.topic == "T" and "TIMER_OUT_MS" not in inner.properties
    [msg] = node.delivered()
    assert all(msg.properties[k] == v for k, v in props.items())


async def test_delay_level_wins_and_timer_properties_go(node: Node) -> None:
    status, inner = await node.put(DELAY="1", TIMER_DELAY_SEC="30", TIMER_DELIVER_MS="5")
    assert status is PutMessageStatus.PUT_OK
    assert inner.topic == "SCHEDULE_TOPIC_XXXX"
    parked = node.store.look_message_by_offset(inner.commit_log_offset)
    assert parked is not None
    assert not any(k.startswith("TIMER_") for k in parked.properties)


async def test_already_timed_half_and_prepared_messages_are_left_alone(node: Node) -> None:
    status, inner = await node.put(TIMER_DELAY_SEC="3", TIMER_OUT_MS="123")
    assert status is PutMessageStatus.PUT_OK and inner.topic == "T"
    status, inner = await node.put(topic="RMQ_SYS_TRANS_HALF_TOPIC", queue_id=0, TIMER_DELAY_SEC="3")
    assert inner.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
    inner = MessageExtBrokerInner(topic="T", queue_id=0, body=b"p",
                                  properties={"TIMER_DELAY_SEC": "3"},
                                  sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    assert node.timer.check_and_transform(inner) is None and inner.topic == "T"
    inner.sys_flag = MessageSysFlag.TRANSACTION_COMMIT_TYPE  # committed: timed
    assert node.timer.check_and_transform(inner) is None and inner.topic == TIMER_TOPIC


async def test_disabled_wheel_refuses_with_upstreams_remark(tmp_path: Path) -> None:
    n = await Node(tmp_path / "off", Clock(), timer_wheel_enable=False).open()
    try:
        status, _ = await n.put(TIMER_DELAY_SEC="3")
        assert status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        assert refusal(status, n.store.config) == (
            ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")
        status, _ = await n.put(body=b"plain")
        assert status is PutMessageStatus.PUT_OK
        assert not (tmp_path / "off" / "timerwheel").exists()
    finally:
        await n.close()


@pytest.mark.parametrize("draw, expected", [
    (999, [True, True, True, False, False, False]),  # between the limits: refused (draw high)
    (0, [True, True, True, True, False, False]),  # ... or let through (draw low); twice: refused
])
async def test_slot_flow_control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 draw: int, expected: list[bool]) -> None:
    monkeypatch.setattr("aiorocketmq.server.store.timer.timer_store.random.randrange",
                        lambda n: draw)
    n = await Node(tmp_path / "fc", Clock(), timer_congest_num_each_slot=2).open()
    try:
        accepted = []
        for i in range(len(expected)):
            status, _ = await n.put(body=f"m{i}".encode(), TIMER_DELAY_SEC="10")
            assert status in (PutMessageStatus.PUT_OK, PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL)
            accepted.append(status is PutMessageStatus.PUT_OK)
            assert await n.timer.run_once()  # enqueue: the slot's count grows
        assert accepted == expected
        code, remark = refusal(PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL, n.store.config)
        assert code == ResponseCode.SYSTEM_ERROR
        assert remark == ("timer message is under flow control, max num limit is 4 or the current "
                          "value is greater than 2 and less than 4, trigger random flow control")
    finally:
        await n.close()


def test_parse_java_long() -> None:
    assert parse_java_long("+12") == 12 and parse_java_long("-3") == -3
    for bad in ("", " 1", "1 ", "1_0", "0x10", "1e3", "٣", str(1 << 63)):
        with pytest.raises(ValueError):
            parse_java_long(bad)


# -- delivery -----------------------------------------------------------------------------


async def test_delivered_on_time_with_upstreams_properties(node: Node) -> None:
    status, parked = await node.put(body=b"one", TIMER_DELAY_SEC="3", TAGS="TagA", KEYS="k1 k2",
                                    color="red")
    assert status is PutMessageStatus.PUT_OK
    deliver = T0 + 3000
    await node.advance(deliver - 1)
    assert node.delivered() == []  # never early
    await node.advance(deliver + 2000)
    [msg] = node.delivered()
    assert deliver <= msg.store_timestamp <= deliver + 1000
    assert msg.topic == "T" and msg.queue_id == 1 and msg.body == b"one"
    assert msg.commit_log_offset != parked.commit_log_offset
    assert msg.born_timestamp == T0 and msg.msg_id == "U-one"
    p = msg.properties
    assert p["TAGS"] == "TagA" and p["KEYS"] == "k1 k2" and p["color"] == "red"
    assert p["TIMER_DELAY_SEC"] == "3" and p["TIMER_OUT_MS"] == str(T0 // 1000 * 1000 + 3000)
    assert p["REAL_TOPIC"] == "T" and p["REAL_QID"] == "1"  # kept, as upstream
    assert p["TIMER_ENQUEUE_MS"] == str(T0 // 1000 * 1000)  # the wheel's write time
    assert int(p["TIMER_DEQUEUE_MS"]) == msg.store_timestamp
    assert "WAIT" not in p
    # Found by key and by its UNIQ_KEY in the real topic.
    found = node.store.query_message("T", "k1", 32, 0, 1 << 62)
    assert len(found.message_buffers) == 1
    found.release()
    assert node.timer.delivered == 1
    await node.advance(deliver + 10_000)
    assert len(node.delivered()) == 1  # once


@pytest.mark.parametrize("precision", [100, 200, 500, 1000])
async def test_never_early_and_within_a_precision(tmp_path: Path, precision: int) -> None:
    n = await Node(tmp_path / f"p{precision}", Clock(), timer_precision_ms=precision).open()
    try:
        wanted = {}
        for i, delay in enumerate((1, 99, 100, 101, 250, 999, 1000, 1001, 2345)):
            body = f"d{i}".encode()
            await n.put(body=body, TIMER_DELAY_MS=str(delay))
            wanted[body] = T0 + delay
        await n.advance(T0 + 5000, step=7)
        got = {m.body: m.store_timestamp for m in n.delivered()}
        assert got.keys() == wanted.keys()
        for body, deliver in wanted.items():
            assert deliver <= got[body] < deliver + precision + 7, (body, deliver, got[body])
    finally:
        await n.close()


async def test_roll_parks_again_beyond_the_window(tmp_path: Path) -> None:
    n = await Node(tmp_path / "roll", Clock(), timer_roll_window_slot=10).open()
    try:
        await n.put(body=b"far", TIMER_DELAY_SEC="25")
        await n.advance(T0 + 24_000, step=500)
        assert n.delivered() == [] and n.timer.rolled >= 2
        await n.advance(T0 + 27_000, step=500)
        [msg] = n.delivered()
        assert T0 + 25_000 <= msg.store_timestamp
        assert int(msg.properties["TIMER_ROLL_TIMES"]) == n.timer.rolled
        assert msg.properties["TIMER_OUT_MS"] == str(T0 // 1000 * 1000 + 25_000)
    finally:
        await n.close()


async def test_delete_message_cancels_its_target(node: Node) -> None:
    deliver = str(T0 + 3000)
    await node.put(body=b"keep", TIMER_DELIVER_MS=deliver)
    await node.put(body=b"gone", TIMER_DELIVER_MS=deliver)
    await node.put(body=b"del", TIMER_DELIVER_MS=deliver, TIMER_DEL_UNIQKEY="T+U-gone")
    await node.advance(T0 + 5000)
    assert [m.body for m in node.delivered()] == [b"keep"]
    assert node.timer.deleted == 1


async def test_a_backlog_already_due_goes_out_at_once(node: Node) -> None:
    await node.put(body=b"late", TIMER_DELAY_SEC="1")
    node.clock.now = T0 + 60_000  # nothing ran meanwhile: read when long due
    assert await node.timer.run_once()
    [msg] = node.delivered()
    assert msg.properties["TIMER_ENQUEUE_MS"] == str(LONG_MAX)
    assert msg.store_timestamp == T0 + 60_000


async def test_committed_transaction_is_timed_from_its_commit(node: Node) -> None:
    inner = MessageExtBrokerInner(topic="T", queue_id=1, body=b"tx",
                                  properties={"TIMER_DELAY_SEC": "2", "UNIQ_KEY": "U-tx"},
                                  sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert (await node.store.put_message(inner)).status is PutMessageStatus.PUT_OK
    await node.advance(T0 + 1900)
    assert node.delivered() == []
    await node.advance(T0 + 4000)
    [msg] = node.delivered()
    assert msg.sys_flag & 0xC == MessageSysFlag.TRANSACTION_COMMIT_TYPE


# -- restarts -----------------------------------------------------------------------------


async def test_pending_timers_survive_a_restart_and_due_ones_come_at_once(tmp_path: Path) -> None:
    clock = Clock()
    n = await Node(tmp_path / "r", clock).open()
    for i in range(20):
        await n.put(body=f"m{i}".encode(), TIMER_DELAY_SEC=str(2 + i))
    await n.advance(T0 + 5500)
    before = {m.body for m in n.delivered()}
    assert before == {b"m0", b"m1", b"m2"}
    await n.close()
    clock.now = T0 + 12_500  # m3..m9 fell due while down
    n = await Node(tmp_path / "r", clock).open()
    try:
        assert await n.timer.run_once()
        after = [m.body for m in n.delivered()]
        assert after == [f"m{i}".encode() for i in range(10)]
        assert all(m.store_timestamp == T0 + 12_500 for m in n.delivered()[3:])
        await n.advance(T0 + 30_000)
        assert sorted(m.body for m in n.delivered()) == sorted(f"m{i}".encode() for i in range(20))
    finally:
        await n.close()


class Died(Exception):
    """The process "died" here."""


async def test_death_between_put_back_and_mark_delivers_once(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    n = await Node(tmp_path / "k", clock).open()
    await n.put(body=b"a", TIMER_DELAY_SEC="2")
    await n.put(body=b"b", TIMER_DELAY_SEC="2")
    assert await n.timer.run_once()
    real = n.timer._record_done
    calls = []

    def die_after_first(kind: int, key: int) -> None:
        calls.append(key)
        if len(calls) == 2:
            raise Died()  # the second put back is in the log; its mark never written
        real(kind, key)

    monkeypatch.setattr(n.timer, "_record_done", die_after_first)
    clock.now = T0 + 3000
    with pytest.raises(Died):
        await n.timer.run_once()
    assert [m.body for m in n.delivered()] == [b"a", b"b"]
    await n.close(crash=True)
    n = await Node(tmp_path / "k", clock).open()
    try:
        assert n.timer.recovered_inflight == 1
        await n.advance(T0 + 6000)
        assert [m.body for m in n.delivered()] == [b"a", b"b"]
    finally:
        await n.close()


async def test_death_between_log_append_and_slot_update_enqueues_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    n = await Node(tmp_path / "e", clock).open()
    await n.put(body=b"a", TIMER_DELAY_SEC="2")
    assert await n.timer.run_once()
    await n.put(body=b"b", TIMER_DELAY_SEC="2")

    def died(*args: object) -> None:
        raise Died()

    monkeypatch.setattr(TimerWheel, "put_slot", died)
    with pytest.raises(Died):
        await n.timer.run_once()
    monkeypatch.undo()
    await n.close(crash=True)
    n = await Node(tmp_path / "e", clock).open()
    try:
        assert n.timer.queue_offset == 2  # moved past the unit the log holds
        await n.advance(T0 + 4000)
        assert [m.body for m in n.delivered()] == [b"a", b"b"]
    finally:
        await n.close()


async def test_death_after_an_immediate_put_back_delivers_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    n = await Node(tmp_path / "x", clock).open()
    await n.put(body=b"late", TIMER_DELAY_SEC="1")
    clock.now = T0 + 9000

    def died(kind: int, key: int) -> None:
        raise Died()

    monkeypatch.setattr(n.timer, "_record_done", died)
    with pytest.raises(Died):
        await n.timer.run_once()
    await n.close(crash=True)
    n = await Node(tmp_path / "x", clock).open()
    try:
        assert n.timer.recovered_inflight == 1 and n.timer.queue_offset == 1
        await n.advance(T0 + 12_000)
        assert [m.body for m in n.delivered()] == [b"late"]
    finally:
        await n.close()


async def test_refused_put_back_is_retried_not_dropped(node: Node,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    await node.put(body=b"r", TIMER_DELAY_SEC="1")
    assert await node.timer.run_once()
    real = node.store.put_message_nowait
    refused = []

    def full_disk(inner: MessageExtBrokerInner) -> Any:
        if inner.topic == "T" and not refused:
            refused.append(inner)
            from aiorocketmq.server.store.inner import PutMessageResult
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        return real(inner)

    monkeypatch.setattr(node.store, "put_message_nowait", full_disk)
    node.clock.now = T0 + 2500
    assert not await node.timer.run_once()  # retry later
    assert node.delivered() == []
    assert await node.timer.run_once()
    assert [m.body for m in node.delivered()] == [b"r"]


async def test_a_store_that_ran_as_a_slave_looks_put_backs_up(tmp_path: Path) -> None:
    """A store that was a master (own timer files), then a slave while another master put
    its timers back, then a master again: its stale timer state does not deliver twice."""
    clock = Clock()
    old, other = tmp_path / "old", tmp_path / "other"
    n = await Node(old, clock).open()
    await n.put(body=b"m0", TIMER_DELAY_SEC="2")
    await n.put(body=b"m1", TIMER_DELAY_SEC="4")
    assert await n.timer.run_once()  # both in this store's wheel
    await n.close()
    shutil.copytree(old, other)
    n = await Node(other, clock).open()  # the other master puts both back
    await n.advance(T0 + 5_000)
    assert [m.body for m in n.delivered()] == [b"m0", b"m1"]
    await n.close()
    # The old store, now its slave, replicates all but the timer files.
    timer_files = {"timerwheel", "timerlog", "timercheck", "timermetrics"}
    shutil.copytree(other, old, dirs_exist_ok=True,
                    ignore=lambda _d, names: [x for x in names if x in timer_files])
    # Started as a slave (the broker loads no timer store then): the timer files it kept
    # from its time as a master go.
    n = await Node(old, clock, broker_role="SLAVE", timer_wheel_enable=False).open()
    await n.close()
    assert not (old / "timerwheel").exists() and not (old / "config" / "timercheck").exists()
    n = await Node(old, clock).open()  # restarted as a master
    try:
        assert n.timer.verify_below == n.store.commit_log.max_offset > 0
        await n.advance(T0 + 8_000)
        assert [m.body for m in n.delivered()] == [b"m0", b"m1"]
        assert n.timer.verified_skips == 2
        assert n.timer.pending_by_topic().get("T", 0) == 0  # counted anew
    finally:
        await n.close()
