"""A DLedger broker's role follows its Raft role: upstream ``DLedgerRoleChangeHandler``.

Contract (``enableDLegerCommitLog=true``; ``brokerRole`` / ``brokerId`` of the config are
ignored):

* The broker starts as a SLAVE registered with brokerId = the digits of ``dLegerSelfId``
  plus one (``n0`` -> 1), as every candidate and follower is (``change_to_slave``: the
  delay-level delivery and the transaction check stop, the metadata copy from the master
  runs, then the broker registers).
* A member elected leader becomes the master only once its whole log is committed and
  dispatched (``DLedgerMessageStore.leader_ready``, checked every 100 ms, as upstream):
  the next queue offsets are recomputed from the consume queues, the metadata copy stops,
  delivery and transaction check start, and it registers as brokerId 0 with role
  SYNC_MASTER (``change_to_master``). Puts are refused until then.
* Role changes are handled one at a time, in order, on one routine; a newer change
  abandons a leader's wait.
* Timer messages (``timerWheelEnable``): the timer store runs on the master only. A new
  master loads it (``load_as_leader``: the wheel and timer log it kept, brought up to date
  from the timer topic's queue, which every member builds from committed entries; parked
  messages an earlier leader may have put back are looked up before being put back, so
  each is delivered once) and starts it before registering; a master turned slave
  suspends it (routines stopped, files flushed and closed) before anything else.

Upstream: ``broker/dledger/DLedgerRoleChangeHandler.java``, ``BrokerController.changeToSlave``
/ ``changeToMaster`` (rocketmq 4.9.7).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.routine import Routine
from aiorocketmq.server.store.dledger.member_state import Role
from aiorocketmq.server.store.dledger.store import DLedgerMessageStore

if TYPE_CHECKING:
    from .controller import BrokerController

__all__ = ["DLedgerRoleChangeHandler", "LEADER_READY_POLL"]

log = get_logger("aiorocketmq.broker.dledger")

LEADER_READY_POLL = 0.1


class DLedgerRoleChangeHandler:
    """See the module docstring."""

    def __init__(self, broker: BrokerController, store: DLedgerMessageStore) -> None:
        self._b = broker
        self._store = store
        self._events: asyncio.Queue[tuple[int, Role]] = asyncio.Queue()
        self._routine = Routine(self._run, "DLegerRoleChangeHandler")
        self.changes = 0  # role changes completed (observability, tests)

    def start(self) -> None:
        self._routine.start()

    async def stop(self) -> None:
        await self._routine.stop()

    def handle(self, term: int, role: Role) -> None:
        """The store's ``on_role_change`` (called inside a Raft step: only queues it)."""
        self._events.put_nowait((term, role))

    async def _run(self) -> None:
        while True:
            term, role = await self._events.get()
            try:
                await self._handle(term, role)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker.dledger_role_change_failed", term=term, role=role.value)

    async def _handle(self, term: int, role: Role) -> None:
        b = self._b
        if role is Role.CANDIDATE:
            if not b.store_config.is_slave:
                await self.change_to_slave(term, role)
            return
        if role is Role.FOLLOWER:
            await self.change_to_slave(term, role)
            return
        loop = asyncio.get_running_loop()
        began = loop.time()
        store = self._store
        while True:
            node = store.node
            if node is None or not node.is_leader or node.term != term:
                log.info("broker.dledger_leadership_lost_before_ready", term=term)
                return
            if store.leader_ready:
                break
            if not self._events.empty():
                return  # a newer role change comes next
            await asyncio.sleep(LEADER_READY_POLL)
        store.recover_topic_queue_table()
        await self.change_to_master(term, loop.time() - began)

    async def change_to_slave(self, term: int, role: Role) -> None:
        b = self._b
        b.config.broker_id = self._store.follower_broker_id
        b.store_config.broker_role = "SLAVE"
        timer = b.timer
        if timer is not None and timer.running:
            await timer.suspend()
        if b.schedule is not None:
            await b.schedule.stop_delivery()
        if b.transaction_check is not None:
            await b.transaction_check.stop()
        b.slave_sync.start()
        await b.namesrv.register_broker_all()
        self.changes += 1
        log.info("broker.changed_to_slave", broker=b.config.broker_name, broker_id=b.config.broker_id,
                 term=term, dledger_role=role.value)

    async def change_to_master(self, term: int, waited: float) -> None:
        b = self._b
        await b.slave_sync.pause()
        if b.schedule is not None:
            b.schedule.start()
        if b.transaction_check is not None:
            b.transaction_check.start()
        timer = b.timer
        if b.store_config.timer_wheel_enable and timer is not None and not timer.running:
            try:
                timer.load_as_leader()
            except (OSError, ValueError) as exc:
                log.error("broker.timer_load_failed", error=repr(exc))
            else:
                timer.start()
        b.config.broker_id = 0
        b.store_config.broker_role = "SYNC_MASTER"
        await b.namesrv.register_broker_all()
        self.changes += 1
        log.info("broker.changed_to_master", broker=b.config.broker_name, term=term,
                 waited_ms=int(waited * 1000), committed=self._store.dstore.committed_index)
