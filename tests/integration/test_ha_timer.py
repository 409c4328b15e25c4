"""Timer messages in master/slave mode: the master SIGKILLed, the slave's store restarted as
the master (stock 4.9 has no automatic master/slave failover; an operator does this).

Four timer messages are sent to a SYNC_MASTER: A and B fall due (and are put back) before
the master is killed, C and D after. The slave replicates the parked records and A's and
B's put backs, but keeps no timer state. Restarted as ASYNC_MASTER (brokerId 0) on the
same store, it rebuilds its timer store from ``rmq_sys_wheel_timer``; A and B are found
put back (looked up by UNIQ_KEY in the index) and not delivered again; C and D are
delivered when due: each of the four is in the real topic exactly once, never early.
Before the kill the slave answers its master's timer counts (GET_TIMER_METRICS, copied by
SlaveSynchronize) and the master its checkpoint (GET_TIMER_CHECK_POINT); the new master
counts anew.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path

import pytest

from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.remoting_client import RemotingClient
from tests.integration.test_broker_send_pull import TIMEOUT, send
from tests.integration.test_dledger_timer import wait_keys
from tests.integration.test_ha import Factory, ha_conf, send_until_ok, wait_caught_up
from tests.procs import ServerProcess, broker_process

pytestmark = pytest.mark.timeout(240)

TOPIC = "HaTimerTopic"


async def timer_counts(client: RemotingClient, addr: str) -> dict[str, int]:
    r = await client.invoke(addr, RemotingCommand.create_request(RequestCode.GET_TIMER_METRICS),
                            TIMEOUT)
    assert r.code == ResponseCode.SUCCESS, r.remark
    data = json.loads(r.body or b"{}")
    return {t: int(m["count"]) for t, m in (data.get("timingCount") or {}).items()}


async def test_timer_message_delivered_once_after_slave_restarted_as_master(
        tmp_path: Path, namesrv: ServerProcess, server_factory: Factory) -> None:
    master = server_factory(broker_process(tmp_path, namesrv.address, name="master",
                                           conf=ha_conf("SYNC_MASTER", 0)))
    slave = server_factory(broker_process(tmp_path, namesrv.address, name="slave",
                                          conf=ha_conf("SLAVE", 1)))
    client = RemotingClient()
    try:
        await send_until_ok(client, master.address, "HaTimerProbe")
        now = int(time.time() * 1000)
        due: dict[str, int] = {}
        for key, delay_ms in (("A", 1500), ("B", 3000), ("C", 22000), ("D", 26000)):
            r = await send(client, master.address, TOPIC, f"timer-{key}".encode(), props={
                "TIMER_DELAY_MS": str(delay_ms), "KEYS": key, "UNIQ_KEY": f"HA-TIMER-{key}",
                "WAIT": "true"})
            assert r.code == ResponseCode.SUCCESS, (key, r.code, r.remark)
            due[key] = now + delay_ms
        # A and B put back by the master, and replicated (the slave learns the topic from
        # the master's topic table a few seconds after its start).
        await wait_keys(client, master.address, {"A", "B"}, 30, "A and B on the master", TOPIC)
        await wait_caught_up(client, master.address, slave.address)
        await wait_keys(client, slave.address, {"A", "B"}, 30, "A and B on the slave", TOPIC)
        # The slave copies its master's counts (SlaveSynchronize, every 10 s): C and D wait.
        deadline = time.monotonic() + 30
        while (slave_counts := await timer_counts(client, slave.address)).get(TOPIC) != 2:
            assert time.monotonic() < deadline, slave_counts
            await asyncio.sleep(0.5)
        assert (await timer_counts(client, master.address)).get(TOPIC) == 2
        # GET_TIMER_CHECK_POINT: the master's 56 bytes; a slave keeps none.
        ckpt = await client.invoke(master.address, RemotingCommand.create_request(RequestCode.GET_TIMER_CHECK_POINT), TIMEOUT)
        assert ckpt.code == ResponseCode.SUCCESS and len(ckpt.body or b"") == 56
        read_ms, _pos, queue_offset, master_offset = struct.unpack_from(">4q", ckpt.body or b"")
        assert queue_offset == master_offset == 4
        assert now - 5000 < read_ms <= int(time.time() * 1000)
        r = await client.invoke(slave.address, RemotingCommand.create_request(RequestCode.GET_TIMER_CHECK_POINT), TIMEOUT)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        assert master.proc is not None
        master.proc.kill()
        slave.stop()
        # The operator's failover: the slave's store, restarted as the master.
        new_master = server_factory(broker_process(tmp_path, namesrv.address, name="slave",
                                                   conf=ha_conf("ASYNC_MASTER", 0)))
        msgs = await wait_keys(client, new_master.address, {"A", "B", "C", "D"}, 60,
                               "C and D delivered by the new master", TOPIC)
        # The timer topic's queue is read in order: A and B (due already) were handled,
        # put back again or found, before C and D were even enqueued.
        keys = sorted(m.keys or "" for m in msgs)
        assert keys == ["A", "B", "C", "D"], keys
        for m in msgs:
            assert m.store_timestamp >= int(m.properties["TIMER_OUT_MS"])
            assert "TIMER_DEQUEUE_MS" in m.properties
        assert (await timer_counts(client, new_master.address)).get(TOPIC) == 0  # counted anew
        log_text = (tmp_path / "slave" / "broker.log").read_text()
        assert "store.timer.put_back_found" in log_text
    finally:
        await client.close()
